/*
 * scenario_turn.c — the active scenario in a turn (seed 004).
 *
 *   load      reads the conversation's scenario and its version
 *   begin     who may change it (the pack's roles: a role that may call
 *             update_scenario, or any role of a pack without that tool),
 *             then the request's own copy (client-owns-state: it wins
 *             and is saved)
 *   classify  the household facts the message states, as a patch
 *             through the same merge as update_scenario (a role that
 *             may not change the scenario: noted, and the tax answer
 *             says they were not applied)
 *   (resolve) the model may call update_scenario / get_scenario; the
 *             household path's uk_income_tax reads the scenario
 *   publish   the scenario after the turn and its changes, in the
 *             turn's single transaction
 *
 * Every change is recorded as {source, patch|set} in the turn's
 * scenario changes (stored as the turn's delta).
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "pipeline/household.h"
#include "pipeline/turn.h"

int scenario_turn_load(struct turn *t, const struct store_conversation *conv,
                       struct keel_error *err)
{
    t->scenario.version = conv->scenario_version;
    return scenario_parse(conv->scenario_json, &t->scenario.current, err);
}

int scenario_turn_begin(struct turn *t, struct keel_error *err)
{
    const struct pack *pack = t->pl->pack;
    int tool = pack_tool_index(pack, "update_scenario", strlen("update_scenario"));
    const json_t *copy = t->req->active_scenario;
    int rc;

    t->scenario.conf = &t->pl->scenario;
    t->scenario.may_write = tool >= 0 ? pack_role_may_call(pack, t->role, tool) : 1;
    if (!copy || json_is_null(copy))
        return KEEL_OK;
    if ((rc = scenario_turn_set(&t->scenario, "request", copy, "active_scenario", err)))
        return rc;
    return turn_emit(t, "info", "load.scenario", NULL, "the request's scenario: %s",
                     t->scenario.changed ? "replaces the stored one" : "the same as stored")
               ? keel_error_set(err, KEEL_ENOMEM, "load", "out of memory")
               : KEEL_OK;
}

int scenario_turn_classify(struct turn *t, struct keel_error *err)
{
    const struct household *h = t->pl->scenario.household;
    struct keel_error perr;
    json_t *patch = NULL;
    int rc;

    if (!h)
        return KEEL_OK;
    if (household_extract(h, t->req->message, t->req->message_len, t->scenario.current, &patch))
        return keel_error_set(err, KEEL_ENOMEM, "classify", "out of memory");
    if (!patch)
        return KEEL_OK;
    if (!t->scenario.may_write) {   /* not applied, and the answer says so (uk_income_tax) */
        t->scenario.facts_ignored = 1;
        rc = turn_emit(t, "info", "classify.scenario_ignored", json_pack("{s:O}", "patch", patch),
                       "household facts not applied: this role may not change the scenario");
        json_decref(patch);
        return rc ? keel_error_set(err, KEEL_ENOMEM, "classify", "out of memory") : KEEL_OK;
    }
    keel_error_clear(&perr);
    rc = scenario_turn_patch(&t->scenario, "message", patch, &perr);
    if (rc == KEEL_ENOMEM) {
        json_decref(patch);
        return keel_error_set(err, KEEL_ENOMEM, "classify", "out of memory");
    }
    /* A patch over the cap changes nothing and says so; the turn goes on. */
    if (turn_emit(t, "info", rc ? NULL : "classify.scenario",
                  json_pack("{s:O, s:s?}", "patch", patch, "error", rc ? perr.message : NULL),
                  rc ? "household facts not applied: %s" : "household facts applied%s",
                  rc ? perr.message : "")) {
        json_decref(patch);
        return keel_error_set(err, KEEL_ENOMEM, "classify", "out of memory");
    }
    json_decref(patch);
    return KEEL_OK;
}

int scenario_turn_prompt(const struct turn *t, struct keel_buf *b)
{
    char line[SCENARIO_SUMMARY_MAX];
    int rc;

    if (!t->scenario.current)
        return KEEL_OK;
    scenario_summary(t->scenario.conf, t->scenario.current, line, sizeof(line));
    if ((rc = keel_buf_adds(b, "\nActive scenario (change it with update_scenario): ")) ||
        (rc = keel_json_append(b, t->scenario.current, JSON_COMPACT)))
        return rc;
    return line[0] ? keel_buf_addf(b, "\nIn one line: %s.", line) : KEEL_OK;
}

int scenario_turn_record(struct turn *t, struct store_turn_record *rec, struct keel_error *err)
{
    int oom = 0;

    keel_free(t->scenario_text);
    keel_free(t->scenario_delta_text);
    t->scenario_text = scenario_dump(t->scenario.current, &oom);
    if (!oom)
        t->scenario_delta_text = scenario_dump(t->scenario.changes, &oom);
    if (oom)
        return keel_error_set(err, KEEL_ENOMEM, "publish", "out of memory");
    rec->scenario_json = t->scenario_text;
    rec->scenario_delta_json = t->scenario_delta_text;
    rec->scenario_changed = t->scenario.changed;
    rec->scenario_version = t->scenario.version;
    return KEEL_OK;
}

static int key_order(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A deep copy of `v` whose objects hold their keys in sorted order, as
 * the store keeps them (scenario_dump sorts), so a result replayed from
 * the store reads byte for byte as the live one. JSON null for NULL;
 * NULL when out of memory. Not by dumping and parsing again: jansson's
 * parser mishandles some allocation failures. */
static json_t *as_stored(const json_t *v)
{
    json_t *out, *item;
    const char **keys;
    const char *k;
    size_t i, n = 0;

    if (!v)
        return json_null();
    if (json_is_array(v)) {
        if (!(out = json_array()))
            return NULL;
        json_array_foreach(v, i, item)
            if (json_array_append_new(out, as_stored(item))) {
                json_decref(out);
                return NULL;
            }
        return out;
    }
    if (!json_is_object(v))
        return json_deep_copy(v);
    if (!(out = json_object()) ||
        !(keys = keel_malloc((json_object_size(v) + 1) * sizeof(*keys)))) {
        json_decref(out);
        return NULL;
    }
    json_object_foreach((json_t *)v, k, item)
        keys[n++] = k;
    qsort(keys, n, sizeof(*keys), key_order);
    for (i = 0; i < n; i++)
        if (json_object_set_new(out, keys[i], as_stored(json_object_get(v, keys[i])))) {
            json_decref(out);
            out = NULL;
            break;
        }
    keel_free(keys);
    return out;
}

int scenario_turn_result(const struct turn *t, json_t *result)
{
    /* each made just before it is set: set_new takes it, also on failure */
    return json_object_set_new(result, "active_scenario", as_stored(t->scenario.current)) ||
           json_object_set_new(result, "scenario_changes", as_stored(t->scenario.changes)) ||
           json_object_set_new(result, "scenario_summary",
                               scenario_summary_json(t->scenario.conf, t->scenario.current));
}
