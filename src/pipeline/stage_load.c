/*
 * stage_load.c — load: read the conversation (thread state, blueprint,
 * turn count) or start a new one. A conversation id that does not exist,
 * or that belongs to another pack, is bad input. A state whose stored
 * text the pipeline's cache knows is not parsed again (state_cache.h).
 */
#include <string.h>

#include "core/json.h"
#include "pipeline/turn.h"

static int load_existing(struct turn *t, const char *id, struct keel_error *err)
{
    struct store_conversation conv;
    json_t *json = NULL;
    int rc = store_load_conversation(t->pl->store, id, &conv, err);

    if (rc)
        return rc;
    if (strcmp(conv.pack, t->pl->pack->name)) {
        rc = keel_error_set(err, KEEL_EINVAL, "conversation_id",
                            "conversation \"%s\" belongs to pack %s, not %s", id, conv.pack,
                            t->pl->pack->name);
    } else if (state_cache_get(t->pl->states, id, conv.state_json, &t->pl->cfg, &t->state)) {
        rc = scenario_turn_load(t, &conv, err);   /* the state this text stands for, parsed */
        t->seq = conv.turns + 1;
    } else if (!(rc = keel_json_parse(conv.state_json, strlen(conv.state_json), STORE_TEXT_MAX,
                                      "state", &json, err))) {
        rc = state_from_json(&t->state, &t->pl->cfg, json, err);
        if (!rc) {
            state_cache_put(t->pl->states, id, conv.state_json, &t->state, &t->pl->cfg);
            rc = scenario_turn_load(t, &conv, err);
        }
        t->seq = conv.turns + 1;
    }
    json_decref(json);
    store_conversation_release(&conv);
    return rc;
}

int stage_load(struct turn *t, struct keel_error *err)
{
    const char *id = t->req->conversation_id;
    int rc;

    if (id && *id) {
        snprintf(t->conversation_id, sizeof(t->conversation_id), "%s", id);
        if ((rc = load_existing(t, id, err)))
            return rc;
    } else if (t->req->new_conversation_id && *t->req->new_conversation_id) {
        snprintf(t->conversation_id, sizeof(t->conversation_id), "%s",
                 t->req->new_conversation_id);
        t->seq = 1;
    } else {
        keel_id_new("conv", t->conversation_id, sizeof(t->conversation_id));
        t->seq = 1;
    }
    snprintf(t->stage_before, sizeof(t->stage_before), "%s", t->state.stage);
    if ((rc = scenario_turn_begin(t, err)))
        return rc;
    return turn_emit(t, "info", "load.state",
                     json_pack("{s:s,s:i,s:s,s:b,s:s*}", "conversation_id", t->conversation_id,
                               "turn", t->seq, "stage", t->state.stage, "blueprint",
                               t->state.blueprint.active, "traceparent", t->req->traceparent),
                     "%s turn %d, stage %s", t->seq == 1 ? "new conversation" : "conversation",
                     t->seq, t->state.stage)
               ? keel_error_set(err, KEEL_ENOMEM, "load", "out of memory")
               : KEEL_OK;
}
