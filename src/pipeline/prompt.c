/*
 * prompt.c — what a model is sent, in an order that keeps the start of
 * every request the same (so servers can cache it):
 *
 *   1. one system message: the pack's static system prompt
 *      (llm.system_prompt, else a default: tone and citation rules,
 *      never routing rules — the policy owns those), then a block with
 *      this turn's live state: research stage, topic and question,
 *      jurisdiction, the filters the policy set, the active scenario
 *      (scenario_turn_prompt), the parts of the question keel cannot
 *      answer here;
 *   3. earlier turns, newest kept first, within llm.history_tokens
 *      (about four bytes a token);
 *   4. the user's message;
 *   5. when asked, the tool calls that ran (keel's, with the policy's
 *      arguments, and the model's own) and their results, each source
 *      numbered as the answer cites it.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "pipeline/turn.h"

#define RESULT_TEXT_MAX 1500       /* bytes of a passage or abstract shown to the model */
#define RUN_RESULT_MAX (16u << 10) /* bytes of a tool result shown to the model */

static const char default_prompt[] =
    "You are a careful assistant. Answer the user's message from the tool results you are "
    "given, and cite each source by its number in brackets, like [1]. When the results do not "
    "answer the question, say so plainly instead of guessing. Keep answers short and concrete.";

json_t *prompt_tools(const struct turn *t)
{
    const struct pack *pack = t->pl->pack;
    json_t *out = json_array();

    for (size_t i = 0; out && i < pack->n_tools; i++) {
        const struct tool_def *tool = tools_find(pack->tools[i].name);
        if (!tool || !pack_role_may_call(pack, t->role, (int)i))
            continue;
        if (json_array_append_new(out, tools_schema_json(tool))) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static int add_message(json_t *messages, const char *role, const char *text, size_t n)
{
    return json_array_append_new(messages, json_pack("{s:s, s:s#}", "role", role, "content", text,
                                                     (int)n));
}

static int state_block(struct turn *t, int results, struct keel_buf *b)
{
    const struct thread_state *st = &t->state;
    const struct pipeline_config *cfg = &t->pl->cfg;
    const struct policy_decision *d = &t->decision;
    int rc = keel_buf_addf(b, "Conversation state (turn %d):\nResearch stage: %s.", t->seq,
                           st->stage);
    int any = 0;

    if (!rc && st->research_topic[0])
        rc = keel_buf_addf(b, "\nResearch topic: %s.", st->research_topic);
    if (!rc && st->research_question[0])
        rc = keel_buf_addf(b, "\nResearch question: %s.", st->research_question);
    for (int s = 0; s < cfg->n_slots && !rc; s++)
        if (st->slots[s][0]) {
            rc = keel_buf_addf(b, "%s %s %s", any ? "," : "\nJurisdiction:", cfg->slots[s].name,
                               st->slots[s]);
            any = 1;
        }
    if (!rc && any)
        rc = keel_buf_addc(b, '.');
    if (!rc && d->has_search && d->force_tool >= 0) {
        rc = keel_buf_addf(b, "\nThe search the policy runs: %s, query \"%.*s\", %d results",
                           t->pl->pack->tools[d->force_tool].name, (int)d->search.query_len,
                           d->search.query, d->search.count);
        if (!rc && d->search.year_from && d->search.year_to)
            rc = keel_buf_addf(b, ", years %d to %d", d->search.year_from, d->search.year_to);
        else if (!rc && d->search.year_from)
            rc = keel_buf_addf(b, ", from %d on", d->search.year_from);
        else if (!rc && d->search.year_to)
            rc = keel_buf_addf(b, ", up to %d", d->search.year_to);
        if (!rc && d->search.open_access_only)
            rc = keel_buf_adds(b, ", open access only");
        if (!rc)
            rc = keel_buf_addc(b, '.');
    }
    if (!rc)
        rc = scenario_turn_prompt(t, b);
    for (int i = 0; results && !rc && i < st->blueprint.n_subs; i++)
        if (t->results[i].unavailable) {
            const char *text = cfg->paths[st->blueprint.subs[i].path].unavailable;
            rc = keel_buf_addf(b, "\nNot answerable here: \"%s\" (%s) Say so.",
                               st->blueprint.subs[i].text, text ? text : "no capability");
        }
    return rc;
}

/* Earlier turns, oldest first, the newest that fit the budget. */
static int add_history(struct turn *t, json_t *messages, struct keel_error *err)
{
    size_t budget = (size_t)llm_get_conf(t->pl->llm)->history_tokens * 4, used = 0;
    json_t *turns = NULL, *turn;
    size_t first, i;
    int rc;

    if (t->seq <= 1 || !budget)
        return KEEL_OK;
    if ((rc = store_list_turns(t->pl->store, t->conversation_id, &turns, err)))
        return rc;
    for (first = json_array_size(turns); first > 0; first--) {
        turn = json_array_get(turns, first - 1);
        size_t n = strlen(json_string_value(json_object_get(turn, "user")) ?: "") +
                   strlen(json_string_value(json_object_get(turn, "assistant")) ?: "");
        if (used + n > budget)
            break;
        used += n;
    }
    for (i = first; i < json_array_size(turns) && !rc; i++) {
        turn = json_array_get(turns, i);
        const char *user = json_string_value(json_object_get(turn, "user"));
        const char *assistant = json_string_value(json_object_get(turn, "assistant"));
        if ((user && *user && add_message(messages, "user", user, strlen(user))) ||
            (assistant && *assistant &&
             add_message(messages, "assistant", assistant, strlen(assistant))))
            rc = keel_error_set(err, KEEL_ENOMEM, "prompt", "out of memory");
    }
    json_decref(turns);
    return rc;
}

/* The source number the answer gives `item` (matched by id or
 * document id), or 0 when it is not cited. */
static int cited_as(const struct turn *t, const json_t *item)
{
    const json_t *s;
    size_t i;

    json_array_foreach(t->sources, i, s) {
        const json_t *id = json_object_get(item, "id"), *doc = json_object_get(item, "document_id");
        if ((id && json_equal(id, json_object_get(s, "id"))) ||
            (doc && json_equal(doc, json_object_get(s, "document_id"))))
            return (int)json_integer_value(json_object_get(s, "n"));
    }
    return 0;
}

static json_t *cut(const char *text)
{
    size_t n = text ? strlen(text) : 0;

    if (n > RESULT_TEXT_MAX) {
        n = RESULT_TEXT_MAX;
        while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
            n--;   /* not inside a UTF-8 character */
    }
    return text ? json_stringn(text, n) : json_null();
}

/* Search results as the model reads them, each item with the number
 * the answer cites it by. keel's own results show the items its answer
 * cites (`add` 0); a model's own search adds its items to the sources
 * (`add` 1), so its "[n]" points at them. */
static json_t *items_json(struct turn *t, const json_t *items, int papers, const char *band,
                          int add)
{
    json_t *out = json_array(), *item;
    size_t i;

    json_array_foreach(items, i, item) {
        int n = add ? compose_cite(t, item) : cited_as(t, item);
        json_t *o;
        if (n < 0) {
            json_decref(out);
            return NULL;
        }
        if (!n)
            continue;
        if (papers)
            o = json_pack("{s:i, s:O?, s:O?, s:O?, s:O?, s:o}", "n", n, "title",
                          json_object_get(item, "title"), "year", json_object_get(item, "year"),
                          "venue", json_object_get(item, "venue"), "open_access",
                          json_object_get(item, "is_open_access"), "abstract",
                          cut(json_string_value(json_object_get(item, "abstract"))));
        else
            o = json_pack("{s:i, s:O?, s:O?, s:o}", "n", n, "title",
                          json_object_get(item, "title"), "section",
                          json_object_get(item, "section"), "text",
                          cut(json_string_value(json_object_get(item, "text")) ?:
                              json_string_value(json_object_get(item, "snippet"))));
        if (json_array_append_new(out, o)) {
            json_decref(out);
            return NULL;
        }
    }
    return json_pack("{s:o, s:s?}", papers ? "papers" : "passages", out, "band", band);
}

/* A model-run tool's result for the model: search results numbered as
 * sources, anything else as it is. */
static json_t *run_result_json(struct turn *t, const json_t *result)
{
    if (json_is_array(json_object_get(result, "papers")))
        return items_json(t, json_object_get(result, "papers"), 1, NULL, 1);
    if (json_is_array(json_object_get(result, "passages")))
        return items_json(t, json_object_get(result, "passages"), 0,
                          json_string_value(json_object_get(result, "band")), 1);
    return json_incref((json_t *)result);
}

static int add_call(json_t *calls, json_t *messages, const char *id, const char *name,
                    const json_t *args, json_t *content)
{
    char *args_text = keel_json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
    char *text = content ? keel_json_dumps(content, JSON_COMPACT) : NULL;
    json_t *items = json_object_get(content, "papers") ?: json_object_get(content, "passages");
    size_t dropped = 0;
    int rc = KEEL_ENOMEM;

    /* Too long for the prompt: the last items go, and a note says so. */
    while (text && strlen(text) > RUN_RESULT_MAX && json_array_size(items)) {
        json_array_remove(items, json_array_size(items) - 1);
        json_object_set_new(content, "not_shown", json_integer((json_int_t)++dropped));
        keel_free(text);
        text = keel_json_dumps(content, JSON_COMPACT);
    }
    if (text && strlen(text) > RUN_RESULT_MAX) {
        keel_free(text);
        text = keel_strdup("{\"note\": \"the result is too large to show\"}");
    }
    if (args_text && text &&
        !json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type",
                                                "function", "function", "name", name,
                                                "arguments", args_text)) &&
        !json_array_append_new(messages, json_pack("{s:s, s:s, s:s}", "role", "tool",
                                                   "tool_call_id", id, "content", text)))
        rc = KEEL_OK;
    keel_free(args_text);
    keel_free(text);
    json_decref(content);
    return rc;
}

/* The calls that ran and their results, as an assistant message with
 * tool_calls followed by one tool message each. */
static int add_results(struct turn *t, json_t *messages)
{
    json_t *calls = json_array(), *tools = json_array(), *run;
    size_t i;
    int rc = calls && tools ? KEEL_OK : KEEL_ENOMEM;

    for (int k = 0; k < t->state.blueprint.n_subs && !rc; k++) {
        const struct sub_result *r = &t->results[k];
        char id[32];
        if (!r->ran)
            continue;
        /* 9 letters and digits: ids some servers' templates insist on */
        snprintf(id, sizeof(id), "keel%05d", k + 1);
        rc = add_call(calls, tools, id, r->tool, r->args,
                      !strcmp(r->band, "computed")   /* a calculator's result, as it is */
                          ? json_deep_copy(r->items)
                          : items_json(t, r->items, !strcmp(r->tool, "search_papers"),
                                       strcmp(r->tool, "search_papers") ? r->band : NULL, 0));
    }
    json_array_foreach(t->model_runs, i, run)
        if (!rc)
            rc = add_call(calls, tools, json_string_value(json_object_get(run, "id")),
                          json_string_value(json_object_get(run, "name")),
                          json_object_get(run, "arguments"),
                          run_result_json(t, json_object_get(run, "result")));
    if (!rc && json_array_size(calls) &&
        (json_array_append_new(messages, json_pack("{s:s, s:n, s:O}", "role", "assistant",
                                                   "content", "tool_calls", calls)) ||
         json_array_extend(messages, tools)))
        rc = KEEL_ENOMEM;
    json_decref(calls);
    json_decref(tools);
    return rc;
}

json_t *prompt_messages(struct turn *t, int results, struct keel_error *err)
{
    const char *prompt = llm_get_conf(t->pl->llm)->system_prompt;
    json_t *messages = json_array();
    struct keel_buf block;
    int rc = messages ? KEEL_OK : KEEL_ENOMEM;

    keel_buf_init(&block, 64u << 10);
    if (!rc && !prompt)
        prompt = default_prompt;
    /* One system message (some templates take no second one): the
     * static prompt, then the turn's block, so its start never changes. */
    if (!rc && !(rc = keel_buf_addf(&block, "%s\n\n", prompt)) &&
        !(rc = state_block(t, results, &block)))
        rc = add_message(messages, "system", block.data, block.len);
    keel_buf_release(&block);
    if (rc) {
        json_decref(messages);
        keel_error_set(err, KEEL_ENOMEM, "prompt", "out of memory");
        return NULL;
    }
    if ((rc = add_history(t, messages, err)) ||
        (rc = add_message(messages, "user", t->req->message, t->req->message_len) ? KEEL_ENOMEM
                                                                                  : KEEL_OK) ||
        (results && (rc = add_results(t, messages)))) {
        json_decref(messages);
        if (!err->code)
            keel_error_set(err, KEEL_ENOMEM, "prompt", "out of memory");
        return NULL;
    }
    return messages;
}
