/*
 * records.c — paper records from every provider: the provider table,
 * helpers, hard post-filters, merging duplicates, fused ranking, JSON.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/json.h"
#include "providers/providers_int.h"

static const struct {
    const char *name, *label;
} table[PROVIDER_COUNT] = {
    [PROVIDER_LOCAL] = {"local", "the local library"},
    [PROVIDER_OPENALEX] = {"openalex", "OpenAlex"},
    [PROVIDER_SEMANTICSCHOLAR] = {"semanticscholar", "Semantic Scholar"},
};

const char *provider_name(enum provider_id id)
{
    return (unsigned)id < PROVIDER_COUNT ? table[id].name : "?";
}

const char *provider_label(enum provider_id id)
{
    return (unsigned)id < PROVIDER_COUNT ? table[id].label : "?";
}

int provider_find(const char *name)
{
    for (int i = 0; i < PROVIDER_COUNT; i++)
        if (name && !strcmp(name, table[i].name))
            return i;
    return -1;
}

char *provider_url(enum provider_id id, const struct provider_conf *conf,
                   const struct paper_request *req, int filters)
{
    struct keel_buf url;
    int rc;

    keel_buf_init(&url, 16 * 1024);
    if (id == PROVIDER_OPENALEX)
        rc = openalex_url(conf, req, filters, &url);
    else if (id == PROVIDER_SEMANTICSCHOLAR)
        rc = semanticscholar_url(conf, req, filters, &url);
    else
        rc = KEEL_EINVAL;
    if (rc) {
        keel_buf_release(&url);
        return NULL;
    }
    return keel_buf_detach(&url, NULL);
}

int provider_parse(enum provider_id id, const char *body, size_t len, struct provider_papers *out,
                   struct keel_error *err)
{
    json_t *doc = NULL;
    int rc;

    if ((rc = keel_json_parse(body, len, len + 1, provider_name(id), &doc, err)))
        return rc == KEEL_ENOMEM ? rc : KEEL_EINVAL;
    if (!json_is_object(doc))
        rc = keel_error_set(err, KEEL_EINVAL, provider_name(id), "the answer is %s, not an object",
                            keel_json_type_name(doc));
    else if (id == PROVIDER_OPENALEX)
        rc = openalex_parse(doc, out, err);
    else if (id == PROVIDER_SEMANTICSCHOLAR)
        rc = semanticscholar_parse(doc, out, err);
    else
        rc = keel_error_set(err, KEEL_EINVAL, provider_name(id), "has no parser");
    json_decref(doc);
    return rc;
}

int provider_parse_list(const json_t *list, enum provider_id id,
                        int (*convert)(const json_t *record, struct provider_paper *p),
                        struct provider_papers *out, struct keel_error *err)
{
    json_t *record;
    size_t i;

    json_array_foreach(list, i, record) {
        struct provider_paper *p;
        int rc;

        if (!json_is_object(record))
            continue;
        if (!(p = provider_papers_push(out)))
            return keel_error_set(err, KEEL_ENOMEM, provider_name(id), "out of memory");
        if ((rc = convert(record, p))) {
            provider_paper_release(p);
            out->n--;
            if (rc == KEEL_ENOMEM)
                return keel_error_set(err, KEEL_ENOMEM, provider_name(id), "out of memory");
        }
    }
    return KEEL_OK;
}

/* ---- helpers ----------------------------------------------------------- */

int provider_url_escape(struct keel_buf *url, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = KEEL_OK;

    for (const unsigned char *p = (const unsigned char *)text; *p && !rc; p++) {
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~')
            rc = keel_buf_addc(url, (char)*p);
        else if (*p == ' ')
            rc = keel_buf_addc(url, '+');
        else
            rc = keel_buf_addf(url, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
    }
    return rc;
}

int provider_ask_count(const struct paper_request *req)
{
    int n = req->limit * 2;

    return n < 1 ? 1 : n > PROVIDER_LIMIT_MAX ? PROVIDER_LIMIT_MAX : n;
}

int provider_strdup(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return KEEL_OK;
    return (*dst = keel_strdup(src)) ? KEEL_OK : KEEL_ENOMEM;
}

const char *provider_doi_bare(const char *doi)
{
    static const char *const prefixes[] = {"https://doi.org/", "http://doi.org/",
                                           "https://dx.doi.org/", "http://dx.doi.org/",
                                           "doi:", NULL};

    if (!doi)
        return NULL;
    for (const char *const *p = prefixes; *p; p++)
        if (!strncasecmp(doi, *p, strlen(*p)))
            return doi[strlen(*p)] ? doi + strlen(*p) : NULL;
    return doi;
}

/* ---- records ----------------------------------------------------------- */

struct provider_paper *provider_papers_push(struct provider_papers *papers)
{
    if (papers->n == papers->cap) {
        size_t cap = papers->cap ? papers->cap * 2 : 16;
        struct provider_paper *grown = keel_realloc(papers->items, cap * sizeof(*grown));
        if (!grown)
            return NULL;
        papers->items = grown;
        papers->cap = cap;
    }
    memset(&papers->items[papers->n], 0, sizeof(papers->items[0]));
    return &papers->items[papers->n++];
}

void provider_paper_release(struct provider_paper *p)
{
    keel_free(p->title);
    keel_free(p->abstract);
    keel_free(p->venue);
    keel_free(p->doi);
    keel_free(p->url);
    keel_free(p->pdf_url);
    json_decref(p->authors);
    for (int i = 0; i < PROVIDER_COUNT; i++)
        keel_free(p->ids[i]);
    memset(p, 0, sizeof(*p));
}

void provider_papers_release(struct provider_papers *papers)
{
    for (size_t i = 0; i < papers->n; i++)
        provider_paper_release(&papers->items[i]);
    keel_free(papers->items);
    memset(papers, 0, sizeof(*papers));
}

int provider_paper_allowed(const struct provider_paper *p, const struct paper_request *req)
{
    if ((req->year_from || req->year_to) && !p->year)
        return 0;
    if (req->year_from && p->year < req->year_from)
        return 0;
    if (req->year_to && p->year > req->year_to)
        return 0;
    return !req->open_access || p->is_open_access || p->pdf_url;
}

/* A title folded for comparison: ASCII letters and digits lowercased,
 * every run of anything else one space, bytes of UTF-8 sequences kept. */
static void title_key(const char *title, char *out, size_t n)
{
    size_t len = 0;
    int space = 0;

    for (const unsigned char *p = (const unsigned char *)(title ? title : ""); *p; p++) {
        if (isalnum(*p) || *p >= 0x80) {
            if (space && len && len + 1 < n)
                out[len++] = ' ';
            space = 0;
            if (len + 1 < n)
                out[len++] = (char)tolower(*p);
        } else {
            space = 1;
        }
    }
    out[len] = '\0';
}

static int same_paper(const struct provider_paper *a, const struct provider_paper *b)
{
    char ka[1024], kb[1024];

    if (a->doi && b->doi)
        return !strcasecmp(a->doi, b->doi);
    title_key(a->title, ka, sizeof(ka));
    title_key(b->title, kb, sizeof(kb));
    return ka[0] && !strcmp(ka, kb);
}

/* Moves each field `into` lacks from `from`. */
static void fill_from(struct provider_paper *into, struct provider_paper *from)
{
#define TAKE(f)                                                                                  \
    if (!into->f) {                                                                              \
        into->f = from->f;                                                                       \
        from->f = NULL;                                                                          \
    }
    TAKE(abstract)
    TAKE(venue)
    TAKE(doi)
    TAKE(url)
    TAKE(pdf_url)
#undef TAKE
    for (int i = 0; i < PROVIDER_COUNT; i++)
        if (!into->ids[i]) {
            into->ids[i] = from->ids[i];
            from->ids[i] = NULL;
        }
    if (!into->year)
        into->year = from->year;
    if (!json_array_size(into->authors) && json_array_size(from->authors)) {
        json_decref(into->authors);
        into->authors = from->authors;
        from->authors = NULL;
    }
    into->is_open_access |= from->is_open_access;
    into->providers |= from->providers;
}

static int popcount(unsigned v)
{
    int n = 0;

    for (; v; v &= v - 1)
        n++;
    return n;
}

static int by_fused_rank(const void *x, const void *y)
{
    const struct provider_paper *a = x, *b = y;
    int c;

    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if ((c = popcount(b->providers) - popcount(a->providers)))
        return c;
    if (a->year != b->year)
        return a->year > b->year ? -1 : 1;
    return strcmp(a->title ? a->title : "", b->title ? b->title : "");
}

int provider_papers_merge(struct provider_papers lists[], size_t n_lists,
                          const struct paper_request *req, struct provider_papers *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t l = 0; l < n_lists; l++) {
        int rank = 0;
        for (size_t i = 0; i < lists[l].n; i++) {
            struct provider_paper *p = &lists[l].items[i], *into = NULL;
            if (!provider_paper_allowed(p, req))
                continue;
            rank++;
            for (size_t k = 0; k < out->n && !into; k++)
                if (same_paper(&out->items[k], p))
                    into = &out->items[k];
            if (into) {
                fill_from(into, p);
            } else {
                if (!(into = provider_papers_push(out)))
                    goto nomem;
                *into = *p;
                memset(p, 0, sizeof(*p));
                into->score = 0;
            }
            into->score += 1.0 / (60.0 + rank);
        }
        provider_papers_release(&lists[l]);
    }
    if (out->n)
        qsort(out->items, out->n, sizeof(out->items[0]), by_fused_rank);
    while ((int)out->n > req->limit)
        provider_paper_release(&out->items[--out->n]);
    return KEEL_OK;
nomem:
    for (size_t l = 0; l < n_lists; l++)
        provider_papers_release(&lists[l]);
    provider_papers_release(out);
    return KEEL_ENOMEM;
}

/* ---- JSON -------------------------------------------------------------- */

json_t *provider_paper_json(const struct provider_paper *p)
{
    json_t *ids = json_object(), *names = json_array(), *out;

    for (int i = 0; ids && names && i < PROVIDER_COUNT; i++) {
        if (p->ids[i] && json_object_set_new(ids, table[i].name, json_string(p->ids[i])))
            goto fail;
        if ((p->providers & (1u << i)) && json_array_append_new(names, json_string(table[i].name)))
            goto fail;
    }
    if (!ids || !names)
        goto fail;
    out = json_pack("{s:s, s:s?, s:o, s:s?, s:O?, s:s?, s:s?, s:s?, s:b, s:o, s:o, s:f}", "title",
                    p->title, "abstract", p->abstract, "year",
                    p->year ? json_integer(p->year) : json_null(), "venue", p->venue, "authors",
                    p->authors, "doi", p->doi, "url", p->url, "pdf_url", p->pdf_url,
                    "is_open_access", p->is_open_access || p->pdf_url, "ids", ids, "providers",
                    names, "score", p->score);
    return out;
fail:
    json_decref(ids);
    json_decref(names);
    return NULL;
}

json_t *provider_report_json(enum provider_id id, const struct provider_report *r)
{
    static const char *const status[] = {
        [PROVIDER_OFF] = "off",
        [PROVIDER_OK] = "ok",
        [PROVIDER_OK_UNFILTERED] = "ok_without_filters",
        [PROVIDER_FAILED] = "failed",
    };

    return json_pack("{s:s, s:s, s:I, s:i, s:I, s:b, s:s, s:O?}", "provider", provider_name(id),
                     "status", status[r->status], "http_status", (json_int_t)r->http_status,
                     "attempts", r->attempts, "papers", (json_int_t)r->papers, "cached",
                     r->cached, "reason", r->reason, "urls", r->urls);
}

void provider_reports_release(struct provider_report reports[PROVIDER_COUNT])
{
    for (int i = 0; i < PROVIDER_COUNT; i++) {
        json_decref(reports[i].urls);
        reports[i].urls = NULL;
    }
}
