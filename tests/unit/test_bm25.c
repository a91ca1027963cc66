/*
 * test_bm25.c — the in-memory BM25 index (src/text/bm25.c) and the SQLite
 * store's use of it (src/store/store_sqlite_index.c).
 *
 * TCase "bm25": the index alone, on hand-made tokens — scores equal the
 * formula of FTS5's bm25() computed here by hand, prefix and exact
 * matching, AND and OR, repeated words, the limit and the best-first
 * order with ties by row, filters, an empty index, bad arguments, and
 * allocation failures at every step of a build and a search.
 *
 * TCase "bm25_store": the SQLite store with the index against the same
 * file with KEEL_SEARCH_INDEX=off (FTS5's statements): a generated
 * library and corpus with accents, mixed case and punctuation, and a few
 * hundred queries (both match modes, filters, limits, an accept callback
 * with a wanted count, prefixes, repeats, words FTS5 splits), compared
 * hit by hit — same rows, same order, scores
 * equal bit for bit. Then the index following writes made through another
 * connection (added, updated, removed rows), and a search under injected
 * allocation failures either failing cleanly or answering exactly.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/error.h"
#include "store/store.h"
#include "text/bm25.h"
#include "unit.h"

/* ---- the index alone ---------------------------------------------------------- */

/* Builds an index from rows of space-separated tokens. */
static struct bm25_index *build_rows(const char *const *rows, size_t n)
{
    struct bm25_builder *b;
    struct bm25_index *ix;

    ck_assert_int_eq(bm25_builder_new(&b), KEEL_OK);
    for (size_t r = 0; r < n; r++) {
        const char *p = rows[r];
        while (*p) {
            size_t len = strcspn(p, " ");
            if (len)
                ck_assert_int_eq(bm25_builder_token(b, p, len), KEEL_OK);
            p += len;
            p += strspn(p, " ");
        }
        ck_assert_int_eq(bm25_builder_end_row(b), KEEL_OK);
    }
    ck_assert_int_eq(bm25_builder_finish(b, &ix), KEEL_OK);
    return ix;
}

static void query_of(struct bm25_query *q, const char *words, enum bm25_match match)
{
    static char buf[256];

    memset(q, 0, sizeof(*q));
    q->match = match;
    snprintf(buf, sizeof(buf), "%s", words);
    for (char *w = buf; *w;) {
        size_t len = strcspn(w, " ");
        q->words[q->n] = w;
        q->lens[q->n++] = len;
        w += len;
        if (*w)
            *w++ = '\0';
    }
}

/* "row:score row:score" of a search, scores to 6 decimals. */
static void search_text(const struct bm25_index *ix, const char *words, enum bm25_match match,
                        size_t limit, bm25_keep_fn keep, char *out, size_t n)
{
    struct bm25_scratch *s;
    struct bm25_hit hits[64];
    struct bm25_query q;
    size_t got, len = 0;

    query_of(&q, words, match);
    ck_assert_int_eq(bm25_scratch_new(bm25_index_rows(ix), &s), KEEL_OK);
    ck_assert_int_eq(bm25_search(ix, &q, keep, NULL, limit, s, hits, &got), KEEL_OK);
    bm25_scratch_free(s);
    out[0] = '\0';
    for (size_t i = 0; i < got; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%u:%.6f", i ? " " : "", hits[i].row,
                                hits[i].score);
}

/* FTS5's bm25() term for one word, written out. */
static double term(double n_rows, double hits, double f, double d, double avgdl)
{
    double idf = log((n_rows - hits + 0.5) / (hits + 0.5));

    if (idf <= 0.0)
        idf = 1e-6;
    return idf * ((f * (1.2 + 1.0)) / (f + 1.2 * (1 - 0.75 + 0.75 * d / avgdl)));
}

static const char *const corpus[] = {
    "graph neural networks",                       /* 0 */
    "graphs of graphs and graph theory",           /* 1 */
    "sleep and memory in adolescents",             /* 2 */
    "memory consolidation during sleep sleep",     /* 3 */
    "unrelated words only here",                   /* 4 */
    "another unrelated row",                       /* 5 */
};
#define N_CORPUS (sizeof(corpus) / sizeof(corpus[0]))

START_TEST(test_bm25_scores_are_fts5s)
{
    struct bm25_index *ix = build_rows(corpus, N_CORPUS);
    struct bm25_scratch *s;
    struct bm25_hit hits[8];
    struct bm25_query q;
    double avgdl = (3.0 + 6 + 5 + 5 + 4 + 3) / 6.0, expect;
    size_t n;

    ck_assert_uint_eq(bm25_index_rows(ix), 6);
    ck_assert_uint_gt(bm25_index_bytes(ix), 0);
    ck_assert_int_eq(bm25_scratch_new(1, &s), KEEL_OK);   /* grows when searching */

    /* OR, exact words: "graph" is in rows 0 and 1 (not "graphs"). */
    query_of(&q, "graph sleep", BM25_ANY);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 10, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 4);
    /* row 3 holds "sleep" twice in 5 tokens */
    expect = 0.0 + term(6, 2, 2, 5, avgdl);
    ck_assert_uint_eq(hits[0].row, 3);
    ck_assert(hits[0].score == expect);
    expect = term(6, 2, 1, 3, avgdl);
    ck_assert_uint_eq(hits[1].row, 0);
    ck_assert(hits[1].score == expect);

    /* AND of prefixes: "graph" also finds "graphs"; n counts rows. */
    query_of(&q, "graph theory", BM25_ALL);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 10, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(hits[0].row, 1);
    expect = 0.0 + term(6, 2, 3, 6, avgdl);
    expect += term(6, 1, 1, 6, avgdl);
    ck_assert(hits[0].score == expect);

    /* A repeated word counts twice, as FTS5 scores each phrase. */
    query_of(&q, "memory memory", BM25_ANY);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 10, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 2);
    expect = 0.0 + term(6, 2, 1, 5, avgdl);
    expect += term(6, 2, 1, 5, avgdl);
    ck_assert(hits[0].score == expect);
    bm25_scratch_free(s);
    bm25_index_free(ix);
}
END_TEST

static int odd_rows(void *ctx, uint32_t row)
{
    (void)ctx;
    return row % 2 == 1;
}

START_TEST(test_bm25_order_limit_filter)
{
    static const char *const same[] = {"alpha beta", "alpha beta", "gamma", "alpha beta",
                                       "alpha beta", "delta", "delta", "delta", "delta"};
    struct bm25_index *ix = build_rows(same, 9);
    char text[512];

    /* Equal scores: rows ascending; the limit keeps the first ones. */
    search_text(ix, "alpha", BM25_ANY, 10, NULL, text, sizeof(text));
    ck_assert_str_eq(text, "0:0.173389 1:0.173389 3:0.173389 4:0.173389");
    search_text(ix, "alpha", BM25_ANY, 2, NULL, text, sizeof(text));
    ck_assert_str_eq(text, "0:0.173389 1:0.173389");
    search_text(ix, "alpha", BM25_ANY, 10, odd_rows, text, sizeof(text));
    ck_assert_str_eq(text, "1:0.173389 3:0.173389");
    /* Prefixes only in AND mode; a word no row has matches nothing. */
    search_text(ix, "alp", BM25_ANY, 10, NULL, text, sizeof(text));
    ck_assert_str_eq(text, "");
    search_text(ix, "alp", BM25_ALL, 10, NULL, text, sizeof(text));
    ck_assert_str_eq(text, "0:0.173389 1:0.173389 3:0.173389 4:0.173389");
    search_text(ix, "alp zeta", BM25_ALL, 10, NULL, text, sizeof(text));
    ck_assert_str_eq(text, "");
    search_text(ix, "zeta gamma", BM25_ANY, 10, NULL, text, sizeof(text));
    ck_assert_str_eq(text, "2:1.984384");
    search_text(ix, "", BM25_ANY, 10, NULL, text, sizeof(text));
    ck_assert_str_eq(text, "");
    bm25_index_free(ix);
}
END_TEST

START_TEST(test_bm25_many_rows_best_first)
{
    struct bm25_builder *b;
    struct bm25_index *ix;
    struct bm25_scratch *s;
    struct bm25_hit hits[50];
    struct bm25_query q;
    size_t n;

    ck_assert_int_eq(bm25_builder_new(&b), KEEL_OK);
    for (int r = 0; r < 3000; r++) {
        char word[16];
        /* row r holds "common" (r % 7) + 1 times and a word of its own */
        for (int k = 0; k <= r % 7; k++)
            ck_assert_int_eq(bm25_builder_token(b, "common", 6), KEEL_OK);
        snprintf(word, sizeof(word), "w%d", r);
        ck_assert_int_eq(bm25_builder_token(b, word, strlen(word)), KEEL_OK);
        ck_assert_int_eq(bm25_builder_end_row(b), KEEL_OK);
    }
    ck_assert_int_eq(bm25_builder_finish(b, &ix), KEEL_OK);
    ck_assert_int_eq(bm25_scratch_new(10, &s), KEEL_OK);
    query_of(&q, "common", BM25_ANY);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 50, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 50);
    for (size_t i = 1; i < n; i++)
        ck_assert(hits[i - 1].score > hits[i].score ||
                  (hits[i - 1].score == hits[i].score && hits[i - 1].row < hits[i].row));
    /* The most "common" per token: 7 of 8 tokens, rows 6, 13, 20, … */
    ck_assert_uint_eq(hits[0].row, 6);
    ck_assert_uint_eq(hits[1].row, 13);
    /* "w1" is a prefix of w1, w10..w19, w100..w199, w1000..w1999. */
    query_of(&q, "w1", BM25_ALL);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 50, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 50);
    query_of(&q, "w1 common", BM25_ALL);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 1, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 1);
    bm25_scratch_free(s);
    bm25_index_free(ix);
}
END_TEST

START_TEST(test_bm25_edges)
{
    struct bm25_builder *b;
    struct bm25_index *ix;
    struct bm25_scratch *s;
    struct bm25_hit hits[4];
    struct bm25_query q;
    static char long_token[BM25_TOKEN_MAX + 10];
    size_t n;

    /* An index with no rows, and one whose only row has no tokens. */
    ck_assert_int_eq(bm25_builder_new(&b), KEEL_OK);
    ck_assert_int_eq(bm25_builder_finish(b, &ix), KEEL_OK);
    ck_assert_int_eq(bm25_scratch_new(0, &s), KEEL_OK);
    query_of(&q, "x", BM25_ANY);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 4, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 0);
    bm25_index_free(ix);
    ck_assert_int_eq(bm25_builder_new(&b), KEEL_OK);
    ck_assert_int_eq(bm25_builder_end_row(b), KEEL_OK);
    ck_assert_int_eq(bm25_builder_finish(b, &ix), KEEL_OK);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 4, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 0);
    bm25_index_free(ix);

    /* A token over BM25_TOKEN_MAX is cut, as FTS5 cuts it; an open row
     * is closed by finish. */
    memset(long_token, 'k', sizeof(long_token));
    ck_assert_int_eq(bm25_builder_new(&b), KEEL_OK);
    ck_assert_int_eq(bm25_builder_token(b, long_token, sizeof(long_token)), KEEL_OK);
    ck_assert_int_eq(bm25_builder_token(b, "x", 1), KEEL_OK);
    ck_assert_int_eq(bm25_builder_finish(b, &ix), KEEL_OK);
    ck_assert_uint_eq(bm25_index_rows(ix), 1);
    q.words[0] = long_token;
    q.lens[0] = BM25_TOKEN_MAX;
    q.n = 1;
    q.match = BM25_ANY;
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 4, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 1);
    q.lens[0] = BM25_TOKEN_MAX + 1;   /* no token is that long */
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 4, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 0);
    /* Bad arguments. */
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 1001, s, hits, &n), KEEL_EINVAL);
    q.n = BM25_WORDS_MAX + 1;
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 4, s, hits, &n), KEEL_EINVAL);
    bm25_index_free(ix);
    bm25_scratch_free(s);
    bm25_builder_free(NULL);
    bm25_index_free(NULL);
    bm25_scratch_free(NULL);
}
END_TEST

/* A build and a search with the Nth allocation failing: a clean
 * KEEL_ENOMEM or the right answer, and no leak (the fixture checks). */
START_TEST(test_bm25_allocation_failures)
{
    char expected[512] = "";

    for (long fail = -1; fail < 200; fail++) {
        struct bm25_builder *b = NULL;
        struct bm25_index *ix = NULL;
        struct bm25_scratch *s = NULL;
        struct bm25_hit hits[8];
        struct bm25_query q;
        size_t n = 0, len = 0;
        char got[512] = "";
        int rc;

        keel_alloc_fail_after(fail, 1);
        rc = bm25_builder_new(&b);
        for (size_t r = 0; !rc && r < N_CORPUS; r++) {
            const char *p = corpus[r];
            while (!rc && *p) {
                size_t wl = strcspn(p, " ");
                rc = bm25_builder_token(b, p, wl);
                p += wl;
                p += strspn(p, " ");
            }
            if (!rc)
                rc = bm25_builder_end_row(b);
        }
        if (!rc) {
            rc = bm25_builder_finish(b, &ix);
            b = NULL;
        }
        if (!rc)
            rc = bm25_scratch_new(2, &s);
        query_of(&q, "graph sleep memory", BM25_ANY);
        if (!rc)
            rc = bm25_search(ix, &q, NULL, NULL, 8, s, hits, &n);
        keel_alloc_fail_after(-1, 0);
        if (rc) {
            ck_assert_int_eq(rc, KEEL_ENOMEM);
        } else {
            for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(got + len, sizeof(got) - len, "%u:%.17g ", hits[i].row,
                                        hits[i].score);
            if (fail < 0)
                snprintf(expected, sizeof(expected), "%s", got);
            ck_assert_str_eq(got, expected);
        }
        bm25_builder_free(b);
        bm25_index_free(ix);
        bm25_scratch_free(s);
        if (!rc && fail > 0)
            break;   /* no allocation left to fail */
    }
}
END_TEST

/* ---- the SQLite store: index against FTS5 ------------------------------------------ */

static char temp_dir[64];

static void temp_make(void)
{
    unit_temp_dir(temp_dir, sizeof(temp_dir), "bm25", 1);
}

static void temp_remove(void)
{
    unit_temp_dir_remove(temp_dir);
}

static unsigned rng_state;

static unsigned rng(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) & 0xffffff;
}

/* Words with case, accents, digits and neighbours by prefix; some
 * joined by punctuation that FTS5 splits at. */
static const char *const vocabulary[] = {
    "graph", "graphs", "Graphical", "GRAPH", "network", "networks", "neural", "Neuron",
    "café", "cafe", "CAFÉ", "naïve", "naive", "Zürich", "zurich", "sleep", "sleeping",
    "memory", "memories", "health", "healthcare", "appeal", "appeals", "appealing",
    "covid-19", "covid", "19", "2020", "x", "data", "dataset", "data-driven", "O'Brien",
    "über", "ubER", "résumé", "resume", "straße", "strasse", "Ελληνικά", "ελληνικα", "日本語",
    "e-mail", "email", "state-of-the-art", "art", "of", "the", "a", "analysis", "analyses",
};
#define N_VOCAB (sizeof(vocabulary) / sizeof(vocabulary[0]))

static void random_text(char *out, size_t n, int words)
{
    size_t len = 0;

    out[0] = '\0';
    for (int i = 0; i < words && len + 40 < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i ? (rng() % 9 ? " " : ", ") : "",
                                vocabulary[rng() % N_VOCAB]);
}

static struct store *open_store(const char *path, int with_index)
{
    struct store *store;
    struct keel_error err;

    if (with_index)
        unsetenv("KEEL_SEARCH_INDEX");
    else
        setenv("KEEL_SEARCH_INDEX", "off", 1);
    keel_error_clear(&err);
    ck_assert_msg(store_open(path, &store, &err) == KEEL_OK, "%s", err.message);
    unsetenv("KEEL_SEARCH_INDEX");
    return store;
}

static void fill_random(struct store *store, int papers, int docs)
{
    struct keel_error err;

    for (int i = 0; i < papers; i++) {
        char id[32], title[256], abstract[1024];
        struct store_paper p = {0};
        snprintf(id, sizeof(id), "p%04d", (int)(rng() % 100000));   /* ids not in row order */
        random_text(title, sizeof(title), 2 + (int)(rng() % 5));
        random_text(abstract, sizeof(abstract), (int)(rng() % 40));
        p.id = id;
        p.title = title;
        p.abstract = rng() % 5 ? abstract : NULL;
        p.year = rng() % 6 ? 2000 + (int)(rng() % 25) : 0;
        p.is_open_access = (int)(rng() % 2);
        ck_assert_int_eq(store_put_paper(store, &p, NULL, &err), KEEL_OK);
    }
    for (int d = 0; d < docs; d++) {
        char id[32], title[128], sections[4][128], texts[4][1024];
        struct store_chunk chunks[4];
        struct store_document doc = {id, title, id, "en"};
        size_t n = 1 + rng() % 4;
        snprintf(id, sizeof(id), "docs/d%03d.md", (int)(rng() % 1000));
        random_text(title, sizeof(title), 3);
        for (size_t c = 0; c < n; c++) {
            random_text(sections[c], sizeof(sections[c]), (int)(rng() % 3));
            random_text(texts[c], sizeof(texts[c]), 5 + (int)(rng() % 60));
            chunks[c].section = rng() % 4 ? sections[c] : NULL;
            chunks[c].text = texts[c];
        }
        ck_assert_int_eq(store_put_document(store, &doc, chunks, n, NULL, &err), KEEL_OK);
    }
}

/* A query: 1–4 vocabulary words, sometimes cut to a prefix, sometimes a
 * word twice, sometimes one that FTS5 splits ("a—b") or reads as none. */
static void random_query(char *out, size_t n)
{
    int words = 1 + (int)(rng() % 4);
    size_t len = 0;

    out[0] = '\0';
    for (int i = 0; i < words; i++) {
        const char *w = vocabulary[rng() % N_VOCAB];
        int cut = rng() % 5 == 0 ? 1 + (int)(rng() % 4) : 0;
        if (rng() % 40 == 0)
            w = "graph—network";
        else if (rng() % 60 == 0)
            w = "—";
        len += (size_t)snprintf(out + len, n - len, "%s%.*s", i ? " " : "",
                                cut ? cut : (int)strlen(w), w);
    }
    if (rng() % 10 == 0) {
        char once[512];
        snprintf(once, sizeof(once), "%s", out);
        snprintf(out + len, n - len, " %s", once);   /* words repeated */
    }
}

/* An accept callback: papers whose id's number is even. */
static int even_id(void *ctx, const struct store_paper *paper)
{
    (void)ctx;
    return atoi(paper->id + 1) % 2 == 0;
}

/* With an accept callback, `hits` are the accepted rows of the same
 * search without it, in order, `want` at most. */
static void assert_accepted_of(struct store *store, const struct paper_query *q,
                               const struct paper_hits *hits)
{
    struct paper_query all = *q;
    struct paper_hits full;
    struct keel_error err;
    size_t k = 0;

    all.accept = NULL;
    all.want = 0;
    ck_assert_int_eq(store_search_papers(store, &all, &full, &err), KEEL_OK);
    for (size_t i = 0; i < full.n && !(q->want && k == (size_t)q->want); i++) {
        if (!q->accept(q->accept_ctx, &full.items[i].paper))
            continue;
        ck_assert_msg(k < hits->n, "\"%s\": accepted hit %zu missing", q->text, k);
        ck_assert_str_eq(hits->items[k].paper.id, full.items[i].paper.id);
        ck_assert(hits->items[k].score == full.items[i].score);
        k++;
    }
    ck_assert_uint_eq(hits->n, k);
    paper_hits_release(&full);
}

static void compare_papers(struct store *a, struct store *b, const struct paper_query *q)
{
    struct paper_hits ha, hb;
    struct keel_error err;

    ck_assert_int_eq(store_search_papers(a, q, &ha, &err), KEEL_OK);
    ck_assert_int_eq(store_search_papers(b, q, &hb, &err), KEEL_OK);
    ck_assert_msg(ha.n == hb.n, "\"%s\" (%s): %zu hits, FTS5 %zu", q->text,
                  q->match == STORE_MATCH_ALL ? "all" : "any", ha.n, hb.n);
    for (size_t i = 0; i < ha.n; i++) {
        ck_assert_msg(!strcmp(ha.items[i].paper.id, hb.items[i].paper.id),
                      "\"%s\" hit %zu: %s, FTS5 %s", q->text, i, ha.items[i].paper.id,
                      hb.items[i].paper.id);
        ck_assert_msg(ha.items[i].score == hb.items[i].score, "\"%s\" hit %zu: %.17g, FTS5 %.17g",
                      q->text, i, ha.items[i].score, hb.items[i].score);
        ck_assert_str_eq(ha.items[i].paper.title, hb.items[i].paper.title);
        ck_assert_int_eq(ha.items[i].paper.year, hb.items[i].paper.year);
    }
    if (q->accept)
        assert_accepted_of(a, q, &ha);
    paper_hits_release(&ha);
    paper_hits_release(&hb);
}

static void compare_chunks(struct store *a, struct store *b, const char *text, int all, int limit)
{
    struct chunk_hits ha, hb;
    struct keel_error err;

    if (all) {
        ck_assert_int_eq(store_search_chunks_all(a, text, limit, &ha, &err), KEEL_OK);
        ck_assert_int_eq(store_search_chunks_all(b, text, limit, &hb, &err), KEEL_OK);
    } else {
        ck_assert_int_eq(store_search_chunks(a, text, limit, &ha, &err), KEEL_OK);
        ck_assert_int_eq(store_search_chunks(b, text, limit, &hb, &err), KEEL_OK);
    }
    ck_assert_msg(ha.n == hb.n, "chunks \"%s\" (%s): %zu hits, FTS5 %zu", text,
                  all ? "all" : "any", ha.n, hb.n);
    for (size_t i = 0; i < ha.n; i++) {
        ck_assert_str_eq(ha.items[i].document_id, hb.items[i].document_id);
        ck_assert_int_eq(ha.items[i].ordinal, hb.items[i].ordinal);
        ck_assert_msg(ha.items[i].score == hb.items[i].score, "chunks \"%s\" hit %zu: %.17g, %.17g",
                      text, i, ha.items[i].score, hb.items[i].score);
        ck_assert_str_eq(ha.items[i].text, hb.items[i].text);
        ck_assert_str_eq(ha.items[i].title ? ha.items[i].title : "",
                         hb.items[i].title ? hb.items[i].title : "");
        ck_assert_str_eq(ha.items[i].section ? ha.items[i].section : "",
                         hb.items[i].section ? hb.items[i].section : "");
    }
    chunk_hits_release(&ha);
    chunk_hits_release(&hb);
}

static void compare_many(struct store *a, struct store *b, int queries)
{
    for (int i = 0; i < queries; i++) {
        char text[512];
        struct paper_query q = {text, 0, 0, 0, 1 + (int)(rng() % 30), STORE_MATCH_ANY, NULL, NULL, 0};
        random_query(text, sizeof(text));
        q.match = rng() % 2 ? STORE_MATCH_ALL : STORE_MATCH_ANY;
        if (rng() % 3 == 0)
            q.year_from = 2005 + (int)(rng() % 10);
        if (rng() % 3 == 0)
            q.year_to = 2015 + (int)(rng() % 10);
        q.open_access_only = rng() % 4 == 0;
        if (rng() % 3 == 0) {
            q.accept = even_id;
            q.want = (int)(rng() % 4);
        }
        compare_papers(a, b, &q);
        compare_chunks(a, b, text, (int)(rng() % 2), 1 + (int)(rng() % 20));
    }
}

static void db_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s-%ld.db", temp_dir, name, (long)getpid());
}

START_TEST(test_index_ranks_as_fts5)
{
    char path[160];
    struct store *a, *b;

    rng_state = 20260207u;
    db_path(path, sizeof(path), "same");
    a = open_store(path, 1);
    b = open_store(path, 0);
    fill_random(a, 400, 60);
    compare_many(a, b, 400);
    store_close(a);
    store_close(b);
}
END_TEST

START_TEST(test_index_follows_other_connections)
{
    char path[160];
    struct store *a, *b, *writer;
    struct store_paper p = {0};
    struct store_chunk chunk = {"Section", "a zebra crossing"};
    struct store_document doc = {"docs/zebra.md", "Zebras", "docs/zebra.md", NULL};
    struct paper_query q = {"zebra", 0, 0, 0, 10, STORE_MATCH_ANY, NULL, NULL, 0};
    struct paper_hits hits;
    struct chunk_hits chunks;
    struct keel_error err;

    rng_state = 7u;
    db_path(path, sizeof(path), "follow");
    a = open_store(path, 1);
    b = open_store(path, 0);
    writer = open_store(path, 1);
    fill_random(writer, 50, 10);
    compare_many(a, b, 30);   /* the index is built */

    /* Another connection adds a paper, then changes it. */
    p.id = (char *)"zz-new";
    p.title = (char *)"zebra stripes";
    p.year = 2021;
    ck_assert_int_eq(store_put_paper(writer, &p, NULL, &err), KEEL_OK);
    ck_assert_int_eq(store_search_papers(a, &q, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].paper.title, "zebra stripes");
    paper_hits_release(&hits);
    compare_many(a, b, 10);
    p.title = (char *)"horse stripes";
    ck_assert_int_eq(store_put_paper(writer, &p, NULL, &err), KEEL_OK);
    ck_assert_int_eq(store_search_papers(a, &q, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 0);
    paper_hits_release(&hits);

    /* A document added, then replaced by one without the word. */
    ck_assert_int_eq(store_put_document(writer, &doc, &chunk, 1, NULL, &err), KEEL_OK);
    ck_assert_int_eq(store_search_chunks(a, "zebra", 5, &chunks, &err), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 1);
    chunk_hits_release(&chunks);
    chunk.text = "a pelican crossing";
    ck_assert_int_eq(store_put_document(writer, &doc, &chunk, 1, NULL, &err), KEEL_OK);
    ck_assert_int_eq(store_search_chunks(a, "zebra", 5, &chunks, &err), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 0);
    chunk_hits_release(&chunks);
    compare_many(a, b, 20);
    store_close(writer);
    store_close(a);
    store_close(b);
}
END_TEST

START_TEST(test_index_allocation_failures)
{
    char path[160];
    struct store *a, *b;
    struct paper_query q = {"graph network", 0, 0, 0, 10, STORE_MATCH_ANY, NULL, NULL, 0};
    struct paper_hits expect;
    struct keel_error err;

    rng_state = 99u;
    db_path(path, sizeof(path), "alloc");
    b = open_store(path, 0);
    fill_random(b, 80, 0);
    ck_assert_int_eq(store_search_papers(b, &q, &expect, &err), KEEL_OK);
    ck_assert_uint_gt(expect.n, 0);
    for (long fail = 0; fail < 400; fail += 3) {
        struct paper_hits hits = {0};
        int rc;
        a = open_store(path, 1);   /* a fresh index: the build is under fire too */
        keel_alloc_fail_after(fail, 1);
        rc = store_search_papers(a, &q, &hits, &err);
        keel_alloc_fail_after(-1, 0);
        if (rc) {
            ck_assert_int_eq(rc, KEEL_ENOMEM);
        } else {
            ck_assert_uint_eq(hits.n, expect.n);
            for (size_t i = 0; i < hits.n; i++) {
                ck_assert_str_eq(hits.items[i].paper.id, expect.items[i].paper.id);
                ck_assert(hits.items[i].score == expect.items[i].score);
            }
        }
        paper_hits_release(&hits);
        /* After a failure the same store answers exactly. */
        ck_assert_int_eq(store_search_papers(a, &q, &hits, &err), KEEL_OK);
        ck_assert_uint_eq(hits.n, expect.n);
        paper_hits_release(&hits);
        store_close(a);
    }
    paper_hits_release(&expect);
    store_close(b);
}
END_TEST

/* Stores of one file in one process share its index (one build, one
 * copy): two threads search through stores of their own while a third
 * writes papers, so the index is rebuilt under them again and again.
 * Every hit must be a row the searching store can read, every search must
 * succeed, and afterwards the index still ranks exactly as FTS5 does. */
struct searcher {
    const char *path;
    unsigned seed;
    int searches, failures;
};

static void *search_loop(void *arg)
{
    struct searcher *s = arg;
    struct store *store = NULL;
    struct keel_error err;

    if (store_open(s->path, &store, &err)) {
        s->failures++;
        return NULL;
    }
    for (int i = 0; i < 300; i++) {
        struct paper_query q = {NULL, 0, 0, 0, 20, STORE_MATCH_ANY, NULL, NULL, 0};
        struct paper_hits hits;
        s->seed = s->seed * 1103515245u + 12345u;   /* rng() is the writer's */
        q.text = vocabulary[(s->seed >> 8) % N_VOCAB];
        if (store_search_papers(store, &q, &hits, &err)) {
            s->failures++;
            continue;
        }
        for (size_t h = 0; h < hits.n; h++)
            if (!hits.items[h].paper.id || !hits.items[h].paper.title)
                s->failures++;
        paper_hits_release(&hits);
        s->searches++;
    }
    store_close(store);
    return NULL;
}

START_TEST(test_index_shared_across_threads)
{
    char path[160];
    struct store *writer, *fts;
    struct searcher s[2];
    pthread_t threads[2];

    rng_state = 4242u;
    db_path(path, sizeof(path), "shared");
    writer = open_store(path, 1);
    fill_random(writer, 200, 20);
    for (int i = 0; i < 2; i++) {
        s[i] = (struct searcher){path, 17u + (unsigned)i, 0, 0};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, search_loop, &s[i]), 0);
    }
    for (int round = 0; round < 20; round++)
        fill_random(writer, 5, 1);   /* each write makes the shared index stale */
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_int_eq(s[i].failures, 0);
        ck_assert_int_eq(s[i].searches, 300);
    }
    fts = open_store(path, 0);
    compare_many(writer, fts, 100);
    store_close(fts);
    store_close(writer);
}
END_TEST

/* A file deleted and made again at the same path while a store of the old
 * one is still open is another file: its store must not search the old
 * file's index, even when the two files' generations are equal. */
START_TEST(test_index_not_shared_with_a_new_file_at_the_path)
{
    char path[160], side[200];
    struct store *old, *fresh;
    struct store_paper p = {0};
    struct paper_query q = {"pelican", 0, 0, 0, 10, STORE_MATCH_ANY, NULL, NULL, 0};
    struct paper_hits hits;
    struct keel_error err;

    db_path(path, sizeof(path), "again");
    old = open_store(path, 1);
    p.id = (char *)"p1";
    p.title = (char *)"zebra stripes";
    ck_assert_int_eq(store_put_paper(old, &p, NULL, &err), KEEL_OK);
    q.text = "zebra";
    ck_assert_int_eq(store_search_papers(old, &q, &hits, &err), KEEL_OK);   /* builds it */
    ck_assert_uint_eq(hits.n, 1);
    paper_hits_release(&hits);
    for (int i = 0; i < 3; i++) {
        snprintf(side, sizeof(side), "%s%s", path, (const char *[]){"", "-wal", "-shm"}[i]);
        unlink(side);
    }
    fresh = open_store(path, 1);
    p.title = (char *)"pelican crossing";   /* the same writes: the same generation */
    ck_assert_int_eq(store_put_paper(fresh, &p, NULL, &err), KEEL_OK);
    q.text = "pelican";
    ck_assert_int_eq(store_search_papers(fresh, &q, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].paper.title, "pelican crossing");
    paper_hits_release(&hits);
    store_close(fresh);
    store_close(old);
}
END_TEST

/* Two in-memory databases are two files, though both are named
 * ":memory:": neither searches the other's index. */
START_TEST(test_index_not_shared_between_memory_databases)
{
    struct store *first = open_store("sqlite::memory:", 1),
                 *second = open_store("sqlite::memory:", 1);
    struct store_paper p = {0};
    struct paper_query q = {"zebra", 0, 0, 0, 10, STORE_MATCH_ANY, NULL, NULL, 0};
    struct paper_hits hits;
    struct keel_error err;

    p.id = (char *)"p1";
    p.title = (char *)"zebra stripes";
    ck_assert_int_eq(store_put_paper(first, &p, NULL, &err), KEEL_OK);
    ck_assert_int_eq(store_search_papers(first, &q, &hits, &err), KEEL_OK);   /* builds it */
    ck_assert_uint_eq(hits.n, 1);
    paper_hits_release(&hits);
    p.title = (char *)"pelican crossing";   /* the same writes: the same generation */
    ck_assert_int_eq(store_put_paper(second, &p, NULL, &err), KEEL_OK);
    q.text = "pelican";
    ck_assert_int_eq(store_search_papers(second, &q, &hits, &err), KEEL_OK);
    ck_assert_uint_eq(hits.n, 1);
    ck_assert_str_eq(hits.items[0].paper.title, "pelican crossing");
    paper_hits_release(&hits);
    store_close(second);
    store_close(first);
}
END_TEST

Suite *suite_bm25(void)
{
    Suite *s = suite_create("bm25");
    TCase *tc = tcase_create("bm25");
    TCase *st = tcase_create("bm25_store");

    unit_leak_fixture(tc);
    tcase_add_test(tc, test_bm25_scores_are_fts5s);
    tcase_add_test(tc, test_bm25_order_limit_filter);
    tcase_add_test(tc, test_bm25_many_rows_best_first);
    tcase_add_test(tc, test_bm25_edges);
    tcase_add_test(tc, test_bm25_allocation_failures);
    suite_add_tcase(s, tc);
    tcase_add_unchecked_fixture(st, temp_make, temp_remove);
    unit_leak_fixture(st);
    tcase_set_timeout(st, 120);
    tcase_add_test(st, test_index_ranks_as_fts5);
    tcase_add_test(st, test_index_follows_other_connections);
    tcase_add_test(st, test_index_allocation_failures);
    tcase_add_test(st, test_index_shared_across_threads);
    tcase_add_test(st, test_index_not_shared_with_a_new_file_at_the_path);
    tcase_add_test(st, test_index_not_shared_between_memory_databases);
    suite_add_tcase(s, st);
    return s;
}
