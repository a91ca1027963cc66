/*
 * scenario_store.c — changing a conversation's stored scenario outside a
 * turn (PATCH/DELETE over HTTP, a replay's scenario_patch step): read
 * it, merge the patch as update_scenario does, write it back in one
 * store transaction guarded by the version read. A turn that wrote in
 * between makes it read again (up to three times), so neither change is
 * lost silently.
 */
#include "pipeline/scenario.h"

#include <string.h>

#include "core/alloc.h"
#include "pipeline/turn.h"

#define SCENARIO_TRIES 3

/* One attempt. KEEL_EFAIL: the scenario changed under us. */
static int attempt(struct store *store, const struct scenario_conf *conf, const char *id,
                   const char *pack, const json_t *patch, json_t **out, struct keel_error *err)
{
    struct store_conversation conv;
    json_t *current = NULL, *next = NULL;
    char *text = NULL;
    int rc, oom = 0;

    if ((rc = store_load_conversation(store, id, &conv, err)))
        return rc;
    if (pack && strcmp(pack, conv.pack))
        rc = keel_error_set(err, KEEL_EINVAL, "conversation_id",
                            "conversation \"%s\" belongs to pack %s, not %s", id, conv.pack, pack);
    /* the result must pass the checks a client's copy meets, or a client
     * could not send back the scenario it was given */
    if (!rc && !(rc = scenario_parse(conv.scenario_json, &current, err)) && patch &&
        !(rc = scenario_apply(conf, current, patch, &next, err)) &&
        !(rc = next ? scenario_check(conf, next, "patch", err) : KEEL_OK) &&
        !(text = scenario_dump(next, &oom)))
        rc = keel_error_set(err, KEEL_ENOMEM, "patch", "out of memory");
    if (!rc && (patch || current))
        rc = store_scenario_set(store, id, conv.scenario_version, text, err);
    if (!rc) {
        *out = next;   /* NULL: cleared */
        next = NULL;
    }
    keel_free(text);
    json_decref(current);
    json_decref(next);
    store_conversation_release(&conv);
    return rc;
}

int scenario_store_change(struct store *store, const struct scenario_conf *conf, const char *id,
                          const char *pack, const json_t *patch, json_t **out,
                          struct keel_error *err)
{
    int rc = KEEL_EFAIL;

    *out = NULL;
    for (int i = 0; i < SCENARIO_TRIES && rc == KEEL_EFAIL; i++) {
        keel_error_clear(err);
        rc = attempt(store, conf, id, pack, patch, out, err);
    }
    return rc;
}

int pipeline_scenario_change(struct pipeline *pl, const char *conversation_id,
                             const json_t *patch, json_t **scenario, json_t **summary,
                             struct keel_error *err)
{
    json_t *next = NULL;
    int rc = scenario_store_change(pl->store, &pl->scenario, conversation_id, pl->pack->name,
                                   patch, &next, err);

    if (rc)
        return rc;
    *summary = scenario_summary_json(&pl->scenario, next);
    *scenario = next ? next : json_null();
    if (!*summary) {
        json_decref(*scenario);
        return keel_error_set(err, KEEL_ENOMEM, "scenario", "out of memory");
    }
    return KEEL_OK;
}
