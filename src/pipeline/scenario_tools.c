/*
 * scenario_tools.c — the registry's scenario tools (tools.h):
 * update_scenario(patch) and get_scenario work on the turn's active
 * scenario (scenario.h); uk_income_tax computes from it with the pack's
 * household figures (household.h). They run only inside a turn, where
 * tool_env carries the scenario; the pack's roles decide who may call
 * them (update_scenario is a write).
 */
#include <string.h>

#include "core/buf.h"
#include "pipeline/household.h"
#include "pipeline/scenario.h"
#include "pipeline/tools.h"

static int outside_turn(const char *tool, struct keel_error *err)
{
    return keel_error_set(err, KEEL_EUNSUPPORTED, tool,
                          "runs only inside a conversation's turn");
}

/* {active_scenario, summary}. */
static int scenario_result(const struct scenario_turn *st, json_t **result,
                           struct keel_error *err)
{
    *result = json_pack("{s:o, s:o}", "active_scenario",
                        st->current ? json_deep_copy(st->current) : json_null(), "summary",
                        scenario_summary_json(st->conf, st->current));
    return *result ? KEEL_OK : keel_error_set(err, KEEL_ENOMEM, "scenario", "out of memory");
}

int tool_update_scenario(const struct tool_env *env, const json_t *args, json_t **result,
                         struct keel_error *err)
{
    int rc;

    if (!env->scenario)
        return outside_turn("update_scenario", err);
    if ((rc = scenario_turn_patch(env->scenario, "tool", json_object_get(args, "patch"), err))) {
        if (!strncmp(err->field, "patch", 5) && rc != KEEL_ENOMEM) {
            char field[KEEL_ERROR_FIELD_MAX];
            size_t n = strnlen(err->field, sizeof(field) - 6);
            memcpy(field, "args.", 5);
            memcpy(field + 5, err->field, n);
            field[5 + n] = '\0';
            memcpy(err->field, field, n + 6);
        }
        return rc;
    }
    return scenario_result(env->scenario, result, err);
}

int tool_get_scenario(const struct tool_env *env, const json_t *args, json_t **result,
                      struct keel_error *err)
{
    (void)args;
    if (!env->scenario)
        return outside_turn("get_scenario", err);
    return scenario_result(env->scenario, result, err);
}

int tool_uk_income_tax(const struct tool_env *env, const json_t *args, json_t **result,
                       struct keel_error *err)
{
    int rc;

    if (!env->scenario)
        return outside_turn("uk_income_tax", err);
    if (!env->scenario->conf || !env->scenario->conf->household)
        return keel_error_set(err, KEEL_EUNSUPPORTED, "uk_income_tax",
                              "the pack has no household figures (scenario.household)");
    if ((rc = household_tax(env->scenario->conf->household, env->scenario->current, args,
                            result, err)))
        return rc;
    if (env->scenario->facts_ignored) {   /* a viewer's "What if they were married?" */
        const char *text = json_string_value(json_object_get(*result, "text"));
        struct keel_buf b;

        keel_buf_init(&b, 32u << 10);
        if (keel_buf_adds(&b, "Your role cannot change this conversation's scenario, so what "
                              "your message says about the household was not applied: the "
                              "answer is for the scenario as it stands.\n") ||
            keel_buf_adds(&b, text ? text : "") ||
            json_object_set_new(*result, "text", json_stringn(b.data, b.len)) ||
            !json_object_get(*result, "text")) {
            keel_buf_release(&b);
            json_decref(*result);
            *result = NULL;
            return keel_error_set(err, KEEL_ENOMEM, "uk_income_tax", "out of memory");
        }
        keel_buf_release(&b);
    }
    return KEEL_OK;
}
