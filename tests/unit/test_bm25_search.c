/*
 * test_bm25_search.c — bm25_search's paths (src/text/bm25_search.c)
 * against a reference written here the plain way: every row's count of
 * every query word, n the rows holding it, each word's FTS5 term added in
 * query order, keep(), then sorted and cut to the limit.
 *
 * The generated corpora are built to reach every path: words of one term
 * and prefixes of several (so n comes from the stored df, from the
 * stored rows of a term and the longer ones it begins, or from the
 * decoded union), ranges read term by term or as a list, dense terms
 * (bitmaps; counts of 254 to 257, around the byte escape) and sparse
 * ones, long lists (hundreds of skip blocks for a dense term's escaped
 * counts, dozens for a sparse term's walk), rare words sitting on the
 * rows at block edges of the long lists, row gaps and counts of
 * one, two and three varint bytes, words absent, repeated words, limits
 * from 1 to 1000 with filters that drop most rows, and one scratch
 * reused across indexes of different sizes. Hits must agree row for row
 * and score for score, bit for bit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/bm25.h"
#include "unit.h"

/* The vocabulary: dense words of one term (every, half, …), block-edge
 * words (b64 … b128, also a prefix family "b"), words at random rates
 * (r0 … r9), a prefix family (pa …) and counts of several varint bytes. */
static const char *const vocab[] = {
    "every", "half",  "third", "b64",  "b65", "b127",  "b128", "gap200", "edge",
    "r0",    "r1",    "r2",    "r3",   "r4",  "r5",    "r6",   "r7",     "r8",
    "r9",    "pa",    "pab",   "pabc", "pabd", "pac",  "heavy", "q",    "qa",
    "qb",    "qc",    "qd",    "qe",   "qf",  "qg",    "qh",   "qi",     "edges",
    "sparse20",
};
#define N_VOCAB (sizeof(vocab) / sizeof(vocab[0]))
enum { EVERY, HALF, THIRD, B64, B65, B127, B128, GAP200, EDGE, R0, PA = R0 + 10, PAB, PABC, PABD,
       PAC, HEAVY, Q, QI = Q + 9, EDGES, SPARSE20 };

/* Query words: the vocabulary, prefixes of one and of several terms,
 * and words no row holds. */
static const char *const pool[] = {
    "every", "half", "third", "b64", "b65", "b127", "b128", "gap200", "edge", "r0", "r1", "r2",
    "r3", "r4", "r5", "r6", "r7", "r8", "r9", "pa", "pab", "pabc", "pabd", "pac", "heavy",
    "b", "b6", "b12", "r", "p", "e", "h", "ga", "pabcd", "zz", "every1", "a", "edg", "q", "qa",
    "sparse20", "s",
};
#define N_POOL (sizeof(pool) / sizeof(pool[0]))

struct corpus {
    size_t rows;
    uint32_t (*count)[N_VOCAB];   /* per row and vocabulary term */
    uint32_t *length;
    struct bm25_index *ix;
};

static unsigned rng_state;

static unsigned rng(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) & 0xffffff;
}

/* Rows at the block edges of "every" (posting i is row i), of "half"
 * (row 2i) and of "sparse20" (row 20i + 7): the rows "edge" holds. */
static int at_edge(size_t r, size_t rows)
{
    size_t m = r % 64, h = (r / 2) % 64, s20 = (r / 20) % 64;

    return (r >= 60 && (m <= 1 || m >= 62)) || (r % 2 == 0 && r >= 120 && (h <= 1 || h == 63)) ||
           (r % 20 == 7 && r > 20 && (s20 <= 1 || s20 == 63)) || r < 2 || r + 2 >= rows;
}

/* Builds a corpus of `rows` rows, kept both as counts and as an index. */
static void corpus_make(struct corpus *c, size_t rows, unsigned seed)
{
    static const unsigned rate[10] = {500, 200, 50, 10, 2, 500, 200, 50, 10, 2};   /* per 1000 */
    struct bm25_builder *b;

    rng_state = seed;
    c->rows = rows;
    c->count = calloc(rows, sizeof(*c->count));
    c->length = calloc(rows, sizeof(*c->length));
    ck_assert_ptr_nonnull(c->count);
    ck_assert_ptr_nonnull(c->length);
    for (size_t r = 0; r < rows; r++) {
        uint32_t *n = c->count[r];
        /* counts of 255 and more in a dense term: read from the postings */
        n[EVERY] = r % 211 == 17 ? 254 + (uint32_t)(r / 211) % 4 : 1 + rng() % 3;
        n[HALF] = r % 2 == 0 ? 1 + rng() % 2 : 0;
        n[THIRD] = r % 3 == 0;
        n[B64] = r % 64 == 0;
        n[B65] = r % 65 == 0;
        n[B127] = r % 127 == 0;
        n[B128] = r % 128 == 0 ? 1 + rng() % 4 : 0;
        n[GAP200] = r % 200 == 7;
        n[EDGE] = at_edge(r, rows);
        n[EDGES] = r % 5 == 1;   /* "edg" is no term, but "edge" begins every term it begins */
        n[SPARSE20] = r % 20 == 7;   /* under one row in 16: sparse, 15 skip blocks in 20,000 */
        for (int k = 0; k < 10; k++)
            n[R0 + k] = rng() % 1000 < rate[k] ? 1 + rng() % 2 : 0;
        for (int k = PA; k <= PAC; k++)
            n[k] = rng() % 5 == 0;
        for (int k = Q; k <= QI; k++)   /* "q" begins 10 terms: read as a list */
            n[k] = rng() % 20 == 0;
        if (r % 97 == 5)
            n[HEAVY] = (uint32_t[]){1, 127, 128, 300, 16384, 20000}[(r / 97) % 6];
    }
    ck_assert_int_eq(bm25_builder_new(&b), KEEL_OK);
    for (size_t r = 0; r < rows; r++) {
        for (size_t t = 0; t < N_VOCAB; t++) {
            for (uint32_t k = 0; k < c->count[r][t]; k++)
                ck_assert_int_eq(bm25_builder_token(b, vocab[t], strlen(vocab[t])), KEEL_OK);
            c->length[r] += c->count[r][t];
        }
        ck_assert_int_eq(bm25_builder_end_row(b), KEEL_OK);
    }
    ck_assert_int_eq(bm25_builder_finish(b, &c->ix), KEEL_OK);
    ck_assert_uint_eq(bm25_index_rows(c->ix), rows);
}

static void corpus_free(struct corpus *c)
{
    bm25_index_free(c->ix);
    free(c->count);
    free(c->length);
}

/* Filters: none, odd rows, a hash keeping about one row in 16. */
static int keep_odd(void *ctx, uint32_t row)
{
    (void)ctx;
    return row % 2 == 1;
}

static int keep_few(void *ctx, uint32_t row)
{
    (void)ctx;
    return ((row * 2654435761u) >> 28) == 3;
}

static const bm25_keep_fn keeps[] = {NULL, keep_odd, keep_few};

static int by_rank(const void *x, const void *y)
{
    const struct bm25_hit *a = x, *b = y;

    if (a->score != b->score)
        return a->score < b->score ? 1 : -1;
    return (a->row > b->row) - (a->row < b->row);
}

/* The reference: hits of `q` into out (room for every row), *n of them. */
static void reference(const struct corpus *c, const struct bm25_query *q, bm25_keep_fn keep,
                      size_t limit, struct bm25_hit *out, size_t *n)
{
    uint32_t *f = calloc(c->rows * q->n + 1, sizeof(*f));
    double idf[BM25_WORDS_MAX], tokens = 0;

    ck_assert_ptr_nonnull(f);
    *n = 0;
    for (size_t r = 0; r < c->rows; r++)
        tokens += c->length[r];
    for (size_t w = 0; w < q->n; w++) {
        size_t hits = 0;
        int match[N_VOCAB];
        for (size_t t = 0; t < N_VOCAB; t++) {
            size_t len = strlen(vocab[t]);
            match[t] = q->match == BM25_ALL
                           ? len >= q->lens[w] && !memcmp(vocab[t], q->words[w], q->lens[w])
                           : len == q->lens[w] && !memcmp(vocab[t], q->words[w], len);
        }
        for (size_t r = 0; r < c->rows; r++) {
            for (size_t t = 0; t < N_VOCAB; t++)
                if (match[t])
                    f[r * q->n + w] += c->count[r][t];
            hits += f[r * q->n + w] > 0;
        }
        idf[w] = log(((double)c->rows - (double)hits + 0.5) / ((double)hits + 0.5));
        if (idf[w] <= 0.0)
            idf[w] = 1e-6;
    }
    for (size_t r = 0; r < c->rows && tokens > 0; r++) {
        double avgdl = tokens / (double)c->rows, score = 0.0;
        double norm = 1.2 * (1 - 0.75 + 0.75 * (double)c->length[r] / avgdl);
        size_t held = 0;
        for (size_t w = 0; w < q->n; w++) {
            double x = f[r * q->n + w];
            if (x > 0) {
                score += idf[w] * ((x * (1.2 + 1.0)) / (x + norm));
                held++;
            }
        }
        if ((q->match == BM25_ALL ? held == q->n : held > 0) && (!keep || keep(NULL, (uint32_t)r)))
            out[(*n)++] = (struct bm25_hit){(uint32_t)r, score};
    }
    qsort(out, *n, sizeof(*out), by_rank);
    if (*n > limit)
        *n = limit;
    free(f);
}

/* Searches `q` both ways and compares; the hit count, for the caller. */
static size_t compare(const struct corpus *c, const struct bm25_query *q, bm25_keep_fn keep,
                      size_t limit, struct bm25_scratch *s)
{
    struct bm25_hit *want = malloc((c->rows + 1) * sizeof(*want)), got[1000];
    size_t n_want, n_got;

    ck_assert_ptr_nonnull(want);
    reference(c, q, keep, limit, want, &n_want);
    ck_assert_int_eq(bm25_search(c->ix, q, keep, NULL, limit, s, got, &n_got), KEEL_OK);
    ck_assert_msg(n_got == n_want, "%zu hits, want %zu (first word %.*s, %s, limit %zu)", n_got,
                  n_want, (int)q->lens[0], q->words[0], q->match == BM25_ALL ? "ALL" : "ANY",
                  limit);
    for (size_t i = 0; i < n_got; i++) {
        ck_assert_msg(got[i].row == want[i].row && got[i].score == want[i].score,
                      "hit %zu: row %u score %.17g, want row %u score %.17g", i, got[i].row,
                      got[i].score, want[i].row, want[i].score);
    }
    free(want);
    return n_got;
}

static void query_words(struct bm25_query *q, const char *const *words, size_t n,
                        enum bm25_match match)
{
    memset(q, 0, sizeof(*q));
    q->match = match;
    for (size_t i = 0; i < n; i++) {
        q->words[i] = words[i];
        q->lens[i] = strlen(words[i]);
    }
    q->n = n;
}

/* Hand-picked queries for each path, then random ones. */
static void compare_corpus(const struct corpus *c, struct bm25_scratch *s, int random_queries)
{
    static const char *const picked[][4] = {
        {"edge", "every"},          /* a rare word, a long list: skips */
        {"every", "edge"},          /* the same rows, summed in the other order */
        {"edge", "half"},           {"gap200", "every", "half"}, {"b128", "b64"},
        {"b64", "b128", "every"},   {"b", "edge"},               /* prefix of 4 terms */
        {"b6", "b12"},              {"pa", "pab", "pac"},        {"pabc", "pabd"},
        {"heavy", "every"},         {"r4", "r9", "every"},       {"edge", "zz"},
        {"zz", "edge"},             {"every", "every"},          {"e", "h"},
        {"r", "edge", "pab"},       {"third", "half", "b65", "b127"},
        {"pa", "every"},            {"pab", "half", "pa"},       {"q", "half"},
        {"q", "edge"},              {"every", "q"},              {"qa", "q", "pa"},
        {"edge", "sparse20"},       {"gap200", "sparse20"},      {"b64", "sparse20", "every"},
        {"edg", "half"},            {"half", "edg"},             {"edges", "edge"},
    };
    static const size_t limits[] = {1, 2, 5, 10, 37, 100, 1000};
    struct bm25_query q;

    for (size_t i = 0; i < sizeof(picked) / sizeof(picked[0]); i++) {
        size_t n = 0;
        while (n < 4 && picked[i][n])
            n++;
        for (int m = 0; m < 2; m++) {
            query_words(&q, picked[i], n, m ? BM25_ALL : BM25_ANY);
            for (size_t k = 0; k < sizeof(keeps) / sizeof(keeps[0]); k++) {
                compare(c, &q, keeps[k], 1000, s);
                compare(c, &q, keeps[k], 3, s);
            }
            for (size_t w = 0; w < n; w++) {   /* each word alone */
                query_words(&q, &picked[i][w], 1, m ? BM25_ALL : BM25_ANY);
                compare(c, &q, NULL, 1000, s);
            }
        }
    }
    for (int i = 0; i < random_queries; i++) {
        const char *words[6];
        size_t n = 1 + rng() % 6;
        for (size_t w = 0; w < n; w++)
            words[w] = pool[rng() % N_POOL];
        query_words(&q, words, n, rng() % 2 ? BM25_ALL : BM25_ANY);
        compare(c, &q, keeps[rng() % 3], limits[rng() % 7], s);
    }
}

START_TEST(test_bm25_search_small)
{
    struct corpus c;
    struct bm25_scratch *s;

    corpus_make(&c, 300, 1);
    ck_assert_int_eq(bm25_scratch_new(1, &s), KEEL_OK);   /* grows */
    compare_corpus(&c, s, 400);
    bm25_scratch_free(s);
    corpus_free(&c);
}
END_TEST

START_TEST(test_bm25_search_long_lists)
{
    struct corpus big, small;
    struct bm25_scratch *s;
    struct bm25_query q;
    const char *words[] = {"edge", "every"};

    corpus_make(&big, 20000, 2);
    corpus_make(&small, 700, 3);
    ck_assert_int_eq(bm25_scratch_new(700, &s), KEEL_OK);
    /* one scratch across indexes of both sizes, in both orders */
    compare_corpus(&small, s, 100);
    compare_corpus(&big, s, 150);
    compare_corpus(&small, s, 100);
    query_words(&q, words, 2, BM25_ALL);
    ck_assert_uint_gt(compare(&big, &q, NULL, 1000, s), 600);
    bm25_scratch_free(s);
    corpus_free(&big);
    corpus_free(&small);
}
END_TEST

/* A search whose Nth allocation fails returns KEEL_ENOMEM, and the same
 * scratch then answers exactly (prefix words leave nothing behind). */
START_TEST(test_bm25_search_allocation_failures)
{
    struct corpus c;
    struct bm25_query q;
    const char *words[] = {"b", "pa", "every", "pab"};

    corpus_make(&c, 3000, 4);
    query_words(&q, words, 4, BM25_ALL);
    for (long fail = 0; fail < 50; fail++) {
        struct bm25_scratch *s;
        struct bm25_hit hits[10];
        size_t n;
        int rc;
        ck_assert_int_eq(bm25_scratch_new(1, &s), KEEL_OK);
        keel_alloc_fail_after(fail, 1);
        rc = bm25_search(c.ix, &q, NULL, NULL, 10, s, hits, &n);
        keel_alloc_fail_after(-1, 0);
        ck_assert(rc == KEEL_OK || rc == KEEL_ENOMEM);
        compare(&c, &q, NULL, 1000, s);
        compare(&c, &q, keep_few, 7, s);
        bm25_scratch_free(s);
        if (rc == KEEL_OK)
            break;
    }
    corpus_free(&c);
}
END_TEST

/* Equal scores reach the heap out of row order (OR: a later word's rows
 * may come before the earlier word's): the lower rows still win. */
START_TEST(test_bm25_search_ties_across_words)
{
    struct bm25_builder *b;
    struct bm25_index *ix;
    struct bm25_scratch *s;
    struct bm25_hit hits[3];
    struct bm25_query q;
    const char *words[] = {"x", "y"};
    size_t n;

    ck_assert_int_eq(bm25_builder_new(&b), KEEL_OK);
    for (int r = 0; r < 20; r++) {
        const char *token = r < 5 ? "y" : r < 10 ? "x" : "z";
        ck_assert_int_eq(bm25_builder_token(b, token, 1), KEEL_OK);
        ck_assert_int_eq(bm25_builder_token(b, "pad", 3), KEEL_OK);
        ck_assert_int_eq(bm25_builder_end_row(b), KEEL_OK);
    }
    ck_assert_int_eq(bm25_builder_finish(b, &ix), KEEL_OK);
    ck_assert_int_eq(bm25_scratch_new(20, &s), KEEL_OK);
    query_words(&q, words, 2, BM25_ANY);
    ck_assert_int_eq(bm25_search(ix, &q, NULL, NULL, 3, s, hits, &n), KEEL_OK);
    ck_assert_uint_eq(n, 3);
    for (uint32_t i = 0; i < 3; i++) {
        ck_assert_uint_eq(hits[i].row, i);
        ck_assert(hits[i].score == hits[0].score);
    }
    bm25_scratch_free(s);
    bm25_index_free(ix);
}
END_TEST

Suite *suite_bm25_search(void)
{
    Suite *s = suite_create("bm25_search");
    TCase *tc = tcase_create("bm25_search");

    unit_leak_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bm25_search_small);
    tcase_add_test(tc, test_bm25_search_long_lists);
    tcase_add_test(tc, test_bm25_search_allocation_failures);
    tcase_add_test(tc, test_bm25_search_ties_across_words);
    suite_add_tcase(s, tc);
    return s;
}
