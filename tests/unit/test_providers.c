/*
 * test_providers.c — the scholarly providers (src/providers/): the exact
 * request each policy decision produces (recent, since, range, open
 * access, count) for OpenAlex and Semantic Scholar, parsing of the real
 * recorded answers in ../shared/data/api_responses (skipped when absent),
 * merging and de-duplication across providers, the hard post-filters,
 * and every failure — 400 (retried without filters), 404, 429 with
 * Retry-After, 500, a timeout, a cut body, invalid JSON, an answer over
 * the size cap — each ending in a report and a finished search. A fake
 * HTTP server (tests/fake) runs in each test's own process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../fake/fake_http.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "providers/providers.h"
#include "unit.h"

static struct fake_http *fake;
static int port;
static char base[64];

static void fake_setup(void)
{
    ck_assert_int_eq(fake_http_start(&fake, &port), 0);
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
}

static void fake_teardown(void)
{
    fake_http_stop(fake);
    fake = NULL;
}

/* A configuration with the given providers pointed at the fake server. */
static void conf_for(struct providers_conf *conf, int openalex, int s2)
{
    struct keel_error err;

    unsetenv("KEEL_PROVIDERS");
    unsetenv("KEEL_OPENALEX_URL");
    unsetenv("KEEL_SEMANTICSCHOLAR_URL");
    unsetenv("KEEL_OPENALEX_MAILTO");
    ck_assert_int_eq(providers_conf_load(NULL, conf, &err), KEEL_OK);
    for (int i = PROVIDER_OPENALEX; i < PROVIDER_COUNT; i++) {
        keel_free(conf->p[i].base_url);
        conf->p[i].base_url = keel_strdup(base);
        conf->p[i].timeout_ms = 2000;
    }
    conf->p[PROVIDER_OPENALEX].enabled = openalex;
    conf->p[PROVIDER_SEMANTICSCHOLAR].enabled = s2;
    conf->max_backoff_ms = 1500;
}

static char *data_path(char *out, size_t n, const char *rel)
{
    snprintf(out, n, "%s/../shared/data/api_responses/%s", unit_root(), rel);
    return access(out, R_OK) ? NULL : out;
}

/* ---- requests ------------------------------------------------------------ */

static void assert_url(enum provider_id id, const struct paper_request *req, int filters,
                       const char *want)
{
    struct providers_conf conf;
    char *url;

    conf_for(&conf, 1, 1);
    keel_free(conf.p[PROVIDER_OPENALEX].mailto);
    conf.p[PROVIDER_OPENALEX].mailto = keel_strdup("team@example.org");
    url = provider_url(id, &conf.p[id], req, filters);
    ck_assert_ptr_nonnull(url);
    ck_assert_str_eq(url + strlen(base), want);
    keel_free(url);
    providers_conf_release(&conf);
}

START_TEST(test_openalex_requests)
{
    struct paper_request recent = {"social media & sleep", 2022, 2026, 0, 5};
    struct paper_request since = {"transformers", 2020, 0, 0, 10};
    struct paper_request range_oa = {"graph neural networks", 2018, 2022, 1, 20};
    struct paper_request until = {"turing", 0, 1950, 0, 60};

    assert_url(PROVIDER_OPENALEX, &recent, 1,
               "/works?search=social+media+%26+sleep"
               "&filter=from_publication_date:2022-01-01,to_publication_date:2026-12-31"
               "&per_page=10&mailto=team%40example.org");
    assert_url(PROVIDER_OPENALEX, &since, 1,
               "/works?search=transformers&filter=from_publication_date:2020-01-01"
               "&per_page=20&mailto=team%40example.org");
    assert_url(PROVIDER_OPENALEX, &range_oa, 1,
               "/works?search=graph+neural+networks&filter=from_publication_date:2018-01-01,"
               "to_publication_date:2022-12-31,is_oa:true&per_page=40&mailto=team%40example.org");
    /* count 60 asks for the most one page holds */
    assert_url(PROVIDER_OPENALEX, &until, 1,
               "/works?search=turing&filter=to_publication_date:1950-12-31&per_page=100"
               "&mailto=team%40example.org");
    /* the retry after a rejection drops the filters, nothing else */
    assert_url(PROVIDER_OPENALEX, &range_oa, 0,
               "/works?search=graph+neural+networks&per_page=40&mailto=team%40example.org");
}
END_TEST

START_TEST(test_semanticscholar_requests)
{
    struct paper_request recent = {"social media sleep", 2022, 2026, 0, 5};
    struct paper_request since = {"transformers", 2020, 0, 1, 12};
    struct paper_request until = {"turing", 0, 1950, 0, 3};
    const char *fields = "&fields=title,abstract,year,venue,journal,authors,externalIds,url,"
                         "isOpenAccess,openAccessPdf";
    char want[512];

    snprintf(want, sizeof(want), "/graph/v1/paper/search?query=social+media+sleep&year=2022-2026"
             "&limit=10%s", fields);
    assert_url(PROVIDER_SEMANTICSCHOLAR, &recent, 1, want);
    snprintf(want, sizeof(want), "/graph/v1/paper/search?query=transformers&year=2020-"
             "&openAccessPdf=&limit=24%s", fields);
    assert_url(PROVIDER_SEMANTICSCHOLAR, &since, 1, want);
    snprintf(want, sizeof(want), "/graph/v1/paper/search?query=turing&year=-1950&limit=6%s",
             fields);
    assert_url(PROVIDER_SEMANTICSCHOLAR, &until, 1, want);
    snprintf(want, sizeof(want), "/graph/v1/paper/search?query=transformers&limit=24%s", fields);
    assert_url(PROVIDER_SEMANTICSCHOLAR, &since, 0, want);
}
END_TEST

START_TEST(test_abstract_from_inverted_index)
{
    json_t *index = json_pack("{s:[i], s:[i,i], s:[i], s:[i]}", "Despite", 0, "growing", 1, 4,
                              "interest", 2, "in", 3);
    char *text = NULL;

    ck_assert_int_eq(provider_abstract_from_index(index, &text), KEEL_OK);
    ck_assert_str_eq(text, "Despite growing interest in growing");
    keel_free(text);
    json_decref(index);
    /* no abstract, not an error: empty, absent, or no usable position */
    index = json_pack("{s:[i,i], s:s}", "far", 20000, -1, "odd", "x");
    ck_assert_int_eq(provider_abstract_from_index(index, &text), KEEL_OK);
    ck_assert_ptr_null(text);
    ck_assert_int_eq(provider_abstract_from_index(NULL, &text), KEEL_OK);
    ck_assert_ptr_null(text);
    json_decref(index);
}
END_TEST

/* ---- parsing the recorded answers ----------------------------------------- */

START_TEST(test_parse_openalex_works)
{
    char path[4096];
    char *body;
    struct provider_papers papers = {0};
    struct keel_error err;
    const struct provider_paper *p;
    size_t n;

    if (!data_path(path, sizeof(path), "openalex_peneira/works.json")) {
        fprintf(stderr, "skipped: ../shared/data/api_responses is absent\n");
        return;
    }
    {
        FILE *f = fopen(path, "rb");
        ck_assert_ptr_nonnull(f);
        fseek(f, 0, SEEK_END);
        n = (size_t)ftell(f);
        rewind(f);
        body = malloc(n + 1);
        ck_assert_uint_eq(fread(body, 1, n, f), n);
        fclose(f);
    }
    ck_assert_int_eq(provider_parse(PROVIDER_OPENALEX, body, n, &papers, &err), KEEL_OK);
    ck_assert_uint_eq(papers.n, 49);
    p = &papers.items[0];
    ck_assert_str_eq(p->title, "Redefining climate regions in the United States of America using "
                               "satellite remote sensing and machine learning for public health "
                               "applications");
    ck_assert_int_eq(p->year, 2014);
    ck_assert_uint_eq(json_array_size(p->authors), 3);
    ck_assert_str_eq(json_string_value(json_array_get(p->authors, 0)), "Alexander Liss");
    ck_assert_ptr_nonnull(p->ids[PROVIDER_OPENALEX]);
    ck_assert(!strncmp(p->ids[PROVIDER_OPENALEX], "https://openalex.org/W", 22));
    ck_assert_str_eq(p->doi, "10.4081/gh.2014.294");
    ck_assert_str_eq(p->venue, "Geospatial Health");
    ck_assert_str_eq(p->pdf_url,
                     "https://www.geospatialhealth.net/index.php/gh/article/download/294/291");
    ck_assert_int_eq(p->is_open_access, 1);
    ck_assert_ptr_nonnull(p->abstract);
    ck_assert_uint_gt(strlen(p->abstract), 200);
    ck_assert_uint_gt(json_array_size(p->authors), 0);
    ck_assert_uint_eq(p->providers, 1u << PROVIDER_OPENALEX);
    provider_papers_release(&papers);
    free(body);
}
END_TEST

START_TEST(test_parse_semanticscholar_records)
{
    char path[4096];
    char *batch, *body;
    struct provider_papers papers = {0};
    struct keel_error err;
    int status = 0;
    size_t full = 0;

    if (!data_path(path, sizeof(path), "semanticscholar/test_get_papers_return_not_found.yaml")) {
        fprintf(stderr, "skipped: ../shared/data/api_responses is absent\n");
        return;
    }
    /* The batch answer holds full records (and a null for the unknown
     * id); the search answer wraps the same records in "data". */
    batch = fake_http_cassette_body(path, 0, &status);
    ck_assert_ptr_nonnull(batch);
    ck_assert_int_eq(status, 200);
    body = malloc(strlen(batch) + 32);
    sprintf(body, "{\"total\": 2, \"data\": %s}", batch);
    ck_assert_int_eq(provider_parse(PROVIDER_SEMANTICSCHOLAR, body, strlen(body), &papers, &err),
                     KEEL_OK);
    ck_assert_uint_ge(papers.n, 1);
    for (size_t i = 0; i < papers.n; i++) {
        const struct provider_paper *p = &papers.items[i];
        ck_assert_ptr_nonnull(p->title);
        ck_assert_ptr_nonnull(p->ids[PROVIDER_SEMANTICSCHOLAR]);
        full += p->year > 0 && p->abstract && json_array_size(p->authors) > 0;
    }
    ck_assert_uint_ge(full, 1);
    provider_papers_release(&papers);
    free(body);
    free(batch);

    /* An empty search: {"total": 0, "offset": 0} is no papers, not an error. */
    ck_assert(data_path(path, sizeof(path), "semanticscholar/test_empty_paginated_results.yaml"));
    body = fake_http_cassette_body(path, 0, &status);
    ck_assert_int_eq(provider_parse(PROVIDER_SEMANTICSCHOLAR, body, strlen(body), &papers, &err),
                     KEEL_OK);
    ck_assert_uint_eq(papers.n, 0);
    free(body);

    /* The open-access search: each record carries its PDF. */
    ck_assert(data_path(path, sizeof(path), "semanticscholar/test_search_paper_open_access_pdf.yaml"));
    body = fake_http_cassette_body(path, 0, &status);
    ck_assert_ptr_nonnull(body);
    provider_papers_release(&papers);
    free(body);
}
END_TEST

START_TEST(test_parse_rejects_other_json)
{
    struct provider_papers papers = {0};
    struct keel_error err;

    ck_assert_int_eq(provider_parse(PROVIDER_OPENALEX, "[1,2]", 5, &papers, &err), KEEL_EINVAL);
    ck_assert_int_eq(provider_parse(PROVIDER_OPENALEX, "{\"meta\":{}}", 11, &papers, &err),
                     KEEL_EINVAL);
    ck_assert_int_eq(provider_parse(PROVIDER_SEMANTICSCHOLAR, "{\"data\": 3}", 11, &papers, &err),
                     KEEL_EINVAL);
    ck_assert_int_eq(provider_parse(PROVIDER_SEMANTICSCHOLAR, "{\"data\": [", 10, &papers, &err),
                     KEEL_EINVAL);
    ck_assert_uint_eq(papers.n, 0);
}
END_TEST

/* ---- the search through the fake server ------------------------------------ */

static const char *OA_BODY =
    "{\"meta\": {\"count\": 3}, \"results\": ["
    "{\"id\": \"https://openalex.org/W1\", \"doi\": \"https://doi.org/10.1/shared\","
    " \"title\": \"Sleep and social media in adolescents\", \"publication_year\": 2023,"
    " \"open_access\": {\"is_oa\": true, \"oa_url\": \"https://oa.example/1.pdf\"},"
    " \"primary_location\": {\"source\": {\"display_name\": \"Sleep Health\"}},"
    " \"authorships\": [{\"author\": {\"display_name\": \"A. Author\"}}],"
    " \"abstract_inverted_index\": {\"Teens\": [0], \"sleep\": [1], \"less\": [2]}},"
    "{\"id\": \"https://openalex.org/W2\", \"title\": \"Screen time at night\","
    " \"publication_year\": 2024, \"open_access\": {\"is_oa\": false}},"
    "{\"id\": \"https://openalex.org/W3\", \"title\": \"Undated note on sleep\","
    " \"publication_year\": null, \"open_access\": {\"is_oa\": true}}]}";

static const char *S2_BODY =
    "{\"total\": 2, \"offset\": 0, \"data\": ["
    "{\"paperId\": \"s2-a\", \"title\": \"Sleep and Social Media in Adolescents.\","
    " \"year\": 2023, \"externalIds\": {\"DOI\": \"10.1/SHARED\"},"
    " \"abstract\": \"A longer abstract from Semantic Scholar.\", \"isOpenAccess\": true,"
    " \"authors\": [{\"name\": \"A. Author\"}]},"
    "{\"paperId\": \"s2-b\", \"title\": \"Screen Time at Night\", \"year\": 2024,"
    " \"isOpenAccess\": false}]}";

static void search(struct providers *p, const struct paper_request *req,
                   struct provider_papers *out, struct provider_report reports[PROVIDER_COUNT])
{
    struct keel_error err;

    keel_error_clear(&err);
    ck_assert_msg(providers_search(p, req, NULL, out, reports, &err) == KEEL_OK, "%s: %s",
                  err.field, err.message);
}

static struct providers *providers_for(int openalex, int s2, void (*tweak)(struct providers_conf *))
{
    struct providers_conf conf;
    struct providers *p;
    struct keel_error err;

    conf_for(&conf, openalex, s2);
    if (tweak)
        tweak(&conf);
    ck_assert_int_eq(providers_new(&conf, &p, &err), KEEL_OK);
    providers_conf_release(&conf);
    return p;
}

START_TEST(test_fan_out_merge_and_dedupe)
{
    struct fake_reply oa = {200, NULL, OA_BODY, 0, 0, 0}, s2 = {200, NULL, S2_BODY, 0, 0, 0};
    struct paper_request req = {"sleep social media", 2022, 2026, 0, 5};
    struct providers *p = providers_for(1, 1, NULL);
    struct provider_papers out;
    struct provider_report reports[PROVIDER_COUNT];
    const struct provider_paper *first;

    fake_http_route(fake, "/works", &oa, 1);
    fake_http_route(fake, "/graph/v1/paper/search", &s2, 1);
    search(p, &req, &out, reports);
    ck_assert_uint_eq(fake_http_count(fake), 2);
    ck_assert_int_eq(reports[PROVIDER_OPENALEX].status, PROVIDER_OK);
    ck_assert_int_eq(reports[PROVIDER_SEMANTICSCHOLAR].status, PROVIDER_OK);
    ck_assert_uint_eq(reports[PROVIDER_OPENALEX].papers, 3);
    /* The undated paper is dropped under a year filter; the DOI twin and
     * the title twin are merged: two papers, each from both providers. */
    ck_assert_uint_eq(out.n, 2);
    first = &out.items[0];
    ck_assert_str_eq(first->title, "Sleep and social media in adolescents");
    ck_assert_uint_eq(first->providers, (1u << PROVIDER_OPENALEX) | (1u << PROVIDER_SEMANTICSCHOLAR));
    ck_assert_str_eq(first->ids[PROVIDER_OPENALEX], "https://openalex.org/W1");
    ck_assert_str_eq(first->ids[PROVIDER_SEMANTICSCHOLAR], "s2-a");
    ck_assert_str_eq(first->abstract, "Teens sleep less");   /* the first provider's stays */
    ck_assert_str_eq(first->venue, "Sleep Health");
    ck_assert_uint_eq(out.items[1].providers,
                      (1u << PROVIDER_OPENALEX) | (1u << PROVIDER_SEMANTICSCHOLAR));
    ck_assert_double_gt(first->score, out.items[1].score);
    provider_papers_release(&out);
    provider_reports_release(reports);

    /* Open access only: the closed "Screen time" paper goes. */
    req.open_access = 1;
    search(p, &req, &out, reports);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_str_eq(out.items[0].title, "Sleep and social media in adolescents");
    provider_papers_release(&out);
    provider_reports_release(reports);
    providers_free(p);
}
END_TEST

START_TEST(test_real_answers_through_the_server)
{
    char path[4096];
    char *oa_body = NULL, *s2_body;
    struct fake_reply oa = {200, NULL, NULL, 0, 0, 0}, s2 = {200, NULL, NULL, 0, 0, 0};
    struct paper_request req = {"machine learning public health", 0, 0, 0, 30};
    struct providers *p;
    struct provider_papers out;
    struct provider_report reports[PROVIDER_COUNT];
    int status;

    if (!data_path(path, sizeof(path), "openalex_peneira/works.json")) {
        fprintf(stderr, "skipped: ../shared/data/api_responses is absent\n");
        return;
    }
    {
        FILE *f = fopen(path, "rb");
        long n;
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        oa_body = calloc(1, (size_t)n + 1);
        ck_assert_uint_eq(fread(oa_body, 1, (size_t)n, f), (size_t)n);
        fclose(f);
    }
    ck_assert(data_path(path, sizeof(path), "semanticscholar/test_search_paper_year.yaml"));
    s2_body = fake_http_cassette_body(path, 0, &status);
    ck_assert_ptr_nonnull(s2_body);
    oa.body = oa_body;
    s2.body = s2_body;
    fake_http_route(fake, "/works", &oa, 1);
    fake_http_route(fake, "/graph/v1/paper/search", &s2, 1);
    p = providers_for(1, 1, NULL);
    search(p, &req, &out, reports);
    ck_assert_int_eq(reports[PROVIDER_OPENALEX].status, PROVIDER_OK);
    ck_assert_uint_eq(reports[PROVIDER_OPENALEX].papers, 49);
    /* The year cassette asked for fields=year only: no titles, no papers. */
    ck_assert_int_eq(reports[PROVIDER_SEMANTICSCHOLAR].status, PROVIDER_OK);
    ck_assert_uint_eq(reports[PROVIDER_SEMANTICSCHOLAR].papers, 0);
    ck_assert_uint_eq(out.n, 30);
    provider_papers_release(&out);
    provider_reports_release(reports);
    providers_free(p);
    free(oa_body);
    free(s2_body);
}
END_TEST

/* Runs one OpenAlex-only search against `replies` and returns its report. */
static struct provider_report one_provider(const struct fake_reply *replies, size_t n,
                                           const struct paper_request *req,
                                           void (*tweak)(struct providers_conf *),
                                           size_t *papers)
{
    struct providers *p = providers_for(1, 0, tweak);
    struct provider_papers out;
    struct provider_report reports[PROVIDER_COUNT], r;

    fake_http_route(fake, "/works", replies, n);
    search(p, req, &out, reports);
    *papers = out.n;
    r = reports[PROVIDER_OPENALEX];
    r.urls = json_incref(r.urls);
    provider_papers_release(&out);
    provider_reports_release(reports);
    providers_free(p);
    return r;
}

static const struct paper_request filtered = {"sleep", 2022, 2026, 1, 5};

/* Serves interaction `index` of a recorded cassette on `route` and runs
 * a search with one provider on; returns that provider's report and
 * the merged papers. NULL papers when the shared data is absent. */
static int replay_cassette(const char *rel, size_t index, const char *route, enum provider_id id,
                           const struct paper_request *req, struct provider_papers *out,
                           struct provider_report *report)
{
    char path[4096];
    char *body;
    int status = 0;
    struct fake_reply reply = {0, NULL, NULL, 0, 0, 0};
    struct providers *p;
    struct provider_report reports[PROVIDER_COUNT];

    if (!data_path(path, sizeof(path), rel)) {
        fprintf(stderr, "skipped: ../shared/data/api_responses is absent\n");
        return 0;
    }
    body = fake_http_cassette_body(path, index, &status);
    ck_assert_msg(body != NULL, "no body in %s#%zu", rel, index);
    reply.status = status;
    reply.body = body;
    fake_http_route(fake, route, &reply, 1);
    p = providers_for(id == PROVIDER_OPENALEX, id == PROVIDER_SEMANTICSCHOLAR, NULL);
    search(p, req, out, reports);
    *report = reports[id];
    report->urls = json_incref(report->urls);
    provider_reports_release(reports);
    providers_free(p);
    free(body);
    return 1;
}

START_TEST(test_recorded_filtered_openalex_answer)
{
    /* openalexPro's answer to filter=…,to_publication_date:2010-01-01:
     * 200 full Works, every one dated on or before 2010. */
    struct paper_request req = {"biodiversity finance", 0, 2010, 0, 100};
    struct provider_papers out;
    struct provider_report r;

    if (!replay_cassette("openalex_openalexPro/pro_fetch_search_biodiversity_AND_finance.yml", 0,
                         "/works", PROVIDER_OPENALEX, &req, &out, &r))
        return;
    ck_assert_int_eq(r.status, PROVIDER_OK);
    ck_assert_uint_eq(r.papers, 200);
    ck_assert_uint_eq(out.n, 100);
    for (size_t i = 0; i < out.n; i++) {
        ck_assert_int_gt(out.items[i].year, 1000);
        ck_assert_int_le(out.items[i].year, 2010);
        ck_assert(!strncmp(out.items[i].ids[PROVIDER_OPENALEX], "https://openalex.org/W", 22));
    }
    ck_assert_str_eq(fake_http_uri(fake, 0),
                     "/works?search=biodiversity+finance&filter=to_publication_date:2010-12-31"
                     "&per_page=100");
    provider_papers_release(&out);
    json_decref(r.urls);
}
END_TEST

START_TEST(test_recorded_semanticscholar_answers)
{
    /* The publication-date search (fields=title) gives titled records;
     * the open-access-PDF search asked for openAccessPdf only, so its
     * records have no title and are skipped, not errors. */
    struct paper_request req = {"turing", 2024, 2024, 0, 50};
    struct provider_papers out;
    struct provider_report r;

    if (!replay_cassette("semanticscholar/test_search_paper_publication_date_or_year.yaml", 2,
                         "/graph/v1/paper/search", PROVIDER_SEMANTICSCHOLAR, &req, &out, &r))
        return;
    ck_assert_int_eq(r.status, PROVIDER_OK);
    ck_assert_uint_gt(r.papers, 10);
    /* fields=title only: no years, so the year filter keeps none */
    ck_assert_uint_eq(out.n, 0);
    provider_papers_release(&out);
    json_decref(r.urls);

    fake_http_reset(fake);
    req.year_from = req.year_to = 0;
    req.open_access = 1;
    ck_assert(replay_cassette("semanticscholar/test_search_paper_open_access_pdf.yaml", 0,
                              "/graph/v1/paper/search", PROVIDER_SEMANTICSCHOLAR, &req, &out, &r));
    ck_assert_int_eq(r.status, PROVIDER_OK);
    ck_assert_uint_eq(r.papers, 0);
    ck_assert_str_eq(fake_http_uri(fake, 0),
                     "/graph/v1/paper/search?query=turing&openAccessPdf=&limit=100&fields=title,"
                     "abstract,year,venue,journal,authors,externalIds,url,isOpenAccess,"
                     "openAccessPdf");
    provider_papers_release(&out);
    json_decref(r.urls);

    /* The recorded 400 of a bad field is a failure with its status. */
    fake_http_reset(fake);
    ck_assert(replay_cassette("semanticscholar/test_bad_query_parameters.yaml", 0,
                              "/graph/v1/paper/search", PROVIDER_SEMANTICSCHOLAR, &req, &out, &r));
    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_int_eq(r.http_status, 400);
    ck_assert_int_eq(r.attempts, 2);   /* the filters were dropped once */
    provider_papers_release(&out);
    json_decref(r.urls);
}
END_TEST

START_TEST(test_recorded_openalex_filter_error)
{
    /* OpenAlex's real answer to a filter it does not know. */
    struct paper_request req = {"sleep", 2020, 0, 0, 5};
    struct provider_papers out;
    struct provider_report r;

    if (!replay_cassette("openalex_openalexPro/opt_filter_names.yml", 0, "/works",
                         PROVIDER_OPENALEX, &req, &out, &r))
        return;
    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_int_eq(r.http_status, 400);
    ck_assert_uint_eq(json_array_size(r.urls), 2);
    ck_assert_ptr_null(strstr(json_string_value(json_array_get(r.urls, 1)), "filter="));
    provider_papers_release(&out);
    json_decref(r.urls);
}
END_TEST

START_TEST(test_filter_rejected_is_retried_without_filters)
{
    struct fake_reply replies[] = {
        {400, NULL, "{\"error\": \"Invalid query parameters error.\"}", 0, 0, 0},
        {200, NULL, OA_BODY, 0, 0, 0},
    };
    size_t papers;
    struct provider_report r = one_provider(replies, 2, &filtered, NULL, &papers);

    ck_assert_int_eq(r.status, PROVIDER_OK_UNFILTERED);
    ck_assert_int_eq(r.attempts, 2);
    ck_assert_uint_eq(json_array_size(r.urls), 2);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(r.urls, 0)), "&filter="));
    ck_assert_ptr_null(strstr(json_string_value(json_array_get(r.urls, 1)), "&filter="));
    ck_assert_ptr_nonnull(strstr(r.reason, "rejected the filters (HTTP 400)"));
    /* The post-filters still hold: only the dated open-access paper. */
    ck_assert_uint_eq(papers, 1);
    ck_assert_uint_eq(fake_http_count(fake), 2);
    json_decref(r.urls);
}
END_TEST

START_TEST(test_not_found_fails_the_provider_only)
{
    struct fake_reply reply = {404, NULL, "{\"error\": \"not found\"}", 0, 0, 0};
    size_t papers;
    struct provider_report r = one_provider(&reply, 1, &filtered, NULL, &papers);

    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_int_eq(r.http_status, 404);
    ck_assert_str_eq(r.reason, "HTTP 404");
    ck_assert_int_eq(r.attempts, 1);
    ck_assert_uint_eq(papers, 0);
    json_decref(r.urls);
}
END_TEST

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(test_rate_limit_waits_for_retry_after)
{
    struct fake_reply replies[] = {
        {429, "Retry-After: 1", "{\"message\": \"Too Many Requests\"}", 0, 0, 0},
        {200, NULL, OA_BODY, 0, 0, 0},
    };
    size_t papers;
    int64_t t0 = now_ms();
    struct provider_report r = one_provider(replies, 2, &filtered, NULL, &papers);
    int64_t waited = now_ms() - t0;

    ck_assert_int_eq(r.status, PROVIDER_OK);
    ck_assert_int_eq(r.attempts, 2);
    ck_assert_msg(waited >= 950, "retried after %lld ms, before Retry-After", (long long)waited);
    ck_assert_uint_eq(papers, 1);
    json_decref(r.urls);
}
END_TEST

static void short_backoff(struct providers_conf *conf)
{
    conf->max_backoff_ms = 100;
    conf->retries = 2;
}

START_TEST(test_rate_limit_gives_up_after_its_retries)
{
    struct fake_reply reply = {429, "Retry-After: 30", "{}", 0, 0, 0};
    size_t papers;
    int64_t t0 = now_ms();
    struct provider_report r = one_provider(&reply, 1, &filtered, short_backoff, &papers);

    /* Retry-After 30 s is capped at max_backoff_ms: the search ends fast. */
    ck_assert_int_lt(now_ms() - t0, 5000);
    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_int_eq(r.attempts, 3);
    ck_assert_str_eq(r.reason, "rate limited (HTTP 429) after 3 attempts");
    json_decref(r.urls);
}
END_TEST

START_TEST(test_server_error_is_retried)
{
    struct fake_reply replies[] = {
        {500, NULL, "oops", 0, 0, 0},
        {503, NULL, "busy", 0, 0, 0},
        {200, NULL, OA_BODY, 0, 0, 0},
    };
    size_t papers;
    struct provider_report r = one_provider(replies, 3, &filtered, short_backoff, &papers);

    ck_assert_int_eq(r.status, PROVIDER_OK);
    ck_assert_int_eq(r.attempts, 3);
    ck_assert_uint_eq(papers, 1);
    json_decref(r.urls);

    fake_http_reset(fake);
    {
        struct fake_reply down = {500, NULL, "oops", 0, 0, 0};
        r = one_provider(&down, 1, &filtered, short_backoff, &papers);
    }
    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_str_eq(r.reason, "HTTP 500");
    json_decref(r.urls);
}
END_TEST

static void quick_timeout(struct providers_conf *conf)
{
    conf->p[PROVIDER_OPENALEX].timeout_ms = 300;
}

START_TEST(test_timeout)
{
    struct fake_reply slow = {200, NULL, OA_BODY, 0, 2000, 0};
    size_t papers;
    int64_t t0 = now_ms();
    struct provider_report r = one_provider(&slow, 1, &filtered, quick_timeout, &papers);

    ck_assert_int_lt(now_ms() - t0, 1500);
    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_str_eq(r.reason, "no answer within 300 ms");
    ck_assert_uint_eq(papers, 0);
    json_decref(r.urls);
}
END_TEST

START_TEST(test_cut_body)
{
    struct fake_reply cut = {200, NULL, OA_BODY, 0, 0, 1};
    size_t papers;
    struct provider_report r = one_provider(&cut, 1, &filtered, NULL, &papers);

    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_str_eq(r.reason, "the answer was cut short");
    json_decref(r.urls);
}
END_TEST

START_TEST(test_invalid_json)
{
    struct fake_reply bad = {200, NULL, "{\"results\": [{\"title\": ", 0, 0, 0};
    size_t papers;
    struct provider_report r = one_provider(&bad, 1, &filtered, NULL, &papers);

    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_msg(!strncmp(r.reason, "the answer is not valid OpenAlex JSON", 37), "%s", r.reason);
    json_decref(r.urls);
}
END_TEST

static void small_cap(struct providers_conf *conf)
{
    conf->max_response_bytes = 300;
}

START_TEST(test_response_over_the_cap)
{
    struct fake_reply big = {200, NULL, OA_BODY, 0, 0, 0};
    size_t papers;
    struct provider_report r = one_provider(&big, 1, &filtered, small_cap, &papers);

    ck_assert_int_eq(r.status, PROVIDER_FAILED);
    ck_assert_str_eq(r.reason, "the answer is larger than 300 bytes");
    json_decref(r.urls);
}
END_TEST

START_TEST(test_identical_queries_are_cached)
{
    struct fake_reply oa = {200, NULL, OA_BODY, 0, 0, 0};
    struct providers *p = providers_for(1, 0, NULL);
    struct provider_papers out;
    struct provider_report reports[PROVIDER_COUNT];

    fake_http_route(fake, "/works", &oa, 1);
    search(p, &filtered, &out, reports);
    ck_assert_int_eq(reports[PROVIDER_OPENALEX].cached, 0);
    provider_papers_release(&out);
    provider_reports_release(reports);
    search(p, &filtered, &out, reports);
    ck_assert_int_eq(reports[PROVIDER_OPENALEX].cached, 1);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_uint_eq(fake_http_count(fake), 1);
    provider_papers_release(&out);
    provider_reports_release(reports);
    providers_free(p);
}
END_TEST

START_TEST(test_search_arguments)
{
    struct providers *p = providers_for(0, 0, NULL);
    struct provider_papers out;
    struct provider_report reports[PROVIDER_COUNT];
    struct paper_request bad_years = {"x", 2024, 2020, 0, 5}, bad_limit = {"x", 0, 0, 0, 0},
                         empty = {"", 0, 0, 0, 5};
    struct keel_error err;

    ck_assert_int_eq(providers_search(p, &bad_years, NULL, &out, reports, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "year_from");
    ck_assert_int_eq(providers_search(p, &bad_limit, NULL, &out, reports, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "limit");
    ck_assert_int_eq(providers_search(p, &empty, NULL, &out, reports, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "query");
    providers_free(p);
}
END_TEST

START_TEST(test_conf_from_pack_and_environment)
{
    json_t *section = json_pack("{s:i, s:{s:b, s:s, s:s}, s:{s:b, s:s}}", "cache_seconds", 30,
                                "openalex", "enabled", 1, "base_url", "https://oa.example/",
                                "mailto", "me@example.org", "semanticscholar", "enabled", 0,
                                "api_key_env", "KEEL_TEST_S2_KEY");
    json_t *bad = json_pack("{s:{s:s}}", "openalex", "base_url", "ftp://x");
    struct providers_conf conf;
    struct keel_error err;

    unsetenv("KEEL_PROVIDERS");
    unsetenv("KEEL_OPENALEX_URL");
    setenv("KEEL_TEST_S2_KEY", "secret", 1);
    ck_assert_int_eq(providers_conf_load(section, &conf, &err), KEEL_OK);
    ck_assert_int_eq(conf.cache_seconds, 30);
    ck_assert_int_eq(conf.p[PROVIDER_OPENALEX].enabled, 1);
    ck_assert_str_eq(conf.p[PROVIDER_OPENALEX].base_url, "https://oa.example");
    ck_assert_str_eq(conf.p[PROVIDER_SEMANTICSCHOLAR].api_key, "secret");
    providers_conf_release(&conf);

    setenv("KEEL_PROVIDERS", "semanticscholar", 1);
    setenv("KEEL_OPENALEX_URL", "http://127.0.0.1:9", 1);
    ck_assert_int_eq(providers_conf_load(section, &conf, &err), KEEL_OK);
    ck_assert_int_eq(conf.p[PROVIDER_OPENALEX].enabled, 0);
    ck_assert_int_eq(conf.p[PROVIDER_SEMANTICSCHOLAR].enabled, 1);
    ck_assert_str_eq(conf.p[PROVIDER_OPENALEX].base_url, "http://127.0.0.1:9");
    providers_conf_release(&conf);

    setenv("KEEL_PROVIDERS", "openalex,scopus", 1);
    ck_assert_int_eq(providers_conf_load(section, &conf, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "KEEL_PROVIDERS");
    unsetenv("KEEL_PROVIDERS");
    unsetenv("KEEL_OPENALEX_URL");
    ck_assert_int_eq(providers_conf_load(bad, &conf, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "providers.openalex.base_url");
    unsetenv("KEEL_TEST_S2_KEY");
    json_decref(section);
    json_decref(bad);
}
END_TEST

START_TEST(test_api_key_header)
{
    struct fake_reply s2 = {200, NULL, S2_BODY, 0, 0, 0};
    struct providers_conf conf;
    struct providers *p;
    struct provider_papers out;
    struct provider_report reports[PROVIDER_COUNT];
    struct keel_error err;

    conf_for(&conf, 0, 1);
    conf.p[PROVIDER_SEMANTICSCHOLAR].api_key = keel_strdup("k-123");
    ck_assert_int_eq(providers_new(&conf, &p, &err), KEEL_OK);
    providers_conf_release(&conf);
    fake_http_route(fake, "/graph", &s2, 1);
    search(p, &filtered, &out, reports);
    ck_assert_str_eq(fake_http_header(fake, 0, "x-api-key"), "k-123");
    ck_assert_ptr_null(strstr(fake_http_uri(fake, 0), "k-123"));
    provider_papers_release(&out);
    provider_reports_release(reports);
    providers_free(p);
}
END_TEST

Suite *suite_providers(void)
{
    Suite *s = suite_create("providers");
    TCase *pure = tcase_create("providers_records");
    TCase *net = tcase_create("providers_http");

    unit_leak_fixture(pure);
    tcase_add_test(pure, test_openalex_requests);
    tcase_add_test(pure, test_semanticscholar_requests);
    tcase_add_test(pure, test_abstract_from_inverted_index);
    tcase_add_test(pure, test_parse_openalex_works);
    tcase_add_test(pure, test_parse_semanticscholar_records);
    tcase_add_test(pure, test_parse_rejects_other_json);
    tcase_add_test(pure, test_conf_from_pack_and_environment);
    suite_add_tcase(s, pure);

    unit_leak_fixture(net);
    tcase_add_checked_fixture(net, fake_setup, fake_teardown);
    tcase_set_timeout(net, 20);
    tcase_add_test(net, test_fan_out_merge_and_dedupe);
    tcase_add_test(net, test_real_answers_through_the_server);
    tcase_add_test(net, test_recorded_filtered_openalex_answer);
    tcase_add_test(net, test_recorded_semanticscholar_answers);
    tcase_add_test(net, test_recorded_openalex_filter_error);
    tcase_add_test(net, test_filter_rejected_is_retried_without_filters);
    tcase_add_test(net, test_not_found_fails_the_provider_only);
    tcase_add_test(net, test_rate_limit_waits_for_retry_after);
    tcase_add_test(net, test_rate_limit_gives_up_after_its_retries);
    tcase_add_test(net, test_server_error_is_retried);
    tcase_add_test(net, test_timeout);
    tcase_add_test(net, test_cut_body);
    tcase_add_test(net, test_invalid_json);
    tcase_add_test(net, test_response_over_the_cap);
    tcase_add_test(net, test_identical_queries_are_cached);
    tcase_add_test(net, test_search_arguments);
    tcase_add_test(net, test_api_key_header);
    suite_add_tcase(s, net);
    return s;
}
