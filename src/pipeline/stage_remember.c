/*
 * stage_remember.c — remember: a turn that ran a tool is a finished run,
 * offered to memory admission (seed 003; src/memory/) when the pack's
 * memory.remember is on. The run is built deterministically:
 *
 *   id        "run_" and the turn's correlation id
 *   task      the question as the turn understood it (the blueprint's)
 *   summary   per subquestion: the tool, its query and filters, how many
 *             results, and the first three sources' titles
 *   outcome   success (results, every part answered), failure (no
 *             results) or partial (some parts unavailable, or the model
 *             failed)
 *   references  the sources' URLs (or ids), at most 20
 *
 * The decision is made here and stored by publish in the turn's own
 * transaction, so a turn and its memory decision are stored together
 * or not at all.
 */
#include <string.h>

#include "pipeline/turn.h"

#define SUMMARY_MAX 1200
#define REFS_MAX 20

static int summary_of(const struct turn *t, struct keel_buf *b, int *found, int *unavailable)
{
    int rc = KEEL_OK;

    for (int i = 0; i < t->state.blueprint.n_subs && !rc; i++) {
        const struct sub_result *r = &t->results[i];
        const json_t *item;
        size_t k;

        *unavailable |= r->unavailable;
        if (!r->ran)
            continue;
        *found |= json_array_size(r->items) > 0;
        rc = keel_buf_addf(b, "%s%s \"%s\"", b->len ? "; " : "", r->tool,
                           json_string_value(json_object_get(r->args, "query")) ?: "");
        if (!rc && json_integer_value(json_object_get(r->args, "year_from")))
            rc = keel_buf_addf(b, " from %d",
                               (int)json_integer_value(json_object_get(r->args, "year_from")));
        if (!rc && json_is_true(json_object_get(r->args, "open_access_only")))
            rc = keel_buf_adds(b, " open access");
        if (!rc)
            rc = keel_buf_addf(b, ": %zu results", json_array_size(r->items));
        json_array_foreach(r->items, k, item) {
            const char *title = json_string_value(json_object_get(item, "title"));
            if (k == 3 || rc)
                break;
            if (title)
                rc = keel_buf_addf(b, "%s%s", k ? ", " : " (", title);
            if (!rc && (k == 2 || k + 1 == json_array_size(r->items)))
                rc = keel_buf_addc(b, ')');
        }
    }
    return rc == KEEL_ETOOBIG ? KEEL_OK : rc;   /* a long summary is cut, not an error */
}

static json_t *references(const struct turn *t)
{
    json_t *refs = json_array(), *s;
    size_t i;

    json_array_foreach(t->sources, i, s) {
        const json_t *ref = json_object_get(s, "url");
        if (!json_is_string(ref))
            ref = json_object_get(s, "id");
        if (!json_is_string(ref))
            ref = json_object_get(s, "document_id");
        if (i == REFS_MAX || !refs)
            break;
        if (json_is_string(ref) && json_array_append(refs, (json_t *)ref)) {
            json_decref(refs);
            return NULL;
        }
    }
    return refs;
}

int stage_remember(struct turn *t, struct keel_error *err)
{
    struct keel_buf summary;
    struct memory_input in = {0};
    json_t *refs = NULL, *artifacts;
    char id[KEEL_ID_MAX + 8];
    int found = 0, unavailable = 0, rc;

    if (!t->pl->memory)
        return turn_emit(t, "info", NULL, NULL, "memory is off for this pack")
                   ? keel_error_set(err, KEEL_ENOMEM, "remember", "out of memory") : KEEL_OK;
    artifacts = json_array();   /* made only when memory is on: nothing leaks when off */
    keel_buf_init(&summary, SUMMARY_MAX);
    if ((rc = summary_of(t, &summary, &found, &unavailable)) || !(refs = references(t)) ||
        !artifacts) {
        rc = keel_error_set(err, KEEL_ENOMEM, "remember", "out of memory");
        goto out;
    }
    if (!summary.len) {   /* no tool ran: no run to remember */
        rc = turn_emit(t, "info", NULL, NULL, "nothing to remember: no tool ran")
                 ? keel_error_set(err, KEEL_ENOMEM, "remember", "out of memory") : KEEL_OK;
        goto out;
    }
    snprintf(id, sizeof(id), "run_%s",
             !strncmp(t->correlation_id, "turn_", 5) ? t->correlation_id + 5 : t->correlation_id);
    in.id = id;
    in.task = t->state.blueprint.question[0] ? t->state.blueprint.question : t->effective;
    in.summary = summary.data;
    in.outcome = !found ? "failure" : unavailable || t->model_failed ? "partial" : "success";
    in.references = refs;
    in.artifacts = artifacts;
    in.conversation_id = t->conversation_id;
    in.owner = t->req->owner;   /* the API user: the conversation's owner; NULL: none */
    in.now_ms = t->now;
    if ((rc = memory_decide(t->pl->memory, &in, &t->memory_decision, err)))
        goto out;   /* a store failure reading candidates: the turn fails, nothing is stored */
    rc = turn_emit(t, "info", "remember.decision",
                   json_deep_copy(memory_decision_json(t->memory_decision)), "memory: %s",
                   json_string_value(json_object_get(memory_decision_json(t->memory_decision),
                                                     "decision")))
             ? keel_error_set(err, KEEL_ENOMEM, "remember", "out of memory") : KEEL_OK;
out:
    keel_buf_release(&summary);
    json_decref(refs);
    json_decref(artifacts);
    return rc;
}
