/*
 * stage_publish.c — publish: ONE store transaction writes the turn, both
 * messages, the state after the turn's deltas, every event, the decision
 * log (intent, route, tool, final arguments, stage transition, reasons)
 * and the seed-000 quality counters:
 *
 *   turns, clarifications
 *   direct_search_turns              the policy said direct_search
 *   direct_search_tool_called        … and its forced tool ran
 *   direct_search_clarified_first    … but the turn asked a question instead
 *   recency_filtered_turns           the policy set a year filter
 *   recency_filter_compliant         … and the tool ran with exactly it
 *   stage_transitions_expected       a forced search found papers and the
 *                                    policy names a transition
 *   stage_transitions_done           … and the stage is now its target
 *
 * The artifact stage's artifact and facts go into the same transaction;
 * the artifact's JSONL export line is appended after the commit.
 *
 * Publish emits its end event before writing, so the stored events are
 * complete; if the write fails nothing of the turn exists. A turn during
 * which any allocation failed is refused (KEEL_ENOMEM) before the write:
 * jansson hides some failures, so nothing built then is trusted.
 */
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "pipeline/turn.h"

struct counters {
    struct store_metric m[10];
    size_t n;
};

static void count(struct counters *c, const char *name, int yes)
{
    if (yes)
        c->m[c->n++] = (struct store_metric){name, 1};
}

static int recency_compliant(const struct turn *t, const json_t *args)
{
    const struct policy_search *s = &t->decision.search;

    return args && json_integer_value(json_object_get(args, "year_from")) == s->year_from &&
           json_integer_value(json_object_get(args, "year_to")) == s->year_to;
}

static void quality_counters(const struct turn *t, const char *tool, const json_t *args,
                             struct counters *c)
{
    const struct policy_decision *d = &t->decision;
    int direct_search = d->intent == POLICY_INTENT_DIRECT_SEARCH;
    int filtered = d->has_search && (d->search.year_from || d->search.year_to);
    int expected = d->stage_transition && t->forced_tool_ran && tool &&
                   !strcmp(tool, t->pl->pack->tools[d->force_tool].name) &&
                   json_array_size(t->results[0].items) > 0;

    count(c, "turns", 1);
    count(c, "clarifications", t->clarification != NULL);
    count(c, "direct_search_turns", direct_search);
    count(c, "direct_search_tool_called", direct_search && t->forced_tool_ran);
    count(c, "direct_search_clarified_first", direct_search && t->clarification != NULL);
    count(c, "recency_filtered_turns", filtered && t->forced_tool_ran);
    count(c, "recency_filter_compliant", filtered && t->forced_tool_ran && recency_compliant(t, args));
    count(c, "stage_transitions_expected", expected);
    count(c, "stage_transitions_done",
          expected && !strcmp(t->state.stage, d->stage_transition));
}

/* The tool the decision log names: the policy's forced tool when it ran,
 * else the first tool called. */
static const char *logged_tool(const struct turn *t)
{
    if (t->forced_tool_ran)
        return t->pl->pack->tools[t->decision.force_tool].name;
    return json_string_value(json_array_get(t->tools_called, 0));
}

/* Serialises `value` (compact, keys sorted) into a new string, or NULL
 * when out of memory or longer than publish's cap — never a partial
 * document. */
static char *dump(const json_t *value)
{
    size_t len;
    char *text = keel_json_dumps_len(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY, 0,
                                     &len);

    if (text && len > STORE_TEXT_MAX * 4) {   /* publish's cap on a text */
        keel_free(text);
        return NULL;
    }
    return text;
}

int stage_publish(struct turn *t, struct keel_error *err)
{
    struct store_turn_record rec;
    struct artifact_write aw = {0};
    struct counters c = {.n = 0};
    const json_t *state, *decision;
    json_t *log = NULL;
    const char *tool = logged_tool(t);
    const json_t *args = tool ? json_object_get(t->tool_args, tool) : NULL;
    char *texts[7] = {NULL};
    int compacted = 0;
    char *user = keel_strndup(t->req->message, t->req->message_len);   /* not NUL-terminated */
    int rc = KEEL_ENOMEM;

    struct state_delta turns = {.kind = DELTA_TURNS, .index = t->seq};
    if (!user || (rc = turn_apply(t, &turns, err)))
        goto out;
    rc = KEEL_ENOMEM;
    quality_counters(t, tool, args, &c);
    if (turn_emit(t, "end", NULL, json_pack("{s:i}", "events", t->event_seq + 1),
                  "publish: writing turn %d", t->seq))
        goto out;
    state = t->state_json = state_to_json(&t->state, &t->pl->cfg);   /* the result reuses it */
    decision = t->decision_json;
    if (t->ended && artifact_note_skipped(t))
        goto out;
    if (t->provider_reports || t->model_log || t->memory_decision || t->artifact_gate) {
        /* The decision log adds what each paper provider, the model and
         * memory admission did; the decide event keeps the decision as it
         * was made. */
        if (!(log = json_copy(t->decision_json)) ||
            (t->provider_reports && json_object_set(log, "providers", t->provider_reports)) ||
            (t->model_log && json_object_set(log, "model", t->model_log)) ||
            (t->memory_decision &&
             json_object_set(log, "memory", (json_t *)memory_decision_json(t->memory_decision))) ||
            (t->artifact_gate && json_object_set(log, "artifact", t->artifact_gate)))
            goto out;
        decision = log;
    }
    if (!state)
        goto out;
    texts[0] = dump(state);
    texts[1] = dump(t->deltas);
    /* the events as turn_emit wrote them down; else written now */
    if (!t->events_text_failed && t->events_text.len && !keel_buf_addc(&t->events_text, ']')) {
        texts[2] = keel_buf_detach(&t->events_text, NULL);
        compacted = t->events_compacted;
    } else {
        texts[2] = t->events ? dump(t->events) : NULL;
    }
    texts[3] = dump(t->sources);
    texts[4] = dump(json_object_get(decision, "reasons"));
    texts[5] = dump(decision);
    texts[6] = args ? dump(args) : NULL;
    for (int i = 0; i < 6; i++)
        if (!texts[i])
            goto out;
    if (args && !texts[6])
        goto out;
    memset(&rec, 0, sizeof(rec));
    rec.conversation_id = t->conversation_id;
    rec.owner = t->req->owner;
    rec.pack = t->pl->pack->name;
    rec.seq = t->seq;
    rec.correlation_id = t->correlation_id;
    rec.ts_ms = t->now;
    rec.user_text = user;   /* the transcript keeps what was said; state never does */
    rec.assistant_text = t->answer.data;
    rec.clarification = t->clarification != NULL;
    rec.state_json = texts[0];
    rec.deltas_json = texts[1];
    rec.events_json = texts[2];
    rec.events_compacted = compacted;
    rec.sources_json = texts[3];
    rec.reasons_json = texts[4];
    rec.decision_json = texts[5];
    rec.arguments_json = texts[6];
    rec.intent = policy_intent_name(t->decision.intent);
    rec.route = policy_route_name(t->decision.route);
    rec.tool = tool;
    rec.stage_from = t->stage_before;
    rec.stage_to = t->state.stage;
    rec.metrics = c.m;
    rec.n_metrics = c.n;
    /* jansson swallows some allocation failures (a copy loses a key, a
     * parse a byte): a turn during which any allocation failed is not
     * trusted, so it is not stored. */
    if (keel_alloc_failures() != t->alloc_failures)
        goto out;
    rec.memory = t->memory_decision ? memory_decision_change(t->memory_decision) : NULL;
    /* A personal fact set or removed this turn is stored with it. */
    struct store_personal_change personal = {
        t->pending.user, t->pending.key, t->pending.remove ? NULL : t->pending.value,
        t->pending.kind, t->conversation_id, t->now};
    rec.personal = t->pending.active ? &personal : NULL;
    if (artifact_record(t, &aw))
        goto out;
    rec.artifact = aw.has ? &aw.art : NULL;
    if ((rc = scenario_turn_record(t, &rec, err)))
        goto out;
    rc = store_save_turn(t->pl->store, &rec, err);
    if (!rc)   /* the next turn finds this text in the store: no need to parse it */
        state_cache_put(t->pl->states, t->conversation_id, texts[0], &t->state, &t->pl->cfg);
    if (!rc && t->memory_decision)
        memory_commit(t->pl->memory, t->memory_decision);
    /* after the commit: the store is the source of truth (in a batch,
     * store_batch_begin, this turn's commit is made now) */
    if (!rc && t->artifact && t->pl->artifacts_dir)
        rc = store_batch_flush(t->pl->store, err);
    if (!rc)
        artifact_export(t);
out:
    if (rc == KEEL_ENOMEM && !err->code)
        keel_error_set(err, KEEL_ENOMEM, "publish", "out of memory");
    for (int i = 0; i < 7; i++)
        keel_free(texts[i]);
    artifact_write_release(&aw);
    keel_free(user);
    json_decref(log);
    return rc;
}
