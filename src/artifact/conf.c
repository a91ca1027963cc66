/*
 * conf.c — the pack's `artifacts:` section compiled for the intent gate,
 * the builders and the distiller:
 *
 *   artifacts:
 *     enabled: true
 *     threshold: 0.75            a contract needs this confidence
 *     min_words: 4               shorter messages get no artifact
 *     blocked_routes: [command, local_memory_intent, conversion_tool]
 *     contracts:
 *       research_brief:
 *         needs: [sources]       hard rules: sources | document
 *         routes: {websearch: 0.35}
 *         groups:
 *           synthesis: {weight: 0.45, phrases: [summarize the evidence, …]}
 *           citation:  {weight: 0.3, required: false, phrases: [with citations, …]}
 *         min_sources: 2   min_steps: 2   max_items: 8
 *         facts: {store: researched, confidence: 0.6}
 *
 * Every group's phrases go into one lexicon (category = contract * 8 +
 * group), so the gate matches all of them in one pass. Unknown keys,
 * unknown routes and contracts, and numbers out of range are errors
 * naming file:line.
 */
#include <string.h>

#include "artifact/artifact.h"
#include "core/json.h"

static const char *const type_names[ARTIFACT_TYPES] = {"research_brief", "doc_extract", "plan"};

const char *artifact_type_name(int type)
{
    return type >= 0 && type < ARTIFACT_TYPES ? type_names[type] : NULL;
}

int artifact_type_from_name(const char *name)
{
    for (int i = 0; name && i < ARTIFACT_TYPES; i++)
        if (!strcmp(name, type_names[i]))
            return i;
    return ARTIFACT_NONE;
}

static int no_slots(const char *name, size_t n)
{
    (void)name;
    (void)n;
    return -1;
}

static int check_keys(const struct artifact_conf *conf, const json_t *obj,
                      const char *const *keys, const char *path, struct keel_error *err)
{
    struct keel_error inner;

    if (!json_is_object(obj))
        return pack_fail(conf->pack, path, err, "must be a mapping");
    if (keel_json_check_keys(obj, keys, path, &inner))
        return pack_fail(conf->pack, inner.field, err, "%s", inner.message);
    return KEEL_OK;
}

/* obj[key] as a number in [min, max] into *out (left alone when absent). */
static int get_number(const struct artifact_conf *conf, const json_t *obj, const char *key,
                      double min, double max, const char *path, double *out,
                      struct keel_error *err)
{
    const json_t *v = json_object_get(obj, key);
    char field[KEEL_JSON_PATH_MAX];

    if (!v)
        return KEEL_OK;
    keel_json_path_key(field, sizeof(field), path, key);
    if (!json_is_number(v) || json_number_value(v) < min || json_number_value(v) > max)
        return pack_fail(conf->pack, field, err, "must be a number from %g to %g", min, max);
    *out = json_number_value(v);
    return KEEL_OK;
}

static int get_int(const struct artifact_conf *conf, const json_t *obj, const char *key,
                   long long min, long long max, const char *path, int *out,
                   struct keel_error *err)
{
    struct keel_error inner;
    long long v = *out;

    if (keel_json_get_int(obj, key, 0, min, max, path, &v, &inner))
        return pack_fail(conf->pack, inner.field, err, "%s", inner.message);
    *out = (int)v;
    return KEEL_OK;
}

static int route_index(const struct artifact_conf *conf, const char *name)
{
    for (int i = 0; i < conf->n_routes; i++)
        if (!strcmp(conf->route_names[i], name))
            return i;
    return -1;
}

static int load_group(struct artifact_conf *conf, int type, const char *name, const json_t *g,
                      const char *path, struct keel_error *err)
{
    static const char *const keys[] = {"weight", "required", "phrases", NULL};
    struct artifact_contract_conf *c = &conf->contracts[type];
    struct artifact_group *group = &c->groups[c->n_groups];
    char field[KEEL_JSON_PATH_MAX], item[KEEL_JSON_PATH_MAX];
    struct keel_error inner;
    const json_t *phrases = json_object_get(g, "phrases"), *p;
    size_t i;
    int rc;

    if (c->n_groups == ARTIFACT_GROUPS_MAX)
        return pack_fail(conf->pack, path, err, "at most %d groups", ARTIFACT_GROUPS_MAX);
    if ((rc = check_keys(conf, g, keys, path, err)) ||
        (rc = get_number(conf, g, "weight", 0, 1, path, &group->weight, err)))
        return rc;
    if (keel_json_get_bool(g, "required", 0, path, &group->required, &inner))
        return pack_fail(conf->pack, inner.field, err, "%s", inner.message);
    keel_json_path_key(field, sizeof(field), path, "phrases");
    if (!json_is_array(phrases) || !json_array_size(phrases))
        return pack_fail(conf->pack, field, err, "must be a list of at least one phrase");
    json_array_foreach(phrases, i, p) {
        keel_json_path_index(item, sizeof(item), field, i);
        if (!json_is_string(p))
            return pack_fail(conf->pack, item, err, "must be a string, not %s",
                             keel_json_type_name(p));
        if (lexicon_add(&conf->lex, type * ARTIFACT_GROUPS_MAX + c->n_groups, 0,
                        json_string_value(p), no_slots, item, &inner))
            return inner.code == KEEL_ENOMEM
                       ? keel_error_set(err, KEEL_ENOMEM, conf->pack->origin, "out of memory")
                       : pack_fail(conf->pack, item, err, "%s", inner.message);
    }
    group->name = name;
    c->n_groups++;
    return KEEL_OK;
}

static int load_facts(struct artifact_conf *conf, struct artifact_contract_conf *c,
                      const json_t *f, const char *path, struct keel_error *err)
{
    static const char *const keys[] = {"store", "confidence", NULL};
    char field[KEEL_JSON_PATH_MAX];
    struct keel_error inner;
    const char *store = NULL;
    int rc;

    if ((rc = check_keys(conf, f, keys, path, err)) ||
        (rc = get_number(conf, f, "confidence", 0, 1, path, &c->fact_confidence, err)))
        return rc;
    if (keel_json_get_string(f, "store", 1, path, &store, &inner))
        return pack_fail(conf->pack, inner.field, err, "%s", inner.message);
    keel_json_path_key(field, sizeof(field), path, "store");
    if (strcmp(store, "verified") && strcmp(store, "researched"))
        return pack_fail(conf->pack, field, err, "must be verified or researched, not \"%s\"",
                         store);
    c->fact_store = store;
    return KEEL_OK;
}

static int load_contract(struct artifact_conf *conf, int type, const json_t *s, const char *path,
                         struct keel_error *err)
{
    static const char *const keys[] = {"enabled", "needs", "routes", "groups", "min_sources",
                                       "min_steps", "max_items", "facts", NULL};
    struct artifact_contract_conf *c = &conf->contracts[type];
    char field[KEEL_JSON_PATH_MAX], item[KEEL_JSON_PATH_MAX];
    struct keel_error inner;
    const json_t *needs = json_object_get(s, "needs"), *v, *w;
    const char *key;
    size_t i;
    int rc;

    if ((rc = check_keys(conf, s, keys, path, err)))
        return rc;
    if (keel_json_get_bool(s, "enabled", 0, path, &c->enabled, &inner))
        return pack_fail(conf->pack, inner.field, err, "%s", inner.message);
    keel_json_path_key(field, sizeof(field), path, "needs");
    if (needs && !json_is_array(needs))
        return pack_fail(conf->pack, field, err, "must be a list of sources | document");
    json_array_foreach(needs, i, v) {
        keel_json_path_index(item, sizeof(item), field, i);
        if (json_is_string(v) && !strcmp(json_string_value(v), "sources"))
            c->needs_sources = 1;
        else if (json_is_string(v) && !strcmp(json_string_value(v), "document"))
            c->needs_document = 1;
        else
            return pack_fail(conf->pack, item, err, "must be sources or document");
    }
    keel_json_path_key(field, sizeof(field), path, "routes");
    if ((v = json_object_get(s, "routes"))) {
        if (!json_is_object(v))
            return pack_fail(conf->pack, field, err, "must be a mapping route: weight");
        json_object_foreach((json_t *)v, key, w) {
            int r = route_index(conf, key);
            keel_json_path_key(item, sizeof(item), field, key);
            if (r < 0)
                return pack_fail(conf->pack, item, err, "is not a route of the policy");
            if (!json_is_number(w) || json_number_value(w) < 0 || json_number_value(w) > 1)
                return pack_fail(conf->pack, item, err, "must be a number from 0 to 1");
            c->route_weight[r] = json_number_value(w);
        }
    }
    keel_json_path_key(field, sizeof(field), path, "groups");
    if ((v = json_object_get(s, "groups"))) {
        if (!json_is_object(v))
            return pack_fail(conf->pack, field, err, "must be a mapping name: {weight, phrases}");
        json_object_foreach((json_t *)v, key, w) {
            keel_json_path_key(item, sizeof(item), field, key);
            if ((rc = load_group(conf, type, key, w, item, err)))
                return rc;
        }
    }
    if ((rc = get_int(conf, s, "min_sources", 1, 50, path, &c->min_sources, err)) ||
        (rc = get_int(conf, s, "min_steps", 1, 20, path, &c->min_steps, err)) ||
        (rc = get_int(conf, s, "max_items", 1, 20, path, &c->max_items, err)))
        return rc;
    keel_json_path_key(field, sizeof(field), path, "facts");
    if ((v = json_object_get(s, "facts")) && (rc = load_facts(conf, c, v, field, err)))
        return rc;
    return KEEL_OK;
}

static int load_blocked(struct artifact_conf *conf, const json_t *list, struct keel_error *err)
{
    char item[KEEL_JSON_PATH_MAX];
    const json_t *v;
    size_t i;

    if (!list)
        return KEEL_OK;
    conf->blocked_routes = 0;
    if (!json_is_array(list))
        return pack_fail(conf->pack, "artifacts.blocked_routes", err, "must be a list of routes");
    json_array_foreach(list, i, v) {
        int r = json_is_string(v) ? route_index(conf, json_string_value(v)) : -1;
        keel_json_path_index(item, sizeof(item), "artifacts.blocked_routes", i);
        if (r < 0)
            return pack_fail(conf->pack, item, err, "is not a route of the policy");
        conf->blocked_routes |= 1u << r;
    }
    return KEEL_OK;
}

static int load(struct artifact_conf *conf, const json_t *s, struct keel_error *err)
{
    static const char *const keys[] = {"enabled", "threshold", "min_words", "blocked_routes",
                                       "contracts", NULL};
    static const char *const default_blocked[] = {"command", "local_memory_intent",
                                                  "conversion_tool"};
    char path[KEEL_JSON_PATH_MAX];
    struct keel_error inner;
    const json_t *contracts = json_object_get(s, "contracts"), *c;
    const char *key;
    int rc, enabled = 1;

    if ((rc = check_keys(conf, s, keys, "artifacts", err)))
        return rc;
    if (keel_json_get_bool(s, "enabled", 0, "artifacts", &enabled, &inner))
        return pack_fail(conf->pack, inner.field, err, "%s", inner.message);
    for (int i = 0; i < 3; i++) {
        int r = route_index(conf, default_blocked[i]);
        if (r >= 0)
            conf->blocked_routes |= 1u << r;
    }
    if ((rc = get_number(conf, s, "threshold", 0.01, 1, "artifacts", &conf->threshold, err)) ||
        (rc = get_int(conf, s, "min_words", 0, 64, "artifacts", &conf->min_words, err)) ||
        (rc = load_blocked(conf, json_object_get(s, "blocked_routes"), err)))
        return rc;
    if (contracts && !json_is_object(contracts))
        return pack_fail(conf->pack, "artifacts.contracts", err,
                         "must be a mapping of research_brief, doc_extract, plan");
    json_object_foreach((json_t *)contracts, key, c) {
        int type = artifact_type_from_name(key);
        keel_json_path_key(path, sizeof(path), "artifacts.contracts", key);
        if (type == ARTIFACT_NONE)
            return pack_fail(conf->pack, path, err,
                             "is not a contract (research_brief, doc_extract, plan)");
        conf->contracts[type].enabled = 1;
        if ((rc = load_contract(conf, type, c, path, err)))
            return rc;
    }
    conf->enabled = enabled;
    return KEEL_OK;
}

int artifact_conf_load(const struct pack *pack, const char *const *routes, int n,
                       struct artifact_conf *conf, struct keel_error *err)
{
    const json_t *s = json_object_get(pack->doc, "artifacts");
    int rc;

    memset(conf, 0, sizeof(*conf));
    lexicon_init(&conf->lex);
    conf->pack = pack;
    conf->threshold = 0.75;
    conf->min_words = 4;
    conf->n_routes = n < ARTIFACT_ROUTES_MAX ? n : ARTIFACT_ROUTES_MAX;
    for (int i = 0; i < conf->n_routes; i++)
        conf->route_names[i] = routes[i];
    for (int t = 0; t < ARTIFACT_TYPES; t++) {
        conf->contracts[t].min_sources = 2;
        conf->contracts[t].min_steps = 2;
        conf->contracts[t].max_items = 8;
        conf->contracts[t].fact_confidence = 0.5;
    }
    if (!s || json_is_null(s))
        return lexicon_compile(&conf->lex)
                   ? keel_error_set(err, KEEL_ENOMEM, pack->origin, "out of memory") : KEEL_OK;
    if ((rc = load(conf, s, err)) ||
        (rc = lexicon_compile(&conf->lex)
                  ? keel_error_set(err, KEEL_ENOMEM, pack->origin, "out of memory") : KEEL_OK)) {
        artifact_conf_release(conf);
        return rc;
    }
    return KEEL_OK;
}

void artifact_conf_release(struct artifact_conf *conf)
{
    lexicon_release(&conf->lex);
    conf->enabled = 0;
}
