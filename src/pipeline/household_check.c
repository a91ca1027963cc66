/*
 * household_check.c — the values of a scenario's household object that
 * the pack defines (see household.h): a client's whole copy of the
 * scenario is checked against them before anything is stored.
 */
#include "pipeline/household_int.h"

#include <stdio.h>
#include <string.h>

#include "core/json.h"

#define HH_CHILDREN_MAX 20   /* as many as a message may state */

/* "a, b or c" of names[0..n) into out. */
static void list_names(const char *const *names, int n, char *out, size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
                                names[i]);
}

/* A string value of `field.key` that must be one of names[0..n). */
static int one_of(const json_t *hh, const char *key, const char *const *names, int n,
                  const char *what, const char *field, struct keel_error *err)
{
    const json_t *v = json_object_get(hh, key);
    char path[KEEL_JSON_PATH_MAX], list[256];

    if (!v || json_is_null(v))
        return KEEL_OK;
    for (int i = 0; json_is_string(v) && i < n; i++)
        if (!strcmp(json_string_value(v), names[i]))
            return KEEL_OK;
    keel_json_path_key(path, sizeof(path), field, key);
    list_names(names, n, list, sizeof(list));
    if (!json_is_string(v))
        return keel_error_set(err, KEEL_EINVAL, path, "must be %s (%s), not %s", what, list,
                              keel_json_type_name(v));
    return keel_error_set(err, KEEL_EINVAL, path, "must be %s (%s), not \"%.64s\"", what, list,
                          json_string_value(v));
}

static int earners_ok(const json_t *earners, const char *field, struct keel_error *err)
{
    char path[KEEL_JSON_PATH_MAX], item[KEEL_JSON_PATH_MAX], sub[KEEL_JSON_PATH_MAX];
    const json_t *e, *income;
    size_t i;

    keel_json_path_key(path, sizeof(path), field, "earners");
    if (!earners || json_is_null(earners))
        return KEEL_OK;
    if (!json_is_array(earners) || json_array_size(earners) > HOUSEHOLD_EARNERS_MAX)
        return keel_error_set(err, KEEL_EINVAL, path,
                              "must be a list of at most %d earners "
                              "[{\"employment_income\": pounds}], not %s",
                              HOUSEHOLD_EARNERS_MAX, keel_json_type_name(earners));
    json_array_foreach(earners, i, e) {
        keel_json_path_index(item, sizeof(item), path, i);
        if (!json_is_object(e))
            return keel_error_set(err, KEEL_EINVAL, item,
                                  "must be an object {\"employment_income\": pounds}, not %s",
                                  keel_json_type_name(e));
        income = json_object_get(e, "employment_income");
        keel_json_path_key(sub, sizeof(sub), item, "employment_income");
        if (!json_is_integer(income) || json_integer_value(income) < 0 ||
            json_integer_value(income) > HOUSEHOLD_AMOUNT_MAX)
            return keel_error_set(err, KEEL_EINVAL, sub,
                                  "must be whole pounds from 0 to %lld, not %s",
                                  HOUSEHOLD_AMOUNT_MAX,
                                  income ? keel_json_type_name(income) : "missing");
    }
    return KEEL_OK;
}

int household_check(const struct household *h, const json_t *hh, const char *field,
                    struct keel_error *err)
{
    const char *years[HH_MAX_YEARS];
    const json_t *children = json_object_get(hh, "children");
    char path[KEEL_JSON_PATH_MAX];
    int rc;

    if (!json_is_object(hh))
        return keel_error_set(err, KEEL_EINVAL, field, "must be an object, not %s",
                              keel_json_type_name(hh));
    for (int i = 0; i < h->n_years; i++)
        years[i] = h->years[i].name;
    if ((rc = one_of(hh, "country", h->countries, h->n_countries, "a country", field, err)) ||
        (rc = one_of(hh, "tax_year", years, h->n_years, "a tax year with figures", field, err)) ||
        (rc = one_of(hh, "marital_status", h->marital, h->n_marital, "a marital status", field,
                     err)) ||
        (rc = earners_ok(json_object_get(hh, "earners"), field, err)))
        return rc;
    if (children && !json_is_null(children) &&
        (!json_is_integer(children) || json_integer_value(children) < 0 ||
         json_integer_value(children) > HH_CHILDREN_MAX)) {
        keel_json_path_key(path, sizeof(path), field, "children");
        return keel_error_set(err, KEEL_EINVAL, path, "must be a count from 0 to %d, not %s",
                              HH_CHILDREN_MAX, keel_json_type_name(children));
    }
    return KEEL_OK;
}
