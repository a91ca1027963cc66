/*
 * expect.c — the expectation table. Each row names a key of `expect`, the
 * field of the decision JSON it reads, and how it compares:
 *
 *   equal         the values are equal JSON (null means must be null)
 *   object        a nested table (null means the field must be null)
 *   contains      a list of strings, each a case-insensitive substring
 *   not_contains  a list of strings, none a case-insensitive substring
 *   includes      a list of strings, each an element of the array field
 *   excludes      a list of strings, none an element of the array field
 */
#include "replay/expect.h"

#include <string.h>

#include "core/json.h"

enum check_kind { EQUAL, OBJECT, CONTAINS, NOT_CONTAINS, INCLUDES, EXCLUDES };

/* JSON types an EQUAL expectation may have; a wrong type is a fixture
 * error, not a mismatch. */
#define T_STRING 1
#define T_BOOL 2
#define T_INT 4
#define T_NULL 8

struct expect_key {
    const char *key;                    /* key in `expect` */
    const char *field;                  /* field of the decision JSON */
    enum check_kind kind;
    const struct expect_key *children;  /* for OBJECT */
    int types;                          /* for EQUAL: T_* allowed */
};

static const struct expect_key search_keys[] = {
    {"query", "query", EQUAL, NULL, T_STRING},
    {"query_contains", "query", CONTAINS, NULL, 0},
    {"query_not_contains", "query", NOT_CONTAINS, NULL, 0},
    {"count", "count", EQUAL, NULL, T_INT},
    {"year_from", "year_from", EQUAL, NULL, T_INT | T_NULL},
    {"year_to", "year_to", EQUAL, NULL, T_INT | T_NULL},
    {"open_access_only", "open_access_only", EQUAL, NULL, T_BOOL},
    {NULL, NULL, EQUAL, NULL, 0},
};

static const struct expect_key signal_keys[] = {
    {"explicit", "explicit", EQUAL, NULL, T_BOOL},
    {"volatile", "volatile", EQUAL, NULL, T_BOOL},
    {"topic_class", "topic_class", EQUAL, NULL, T_STRING | T_NULL},
    {NULL, NULL, EQUAL, NULL, 0},
};

static const struct expect_key turn_keys[] = {
    {"intent", "intent", EQUAL, NULL, T_STRING},
    {"route", "route", EQUAL, NULL, T_STRING},
    {"tool_veto", "tool_veto", EQUAL, NULL, T_BOOL},
    {"reason", "reason", EQUAL, NULL, T_STRING},
    {"signals", "signals", OBJECT, signal_keys, 0},
    {"force_tool", "force_tool", EQUAL, NULL, T_STRING | T_NULL},
    {"search", "search", OBJECT, search_keys, 0},
    {"stage_transition", "stage_transition", EQUAL, NULL, T_STRING | T_NULL},
    {"reasons_include", "reasons", INCLUDES, NULL, 0},
    {"reasons_exclude", "reasons", EXCLUDES, NULL, 0},
    {NULL, NULL, EQUAL, NULL, 0},
};

struct run {
    expect_report_fn report;
    void *ctx;
    int mismatches;
    struct keel_error *err;
};

static void mismatch(struct run *run, const char *field, const json_t *expected,
                     const json_t *actual)
{
    run->mismatches++;
    run->report(run->ctx, field, expected, actual);
}

static int string_list(const json_t *list, const char *field, struct keel_error *err)
{
    json_t *item;
    size_t i;

    if (!json_is_array(list))
        return keel_error_set(err, KEEL_EINVAL, field, "must be a list of strings");
    json_array_foreach(list, i, item)
        if (!json_is_string(item))
            return keel_error_set(err, KEEL_EINVAL, field, "item %zu must be a string", i);
    return KEEL_OK;
}

static int array_has(const json_t *array, const char *text)
{
    json_t *item;
    size_t i;

    json_array_foreach(array, i, item)
        if (json_is_string(item) && !strcmp(json_string_value(item), text))
            return 1;
    return 0;
}

static int check_table(struct run *run, const struct expect_key *table, const json_t *expect,
                       const json_t *actual, const char *path);

static int type_bit(const json_t *value)
{
    if (json_is_string(value))
        return T_STRING;
    if (json_is_boolean(value))
        return T_BOOL;
    if (json_is_integer(value))
        return T_INT;
    if (json_is_null(value))
        return T_NULL;
    return 0;
}

static const char *type_names(int types)
{
    switch (types) {
    case T_STRING: return "a string";
    case T_BOOL: return "true or false";
    case T_INT: return "an integer";
    case T_INT | T_NULL: return "an integer or null";
    case T_STRING | T_NULL: return "a string or null";
    default: return "another type";
    }
}

static int check_one(struct run *run, const struct expect_key *row, const json_t *expected,
                     const json_t *actual, const char *field)
{
    json_t *item;
    size_t i;
    int rc;

    switch (row->kind) {
    case EQUAL:
        if (!json_equal((json_t *)expected, actual ? (json_t *)actual : json_null()))
            mismatch(run, field, expected, actual);
        return KEEL_OK;
    case OBJECT:
        if (json_is_null(expected)) {
            if (actual && !json_is_null(actual))
                mismatch(run, field, expected, actual);
            return KEEL_OK;
        }
        if (!json_is_object(expected))
            return keel_error_set(run->err, KEEL_EINVAL, field, "must be an object or null");
        if (!json_is_object(actual)) {
            /* Still validate the expected keys, then report the mismatch. */
            rc = check_table(run, row->children, expected, NULL, field);
            if (!rc)
                mismatch(run, field, expected, actual);
            return rc;
        }
        return check_table(run, row->children, expected, actual, field);
    case CONTAINS:
    case NOT_CONTAINS:
        if ((rc = string_list(expected, field, run->err)))
            return rc;
        json_array_foreach(expected, i, item) {
            const char *hay = json_is_string(actual) ? json_string_value(actual) : "";
            int found = strcasestr(hay, json_string_value(item)) != NULL;
            if (found != (row->kind == CONTAINS)) {
                mismatch(run, field, item, actual);
            }
        }
        return KEEL_OK;
    case INCLUDES:
    case EXCLUDES:
        if ((rc = string_list(expected, field, run->err)))
            return rc;
        json_array_foreach(expected, i, item) {
            int found = json_is_array(actual) && array_has(actual, json_string_value(item));
            if (found != (row->kind == INCLUDES))
                mismatch(run, field, item, actual);
        }
        return KEEL_OK;
    }
    return KEEL_OK;
}

static int check_table(struct run *run, const struct expect_key *table, const json_t *expect,
                       const json_t *actual, const char *path)
{
    char field[KEEL_JSON_PATH_MAX];
    const char *key;
    json_t *expected;

    json_object_foreach((json_t *)expect, key, expected) {
        const struct expect_key *row = table;
        int rc;
        while (row->key && strcmp(row->key, key))
            row++;
        keel_json_path_key(field, sizeof(field), path, key);
        if (!row->key)
            return keel_error_set(run->err, KEEL_EINVAL, field, "unknown key \"%s\"", key);
        if (!actual) {
            /* Validation pass (or parent missing): check the shape only. */
            if (row->kind == EQUAL && !(row->types & type_bit(expected)))
                return keel_error_set(run->err, KEEL_EINVAL, field, "must be %s, not %s",
                                      type_names(row->types), keel_json_type_name(expected));
            if (row->kind == OBJECT && json_is_object(expected)) {
                if ((rc = check_table(run, row->children, expected, NULL, field)))
                    return rc;
            } else if (row->kind != EQUAL && row->kind != OBJECT &&
                       (rc = string_list(expected, field, run->err))) {
                return rc;
            }
            continue;
        }
        rc = check_one(run, row, expected, json_object_get(actual, row->field), field);
        if (rc)
            return rc;
    }
    return KEEL_OK;
}

int expect_check(const json_t *expect, const json_t *actual, const char *path,
                 expect_report_fn report, void *ctx, int *mismatches,
                 struct keel_error *err)
{
    struct run run = {report, ctx, 0, err};
    int rc;

    if (!json_is_object(expect))
        return keel_error_set(err, KEEL_EINVAL, path, "must be an object");
    /* Validate the whole object first so a typo is an error, not a miss. */
    rc = check_table(&run, turn_keys, expect, NULL, path);
    if (rc)
        return rc;
    run.mismatches = 0;
    rc = check_table(&run, turn_keys, expect, actual, path);
    *mismatches = run.mismatches;
    return rc;
}
