/*
 * scenario.c — the active scenario's patches, caps and the pack's
 * `scenario` section (see scenario.h).
 */
#include "pipeline/scenario.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/json.h"
#include "pipeline/household.h"

int scenario_conf_load(const struct pack *pack, struct scenario_conf *conf,
                       struct keel_error *err)
{
    static const char *const keys[] = {"max_bytes", "deep_keys", "household", "tax_years", NULL};
    const json_t *s = json_object_get(pack->doc, "scenario"), *deep, *key;
    struct keel_error inner;
    long long max = SCENARIO_BYTES_DEFAULT;
    size_t i;
    int rc;

    memset(conf, 0, sizeof(*conf));
    conf->max_bytes = SCENARIO_BYTES_DEFAULT;
    if (!s)
        return KEEL_OK;
    if (!json_is_object(s))
        return pack_fail(pack, "scenario", err, "must be a mapping");
    if (keel_json_check_keys(s, keys, "scenario", &inner) ||
        keel_json_get_int(s, "max_bytes", 0, 64, SCENARIO_BYTES_LIMIT, "scenario", &max, &inner))
        return pack_fail(pack, inner.field, err, "%s", inner.message);
    conf->max_bytes = (size_t)max;
    deep = json_object_get(s, "deep_keys");
    if (deep && (!json_is_array(deep) || json_array_size(deep) > SCENARIO_DEEP_MAX))
        return pack_fail(pack, "scenario.deep_keys", err, "must be a list of at most %d keys",
                         SCENARIO_DEEP_MAX);
    json_array_foreach(deep, i, key) {
        if (!json_is_string(key) || !json_string_length(key))
            return pack_fail(pack, "scenario.deep_keys", err, "[%zu]: must be a key name", i);
        conf->deep_keys[conf->n_deep++] = json_string_value(key);
    }
    if (json_object_get(s, "tax_years") && !json_object_get(s, "household"))
        return pack_fail(pack, "scenario.tax_years", err, "needs scenario.household");
    if (json_object_get(s, "household") &&
        (rc = household_load(pack, json_object_get(s, "household"),
                             json_object_get(s, "tax_years"), &conf->household, err))) {
        scenario_conf_release(conf);
        return rc;
    }
    return KEEL_OK;
}

void scenario_conf_release(struct scenario_conf *conf)
{
    household_free(conf->household);
    memset(conf, 0, sizeof(*conf));
}

static int is_deep(const struct scenario_conf *conf, const char *key)
{
    for (int i = 0; i < conf->n_deep; i++)
        if (!strcmp(conf->deep_keys[i], key))
            return 1;
    return 0;
}

/* KEEL_OK when `value` serialised (compact) fits `max` bytes, else
 * KEEL_ETOOBIG, or KEEL_ENOMEM when memory ran out on the way. */
static int fits(const json_t *value, size_t max)
{
    long failures = keel_alloc_failures();
    struct keel_buf b;
    int rc;

    keel_buf_init(&b, max);
    rc = keel_json_append(&b, value, JSON_COMPACT);
    keel_buf_release(&b);
    if (!rc)
        return KEEL_OK;
    return keel_alloc_failures() != failures ? KEEL_ENOMEM : KEEL_ETOOBIG;
}

/* obj[key] = merge of `patch` (an object) into `old` one level deep:
 * null removes a key, anything else replaces it. */
static json_t *merge_deep(const json_t *old, const json_t *patch)
{
    json_t *out = json_is_object(old) ? json_deep_copy(old) : json_object(), *v;
    const char *k;

    if (!out)
        return NULL;
    json_object_foreach((json_t *)patch, k, v) {
        int failed = json_is_null(v) ? (json_object_del(out, k), 0)
                                     : json_object_set_new(out, k, json_deep_copy(v));
        if (failed) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

int scenario_apply(const struct scenario_conf *conf, const json_t *current, const json_t *patch,
                   json_t **out, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    json_t *next, *v;
    const char *k;
    long failures = keel_alloc_failures();
    int rc;

    if (!json_is_object(patch))
        return keel_error_set(err, KEEL_EINVAL, "patch", "must be a JSON object, not %s",
                              keel_json_type_name(patch));
    if ((rc = fits(patch, conf->max_bytes)))
        return rc == KEEL_ENOMEM ? keel_error_set(err, rc, "patch", "out of memory")
                                 : keel_error_set(err, rc, "patch",
                                                  "is larger than the scenario's cap of %zu bytes",
                                                  conf->max_bytes);
    json_object_foreach((json_t *)patch, k, v)
        if (is_deep(conf, k) && !json_is_object(v) && !json_is_null(v)) {
            keel_json_path_key(field, sizeof(field), "patch", k);
            return keel_error_set(err, KEEL_EINVAL, field, "must be an object or null, not %s",
                                  keel_json_type_name(v));
        }
    if (!(next = json_is_object(current) ? json_deep_copy(current) : json_object()))
        return keel_error_set(err, KEEL_ENOMEM, "patch", "out of memory");
    json_object_foreach((json_t *)patch, k, v) {
        json_t *value;
        if (json_is_null(v)) {
            json_object_del(next, k);
            continue;
        }
        value = is_deep(conf, k) ? merge_deep(json_object_get(next, k), v) : json_deep_copy(v);
        if (!value || json_object_set_new(next, k, value)) {
            json_decref(next);
            return keel_error_set(err, KEEL_ENOMEM, "patch", "out of memory");
        }
    }
    if (keel_alloc_failures() != failures) {   /* jansson's copies drop what they cannot add */
        json_decref(next);
        return keel_error_set(err, KEEL_ENOMEM, "patch", "out of memory");
    }
    if ((rc = fits(next, conf->max_bytes))) {
        json_decref(next);
        return rc == KEEL_ENOMEM ? keel_error_set(err, rc, "patch", "out of memory")
                                 : keel_error_set(err, rc, "patch",
                                                  "would make the scenario larger than its cap "
                                                  "of %zu bytes", conf->max_bytes);
    }
    *out = next;
    return KEEL_OK;
}

int scenario_check(const struct scenario_conf *conf, const json_t *scenario, const char *field,
                   struct keel_error *err)
{
    char path[KEEL_JSON_PATH_MAX];
    const char *k;
    json_t *v;
    int rc;

    if (!json_is_object(scenario))
        return keel_error_set(err, KEEL_EINVAL, field, "must be a JSON object, not %s",
                              keel_json_type_name(scenario));
    if ((rc = fits(scenario, conf->max_bytes)))
        return rc == KEEL_ENOMEM ? keel_error_set(err, rc, field, "out of memory")
                                 : keel_error_set(err, rc, field,
                                                  "is larger than the cap of %zu bytes",
                                                  conf->max_bytes);
    json_object_foreach((json_t *)scenario, k, v)   /* as a patch's deep keys */
        if (is_deep(conf, k) && !json_is_object(v) && !json_is_null(v)) {
            keel_json_path_key(path, sizeof(path), field, k);
            return keel_error_set(err, KEEL_EINVAL, path, "must be an object or null, not %s",
                                  keel_json_type_name(v));
        }
    v = json_object_get(scenario, "household");
    if (conf->household && json_is_object(v)) {
        keel_json_path_key(path, sizeof(path), field, "household");
        return household_check(conf->household, v, path, err);
    }
    return KEEL_OK;
}

int scenario_parse(const char *text, json_t **out, struct keel_error *err)
{
    json_t *value = NULL;
    long failures = keel_alloc_failures();
    int rc;

    *out = NULL;
    if (!text)
        return KEEL_OK;
    if ((rc = keel_json_parse(text, strlen(text), SCENARIO_BYTES_LIMIT * 2, "active_scenario",
                              &value, err)))
        return rc == KEEL_ENOMEM || keel_alloc_failures() != failures
                   ? keel_error_set(err, KEEL_ENOMEM, "active_scenario", "out of memory")
                                 : keel_error_set(err, KEEL_EIO, "active_scenario",
                                                  "the stored scenario is not JSON");
    if (!json_is_object(value)) {
        json_decref(value);
        return keel_error_set(err, KEEL_EIO, "active_scenario",
                              "the stored scenario is not a JSON object");
    }
    *out = value;
    return KEEL_OK;
}

char *scenario_dump(const json_t *scenario, int *oom)
{
    struct keel_buf b;

    *oom = 0;
    if (!scenario)
        return NULL;
    keel_buf_init(&b, SCENARIO_BYTES_LIMIT * 2);
    if (keel_json_append(&b, scenario, JSON_COMPACT)) {
        keel_buf_release(&b);
        *oom = 1;
        return NULL;
    }
    return keel_buf_detach(&b, NULL);
}

void scenario_summary(const struct scenario_conf *conf, const json_t *scenario, char *out,
                      size_t cap)
{
    out[0] = '\0';
    if (conf && conf->household && json_is_object(scenario))
        household_summary(conf->household, scenario, out, cap);
}

json_t *scenario_summary_json(const struct scenario_conf *conf, const json_t *scenario)
{
    char line[SCENARIO_SUMMARY_MAX];

    scenario_summary(conf, scenario, line, sizeof(line));
    return line[0] ? json_string(line) : json_null();
}

/* Appends {source, KEY: value} to st->changes. */
static int record(struct scenario_turn *st, const char *source, const char *key,
                  const json_t *value)
{
    json_t *entry = json_pack("{s:s, s:O}", "source", source, key, value);

    if (!entry)
        return KEEL_ENOMEM;
    if (!st->changes && !(st->changes = json_array())) {
        json_decref(entry);
        return KEEL_ENOMEM;
    }
    return json_array_append_new(st->changes, entry) ? KEEL_ENOMEM : KEEL_OK;
}

int scenario_turn_patch(struct scenario_turn *st, const char *source, const json_t *patch,
                        struct keel_error *err)
{
    json_t *next = NULL;
    int rc;

    if (!st->may_write)
        return keel_error_set(err, KEEL_EINVAL, "patch",
                              "this role may not change the scenario (it cannot call "
                              "update_scenario)");
    if ((rc = scenario_apply(st->conf, st->current, patch, &next, err)))
        return rc;
    if (record(st, source, "patch", patch)) {
        json_decref(next);
        return keel_error_set(err, KEEL_ENOMEM, "patch", "out of memory");
    }
    json_decref(st->current);
    st->current = next;
    st->changed = 1;
    return KEEL_OK;
}

int scenario_turn_set(struct scenario_turn *st, const char *source, const json_t *scenario,
                      const char *field, struct keel_error *err)
{
    json_t *copy;
    int rc;

    if ((rc = scenario_check(st->conf, scenario, field, err)))
        return rc;
    if (st->current && json_equal(st->current, (json_t *)scenario))
        return KEEL_OK;
    if (!st->may_write)
        return keel_error_set(err, KEEL_EINVAL, field,
                              "this role may not change the scenario (it cannot call "
                              "update_scenario)");
    if (!(copy = json_deep_copy(scenario)) || record(st, source, "set", scenario)) {
        json_decref(copy);
        return keel_error_set(err, KEEL_ENOMEM, field, "out of memory");
    }
    json_decref(st->current);
    st->current = copy;
    st->changed = 1;
    return KEEL_OK;
}

void scenario_turn_release(struct scenario_turn *st)
{
    json_decref(st->current);
    json_decref(st->changes);
    st->current = st->changes = NULL;
}
