/*
 * stage_remember.c — remember: seed 003's memory admission (ADD / NOT /
 * REPLACE / MERGE) lands here; until then the stage records that it
 * passed.
 */
#include "pipeline/turn.h"

int stage_remember(struct turn *t, struct keel_error *err)
{
    if (turn_emit(t, "info", NULL, json_pack("{s:b}", "passed", 1), "memory admission is not enabled; nothing stored"))
        return keel_error_set(err, KEEL_ENOMEM, "remember", "out of memory");
    return KEEL_OK;
}
