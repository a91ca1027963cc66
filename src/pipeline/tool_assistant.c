/*
 * tool_assistant.c — the assistant pack's tools (see tools.h): the
 * converter, the web-search port and the personal facts. Like every
 * registry tool they check nothing about roles (the caller does) and
 * write nothing: remember_fact and forget_fact stage their change in
 * env->pending, which publish stores in the turn's one transaction.
 */
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "pipeline/handlers.h"
#include "pipeline/tools.h"

static int oom(struct keel_error *err, const char *tool)
{
    return keel_error_set(err, KEEL_ENOMEM, tool, "out of memory");
}

static int no_handlers(const struct tool_env *env, const char *tool, struct keel_error *err)
{
    if (env->handlers)
        return KEEL_OK;
    return keel_error_set(err, KEEL_EINVAL, tool, "the pack has no handlers section");
}

/* ---- convert_units ------------------------------------------------------------ */

static const char *const status_names[] = {"ok", "none", "unknown_unit", "unknown_currency",
                                           "mixed", "incompatible"};

static json_t *unit_json(const struct convert_tables *t, int u)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "name", t->units[u].name, "one", t->units[u].one,
                     "other", t->units[u].other, "category",
                     t->categories[t->units[u].category]);
}

static int run_convert_units(const struct tool_env *env, const json_t *args, json_t **result,
                             struct keel_error *err)
{
    const char *query = json_string_value(json_object_get(args, "query"));
    const struct convert_tables *t;
    struct convert_request req;
    enum convert_status status;
    double value = 0;
    json_t *out;

    if (no_handlers(env, "convert_units", err))
        return err->code;
    t = &env->handlers->convert;
    convert_parse(t, query, strlen(query), &req);
    status = req.status == CONVERT_OK ? convert_value(t, &req, &value) : req.status;
    out = json_pack("{s:s, s:s?}", "status", status_names[status], "unknown",
                    req.unknown[0] ? req.unknown : NULL);
    if (!out)
        return oom(err, "convert_units");
    if (req.from >= 0 && req.to >= 0) {
        json_t *parts = json_array();
        for (int i = 0; parts && i < req.n_parts; i++)
            json_array_append_new(parts, json_pack("{s:f, s:s}", "amount", req.part_amount[i],
                                                   "unit", t->units[req.part_unit[i]].name));
        json_object_set_new(out, "amount", json_real(req.amount));
        json_object_set_new(out, "from", unit_json(t, req.from));
        json_object_set_new(out, "to", unit_json(t, req.to));
        json_object_set_new(out, "parts", parts ? parts : json_array());
        if (status == CONVERT_OK)
            json_object_set_new(out, "value", json_real(value));
        if (t->units[req.from].currency && t->rates_date)
            json_object_set_new(out, "rates",
                                json_pack("{s:s, s:s, s:s?}", "date", t->rates_date, "base",
                                          t->rates_base, "note", t->rates_note));
    }
    *result = out;
    return KEEL_OK;
}

/* ---- web_search --------------------------------------------------------------- */

static int run_web_search(const struct tool_env *env, const json_t *args, json_t **result,
                          struct keel_error *err)
{
    const char *query = json_string_value(json_object_get(args, "query"));
    const json_t *count = json_object_get(args, "count");
    int limit = count ? (int)json_integer_value(count) : 5;
    json_t *results = NULL;
    struct keel_error werr;

    if (!env->web) {
        *result = json_pack("{s:b, s:[]}", "configured", 0, "results");
        return *result ? KEEL_OK : oom(err, "web_search");
    }
    if (env->handlers && limit > env->handlers->websearch.max_results)
        limit = env->handlers->websearch.max_results;
    keel_error_clear(&werr);
    if (env->web->search(env->web->ctx, query, limit, &results, &werr)) {
        /* Fails closed: the answer says the search failed and why. */
        if (werr.code == KEEL_ENOMEM)
            return oom(err, "web_search");
        *result = json_pack("{s:b, s:s, s:b, s:s, s:[]}", "configured", 1, "provider",
                            env->web->name, "failed", 1, "reason", werr.message, "results");
        return *result ? KEEL_OK : oom(err, "web_search");
    }
    *result = json_pack("{s:b, s:s, s:o}", "configured", 1, "provider", env->web->name,
                        "results", json_is_array(results) ? results : json_array());
    if (!json_is_array(results))
        json_decref(results);
    return *result ? KEEL_OK : oom(err, "web_search");
}

/* ---- personal facts ----------------------------------------------------------- */

static int user_facts(const struct tool_env *env, const char *tool, json_t **facts,
                      struct keel_error *err)
{
    if (!env->user || !*env->user)
        return keel_error_set(err, KEEL_EINVAL, tool, "no user: personal facts need one");
    return store_personal_list(env->store, env->user, facts, err);
}

static json_t *find_fact(const json_t *facts, const char *key)
{
    json_t *f;
    size_t i;

    json_array_foreach(facts, i, f)
        if (!strcmp(json_string_value(json_object_get(f, "key")), key))
            return f;
    return NULL;
}

/* A key as the reader makes it, so a model's "Favorite  Drink" finds
 * "favourite drink"; KEEL_EINVAL naming args.key when nothing is left. */
static int norm_key(const struct tool_env *env, const char *key, char out[STORE_PERSONAL_KEY_MAX + 1],
                    struct keel_error *err)
{
    if (no_handlers(env, "personal facts", err))
        return err->code;
    if (personal_key(&env->handlers->personal, key, out, STORE_PERSONAL_KEY_MAX + 1))
        return keel_error_set(err, KEEL_EINVAL, "args.key", "must name a fact (1 to %d bytes)",
                              STORE_PERSONAL_KEY_MAX);
    return KEEL_OK;
}

static int run_recall_memory(const struct tool_env *env, const json_t *args, json_t **result,
                             struct keel_error *err)
{
    const char *key = json_string_value(json_object_get(args, "key"));
    char norm[STORE_PERSONAL_KEY_MAX + 1];
    json_t *facts = NULL, *f;
    int rc;

    if (key && (rc = norm_key(env, key, norm, err)))
        return rc;
    if (key)
        key = norm;
    if ((rc = user_facts(env, "recall_memory", &facts, err)))
        return rc;
    if (!key) {
        *result = json_pack("{s:s, s:o}", "user", env->user, "facts", facts);
        return *result ? KEEL_OK : oom(err, "recall_memory");
    }
    f = find_fact(facts, key);
    *result = json_pack("{s:s, s:s, s:b, s:O?}", "user", env->user, "key", key, "found",
                        f != NULL, "value", f ? json_object_get(f, "value") : NULL);
    json_decref(facts);
    return *result ? KEEL_OK : oom(err, "recall_memory");
}

static int stage(const struct tool_env *env, const char *tool, const char *key, const char *value,
                 const char *kind, struct keel_error *err)
{
    struct personal_pending *p = env->pending;

    if (!p)
        return keel_error_set(err, KEEL_EINVAL, tool, "personal facts are not written here");
    if (p->active)
        return keel_error_set(err, KEEL_EINVAL, tool, "one personal fact changes per turn");
    memset(p, 0, sizeof(*p));
    p->active = 1;
    p->remove = value == NULL;
    snprintf(p->user, sizeof(p->user), "%s", env->user);
    snprintf(p->key, sizeof(p->key), "%s", key);
    if (value)
        snprintf(p->value, sizeof(p->value), "%s", value);
    snprintf(p->kind, sizeof(p->kind), "%s", kind ? kind : "fact");
    return KEEL_OK;
}

static int run_remember_fact(const struct tool_env *env, const json_t *args, json_t **result,
                             struct keel_error *err)
{
    const char *key = json_string_value(json_object_get(args, "key"));
    const char *value = json_string_value(json_object_get(args, "value"));
    const char *kind = json_string_value(json_object_get(args, "kind"));
    char norm[STORE_PERSONAL_KEY_MAX + 1];
    json_t *facts = NULL, *old;
    char reason[160];
    int rc;

    if (no_handlers(env, "remember_fact", err) || norm_key(env, key, norm, err))
        return err->code;
    key = norm;
    if (kind && strcmp(kind, "fact") && strcmp(kind, "note"))
        return keel_error_set(err, KEEL_EINVAL, "args.kind", "must be fact or note");
    if (utf8_valid_prefix(key, strlen(key)) != strlen(key) ||
        utf8_valid_prefix(value, strlen(value)) != strlen(value))
        return keel_error_set(err, KEEL_EINVAL, "args", "must be UTF-8 text");
    if (personal_refuses(&env->handlers->personal, key, value, kind && !strcmp(kind, "note"),
                         reason, sizeof(reason))) {
        *result = json_pack("{s:s, s:s, s:s}", "status", "refused", "key", key, "reason", reason);
        return *result ? KEEL_OK : oom(err, "remember_fact");
    }
    if ((rc = user_facts(env, "remember_fact", &facts, err)))
        return rc;
    old = find_fact(facts, key);
    if (!old && (int)json_array_size(facts) >= env->handlers->personal.max_facts) {
        json_decref(facts);
        *result = json_pack("{s:s, s:s, s:i}", "status", "full", "key", key, "max",
                            env->handlers->personal.max_facts);
        return *result ? KEEL_OK : oom(err, "remember_fact");
    }
    if (old && !strcmp(json_string_value(json_object_get(old, "value")), value)) {
        *result = json_pack("{s:s, s:s, s:s}", "status", "unchanged", "key", key, "value", value);
    } else if ((rc = stage(env, "remember_fact", key, value, kind, err))) {
        json_decref(facts);
        return rc;
    } else {
        *result = json_pack("{s:s, s:s, s:s, s:O?}", "status", old ? "replaced" : "stored", "key",
                            key, "value", value, "previous",
                            old ? json_object_get(old, "value") : NULL);
    }
    json_decref(facts);
    return *result ? KEEL_OK : oom(err, "remember_fact");
}

static int run_forget_fact(const struct tool_env *env, const json_t *args, json_t **result,
                           struct keel_error *err)
{
    const char *key = json_string_value(json_object_get(args, "key"));
    char norm[STORE_PERSONAL_KEY_MAX + 1];
    json_t *facts = NULL, *old;
    int rc;

    if ((rc = norm_key(env, key, norm, err)))
        return rc;
    key = norm;
    if ((rc = user_facts(env, "forget_fact", &facts, err)))
        return rc;
    old = find_fact(facts, key);
    if (!old && strncmp(key, "note: ", 6)) {
        /* "forget that I'm allergic to peanuts": a note of that text */
        char note[STORE_PERSONAL_KEY_MAX + 1];
        snprintf(note, sizeof(note), "note: %.*s",
                 (int)utf8_valid_prefix(key, strlen(key) < STORE_PERSONAL_KEY_MAX - 6
                                                 ? strlen(key) : STORE_PERSONAL_KEY_MAX - 6),
                 key);
        if ((old = find_fact(facts, note)))
            snprintf(norm, sizeof(norm), "%s", note);
    }
    if (!old)
        *result = json_pack("{s:s, s:s}", "status", "not_found", "key", key);
    else if ((rc = stage(env, "forget_fact", key, NULL, NULL, err)))
        *result = NULL;
    else
        *result = json_pack("{s:s, s:s, s:O}", "status", "removed", "key", key, "previous",
                            json_object_get(old, "value"));
    json_decref(facts);
    if (rc)
        return rc;
    return *result ? KEEL_OK : oom(err, "forget_fact");
}

/* ---- the registry entries ----------------------------------------------------- */

static const struct tool_arg convert_args[] = {
    {"query", ARG_STRING, 1, 1, TOOL_QUERY_MAX, "the conversion in words: \"5 km to miles\", "
                                                "\"100 usd in eur\""},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg web_args[] = {
    {"query", ARG_STRING, 1, 1, TOOL_QUERY_MAX, "what to search the web for"},
    {"count", ARG_INTEGER, 0, 1, WEBSEARCH_RESULTS_MAX, "how many results"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg recall_args[] = {
    {"key", ARG_STRING, 0, 1, STORE_PERSONAL_KEY_MAX, "the fact's name (\"favourite drink\"); "
                                                      "absent: every fact"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg remember_args[] = {
    {"key", ARG_STRING, 1, 1, STORE_PERSONAL_KEY_MAX, "the fact's name, lower case"},
    {"value", ARG_STRING, 1, 1, STORE_PERSONAL_VALUE_MAX, "what to remember"},
    {"kind", ARG_STRING, 0, 4, 4, "fact (default) or note"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg forget_args[] = {
    {"key", ARG_STRING, 1, 1, STORE_PERSONAL_KEY_MAX, "the fact's name"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_def assistant_tools[] = {
    {"convert_units", "Convert units and currencies (the pack's tables and dated rates).",
     convert_args, PACK_READ, run_convert_units},
    {"web_search", "Search the web for current information.", web_args, PACK_READ,
     run_web_search},
    {"recall_memory", "Read what the user asked to remember.", recall_args, PACK_READ,
     run_recall_memory},
    {"remember_fact", "Store a fact the user asked to remember.", remember_args, PACK_WRITE,
     run_remember_fact},
    {"forget_fact", "Remove a fact the user asked to forget.", forget_args, PACK_WRITE,
     run_forget_fact},
};

const struct tool_def *tools_assistant(size_t *n)
{
    *n = sizeof(assistant_tools) / sizeof(assistant_tools[0]);
    return assistant_tools;
}
