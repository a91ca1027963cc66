/*
 * state_search.c — the thread state's last search (state.h): its checks
 * and its JSON, "last_search": null or {query, count, year_from,
 * year_to, open_access_only}. Decide records it after each search the
 * policy forced and hands it to policy_refine, so a follow-up like "only
 * open access ones" runs that search again, narrowed.
 */
#include "pipeline/state.h"

#include <string.h>

#include "core/json.h"
#include "core/utf8.h"

static int year_ok(int year)
{
    return year == 0 || (year >= 1900 && year <= 9999);
}

int state_search_check(const struct state_search *s, struct keel_error *err)
{
    size_t n = strnlen(s->query, sizeof(s->query));

    if (n == sizeof(s->query))
        return keel_error_set(err, KEEL_ETOOBIG, "last_search.query", "is longer than %zu bytes",
                              sizeof(s->query) - 1);
    if (!n || utf8_valid_prefix(s->query, n) != n)
        return keel_error_set(err, KEEL_EINVAL, "last_search.query",
                              "must be non-empty UTF-8 text");
    if (s->count < 1 || s->count > STATE_SEARCH_COUNT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "last_search.count", "must be 1 to %d",
                              STATE_SEARCH_COUNT_MAX);
    if (!year_ok(s->year_from) || !year_ok(s->year_to))
        return keel_error_set(err, KEEL_EINVAL, !year_ok(s->year_from) ? "last_search.year_from"
                                                                       : "last_search.year_to",
                              "must be null or a year from 1900 to 9999");
    if (s->year_from && s->year_to && s->year_from > s->year_to)
        return keel_error_set(err, KEEL_EINVAL, "last_search.year_from",
                              "must not be after year_to");
    return KEEL_OK;
}

static json_t *year_json(int year)
{
    return year ? json_integer(year) : json_null();
}

json_t *state_search_json(const struct state_search *s)
{
    if (!s || !s->set)
        return json_null();
    return json_pack("{s:s, s:i, s:o, s:o, s:b}", "query", s->query, "count", s->count,
                     "year_from", year_json(s->year_from), "year_to", year_json(s->year_to),
                     "open_access_only", s->open_access_only);
}

/* Reads key `key` of `obj`, a year or null, into *year. */
static int read_year(const json_t *obj, const char *key, int *year, struct keel_error *err)
{
    const json_t *v = json_object_get(obj, key);
    long long value = 0;
    int rc;

    *year = 0;
    if (!v || json_is_null(v))
        return KEEL_OK;
    if ((rc = keel_json_get_int(obj, key, 1, 1900, 9999, "last_search", &value, err)))
        return rc;
    *year = (int)value;
    return KEEL_OK;
}

int state_search_from_json(struct state_search *s, const json_t *json, struct keel_error *err)
{
    static const char *const keys[] = {"query", "count", "year_from", "year_to",
                                       "open_access_only", NULL};
    const char *query = NULL;
    long long count = 0;
    int rc;

    memset(s, 0, sizeof(*s));
    if (!json || json_is_null(json))
        return KEEL_OK;
    if (!json_is_object(json))
        return keel_error_set(err, KEEL_EINVAL, "last_search", "must be an object or null");
    if ((rc = keel_json_check_keys(json, keys, "last_search", err)) ||
        (rc = keel_json_get_string(json, "query", 1, "last_search", &query, err)) ||
        (rc = keel_json_get_int(json, "count", 1, 1, STATE_SEARCH_COUNT_MAX, "last_search",
                                &count, err)) ||
        (rc = read_year(json, "year_from", &s->year_from, err)) ||
        (rc = read_year(json, "year_to", &s->year_to, err)) ||
        (rc = keel_json_get_bool(json, "open_access_only", 1, "last_search",
                                 &s->open_access_only, err)))
        goto fail;
    if (strlen(query) >= sizeof(s->query)) {
        rc = keel_error_set(err, KEEL_ETOOBIG, "last_search.query", "is longer than %zu bytes",
                            sizeof(s->query) - 1);
        goto fail;
    }
    memcpy(s->query, query, strlen(query) + 1);
    s->count = (int)count;
    if ((rc = state_search_check(s, err)))
        goto fail;
    s->set = 1;
    return KEEL_OK;
fail:
    memset(s, 0, sizeof(*s));
    return rc;
}
