/*
 * semanticscholar.c — the Semantic Scholar Graph API provider:
 * /graph/v1/paper/search requests with native filters, paper objects
 * into paper records.
 *
 * Request: {base}/graph/v1/paper/search?query=Q&year=A-B&openAccessPdf=
 * &limit=N&fields=…; the year range is "A-B", "A-" or "-B". The API key,
 * when configured, goes in the x-api-key header (fetch.c), never in the
 * URL. Record: title, abstract, year, venue (else journal.name), authors'
 * names, externalIds.DOI, url, isOpenAccess, openAccessPdf.url, and
 * paperId as the provider id.
 */
#include <string.h>

#include "core/buf.h"
#include "providers/providers_int.h"

#define S2_FIELDS "title,abstract,year,venue,journal,authors,externalIds,url,isOpenAccess," \
                  "openAccessPdf"

int semanticscholar_url(const struct provider_conf *conf, const struct paper_request *req,
                        int filters, struct keel_buf *url)
{
    int rc = keel_buf_addf(url, "%s/graph/v1/paper/search?query=", conf->base_url);

    if (!rc)
        rc = provider_url_escape(url, req->query);
    if (!rc && filters && (req->year_from || req->year_to)) {
        rc = keel_buf_adds(url, "&year=");
        if (!rc && req->year_from)
            rc = keel_buf_addf(url, "%04d", req->year_from);
        if (!rc)
            rc = keel_buf_addc(url, '-');
        if (!rc && req->year_to)
            rc = keel_buf_addf(url, "%04d", req->year_to);
    }
    if (!rc && filters && req->open_access)
        rc = keel_buf_adds(url, "&openAccessPdf=");
    if (!rc)
        rc = keel_buf_addf(url, "&limit=%d&fields=" S2_FIELDS, provider_ask_count(req));
    return rc;
}

static const char *string_at(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    return json_is_string(v) && json_string_length(v) ? json_string_value(v) : NULL;
}

static int record_to_paper(const json_t *rec, struct provider_paper *p)
{
    const json_t *year = json_object_get(rec, "year");
    const json_t *authors = json_object_get(rec, "authors");
    const char *title = string_at(rec, "title");
    const char *venue = string_at(rec, "venue");
    const char *pdf = string_at(json_object_get(rec, "openAccessPdf"), "url");

    if (!title)
        return KEEL_EINVAL;
    if (!venue)
        venue = string_at(json_object_get(rec, "journal"), "name");
    p->year = json_is_integer(year) && json_integer_value(year) >= 1000 &&
                      json_integer_value(year) <= 9999
                  ? (int)json_integer_value(year) : 0;
    p->is_open_access = json_is_true(json_object_get(rec, "isOpenAccess")) || pdf;
    if (provider_strdup(&p->title, title) || provider_strdup(&p->abstract, string_at(rec, "abstract")) ||
        provider_strdup(&p->venue, venue) ||
        provider_strdup(&p->doi, provider_doi_bare(string_at(json_object_get(rec, "externalIds"), "DOI"))) ||
        provider_strdup(&p->url, string_at(rec, "url")) || provider_strdup(&p->pdf_url, pdf) ||
        provider_strdup(&p->ids[PROVIDER_SEMANTICSCHOLAR], string_at(rec, "paperId")))
        return KEEL_ENOMEM;
    if (!(p->authors = json_array()))
        return KEEL_ENOMEM;
    if (json_is_array(authors)) {
        json_t *author;
        size_t i;
        json_array_foreach(authors, i, author) {
            json_t *name = json_object_get(author, "name");
            if (json_is_string(name) && json_array_append(p->authors, name))
                return KEEL_ENOMEM;
        }
    }
    p->providers = 1u << PROVIDER_SEMANTICSCHOLAR;
    return KEEL_OK;
}

int semanticscholar_parse(const json_t *doc, struct provider_papers *out, struct keel_error *err)
{
    const json_t *data = json_object_get(doc, "data");

    /* No match at all: {"total": 0, "offset": 0} without "data". */
    if (!data && json_is_integer(json_object_get(doc, "total")))
        return KEEL_OK;
    if (!json_is_array(data))
        return keel_error_set(err, KEEL_EINVAL, "data",
                              "a Semantic Scholar answer has a \"data\" array");
    return provider_parse_list(data, PROVIDER_SEMANTICSCHOLAR, record_to_paper, out, err);
}
