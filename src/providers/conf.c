/*
 * conf.c — provider settings: defaults, the pack's `providers:` section,
 * then the environment (which wins, so tests and deployments can point a
 * pack at another server without editing it).
 *
 *   providers:
 *     cache_seconds: 600
 *     max_response_bytes: 4194304
 *     retries: 2
 *     max_backoff_ms: 4000
 *     openalex: {enabled: false, base_url: https://api.openalex.org,
 *                mailto: you@example.org, timeout_ms: 8000}
 *     semanticscholar: {enabled: false, base_url: https://api.semanticscholar.org,
 *                       api_key_env: S2_API_KEY, timeout_ms: 8000}
 *
 * The API key itself never lives in a pack: api_key_env names the
 * environment variable that holds it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "providers/providers_int.h"

static const char *const default_base[PROVIDER_COUNT] = {
    [PROVIDER_OPENALEX] = "https://api.openalex.org",
    [PROVIDER_SEMANTICSCHOLAR] = "https://api.semanticscholar.org",
};

/* Replaces *dst with a copy of `value` without trailing slashes. */
static int set_string(char **dst, const char *value)
{
    size_t n = value ? strlen(value) : 0;
    char *copy;

    while (n && value[n - 1] == '/')
        n--;
    if (!value) {
        keel_free(*dst);
        *dst = NULL;
        return KEEL_OK;
    }
    if (!(copy = keel_malloc(n + 1)))
        return KEEL_ENOMEM;
    memcpy(copy, value, n);
    copy[n] = '\0';
    keel_free(*dst);
    *dst = copy;
    return KEEL_OK;
}

static int check_url(const char *url, const char *field, struct keel_error *err)
{
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return keel_error_set(err, KEEL_EINVAL, field, "must be an http:// or https:// URL");
    return KEEL_OK;
}

static int load_provider(const json_t *section, enum provider_id id, struct provider_conf *c,
                         struct keel_error *err)
{
    static const char *const keys[] = {"enabled", "base_url", "mailto", "api_key_env",
                                       "timeout_ms", NULL};
    char path[64];
    const json_t *obj = json_object_get(section, provider_name(id));
    const char *base = NULL, *mailto = NULL, *key_env = NULL;
    long long timeout = c->timeout_ms;
    int rc;

    snprintf(path, sizeof(path), "providers.%s", provider_name(id));
    if (!obj)
        return KEEL_OK;
    if (!json_is_object(obj))
        return keel_error_set(err, KEEL_EINVAL, path, "must be a mapping");
    if ((rc = keel_json_check_keys(obj, keys, path, err)) ||
        (rc = keel_json_get_bool(obj, "enabled", 0, path, &c->enabled, err)) ||
        (rc = keel_json_get_string(obj, "base_url", 0, path, &base, err)) ||
        (rc = keel_json_get_string(obj, "mailto", 0, path, &mailto, err)) ||
        (rc = keel_json_get_string(obj, "api_key_env", 0, path, &key_env, err)) ||
        (rc = keel_json_get_int(obj, "timeout_ms", 0, 100, 120000, path, &timeout, err)))
        return rc;
    if (base) {
        char field[80];
        snprintf(field, sizeof(field), "%s.base_url", path);
        if ((rc = check_url(base, field, err)))
            return rc;
    }
    c->timeout_ms = (long)timeout;
    if ((base && set_string(&c->base_url, base)) || (mailto && set_string(&c->mailto, mailto)) ||
        (key_env && getenv(key_env) && *getenv(key_env) &&
         set_string(&c->api_key, getenv(key_env))))
        return keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
    return KEEL_OK;
}

int providers_conf_enable(struct providers_conf *conf, const char *names, struct keel_error *err)
{
    int on[PROVIDER_COUNT] = {0};
    const char *p = names;

    if (strcmp(names, "none")) {
        while (*p) {
            const char *end = strchr(p, ',');
            size_t n = end ? (size_t)(end - p) : strlen(p), skip = 0;
            char name[32];
            int id;

            while (skip < n && (p[skip] == ' ' || p[skip] == '\t'))
                skip++;
            while (n > skip && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                n--;
            if (n - skip >= sizeof(name))
                n = skip + sizeof(name) - 1;
            memcpy(name, p + skip, n - skip);
            name[n - skip] = '\0';
            n = end ? (size_t)(end - p) : strlen(p);
            id = provider_find(name);
            if (id <= PROVIDER_LOCAL)
                return keel_error_set(err, KEEL_EINVAL, "providers",
                                      "unknown provider \"%s\" (openalex, semanticscholar)", name);
            on[id] = 1;
            p += n + (end != NULL);
        }
    }
    for (int i = PROVIDER_LOCAL + 1; i < PROVIDER_COUNT; i++)
        conf->p[i].enabled = on[i];
    return KEEL_OK;
}

int providers_conf_load(const json_t *section, struct providers_conf *out, struct keel_error *err)
{
    static const char *const keys[] = {"cache_seconds", "max_response_bytes", "retries",
                                       "max_backoff_ms", "openalex", "semanticscholar", NULL};
    static const struct {
        const char *var;
        enum provider_id id;
        int is_url;
    } env[] = {
        {"KEEL_OPENALEX_URL", PROVIDER_OPENALEX, 1},
        {"KEEL_OPENALEX_MAILTO", PROVIDER_OPENALEX, 0},
        {"KEEL_SEMANTICSCHOLAR_URL", PROVIDER_SEMANTICSCHOLAR, 1},
    };
    long long cache = 600, max_bytes = 4 << 20, retries = 2, backoff = 4000;
    const char *list = getenv("KEEL_PROVIDERS");
    int rc;

    memset(out, 0, sizeof(*out));
    for (int i = PROVIDER_LOCAL + 1; i < PROVIDER_COUNT; i++) {
        out->p[i].timeout_ms = 8000;
        if (set_string(&out->p[i].base_url, default_base[i]))
            goto nomem;
    }
    out->p[PROVIDER_LOCAL].enabled = 1;
    if (section) {
        if (!json_is_object(section)) {
            rc = keel_error_set(err, KEEL_EINVAL, "providers", "must be a mapping");
            goto fail;
        }
        if ((rc = keel_json_check_keys(section, keys, "providers", err)) ||
            (rc = keel_json_get_int(section, "cache_seconds", 0, 0, 86400, "providers", &cache,
                                    err)) ||
            (rc = keel_json_get_int(section, "max_response_bytes", 0, 1024, 64 << 20,
                                    "providers", &max_bytes, err)) ||
            (rc = keel_json_get_int(section, "retries", 0, 0, 5, "providers", &retries, err)) ||
            (rc = keel_json_get_int(section, "max_backoff_ms", 0, 0, 60000, "providers",
                                    &backoff, err)))
            goto fail;
        for (int i = PROVIDER_LOCAL + 1; i < PROVIDER_COUNT; i++)
            if ((rc = load_provider(section, (enum provider_id)i, &out->p[i], err)))
                goto fail;
    }
    out->cache_seconds = (long)cache;
    out->max_response_bytes = (long)max_bytes;
    out->retries = (int)retries;
    out->max_backoff_ms = (long)backoff;
    for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
        const char *value = getenv(env[i].var);
        struct provider_conf *c = &out->p[env[i].id];
        if (!value || !*value)
            continue;
        if (env[i].is_url && (rc = check_url(value, env[i].var, err)))
            goto fail;
        if (set_string(env[i].is_url ? &c->base_url : &c->mailto, value))
            goto nomem;
    }
    if (list && *list && (rc = providers_conf_enable(out, list, err))) {
        char why[sizeof(err->message)];
        snprintf(why, sizeof(why), "%s", err->message);
        keel_error_set(err, rc, "KEEL_PROVIDERS", "%s", why);
        goto fail;
    }
    return KEEL_OK;
nomem:
    rc = keel_error_set(err, KEEL_ENOMEM, "providers", "out of memory");
fail:
    providers_conf_release(out);
    return rc;
}

void providers_conf_release(struct providers_conf *conf)
{
    for (int i = 0; i < PROVIDER_COUNT; i++) {
        keel_free(conf->p[i].base_url);
        keel_free(conf->p[i].mailto);
        keel_free(conf->p[i].api_key);
    }
    memset(conf, 0, sizeof(*conf));
}
