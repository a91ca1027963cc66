/*
 * fetch.c — asking the remote providers at once (libcurl multi), with
 * retries, a response cap and a cache, then merging their papers.
 *
 * Each enabled provider is one transfer with its own state: the URL (with
 * or without filters), attempts, the earliest time of the next attempt
 * and the body so far. The loop starts the transfers that are due, lets
 * libcurl run them all, and sorts each finished one:
 *
 *   200, parsable           done (the body is cached by URL)
 *   200, not its JSON       failed: "the answer is not valid JSON: …"
 *   400/422 with filters    asked again at once without the filters
 *   429                     again after Retry-After (capped), while retries last
 *   5xx                     again after 250 ms, 500 ms, … (capped), while retries last
 *   any other status        failed: "HTTP 404"
 *   timeout, cut short,     failed, with libcurl's reason or "the answer is
 *   over the size cap       larger than N bytes"
 *
 * Waits use the monotonic clock; the cache's ages use keel's clock, so a
 * pinned KEEL_NOW keeps cached answers fresh for the whole run.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/blocking.h"
#include "core/buf.h"
#include "core/clock.h"
#include "providers/providers_int.h"

#define CACHE_ENTRIES   128
#define BACKOFF_FIRST_MS 250

struct cache_entry {
    char *url;               /* NULL: free slot */
    char *body;
    size_t len;
    int64_t stored_ms;       /* keel clock */
};

struct providers {
    struct providers_conf conf;
    pthread_mutex_t lock;    /* the cache */
    struct cache_entry cache[CACHE_ENTRIES];
    size_t cache_next;       /* the slot replaced next (oldest first) */
};

struct transfer {
    enum provider_id id;
    CURL *easy;
    struct curl_slist *headers;
    struct keel_buf body;
    char *url;
    int filters;             /* 1 until the provider rejects them */
    int retries_left;
    int too_big;
    int active, done;
    int64_t due_ms;          /* monotonic; the next attempt not before */
    long backoff_ms;
    struct provider_papers papers;
    struct provider_report *report;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_start(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the set ------------------------------------------------------------- */

static int copy_conf(struct providers_conf *dst, const struct providers_conf *src)
{
    *dst = *src;
    for (int i = 0; i < PROVIDER_COUNT; i++) {
        dst->p[i].base_url = dst->p[i].mailto = dst->p[i].api_key = NULL;
        if (provider_strdup(&dst->p[i].base_url, src->p[i].base_url) ||
            provider_strdup(&dst->p[i].mailto, src->p[i].mailto) ||
            provider_strdup(&dst->p[i].api_key, src->p[i].api_key))
            return KEEL_ENOMEM;
    }
    return KEEL_OK;
}

int providers_new(const struct providers_conf *conf, struct providers **out,
                  struct keel_error *err)
{
    struct providers *p;

    /* libcurl (and its TLS library) starts at the first remote search,
     * not here: most pipelines never ask a remote provider. */
    if (!(p = keel_calloc(1, sizeof(*p))))
        return keel_error_set(err, KEEL_ENOMEM, "providers", "out of memory");
    if (copy_conf(&p->conf, conf) || pthread_mutex_init(&p->lock, NULL)) {
        providers_conf_release(&p->conf);
        keel_free(p);
        return keel_error_set(err, KEEL_ENOMEM, "providers", "out of memory");
    }
    *out = p;
    return KEEL_OK;
}

void providers_free(struct providers *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < CACHE_ENTRIES; i++) {
        keel_free(p->cache[i].url);
        keel_free(p->cache[i].body);
    }
    pthread_mutex_destroy(&p->lock);
    providers_conf_release(&p->conf);
    keel_free(p);
}

const struct providers_conf *providers_conf(const struct providers *p)
{
    return &p->conf;
}

int providers_any(const struct providers *p)
{
    for (int i = PROVIDER_LOCAL + 1; i < PROVIDER_COUNT; i++)
        if (p->conf.p[i].enabled)
            return 1;
    return 0;
}

/* ---- the cache ----------------------------------------------------------- */

/* A copy of the fresh cached body for `url` into `body`; 1 when found. */
static int cache_get(struct providers *p, const char *url, struct keel_buf *body)
{
    int64_t now = keel_clock_now();
    int found = 0;

    if (p->conf.cache_seconds <= 0)
        return 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < CACHE_ENTRIES && !found; i++) {
        struct cache_entry *e = &p->cache[i];
        if (e->url && !strcmp(e->url, url) && now - e->stored_ms < p->conf.cache_seconds * 1000)
            found = keel_buf_add(body, e->body, e->len) == KEEL_OK;
    }
    pthread_mutex_unlock(&p->lock);
    return found;
}

static void cache_put(struct providers *p, const char *url, const struct keel_buf *body)
{
    char *u, *b;
    struct cache_entry *e = NULL;

    if (p->conf.cache_seconds <= 0)
        return;
    u = keel_strdup(url);
    b = keel_malloc(body->len + 1);
    if (!u || !b) {
        keel_free(u);
        keel_free(b);
        return;   /* not cached: the next search asks again */
    }
    memcpy(b, body->data, body->len + 1);
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < CACHE_ENTRIES && !e; i++)
        if (p->cache[i].url && !strcmp(p->cache[i].url, url))
            e = &p->cache[i];
    if (!e) {
        e = &p->cache[p->cache_next];
        p->cache_next = (p->cache_next + 1) % CACHE_ENTRIES;
    }
    keel_free(e->url);
    keel_free(e->body);
    e->url = u;
    e->body = b;
    e->len = body->len;
    e->stored_ms = keel_clock_now();
    pthread_mutex_unlock(&p->lock);
}

/* ---- transfers ----------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    struct transfer *t = arg;

    int rc = keel_buf_add(&t->body, data, size * n);

    if (rc) {
        t->too_big = rc == KEEL_ETOOBIG ? 1 : -1;   /* -1: out of memory */
        return 0;   /* libcurl stops with CURLE_WRITE_ERROR */
    }
    return size * n;
}

static void fail(struct transfer *t, const char *why)
{
    t->done = 1;
    t->report->status = PROVIDER_FAILED;
    snprintf(t->report->reason, sizeof(t->report->reason), "%s", why);
}

/* Sets the URL for the next attempt and records it in the report. */
static int set_url(struct transfer *t, const struct providers *p, const struct paper_request *req)
{
    keel_free(t->url);
    t->url = provider_url(t->id, &p->conf.p[t->id], req, t->filters);
    if (!t->url || !t->report->urls ||
        json_array_append_new(t->report->urls, json_string(t->url)))
        return KEEL_ENOMEM;
    return KEEL_OK;
}

static int start(struct transfer *t, const struct providers *p, CURLM *multi)
{
    const struct provider_conf *c = &p->conf.p[t->id];
    long timeout = c->timeout_ms;

    keel_buf_reset(&t->body);
    t->too_big = 0;
    if (!t->easy && !(t->easy = curl_easy_init()))
        return KEEL_ENOMEM;
    curl_easy_reset(t->easy);
    if (!t->headers) {
        char key[600];
        t->headers = curl_slist_append(NULL, "Accept: application/json");
        if (t->headers && c->api_key && t->id == PROVIDER_SEMANTICSCHOLAR) {
            struct curl_slist *more;
            snprintf(key, sizeof(key), "x-api-key: %s", c->api_key);
            if (!(more = curl_slist_append(t->headers, key)))
                return KEEL_ENOMEM;
            t->headers = more;
        }
        if (!t->headers)
            return KEEL_ENOMEM;
    }
    curl_easy_setopt(t->easy, CURLOPT_URL, t->url);
    curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(t->easy, CURLOPT_USERAGENT, "keel (policy-first conversation engine)");
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout < 5000 ? timeout : 5000L);
    curl_easy_setopt(t->easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(t->easy, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(t->easy, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(t->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(t->easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(t->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)p->conf.max_response_bytes);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
    if (curl_multi_add_handle(multi, t->easy) != CURLM_OK)
        return KEEL_ENOMEM;
    t->active = 1;
    t->report->attempts++;
    return KEEL_OK;
}

/* A 200 body: parse it; cache it when it parsed. */
static void take_body(struct transfer *t, struct providers *p, int from_cache)
{
    struct keel_error err;
    int rc;

    keel_error_clear(&err);
    rc = provider_parse(t->id, t->body.data, t->body.len, &t->papers, &err);
    t->done = 1;
    if (rc) {
        char why[200];
        if (rc == KEEL_ENOMEM)
            snprintf(why, sizeof(why), "out of memory reading the answer");
        else
            snprintf(why, sizeof(why), "the answer is not valid %s JSON: %.150s",
                     provider_label(t->id), err.message);
        provider_papers_release(&t->papers);
        fail(t, why);
        return;
    }
    t->report->papers = t->papers.n;
    t->report->cached = from_cache;
    if (t->report->status != PROVIDER_OK_UNFILTERED)
        t->report->status = PROVIDER_OK;
    if (!from_cache)
        cache_put(p, t->url, &t->body);
}

static long next_backoff(struct transfer *t, long max_ms)
{
    long wait = t->backoff_ms ? t->backoff_ms * 2 : BACKOFF_FIRST_MS;

    t->backoff_ms = wait;
    return wait > max_ms ? max_ms : wait;
}

/* Sorts a finished attempt (see the table at the top). */
static int finish(struct transfer *t, struct providers *p, const struct paper_request *req,
                  CURLcode code)
{
    long status = 0;
    curl_off_t retry_after = 0;
    char why[200];

    t->active = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    t->report->http_status = status;
    if (code != CURLE_OK) {
        if (t->too_big < 0)
            snprintf(why, sizeof(why), "out of memory reading the answer");
        else if (t->too_big || code == CURLE_FILESIZE_EXCEEDED)
            snprintf(why, sizeof(why), "the answer is larger than %ld bytes",
                     p->conf.max_response_bytes);
        else if (code == CURLE_OPERATION_TIMEDOUT)
            snprintf(why, sizeof(why), "no answer within %ld ms", p->conf.p[t->id].timeout_ms);
        else if (code == CURLE_PARTIAL_FILE)
            snprintf(why, sizeof(why), "the answer was cut short");
        else
            snprintf(why, sizeof(why), "%s", curl_easy_strerror(code));
        fail(t, why);
        return KEEL_OK;
    }
    if (status == 200) {
        take_body(t, p, 0);
        return KEEL_OK;
    }
    if ((status == 400 || status == 422) && t->filters &&
        (req->year_from || req->year_to || req->open_access)) {
        snprintf(t->report->reason, sizeof(t->report->reason),
                 "rejected the filters (HTTP %ld); asked again without them", status);
        t->report->status = PROVIDER_OK_UNFILTERED;
        t->filters = 0;
        t->due_ms = mono_ms();
        return set_url(t, p, req);
    }
    if ((status == 429 || status >= 500) && t->retries_left > 0) {
        long wait = next_backoff(t, p->conf.max_backoff_ms);
        if (status == 429 &&
            curl_easy_getinfo(t->easy, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK &&
            retry_after > 0)
            wait = retry_after > p->conf.max_backoff_ms / 1000 ? p->conf.max_backoff_ms
                                                              : (long)retry_after * 1000;
        t->retries_left--;
        t->due_ms = mono_ms() + wait;
        return KEEL_OK;
    }
    if (status == 429)
        snprintf(why, sizeof(why), "rate limited (HTTP 429) after %d attempts",
                 t->report->attempts);
    else
        snprintf(why, sizeof(why), "HTTP %ld", status);
    fail(t, why);
    return KEEL_OK;
}

/* Runs every transfer to its end. */
static int run_all(struct transfer *ts, size_t n, struct providers *p,
                   const struct paper_request *req)
{
    CURLM *multi = curl_multi_init();
    long budget = p->conf.max_backoff_ms;
    int64_t deadline;
    int rc = KEEL_OK, blocking = 0;

    if (!multi)
        return KEEL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (2 * p->conf.p[ts[i].id].timeout_ms + p->conf.max_backoff_ms > budget)
            budget = 2 * p->conf.p[ts[i].id].timeout_ms + p->conf.max_backoff_ms;
    deadline = mono_ms() + budget;
    for (;;) {
        int64_t now = mono_ms(), next = -1;
        int running = 0, pending = 0, left;
        CURLMsg *msg;

        for (size_t i = 0; i < n && !rc; i++) {
            struct transfer *t = &ts[i];
            if (t->done || t->active)
                continue;
            if (t->due_ms > deadline) {   /* a retry would start too late */
                char why[120];
                snprintf(why, sizeof(why), "gave up: no answer within the search's %ld ms",
                         budget);
                fail(t, why);
                continue;
            }
            if (t->due_ms <= now)
                rc = start(t, p, multi);
            pending = 1;
        }
        for (size_t i = 0; i < n; i++)
            pending |= ts[i].active;
        if (rc || !pending)
            break;
        if (!blocking) {   /* a request is out: the providers answer in their own time */
            keel_blocking_begin();
            blocking = 1;
        }
        curl_multi_perform(multi, &running);
        while ((msg = curl_multi_info_read(multi, &left)))
            if (msg->msg == CURLMSG_DONE) {
                struct transfer *t = NULL;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
                curl_multi_remove_handle(multi, msg->easy_handle);
                if (t && (rc = finish(t, p, req, msg->data.result)))
                    break;
            }
        if (rc)
            break;
        for (size_t i = 0; i < n; i++)   /* after finish(): a retry may now be waiting */
            if (!ts[i].done && !ts[i].active && (next < 0 || ts[i].due_ms < next))
                next = ts[i].due_ms;
        {
            int wait = 100;
            now = mono_ms();
            if (next >= 0 && next - now < wait)
                wait = next - now > 0 ? (int)(next - now) : 0;
            if (running)
                curl_multi_poll(multi, NULL, 0, wait, NULL);
            else if (wait > 0) {
                struct timespec ts_wait = {wait / 1000, (long)(wait % 1000) * 1000000L};
                nanosleep(&ts_wait, NULL);
            }
        }
    }
    if (blocking)
        keel_blocking_end();
    for (size_t i = 0; i < n; i++)
        if (ts[i].easy && ts[i].active)
            curl_multi_remove_handle(multi, ts[i].easy);
    curl_multi_cleanup(multi);
    return rc;
}

/* ---- the search ---------------------------------------------------------- */

int providers_search(struct providers *p, const struct paper_request *req,
                     struct provider_papers *local, struct provider_papers *out,
                     struct provider_report reports[PROVIDER_COUNT], struct keel_error *err)
{
    struct transfer ts[PROVIDER_COUNT];
    struct provider_papers lists[PROVIDER_COUNT];
    size_t n = 0, n_lists = 0;
    int rc = KEEL_OK;

    memset(out, 0, sizeof(*out));
    memset(reports, 0, sizeof(reports[0]) * PROVIDER_COUNT);
    memset(ts, 0, sizeof(ts));
    memset(lists, 0, sizeof(lists));
    if (local) {   /* moved out whatever happens */
        reports[PROVIDER_LOCAL].status = PROVIDER_OK;
        reports[PROVIDER_LOCAL].papers = local->n;
        lists[n_lists++] = *local;
        memset(local, 0, sizeof(*local));
    }
    if (!req->query || !*req->query)
        rc = keel_error_set(err, KEEL_EINVAL, "query", "is required");
    else if (req->year_from && req->year_to && req->year_from > req->year_to)
        rc = keel_error_set(err, KEEL_EINVAL, "year_from", "must not be after year_to");
    else if (req->limit < 1 || req->limit > PROVIDER_LIMIT_MAX)
        rc = keel_error_set(err, KEEL_EINVAL, "limit", "must be between 1 and %d",
                            PROVIDER_LIMIT_MAX);
    if (rc)
        goto out;
    for (int i = PROVIDER_LOCAL + 1; i < PROVIDER_COUNT; i++) {
        struct transfer *t;
        if (!p->conf.p[i].enabled)
            continue;
        t = &ts[n++];
        t->id = (enum provider_id)i;
        t->report = &reports[i];
        t->filters = 1;
        t->retries_left = p->conf.retries;
        keel_buf_init(&t->body, (size_t)p->conf.max_response_bytes);
        if (!(t->report->urls = json_array()) || set_url(t, p, req)) {
            rc = keel_error_set(err, KEEL_ENOMEM, "providers", "out of memory");
            goto out;
        }
        if (cache_get(p, t->url, &t->body))
            take_body(t, p, 1);
    }
    if (n) {
        pthread_once(&curl_once, curl_start);
        for (size_t i = 0; i < n && !curl_ready; i++)
            if (!ts[i].done)
                fail(&ts[i], "libcurl could not start");
    }
    if ((rc = run_all(ts, n, p, req))) {
        rc = keel_error_set(err, KEEL_ENOMEM, "providers", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        lists[n_lists++] = ts[i].papers;   /* after the library's */
        memset(&ts[i].papers, 0, sizeof(ts[i].papers));
    }
    if (provider_papers_merge(lists, n_lists, req, out))
        rc = keel_error_set(err, KEEL_ENOMEM, "providers", "out of memory");
    n_lists = 0;
out:
    for (size_t i = 0; i < n; i++) {
        if (ts[i].easy)
            curl_easy_cleanup(ts[i].easy);
        curl_slist_free_all(ts[i].headers);
        keel_buf_release(&ts[i].body);
        keel_free(ts[i].url);
        provider_papers_release(&ts[i].papers);
    }
    for (size_t i = 0; i < n_lists; i++)
        provider_papers_release(&lists[i]);
    if (rc)
        provider_reports_release(reports);
    return rc;
}
