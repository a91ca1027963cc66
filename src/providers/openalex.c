/*
 * openalex.c — the OpenAlex provider: /works requests with native
 * filters, Work objects into paper records.
 *
 * Request: {base}/works?search=Q&filter=from_publication_date:A-01-01,
 * to_publication_date:B-12-31,is_oa:true&per_page=N&mailto=M. Filter
 * values are OpenAlex syntax and stay literal; the query and mailto are
 * percent-encoded. Record: title (or display_name), the abstract rebuilt
 * from abstract_inverted_index, publication_year, the primary location's
 * source as venue, authorships' names, the DOI without its doi.org
 * prefix, open_access.is_oa / oa_url, best_oa_location.pdf_url, and the
 * Work id (https://openalex.org/W…) as the provider id.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "providers/providers_int.h"

int openalex_url(const struct provider_conf *conf, const struct paper_request *req, int filters,
                 struct keel_buf *url)
{
    int rc = keel_buf_addf(url, "%s/works?search=", conf->base_url);
    int first = 1;

    if (!rc)
        rc = provider_url_escape(url, req->query);
    if (!rc && filters && (req->year_from || req->year_to || req->open_access)) {
        rc = keel_buf_adds(url, "&filter=");
        if (!rc && req->year_from) {
            rc = keel_buf_addf(url, "from_publication_date:%04d-01-01", req->year_from);
            first = 0;
        }
        if (!rc && req->year_to) {
            rc = keel_buf_addf(url, "%sto_publication_date:%04d-12-31", first ? "" : ",",
                               req->year_to);
            first = 0;
        }
        if (!rc && req->open_access)
            rc = keel_buf_addf(url, "%sis_oa:true", first ? "" : ",");
    }
    if (!rc)
        rc = keel_buf_addf(url, "&per_page=%d", provider_ask_count(req));
    if (!rc && conf->mailto && *conf->mailto) {
        rc = keel_buf_adds(url, "&mailto=");
        if (!rc)
            rc = provider_url_escape(url, conf->mailto);
    }
    return rc;
}

/* Words with their first position, for rebuilding an abstract. */
struct placed {
    long pos;
    const char *word;
};

static int by_position(const void *a, const void *b)
{
    const struct placed *x = a, *y = b;

    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

#define ABSTRACT_WORDS_MAX 20000   /* positions beyond this are not an abstract */

int provider_abstract_from_index(const json_t *index, char **out)
{
    struct placed *placed = NULL;
    size_t n = 0, cap = 0;
    struct keel_buf text;
    const char *word;
    json_t *positions;
    int rc = KEEL_OK;

    *out = NULL;
    if (!json_is_object(index) || !json_object_size(index))
        return KEEL_OK;
    keel_buf_init(&text, 256 * 1024);
    json_object_foreach((json_t *)index, word, positions) {
        json_t *pos;
        size_t i;

        if (!json_is_array(positions))
            continue;
        json_array_foreach(positions, i, pos) {
            if (!json_is_integer(pos) || json_integer_value(pos) < 0 ||
                json_integer_value(pos) >= ABSTRACT_WORDS_MAX)
                continue;
            if (n == cap) {
                size_t grown = cap ? cap * 2 : 256;
                struct placed *p = keel_realloc(placed, grown * sizeof(*p));
                if (!p) {
                    rc = KEEL_ENOMEM;
                    goto out;
                }
                placed = p;
                cap = grown;
            }
            placed[n].pos = (long)json_integer_value(pos);
            placed[n++].word = word;
        }
    }
    if (!n)
        goto out;
    qsort(placed, n, sizeof(*placed), by_position);
    for (size_t i = 0; i < n; i++)
        if ((i && keel_buf_addc(&text, ' ')) || keel_buf_adds(&text, placed[i].word))
            break;   /* at the cap: keep what fits */
    if (!(*out = keel_buf_detach(&text, NULL)))
        rc = KEEL_ENOMEM;
out:
    keel_buf_release(&text);
    keel_free(placed);
    return rc;
}

static const char *string_at(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    return json_is_string(v) && json_string_length(v) ? json_string_value(v) : NULL;
}

static int work_to_paper(const json_t *work, struct provider_paper *p)
{
    const json_t *oa = json_object_get(work, "open_access");
    const json_t *primary = json_object_get(work, "primary_location");
    const json_t *best = json_object_get(work, "best_oa_location");
    const json_t *year = json_object_get(work, "publication_year");
    const json_t *ships = json_object_get(work, "authorships");
    const char *title = string_at(work, "title");
    const char *pdf = string_at(best, "pdf_url");
    const char *url;

    if (!title)
        title = string_at(work, "display_name");
    if (!title)
        return KEEL_EINVAL;   /* a record without a title is skipped */
    url = string_at(primary, "landing_page_url");
    if (!url)
        url = string_at(work, "doi");
    if (!url)
        url = string_at(work, "id");
    if (!pdf)
        pdf = string_at(primary, "pdf_url");
    if (!pdf)
        pdf = string_at(oa, "oa_url");
    p->year = json_is_integer(year) && json_integer_value(year) >= 1000 &&
                      json_integer_value(year) <= 9999
                  ? (int)json_integer_value(year) : 0;
    p->is_open_access = json_is_true(json_object_get(oa, "is_oa")) || pdf;
    if (provider_strdup(&p->title, title) ||
        provider_strdup(&p->venue, string_at(json_object_get(primary, "source"), "display_name")) ||
        provider_strdup(&p->doi, provider_doi_bare(string_at(work, "doi"))) ||
        provider_strdup(&p->url, url) || provider_strdup(&p->pdf_url, pdf) ||
        provider_strdup(&p->ids[PROVIDER_OPENALEX], string_at(work, "id")))
        return KEEL_ENOMEM;
    if (provider_abstract_from_index(json_object_get(work, "abstract_inverted_index"),
                                     &p->abstract))
        return KEEL_ENOMEM;
    if (!(p->authors = json_array()))
        return KEEL_ENOMEM;
    if (json_is_array(ships)) {
        json_t *ship;
        size_t i;
        json_array_foreach(ships, i, ship) {
            json_t *name = json_object_get(json_object_get(ship, "author"), "display_name");
            if (json_is_string(name) && json_array_append(p->authors, name))
                return KEEL_ENOMEM;
        }
    }
    p->providers = 1u << PROVIDER_OPENALEX;
    return KEEL_OK;
}

int openalex_parse(const json_t *doc, struct provider_papers *out, struct keel_error *err)
{
    const json_t *results = json_object_get(doc, "results");

    if (!json_is_array(results))
        return keel_error_set(err, KEEL_EINVAL, "results",
                              "an OpenAlex answer has a \"results\" array");
    return provider_parse_list(results, PROVIDER_OPENALEX, work_to_paper, out, err);
}
