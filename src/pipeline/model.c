/*
 * model.c — the model's part of a turn, under the policy's control.
 *
 * The model proposes; code disposes. Before the policy's tools run
 * (model_propose), the model is offered the tools the turn's role may
 * call — only those — and every call it proposes is vetted:
 *
 *   refused    not a tool of the pack, or one the role may not call
 *              (a viewer's write): logged, never run
 *   invalid    arguments that are not JSON or break the tool's schema:
 *              logged with the reason, never run
 *   governed   a tool the policy runs this turn itself (its forced
 *              search, a path's tool): it runs once, with the policy's
 *              arguments; the log keeps the model's next to them
 *   ran        any other allowed call: run with the model's arguments;
 *              its result goes into the answer's prompt
 *
 * Whatever the model says — text only, a clarifying question, another
 * tool first — the policy's forced tool still runs (stage_resolve.c);
 * when the model did not call it, the answer opens with the pack's
 * forced_tool line ("Searching for papers now…").
 *
 * Then (model_compose) the model phrases the answer from the results,
 * streamed token by token. Any failure — the server down, slow, rate
 * limited past its retries, a reply that is not the API's JSON, a stream
 * cut off — leaves the extractive answer with a notice: the turn still
 * completes and is stored, and the decision log says what happened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/log.h"
#include "core/utf8.h"
#include "pipeline/turn.h"

#define PROPOSAL_TEXT_MAX 4000   /* bytes of the proposal's text kept in the log */

static int oom(struct keel_error *err)
{
    return keel_error_set(err, KEEL_ENOMEM, "model", "out of memory");
}

json_t *model_log(struct turn *t)
{
    if (!t->model_log)
        t->model_log = json_pack("{s:s, s:[], s:b}", "model", llm_get_conf(t->pl->llm)->model,
                                 "tool_calls", "forced_after_model", 0);
    return t->model_log;
}

static const char *message(const struct turn *t, const char *key, const char *fallback)
{
    return config_message(&t->pl->cfg, key, fallback);
}

/* The model could not be used: a user-level event and the log. */
/* The server refused this request (400, 404, 422: a parameter it does
 * not take, an unknown model): it is up, and a request without tools may
 * still work. */
static int refused_request(const struct llm_reply *reply)
{
    return reply->http_status >= 400 && reply->http_status < 500 && reply->http_status != 429;
}

static int failed(struct turn *t, const char *part, const char *key,
                  const struct keel_error *why, const struct llm_reply *reply)
{
    json_t *log = model_log(t);
    int refused = refused_request(reply) && !strcmp(part, "proposal");

    t->model_failed |= !refused;   /* a refused proposal: the answer is still asked for */
    keel_log(KEEL_LOG_WARN, "model.failed",
             json_pack("{s:s, s:s, s:s, s:i, s:I}", "correlation_id", t->correlation_id, "call",
                       part, "reason", why->message, "attempts", reply->attempts, "http_status",
                       (json_int_t)reply->http_status));
    if (!log || json_object_set_new(log, part,
                                    json_pack("{s:s, s:s, s:i, s:I, s:I}", "status", "failed",
                                              "reason", why->message, "attempts",
                                              reply->attempts, "http_status",
                                              (json_int_t)reply->http_status, "ms",
                                              (json_int_t)reply->elapsed_ms)))
        return KEEL_ENOMEM;
    return turn_emit(t, "error", refused ? NULL : key, json_pack("{s:s}", "reason", why->message),
                     "the model failed: %s", why->message);
}

/* The policy runs `name` itself this turn: its forced tool, or the tool
 * of a path a pending subquestion takes. */
static int governed(const struct turn *t, const char *name)
{
    const struct policy_decision *d = &t->decision;

    if (d->force_tool >= 0 && !strcmp(t->pl->pack->tools[d->force_tool].name, name))
        return 1;
    for (int i = 0; i < t->state.blueprint.n_subs; i++) {
        const struct config_path *p = &t->pl->cfg.paths[t->state.blueprint.subs[i].path];
        if (t->state.blueprint.subs[i].status == SUB_PENDING && p->tool && !strcmp(p->tool, name))
            return 1;
    }
    return 0;
}

/* Runs an allowed call with the model's arguments. */
static int run_call(struct turn *t, const struct tool_def *tool, const char *id, json_t *args,
                    json_t *entry)
{
    struct tool_env env;
    struct keel_error terr;
    json_t *out = NULL;

    turn_tool_env(t, &env);
    keel_error_clear(&terr);
    if (tools_run(tool, &env, args, &out, &terr)) {
        json_object_set_new(entry, "verdict", json_string("failed"));
        json_object_set_new(entry, "reason", json_string(terr.message));
        return KEEL_OK;
    }
    if ((!t->model_runs && !(t->model_runs = json_array())) ||
        json_array_append_new(t->model_runs, json_pack("{s:s, s:s, s:O, s:o}", "id", id, "name",
                                                       tool->name, "arguments", args, "result",
                                                       out)) ||
        json_array_append_new(t->tools_called, json_string(tool->name)))
        return KEEL_ENOMEM;
    json_object_set_new(entry, "verdict", json_string("ran"));
    return KEEL_OK;
}

/* Vets one proposed call {id, name, arguments} into a log entry. */
static int vet(struct turn *t, const json_t *call, json_t *calls_log)
{
    const char *id = json_string_value(json_object_get(call, "id"));
    const char *name = json_string_value(json_object_get(call, "name"));
    const char *text = json_string_value(json_object_get(call, "arguments"));
    const struct pack *pack = t->pl->pack;
    const struct tool_def *tool = tools_find(name);
    int index = pack_tool_index(pack, name, strlen(name));
    json_t *entry = json_pack("{s:s, s:s}", "id", id, "name", name), *args = NULL;
    struct keel_error aerr;
    const char *verdict = NULL;
    char reason[KEEL_ERROR_MESSAGE_MAX + KEEL_ERROR_FIELD_MAX + 8] = "";
    int rc = KEEL_OK;

    if (!entry || json_array_append_new(calls_log, entry))
        return KEEL_ENOMEM;
    keel_error_clear(&aerr);
    if (!text || !*text)
        text = "{}";
    if (keel_json_parse(text, strlen(text), LLM_ARGS_MAX, "arguments", &args, &aerr)) {
        json_object_set_new(entry, "proposed", json_string(text));
    } else {
        json_object_set(entry, "proposed", args);
    }
    if (index < 0 || !tool) {
        verdict = "refused";
        snprintf(reason, sizeof(reason), "%s is not a tool keel offers in pack %s", name,
                 pack->name);
    } else if (!pack_role_may_call(pack, t->role, index)) {
        verdict = "refused";
        snprintf(reason, sizeof(reason), "role %s may not call %s (%s access)",
                 pack->roles[t->role].name, name,
                 pack->tools[index].access & PACK_WRITE ? "write" : "read");
    } else if (aerr.code) {
        verdict = "invalid";
        snprintf(reason, sizeof(reason), "the arguments are not JSON: %s", aerr.message);
    } else if (tools_check_args(tool, args, &aerr)) {
        verdict = "invalid";
        snprintf(reason, sizeof(reason), "%s %s", aerr.field, aerr.message);
    } else if (governed(t, name)) {
        verdict = "governed";
        snprintf(reason, sizeof(reason), "the policy runs %s with its own arguments", name);
    }
    if (verdict) {
        json_object_set_new(entry, "verdict", json_string(verdict));
        json_object_set_new(entry, "reason", json_string(reason));
        if (strcmp(verdict, "governed"))
            keel_log(KEEL_LOG_WARN, "model.tool_call_rejected",
                     json_pack("{s:s, s:s, s:s, s:s, s:s}", "correlation_id", t->correlation_id,
                               "tool", name, "role", pack->roles[t->role].name, "verdict",
                               verdict, "reason", reason));
    } else {
        rc = run_call(t, tool, id, args, entry);
    }
    json_decref(args);
    if (!rc && turn_emit(t, "info", "resolve.model_call", json_deep_copy(entry),
                         "the model called %s: %s", name,
                         json_string_value(json_object_get(entry, "verdict"))))
        rc = KEEL_ENOMEM;
    return rc;
}

int model_propose(struct turn *t, struct keel_error *err)
{
    struct llm_reply reply;
    struct keel_error lerr;
    json_t *log, *tools, *messages, *body, *call, *names;
    size_t i;
    int rc;

    if (!t->pl->llm)
        return KEEL_OK;
    if (!(log = model_log(t)))
        return oom(err);
    if (t->model_failed)   /* the planner found the server down */
        return json_object_set_new(log, "proposal",
                                   json_pack("{s:s, s:s}", "status", "skipped", "reason",
                                             "the model failed earlier in this turn"))
                   ? oom(err) : KEEL_OK;
    if (t->no_tools)
        return json_object_set_new(log, "proposal",
                                   json_pack("{s:s, s:s}", "status", "skipped", "reason",
                                             "the policy runs no tool this turn"))
                   ? oom(err) : KEEL_OK;
    if (!(tools = prompt_tools(t)))
        return oom(err);
    if (!json_array_size(tools)) {
        json_decref(tools);
        return json_object_set_new(log, "proposal",
                                   json_pack("{s:s, s:s}", "status", "skipped", "reason",
                                             "the role may call no tool"))
                   ? oom(err) : KEEL_OK;
    }
    if (!(messages = prompt_messages(t, 0, err))) {
        json_decref(tools);
        return err->code;
    }
    names = json_array();
    json_array_foreach(tools, i, call)
        json_array_append(names, json_object_get(json_object_get(call, "function"), "name"));
    body = json_pack("{s:o, s:o, s:s}", "messages", messages, "tools", tools, "tool_choice",
                     "auto");
    if (!body || !names ||
        turn_emit(t, "info", "resolve.model", json_pack("{s:O}", "tools_offered", names),
                  "asking the model which tools to call (%zu offered)", json_array_size(names))) {
        json_decref(body);
        json_decref(names);
        return oom(err);
    }
    llm_reply_init(&reply);
    keel_error_clear(&lerr);
    if (llm_chat(t->pl->llm, body, NULL, NULL, &reply, &lerr)) {
        rc = failed(t, "proposal", "resolve.model_failed", &lerr, &reply) ? oom(err) : KEEL_OK;
        json_object_set(json_object_get(log, "proposal"), "tools_offered", names);
        goto out;
    }
    rc = KEEL_OK;
    if (reply.text.len && !(t->proposal_text = keel_strndup(reply.text.data, reply.text.len)))
        rc = oom(err);
    if (!rc && json_object_set_new(log, "proposal",
                                   json_pack("{s:s, s:s#, s:O, s:i, s:I, s:s}", "status", "ok",
                                             "text", reply.text.data,
                                             (int)utf8_valid_prefix(
                                                 reply.text.data,
                                                 reply.text.len < PROPOSAL_TEXT_MAX
                                                     ? reply.text.len : PROPOSAL_TEXT_MAX),
                                             "tools_offered", names, "attempts", reply.attempts,
                                             "ms", (json_int_t)reply.elapsed_ms, "finish_reason",
                                             reply.finish_reason)))
        rc = oom(err);
    json_array_foreach(reply.tool_calls, i, call)
        if (!rc && vet(t, call, json_object_get(log, "tool_calls")))
            rc = oom(err);
out:
    llm_reply_release(&reply);
    json_decref(body);
    json_decref(names);
    return rc;
}

int model_settle(struct turn *t, struct keel_error *err)
{
    const struct policy_decision *d = &t->decision;
    const char *forced = d->force_tool >= 0 ? t->pl->pack->tools[d->force_tool].name : NULL;
    json_t *calls, *entry;
    int called_forced = 0, others = 0;
    size_t i;

    if (!t->pl->llm || !t->model_log || t->model_failed ||
        !json_object_get(json_object_get(t->model_log, "proposal"), "text"))
        return KEEL_OK;   /* no proposal was made or it failed */
    calls = json_object_get(t->model_log, "tool_calls");
    json_array_foreach(calls, i, entry) {
        const char *name = json_string_value(json_object_get(entry, "name"));
        const char *verdict = json_string_value(json_object_get(entry, "verdict"));
        if (!strcmp(verdict, "governed")) {
            json_t *final = json_object_get(t->tool_args, name);
            if (json_object_set(entry, "final", final ? final : json_null()))
                return oom(err);
        }
        if (forced && !strcmp(name, forced) && strcmp(verdict, "refused") &&
            strcmp(verdict, "invalid"))
            called_forced = 1;
        else
            others++;
    }
    if (!forced || !t->forced_tool_ran || called_forced)
        return KEEL_OK;
    t->forced_prefix = 1;
    if (json_object_set_new(t->model_log, "forced_after_model", json_true()) ||
        json_object_set_new(t->model_log, "forced_reason",
                            json_string(others ? "the model called other tools, not the "
                                                 "policy's"
                                        : t->proposal_text ? "the model answered with text only"
                                                           : "the model made no valid call")))
        return oom(err);
    return turn_emit(t, "info", NULL, NULL, "the policy ran %s: the model did not call it",
                     forced)
               ? oom(err) : KEEL_OK;
}

/* ---- the answer -------------------------------------------------------------- */

struct writing {
    struct turn *t;
    int sent;          /* bytes passed to on_token */
    int too_big;
};

static void pass(struct writing *w, const char *text, size_t n)
{
    if (keel_buf_add(&w->t->answer, text, n)) {
        w->too_big = 1;
        return;
    }
    if (w->t->req->on_token) {
        w->t->req->on_token(w->t->req->token_ctx, text, n);
        w->sent = 1;
    }
}

static void on_token(void *ctx, const char *text, size_t n)
{
    pass(ctx, text, n);
}

/* Appends "\n\n" and `text` when they fit; an answer at its cap goes
 * out without (it is not worth failing the turn over). */
static void add_notice(struct turn *t, struct keel_buf *b, const char *text)
{
    size_t len = b->len;

    (void)t;
    if (keel_buf_addf(b, "\n\n%s", text))
        keel_buf_truncate(b, len);
}

/* Says in `b` (the extractive answer) that the model failed. A reply keel
 * wrote for want of a model (the pack's `conversation`, `smalltalk`,
 * `veto` …: "No language model is configured …") would contradict the
 * configured one: when the pack has a message `<key>_model_failed` for it
 * ("The language model did not answer, so I can't hold an open
 * conversation right now …"), that message is the whole answer. Any other
 * answer keeps its text, with the closing notice `model_unavailable`. */
static int say_model_failed(struct turn *t, struct keel_buf *b)
{
    if (t->answer_key) {
        char key[64];
        const char *own = config_message(&t->pl->cfg, t->answer_key, NULL), *failed;
        snprintf(key, sizeof(key), "%s_model_failed", t->answer_key);
        failed = config_message(&t->pl->cfg, key, NULL);
        if (own && failed && b->len == strlen(own) && !memcmp(b->data, own, b->len)) {
            keel_buf_reset(b);
            return keel_buf_adds(b, failed) ? KEEL_ENOMEM : KEEL_OK;
        }
    }
    add_notice(t, b, message(t, "model_unavailable",
                             "Note: the language model did not answer, so this answer is "
                             "taken directly from the sources."));
    return KEEL_OK;
}

/* The extractive answer stays, with a closing notice. */
static int keep_extractive(struct turn *t, struct keel_buf *extractive)
{
    keel_buf_reset(&t->answer);
    if (keel_buf_add(&t->answer, extractive->data, extractive->len))
        return KEEL_ENOMEM;   /* it fitted before: memory */
    return say_model_failed(t, &t->answer);
}

static int set_answer_log(struct turn *t, const char *status, const char *source,
                          const struct llm_reply *reply)
{
    return json_object_set_new(model_log(t), "answer",
                               json_pack("{s:s, s:s, s:b, s:i, s:I}", "status", status, "from",
                                         source, "streamed", t->streamed, "attempts",
                                         reply ? reply->attempts : 0, "ms",
                                         (json_int_t)(reply ? reply->elapsed_ms : 0)));
}

/* Whether `text` cites one of the turn's sources as "[n]". */
static int cites_a_source(const struct turn *t, const char *text)
{
    size_t n = json_array_size(t->sources);

    for (const char *p = strchr(text, '['); p; p = strchr(p + 1, '[')) {
        char *end;
        long k = strtol(p + 1, &end, 10);
        if (end > p + 1 && *end == ']' && k >= 1 && (size_t)k <= n)
            return 1;
    }
    return 0;
}

static int has_tool_calls(const json_t *messages)
{
    const json_t *m;
    size_t i;

    json_array_foreach(messages, i, m)
        if (json_object_get(m, "tool_calls"))
            return 1;
    return 0;
}

/* Asks the model to write the answer from the results, streaming. */
static int phrase(struct turn *t, struct keel_buf *extractive, struct keel_error *err)
{
    struct writing w = {t, 0, 0};
    struct llm_reply reply;
    struct keel_error lerr;
    json_t *messages = prompt_messages(t, 1, err), *body, *tools;
    int rc = KEEL_OK;

    if (!messages)
        return err->code;
    if (!(body = json_pack("{s:o}", "messages", messages)) || !(tools = prompt_tools(t))) {
        json_decref(body);
        return oom(err);
    }
    /* The results come as tool messages; some servers take those only
     * with the tools declared, so they are, with none to be called. */
    if (json_array_size(tools) && has_tool_calls(messages)) {
        json_object_set(body, "tools", tools);
        json_object_set_new(body, "tool_choice", json_string("none"));
    }
    json_decref(tools);
    keel_buf_reset(&t->answer);
    if (t->forced_prefix) {
        const char *line = message(t, "forced_tool", "Searching now\u2026");
        pass(&w, line, strlen(line));
        pass(&w, "\n\n", 2);
    }
    llm_reply_init(&reply);
    keel_error_clear(&lerr);
    if (turn_emit(t, "info", "compose.model", NULL, "the model writes the answer")) {
        rc = oom(err);
    } else if (llm_chat(t->pl->llm, body, on_token, &w, &reply, &lerr) || w.too_big ||
               !reply.text.len) {
        if (!lerr.code)
            keel_error_set(&lerr, KEEL_EIO, "llm",
                           w.too_big ? "the answer is longer than keel keeps"
                                     : "the model answered with tool calls, not text");
        if (w.sent && t->req->on_token)
            t->req->on_token(t->req->token_ctx, NULL, 0);   /* void what was streamed */
        if (failed(t, "answer", "compose.model_failed", &lerr, &reply) ||
            keep_extractive(t, extractive) || set_answer_log(t, "failed", "extractive", &reply) ||
            json_object_set_new(json_object_get(t->model_log, "answer"), "reason",
                                json_string(lerr.message)))
            rc = oom(err);
    } else {
        size_t before = t->answer.len;
        int uncited = t->forced_tool_ran && json_array_size(t->sources) &&
                      !cites_a_source(t, t->answer.data + before - reply.text.len);
        /* The policy's search found sources and the model's text names
         * none of them (it asked a question, or talked past them): the
         * results are shown all the same. */
        if (uncited) {
            size_t len = t->answer.len;
            if (keel_buf_add(&t->answer, "\n\n", 2) ||
                keel_buf_add(&t->answer, extractive->data, extractive->len)) {
                keel_buf_truncate(&t->answer, len);
                uncited = 0;   /* they do not fit: the sources list them */
            }
        }
        /* What a path cannot answer is said in the pack's words, never
         * the model's. */
        for (int i = 0; i < t->state.blueprint.n_subs; i++) {
            const struct config_path *p = &t->pl->cfg.paths[t->state.blueprint.subs[i].path];
            const char *text = p->unavailable ? p->unavailable
                                              : message(t, "unavailable",
                                                        "I can't answer that here.");
            if (t->results[i].unavailable && !strstr(t->answer.data, text))
                add_notice(t, &t->answer, text);
        }
        if (!uncited && t->provider_reports)
            compose_providers_note(t, &t->answer);
        if (t->answer.len > before && t->req->on_token)
            t->req->on_token(t->req->token_ctx, t->answer.data + before, t->answer.len - before);
        t->streamed = t->req->on_token != NULL;
        if (set_answer_log(t, "ok", "model", &reply) ||
            (uncited && json_object_set_new(json_object_get(t->model_log, "answer"),
                                            "extractive_appended",
                                            json_string("the model cited none of the sources "
                                                        "the policy's search found"))))
            rc = oom(err);
    }
    llm_reply_release(&reply);
    json_decref(body);
    return rc;
}

int model_compose(struct turn *t, struct keel_error *err)
{
    struct keel_buf extractive;
    int ran = t->model_runs != NULL, unavailable = 0, rc;

    if (!t->pl->llm)
        return KEEL_OK;
    if (!model_log(t))
        return oom(err);
    if (t->decision.route == POLICY_ROUTE_COMMAND || t->routed)   /* keel's own answer */
        return set_answer_log(t, "skipped", "keel", NULL) ? oom(err) : KEEL_OK;
    if (t->model_failed)   /* the proposal failed: no second wait for the same server */
        return say_model_failed(t, &t->answer) || set_answer_log(t, "failed", "extractive", NULL)
                   ? oom(err) : KEEL_OK;
    for (int i = 0; i < t->state.blueprint.n_subs; i++) {
        const json_t *web = t->results[i].outcome;
        ran |= t->results[i].ran;
        unavailable |= t->results[i].unavailable;
        /* A web search that is not configured or failed is said in
         * keel's words: the model would answer from its own knowledge. */
        if (web && (!json_is_true(json_object_get(web, "configured")) ||
                    json_is_true(json_object_get(web, "failed"))))
            return set_answer_log(t, "skipped", "keel", NULL) ? oom(err) : KEEL_OK;
    }
    if (!ran && unavailable) {
        /* Nothing was found and a path said it cannot answer: that is
         * the answer, in the pack's words. */
        return set_answer_log(t, "skipped", "keel", NULL) ? oom(err) : KEEL_OK;
    }
    if (!ran && t->proposal_text && !t->forced_prefix) {
        /* Nothing ran: the proposal's text is the model's answer. */
        keel_buf_reset(&t->answer);
        return keel_buf_adds(&t->answer, t->proposal_text) ||
                       set_answer_log(t, "ok", "proposal", NULL)
                   ? oom(err) : KEEL_OK;
    }
    extractive = t->answer;   /* moved: kept for a failure */
    keel_buf_init(&t->answer, extractive.max);
    rc = phrase(t, &extractive, err);
    keel_buf_release(&extractive);
    return rc;
}
