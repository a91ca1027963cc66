/*
 * test_store.c — the contract test of the store port (src/store/store.h).
 *
 * The same test functions run against every backend: TCase "store_mem"
 * opens "mem:", TCase "store_sqlite" opens a fresh SQLite file in a temp
 * folder. An unchecked fixture (run in the parent, once per TCase) picks
 * the backend and makes/removes the folder, so files go away even when a
 * forked test fails. The contract: put outcomes (added / unchanged /
 * updated) for papers and documents, BM25 ranking with deterministic ties,
 * year and open-access filters, limits, queries without words, chunk hits
 * carrying their document, re-put documents losing old chunks, counts,
 * argument errors naming the field, and a failed write (allocation
 * failure injected at every step) leaving the store exactly as it was.
 * TCase "store_sqlite_file" holds what only a file can do: reopening keeps
 * data without re-running migrations; a file that is not a database, a
 * schema newer than this build and a failed migration fail with KEEL_EIO
 * and leave nothing half-migrated; after injected failures SQLite's own
 * integrity checks pass on the file and both full-text indexes; the
 * store's checkpoint thread copies a growing WAL back while it is open. Every TCase has the leak fixture, which for SQLite
 * also catches a connection left open (SQLite allocates through keel).
 */
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "store/store.h"
#include "unit.h"

#define NOW_MS INT64_C(1770465600000)  /* 2026-02-07T12:00:00Z */

enum backend { BACKEND_MEM, BACKEND_SQLITE };

static enum backend backend;
static char temp_dir[64];
static char db_path[192];   /* the file of the last store opened, SQLite only */
static int opened;          /* stores opened by this test: fresh file names */

/* ---- fixtures (parent process, once per TCase) -------------------------- */

static void backend_mem(void)
{
    backend = BACKEND_MEM;
}

static void backend_sqlite(void)
{
    backend = BACKEND_SQLITE;
    unit_temp_dir(temp_dir, sizeof(temp_dir), "store", 0);
}

static void backend_sqlite_remove(void)
{
    unit_temp_dir_remove(temp_dir);
}

/* ---- helpers ------------------------------------------------------------- */

/* Opens a fresh, empty store of the TCase's backend. */
static struct store *store_fresh(void)
{
    struct store *store = NULL;
    struct keel_error err;
    const char *location = "mem:";

    if (backend == BACKEND_SQLITE) {
        snprintf(db_path, sizeof(db_path), "%s/store-%ld-%d.db", temp_dir, (long)getpid(),
                 opened++);
        location = db_path;
    }
    keel_error_clear(&err);
    ck_assert_msg(store_open(location, &store, &err) == KEEL_OK, "open %s: %s", location,
                  err.message);
    ck_assert_ptr_nonnull(store);
    return store;
}

/* A paper of borrowed strings (the store copies them). */
static struct store_paper paper_make(const char *id, const char *title, const char *abstract,
                                     int year, int open_access)
{
    struct store_paper paper;

    memset(&paper, 0, sizeof(paper));
    paper.id = (char *)id;
    paper.title = (char *)title;
    paper.abstract = (char *)abstract;
    paper.year = year;
    paper.is_open_access = open_access;
    return paper;
}

static enum store_outcome put_paper(struct store *store, const struct store_paper *paper)
{
    enum store_outcome outcome = (enum store_outcome)-1;
    struct keel_error err;
    int rc;

    keel_error_clear(&err);
    rc = store_put_paper(store, paper, &outcome, &err);
    ck_assert_msg(rc == KEEL_OK, "put_paper %s: %s %s", paper->id ? paper->id : paper->title,
                  err.field, err.message);
    return outcome;
}

static enum store_outcome put_document(struct store *store, const char *id, const char *title,
                                       const struct store_chunk *chunks, size_t n_chunks)
{
    struct store_document doc = {id, title, "corpus/notes.md", "en"};
    enum store_outcome outcome = (enum store_outcome)-1;
    struct keel_error err;
    int rc;

    keel_error_clear(&err);
    rc = store_put_document(store, &doc, chunks, n_chunks, &outcome, &err);
    ck_assert_msg(rc == KEEL_OK, "put_document %s: %s %s", id, err.field, err.message);
    return outcome;
}

static void search(struct store *store, const char *text, int year_from, int year_to,
                   int open_access_only, int limit, struct paper_hits *hits)
{
    struct paper_query query = {text, year_from, year_to, open_access_only, limit, STORE_MATCH_ANY, NULL, NULL, 0};
    struct keel_error err;
    int rc;

    keel_error_clear(&err);
    rc = store_search_papers(store, &query, hits, &err);
    ck_assert_msg(rc == KEEL_OK, "search \"%s\": %s %s", text, err.field, err.message);
}

static void search_chunks(struct store *store, const char *text, int limit,
                          struct chunk_hits *hits)
{
    struct keel_error err;
    int rc;

    keel_error_clear(&err);
    rc = store_search_chunks(store, text, limit, hits, &err);
    ck_assert_msg(rc == KEEL_OK, "search_chunks \"%s\": %s %s", text, err.field, err.message);
}

static void assert_counts(struct store *store, long papers, long documents, long chunks)
{
    struct store_counts counts = {-1, -1, -1};
    struct keel_error err;

    keel_error_clear(&err);
    ck_assert_int_eq(store_counts(store, &counts, &err), KEEL_OK);
    ck_assert_int_eq(counts.papers, papers);
    ck_assert_int_eq(counts.documents, documents);
    ck_assert_int_eq(counts.chunks, chunks);
}

/* The ids of `hits`, comma-separated, for one comparison per assertion. */
static const char *hit_ids(const struct paper_hits *hits, char *out, size_t n)
{
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < hits->n && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i ? "," : "", hits->items[i].paper.id);
    return out;
}

static void assert_search_ids(struct store *store, const char *text, int year_from, int year_to,
                              int open_access_only, int limit, const char *expected)
{
    struct paper_hits hits;
    char ids[512];

    search(store, text, year_from, year_to, open_access_only, limit, &hits);
    ck_assert_str_eq(hit_ids(&hits, ids, sizeof(ids)), expected);
    paper_hits_release(&hits);
}

/* Filler papers that hold none of the test words, so the words are rare
 * in the collection and BM25's IDF is positive. */
static void put_filler(struct store *store, int n)
{
    static const char *const titles[] = {
        "Protein folding kinetics", "Ocean acidification in coral reefs",
        "Medieval trade routes", "Volcanic ash dispersion", "Bird migration timing",
        "Soil microbiome diversity",
    };
    char id[32];

    for (int i = 0; i < n; i++) {
        struct store_paper paper = paper_make(id, titles[i % 6], "An unrelated abstract.", 2001, 0);
        snprintf(id, sizeof(id), "filler-%02d", i);
        ck_assert_int_eq(put_paper(store, &paper), STORE_ADDED);
    }
}

/* ---- papers -------------------------------------------------------------- */

START_TEST(test_paper_outcomes)
{
    struct store *store = store_fresh();
    struct store_paper paper = paper_make("p1", "Attention is all you need",
                                          "Transformers replace recurrence.", 2017, 1);
    struct paper_hits hits;

    assert_counts(store, 0, 0, 0);
    ck_assert_int_eq(put_paper(store, &paper), STORE_ADDED);
    ck_assert_int_eq(put_paper(store, &paper), STORE_UNCHANGED);
    assert_counts(store, 1, 0, 0);

    /* Any field counts: the abstract, then only the open-access flag. */
    paper.abstract = (char *)"Self-attention replaces convolutions.";
    ck_assert_int_eq(put_paper(store, &paper), STORE_UPDATED);
    ck_assert_int_eq(put_paper(store, &paper), STORE_UNCHANGED);
    paper.is_open_access = 0;
    ck_assert_int_eq(put_paper(store, &paper), STORE_UPDATED);
    paper.venue = (char *)"NeurIPS";
    ck_assert_int_eq(put_paper(store, &paper), STORE_UPDATED);
    assert_counts(store, 1, 0, 0);

    /* The index follows the update: the old abstract's words are gone. */
    assert_search_ids(store, "recurrence", 0, 0, 0, 10, "");
    search(store, "convolutions", 0, 0, 0, 10, &hits);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].paper.abstract, "Self-attention replaces convolutions.");
    ck_assert_int_eq(hits.items[0].paper.is_open_access, 0);
    ck_assert_str_eq(hits.items[0].paper.venue, "NeurIPS");
    paper_hits_release(&hits);
    store_close(store);
}
END_TEST

START_TEST(test_paper_derived_ids)
{
    struct store *store = store_fresh();
    struct store_paper by_doi = paper_make(NULL, "Deep residual learning", NULL, 2016, 0);
    struct store_paper by_title = paper_make("", "Graph attention networks", NULL, 2018, 0);
    char expected[96];

    by_doi.doi = (char *)"10.1109/CVPR.2016.90";
    ck_assert_int_eq(put_paper(store, &by_doi), STORE_ADDED);
    ck_assert_int_eq(put_paper(store, &by_doi), STORE_UNCHANGED);
    /* The same DOI in another case is the same paper. */
    by_doi.doi = (char *)"10.1109/cvpr.2016.90";
    ck_assert_int_eq(put_paper(store, &by_doi), STORE_UPDATED);
    assert_search_ids(store, "residual", 0, 0, 0, 10, "doi:10.1109/cvpr.2016.90");

    ck_assert_int_eq(put_paper(store, &by_title), STORE_ADDED);
    ck_assert_int_eq(put_paper(store, &by_title), STORE_UNCHANGED);
    store_paper_id(&by_title, expected, sizeof(expected));
    ck_assert(!strncmp(expected, "title:", 6));
    assert_search_ids(store, "graph", 0, 0, 0, 10, expected);
    assert_counts(store, 2, 0, 0);
    store_close(store);
}
END_TEST

START_TEST(test_paper_hits_are_copies)
{
    struct store *store = store_fresh();
    struct store_paper paper = paper_make("p1", "Quantum error correction", "Surface codes.", 2021, 1);
    struct paper_hits hits;
    json_t *authors = json_pack("[ss]", "Ada Lovelace", "Alan Turing");

    ck_assert_ptr_nonnull(authors);
    paper.authors = authors;
    paper.venue = (char *)"Nature";
    paper.doi = (char *)"10.1/qec";
    paper.url = (char *)"https://example.org/qec";
    paper.pdf_url = (char *)"https://example.org/qec.pdf";
    paper.source = (char *)"papers.jsonl";
    ck_assert_int_eq(put_paper(store, &paper), STORE_ADDED);
    json_decref(authors);   /* the store holds its own copy */

    search(store, "QUANTUM codes", 0, 0, 0, 10, &hits);
    store_close(store);     /* hits are owned by the caller, not the store */
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].paper.id, "p1");
    ck_assert_str_eq(hits.items[0].paper.title, "Quantum error correction");
    ck_assert_str_eq(hits.items[0].paper.abstract, "Surface codes.");
    ck_assert_int_eq(hits.items[0].paper.year, 2021);
    ck_assert_str_eq(hits.items[0].paper.venue, "Nature");
    ck_assert_str_eq(hits.items[0].paper.doi, "10.1/qec");
    ck_assert_str_eq(hits.items[0].paper.url, "https://example.org/qec");
    ck_assert_str_eq(hits.items[0].paper.pdf_url, "https://example.org/qec.pdf");
    ck_assert_str_eq(hits.items[0].paper.source, "papers.jsonl");
    ck_assert_int_eq(hits.items[0].paper.is_open_access, 1);
    ck_assert(json_is_array(hits.items[0].paper.authors));
    ck_assert_uint_eq(json_array_size(hits.items[0].paper.authors), 2);
    ck_assert_str_eq(json_string_value(json_array_get(hits.items[0].paper.authors, 1)),
                     "Alan Turing");
    ck_assert(hits.items[0].score > 0.0);
    paper_hits_release(&hits);
    ck_assert_ptr_null(hits.items);
    ck_assert_uint_eq(hits.n, 0);
}
END_TEST

START_TEST(test_paper_ranking_title_beats_abstract)
{
    struct store *store = store_fresh();
    struct store_paper in_title = paper_make("z-title", "Graph neural networks",
                                             "A short survey.", 2020, 0);
    struct store_paper in_abstract = paper_make(
        "a-abstract", "Learning from structured data",
        "We study many kinds of structured data, from sequences and sets to trees, and show "
        "that a single model handles sequences, sets and trees alike; a graph appears once "
        "among many other structures, lists, tables, grids, images, meshes and point clouds.",
        2020, 0);
    struct paper_hits hits;

    put_filler(store, 6);
    ck_assert_int_eq(put_paper(store, &in_abstract), STORE_ADDED);
    ck_assert_int_eq(put_paper(store, &in_title), STORE_ADDED);
    search(store, "graph", 0, 0, 0, 10, &hits);
    ck_assert_uint_eq(hits.n, 2);
    ck_assert_str_eq(hits.items[0].paper.id, "z-title");
    ck_assert_str_eq(hits.items[1].paper.id, "a-abstract");
    ck_assert(hits.items[0].score > hits.items[1].score);
    ck_assert(hits.items[1].score > 0.0);
    paper_hits_release(&hits);

    /* Any word matches; a paper holding more of them ranks first. */
    assert_search_ids(store, "neural graph", 0, 0, 0, 10, "z-title,a-abstract");
    assert_search_ids(store, "trees", 0, 0, 0, 10, "a-abstract");
    assert_search_ids(store, "nothing-like-this-anywhere", 0, 0, 0, 10, "");
    store_close(store);
}
END_TEST

START_TEST(test_paper_filters)
{
    struct store *store = store_fresh();
    struct store_paper papers[] = {
        paper_make("y0000", "Sparse coding", NULL, 0, 1),
        paper_make("y2010", "Sparse coding", NULL, 2010, 0),
        paper_make("y2015", "Sparse coding", NULL, 2015, 1),
        paper_make("y2020", "Sparse coding", NULL, 2020, 0),
    };

    put_filler(store, 6);
    for (size_t i = 0; i < sizeof(papers) / sizeof(papers[0]); i++)
        ck_assert_int_eq(put_paper(store, &papers[i]), STORE_ADDED);

    assert_search_ids(store, "sparse", 0, 0, 0, 10, "y0000,y2010,y2015,y2020");
    /* With a year filter, unknown years are dropped; bounds are inclusive. */
    assert_search_ids(store, "sparse", 2012, 0, 0, 10, "y2015,y2020");
    assert_search_ids(store, "sparse", 0, 2015, 0, 10, "y2010,y2015");
    assert_search_ids(store, "sparse", 2015, 2015, 0, 10, "y2015");
    assert_search_ids(store, "sparse", 2010, 2020, 0, 10, "y2010,y2015,y2020");
    assert_search_ids(store, "sparse", 2021, 0, 0, 10, "");
    /* Open access only. */
    assert_search_ids(store, "sparse", 0, 0, 1, 10, "y0000,y2015");
    assert_search_ids(store, "sparse", 2011, 0, 1, 10, "y2015");
    store_close(store);
}
END_TEST

START_TEST(test_paper_limit_and_ties)
{
    static const char *const ids[] = {"p5", "p3", "p1", "p4", "p2"};
    struct store *store = store_fresh();
    struct paper_hits hits;

    put_filler(store, 6);
    for (size_t i = 0; i < 5; i++) {
        struct store_paper paper = paper_make(ids[i], "Bayesian optimisation",
                                              "Gaussian processes.", 2019, 0);
        ck_assert_int_eq(put_paper(store, &paper), STORE_ADDED);
    }
    /* Equal scores: id ascending, whatever the insertion order. */
    search(store, "bayesian", 0, 0, 0, 3, &hits);
    ck_assert_uint_eq(hits.n, 3);
    ck_assert_str_eq(hits.items[0].paper.id, "p1");
    ck_assert_str_eq(hits.items[1].paper.id, "p2");
    ck_assert_str_eq(hits.items[2].paper.id, "p3");
    ck_assert(hits.items[0].score == hits.items[2].score);
    paper_hits_release(&hits);
    assert_search_ids(store, "bayesian", 0, 0, 0, 1, "p1");
    assert_search_ids(store, "gaussian", 0, 0, 0, STORE_LIMIT_MAX, "p1,p2,p3,p4,p5");
    store_close(store);
}
END_TEST

START_TEST(test_queries_without_words)
{
    static const char *const texts[] = {"", "   ", "!!! --- ??? ...", "\"\" * () :"};
    struct store *store = store_fresh();
    struct store_paper paper = paper_make("p1", "Punctuation and operators", "OR AND NOT", 2020, 0);
    struct store_chunk chunk = {"Intro", "OR AND NOT NEAR"};

    ck_assert_int_eq(put_paper(store, &paper), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "d1", "Doc", &chunk, 1), STORE_ADDED);
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        struct paper_hits hits = {(struct paper_hit *)&hits, 99};
        struct chunk_hits chunks = {(struct chunk_hit *)&chunks, 99};
        search(store, texts[i], 0, 0, 0, 10, &hits);
        ck_assert_uint_eq(hits.n, 0);
        ck_assert_ptr_null(hits.items);
        search_chunks(store, texts[i], 10, &chunks);
        ck_assert_uint_eq(chunks.n, 0);
        ck_assert_ptr_null(chunks.items);
    }
    /* FTS5 operators in a query are plain words, never syntax. */
    assert_search_ids(store, "OR", 0, 0, 0, 10, "p1");
    assert_search_ids(store, "NOT \"operators", 0, 0, 0, 10, "p1");
    assert_search_ids(store, "title:punctuation", 0, 0, 0, 10, "p1");
    store_close(store);
}
END_TEST

/* ---- documents and chunks ------------------------------------------------ */

static const struct store_chunk guide[] = {
    {"Install", "Run make to build the keel binary and the static library."},
    {"Install > Dependencies", "Jansson, libyaml and SQLite come from pkg-config."},
    {NULL, "Licensed under the MIT licence."},
};

START_TEST(test_document_outcomes)
{
    struct store *store = store_fresh();
    struct store_chunk changed[3];

    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", guide, 3), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", guide, 3), STORE_UNCHANGED);
    assert_counts(store, 0, 1, 3);

    memcpy(changed, guide, sizeof(changed));
    changed[1].text = "Jansson, libyaml, SQLite and Check come from pkg-config.";
    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", changed, 3), STORE_UPDATED);
    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", changed, 3), STORE_UNCHANGED);
    /* A section is part of the content too, and so is the title. */
    changed[2].section = "Licence";
    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", changed, 3), STORE_UPDATED);
    ck_assert_int_eq(put_document(store, "docs/guide.md", "User guide", changed, 3),
                     STORE_UPDATED);
    ck_assert_int_eq(put_document(store, "docs/other.md", "Other", guide, 3), STORE_ADDED);
    assert_counts(store, 0, 2, 6);
    store_close(store);
}
END_TEST

START_TEST(test_chunk_search)
{
    struct store *store = store_fresh();
    struct store_chunk other[] = {{"Notes", "Nothing about building here, only sqlite notes."}};
    struct chunk_hits hits;

    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", guide, 3), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "docs/notes.md", NULL, other, 1), STORE_ADDED);

    search_chunks(store, "pkg-config", 10, &hits);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].document_id, "docs/guide.md");
    ck_assert_str_eq(hits.items[0].title, "Guide");
    ck_assert_str_eq(hits.items[0].source, "corpus/notes.md");
    ck_assert_str_eq(hits.items[0].section, "Install > Dependencies");
    ck_assert_str_eq(hits.items[0].text, "Jansson, libyaml and SQLite come from pkg-config.");
    ck_assert_int_eq(hits.items[0].ordinal, 1);
    ck_assert(hits.items[0].score > 0.0);
    chunk_hits_release(&hits);

    /* A chunk without a section, and the section is searched too. */
    search_chunks(store, "licence", 10, &hits);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_ptr_null(hits.items[0].section);
    ck_assert_int_eq(hits.items[0].ordinal, 2);
    chunk_hits_release(&hits);
    search_chunks(store, "dependencies", 10, &hits);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_int_eq(hits.items[0].ordinal, 1);
    chunk_hits_release(&hits);

    /* Two documents; a document without a title gives a NULL title. */
    search_chunks(store, "sqlite", 10, &hits);
    ck_assert_uint_eq(hits.n, 2);
    ck_assert(hits.items[0].score >= hits.items[1].score);
    for (size_t i = 0; i < hits.n; i++)
        if (!strcmp(hits.items[i].document_id, "docs/notes.md"))
            ck_assert_ptr_null(hits.items[i].title);
    chunk_hits_release(&hits);
    search_chunks(store, "sqlite", 1, &hits);
    ck_assert_uint_eq(hits.n, 1);
    chunk_hits_release(&hits);
    store_close(store);
}
END_TEST

/* Matching all words: every word must be there, as a word or a word's
 * start; any-word search on the same store finds more. */
START_TEST(test_chunk_search_all_words)
{
    struct store *store = store_fresh();
    struct store_chunk other[] = {{"Notes", "Nothing about building here, only sqlite notes."}};
    struct chunk_hits hits;
    struct keel_error err;

    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", guide, 3), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "docs/notes.md", NULL, other, 1), STORE_ADDED);
    keel_error_clear(&err);
    ck_assert_int_eq(store_search_chunks_all(store, "sqlite notes", 10, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].document_id, "docs/notes.md");
    chunk_hits_release(&hits);
    search_chunks(store, "sqlite notes", 10, &hits);
    ck_assert_uint_eq(hits.n, 2);   /* any word: the guide's SQLite chunk too */
    chunk_hits_release(&hits);
    /* "lib" starts "library" and "libyaml"; "licen" starts "licensed" and "licence". */
    ck_assert_int_eq(store_search_chunks_all(store, "lib", 10, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 2);
    chunk_hits_release(&hits);
    ck_assert_int_eq(store_search_chunks_all(store, "licen mit", 10, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_int_eq(hits.items[0].ordinal, 2);
    ck_assert(hits.items[0].score > 0.0);
    chunk_hits_release(&hits);
    ck_assert_int_eq(store_search_chunks_all(store, "sqlite licence", 10, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 0);
    chunk_hits_release(&hits);
    store_close(store);
}
END_TEST

START_TEST(test_chunk_ties_are_ordered)
{
    struct store *store = store_fresh();
    struct store_chunk same[] = {{NULL, "identical words"}, {NULL, "identical words"}};
    struct store_chunk filler[] = {{NULL, "alpha"}, {NULL, "beta"}, {NULL, "gamma"}};
    struct chunk_hits hits;

    ck_assert_int_eq(put_document(store, "b", "B", same, 2), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "a", "A", same, 2), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "c", "C", filler, 3), STORE_ADDED);
    search_chunks(store, "identical", 10, &hits);
    ck_assert_uint_eq(hits.n, 4);
    /* Equal scores: document id, then ordinal. */
    ck_assert_str_eq(hits.items[0].document_id, "a");
    ck_assert_int_eq(hits.items[0].ordinal, 0);
    ck_assert_str_eq(hits.items[1].document_id, "a");
    ck_assert_int_eq(hits.items[1].ordinal, 1);
    ck_assert_str_eq(hits.items[2].document_id, "b");
    ck_assert_int_eq(hits.items[2].ordinal, 0);
    ck_assert_str_eq(hits.items[3].document_id, "b");
    ck_assert_int_eq(hits.items[3].ordinal, 1);
    chunk_hits_release(&hits);
    store_close(store);
}
END_TEST

START_TEST(test_document_fewer_chunks)
{
    struct store *store = store_fresh();
    struct store_chunk shorter[] = {{"Install", "Run make to build everything."}};
    struct chunk_hits hits;

    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", guide, 3), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", shorter, 1), STORE_UPDATED);
    assert_counts(store, 0, 1, 1);
    /* Words only the old chunks held are gone from the index. */
    search_chunks(store, "licensed jansson binary", 10, &hits);
    ck_assert_uint_eq(hits.n, 0);
    chunk_hits_release(&hits);
    search_chunks(store, "make", 10, &hits);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].text, "Run make to build everything.");
    ck_assert_int_eq(hits.items[0].ordinal, 0);
    chunk_hits_release(&hits);

    /* Down to no chunks at all, then back. */
    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", NULL, 0), STORE_UPDATED);
    assert_counts(store, 0, 1, 0);
    search_chunks(store, "make", 10, &hits);
    ck_assert_uint_eq(hits.n, 0);
    chunk_hits_release(&hits);
    ck_assert_int_eq(put_document(store, "docs/guide.md", "Guide", guide, 3), STORE_UPDATED);
    assert_counts(store, 0, 1, 3);
    store_close(store);
}
END_TEST

START_TEST(test_counts_mixed)
{
    struct store *store = store_fresh();

    assert_counts(store, 0, 0, 0);
    put_filler(store, 4);
    ck_assert_int_eq(put_document(store, "d1", "One", guide, 3), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "d2", "Two", guide, 2), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "d3", "Three", NULL, 0), STORE_ADDED);
    assert_counts(store, 4, 3, 5);
    store_close(store);
}
END_TEST

/* ---- argument errors ----------------------------------------------------- */

static void assert_error(int rc, const struct keel_error *err, int code, const char *field)
{
    ck_assert_int_eq(rc, code);
    ck_assert_int_eq(err->code, code);
    ck_assert_str_eq(err->field, field);
    ck_assert(err->message[0] != '\0');
}

START_TEST(test_argument_errors)
{
    struct store *store = store_fresh();
    struct store_paper paper = paper_make("p1", NULL, NULL, 2020, 0);
    struct store_document doc = {"d1", "Doc", NULL, NULL};
    struct store_chunk bad_chunk[] = {{"ok", "fine"}, {"missing", NULL}};
    struct paper_query query = {"anything", 0, 0, 0, 10, STORE_MATCH_ANY, NULL, NULL, 0};
    enum store_outcome outcome = STORE_UNCHANGED;
    struct paper_hits hits;
    struct chunk_hits chunks;
    struct keel_error err;
    json_t *not_a_list = json_object();
    char *huge = malloc(STORE_TEXT_MAX + 2);

    ck_assert_ptr_nonnull(huge);
    memset(huge, 'a', STORE_TEXT_MAX + 1);
    huge[STORE_TEXT_MAX + 1] = '\0';

    assert_error(store_put_paper(store, &paper, &outcome, &err), &err, KEEL_EINVAL, "title");
    paper.title = (char *)"";
    assert_error(store_put_paper(store, &paper, &outcome, &err), &err, KEEL_EINVAL, "title");
    paper.title = (char *)"A title";
    paper.year = -1;
    assert_error(store_put_paper(store, &paper, &outcome, &err), &err, KEEL_EINVAL, "year");
    paper.year = 10000;
    assert_error(store_put_paper(store, &paper, &outcome, &err), &err, KEEL_EINVAL, "year");
    paper.year = 2020;
    paper.authors = not_a_list;
    assert_error(store_put_paper(store, &paper, &outcome, &err), &err, KEEL_EINVAL, "authors");
    paper.authors = NULL;
    paper.abstract = huge;
    assert_error(store_put_paper(store, &paper, &outcome, &err), &err, KEEL_ETOOBIG, "abstract");
    paper.abstract = NULL;
    ck_assert_int_eq(outcome, STORE_UNCHANGED);   /* untouched on failure */

    query.limit = 0;
    assert_error(store_search_papers(store, &query, &hits, &err), &err, KEEL_EINVAL, "limit");
    query.limit = STORE_LIMIT_MAX + 1;
    assert_error(store_search_papers(store, &query, &hits, &err), &err, KEEL_EINVAL, "limit");
    query.limit = 10;
    query.year_from = 2020;
    query.year_to = 2019;
    assert_error(store_search_papers(store, &query, &hits, &err), &err, KEEL_EINVAL, "year_from");
    query.year_from = query.year_to = 0;
    query.text = NULL;
    assert_error(store_search_papers(store, &query, &hits, &err), &err, KEEL_EINVAL, "query");
    ck_assert_uint_eq(hits.n, 0);

    doc.id = "";
    assert_error(store_put_document(store, &doc, bad_chunk, 1, &outcome, &err), &err,
                 KEEL_EINVAL, "id");
    doc.id = "d1";
    assert_error(store_put_document(store, &doc, bad_chunk, 2, &outcome, &err), &err,
                 KEEL_EINVAL, "chunks[].text");
    doc.title = huge;
    assert_error(store_put_document(store, &doc, bad_chunk, 1, &outcome, &err), &err,
                 KEEL_ETOOBIG, "title");
    doc.title = "Doc";
    bad_chunk[1].text = huge;
    assert_error(store_put_document(store, &doc, bad_chunk, 2, &outcome, &err), &err,
                 KEEL_ETOOBIG, "chunks[].text");

    assert_error(store_search_chunks(store, "x", 0, &chunks, &err), &err, KEEL_EINVAL, "limit");
    assert_error(store_search_chunks(store, "x", STORE_LIMIT_MAX + 1, &chunks, &err), &err,
                 KEEL_EINVAL, "limit");
    assert_error(store_search_chunks(store, NULL, 10, &chunks, &err), &err, KEEL_EINVAL, "query");
    ck_assert_uint_eq(chunks.n, 0);

    /* Nothing was written by any of them. */
    assert_counts(store, 0, 0, 0);
    json_decref(not_a_list);
    free(huge);
    store_close(store);
}
END_TEST

/* ---- failed writes change nothing ---------------------------------------- */

/* Two versions of paper p1 and document d1: each fault-injected write
 * tries to move one of them from version 1 to version 2. */
static struct store_paper paper_version(int v)
{
    return v == 1 ? paper_make("p1", "The first edition", "Old text.", 2001, 0)
                  : paper_make("p1", "The second edition", "New text.", 2002, 1);
}

static const struct store_chunk rewritten[] = {{"All", "Everything rewritten in one chunk."}};

static int put_document_version(struct store *store, int v, enum store_outcome *outcome,
                                struct keel_error *err)
{
    struct store_document doc = {"d1", "Doc", "doc.md", "en"};

    return store_put_document(store, &doc, v == 1 ? guide : rewritten, v == 1 ? 3 : 1, outcome,
                              err);
}

/* Asserts the store holds version `paper_v` of p1 and `doc_v` of d1 and
 * nothing else. */
static void assert_versions(struct store *store, int paper_v, int doc_v)
{
    struct chunk_hits chunks;

    assert_counts(store, 1, 1, doc_v == 1 ? 3 : 1);
    assert_search_ids(store, "first", 0, 0, 0, 10, paper_v == 1 ? "p1" : "");
    assert_search_ids(store, "second", 0, 0, 0, 10, paper_v == 1 ? "" : "p1");
    assert_search_ids(store, "edition", 2002, 0, 1, 10, paper_v == 1 ? "" : "p1");
    search_chunks(store, "licensed", 10, &chunks);
    ck_assert_uint_eq(chunks.n, doc_v == 1 ? 1 : 0);
    chunk_hits_release(&chunks);
    search_chunks(store, "rewritten", 10, &chunks);
    ck_assert_uint_eq(chunks.n, doc_v == 1 ? 0 : 1);
    chunk_hits_release(&chunks);
}

enum fault_op { FAULT_PUT_PAPER, FAULT_PUT_DOCUMENT, FAULT_SEARCH_PAPERS, FAULT_SEARCH_CHUNKS,
                FAULT_COUNTS, FAULT_OPS };

/* Runs `op` once with allocation `n` (and with `sticky`, every one after
 * it) failing. A failure must be KEEL_ENOMEM and leave everything at
 * version 1 with no result handed out; a success must have done the whole
 * operation (a write is then undone with injection off). Returns nonzero
 * when the operation succeeded. */
static int fault_run(struct store *store, enum fault_op op, long n, int sticky)
{
    struct store_paper v2 = paper_version(2);
    struct paper_query query = {"first second edition", 0, 0, 0, 10, STORE_MATCH_ANY, NULL, NULL, 0};
    enum store_outcome outcome = (enum store_outcome)-1;
    struct paper_hits hits = {NULL, 0};
    struct chunk_hits chunks = {NULL, 0};
    struct store_counts counts = {-1, -1, -1};
    struct keel_error err;
    json_t *authors = json_pack("[s]", "Grace Hopper");
    int rc = KEEL_EFAIL;

    ck_assert_ptr_nonnull(authors);
    v2.authors = authors;
    keel_error_clear(&err);
    hits.n = op == FAULT_SEARCH_PAPERS ? 7 : 0;   /* the search must reset it */
    chunks.n = op == FAULT_SEARCH_CHUNKS ? 7 : 0;
    keel_alloc_fail_after(n, sticky);
    switch (op) {
    case FAULT_PUT_PAPER: rc = store_put_paper(store, &v2, &outcome, &err); break;
    case FAULT_PUT_DOCUMENT: rc = put_document_version(store, 2, &outcome, &err); break;
    case FAULT_SEARCH_PAPERS: rc = store_search_papers(store, &query, &hits, &err); break;
    case FAULT_SEARCH_CHUNKS: rc = store_search_chunks(store, "licensed", 10, &chunks, &err); break;
    case FAULT_COUNTS: rc = store_counts(store, &counts, &err); break;
    case FAULT_OPS: break;
    }
    keel_alloc_fail_after(-1, 0);
    json_decref(authors);
    ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "op %d at %ld (sticky %d): %s %s: %s",
                  (int)op, n, sticky, keel_strerror(rc), err.field, err.message);
    if (rc == KEEL_OK) {
        if (op == FAULT_PUT_PAPER || op == FAULT_PUT_DOCUMENT)
            ck_assert_int_eq(outcome, STORE_UPDATED);
        if (op == FAULT_SEARCH_PAPERS)
            ck_assert_uint_eq(hits.n, 1);
        if (op == FAULT_SEARCH_CHUNKS)
            ck_assert_uint_eq(chunks.n, 1);
        if (op == FAULT_COUNTS)
            ck_assert_int_eq(counts.chunks, 3);
        assert_versions(store, op == FAULT_PUT_PAPER ? 2 : 1, op == FAULT_PUT_DOCUMENT ? 2 : 1);
    } else {
        ck_assert_int_eq(err.code, KEEL_ENOMEM);
        ck_assert_int_eq(outcome, (enum store_outcome)-1);   /* untouched */
        ck_assert_uint_eq(hits.n, 0);
        ck_assert_ptr_null(hits.items);
        ck_assert_uint_eq(chunks.n, 0);
        ck_assert_ptr_null(chunks.items);
    }
    paper_hits_release(&hits);
    chunk_hits_release(&chunks);
    if (rc == KEEL_OK && op == FAULT_PUT_PAPER) {
        struct store_paper v1 = paper_version(1);
        ck_assert_int_eq(put_paper(store, &v1), STORE_UPDATED);
    }
    if (rc == KEEL_OK && op == FAULT_PUT_DOCUMENT) {
        ck_assert_int_eq(put_document_version(store, 1, &outcome, &err), KEEL_OK);
        ck_assert_int_eq(outcome, STORE_UPDATED);
    }
    assert_versions(store, 1, 1);
    return rc == KEEL_OK;
}

/* For each operation: fail every allocation from the nth on, n = 0, 1, …
 * until the operation succeeds (that n is how many allocations it needs),
 * then fail each one of those alone. */
/* An accept callback that keeps papers of odd years and counts the rows
 * it was offered. */
struct odd_years {
    int offered;
};

static int accept_odd_year(void *ctx, const struct store_paper *paper)
{
    ((struct odd_years *)ctx)->offered++;
    return paper->year % 2 == 1;
}

/* Searches "sparse" (limit 6) keeping odd years, `want` at most; checks
 * the ids and how many rows the callback was offered. */
static void assert_accepted(struct store *store, int want, const char *expected, int offered)
{
    struct odd_years seen = {0};
    struct paper_query query = {"sparse", 0, 0, 0, 6, STORE_MATCH_ANY, accept_odd_year, &seen, want};
    struct paper_hits hits;
    struct keel_error err;
    char ids[512];

    keel_error_clear(&err);
    ck_assert_int_eq(store_search_papers(store, &query, &hits, &err), KEEL_OK);
    ck_assert_str_eq(hit_ids(&hits, ids, sizeof(ids)), expected);
    ck_assert_int_eq(seen.offered, offered);
    for (size_t i = 1; i < hits.n; i++)
        ck_assert(hits.items[i - 1].score >= hits.items[i].score);
    paper_hits_release(&hits);
}

START_TEST(test_paper_accept_and_want)
{
    struct store *store = store_fresh();
    struct paper_query bad = {"sparse", 0, 0, 0, 6, STORE_MATCH_ANY, NULL, NULL, -1};
    struct paper_hits hits;
    struct keel_error err;
    char id[32];

    put_filler(store, 6);
    for (int year = 2010; year <= 2016; year++) {
        struct store_paper paper = paper_make(id, "Sparse coding", NULL, year, 0);
        snprintf(id, sizeof(id), "y%d", year);
        ck_assert_int_eq(put_paper(store, &paper), STORE_ADDED);
    }
    /* Equal scores rank by id: y2010 … y2015 are the 6 ranked rows. */
    assert_accepted(store, 0, "y2011,y2013,y2015", 6);
    /* Rows are offered in rank order and none after the wanted ones. */
    assert_accepted(store, 2, "y2011,y2013", 4);
    assert_accepted(store, 1, "y2011", 2);
    assert_accepted(store, 9, "y2011,y2013,y2015", 6);
    /* Accepting does not widen the ranking: y2016, the 7th, is never offered. */
    assert_search_ids(store, "sparse", 0, 0, 0, 6, "y2010,y2011,y2012,y2013,y2014,y2015");
    assert_error(store_search_papers(store, &bad, &hits, &err), &err, KEEL_EINVAL, "want");
    store_close(store);
}
END_TEST

START_TEST(test_failed_operations_change_nothing)
{
    struct store *store = store_fresh();
    struct store_paper v1 = paper_version(1);
    enum store_outcome outcome;
    struct keel_error err;

    ck_assert_int_eq(put_paper(store, &v1), STORE_ADDED);
    ck_assert_int_eq(put_document_version(store, 1, &outcome, &err), KEEL_OK);
    assert_versions(store, 1, 1);
    for (int op = 0; op < FAULT_OPS; op++) {
        long needed = 0;

        while (!fault_run(store, (enum fault_op)op, needed, 1)) {
            needed++;
            ck_assert_msg(needed < 100000, "op %d never succeeds", op);
        }
        for (long n = 0; n < needed; n++)
            fault_run(store, (enum fault_op)op, n, 0);
    }
    store_close(store);
}
END_TEST

/* ---- SQLite files -------------------------------------------------------- */

/* Reads schema_migrations of `path` as "version@applied_at;…". */
static void read_migrations(const char *path, char *out, size_t n)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    size_t len = 0;

    out[0] = '\0';
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT version, applied_at FROM schema_migrations"
                                        " ORDER BY version",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    while (sqlite3_step(stmt) == SQLITE_ROW && len < n)
        len += (size_t)snprintf(out + len, n - len, "%d@%s;", sqlite3_column_int(stmt, 0),
                                (const char *)sqlite3_column_text(stmt, 1));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

START_TEST(test_sqlite_reopen_keeps_data)
{
    struct store *store;
    struct store_paper paper = paper_make("p1", "Persistent homology", "Topology of data.", 2012, 1);
    struct keel_error err;
    char path[sizeof(db_path)], location[sizeof(db_path) + 8], first[512], second[512];
    struct chunk_hits chunks;

    keel_clock_pin(NOW_MS);
    store = store_fresh();
    snprintf(path, sizeof(path), "%s", db_path);
    ck_assert_int_eq(put_paper(store, &paper), STORE_ADDED);
    ck_assert_int_eq(put_document(store, "d1", "Doc", guide, 3), STORE_ADDED);
    store_close(store);
    read_migrations(path, first, sizeof(first));
    /* Every migration ran once, at the first open. */
    ck_assert_str_eq(first, "1@2026-02-07T12:00:00.000Z;2@2026-02-07T12:00:00.000Z;"
                            "3@2026-02-07T12:00:00.000Z;4@2026-02-07T12:00:00.000Z;"
                            "5@2026-02-07T12:00:00.000Z;6@2026-02-07T12:00:00.000Z;"
                            "7@2026-02-07T12:00:00.000Z;8@2026-02-07T12:00:00.000Z;"
                            "9@2026-02-07T12:00:00.000Z;10@2026-02-07T12:00:00.000Z;"
                            "11@2026-02-07T12:00:00.000Z;12@2026-02-07T12:00:00.000Z;"
                            "13@2026-02-07T12:00:00.000Z;");

    /* A day later, through the "sqlite:" form of the location. */
    keel_clock_pin(NOW_MS + 86400000);
    snprintf(location, sizeof(location), "sqlite:%s", path);
    keel_error_clear(&err);
    ck_assert_msg(store_open(location, &store, &err) == KEEL_OK, "%s", err.message);
    assert_counts(store, 1, 1, 3);
    ck_assert_int_eq(put_paper(store, &paper), STORE_UNCHANGED);
    ck_assert_int_eq(put_document(store, "d1", "Doc", guide, 3), STORE_UNCHANGED);
    assert_search_ids(store, "homology", 2010, 2020, 1, 10, "p1");
    search_chunks(store, "pkg-config", 10, &chunks);
    ck_assert_uint_eq(chunks.n, 1);
    ck_assert_str_eq(chunks.items[0].section, "Install > Dependencies");
    chunk_hits_release(&chunks);
    store_close(store);

    /* The migrations were not applied again. */
    read_migrations(path, second, sizeof(second));
    ck_assert_str_eq(second, first);
    keel_clock_unpin();
}
END_TEST

START_TEST(test_sqlite_not_a_database)
{
    struct store *store = (struct store *)&store;
    struct keel_error err;
    char path[sizeof(temp_dir) + 32];
    FILE *f;

    snprintf(path, sizeof(path), "%s/notes-%ld.txt", temp_dir, (long)getpid());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("These are plain notes, not a SQLite database at all.\n", f);
    fclose(f);

    keel_error_clear(&err);
    ck_assert_int_eq(store_open(path, &store, &err), KEEL_EIO);
    ck_assert_ptr_eq(store, (struct store *)&store);   /* *out untouched */
    ck_assert_int_eq(err.code, KEEL_EIO);
    ck_assert_str_eq(err.field, path);
    ck_assert_msg(strstr(err.message, "not a database") != NULL, "message: %s", err.message);
}
END_TEST

START_TEST(test_sqlite_cannot_create)
{
    struct store *store = (struct store *)&store;
    struct keel_error err;
    char path[sizeof(temp_dir) + 32];

    snprintf(path, sizeof(path), "%s/no/such/dir/keel.db", temp_dir);
    keel_error_clear(&err);
    ck_assert_int_eq(store_open(path, &store, &err), KEEL_EIO);
    ck_assert_ptr_eq(store, (struct store *)&store);
    ck_assert_str_eq(err.field, path);
    ck_assert_msg(strstr(err.message, "unable to open") != NULL, "message: %s", err.message);

    keel_error_clear(&err);
    ck_assert_int_eq(store_open("sqlite:", &store, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "db");
}
END_TEST

/* Runs `sql` on the file at `path` through a connection of its own and
 * returns the text of the first column of the first row ("" if none). */
static void raw_sql(const char *path, const char *sql, char *out, size_t n)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    const char *tail = sql;

    out[0] = '\0';
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                     SQLITE_OK);
    while (*tail) {
        const char *sql_now = tail;
        ck_assert_msg(sqlite3_prepare_v2(db, sql_now, -1, &stmt, &tail) == SQLITE_OK, "%s: %s",
                      sql_now, sqlite3_errmsg(db));
        if (!stmt)
            break;
        if (sqlite3_step(stmt) == SQLITE_ROW && !out[0] && sqlite3_column_text(stmt, 0))
            snprintf(out, n, "%s", (const char *)sqlite3_column_text(stmt, 0));
        ck_assert_msg(sqlite3_finalize(stmt) == SQLITE_OK, "%s: %s", sql_now, sqlite3_errmsg(db));
    }
    sqlite3_close(db);
}

START_TEST(test_sqlite_consistent_after_faults)
{
    struct store *store = store_fresh();
    struct store_paper v1 = paper_version(1);
    enum store_outcome outcome;
    struct keel_error err;
    char path[sizeof(db_path)], result[64];

    snprintf(path, sizeof(path), "%s", db_path);
    ck_assert_int_eq(put_paper(store, &v1), STORE_ADDED);
    ck_assert_int_eq(put_document_version(store, 1, &outcome, &err), KEEL_OK);
    for (long n = 0; !fault_run(store, FAULT_PUT_PAPER, n, 1); n++)
        ;
    for (long n = 0; !fault_run(store, FAULT_PUT_DOCUMENT, n, 1); n++)
        ;
    store_close(store);
    /* The file and both full-text indexes agree with the rows. */
    raw_sql(path, "PRAGMA integrity_check", result, sizeof(result));
    ck_assert_str_eq(result, "ok");
    raw_sql(path,
            "INSERT INTO papers_fts (papers_fts) VALUES ('integrity-check');"
            "INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check');"
            "SELECT count(*) FROM chunks",
            result, sizeof(result));
    ck_assert_str_eq(result, "3");
}
END_TEST

static long file_size(const char *path)
{
    struct stat sb;

    return stat(path, &sb) ? -1 : (long)sb.st_size;
}

/* The store's WAL hook replaces SQLite's auto-checkpoint; the store's
 * thread must then copy the WAL back once it passes 4,000 pages, long
 * before the commit path's backstop (32,000): the database file grows
 * while the store stays open and idle. */
START_TEST(test_sqlite_checkpoints_in_the_background)
{
    enum { DOCS = 100, TEXT = 96 * 1024 };
    struct store *store = store_fresh();
    char *text = malloc(TEXT + 1), id[32], wal[sizeof(db_path) + 8];
    long before, after = -1, wal_size;

    ck_assert_ptr_nonnull(text);
    for (int i = 0; i < TEXT; i++)
        text[i] = i % 7 == 6 ? ' ' : (char)('a' + (i * 31 + i / 7) % 26);
    text[TEXT] = '\0';
    before = file_size(db_path);
    for (int d = 0; d < DOCS; d++) {
        struct store_chunk chunk = {"All", text};
        snprintf(id, sizeof(id), "big-%d", d);
        text[d] = 'z';   /* each document differs */
        ck_assert_int_eq(put_document(store, id, "Big", &chunk, 1), STORE_ADDED);
    }
    snprintf(wal, sizeof(wal), "%s-wal", db_path);
    wal_size = file_size(wal);
    ck_assert_msg(wal_size > 4000L * 4096, "the test wrote too little: WAL %ld bytes", wal_size);
    ck_assert_msg(wal_size < 32000L * 4096, "the test wrote past the backstop: WAL %ld bytes",
                  wal_size);
    for (int i = 0; i < 1000 && (after = file_size(db_path)) < before + DOCS * TEXT / 2; i++)
        usleep(10000);
    ck_assert_msg(after >= before + DOCS * TEXT / 2,
                  "no checkpoint within 10 s: database %ld -> %ld bytes, WAL %ld", before, after,
                  wal_size);
    store_close(store);
    free(text);
}
END_TEST

START_TEST(test_sqlite_schema_from_the_future)
{
    struct store *store = (struct store *)&store;
    struct keel_error err;
    char path[sizeof(temp_dir) + 32], result[8];

    snprintf(path, sizeof(path), "%s/future-%ld.db", temp_dir, (long)getpid());
    raw_sql(path,
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);"
            "INSERT INTO schema_migrations VALUES (99, '2030-01-01T00:00:00.000Z')",
            result, sizeof(result));
    keel_error_clear(&err);
    ck_assert_int_eq(store_open(path, &store, &err), KEEL_EIO);
    ck_assert_ptr_eq(store, (struct store *)&store);
    ck_assert_str_eq(err.field, path);
    ck_assert_msg(strstr(err.message, "schema version 99") != NULL, "message: %s", err.message);
}
END_TEST

START_TEST(test_sqlite_failed_migration_rolls_back)
{
    struct store *store = (struct store *)&store;
    struct keel_error err;
    char path[sizeof(temp_dir) + 32], result[64];

    /* Someone else's database with a table of the same name. */
    snprintf(path, sizeof(path), "%s/other-%ld.db", temp_dir, (long)getpid());
    raw_sql(path, "CREATE TABLE documents (anything TEXT)", result, sizeof(result));
    keel_error_clear(&err);
    ck_assert_int_eq(store_open(path, &store, &err), KEEL_EIO);
    ck_assert_ptr_eq(store, (struct store *)&store);
    ck_assert_str_eq(err.field, path);
    ck_assert_msg(strstr(err.message, "migration 1") && strstr(err.message, "documents"),
                  "message: %s", err.message);
    /* Nothing of migration 1 stayed behind. */
    raw_sql(path,
            "SELECT group_concat(name, ',') FROM"
            " (SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name)",
            result, sizeof(result));
    ck_assert_str_eq(result, "documents,schema_migrations");
    raw_sql(path, "SELECT count(*) FROM schema_migrations", result, sizeof(result));
    ck_assert_str_eq(result, "0");
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static void add_contract_tests(TCase *tc)
{
    unit_leak_fixture(tc);
    tcase_add_test(tc, test_paper_outcomes);
    tcase_add_test(tc, test_paper_derived_ids);
    tcase_add_test(tc, test_paper_hits_are_copies);
    tcase_add_test(tc, test_paper_ranking_title_beats_abstract);
    tcase_add_test(tc, test_paper_filters);
    tcase_add_test(tc, test_paper_limit_and_ties);
    tcase_add_test(tc, test_paper_accept_and_want);
    tcase_add_test(tc, test_queries_without_words);
    tcase_add_test(tc, test_document_outcomes);
    tcase_add_test(tc, test_chunk_search);
    tcase_add_test(tc, test_chunk_search_all_words);
    tcase_add_test(tc, test_chunk_ties_are_ordered);
    tcase_add_test(tc, test_document_fewer_chunks);
    tcase_add_test(tc, test_counts_mixed);
    tcase_add_test(tc, test_argument_errors);
    tcase_add_test(tc, test_failed_operations_change_nothing);
}

/* Two threads, each with its own store on one file, write at once: every
 * put lands (they take turns on the file's mutex, not on SQLite's busy
 * sleeps), and a write that fails part way gives the mutex back — the
 * other store then writes without waiting forever. */
struct writer_arg {
    const char *path;
    int first;
    int failures;
};

static void *writer_thread(void *opaque)
{
    struct writer_arg *w = opaque;
    struct store *store = NULL;
    struct keel_error err;

    if (store_open(w->path, &store, &err)) {
        w->failures = -1;
        return NULL;
    }
    for (int i = 0; i < 150; i++) {
        char id[32], title[64];
        struct store_paper p;
        enum store_outcome outcome;
        snprintf(id, sizeof(id), "w%d-%03d", w->first, i);
        snprintf(title, sizeof(title), "Concurrent paper %d of writer %d", i, w->first);
        p = paper_make(id, title, "Written while another store writes.", 2020, 0);
        if (store_put_paper(store, &p, &outcome, &err) || outcome != STORE_ADDED)
            w->failures++;
    }
    store_close(store);
    return NULL;
}

START_TEST(test_sqlite_writers_take_turns)
{
    struct store *a = store_fresh(), *b;
    struct writer_arg args[2] = {{db_path, 0, 0}, {db_path, 1, 0}};
    pthread_t threads[2];
    struct store_paper p = paper_make("after-failure", "Written after a failed write", NULL, 0, 0);
    struct keel_error err;
    int rc = KEEL_OK;

    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, writer_thread, &args[i]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    ck_assert_int_eq(args[0].failures, 0);
    ck_assert_int_eq(args[1].failures, 0);
    assert_counts(a, 300, 0, 0);

    /* Writes of `a` failing at every step, each followed by a write of b. */
    keel_error_clear(&err);
    ck_assert_int_eq(store_open(db_path, &b, &err), KEEL_OK);
    for (long fail = 0; fail < 2000; fail++) {
        struct store_paper q = paper_make("faulty", "A write that fails part way", NULL, 0, 0);
        struct store_counts counts;
        char id[32];
        ck_assert_int_eq(store_counts(a, &counts, &err), KEEL_OK);   /* reconnected */
        keel_alloc_fail_after(fail, 1);
        rc = store_put_paper(a, &q, NULL, &err);
        keel_alloc_fail_after(-1, 0);
        snprintf(id, sizeof(id), "after-%04ld", fail);
        p.id = id;
        ck_assert_int_eq(store_put_paper(b, &p, NULL, &err), KEEL_OK);
        if (!rc)
            break;
    }
    ck_assert_msg(rc == KEEL_OK, "%d %s: %s", rc, err.field, err.message);
    store_close(b);
    store_close(a);
}
END_TEST

Suite *suite_store(void)
{
    Suite *s = suite_create("store");
    TCase *mem = tcase_create("store_mem");
    TCase *sqlite = tcase_create("store_sqlite");
    TCase *file = tcase_create("store_sqlite_file");

    tcase_add_unchecked_fixture(mem, backend_mem, NULL);
    add_contract_tests(mem);
    suite_add_tcase(s, mem);

    /* The fault sweeps run an operation a few hundred times: room for
     * slow machines and sanitizers beyond Check's default 4 s. */
    tcase_add_unchecked_fixture(sqlite, backend_sqlite, backend_sqlite_remove);
    tcase_set_timeout(sqlite, 60);
    add_contract_tests(sqlite);
    suite_add_tcase(s, sqlite);

    tcase_add_unchecked_fixture(file, backend_sqlite, backend_sqlite_remove);
    tcase_set_timeout(file, 60);
    unit_leak_fixture(file);
    tcase_add_test(file, test_sqlite_reopen_keeps_data);
    tcase_add_test(file, test_sqlite_not_a_database);
    tcase_add_test(file, test_sqlite_cannot_create);
    tcase_add_test(file, test_sqlite_consistent_after_faults);
    tcase_add_test(file, test_sqlite_checkpoints_in_the_background);
    tcase_add_test(file, test_sqlite_schema_from_the_future);
    tcase_add_test(file, test_sqlite_failed_migration_rolls_back);
    tcase_add_test(file, test_sqlite_writers_take_turns);
    suite_add_tcase(s, file);
    return s;
}
