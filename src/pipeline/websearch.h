/*
 * websearch.h — the web-search provider behind the pipeline's web port
 * (struct web_fallback): a SearxNG-compatible JSON endpoint,
 *
 *   GET {url}/search?q=…&format=json  →  {"results": [{title, url, content}]}
 *
 * asked through libcurl with a connect and a whole-request timeout and a
 * cap on the body. Configured by the pack (handlers.websearch), then
 * KEEL_WEBSEARCH_URL, then the caller (--websearch-url); "none" turns a
 * configured one off. Without a URL there is no provider, and the
 * web_search tool says web search is not configured.
 */
#ifndef KEEL_PIPELINE_WEBSEARCH_H
#define KEEL_PIPELINE_WEBSEARCH_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"
#include "pipeline/pipeline.h"

#define WEBSEARCH_TITLE_MAX 300     /* bytes kept of a result's title */
#define WEBSEARCH_URL_MAX 2048      /* a result's URL (longer: the result is dropped) */
#define WEBSEARCH_SNIPPET_MAX 1000  /* bytes kept of its content */
#define WEBSEARCH_RESULTS_MAX 20

struct websearch_conf {
    char url[1024];       /* "" : none */
    long timeout_ms;      /* the whole request (default 8000) */
    size_t max_bytes;     /* of the body (default 1 MiB) */
    int max_results;      /* 1..WEBSEARCH_RESULTS_MAX (default 5) */
};

/* The pack's handlers.websearch section (may be NULL), then
 * KEEL_WEBSEARCH_URL, then `url` (may be NULL). Errors name the field. */
int websearch_conf_load(const json_t *section, const char *url, struct websearch_conf *conf,
                        struct keel_error *err);

struct websearch;

/* A provider for `conf` (which has a URL). */
int websearch_new(const struct websearch_conf *conf, struct websearch **out,
                  struct keel_error *err);

/* Frees a provider; NULL is a no-op. */
void websearch_free(struct websearch *ws);

/* The provider as the pipeline's web port (name "searxng"). */
const struct web_fallback *websearch_port(const struct websearch *ws);

/* Reads a SearxNG JSON body: at most `limit` results with a title and
 * an http(s) URL, as a new array of {title, url, snippet} (texts cut at
 * their caps on a UTF-8 boundary). KEEL_EINVAL when the body is not
 * JSON or has no "results" list. */
int websearch_parse(const char *body, size_t n, int limit, json_t **out, struct keel_error *err);

#endif
