/*
 * conf.c — model settings: defaults, the pack's `llm:` section, the
 * environment, then the caller's options (each later one wins).
 *
 *   llm:
 *     url: http://127.0.0.1:11434/v1     # any OpenAI-compatible server
 *     model: qwen2.5:7b-instruct
 *     key_env: OPENAI_API_KEY            # the variable holding the key
 *     system_prompt: |                   # static: first in every request
 *       You are …
 *     timeout_ms: 30000
 *     retries: 2
 *     max_backoff_ms: 4000
 *     breaker_failures: 3
 *     breaker_cooldown_ms: 30000
 *     stream: true
 *     max_response_bytes: 1048576
 *     history_tokens: 1500
 *     planner: false                     # the model proposes the blueprint
 *
 * Without a URL there is no model, and keel answers extractively.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "llm/llm.h"

/* Replaces *dst with a copy of `value` (trailing slashes dropped when
 * `url`). */
static int set_string(char **dst, const char *value, int url)
{
    size_t n = strlen(value);
    char *copy;

    while (url && n && value[n - 1] == '/')
        n--;
    if (!(copy = keel_strndup(value, n)))
        return KEEL_ENOMEM;
    keel_free(*dst);
    *dst = copy;
    return KEEL_OK;
}

static int check_url(const char *url, const char *field, struct keel_error *err)
{
    size_t scheme = !strncmp(url, "http://", 7) ? 7 : !strncmp(url, "https://", 8) ? 8 : 0;

    if (!scheme || !url[scheme] || url[scheme] == '/')
        return keel_error_set(err, KEEL_EINVAL, field,
                              "must be an http:// or https:// URL (the server's /v1), not \"%.80s\"",
                              url);
    if (strlen(url) > 400)
        return keel_error_set(err, KEEL_EINVAL, field, "is longer than 400 bytes");
    return KEEL_OK;
}

static int check_env_name(const char *name, const char *field, struct keel_error *err)
{
    if (!*name || strlen(name) > 128 || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                     "abcdefghijklmnopqrstuvwxyz0123456789_") !=
                                              strlen(name))
        return keel_error_set(err, KEEL_EINVAL, field,
                              "must name an environment variable (letters, digits, _)");
    return KEEL_OK;
}

static int load_section(const json_t *s, const char *path, struct llm_conf *c,
                        struct keel_error *err)
{
    static const char *const keys[] = {"url", "model", "key_env", "system_prompt", "timeout_ms",
                                       "retries", "max_backoff_ms", "breaker_failures",
                                       "breaker_cooldown_ms", "stream", "max_response_bytes",
                                       "history_tokens", "planner", NULL};
    const char *url = NULL, *model = NULL, *key_env = NULL, *prompt = NULL;
    long long timeout = c->timeout_ms, retries = c->retries, backoff = c->max_backoff_ms,
              failures = c->breaker_failures, cooldown = c->breaker_cooldown_ms,
              max_bytes = (long long)c->max_response_bytes, history = c->history_tokens;
    int rc;

    if (!s)
        return KEEL_OK;
    if (!json_is_object(s))
        return keel_error_set(err, KEEL_EINVAL, path, "must be a mapping");
    if ((rc = keel_json_check_keys(s, keys, path, err)) ||
        (rc = keel_json_get_string(s, "url", 0, path, &url, err)) ||
        (rc = keel_json_get_string(s, "model", 0, path, &model, err)) ||
        (rc = keel_json_get_string(s, "key_env", 0, path, &key_env, err)) ||
        (rc = keel_json_get_string(s, "system_prompt", 0, path, &prompt, err)) ||
        (rc = keel_json_get_int(s, "timeout_ms", 0, 100, 600000, path, &timeout, err)) ||
        (rc = keel_json_get_int(s, "retries", 0, 0, 10, path, &retries, err)) ||
        (rc = keel_json_get_int(s, "max_backoff_ms", 0, 0, 60000, path, &backoff, err)) ||
        (rc = keel_json_get_int(s, "breaker_failures", 0, 1, 1000, path, &failures, err)) ||
        (rc = keel_json_get_int(s, "breaker_cooldown_ms", 0, 0, 3600000, path, &cooldown,
                                err)) ||
        (rc = keel_json_get_bool(s, "stream", 0, path, &c->stream, err)) ||
        (rc = keel_json_get_int(s, "max_response_bytes", 0, 4096, 64 << 20, path, &max_bytes,
                                err)) ||
        (rc = keel_json_get_int(s, "history_tokens", 0, 0, 100000, path, &history, err)) ||
        (rc = keel_json_get_bool(s, "planner", 0, path, &c->planner, err)))
        return rc;
    char field[80];
    snprintf(field, sizeof(field), "%s.url", path);
    if (url && (rc = check_url(url, field, err)))
        return rc;
    snprintf(field, sizeof(field), "%s.key_env", path);
    if (key_env && (rc = check_env_name(key_env, field, err)))
        return rc;
    if (prompt && strlen(prompt) > 16384)
        return keel_error_set(err, KEEL_EINVAL, path, "system_prompt is longer than 16384 bytes");
    c->timeout_ms = (long)timeout;
    c->retries = (int)retries;
    c->max_backoff_ms = (long)backoff;
    c->breaker_failures = (int)failures;
    c->breaker_cooldown_ms = (long)cooldown;
    c->max_response_bytes = (size_t)max_bytes;
    c->history_tokens = (int)history;
    if ((url && set_string(&c->url, url, 1)) || (model && set_string(&c->model, model, 0)) ||
        (key_env && set_string(&c->key_env, key_env, 0)) ||
        (prompt && set_string(&c->system_prompt, prompt, 0)))
        return keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
    return KEEL_OK;
}

/* One override (environment or option): url, model or key_env. */
static int override(struct llm_conf *c, const char *url, const char *model, const char *key_env,
                    const char *const names[3], struct keel_error *err)
{
    int rc;

    if (url && *url) {
        if (!strcmp(url, "none")) {
            keel_free(c->url);
            c->url = NULL;
        } else if ((rc = check_url(url, names[0], err))) {
            return rc;
        } else if (set_string(&c->url, url, 1)) {
            return keel_error_set(err, KEEL_ENOMEM, names[0], "out of memory");
        }
    }
    if (model && *model && set_string(&c->model, model, 0))
        return keel_error_set(err, KEEL_ENOMEM, names[1], "out of memory");
    if (key_env && *key_env) {
        if ((rc = check_env_name(key_env, names[2], err)))
            return rc;
        if (set_string(&c->key_env, key_env, 0))
            return keel_error_set(err, KEEL_ENOMEM, names[2], "out of memory");
    }
    return KEEL_OK;
}

int llm_conf_load_as(const json_t *section, const char *path, const char *env,
                     const struct llm_options *opt, struct llm_conf *conf, struct keel_error *err)
{
    char env_names[3][48], opt_names[3][48];
    const char *envs[3], *opts[3];
    static const char *const suffix[3] = {"URL", "MODEL", "KEY_ENV"};
    static const char *const opt_suffix[3] = {"url", "model", "key_env"};
    int rc;

    for (int i = 0; i < 3; i++) {
        snprintf(env_names[i], sizeof(env_names[i]), "%s_%s", env, suffix[i]);
        /* the options' names: KEEL_EMBED → embed_url (--embed-url) */
        snprintf(opt_names[i], sizeof(opt_names[i]), "%s_%s",
                 strncmp(env, "KEEL_", 5) ? env : env + 5, opt_suffix[i]);
        for (char *p = opt_names[i]; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        envs[i] = env_names[i];
        opts[i] = opt_names[i];
    }
    memset(conf, 0, sizeof(*conf));
    conf->timeout_ms = 30000;
    conf->retries = 2;
    conf->max_backoff_ms = 4000;
    conf->breaker_failures = 3;
    conf->breaker_cooldown_ms = 30000;
    conf->stream = 1;
    conf->max_response_bytes = 1u << 20;
    conf->history_tokens = 1500;
    rc = load_section(section, path, conf, err);
    if (!rc)
        rc = override(conf, getenv(envs[0]), getenv(envs[1]), getenv(envs[2]), envs, err);
    if (!rc && opt)
        rc = override(conf, opt->url, opt->model, opt->key_env, opts, err);
    if (!rc && conf->url && !conf->model) {
        char field[64];
        snprintf(field, sizeof(field), "%s.model", path);
        rc = keel_error_set(err, KEEL_EINVAL, opt && opt->url ? opts[1] : field,
                            "is required with a model URL: the model's name on that server "
                            "(--%s-model NAME, %s or the pack's %s.model)",
                            !strcmp(env, "KEEL_LLM") ? "llm" : "embed", envs[1], path);
    }
    if (rc)
        llm_conf_release(conf);
    return rc;
}

int llm_conf_load(const json_t *section, const struct llm_options *opt, struct llm_conf *conf,
                  struct keel_error *err)
{
    return llm_conf_load_as(section, "llm", "KEEL_LLM", opt, conf, err);
}

void llm_conf_release(struct llm_conf *conf)
{
    keel_free(conf->url);
    keel_free(conf->model);
    keel_free(conf->key_env);
    keel_free(conf->system_prompt);
    memset(conf, 0, sizeof(*conf));
}
