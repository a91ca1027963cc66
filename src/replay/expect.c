/*
 * expect.c — the expectation table. Each row names a key of `expect`, the
 * field of the actual JSON it reads ("a.b" reads a nested field), what it
 * reads of that field (the view) and how it compares:
 *
 *   equal         the values are equal JSON (null means must be null)
 *   object        a nested table (null means the field must be null)
 *   contains      a list of strings, each a case-insensitive substring
 *   not_contains  a list of strings, none a case-insensitive substring
 *   includes      a list of strings, each an element of the array field
 *   excludes      a list of strings, none an element of the array field
 *   list          a list of strings, equal to the array field (same order)
 *   subset        objects: each given key matches, extra actual keys are
 *                 fine, null matches a missing key; lists: the same length
 *                 and each item matches; numbers: equal value
 *   at_least      an integer n >= 0: the field is at least n
 *
 * Views turn the field into what is compared:
 *
 *   as_is         the field itself
 *   size          the number of items of an array field (missing otherwise)
 *   text          the field serialised as compact JSON (a string)
 *   starts        the `stage` of each event of kind "start", in order
 *   paths         the `path` of each item of an array field, in order
 *
 * The decision keys (turn_keys) work for every case; the pipeline keys
 * (pipeline_keys) read the turn result and are fixture errors outside a
 * pipeline case.
 */
#include "replay/expect.h"

#include <string.h>

#include "core/alloc.h"
#include "core/json.h"

enum check_kind { EQUAL, OBJECT, CONTAINS, NOT_CONTAINS, INCLUDES, EXCLUDES, LIST, SUBSET, AT_LEAST };

enum view { AS_IS, SIZE, TEXT, STARTS, PATHS };

/* JSON types an EQUAL or SUBSET expectation may have; a wrong type is a
 * fixture error, not a mismatch. */
#define T_STRING 1
#define T_BOOL 2
#define T_INT 4
#define T_NULL 8
#define T_REAL 16
#define T_OBJECT 32
#define T_ARRAY 64

struct expect_key {
    const char *key;                    /* key in `expect` */
    const char *field;                  /* field of the actual JSON ("a.b": nested) */
    enum check_kind kind;
    const struct expect_key *children;  /* for OBJECT */
    int types;                          /* for EQUAL and SUBSET: T_* allowed */
    enum view view;                     /* what of the field is compared */
};

static const struct expect_key search_keys[] = {
    {"query", "query", EQUAL, NULL, T_STRING, AS_IS},
    {"query_contains", "query", CONTAINS, NULL, 0, AS_IS},
    {"query_not_contains", "query", NOT_CONTAINS, NULL, 0, AS_IS},
    {"count", "count", EQUAL, NULL, T_INT, AS_IS},
    {"year_from", "year_from", EQUAL, NULL, T_INT | T_NULL, AS_IS},
    {"year_to", "year_to", EQUAL, NULL, T_INT | T_NULL, AS_IS},
    {"open_access_only", "open_access_only", EQUAL, NULL, T_BOOL, AS_IS},
    {NULL, NULL, EQUAL, NULL, 0, AS_IS},
};

static const struct expect_key signal_keys[] = {
    {"explicit", "explicit", EQUAL, NULL, T_BOOL, AS_IS},
    {"volatile", "volatile", EQUAL, NULL, T_BOOL, AS_IS},
    {"topic_class", "topic_class", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {NULL, NULL, EQUAL, NULL, 0, AS_IS},
};

static const struct expect_key turn_keys[] = {
    {"intent", "intent", EQUAL, NULL, T_STRING, AS_IS},
    {"route", "route", EQUAL, NULL, T_STRING, AS_IS},
    {"tool_veto", "tool_veto", EQUAL, NULL, T_BOOL, AS_IS},
    {"reason", "reason", EQUAL, NULL, T_STRING, AS_IS},
    {"signals", "signals", OBJECT, signal_keys, 0, AS_IS},
    {"force_tool", "force_tool", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"search", "search", OBJECT, search_keys, 0, AS_IS},
    {"stage_transition", "stage_transition", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"reasons_include", "reasons", INCLUDES, NULL, 0, AS_IS},
    {"reasons_exclude", "reasons", EXCLUDES, NULL, 0, AS_IS},
    {NULL, NULL, EQUAL, NULL, 0, AS_IS},
};

/* Fields of the thread state (the turn result's `state`). */
static const struct expect_key state_keys[] = {
    {"stage", "stage", EQUAL, NULL, T_STRING, AS_IS},
    {"stage_confidence", "stage_confidence", SUBSET, NULL, T_INT | T_REAL, AS_IS},
    {"stage_history", "stage_history", SUBSET, NULL, T_ARRAY, AS_IS},
    {"stage_history_len", "stage_history", EQUAL, NULL, T_INT, SIZE},
    {"research_question", "research_question", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"research_topic", "research_topic", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"jurisdiction", "jurisdiction", SUBSET, NULL, T_OBJECT, AS_IS},
    {"open_slots", "open_slots", LIST, NULL, 0, AS_IS},
    {"suggested", "suggested", SUBSET, NULL, T_OBJECT, AS_IS},
    {"refined_query", "refined_query", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"blueprint", "blueprint", SUBSET, NULL, T_OBJECT | T_NULL, AS_IS},
    {"last_search", "last_search", SUBSET, NULL, T_OBJECT | T_NULL, AS_IS},
    {"turns", "turns", EQUAL, NULL, T_INT, AS_IS},
    {NULL, NULL, EQUAL, NULL, 0, AS_IS},
};

/* Keys of the turn result (pipeline cases only). */
static const struct expect_key pipeline_keys[] = {
    {"stage", "stage", EQUAL, NULL, T_STRING, AS_IS},
    {"kind", "kind", EQUAL, NULL, T_STRING, AS_IS},
    {"tools_called", "tools_called", LIST, NULL, 0, AS_IS},
    {"tool_args", "tool_args", SUBSET, NULL, T_OBJECT, AS_IS},
    {"clarification", "clarification", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"clarification_contains", "clarification", CONTAINS, NULL, 0, AS_IS},
    {"answer_contains", "answer", CONTAINS, NULL, 0, AS_IS},
    {"closing", "closing", EQUAL, NULL, T_BOOL, AS_IS},
    {"reset", "reset", EQUAL, NULL, T_BOOL, AS_IS},
    {"answer_not_contains", "answer", NOT_CONTAINS, NULL, 0, AS_IS},
    {"sources_min", "sources", AT_LEAST, NULL, T_INT, SIZE},
    {"state", "state", OBJECT, state_keys, 0, AS_IS},
    {"state_not_contains", "state", NOT_CONTAINS, NULL, 0, TEXT},
    {"refined_query", "refined_query", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"events_order", "events", LIST, NULL, 0, STARTS},
    {"blueprint_subquestions", "blueprint.subquestions", EQUAL, NULL, T_INT, SIZE},
    {"blueprint_paths", "blueprint.subquestions", LIST, NULL, 0, PATHS},
    /* seed 001's artifacts: the type built (null: none), the gate's
     * reason (or a failed build's), how many facts were distilled */
    {"artifact", "artifact.type", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"artifact_reason", "artifact_gate.reason", EQUAL, NULL, T_STRING, AS_IS},
    {"facts", "artifact.facts", EQUAL, NULL, T_INT, AS_IS},
    /* the active scenario (seed 004); scenario_error: a scenario_patch step's refusal */
    {"active_scenario", "active_scenario", SUBSET, NULL, T_OBJECT | T_NULL, AS_IS},
    {"active_scenario_text", "active_scenario", EQUAL, NULL, T_STRING | T_NULL, TEXT},
    {"scenario_summary", "scenario_summary", EQUAL, NULL, T_STRING | T_NULL, AS_IS},
    {"scenario_changes", "scenario_changes", SUBSET, NULL, T_ARRAY | T_NULL, AS_IS},
    {"scenario_error", "scenario_error", SUBSET, NULL, T_OBJECT | T_NULL, AS_IS},
    {NULL, NULL, EQUAL, NULL, 0, AS_IS},
};

struct run {
    expect_report_fn report;
    void *ctx;
    int mismatches;
    int pipeline;        /* pipeline_keys are allowed at the top level */
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

static int check_table(struct run *run, const struct expect_key *table,
                       const struct expect_key *more, const json_t *expect,
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
    if (json_is_real(value))
        return T_REAL;
    if (json_is_object(value))
        return T_OBJECT;
    if (json_is_array(value))
        return T_ARRAY;
    return 0;
}

/* "a string or null", "an object", "an integer or a number", … */
static const char *type_names(int types, char *out, size_t n)
{
    static const struct {
        int bit;
        const char *name;
    } names[] = {
        {T_STRING, "a string"}, {T_BOOL, "true or false"}, {T_INT, "an integer"},
        {T_REAL, "a number"},   {T_OBJECT, "an object"},   {T_ARRAY, "a list"},
        {T_NULL, "null"},
    };
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (types & names[i].bit)
            len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", len ? " or " : "",
                                    names[i].name);
    return out;
}

/* The field `path` ("a.b.c") of `actual`, or NULL. */
static json_t *lookup(const json_t *actual, const char *path)
{
    json_t *at = (json_t *)actual;

    while (at && json_is_object(at)) {
        const char *dot = strchr(path, '.');
        if (!dot)
            return json_object_get(at, path);
        at = json_object_getn(at, path, (size_t)(dot - path));
        path = dot + 1;
    }
    return NULL;
}

/* What row->view makes of `value` (NULL when missing): a new reference, or
 * NULL with *oom set when memory ran out. */
static json_t *apply_view(enum view view, json_t *value, int *oom)
{
    json_t *out, *item;
    size_t i;
    char *text;

    *oom = 0;
    if (view == AS_IS || !value)
        return json_incref(value);
    if (view == TEXT) {
        text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
        out = text ? json_string(text) : NULL;
        keel_free(text);
        *oom = !out;
        return out;
    }
    if (!json_is_array(value))
        return NULL;
    if (view == SIZE)
        return (*oom = !(out = json_integer((json_int_t)json_array_size(value)))) ? NULL : out;
    if (!(out = json_array())) {
        *oom = 1;
        return NULL;
    }
    json_array_foreach(value, i, item) {
        json_t *pick;
        if (view == STARTS) {
            const char *kind = json_string_value(json_object_get(item, "kind"));
            if (!kind || strcmp(kind, "start"))
                continue;
            pick = json_object_get(item, "stage");
        } else {
            pick = json_object_get(item, "path");
        }
        if (json_array_append(out, pick ? pick : json_null())) {
            json_decref(out);
            *oom = 1;
            return NULL;
        }
    }
    return out;
}

/* Subset match of `expected` in `actual`, reporting at the deepest object
 * key that differs. */
static void subset(struct run *run, const json_t *expected, const json_t *actual,
                   const char *field)
{
    char child[KEEL_JSON_PATH_MAX];
    const char *key;
    json_t *value;
    size_t i;

    if (json_is_null(expected)) {
        if (actual && !json_is_null(actual))
            mismatch(run, field, expected, actual);
        return;
    }
    if (json_is_object(expected)) {
        if (!json_is_object(actual)) {
            mismatch(run, field, expected, actual);
            return;
        }
        json_object_foreach((json_t *)expected, key, value) {
            keel_json_path_key(child, sizeof(child), field, key);
            subset(run, value, json_object_get(actual, key), child);
        }
        return;
    }
    if (json_is_array(expected)) {
        int same = json_is_array(actual) && json_array_size(actual) == json_array_size(expected);
        int before = run->mismatches;
        for (i = 0; same && i < json_array_size(expected); i++) {
            keel_json_path_index(child, sizeof(child), field, i);
            subset(run, json_array_get(expected, i), json_array_get(actual, i), child);
        }
        if (!same && before == run->mismatches)
            mismatch(run, field, expected, actual);
        return;
    }
    if (json_is_number(expected)) {
        if (!json_is_number(actual) || json_number_value(expected) != json_number_value(actual))
            mismatch(run, field, expected, actual);
        return;
    }
    if (!actual || !json_equal((json_t *)expected, (json_t *)actual))
        mismatch(run, field, expected, actual);
}

/* Checks the shape of an expected value: a wrong type is a fixture error. */
static int validate(struct run *run, const struct expect_key *row, const json_t *expected,
                    const char *field)
{
    char names[96];

    switch (row->kind) {
    case EQUAL:
    case SUBSET:
    case AT_LEAST:
        if (!(row->types & type_bit(expected)))
            return keel_error_set(run->err, KEEL_EINVAL, field, "must be %s, not %s",
                                  type_names(row->types, names, sizeof(names)),
                                  keel_json_type_name(expected));
        if (row->kind == AT_LEAST && json_integer_value(expected) < 0)
            return keel_error_set(run->err, KEEL_EINVAL, field,
                                  "must be 0 or more (a negative minimum cannot fail)");
        return KEEL_OK;
    case OBJECT:
        if (json_is_null(expected))
            return KEEL_OK;
        if (!json_is_object(expected))
            return keel_error_set(run->err, KEEL_EINVAL, field, "must be an object or null");
        return check_table(run, row->children, NULL, expected, NULL, field);
    default:
        return string_list(expected, field, run->err);
    }
}

/* Compares `actual` (the field through the row's view) with `expected`;
 * mismatches show `shown`. */
static int check_one(struct run *run, const struct expect_key *row, const json_t *expected,
                     const json_t *actual, const json_t *shown, const char *field)
{
    json_t *item;
    size_t i;

    switch (row->kind) {
    case EQUAL:
    case LIST:
        if (!json_equal((json_t *)expected, actual ? (json_t *)actual : json_null()))
            mismatch(run, field, expected, shown);
        return KEEL_OK;
    case SUBSET:
        subset(run, expected, actual, field);
        return KEEL_OK;
    case AT_LEAST:
        if (!json_is_integer(actual) || json_integer_value(actual) < json_integer_value(expected))
            mismatch(run, field, expected, shown);
        return KEEL_OK;
    case OBJECT:
        if (json_is_null(expected)) {
            if (actual && !json_is_null(actual))
                mismatch(run, field, expected, shown);
            return KEEL_OK;
        }
        if (!json_is_object(actual)) {
            mismatch(run, field, expected, shown);
            return KEEL_OK;
        }
        return check_table(run, row->children, NULL, expected, actual, field);
    case CONTAINS:
    case NOT_CONTAINS:
        json_array_foreach(expected, i, item) {
            const char *hay = json_is_string(actual) ? json_string_value(actual) : "";
            int found = strcasestr(hay, json_string_value(item)) != NULL;
            if (found != (row->kind == CONTAINS))
                mismatch(run, field, item, shown);
        }
        return KEEL_OK;
    case INCLUDES:
    case EXCLUDES:
        json_array_foreach(expected, i, item) {
            int found = json_is_array(actual) && array_has(actual, json_string_value(item));
            if (found != (row->kind == INCLUDES))
                mismatch(run, field, item, shown);
        }
        return KEEL_OK;
    }
    return KEEL_OK;
}

static const struct expect_key *find_row(const struct expect_key *table, const char *key)
{
    while (table && table->key && strcmp(table->key, key))
        table++;
    return table && table->key ? table : NULL;
}

/* Checks `expect` against the rows of `table` (and of `more`, at the top
 * level of a pipeline case). With `actual` NULL it only validates. */
static int check_table(struct run *run, const struct expect_key *table,
                       const struct expect_key *more, const json_t *expect,
                       const json_t *actual, const char *path)
{
    char field[KEEL_JSON_PATH_MAX];
    const char *key;
    json_t *expected;

    json_object_foreach((json_t *)expect, key, expected) {
        const struct expect_key *row = find_row(table, key);
        json_t *raw, *value;
        int rc, oom;

        keel_json_path_key(field, sizeof(field), path, key);
        if (!row && more && (row = find_row(more, key)) && !run->pipeline)
            return keel_error_set(run->err, KEEL_EINVAL, field,
                                  "\"%s\" is checked only in pipeline cases (\"pipeline\": true)",
                                  key);
        if (!row)
            return keel_error_set(run->err, KEEL_EINVAL, field, "unknown key \"%s\"", key);
        if (!actual) {
            if ((rc = validate(run, row, expected, field)))
                return rc;
            continue;
        }
        raw = lookup(actual, row->field);
        value = apply_view(row->view, raw, &oom);
        if (oom)
            return keel_error_set(run->err, KEEL_ENOMEM, field, "out of memory");
        /* A failed text search shows the field itself, not its escaped text. */
        rc = check_one(run, row, expected, value, row->view == TEXT ? raw : value, field);
        json_decref(value);
        if (rc)
            return rc;
    }
    return KEEL_OK;
}

int expect_check_turn(const json_t *expect, const json_t *actual, int pipeline, const char *path,
                      expect_report_fn report, void *ctx, int *mismatches,
                      struct keel_error *err)
{
    struct run run = {report, ctx, 0, pipeline, err};
    int rc;

    if (!json_is_object(expect))
        return keel_error_set(err, KEEL_EINVAL, path, "must be an object");
    /* Validate the whole object first so a typo is an error, not a miss. */
    rc = check_table(&run, turn_keys, pipeline_keys, expect, NULL, path);
    if (rc)
        return rc;
    run.mismatches = 0;
    rc = check_table(&run, turn_keys, pipeline_keys, expect, actual, path);
    *mismatches = run.mismatches;
    return rc;
}

int expect_check(const json_t *expect, const json_t *actual, const char *path,
                 expect_report_fn report, void *ctx, int *mismatches,
                 struct keel_error *err)
{
    return expect_check_turn(expect, actual, 0, path, report, ctx, mismatches, err);
}
