/*
 * providers_int.h — what the provider files share: each provider's URL
 * builder and parser, and small record helpers (records.c).
 */
#ifndef KEEL_PROVIDERS_INT_H
#define KEEL_PROVIDERS_INT_H

#include "core/buf.h"
#include "providers/providers.h"

/* Each remote provider's request URL (appended to `url`) and parser of
 * its parsed 200 body. Records without a title are skipped. */
int openalex_url(const struct provider_conf *conf, const struct paper_request *req, int filters,
                 struct keel_buf *url);
int openalex_parse(const json_t *doc, struct provider_papers *out, struct keel_error *err);
int semanticscholar_url(const struct provider_conf *conf, const struct paper_request *req,
                        int filters, struct keel_buf *url);
int semanticscholar_parse(const json_t *doc, struct provider_papers *out, struct keel_error *err);

/* Converts each object of `list` with `convert` into a paper appended to
 * `out`; a record `convert` refuses (KEEL_EINVAL: no title) is skipped.
 * KEEL_ENOMEM names the provider. */
int provider_parse_list(const json_t *list, enum provider_id id,
                        int (*convert)(const json_t *record, struct provider_paper *p),
                        struct provider_papers *out, struct keel_error *err);

/* Appends `text` percent-encoded (RFC 3986 unreserved bytes stay). */
int provider_url_escape(struct keel_buf *url, const char *text);

/* How many papers to ask one provider for: twice the request's count
 * (room for duplicates and post-filters), at most PROVIDER_LIMIT_MAX. */
int provider_ask_count(const struct paper_request *req);

/* *dst = a copy of `src`, or NULL for NULL. KEEL_ENOMEM on failure. */
int provider_strdup(char **dst, const char *src);

/* A DOI without its "https://doi.org/" (or similar) prefix; NULL for NULL. */
const char *provider_doi_bare(const char *doi);

#endif
