/*
 * policy_pack.c — compiles a pack's `policy` section into a struct policy:
 * the phrase tables into one lexicon, plus the search defaults, route
 * tools and topic classes. Every bad entry is reported as
 * "file:line: policy.path: what".
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/log.h"
#include "policy/policy_int.h"

static const struct {
    const char *name;
    enum policy_category category;
} phrase_tables[] = {
    {"request", CAT_REQUEST},         {"search_verb", CAT_SEARCH_VERB},
    {"paper_noun", CAT_PAPER_NOUN},   {"paper_ref", CAT_PAPER_REF},
    {"count_noun", CAT_COUNT_NOUN},   {"count_lead", CAT_COUNT_LEAD},
    {"recency", CAT_RECENCY},         {"open_access", CAT_OPEN_ACCESS},
    {"deictic", CAT_DEICTIC},         {"topic_lead", CAT_TOPIC_LEAD},
    {"filler", CAT_FILLER},           {"time_unit", CAT_TIME_UNIT},
    {"library", CAT_LIBRARY},         {"not_search", CAT_NOT_SEARCH},
    {"analysis", CAT_ANALYSIS},       {"smalltalk", CAT_SMALLTALK},
    {"command", CAT_COMMAND},         {"memory", CAT_MEMORY},
    {"conversion", CAT_CONVERSION},   {"unit", CAT_UNIT},
    {"web_explicit", CAT_WEB_EXPLICIT}, {"volatile", CAT_VOLATILE},
    {"veto", CAT_VETO},               {"refine", CAT_REFINE},
};

#define N_TABLES (sizeof(phrase_tables) / sizeof(phrase_tables[0]))

static const char *const year_actions[YEAR_ACTION_COUNT] = {
    [YEAR_WINDOW] = "window", [YEAR_SINCE] = "since", [YEAR_AFTER] = "after",
    [YEAR_BEFORE] = "before", [YEAR_UNTIL] = "until", [YEAR_EXACT] = "exact",
    [YEAR_RANGE] = "range",   [YEAR_AGO] = "ago",
};

static const char *const route_keys[POLICY_ROUTE_COUNT] = {
    [POLICY_ROUTE_COMMAND] = "command",
    [POLICY_ROUTE_LOCAL_MEMORY] = "local_memory_intent",
    [POLICY_ROUTE_CONVERSION] = "conversion_tool",
    [POLICY_ROUTE_WEBSEARCH] = "websearch",
    [POLICY_ROUTE_LLM_ONLY] = "llm_only",
};

/* Slot names usable in phrases: {unit}, {paper_noun}, … */
static int category_of_name(const char *name, size_t n)
{
    for (size_t i = 0; i < N_TABLES; i++)
        if (strlen(phrase_tables[i].name) == n && !memcmp(phrase_tables[i].name, name, n))
            return (int)phrase_tables[i].category;
    return -1;
}

static int add_phrase(struct policy *policy, int category, int value, const json_t *item,
                      const char *path, struct keel_error *err)
{
    struct keel_error inner;
    int rc;

    if (!json_is_string(item))
        return pack_fail(policy->pack, path, err, "must be a string, not %s",
                         keel_json_type_name(item));
    rc = lexicon_add(&policy->lex, category, value, json_string_value(item),
                     category_of_name, path, &inner);
    if (rc == KEEL_ENOMEM)
        return keel_error_set(err, rc, path, "out of memory");
    if (rc)
        return pack_fail(policy->pack, path, err, "%s", inner.message);
    return KEEL_OK;
}

static int add_list(struct policy *policy, int category, int value, const json_t *list,
                    const char *path, struct keel_error *err)
{
    char item_path[KEEL_JSON_PATH_MAX];
    json_t *item;
    size_t i;

    if (!json_is_array(list))
        return pack_fail(policy->pack, path, err, "must be a list of phrases");
    json_array_foreach(list, i, item) {
        int rc;
        keel_json_path_index(item_path, sizeof(item_path), path, i);
        if ((rc = add_phrase(policy, category, value, item, item_path, err)))
            return rc;
    }
    return KEEL_OK;
}

static int load_phrases(struct policy *policy, const json_t *phrases, struct keel_error *err)
{
    char path[KEEL_JSON_PATH_MAX];
    const char *key;
    json_t *list;

    if (!phrases)
        return KEEL_OK;
    if (!json_is_object(phrases))
        return pack_fail(policy->pack, "policy.phrases", err, "must map table names to lists");
    json_object_foreach((json_t *)phrases, key, list) {
        int category = category_of_name(key, strlen(key)), rc;
        keel_json_path_key(path, sizeof(path), "policy.phrases", key);
        if (category < 0)
            return pack_fail(policy->pack, path, err, "unknown phrase table \"%s\"", key);
        if ((rc = add_list(policy, category, 0, list, path, err)))
            return rc;
        if (category == CAT_REFINE)
            policy->n_refine += json_array_size(list);
    }
    return KEEL_OK;
}

static int load_numbers(struct policy *policy, const json_t *numbers, struct keel_error *err)
{
    char path[KEEL_JSON_PATH_MAX];
    const char *key;
    json_t *value;

    if (!numbers)
        return KEEL_OK;
    if (!json_is_object(numbers))
        return pack_fail(policy->pack, "policy.numbers", err, "must map number words to numbers");
    json_object_foreach((json_t *)numbers, key, value) {
        json_t *phrase;
        int rc;
        keel_json_path_key(path, sizeof(path), "policy.numbers", key);
        if (!json_is_integer(value) || json_integer_value(value) < 0 ||
            json_integer_value(value) > 1000)
            return pack_fail(policy->pack, path, err, "must be an integer from 0 to 1000");
        phrase = json_string(key);
        if (!phrase)
            return keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
        rc = add_phrase(policy, CAT_NUMBER, (int)json_integer_value(value), phrase, path, err);
        json_decref(phrase);
        if (rc)
            return rc;
    }
    return KEEL_OK;
}

static int count_substr(const char *text, const char *needle)
{
    int count = 0;

    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        count++;
    return count;
}

/* A year rule must carry what its action reads: one {year} (since, after,
 * before, until, exact), two (range), or a count — {n} or `n:` — (window,
 * ago). Otherwise the decision would read a slot that is not there. */
static int check_year_slots(struct policy *policy, const char *phrase, int action, int fixed,
                            const char *path, struct keel_error *err)
{
    int years = count_substr(phrase, "{year}"), counts = count_substr(phrase, "{n}");

    switch (action) {
    case YEAR_RANGE:
        if (years != 2)
            return pack_fail(policy->pack, path, err,
                             "a range needs two {year} slots, \"%s\" has %d", phrase, years);
        return KEEL_OK;
    case YEAR_WINDOW:
    case YEAR_AGO:
        if (years || (counts != 1 && !fixed) || (counts && fixed))
            return pack_fail(policy->pack, path, err,
                             "%s needs either one {n} slot or an n: value, and no {year}: \"%s\"",
                             year_actions[action], phrase);
        return KEEL_OK;
    default:
        if (years != 1 || counts || fixed)
            return pack_fail(policy->pack, path, err, "%s needs exactly one {year} slot: \"%s\"",
                             year_actions[action], phrase);
        return KEEL_OK;
    }
}

static int load_years(struct policy *policy, const json_t *years, struct keel_error *err)
{
    static const char *const keys[] = {"phrase", "action", "n", NULL};
    char path[KEEL_JSON_PATH_MAX];
    json_t *rule;
    size_t i;

    if (!years)
        return KEEL_OK;
    if (!json_is_array(years))
        return pack_fail(policy->pack, "policy.years", err, "must be a list of {phrase, action}");
    json_array_foreach(years, i, rule) {
        const char *action = NULL;
        long long fixed = 0;
        struct keel_error inner;
        int act = -1, rc;
        keel_json_path_index(path, sizeof(path), "policy.years", i);
        if (!json_is_object(rule))
            return pack_fail(policy->pack, path, err, "must be a mapping {phrase, action, n?}");
        if (keel_json_check_keys(rule, keys, path, &inner) ||
            keel_json_get_string(rule, "action", 1, path, &action, &inner) ||
            keel_json_get_int(rule, "n", 0, 1, 200, path, &fixed, &inner))
            return pack_fail(policy->pack, inner.field, err, "%s", inner.message);
        for (int a = 0; a < YEAR_ACTION_COUNT; a++)
            if (!strcmp(action, year_actions[a]))
                act = a;
        if (act < 0)
            return pack_fail(policy->pack, path, err,
                             "action \"%s\" is not one of window, since, after, before, until, exact, range, ago",
                             action);
        {
            char phrase_path[KEEL_JSON_PATH_MAX];
            json_t *phrase = json_object_get(rule, "phrase");
            keel_json_path_key(phrase_path, sizeof(phrase_path), path, "phrase");
            if (!phrase)
                return pack_fail(policy->pack, phrase_path, err, "is required");
            if (json_is_string(phrase) &&
                (rc = check_year_slots(policy, json_string_value(phrase), act, (int)fixed,
                                       phrase_path, err)))
                return rc;
            rc = add_phrase(policy, CAT_YEAR_RULE, act * 1000 + (int)fixed,
                            json_object_get(rule, "phrase"), phrase_path, err);
            if (rc)
                return rc;
        }
    }
    return KEEL_OK;
}

static int load_classes(struct policy *policy, const json_t *classes, struct keel_error *err)
{
    static const char *const keys[] = {"volatile", "phrases", NULL};
    char path[KEEL_JSON_PATH_MAX], list_path[KEEL_JSON_PATH_MAX];
    const char *name;
    json_t *spec;

    if (!classes)
        return KEEL_OK;
    if (!json_is_object(classes))
        return pack_fail(policy->pack, "policy.topic_classes", err,
                         "must map class names to {volatile, phrases}");
    json_object_foreach((json_t *)classes, name, spec) {
        struct keel_error inner;
        int is_volatile = 0, rc;
        keel_json_path_key(path, sizeof(path), "policy.topic_classes", name);
        if (policy->n_classes >= POLICY_MAX_CLASSES)
            return pack_fail(policy->pack, path, err, "at most %d topic classes",
                             POLICY_MAX_CLASSES);
        if (!json_is_object(spec))
            return pack_fail(policy->pack, path, err, "must be a mapping {volatile, phrases}");
        if (keel_json_check_keys(spec, keys, path, &inner) ||
            keel_json_get_bool(spec, "volatile", 0, path, &is_volatile, &inner))
            return pack_fail(policy->pack, inner.field, err, "%s", inner.message);
        keel_json_path_key(list_path, sizeof(list_path), path, "phrases");
        if (!json_object_get(spec, "phrases"))
            return pack_fail(policy->pack, list_path, err, "is required");
        policy->class_name[policy->n_classes] = name;
        policy->class_volatile[policy->n_classes] = is_volatile;
        rc = add_list(policy, CAT_TOPIC_CLASS, (int)policy->n_classes,
                      json_object_get(spec, "phrases"), list_path, err);
        if (rc)
            return rc;
        policy->n_classes++;
    }
    return KEEL_OK;
}

static int tool_by_name(struct policy *policy, const json_t *obj, const char *key,
                        const char *path, int *out, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    const char *name = NULL;
    struct keel_error inner;

    if (keel_json_get_string(obj, key, 0, path, &name, &inner))
        return pack_fail(policy->pack, inner.field, err, "%s", inner.message);
    if (!name)
        return KEEL_OK;
    *out = pack_tool_index(policy->pack, name, strlen(name));
    keel_json_path_key(field, sizeof(field), path, key);
    if (*out < 0)
        return pack_fail(policy->pack, field, err, "\"%s\" is not one of the pack's tools", name);
    return KEEL_OK;
}

static int load_search(struct policy *policy, const json_t *search, struct keel_error *err)
{
    static const char *const keys[] = {"tool", "stage_transition", "default_count", "max_count",
                                       "count_window", "recent_window_years", NULL};
    const char *path = "policy.search";
    long long default_count = 5, max_count = 50, window = 3, recent = 5;
    struct keel_error inner;
    int rc;

    if (!search)
        return KEEL_OK;
    if (!json_is_object(search))
        return pack_fail(policy->pack, path, err, "must be a mapping");
    if (keel_json_check_keys(search, keys, path, &inner) ||
        keel_json_get_string(search, "stage_transition", 0, path, &policy->stage_transition, &inner) ||
        keel_json_get_int(search, "max_count", 0, 1, 1000, path, &max_count, &inner) ||
        keel_json_get_int(search, "default_count", 0, 1, 1000, path, &default_count, &inner) ||
        keel_json_get_int(search, "count_window", 0, 1, 8, path, &window, &inner) ||
        keel_json_get_int(search, "recent_window_years", 0, 1, 100, path, &recent, &inner))
        return pack_fail(policy->pack, inner.field, err, "%s", inner.message);
    if (default_count > max_count)
        return pack_fail(policy->pack, "policy.search.default_count", err,
                         "%lld is more than max_count %lld", default_count, max_count);
    policy->default_count = (int)default_count;
    policy->max_count = (int)max_count;
    policy->count_window = (int)window;
    policy->recent_window_years = (int)recent;
    if ((rc = tool_by_name(policy, search, "tool", path, &policy->search_tool, err)))
        return rc;
    return KEEL_OK;
}

static int load_routes(struct policy *policy, const json_t *routes, struct keel_error *err)
{
    static const char *const keys[] = {"command_prefixes", "tools", NULL};
    const char *path = "policy.routes";
    struct keel_error inner;
    json_t *prefixes, *tools, *item;
    size_t i;

    if (!routes)
        return KEEL_OK;
    if (!json_is_object(routes))
        return pack_fail(policy->pack, path, err, "must be a mapping");
    if (keel_json_check_keys(routes, keys, path, &inner))
        return pack_fail(policy->pack, inner.field, err, "%s", inner.message);
    prefixes = json_object_get(routes, "command_prefixes");
    if (prefixes) {
        if (!json_is_array(prefixes) || json_array_size(prefixes) > POLICY_MAX_PREFIXES)
            return pack_fail(policy->pack, "policy.routes.command_prefixes", err,
                             "must be a list of at most %d strings", POLICY_MAX_PREFIXES);
        json_array_foreach(prefixes, i, item) {
            char item_path[KEEL_JSON_PATH_MAX];
            keel_json_path_index(item_path, sizeof(item_path), "policy.routes.command_prefixes", i);
            if (!json_is_string(item) || json_string_length(item) == 0)
                return pack_fail(policy->pack, item_path, err, "must be a non-empty string");
            policy->command_prefixes[policy->n_command_prefixes++] = json_string_value(item);
        }
    }
    tools = json_object_get(routes, "tools");
    if (tools) {
        const char *key;
        json_t *value;
        if (!json_is_object(tools))
            return pack_fail(policy->pack, "policy.routes.tools", err,
                             "must map route names to tool names");
        json_object_foreach(tools, key, value) {
            char field[KEEL_JSON_PATH_MAX];
            int route = -1, rc;
            (void)value;
            keel_json_path_key(field, sizeof(field), "policy.routes.tools", key);
            for (int r = 0; r < POLICY_ROUTE_COUNT; r++)
                if (!strcmp(route_keys[r], key))
                    route = r;
            if (route < 0)
                return pack_fail(policy->pack, field, err, "\"%s\" is not a route", key);
            if ((rc = tool_by_name(policy, tools, key, "policy.routes.tools",
                                   &policy->route_tool[route], err)))
                return rc;
        }
    }
    return KEEL_OK;
}

int policy_new(const struct pack *pack, struct policy **out, struct keel_error *err)
{
    static const char *const keys[] = {"search", "routes", "phrases", "numbers", "years",
                                       "topic_classes", NULL};
    struct policy *policy = keel_calloc(1, sizeof(*policy));
    json_t *section = json_object_get(pack->doc, "policy");
    struct keel_error inner;
    int rc = KEEL_ENOMEM;

    if (!policy)
        return keel_error_set(err, KEEL_ENOMEM, pack->origin, "out of memory");
    policy->pack = pack;
    lexicon_init(&policy->lex);
    policy->search_tool = -1;
    for (int r = 0; r < POLICY_ROUTE_COUNT; r++)
        policy->route_tool[r] = -1;
    policy->default_count = 5;
    policy->max_count = 50;
    policy->count_window = 3;
    policy->recent_window_years = 5;
    if (!section) {
        rc = pack_fail(pack, "policy", err, "is required");
        goto out;
    }
    if (!json_is_object(section)) {
        rc = pack_fail(pack, "policy", err, "must be a mapping");
        goto out;
    }
    if (keel_json_check_keys(section, keys, "policy", &inner)) {
        rc = pack_fail(pack, inner.field, err, "%s", inner.message);
        goto out;
    }
    if ((rc = load_search(policy, json_object_get(section, "search"), err)) ||
        (rc = load_routes(policy, json_object_get(section, "routes"), err)) ||
        (rc = load_phrases(policy, json_object_get(section, "phrases"), err)) ||
        (rc = load_numbers(policy, json_object_get(section, "numbers"), err)) ||
        (rc = load_years(policy, json_object_get(section, "years"), err)) ||
        (rc = load_classes(policy, json_object_get(section, "topic_classes"), err)))
        goto out;
    lexicon_set_number_category(&policy->lex, CAT_NUMBER);
    if ((rc = lexicon_compile(&policy->lex))) {
        keel_error_set(err, rc, pack->origin, "out of memory");
        goto out;
    }
    *out = policy;
    policy = NULL;
    rc = KEEL_OK;
out:
    policy_free(policy);
    return rc;
}

int policy_load(const char *dir, const char *name, struct pack **pack, struct policy **policy,
                struct keel_error *err)
{
    int rc = pack_load(dir, name, pack, err);

    if (rc)
        return rc;
    rc = policy_new(*pack, policy, err);
    if (rc) {
        pack_free(*pack);
        *pack = NULL;
        return rc;
    }
    keel_log(KEEL_LOG_DEBUG, "pack.loaded",
             json_pack("{s:s,s:s,s:i,s:i}", "pack", (*pack)->name, "file", (*pack)->origin,
                       "tools", (int)(*pack)->n_tools, "roles", (int)(*pack)->n_roles));
    return KEEL_OK;
}

void policy_free(struct policy *policy)
{
    if (!policy)
        return;
    lexicon_release(&policy->lex);
    keel_free(policy);
}

const struct pack *policy_pack(const struct policy *policy)
{
    return policy->pack;
}
