/*
 * websearch.c — the SearxNG-compatible web-search provider (see
 * websearch.h). One GET per search, through a fresh libcurl easy handle
 * (a search is one request of a turn; nothing is shared between
 * workers). Every failure — no connection, a timeout, a status other
 * than 200, a body over the cap or not SearxNG's JSON — is an error
 * naming "web_search" with the reason; the tool turns it into a notice
 * in the answer (fail closed), never a failed turn.
 */
#include "pipeline/websearch.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/blocking.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/utf8.h"

struct websearch {
    struct websearch_conf conf;
    struct web_fallback port;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_start(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

/* ---- configuration ----------------------------------------------------------- */

static int set_url(struct websearch_conf *conf, const char *url, const char *field,
                   struct keel_error *err)
{
    size_t n = strlen(url);

    if (!strcmp(url, "none") || !*url) {
        conf->url[0] = '\0';
        return KEEL_OK;
    }
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return keel_error_set(err, KEEL_EINVAL, field, "must start with http:// or https://");
    if (n >= sizeof(conf->url))
        return keel_error_set(err, KEEL_EINVAL, field, "is longer than %zu bytes",
                              sizeof(conf->url) - 1);
    while (n && url[n - 1] == '/')
        n--;   /* "{url}/search" either way */
    snprintf(conf->url, sizeof(conf->url), "%.*s", (int)n, url);
    return KEEL_OK;
}

int websearch_conf_load(const json_t *s, const char *url, struct websearch_conf *conf,
                        struct keel_error *err)
{
    static const char *const keys[] = {"url", "timeout_ms", "max_bytes", "max_results", NULL};
    static const struct {
        const char *key;
        long long min, max;
    } limits[] = {{"timeout_ms", 100, 120000}, {"max_bytes", 1024, 16 << 20},
                  {"max_results", 1, WEBSEARCH_RESULTS_MAX}};
    const char *env = getenv("KEEL_WEBSEARCH_URL"), *pack_url = NULL;
    long long values[3] = {8000, 1 << 20, 5};
    int rc;

    memset(conf, 0, sizeof(*conf));
    if (s && !json_is_object(s))
        return keel_error_set(err, KEEL_EINVAL, "handlers.websearch", "must be a mapping");
    if (s && ((rc = keel_json_check_keys(s, keys, "handlers.websearch", err)) ||
              (rc = keel_json_get_string(s, "url", 0, "handlers.websearch", &pack_url, err))))
        return rc;
    for (int i = 0; s && i < 3; i++) {
        const json_t *v = json_object_get(s, limits[i].key);
        char field[KEEL_JSON_PATH_MAX];
        if (!v)
            continue;
        keel_json_path_key(field, sizeof(field), "handlers.websearch", limits[i].key);
        if (!json_is_integer(v) || json_integer_value(v) < limits[i].min ||
            json_integer_value(v) > limits[i].max)
            return keel_error_set(err, KEEL_EINVAL, field, "must be an integer from %lld to %lld",
                                  limits[i].min, limits[i].max);
        values[i] = json_integer_value(v);
    }
    conf->timeout_ms = (long)values[0];
    conf->max_bytes = (size_t)values[1];
    conf->max_results = (int)values[2];
    if ((pack_url && (rc = set_url(conf, pack_url, "handlers.websearch.url", err))) ||
        (env && *env && (rc = set_url(conf, env, "KEEL_WEBSEARCH_URL", err))) ||
        (url && (rc = set_url(conf, url, "websearch_url", err))))
        return rc;
    return KEEL_OK;
}

/* ---- parsing ----------------------------------------------------------------- */

/* `text` cut at `cap` bytes on a UTF-8 boundary, as a new JSON string. */
static json_t *capped(const char *text, size_t cap)
{
    size_t n = strlen(text);

    if (n > cap)
        n = cap;
    return json_stringn(text, utf8_valid_prefix(text, n));
}

int websearch_parse(const char *body, size_t n, int limit, json_t **out, struct keel_error *err)
{
    json_t *doc = NULL, *results, *list, *r;
    size_t i;
    int rc;

    *out = NULL;
    if ((rc = keel_json_parse(body, n, n + 1, "web_search", &doc, err)))
        return keel_error_set(err, KEEL_EINVAL, "web_search", "the answer is not JSON");
    results = json_object_get(doc, "results");
    if (!json_is_array(results)) {
        json_decref(doc);
        return keel_error_set(err, KEEL_EINVAL, "web_search",
                              "the answer has no \"results\" list");
    }
    if (!(list = json_array())) {
        json_decref(doc);
        return keel_error_set(err, KEEL_ENOMEM, "web_search", "out of memory");
    }
    json_array_foreach(results, i, r) {
        const char *title = json_string_value(json_object_get(r, "title"));
        const char *url = json_string_value(json_object_get(r, "url"));
        const char *content = json_string_value(json_object_get(r, "content"));
        json_t *item;

        if ((int)json_array_size(list) >= limit)
            break;
        if (!title || !*title || !url || strlen(url) > WEBSEARCH_URL_MAX ||
            (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
            continue;
        item = json_pack("{s:o, s:s, s:o}", "title", capped(title, WEBSEARCH_TITLE_MAX), "url",
                         url, "snippet", capped(content ? content : "", WEBSEARCH_SNIPPET_MAX));
        if (!item || json_array_append_new(list, item)) {
            json_decref(list);
            json_decref(doc);
            return keel_error_set(err, KEEL_ENOMEM, "web_search", "out of memory");
        }
    }
    json_decref(doc);
    *out = list;
    return KEEL_OK;
}

/* ---- the request ------------------------------------------------------------- */

struct body {
    struct keel_buf buf;
    int too_big;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    struct body *b = arg;
    int rc = keel_buf_add(&b->buf, data, size * n);

    if (rc) {
        b->too_big = rc == KEEL_ETOOBIG ? 1 : -1;
        return 0;   /* libcurl stops with CURLE_WRITE_ERROR */
    }
    return size * n;
}

static int search(void *ctx, const char *query, int limit, json_t **out, struct keel_error *err)
{
    const struct websearch *ws = ctx;
    struct body body = {.too_big = 0};
    struct keel_buf url;
    char *q = NULL;
    CURL *curl;
    CURLcode cc;
    long status = 0;
    int rc;

    *out = NULL;
    pthread_once(&curl_once, curl_start);
    if (!curl_ready || !(curl = curl_easy_init()))
        return keel_error_set(err, KEEL_EIO, "web_search", "libcurl could not start");
    keel_buf_init(&url, sizeof(ws->conf.url) + 4 * 1024);
    keel_buf_init(&body.buf, ws->conf.max_bytes);
    if (!(q = curl_easy_escape(curl, query, 0)) ||
        keel_buf_addf(&url, "%s/search?q=%s&format=json", ws->conf.url, q)) {
        rc = keel_error_set(err, KEEL_EINVAL, "web_search", "the query is too long for a URL");
        goto out;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url.data);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, ws->conf.timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, ws->conf.timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "keel");
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    keel_blocking_begin();
    cc = curl_easy_perform(curl);
    keel_blocking_end();
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (body.too_big > 0)
        rc = keel_error_set(err, KEEL_EIO, "web_search", "the answer is larger than %zu bytes",
                            ws->conf.max_bytes);
    else if (body.too_big < 0)
        rc = keel_error_set(err, KEEL_ENOMEM, "web_search", "out of memory");
    else if (cc != CURLE_OK)
        rc = keel_error_set(err, KEEL_EIO, "web_search", "%s", curl_easy_strerror(cc));
    else if (status != 200)
        rc = keel_error_set(err, KEEL_EIO, "web_search", "the server answered HTTP %ld", status);
    else
        rc = websearch_parse(body.buf.data ? body.buf.data : "", body.buf.len, limit, out, err);
out:
    curl_free(q);
    curl_easy_cleanup(curl);
    keel_buf_release(&url);
    keel_buf_release(&body.buf);
    return rc;
}

int websearch_new(const struct websearch_conf *conf, struct websearch **out,
                  struct keel_error *err)
{
    struct websearch *ws;

    if (!conf->url[0])
        return keel_error_set(err, KEEL_EINVAL, "websearch_url", "is required");
    if (!(ws = keel_calloc(1, sizeof(*ws))))
        return keel_error_set(err, KEEL_ENOMEM, "websearch", "out of memory");
    ws->conf = *conf;
    ws->port.name = "searxng";
    ws->port.search = search;
    ws->port.ctx = ws;
    *out = ws;
    return KEEL_OK;
}

void websearch_free(struct websearch *ws)
{
    keel_free(ws);
}

const struct web_fallback *websearch_port(const struct websearch *ws)
{
    return &ws->port;
}
