/*
 * assistant_routes.c — the assistant pack's route handlers in a turn
 * (see handlers.h): which turns a handler answers and the tool it runs;
 * assistant_answers.c writes the answer. Everything here is deterministic
 * and runs without a model.
 *
 *   command              close (stop/end/quit/exit: a closing line and
 *                        result.closing), reset (result.reset: the
 *                        client starts a new conversation), doctor (counts of the personal
 *                        facts and the run memory, duplicates, the last
 *                        decisions), help, unknown commands
 *   local_memory_intent  personal_parse → recall_memory | remember_fact |
 *                        forget_fact, each under the registry, pack and
 *                        role checks; a refusal names its reason
 *   conversion_tool      convert_units on the message
 *
 * websearch runs on the pack's `web` path like any path's tool;
 * route_compose_web (assistant_answers.c) writes its answer.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/utf8.h"
#include "pipeline/turn.h"

int route_wanted(const struct turn *t)
{
    enum policy_route r = t->decision.route;

    return t->pl->handlers && (r == POLICY_ROUTE_COMMAND || r == POLICY_ROUTE_LOCAL_MEMORY ||
                               r == POLICY_ROUTE_CONVERSION);
}

void route_redecide(struct turn *t)
{
    struct policy_decision raw;

    if (!t->pl->handlers || t->kind != TURN_NEW_QUESTION ||
        t->decision.route == POLICY_ROUTE_CONVERSION ||
        (t->effective_len == t->req->message_len &&
         !memcmp(t->effective, t->req->message, t->effective_len)))
        return;
    policy_decide(t->pl->policy, &t->pctx, t->req->message, t->req->message_len, &raw);
    if (raw.route == POLICY_ROUTE_CONVERSION)
        t->decision = raw;
}

static int oom(struct keel_error *err)
{
    return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
}

/* ---- resolve ------------------------------------------------------------------ */

/* Runs registry tool `name` with `args` (stolen) when the pack lists it
 * and the role may call it; else route_result says why. A tool's refusal
 * of its arguments is reported the same way; store failures fail the
 * turn. */
static int run_tool(struct turn *t, const char *name, json_t *args, struct keel_error *err)
{
    const struct tool_def *tool = tools_find(name);
    int index = pack_tool_index(t->pl->pack, name, strlen(name));
    struct tool_env env;
    struct keel_error terr;
    json_t *out = NULL;
    int rc;

    if (!args)
        return oom(err);
    if (!tool || index < 0 || !pack_role_may_call(t->pl->pack, t->role, index)) {
        const char *why = !tool || index < 0 ? "unavailable" : "forbidden";
        t->route_result = json_pack("{s:s, s:s, s:s, s:s}", "status", why, "tool", name, "role",
                                    t->pl->pack->roles[t->role].name, "access",
                                    tool && tool->access & PACK_WRITE ? "write" : "read");
        json_decref(args);
        if (!t->route_result ||
            turn_emit(t, "info", "resolve.unavailable", json_pack("{s:s, s:s}", "tool", name,
                                                                  "status", why),
                      "%s: %s for role %s", name, why, t->pl->pack->roles[t->role].name))
            return oom(err);
        return KEEL_OK;
    }
    if (turn_emit(t, "info", "resolve.search", json_pack("{s:s, s:O}", "tool", name, "args", args),
                  "calling %s", name) ||
        json_array_append_new(t->tools_called, json_string(name)) ||
        json_object_set(t->tool_args, name, args)) {
        json_decref(args);
        return oom(err);
    }
    turn_tool_env(t, &env);
    keel_error_clear(&terr);
    rc = tools_run(tool, &env, args, &out, &terr);
    json_decref(args);
    if (rc == KEEL_EINVAL) {   /* the tool refused what it was given: say so */
        t->route_result = json_pack("{s:s, s:s, s:s}", "status", "invalid", "tool", name,
                                    "reason", terr.message);
        return t->route_result ? KEEL_OK : oom(err);
    }
    if (rc) {
        *err = terr;
        return rc;
    }
    t->route_tool = tool->name;
    t->route_result = out;
    if (t->decision.force_tool == index)
        t->forced_tool_ran = 1;
    if (turn_emit(t, "info", "resolve.done",
                  json_pack("{s:s, s:O?}", "tool", name, "status",
                            json_object_get(out, "status")),
                  "%s: %s", name,
                  json_string_value(json_object_get(out, "status")) ?: "done"))
        return oom(err);
    return KEEL_OK;
}

/* The report of "memory doctor": the user's facts and duplicates, all
 * users' counts, the run memory's decisions. */
static int doctor(struct turn *t, struct keel_error *err)
{
    json_t *facts = NULL, *stats = NULL, *decisions = NULL, *dups, *counts, *last;
    size_t i, k;
    json_t *f, *g, *d;
    int rc;

    if ((rc = store_personal_list(t->pl->store, t->user, &facts, err)) ||
        (rc = store_personal_stats(t->pl->store, &stats, err)) ||
        (rc = store_memory_decisions(t->pl->store,
                                     t->req->owner && *t->req->owner ? t->req->owner : NULL,
                                     STORE_LIMIT_MAX, 0, &decisions, err))) {
        json_decref(facts);
        json_decref(stats);
        return rc;
    }
    dups = json_array();
    counts = json_pack("{s:i, s:i, s:i, s:i}", "ADD", 0, "NOT", 0, "REPLACE", 0, "MERGE", 0);
    last = json_array();
    /* The same value under two keys (case aside) is a duplicate. */
    json_array_foreach(facts, i, f)
        for (k = i + 1; dups && k < json_array_size(facts); k++) {
            g = json_array_get(facts, k);
            if (!strcasecmp(json_string_value(json_object_get(f, "value")),
                            json_string_value(json_object_get(g, "value"))))
                json_array_append_new(dups, json_pack("{s:O, s:[O, O]}", "value",
                                                      json_object_get(f, "value"), "keys",
                                                      json_object_get(f, "key"),
                                                      json_object_get(g, "key")));
        }
    json_array_foreach(decisions, i, d) {
        const char *what = json_string_value(json_object_get(d, "decision"));
        json_t *c = counts ? json_object_get(counts, what ? what : "") : NULL;
        if (c)
            json_integer_set(c, json_integer_value(c) + 1);
        if (i < 3 && last)
            json_array_append(last, d);
    }
    t->route_result = json_pack("{s:s, s:s, s:o, s:o, s:o, s:{s:b, s:I, s:o, s:o}}", "command",
                                "doctor", "user", t->user, "facts", facts, "duplicates",
                                dups ? dups : json_null(), "all", stats, "memory", "on",
                                t->pl->memory != NULL, "decisions",
                                (json_int_t)json_array_size(decisions), "counts",
                                counts ? counts : json_null(), "last", last ? last : json_null());
    json_decref(decisions);
    return t->route_result ? KEEL_OK : oom(err);
}

static int command(struct turn *t, struct keel_error *err)
{
    int which = handlers_command(t->pl->handlers, t->req->message, t->req->message_len);
    char name[64];
    size_t i = 0, k = 0;

    if (which == 'd')
        return doctor(t, err);
    if (which == 'c')
        t->closing = 1;
    if (which == 'r')
        t->reset = 1;
    /* The command's first word, for the answer to an unknown one. */
    while (i < t->req->message_len && (isspace((unsigned char)t->req->message[i]) ||
                                       t->req->message[i] == '/'))
        i++;
    while (i < t->req->message_len && k + 1 < sizeof(name) &&
           !isspace((unsigned char)t->req->message[i]))
        name[k++] = t->req->message[i++];
    name[utf8_valid_prefix(name, k)] = '\0';
    t->route_result = json_pack("{s:s, s:s}", "command",
                                which == 'c'   ? "close"
                                : which == 'h' ? "help"
                                : which == 'r' ? "reset"
                                               : "unknown",
                                "name", name);
    if (!t->route_result ||
        turn_emit(t, "info", "resolve.command", json_incref(t->route_result), "command %s",
                  json_string_value(json_object_get(t->route_result, "command"))))
        return oom(err);
    return KEEL_OK;
}

static int personal(struct turn *t, struct keel_error *err)
{
    struct personal_request req;

    personal_parse(&t->pl->handlers->personal, t->req->message, t->req->message_len, &req);
    switch (req.op) {
    case PERSONAL_GET:
        return run_tool(t, "recall_memory", json_pack("{s:s}", "key", req.key), err);
    case PERSONAL_LIST:
        return run_tool(t, "recall_memory", json_object(), err);
    case PERSONAL_SET:
        return run_tool(t, "remember_fact", json_pack("{s:s, s:s}", "key", req.key, "value",
                                                      req.value), err);
    case PERSONAL_NOTE:
        return run_tool(t, "remember_fact", json_pack("{s:s, s:s, s:s}", "key", req.key,
                                                      "value", req.value, "kind", "note"), err);
    case PERSONAL_FORGET:
        return run_tool(t, "forget_fact", json_pack("{s:s}", "key", req.key), err);
    case PERSONAL_REFUSE:
        t->route_result = json_pack("{s:s, s:s}", "status", "refused", "reason", req.reason);
        break;
    case PERSONAL_NONE:
        t->route_result = json_pack("{s:s}", "status", "not_understood");
        break;
    }
    if (!t->route_result ||
        turn_emit(t, "info", "resolve.personal", json_incref(t->route_result), "personal: %s",
                  json_string_value(json_object_get(t->route_result, "status"))))
        return oom(err);
    return KEEL_OK;
}

int route_resolve(struct turn *t, struct keel_error *err)
{
    size_t n;

    switch (t->decision.route) {
    case POLICY_ROUTE_COMMAND:
        return command(t, err);
    case POLICY_ROUTE_LOCAL_MEMORY:
        return personal(t, err);
    case POLICY_ROUTE_CONVERSION:
        n = utf8_valid_prefix(t->req->message, t->req->message_len < TOOL_QUERY_MAX
                                                   ? t->req->message_len : TOOL_QUERY_MAX);
        return run_tool(t, "convert_units", json_pack("{s:s#}", "query", t->req->message, (int)n),
                        err);
    default:
        return KEEL_OK;
    }
}
