/*
 * providers.h — scholarly search providers behind one port.
 *
 * A provider turns a paper request (query, years, open access, count)
 * into its own HTTP request with the filters in its native form (never
 * years in the query text), and its response into paper records:
 *
 *   openalex          GET {base}/works?search=…&filter=from_publication_date:…,
 *                     to_publication_date:…,is_oa:true&per_page=N&mailto=…
 *   semanticscholar   GET {base}/graph/v1/paper/search?query=…&year=A-B
 *                     &openAccessPdf&limit=N&fields=…  (x-api-key when set)
 *
 * providers_search() asks every enabled provider at once (libcurl multi),
 * then keeps the papers the request allows (a year filter drops papers of
 * unknown year; open access means is_oa or an open-access/PDF url),
 * merges duplicates (DOI, else normalised title), ranks by reciprocal
 * rank fusion and cuts to the count. A provider that fails never fails
 * the search: its report says what happened (status, HTTP code, reason,
 * every URL tried) and the others' papers stand. A provider answering
 * 400/422 to a filtered request is asked once more without the filters
 * (the post-filters still hold); 429 waits for Retry-After and 5xx backs
 * off, both bounded; 200 bodies are cached by URL for cache_seconds and
 * capped at max_response_bytes.
 */
#ifndef KEEL_PROVIDERS_PROVIDERS_H
#define KEEL_PROVIDERS_PROVIDERS_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"

#define PROVIDERS_MAX       4
#define PROVIDER_LIMIT_MAX  100     /* papers asked of one provider */

/* The local library is a provider too: its papers come from the store
 * (the caller searches it) and are merged like the others. */
enum provider_id { PROVIDER_LOCAL, PROVIDER_OPENALEX, PROVIDER_SEMANTICSCHOLAR, PROVIDER_COUNT };

/* One provider's settings (pack section `providers:`, then environment). */
struct provider_conf {
    int enabled;
    char *base_url;        /* no trailing slash */
    char *mailto;          /* OpenAlex's polite pool; may be NULL */
    char *api_key;         /* Semantic Scholar's x-api-key, read from api_key_env; may be NULL */
    long timeout_ms;       /* one attempt, connect included */
};

struct providers_conf {
    struct provider_conf p[PROVIDER_COUNT];
    long cache_seconds;          /* 0: no cache */
    long max_response_bytes;
    int retries;                 /* after 429 or 5xx */
    long max_backoff_ms;         /* the longest wait before a retry */
};

/* What to search for. Years 0 are open. */
struct paper_request {
    const char *query;
    int year_from, year_to;
    int open_access;
    int limit;                   /* 1..PROVIDER_LIMIT_MAX */
};

/* A paper as every provider gives it. Strings are owned; authors is a
 * JSON array of names. */
struct provider_paper {
    char *title, *abstract, *venue, *doi, *url, *pdf_url;
    int year;                    /* 0: unknown */
    int is_open_access;
    json_t *authors;
    char *ids[PROVIDER_COUNT];   /* each provider's own id, NULL when not from it */
    unsigned providers;          /* bit i: returned by provider i */
    double score;                /* fused rank */
};

struct provider_papers {
    struct provider_paper *items;
    size_t n, cap;
};

/* The built-in providers: name ("openalex"), label ("OpenAlex"). The
 * local library has no URL and no parser. */
const char *provider_name(enum provider_id id);
const char *provider_label(enum provider_id id);

/* The provider named `name`, or -1. */
int provider_find(const char *name);

/* Defaults (both providers off, the public base URLs, 8 s timeouts, a
 * 10-minute cache, 4 MiB bodies, 2 retries, 4 s longest backoff), then
 * the pack's `providers:` object when `section` is not NULL, then the
 * environment: KEEL_PROVIDERS (a comma list naming the providers on;
 * "none" for none), KEEL_OPENALEX_URL, KEEL_OPENALEX_MAILTO,
 * KEEL_SEMANTICSCHOLAR_URL. A bad value is KEEL_EINVAL naming its field
 * ("providers.openalex.timeout_ms"). Release with providers_conf_release. */
int providers_conf_load(const json_t *section, struct providers_conf *out,
                        struct keel_error *err);
void providers_conf_release(struct providers_conf *conf);

/* Turns on exactly the providers of the comma list `names` ("openalex,
 * semanticscholar"); KEEL_EINVAL names an unknown one. */
int providers_conf_enable(struct providers_conf *conf, const char *names, struct keel_error *err);

/* The request URL a provider gets for `req`, with (`filters` 1) or
 * without its native filters. Returns a new string or NULL (out of
 * memory). */
char *provider_url(enum provider_id id, const struct provider_conf *conf,
                   const struct paper_request *req, int filters);

/* Parses a provider's 200 body into papers appended to `out`. KEEL_EINVAL
 * when the body is not the provider's JSON (err says why). */
int provider_parse(enum provider_id id, const char *body, size_t len, struct provider_papers *out,
                   struct keel_error *err);

/* OpenAlex's abstract_inverted_index ({"word": [positions]}) as text,
 * words in position order, into *out; *out NULL when the index is absent
 * or holds no usable position. KEEL_ENOMEM when out of memory. */
int provider_abstract_from_index(const json_t *index, char **out);

/* ---- the search ---------------------------------------------------------- */

enum provider_status {
    PROVIDER_OFF,             /* not enabled */
    PROVIDER_OK,
    PROVIDER_OK_UNFILTERED,   /* rejected the filters, answered without them */
    PROVIDER_FAILED,
};

struct provider_report {
    enum provider_status status;
    int cached;               /* the answer came from the cache */
    long http_status;         /* the last attempt's, 0 without one */
    int attempts;
    size_t papers;            /* parsed, before post-filters */
    char reason[200];         /* why it failed or was retried; "" when clean */
    json_t *urls;             /* every URL tried, in order (array of strings) */
};

struct providers;   /* the cache and the transfer machinery, shared by searches */

/* Creates a provider set for `conf` (copied); libcurl starts at the first
 * remote search. KEEL_ENOMEM. */
int providers_new(const struct providers_conf *conf, struct providers **out,
                  struct keel_error *err);
void providers_free(struct providers *p);

/* The configuration in use. */
const struct providers_conf *providers_conf(const struct providers *p);

/* Nonzero when at least one provider is enabled. */
int providers_any(const struct providers *p);

/* Asks every enabled remote provider, then post-filters, merges (with
 * `local`, the library's papers in rank order, moved out; may be NULL),
 * ranks and cuts to req->limit into *out (empty when nothing passes).
 * reports[i] tells provider i's story. Fails only on bad arguments (KEEL_EINVAL: an empty
 * query, years reversed, a limit outside 1..PROVIDER_LIMIT_MAX) or when
 * out of memory; never because a provider failed. Release the reports
 * with provider_reports_release. Safe to call from several threads on
 * one `p`. */
int providers_search(struct providers *p, const struct paper_request *req,
                     struct provider_papers *local, struct provider_papers *out, struct provider_report reports[PROVIDER_COUNT],
                     struct keel_error *err);
void provider_reports_release(struct provider_report reports[PROVIDER_COUNT]);

/* ---- records ------------------------------------------------------------- */

/* Keeps the papers `req` allows, merges duplicates (same DOI, else same
 * normalised title: fields missing in the first are filled from the
 * second, ids and provider bits united) and ranks by fused rank:
 * score = sum over the lists holding the paper of 1 / (60 + rank).
 * `lists` are each provider's papers in its own order (moved out: the
 * lists are empty afterwards). Ties: more providers, newer, then title.
 * Cuts to req->limit. */
int provider_papers_merge(struct provider_papers lists[], size_t n_lists,
                          const struct paper_request *req, struct provider_papers *out);

/* Nonzero when `paper` passes the request's hard filters. */
int provider_paper_allowed(const struct provider_paper *paper, const struct paper_request *req);

/* The paper as JSON {title, abstract, year, venue, authors, doi, url,
 * pdf_url, is_open_access, ids: {provider: id}, providers: [names],
 * score}; NULL when out of memory. */
json_t *provider_paper_json(const struct provider_paper *paper);

/* The report as JSON {provider, status, http_status, attempts, papers,
 * cached, reason, urls}; NULL when out of memory. */
json_t *provider_report_json(enum provider_id id, const struct provider_report *report);

void provider_paper_release(struct provider_paper *paper);
void provider_papers_release(struct provider_papers *papers);

/* Appends a zeroed paper; NULL when out of memory. */
struct provider_paper *provider_papers_push(struct provider_papers *papers);

#endif
