/*
 * stage_artifact.c — artifact: seed 001's intent gate, contracts and facts
 * land here; until then the stage records that it passed, so the event
 * stream already has its final shape.
 */
#include "pipeline/turn.h"

int stage_artifact(struct turn *t, struct keel_error *err)
{
    if (turn_emit(t, "info", NULL, json_pack("{s:b}", "passed", 1), "no artifact contract is enabled; nothing built"))
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    return KEEL_OK;
}
