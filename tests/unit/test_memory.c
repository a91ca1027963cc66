/*
 * test_memory.c — long-term memory (seed 003): src/memory/ and the
 * store's memory functions.
 *
 * TCase "memory_embed": the hashed embedder is deterministic, unit length
 * (all zero without words), folds case and light inflections, puts the
 * seed's same-task pairs at 0.7 or more and unrelated tasks under 0.5;
 * memory_dot agrees with a double-precision dot product for any dim.
 * TCase "memory_index": put, search, remove, top-k order and ties (the
 * earlier added first, also after swap-removes and beyond the code scan's
 * rescore window), k = 0, the min threshold, replacement by id, growth
 * and table rehash with thousands of ids, the id cap, both searches equal
 * to a brute-force reference on random data, and allocation failures
 * that leave the index usable and leak nothing.
 * TCases "memory_store_mem" and "memory_store_sqlite" run the same
 * functions against "mem:" and a SQLite file (an unchecked
 * fixture makes and removes its folder): ADD, NOT, REPLACE, MERGE;
 * inactive or self targets and duplicate ids that change nothing; sync
 * from 0, incrementally, and after a callback failed; get; decisions
 * paging; argument checks naming the field; and allocation failures in
 * writes and reads (ENOMEM and nothing changed, or all of it).
 * TCases "memory_admit_mem" and "memory_admit_sqlite" run the seed's
 * scenarios and test plan through memory_admit and memory_search with
 * the rules (no judge), two memories over one store (two connections to
 * one SQLite file), input errors naming the field, ids kept whole, and
 * allocation failures (in following the store, in a MERGE).
 * Every TCase has the leak fixture. Fault sweeps note each kind of
 * problem and go on, then fail once listing them all.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/id.h"
#include "memory/memory.h"
#include "store/store.h"
#include "store/store_sqlite_int.h"
#include "unit.h"

#define T0 INT64_C(1770465600000)   /* 2026-02-07T12:00:00Z */

static struct store *memory_store_of_test;   /* the owner tests' store (admit_as) */

/* ---- shared helpers ------------------------------------------------------ */

/* splitmix64: the same numbers on every machine. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static double rng_uniform(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* A random vector of length 1. */
static void random_unit(uint64_t *state, float *v, int dim)
{
    double norm = 0;

    for (int i = 0; i < dim; i++) {
        v[i] = (float)rng_uniform(state);
        norm += (double)v[i] * v[i];
    }
    norm = sqrt(norm);
    if (norm == 0) {
        v[0] = 1;
        return;
    }
    for (int i = 0; i < dim; i++)
        v[i] = (float)(v[i] / norm);
}

static double naive_dot(const float *a, const float *b, int dim)
{
    double s = 0;

    for (int i = 0; i < dim; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

static double l2_norm(const float *v, int dim)
{
    return sqrt(naive_dot(v, v, dim));
}

static float similarity(const char *task1, const char *summary1, const char *task2,
                        const char *summary2)
{
    float a[MEMORY_DIM], b[MEMORY_DIM];

    memory_embed(task1, summary1, a);
    memory_embed(task2, summary2, b);
    return memory_dot(a, b, MEMORY_DIM);
}

/* ---- the embedder -------------------------------------------------------- */

START_TEST(test_embed_deterministic)
{
    static const char *const texts[][2] = {
        {"Generate optimized SQL queries for user data", "SELECT * FROM users"},
        {"Build REST API for user management", NULL},
        {"caf\xc3\xa9 cr\xc3\xa8me, na\xc3\xafve fa\xc3\xa7" "ade", "\xe6\x97\xa5\xe6\x9c\xac"},
        {"", "only a summary"},
        {"a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6 7 8 9", "x"},
    };

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        float a[MEMORY_DIM], b[MEMORY_DIM];
        char *task = strdup(texts[i][0]);   /* the same text at another address */

        ck_assert_ptr_nonnull(task);
        memset(a, 0x55, sizeof(a));
        memset(b, 0x7f, sizeof(b));         /* whatever was there must be overwritten */
        memory_embed(texts[i][0], texts[i][1], a);
        memory_embed(task, texts[i][1], b);
        free(task);
        ck_assert_msg(!memcmp(a, b, sizeof(a)), "embedding %zu differs between two calls", i);
        ck_assert_msg(fabs(l2_norm(a, MEMORY_DIM) - 1) <= 1e-5, "embedding %zu is not unit", i);
    }
    /* Different texts, different vectors. */
    ck_assert_float_lt(similarity("Build REST API", NULL, "Translate a guide", NULL), 0.99f);
}
END_TEST

/* Stored vectors were made by the embedder as first written
 * ("hashed-v1"): memory_embed gives the same floats, bit for bit. The
 * digest (64-bit FNV-1a over the floats' bytes) of 3,000 embeddings of
 * random texts, as that embedder made them. */
#define HASHED_V1_DIGEST 0x3f67e468b7885c7aull

START_TEST(test_embed_matches_reference)
{
    static const char *const words[] = {
        "Generate", "optimized", "SQL", "queries", "for", "user", "data", "SELECT", "*", "FROM",
        "users", "studies", "passes", "running", "caf\xc3\xa9", "\xe6\x97\xa5", "2024", "a", "ab",
        "x1y2", ",", ".", "-", "  ", "\n",
        "averyveryveryveryverylongwordthatisovertheword48bytecapofthembedder",
    };
    uint64_t rng = 424242, digest = 14695981039346656037ull;
    char task[512], summary[1024];

    for (int i = 0; i < 3000; i++) {
        float got[MEMORY_DIM];
        char *texts[2] = {task, summary};
        size_t caps[2] = {sizeof(task), sizeof(summary)};

        for (int t = 0; t < 2; t++) {
            size_t len = 0, n_words = rng_next(&rng) % (t ? 120 : 30);
            texts[t][0] = '\0';
            for (size_t w = 0; w < n_words; w++) {
                const char *word = words[rng_next(&rng) % (sizeof(words) / sizeof(words[0]))];
                int wrote = snprintf(texts[t] + len, caps[t] - len, "%s ", word);
                if (wrote < 0 || (size_t)wrote >= caps[t] - len)
                    break;
                len += (size_t)wrote;
            }
        }
        memory_embed(task, i % 7 ? summary : NULL, got);
        for (size_t k = 0; k < sizeof(got); k++)
            digest = (digest ^ ((const unsigned char *)got)[k]) * 1099511628211ull;
    }
    ck_assert_msg(digest == HASHED_V1_DIGEST, "digest %#llx", (unsigned long long)digest);
}
END_TEST

START_TEST(test_embed_unit_norm_and_zero)
{
    static const char *const worded[] = {
        "a", "Generate optimized SQL queries for user data", "x y z", "\xc3\x84\xc3\x96\xc3\x9c",
        "SELECT id, name, email FROM users WHERE active = true", "42", "one-two_three.four",
    };
    static const char *const wordless[] = {"", "   ", "!!! ... ---", "\t\r\n", "?,;:()[]{}<>=*"};
    static char long_text[MEMORY_TEXT_MAX + 1];
    float v[MEMORY_DIM];
    size_t len = 0;

    for (size_t i = 0; i < sizeof(worded) / sizeof(worded[0]); i++) {
        memory_embed(worded[i], NULL, v);
        ck_assert_msg(fabs(l2_norm(v, MEMORY_DIM) - 1) <= 1e-5, "task \"%s\": norm %.9f",
                      worded[i], l2_norm(v, MEMORY_DIM));
        memory_embed(NULL, worded[i], v);
        ck_assert_msg(fabs(l2_norm(v, MEMORY_DIM) - 1) <= 1e-5, "summary \"%s\": norm %.9f",
                      worded[i], l2_norm(v, MEMORY_DIM));
        memory_embed(worded[i], worded[i], v);
        ck_assert_msg(fabs(l2_norm(v, MEMORY_DIM) - 1) <= 1e-5, "both \"%s\": norm %.9f",
                      worded[i], l2_norm(v, MEMORY_DIM));
    }
    /* A text of the largest size, words of every length, also over WORD_MAX. */
    for (int w = 0; len + 200 < sizeof(long_text) - 1; w++) {
        int n = 1 + w % 90;
        for (int k = 0; k < n; k++)
            long_text[len++] = (char)('a' + (w * 7 + k) % 26);
        long_text[len++] = ' ';
    }
    long_text[len] = '\0';
    memory_embed(long_text, long_text, v);
    ck_assert_msg(fabs(l2_norm(v, MEMORY_DIM) - 1) <= 1e-5, "long text: norm %.9f",
                  l2_norm(v, MEMORY_DIM));

    for (size_t i = 0; i < sizeof(wordless) / sizeof(wordless[0]); i++) {
        memset(v, 0x7f, sizeof(v));
        memory_embed(wordless[i], wordless[i], v);
        for (int k = 0; k < MEMORY_DIM; k++)
            ck_assert_msg(v[k] == 0.0f, "\"%s\": component %d is %g, not 0", wordless[i], k,
                          (double)v[k]);
    }
    memset(v, 0x7f, sizeof(v));
    memory_embed(NULL, NULL, v);
    for (int k = 0; k < MEMORY_DIM; k++)
        ck_assert_msg(v[k] == 0.0f, "NULL texts: component %d is %g", k, (double)v[k]);
    /* A task without words and a summary with some: unit. */
    memory_embed("...", "users", v);
    ck_assert_msg(fabs(l2_norm(v, MEMORY_DIM) - 1) <= 1e-5, "norm %.9f", l2_norm(v, MEMORY_DIM));
}
END_TEST

START_TEST(test_embed_case_and_plurals)
{
    float a[MEMORY_DIM], b[MEMORY_DIM];
    float sim;

    memory_embed("QUERY Users", NULL, a);
    memory_embed("query users", NULL, b);
    ck_assert_msg(!memcmp(a, b, sizeof(a)), "case folding changes the vector");

    sim = similarity("Queries", NULL, "query", NULL);
    ck_assert_msg(sim >= 0.99f, "\"Queries\" vs \"query\": %f", (double)sim);
    sim = similarity("users", NULL, "user", NULL);
    ck_assert_msg(sim >= 0.99f, "\"users\" vs \"user\": %f", (double)sim);
    sim = similarity("generating", NULL, "generated", NULL);
    ck_assert_msg(sim >= 0.99f, "\"generating\" vs \"generated\": %f", (double)sim);
    sim = similarity("Generate optimized SQL Queries", NULL, "generate OPTIMIZED sql query", NULL);
    ck_assert_msg(sim >= 0.99f, "sentence with plural: %f", (double)sim);
}
END_TEST

/* embed.c's header: "queries" and "query", "generated" and "generate"
 * meet. The -ed rule makes "generated" "generat" while "generate" stays. */
START_TEST(test_embed_ed_meets_base_form)
{
    float sim = similarity("generated", NULL, "generate", NULL);

    ck_assert_msg(sim >= 0.9f, "\"generated\" vs \"generate\": %f", (double)sim);
    sim = similarity("Generated optimized SQL queries", NULL, "Generate optimized SQL queries",
                     NULL);
    ck_assert_msg(sim >= 0.9f, "\"Generated …\" vs \"Generate …\": %f", (double)sim);
}
END_TEST

START_TEST(test_embed_seed_pairs)
{
    static const char *const same[][4] = {
        {"Generate optimized SQL queries for user data", "SELECT * FROM users",
         "Generate optimized SQL queries for user data",
         "SELECT id, name, email FROM users WHERE active = true"},
        {"Build REST API for user management", "Flask",
         "Build REST API for user management", "FastAPI"},
        {"Build REST API for user management", "Flask app with SQLAlchemy models and Blueprints",
         "Build REST API for user management",
         "FastAPI service with Pydantic models and dependency injection"},
        {"Generate schema", "users table", "Generate schema", "accounts and sessions tables"},
    };
    static const char *const unrelated[][4] = {
        {"Translate the onboarding guide into French", "All sections translated",
         "Build REST API for user management", "Flask"},
        {"Summarize quarterly sales figures in a chart", "Bar chart per region",
         "Generate optimized SQL queries for user data", "SELECT * FROM users"},
        {"Create a completely new database schema for user authentication",
         "Tables users, sessions and password_resets",
         "Summarize quarterly sales figures in a chart", "Bar chart per region"},
        {"Build REST API for user management", "FastAPI",
         "Create a completely new database schema for user authentication",
         "Tables users, sessions and password_resets"},
        {"Generate optimized SQL queries for user data", "SELECT * FROM users",
         "Create a completely new database schema for user authentication",
         "Tables users, sessions and password_resets"},
    };
    float sim;

    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        sim = similarity(same[i][0], same[i][1], same[i][2], same[i][3]);
        ck_assert_msg(sim >= 0.7f, "same task %zu (%s): %f", i, same[i][0], (double)sim);
    }
    for (size_t i = 0; i < sizeof(unrelated) / sizeof(unrelated[0]); i++) {
        sim = similarity(unrelated[i][0], unrelated[i][1], unrelated[i][2], unrelated[i][3]);
        ck_assert_msg(sim < 0.5f, "unrelated %zu (%s / %s): %f", i, unrelated[i][0],
                      unrelated[i][2], (double)sim);
    }
    sim = similarity("Create a completely new database schema for user authentication", "x",
                     "Create a completely new database schema for user authentication", "x");
    ck_assert_msg(fabsf(sim - 1.0f) <= 1e-5f, "identical runs: %f", (double)sim);
}
END_TEST

START_TEST(test_embed_dot_matches_naive)
{
    static const int dims[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 100, 255, 256, 257, 1000, 1031};
    uint64_t rng = 20260207;
    float *a = malloc(1031 * sizeof(float)), *b = malloc(1031 * sizeof(float));

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++)
        for (int pair = 0; pair < 20; pair++) {
            int dim = dims[d];
            random_unit(&rng, a, dim);
            random_unit(&rng, b, dim);
            ck_assert_msg(fabs(memory_dot(a, b, dim) - naive_dot(a, b, dim)) <= 1e-5,
                          "dim %d pair %d: %.9f vs %.9f", dim, pair,
                          (double)memory_dot(a, b, dim), naive_dot(a, b, dim));
            ck_assert_msg(fabs(memory_dot(a, a, dim) - 1) <= 1e-5, "dim %d: self %.9f", dim,
                          (double)memory_dot(a, a, dim));
        }
    /* Every position counts, also in the tail after the last block of 16. */
    for (int dim = 1; dim <= 40; dim++)
        for (int k = 0; k < dim; k++) {
            memset(a, 0, (size_t)dim * sizeof(float));
            memset(b, 0, (size_t)dim * sizeof(float));
            a[k] = 0.5f;
            b[k] = 0.25f;
            ck_assert_msg(memory_dot(a, b, dim) == 0.125f, "dim %d position %d", dim, k);
        }
    ck_assert_float_eq(memory_dot(a, b, 0), 0.0f);
    free(a);
    free(b);
}
END_TEST

/* ---- the index ----------------------------------------------------------- */

static const float E0[4] = {1, 0, 0, 0}, E1[4] = {0, 1, 0, 0}, E2[4] = {0, 0, 1, 0},
                   E3[4] = {0, 0, 0, 1};

static struct memory_index *index_new(int dim)
{
    struct memory_index *ix = memory_index_new(dim);

    ck_assert_ptr_nonnull(ix);
    return ix;
}

static void put_ok(struct memory_index *ix, const char *id, const float *v)
{
    int rc = memory_index_put(ix, id, v);

    ck_assert_msg(rc == KEEL_OK, "put %s: %s", id, keel_strerror(rc));
}

/* The ids a search finds, "a,b,c". */
static const char *found_with(size_t (*search)(const struct memory_index *, const float *, size_t,
                                               float, struct memory_hit *),
                              const struct memory_index *ix, const float *q, size_t k, float min,
                              char *out, size_t n)
{
    struct memory_hit hits[MEMORY_SEARCH_MAX];
    size_t got = search(ix, q, k, min, hits), len = 0;

    ck_assert_uint_le(got, k < MEMORY_SEARCH_MAX ? k : MEMORY_SEARCH_MAX);
    out[0] = '\0';
    for (size_t i = 0; i < got && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i ? "," : "", hits[i].id);
    return out;
}

#define FOUND(ix, q, k, min) \
    found_with(memory_index_search, (ix), (q), (k), (min), ids, sizeof(ids))

/* The best hit of `q` is `id` (NULL: no hit at all). */
static void assert_top(const struct memory_index *ix, const float *q, const char *id)
{
    struct memory_hit hit;
    size_t n = memory_index_search(ix, q, 1, -2.0f, &hit);

    if (!id) {
        ck_assert_uint_eq(n, 0);
        return;
    }
    ck_assert_msg(n == 1 && !strcmp(hit.id, id), "best hit %s, expected %s", n ? hit.id : "(none)",
                  id);
}

START_TEST(test_index_put_search_remove)
{
    struct memory_index *ix = index_new(4);
    struct memory_hit hits[4];
    const float q[4] = {0.6f, 0.8f, 0, 0};
    char ids[512];

    ck_assert_uint_eq(memory_index_size(ix), 0);
    ck_assert_uint_eq(memory_index_search(ix, E0, 3, -1.0f, hits), 0);
    put_ok(ix, "a", E0);
    put_ok(ix, "b", E1);
    put_ok(ix, "c", E2);
    ck_assert_uint_eq(memory_index_size(ix), 3);

    ck_assert_uint_eq(memory_index_search(ix, E0, 1, -1.0f, hits), 1);
    ck_assert_str_eq(hits[0].id, "a");
    ck_assert_float_eq(hits[0].similarity, 1.0f);

    ck_assert_uint_eq(memory_index_search(ix, q, 3, 0.5f, hits), 2);
    ck_assert_str_eq(hits[0].id, "b");
    ck_assert_float_eq_tol(hits[0].similarity, 0.8f, 1e-6f);
    ck_assert_str_eq(hits[1].id, "a");
    ck_assert_float_eq_tol(hits[1].similarity, 0.6f, 1e-6f);
    ck_assert_str_eq(FOUND(ix, q, 10, -1.0f), "b,a,c");

    memory_index_remove(ix, "a");
    ck_assert_uint_eq(memory_index_size(ix), 2);
    ck_assert_str_eq(FOUND(ix, E0, 3, 0.5f), "");
    ck_assert_str_eq(FOUND(ix, q, 3, -1.0f), "b,c");
    memory_index_free(ix);
    memory_index_free(NULL);
}
END_TEST

START_TEST(test_index_top_k_order_and_ties)
{
    struct memory_index *ix = index_new(4);
    const float q[4] = {0.8f, 0.6f, 0, 0};
    const float fourth[4] = {0.6f, 0.8f, 0, 0};
    char ids[512];

    put_ok(ix, "first", E0);
    put_ok(ix, "second", E0);
    put_ok(ix, "third", E0);
    put_ok(ix, "fourth", fourth);
    ck_assert_str_eq(FOUND(ix, E0, 1, -1.0f), "first");
    ck_assert_str_eq(FOUND(ix, E0, 2, -1.0f), "first,second");
    ck_assert_str_eq(FOUND(ix, E0, 3, -1.0f), "first,second,third");
    ck_assert_str_eq(FOUND(ix, E0, 4, -1.0f), "first,second,third,fourth");
    ck_assert_str_eq(FOUND(ix, E0, 50, -1.0f), "first,second,third,fourth");
    /* fourth (0.96) beats the three (0.8), though added last. */
    ck_assert_str_eq(FOUND(ix, q, 2, -1.0f), "fourth,first");
    ck_assert_str_eq(FOUND(ix, q, 4, -1.0f), "fourth,first,second,third");
    memory_index_free(ix);
}
END_TEST

/* A swap-remove moves the last run into the freed slot; ties must still
 * come in the order the runs were added. */
START_TEST(test_index_ties_after_swap_remove)
{
    struct memory_index *ix = index_new(4);
    char ids[512];

    put_ok(ix, "a", E0);
    put_ok(ix, "b", E0);
    put_ok(ix, "c", E0);
    put_ok(ix, "d", E0);
    memory_index_remove(ix, "a");   /* d now sits in a's slot */
    ck_assert_str_eq(FOUND(ix, E0, 3, -1.0f), "b,c,d");
    ck_assert_str_eq(FOUND(ix, E0, 2, -1.0f), "b,c");
    ck_assert_str_eq(FOUND(ix, E0, 1, -1.0f), "b");
    put_ok(ix, "a", E0);             /* added again: now the newest */
    ck_assert_str_eq(FOUND(ix, E0, 4, -1.0f), "b,c,d,a");
    memory_index_remove(ix, "c");
    ck_assert_str_eq(FOUND(ix, E0, 3, -1.0f), "b,d,a");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_index_k_capped)
{
    struct memory_index *ix = index_new(4);
    struct memory_hit hits[MEMORY_SEARCH_MAX + 50];
    char id[16];
    size_t n;

    for (int i = 0; i < MEMORY_SEARCH_MAX + 50; i++) {
        snprintf(id, sizeof(id), "r%03d", i);
        put_ok(ix, id, E0);
    }
    n = memory_index_search(ix, E0, MEMORY_SEARCH_MAX + 50, -1.0f, hits);
    ck_assert_uint_eq(n, MEMORY_SEARCH_MAX);
    for (size_t i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "r%03zu", i);
        ck_assert_str_eq(hits[i].id, id);
    }
    memory_index_free(ix);
}
END_TEST

typedef size_t (*search_fn)(const struct memory_index *, const float *, size_t, float,
                            struct memory_hit *);

/* k = 0 asks for nothing: nothing is written, not even before hits. */
static void k_zero(search_fn search, const char *name)
{
    struct memory_index *ix = index_new(4);
    struct memory_hit buf[3];
    size_t n;

    put_ok(ix, "a", E0);
    memset(buf, 0, sizeof(buf));
    snprintf(buf[0].id, sizeof(buf[0].id), "guard-0");
    buf[0].similarity = INFINITY;
    snprintf(buf[1].id, sizeof(buf[1].id), "guard-1");
    buf[1].similarity = -INFINITY;
    snprintf(buf[2].id, sizeof(buf[2].id), "untouched");
    buf[2].similarity = 7;
    n = search(ix, E0, 0, -1.0f, buf + 2);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_eq(buf[2].id, "untouched");
    ck_assert_msg(!strcmp(buf[1].id, "guard-1") && buf[1].similarity == -INFINITY,
                  "%s with k = 0 wrote hit \"%s\" (%g) before the array", name, buf[1].id,
                  (double)buf[1].similarity);
    ck_assert_str_eq(buf[0].id, "guard-0");
    memory_index_free(ix);
}

START_TEST(test_index_k_zero)
{
    k_zero(memory_index_search, "memory_index_search");
}
END_TEST

START_TEST(test_index_exact_k_zero)
{
    k_zero(memory_index_search_exact, "memory_index_search_exact");
}
END_TEST

/* Ties among more runs than the code scan keeps for rescoring (k + 32):
 * still the earlier added first, also when swap-removes put the newest
 * runs in the first slots. */
START_TEST(test_index_ties_beyond_rescore_window)
{
    struct memory_index *ix = index_new(4);
    char id[16], ids[512];

    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof(id), "r%03d", i);
        put_ok(ix, id, E0);
    }
    ck_assert_str_eq(FOUND(ix, E0, 3, -1.0f), "r000,r001,r002");
    for (int i = 0; i < 50; i++) {   /* slots 0..49 now hold r099..r050 */
        snprintf(id, sizeof(id), "r%03d", i);
        memory_index_remove(ix, id);
    }
    ck_assert_str_eq(found_with(memory_index_search_exact, ix, E0, 3, -1.0f, ids, sizeof(ids)),
                     "r050,r051,r052");
    ck_assert_str_eq(FOUND(ix, E0, 3, -1.0f), "r050,r051,r052");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_index_min_threshold)
{
    struct memory_index *ix = index_new(2);
    const float q[2] = {1, 0};
    const float hi[2] = {1, 0}, mid[2] = {0.5f, 0.8660254f}, lo[2] = {0.25f, 0.9682458f},
                neg[2] = {-1, 0};
    char ids[512];

    put_ok(ix, "hi", hi);
    put_ok(ix, "mid", mid);
    put_ok(ix, "lo", lo);
    put_ok(ix, "neg", neg);
    ck_assert_str_eq(FOUND(ix, q, 10, 0.5f), "hi,mid");   /* at min counts */
    ck_assert_str_eq(FOUND(ix, q, 10, 0.50001f), "hi");
    ck_assert_str_eq(FOUND(ix, q, 10, 0.25f), "hi,mid,lo");
    ck_assert_str_eq(FOUND(ix, q, 10, 1.0f), "hi");
    ck_assert_str_eq(FOUND(ix, q, 10, 1.5f), "");
    ck_assert_str_eq(FOUND(ix, q, 10, -1.0f), "hi,mid,lo,neg");
    ck_assert_str_eq(FOUND(ix, q, 2, -1.0f), "hi,mid");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_index_replace_by_id)
{
    struct memory_index *ix = index_new(4);
    struct memory_hit hit;
    char ids[512];

    put_ok(ix, "a", E0);
    put_ok(ix, "b", E1);
    put_ok(ix, "a", E2);   /* a's new vector */
    ck_assert_uint_eq(memory_index_size(ix), 2);
    ck_assert_str_eq(FOUND(ix, E0, 5, 0.5f), "");
    ck_assert_uint_eq(memory_index_search(ix, E2, 5, 0.5f, &hit), 1);
    ck_assert_str_eq(hit.id, "a");
    ck_assert_float_eq(hit.similarity, 1.0f);
    ck_assert_str_eq(FOUND(ix, E1, 5, 0.5f), "b");
    put_ok(ix, "a", E2);   /* the same again: still one */
    ck_assert_uint_eq(memory_index_size(ix), 2);
    memory_index_remove(ix, "a");
    ck_assert_uint_eq(memory_index_size(ix), 1);
    ck_assert_str_eq(FOUND(ix, E2, 5, 0.5f), "");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_index_remove_middle)
{
    struct memory_index *ix = index_new(4);
    char ids[512];

    put_ok(ix, "a", E0);
    put_ok(ix, "b", E1);
    put_ok(ix, "c", E2);
    put_ok(ix, "d", E3);
    memory_index_remove(ix, "b");
    ck_assert_uint_eq(memory_index_size(ix), 3);
    ck_assert_str_eq(FOUND(ix, E0, 5, 0.5f), "a");
    ck_assert_str_eq(FOUND(ix, E1, 5, 0.5f), "");
    ck_assert_str_eq(FOUND(ix, E2, 5, 0.5f), "c");
    ck_assert_str_eq(FOUND(ix, E3, 5, 0.5f), "d");
    /* d, moved into b's slot, can be replaced and removed by its id. */
    put_ok(ix, "d", E1);
    ck_assert_uint_eq(memory_index_size(ix), 3);
    ck_assert_str_eq(FOUND(ix, E1, 5, 0.5f), "d");
    ck_assert_str_eq(FOUND(ix, E3, 5, 0.5f), "");
    memory_index_remove(ix, "d");
    ck_assert_uint_eq(memory_index_size(ix), 2);
    ck_assert_str_eq(FOUND(ix, E1, 5, 0.5f), "");
    /* the last one, then the first one */
    put_ok(ix, "b", E1);
    memory_index_remove(ix, "b");
    ck_assert_str_eq(FOUND(ix, E0, 5, 0.5f), "a");
    ck_assert_str_eq(FOUND(ix, E2, 5, 0.5f), "c");
    memory_index_remove(ix, "a");
    ck_assert_uint_eq(memory_index_size(ix), 1);
    ck_assert_str_eq(FOUND(ix, E2, 5, 0.5f), "c");
    ck_assert_str_eq(FOUND(ix, E0, 5, 0.5f), "");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_index_remove_unknown)
{
    struct memory_index *ix = index_new(4);
    char long_id[200], ids[512];

    memset(long_id, 'z', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    memory_index_remove(ix, "nobody");   /* an index that never held anything */
    memory_index_remove(ix, long_id);
    ck_assert_uint_eq(memory_index_size(ix), 0);
    put_ok(ix, "a", E0);
    memory_index_remove(ix, "nobody");
    memory_index_remove(ix, "");
    memory_index_remove(ix, long_id);
    memory_index_remove(ix, "A");
    ck_assert_uint_eq(memory_index_size(ix), 1);
    ck_assert_str_eq(FOUND(ix, E0, 5, 0.5f), "a");
    memory_index_remove(ix, "a");
    memory_index_remove(ix, "a");   /* twice: the second does nothing */
    ck_assert_uint_eq(memory_index_size(ix), 0);
    ck_assert_str_eq(FOUND(ix, E0, 5, -1.0f), "");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_index_long_id)
{
    struct memory_index *ix = index_new(4);
    struct memory_hit hit;
    char id63[64], id64[65], id200[201];

    memset(id63, 'x', 63);
    id63[63] = '\0';
    memset(id64, 'y', 64);
    id64[64] = '\0';
    memset(id200, 'w', 200);
    id200[200] = '\0';
    ck_assert_int_eq(memory_index_put(ix, id63, E0), KEEL_OK);
    ck_assert_int_eq(memory_index_put(ix, id64, E1), KEEL_EINVAL);
    ck_assert_int_eq(memory_index_put(ix, id200, E2), KEEL_EINVAL);
    ck_assert_uint_eq(memory_index_size(ix), 1);
    ck_assert_uint_eq(memory_index_search(ix, E0, 1, 0.5f, &hit), 1);
    ck_assert_str_eq(hit.id, id63);
    ck_assert_uint_eq(memory_index_search(ix, E1, 1, 0.5f, &hit), 0);
    memory_index_remove(ix, id63);
    ck_assert_uint_eq(memory_index_size(ix), 0);
    memory_index_free(ix);
}
END_TEST

#define GROW_N 5000
#define GROW_DIM 16

START_TEST(test_index_growth_and_rehash)
{
    struct memory_index *ix = index_new(GROW_DIM);
    float *v = malloc((size_t)GROW_N * GROW_DIM * sizeof(float));
    float *w = malloc((size_t)GROW_N * GROW_DIM * sizeof(float));
    uint64_t rng = 99;
    char id[32];

    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(w);
    for (int i = 0; i < GROW_N; i++) {
        random_unit(&rng, v + (size_t)i * GROW_DIM, GROW_DIM);
        random_unit(&rng, w + (size_t)i * GROW_DIM, GROW_DIM);
        snprintf(id, sizeof(id), "run-%05d", i);
        put_ok(ix, id, v + (size_t)i * GROW_DIM);
        ck_assert_uint_eq(memory_index_size(ix), (size_t)i + 1);
    }
    for (int i = 0; i < GROW_N; i += 7) {
        snprintf(id, sizeof(id), "run-%05d", i);
        assert_top(ix, v + (size_t)i * GROW_DIM, id);
    }
    /* Every id again with a new vector: replaced, not added. */
    for (int i = 0; i < GROW_N; i++) {
        snprintf(id, sizeof(id), "run-%05d", i);
        put_ok(ix, id, w + (size_t)i * GROW_DIM);
    }
    ck_assert_uint_eq(memory_index_size(ix), GROW_N);
    for (int i = 0; i < GROW_N; i += 7) {
        snprintf(id, sizeof(id), "run-%05d", i);
        assert_top(ix, w + (size_t)i * GROW_DIM, id);
    }
    /* The even ones go; the odd ones stay findable. */
    for (int i = 0; i < GROW_N; i += 2) {
        snprintf(id, sizeof(id), "run-%05d", i);
        memory_index_remove(ix, id);
    }
    ck_assert_uint_eq(memory_index_size(ix), GROW_N / 2);
    for (int i = 0; i < GROW_N; i += 5) {
        struct memory_hit hit;
        snprintf(id, sizeof(id), "run-%05d", i);
        ck_assert_uint_eq(memory_index_search(ix, w + (size_t)i * GROW_DIM, 1, -2.0f, &hit), 1);
        if (i % 2)
            ck_assert_str_eq(hit.id, id);
        else
            ck_assert_str_ne(hit.id, id);
    }
    /* They come back (over the deleted marks). */
    for (int i = 0; i < GROW_N; i += 2) {
        snprintf(id, sizeof(id), "run-%05d", i);
        put_ok(ix, id, v + (size_t)i * GROW_DIM);
    }
    ck_assert_uint_eq(memory_index_size(ix), GROW_N);
    for (int i = 0; i < GROW_N; i += 3) {
        snprintf(id, sizeof(id), "run-%05d", i);
        assert_top(ix, (i % 2 ? w : v) + (size_t)i * GROW_DIM, id);
    }
    for (int i = GROW_N - 1; i >= 0; i--) {
        snprintf(id, sizeof(id), "run-%05d", i);
        memory_index_remove(ix, id);
    }
    ck_assert_uint_eq(memory_index_size(ix), 0);
    assert_top(ix, v, NULL);
    memory_index_free(ix);
    free(v);
    free(w);
}
END_TEST


/* A search among one owner's runs gives what reading every one of that
 * owner's vectors gives: with fewer runs than the rescored candidates
 * (no code is read) and with more (the codes choose). */
START_TEST(test_index_owned_matches_brute_force)
{
    enum { DIM = 64, N = 150, OWNERS = 3 };
    float *v = malloc((size_t)N * DIM * sizeof(float)), q[DIM];
    struct memory_index *ix = index_new(DIM);
    uint64_t rng = 11;
    char id[32];

    ck_assert_ptr_nonnull(v);
    for (int n = 0; n < N; n++) {
        random_unit(&rng, v + (size_t)n * DIM, DIM);
        snprintf(id, sizeof(id), "run-%03d", n);
        ck_assert_int_eq(memory_index_put_owned(ix, id, (uint64_t)(n % OWNERS) + 1,
                                                v + (size_t)n * DIM), KEEL_OK);
        for (uint64_t owner = 1; owner <= OWNERS; owner++) {
            struct memory_hit hits[5];
            int best[5], n_best = 0;
            size_t got;

            /* near run n (or a random point), so similarities spread */
            random_unit(&rng, q, DIM);
            for (int d = 0; d < DIM; d++)
                q[d] = 0.3f * q[d] + v[(size_t)n * DIM + d];
            got = memory_index_search_owned(ix, q, 5, -2.0f, &owner, hits);
            /* the brute force: every run of the owner, best first, ties
             * to the earlier */
            for (int r = 0; r <= n; r++) {
                int at;
                if ((uint64_t)(r % OWNERS) + 1 != owner)
                    continue;
                at = n_best < 5 ? n_best++ : 5;
                while (at > 0 && memory_dot(q, v + (size_t)best[at - 1] * DIM, DIM) <
                                     memory_dot(q, v + (size_t)r * DIM, DIM)) {
                    if (at < 5)
                        best[at] = best[at - 1];
                    at--;
                }
                if (at < 5)
                    best[at] = r;
            }
            ck_assert_uint_eq(got, (size_t)n_best);
            for (int k = 0; k < n_best; k++) {
                snprintf(id, sizeof(id), "run-%03d", best[k]);
                ck_assert_msg(!strcmp(hits[k].id, id), "%d runs, owner %d, hit %d: %s, expected %s",
                              n + 1, (int)owner, k, hits[k].id, id);
                ck_assert(hits[k].similarity ==
                          memory_dot(q, v + (size_t)best[k] * DIM, DIM));
            }
        }
    }
    memory_index_free(ix);
    free(v);
}
END_TEST

/* Many puts and removes with few runs alive: the deleted marks never
 * make a probe loop forever or lose a live run. */
START_TEST(test_index_churn)
{
    struct memory_index *ix = index_new(4);
    char id[32], ids[512];

    put_ok(ix, "keep", E0);
    for (int i = 0; i < 20000; i++) {
        snprintf(id, sizeof(id), "churn-%d", i);
        put_ok(ix, id, E1);
        ck_assert_uint_eq(memory_index_size(ix), 2);
        memory_index_remove(ix, id);
        ck_assert_uint_eq(memory_index_size(ix), 1);
    }
    ck_assert_str_eq(FOUND(ix, E0, 5, 0.5f), "keep");
    ck_assert_str_eq(FOUND(ix, E1, 5, 0.5f), "");
    memory_index_free(ix);
}
END_TEST

#define BF_N 2000
#define BF_QUERIES 50
#define BF_K 3

struct ref_hit {
    int slot;
    float similarity;
};

START_TEST(test_index_matches_brute_force)
{
    struct memory_index *ix = index_new(MEMORY_DIM);
    float *v = malloc((size_t)BF_N * MEMORY_DIM * sizeof(float)), q[MEMORY_DIM];
    static int removed[BF_N];
    static const float mins[] = {-1.0f, 0.1f, 0.2f};
    uint64_t rng = 1234567;
    char id[32];

    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < BF_N; i++) {
        random_unit(&rng, v + (size_t)i * MEMORY_DIM, MEMORY_DIM);
        snprintf(id, sizeof(id), "v%04d", i);
        put_ok(ix, id, v + (size_t)i * MEMORY_DIM);
    }
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1)   /* every fifth goes: swap-removes reorder the slots */
            for (int i = 0; i < BF_N; i += 5) {
                snprintf(id, sizeof(id), "v%04d", i);
                memory_index_remove(ix, id);
                removed[i] = 1;
            }
        for (int qi = 0; qi < BF_QUERIES; qi++) {
            if (qi % 10 == 3)
                memcpy(q, v + (size_t)(qi * 37 % BF_N) * MEMORY_DIM, sizeof(q));
            else
                random_unit(&rng, q, MEMORY_DIM);
            for (size_t mi = 0; mi < 2 * sizeof(mins) / sizeof(mins[0]); mi++) {
                /* the exact search, then the one of the codes */
                int exact = mi < sizeof(mins) / sizeof(mins[0]);
                float min = mins[mi % (sizeof(mins) / sizeof(mins[0]))];
                struct memory_hit hits[BF_K];
                struct ref_hit ref[BF_K];
                size_t n = (exact ? memory_index_search_exact : memory_index_search)(
                           ix, q, BF_K, min, hits),
                       rn = 0;

                /* The reference: every live vector in the order added; a
                 * tie keeps the earlier one first. */
                for (int i = 0; i < BF_N; i++) {
                    float sim;
                    size_t at;
                    if (removed[i] ||
                        (sim = memory_dot(q, v + (size_t)i * MEMORY_DIM, MEMORY_DIM)) < min)
                        continue;
                    if (rn == BF_K && !(sim > ref[BF_K - 1].similarity))
                        continue;
                    at = rn < BF_K ? rn++ : BF_K - 1;
                    while (at > 0 && ref[at - 1].similarity < sim) {
                        ref[at] = ref[at - 1];
                        at--;
                    }
                    ref[at] = (struct ref_hit){i, sim};
                }
                ck_assert_msg(n == rn, "%s, phase %d query %d min %g: %zu hits, reference %zu",
                              exact ? "exact" : "codes", phase, qi, (double)min, n, rn);
                for (size_t j = 0; j < n; j++) {
                    snprintf(id, sizeof(id), "v%04d", ref[j].slot);
                    ck_assert_msg(!strcmp(hits[j].id, id),
                                  "%s, phase %d query %d min %g hit %zu: %s (%.7f), reference %s "
                                  "(%.7f)",
                                  exact ? "exact" : "codes", phase, qi, (double)min, j,
                                  hits[j].id, (double)hits[j].similarity, id,
                                  (double)ref[j].similarity);
                    ck_assert_float_eq(hits[j].similarity, ref[j].similarity);
                    ck_assert_msg(fabs(hits[j].similarity -
                                       naive_dot(q, v + (size_t)ref[j].slot * MEMORY_DIM,
                                                 MEMORY_DIM)) <= 1e-5,
                                  "similarity off the double-precision dot");
                }
            }
        }
    }
    memory_index_free(ix);
    free(v);
}
END_TEST

#define AF_N 200
#define AF_DIM 8

START_TEST(test_index_allocation_failures)
{
    float *v = malloc((size_t)AF_N * AF_DIM * sizeof(float));
    uint64_t rng = 7;
    long failed = 0, before = keel_alloc_live();
    struct memory_index *ix;
    char id[32], prev[32];

    ck_assert_ptr_nonnull(v);
    keel_alloc_fail_after(0, 1);
    ix = memory_index_new(AF_DIM);
    keel_alloc_fail_after(-1, 0);
    ck_assert_ptr_null(ix);
    ck_assert_int_eq(keel_alloc_live(), before);

    ix = index_new(AF_DIM);
    for (int i = 0; i < AF_N; i++) {
        const float *vi = v + (size_t)i * AF_DIM;
        random_unit(&rng, v + (size_t)i * AF_DIM, AF_DIM);
        snprintf(id, sizeof(id), "run-%03d", i);
        for (long n = 0;; n++) {
            int rc;
            keel_alloc_fail_after(n, 0);
            rc = memory_index_put(ix, id, vi);
            keel_alloc_fail_after(-1, 0);
            if (rc == KEEL_OK)
                break;
            ck_assert_msg(rc == KEEL_ENOMEM, "put %s with allocation %ld failing: %s", id, n,
                          keel_strerror(rc));
            failed++;
            ck_assert_uint_eq(memory_index_size(ix), (size_t)i);
            /* the failed one is not there, the one before still is */
            if (i) {
                struct memory_hit hit;
                size_t hits = memory_index_search(ix, vi, 1, -2.0f, &hit);
                ck_assert_msg(hits == 1 && strcmp(hit.id, id), "the failed put of %s is there",
                              id);
                assert_top(ix, v + (size_t)(i - 1) * AF_DIM, prev);
            }
            ck_assert_msg(n < 20, "put %s never succeeds", id);
        }
        ck_assert_uint_eq(memory_index_size(ix), (size_t)i + 1);
        snprintf(prev, sizeof(prev), "%s", id);
    }
    ck_assert_msg(failed >= 4, "only %ld puts met a failing allocation", failed);
    for (int i = 0; i < AF_N; i++) {
        snprintf(id, sizeof(id), "run-%03d", i);
        assert_top(ix, v + (size_t)i * AF_DIM, id);
    }

    /* With every allocation failing: searches and removes still work, a
     * put either works without allocating or fails cleanly. */
    keel_alloc_fail_after(0, 1);
    memory_index_remove(ix, "run-000");
    ck_assert_uint_eq(memory_index_size(ix), AF_N - 1);
    assert_top(ix, v + 5 * AF_DIM, "run-005");
    {
        int rc = memory_index_put(ix, "run-000", v);
        ck_assert(rc == KEEL_OK || rc == KEEL_ENOMEM);
        ck_assert_uint_eq(memory_index_size(ix), rc == KEEL_OK ? AF_N : AF_N - 1);
    }
    keel_alloc_fail_after(-1, 0);
    put_ok(ix, "run-000", v);
    assert_top(ix, v, "run-000");
    memory_index_free(ix);
    ck_assert_int_eq(keel_alloc_live(), before);
    free(v);
}
END_TEST

/* ---- the store's memory functions, on either backend ----------------------- */

static void backend_sqlite(void)
{
    unit_backend_sqlite("memory", 1);
}

/* Another connection to the store unit_store_fresh() opened last (SQLite), or
 * that store itself (in memory). Close with store_again_close(). */
static struct store *store_again(struct store *first)
{
    struct store *store = NULL;
    struct keel_error err;

    if (!unit_backend_is_sqlite())
        return first;
    keel_error_clear(&err);
    ck_assert_msg(store_open(unit_store_path(), &store, &err) == KEEL_OK, "reopen: %s",
                  err.message);
    return store;
}

static void store_again_close(struct store *first, struct store *again)
{
    if (again != first)
        store_close(again);
}

/* A run to apply: its task names it, its vector is {tag, 1, 2, 3}. */
struct run_in {
    struct store_memory_run run;
    char task[96];
    float vector[4];
};

static float tag_of(const char *id)
{
    unsigned sum = 0;

    for (; *id; id++)
        sum += (unsigned char)*id;
    return (float)(sum % 97 + 1);
}

static struct store_memory_run *run_make(struct run_in *in, const char *id, const char *outcome,
                                         const char *refs_json)
{
    memset(in, 0, sizeof(*in));
    snprintf(in->task, sizeof(in->task), "task of %s", id ? id : "(null)");
    in->vector[0] = id ? tag_of(id) : 0;
    in->vector[1] = 1;
    in->vector[2] = 2;
    in->vector[3] = 3;
    in->run.id = id;
    in->run.task = in->task;
    in->run.summary = "a summary";
    in->run.outcome = outcome;
    in->run.refs_json = refs_json ? refs_json : "[]";
    in->run.artifacts_json = "[\"schema.sql\"]";
    in->run.conversation_id = "conv_1";
    in->run.created_ms = T0;
    in->run.embedder = "test-v1";
    in->run.dim = 4;
    in->run.vector = in->vector;
    return &in->run;
}

#define REASON "a reason"
#define TS (T0 + 500)

static int apply_change(struct store *store, const char *decision,
                        const struct store_memory_run *run, const char *target,
                        const char *merged, int new_canonical, struct keel_error *err)
{
    struct store_memory_change c = {decision, run, target, REASON, target ? 0.875 : -1,
                                    "rules", TS, merged, new_canonical};

    keel_error_clear(err);
    return store_memory_apply(store, &c, err);
}

static void apply_ok(struct store *store, const char *decision, const struct store_memory_run *run,
                     const char *target, const char *merged, int new_canonical)
{
    struct keel_error err;
    int rc = apply_change(store, decision, run, target, merged, new_canonical, &err);

    ck_assert_msg(rc == KEEL_OK, "%s %s: %s %s: %s", decision, run->id, keel_strerror(rc),
                  err.field, err.message);
}

static void apply_fails(struct store *store, const char *decision,
                        const struct store_memory_run *run, const char *target,
                        const char *merged, int code, const char *field)
{
    struct keel_error err;
    int rc = apply_change(store, decision, run, target, merged, 1, &err);

    ck_assert_msg(rc == code, "%s %s: %s, expected %s (%s: %s)", decision,
                  run && run->id ? run->id : "(null)", keel_strerror(rc), keel_strerror(code),
                  err.field, err.message);
    ck_assert_int_eq(err.code, code);
    ck_assert_str_eq(err.field, field);
}

/* The stored run `id` as a new reference, NULL when there is none. */
static json_t *run_get(struct store *store, const char *id)
{
    const char *ids[1] = {id};
    struct keel_error err;
    json_t *list = NULL, *run;
    int rc;

    keel_error_clear(&err);
    rc = store_memory_get(store, ids, 1, &list, &err);
    ck_assert_msg(rc == KEEL_OK, "get %s: %s", id, err.message);
    ck_assert_uint_le(json_array_size(list), 1);
    run = json_incref(json_array_get(list, 0));
    json_decref(list);
    return run;
}

static json_t *decisions_all(struct store *store)
{
    struct keel_error err;
    json_t *list = NULL;

    keel_error_clear(&err);
    ck_assert_msg(store_memory_decisions(store, NULL, STORE_LIMIT_MAX, 0, &list, &err) == KEEL_OK,
                  "decisions: %s", err.message);
    return list;
}

/* The newest decision (a new reference), NULL when there is none. */
static json_t *decision_newest(struct store *store)
{
    struct keel_error err;
    json_t *list = NULL, *d;

    keel_error_clear(&err);
    ck_assert_msg(store_memory_decisions(store, NULL, 1, 0, &list, &err) == KEEL_OK, "decisions: %s",
                  err.message);
    d = json_incref(json_array_get(list, 0));
    json_decref(list);
    return d;
}

/* How many decisions there are: the newest one's seq (they count from 1;
 * decisions_all stops at STORE_LIMIT_MAX). */
static size_t decision_count(struct store *store)
{
    json_t *d = decision_newest(store);
    size_t n = d ? (size_t)json_integer_value(json_object_get(d, "seq")) : 0;

    json_decref(d);
    return n;
}

/* `got` equals the JSON text `expected`. */
static void assert_json(const json_t *got, const char *expected, const char *what)
{
    json_t *want = json_loads(expected, 0, NULL);
    char *text;
    int equal;

    ck_assert_msg(want != NULL, "bad expected JSON for %s", what);
    equal = json_equal((json_t *)got, want);
    json_decref(want);
    if (equal)
        return;
    text = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    ck_assert_msg(0, "%s: got %s, expected %s", what, text ? text : "(null)", expected);
}

/* The stored run `id` equals `expected`; NULL: there is no such run. */
static void assert_run(struct store *store, const char *id, const char *expected)
{
    json_t *run = run_get(store, id);

    if (!expected) {
        ck_assert_msg(run == NULL, "run %s exists", id);
        return;
    }
    ck_assert_msg(run != NULL, "run %s is missing", id);
    assert_json(run, expected, id);
    json_decref(run);
}

/* The JSON of a run made by run_make(). */
static const char *run_json(char *out, size_t n, const char *id, const char *outcome,
                            const char *refs, const char *status, const char *superseded_by,
                            int canonical, int uses)
{
    char by[96];

    if (superseded_by)
        snprintf(by, sizeof(by), "\"%s\"", superseded_by);
    else
        snprintf(by, sizeof(by), "null");
    snprintf(out, n,
             "{\"id\":\"%s\",\"task\":\"task of %s\",\"summary\":\"a summary\",\"outcome\":\"%s\","
             "\"references\":%s,\"artifacts\":[\"schema.sql\"],\"conversation_id\":\"conv_1\","
             "\"created_at\":%lld,\"status\":\"%s\",\"superseded_by\":%s,\"canonical\":%s,"
             "\"uses\":%d}",
             id, id, outcome, refs, (long long)T0, status, by, canonical ? "true" : "false", uses);
    return out;
}

#define RUN(id, outcome, refs, status, by, canonical, uses) \
    run_json(expect, sizeof(expect), id, outcome, refs, status, by, canonical, uses)

static const char *decision_json(char *out, size_t n, long seq, const char *run_id,
                                 const char *decision, const char *target)
{
    char t[96], sim[16];

    snprintf(t, sizeof(t), target ? "\"%s\"" : "null", target ? target : "");
    snprintf(sim, sizeof(sim), target ? "0.875" : "null");
    snprintf(out, n,
             "{\"seq\":%ld,\"run_id\":\"%s\",\"decision\":\"%s\",\"target_run_id\":%s,"
             "\"reason\":\"" REASON "\",\"similarity\":%s,\"judge\":\"rules\","
             "\"task\":\"task of %s\",\"ts\":%lld}",
             seq, run_id, decision, t, sim, run_id, (long long)TS);
    return out;
}

/* ---- sync recorder ----- */

struct recorder {
    char log[4096];
    size_t len;
    int calls;
    int fail_at;   /* the call that fails with KEEL_ENOMEM; 0: none */
};

static int record(void *ctx, const char *id, const char *owner, const char *embedder, int dim,
                  const float *v)
{
    struct recorder *r = ctx;

    if (++r->calls == r->fail_at)
        return KEEL_ENOMEM;
    if (r->len >= sizeof(r->log))
        return KEEL_OK;
    if (v)
        r->len += (size_t)snprintf(r->log + r->len, sizeof(r->log) - r->len,
                                   "put %s%s%s %s %d %g,%g,%g,%g;", id, owner ? "@" : "",
                                   owner ? owner : "", embedder, dim, (double)v[0], dim > 1 ? (double)v[1] : 0.0,
                                   dim > 2 ? (double)v[2] : 0.0, dim > 3 ? (double)v[3] : 0.0);
    else
        r->len += (size_t)snprintf(r->log + r->len, sizeof(r->log) - r->len, "remove %s;", id);
    return KEEL_OK;
}

/* What record() writes for the put of a run_make() run. */
static void expect_put(char *out, size_t n, const char *id)
{
    size_t len = strlen(out);

    snprintf(out + len, n - len, "put %s test-v1 4 %g,1,2,3;", id, (double)tag_of(id));
}

static void expect_remove(char *out, size_t n, const char *id)
{
    size_t len = strlen(out);

    snprintf(out + len, n - len, "remove %s;", id);
}

/* Asserts the callback saw exactly `ops`, in order: space-separated
 * "+ID" for the put of run_make() run ID (expect_put), "-ID" for its
 * removal (expect_remove); "" for nothing. */
static void assert_sync_log(const struct recorder *r, const char *ops)
{
    char expect[1024], id[96];
    const char *at = ops;
    int used;

    expect[0] = '\0';
    while (sscanf(at, " %95s%n", id, &used) == 1) {
        if (id[0] == '+')
            expect_put(expect, sizeof(expect), id + 1);
        else
            expect_remove(expect, sizeof(expect), id + 1);
        at += used;
    }
    ck_assert_str_eq(r->log, expect);
}

/* Syncs from *seq and returns what the callback saw (in `r`). */
static void sync_ok(struct store *store, int64_t *seq, struct recorder *r)
{
    struct keel_error err;
    int rc;

    memset(r, 0, sizeof(*r));
    keel_error_clear(&err);
    rc = store_memory_sync(store, seq, record, r, &err);
    ck_assert_msg(rc == KEEL_OK, "sync: %s %s: %s", keel_strerror(rc), err.field, err.message);
}

START_TEST(test_store_add)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b;
    char expect[1024];
    json_t *list;

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", "[\"A\"]"), NULL, NULL, 0);
    assert_run(store, "run_a", RUN("run_a", "success", "[\"A\"]", "active", NULL, 1, 1));
    list = decisions_all(store);
    ck_assert_uint_eq(json_array_size(list), 1);
    assert_json(json_array_get(list, 0),
                decision_json(expect, sizeof(expect), 1, "run_a", "ADD", NULL), "decision");
    json_decref(list);

    /* no conversation, partial, a similarity with an ADD */
    run_make(&b, "run_b", "partial", NULL);
    b.run.conversation_id = NULL;
    {
        struct store_memory_change c = {"ADD", &b.run, NULL, REASON, 0.5, "model", TS, NULL, 0};
        struct keel_error err;
        keel_error_clear(&err);
        ck_assert_int_eq(store_memory_apply(store, &c, &err), KEEL_OK);
    }
    {
        json_t *run = run_get(store, "run_b");
        ck_assert_ptr_nonnull(run);
        ck_assert(json_is_null(json_object_get(run, "conversation_id")));
        ck_assert_str_eq(json_string_value(json_object_get(run, "outcome")), "partial");
        assert_json(json_object_get(run, "references"), "[]", "references");
        json_decref(run);
    }
    list = decisions_all(store);
    ck_assert_uint_eq(json_array_size(list), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "judge")), "model");
    ck_assert(json_real_value(json_object_get(json_array_get(list, 0), "similarity")) == 0.5);
    json_decref(list);
    store_close(store);
}
END_TEST

START_TEST(test_store_not)
{
    struct store *store = unit_store_fresh();
    struct run_in a, x, y;
    struct recorder r;
    char expect[1024];
    int64_t seq = 0;
    json_t *list;

    /* a NOT as the very first decision */
    apply_ok(store, "NOT", run_make(&y, "run_y", "success", NULL), NULL, NULL, 0);
    assert_run(store, "run_y", NULL);
    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 1);
    ck_assert_int_eq(r.calls, 0);

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", "[\"A\"]"), NULL, NULL, 0);
    apply_ok(store, "NOT", run_make(&x, "run_x", "success", "[\"A\"]"), "run_a", NULL, 0);
    assert_run(store, "run_x", NULL);
    assert_run(store, "run_a", RUN("run_a", "success", "[\"A\"]", "active", NULL, 1, 1));
    list = decisions_all(store);
    ck_assert_uint_eq(json_array_size(list), 3);
    assert_json(json_array_get(list, 0),
                decision_json(expect, sizeof(expect), 3, "run_x", "NOT", "run_a"), "NOT");
    assert_json(json_array_get(list, 1),
                decision_json(expect, sizeof(expect), 2, "run_a", "ADD", NULL), "ADD");
    assert_json(json_array_get(list, 2),
                decision_json(expect, sizeof(expect), 1, "run_y", "NOT", NULL), "first NOT");
    json_decref(list);

    seq = 0;
    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 3);
    assert_sync_log(&r, "+run_a");
    store_close(store);
}
END_TEST

START_TEST(test_store_replace)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b;
    char expect[1024];
    json_t *list;

    apply_ok(store, "ADD", run_make(&a, "run_a", "failure", "[\"A\"]"), NULL, NULL, 0);
    apply_ok(store, "REPLACE", run_make(&b, "run_b", "success", "[\"B\"]"), "run_a", NULL, 0);
    assert_run(store, "run_a", RUN("run_a", "failure", "[\"A\"]", "superseded", "run_b", 0, 1));
    assert_run(store, "run_b", RUN("run_b", "success", "[\"B\"]", "active", NULL, 1, 1));
    list = decisions_all(store);
    ck_assert_uint_eq(json_array_size(list), 2);
    assert_json(json_array_get(list, 0),
                decision_json(expect, sizeof(expect), 2, "run_b", "REPLACE", "run_a"), "REPLACE");
    json_decref(list);
    store_close(store);
}
END_TEST

START_TEST(test_store_inactive_target_changes_nothing)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b, c;
    struct recorder r;
    char expect[1024];
    int64_t seq = 0;

    apply_ok(store, "ADD", run_make(&a, "run_a", "failure", NULL), NULL, NULL, 0);
    apply_ok(store, "REPLACE", run_make(&b, "run_b", "success", NULL), "run_a", NULL, 0);
    run_make(&c, "run_c", "success", "[\"C\"]");

    apply_fails(store, "REPLACE", &c.run, "run_a", NULL, KEEL_ENOTFOUND, "target_run_id");
    apply_fails(store, "REPLACE", &c.run, "run_nobody", NULL, KEEL_ENOTFOUND, "target_run_id");
    apply_fails(store, "MERGE", &c.run, "run_a", "[\"C\"]", KEEL_ENOTFOUND, "target_run_id");
    apply_fails(store, "MERGE", &c.run, "run_nobody", "[\"C\"]", KEEL_ENOTFOUND, "target_run_id");

    ck_assert_uint_eq(decision_count(store), 2);
    assert_run(store, "run_c", NULL);
    assert_run(store, "run_a", RUN("run_a", "failure", "[]", "superseded", "run_b", 0, 1));
    assert_run(store, "run_b", RUN("run_b", "success", "[]", "active", NULL, 1, 1));

    /* the id was not used up */
    apply_ok(store, "ADD", &c.run, NULL, NULL, 0);
    ck_assert_uint_eq(decision_count(store), 3);
    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 3);
    assert_sync_log(&r, "+run_a +run_b -run_a +run_c");
    store_close(store);
}
END_TEST

/* A run naming itself as the target: it was no active run before this
 * decision, so there is nothing to replace or merge with. Refused as
 * KEEL_ENOTFOUND (no such active run) or KEEL_EINVAL (the run itself),
 * naming target_run_id, and nothing stored. */
START_TEST(test_store_self_target)
{
    static const char *const kinds[] = {"REPLACE", "MERGE"};
    struct store *store = unit_store_fresh();
    struct run_in c;

    run_make(&c, "run_c", "success", "[\"C\"]");
    for (size_t k = 0; k < 2; k++) {
        struct keel_error err;
        int rc = apply_change(store, kinds[k], &c.run, "run_c", "[\"C\"]", 1, &err);

        ck_assert_msg(rc == KEEL_ENOTFOUND || rc == KEEL_EINVAL, "%s of run_c onto itself: %s",
                      kinds[k], keel_strerror(rc));
        ck_assert_str_eq(err.field, "target_run_id");
    }
    ck_assert_uint_eq(decision_count(store), 0);
    assert_run(store, "run_c", NULL);
    store_close(store);
}
END_TEST

START_TEST(test_store_merge)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b, c;
    struct recorder r;
    char expect[1024];
    int64_t seq = 0;
    json_t *list;

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", "[\"A\"]"), NULL, NULL, 0);
    /* the new run canonical */
    apply_ok(store, "MERGE", run_make(&b, "run_b", "success", "[\"B\"]"), "run_a", "[\"A\",\"B\"]",
             1);
    assert_run(store, "run_b", RUN("run_b", "success", "[\"A\",\"B\"]", "active", NULL, 1, 2));
    assert_run(store, "run_a", RUN("run_a", "success", "[\"A\"]", "active", NULL, 0, 1));
    /* the target canonical */
    apply_ok(store, "MERGE", run_make(&c, "run_c", "failure", "[\"C\"]"), "run_b",
             "[\"A\",\"B\",\"C\"]", 0);
    assert_run(store, "run_b",
               RUN("run_b", "success", "[\"A\",\"B\",\"C\"]", "active", NULL, 1, 3));
    assert_run(store, "run_c", RUN("run_c", "failure", "[\"C\"]", "active", NULL, 0, 1));
    assert_run(store, "run_a", RUN("run_a", "success", "[\"A\"]", "active", NULL, 0, 1));

    list = decisions_all(store);
    ck_assert_uint_eq(json_array_size(list), 3);
    assert_json(json_array_get(list, 0),
                decision_json(expect, sizeof(expect), 3, "run_c", "MERGE", "run_b"), "MERGE c");
    assert_json(json_array_get(list, 1),
                decision_json(expect, sizeof(expect), 2, "run_b", "MERGE", "run_a"), "MERGE b");
    json_decref(list);

    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 3);
    assert_sync_log(&r, "+run_a +run_b +run_c");
    store_close(store);
}
END_TEST

START_TEST(test_store_duplicate_id)
{
    struct store *store = unit_store_fresh();
    struct run_in a, again, b;
    char expect[1024];

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", "[\"A\"]"), NULL, NULL, 0);
    run_make(&again, "run_a", "failure", "[\"X\"]");
    snprintf(again.task, sizeof(again.task), "another task");
    apply_fails(store, "ADD", &again.run, NULL, NULL, KEEL_EFAIL, "id");
    ck_assert_uint_eq(decision_count(store), 1);
    assert_run(store, "run_a", RUN("run_a", "success", "[\"A\"]", "active", NULL, 1, 1));

    apply_ok(store, "ADD", run_make(&b, "run_b", "failure", "[\"B\"]"), NULL, NULL, 0);
    apply_fails(store, "REPLACE", &again.run, "run_b", NULL, KEEL_EFAIL, "id");
    apply_fails(store, "MERGE", &again.run, "run_b", "[\"B\",\"X\"]", KEEL_EFAIL, "id");
    ck_assert_uint_eq(decision_count(store), 2);
    assert_run(store, "run_b", RUN("run_b", "failure", "[\"B\"]", "active", NULL, 1, 1));
    assert_run(store, "run_a", RUN("run_a", "success", "[\"A\"]", "active", NULL, 1, 1));
    store_close(store);
}
END_TEST

START_TEST(test_store_sync)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b, x, c, d, e, y;
    struct recorder r;
    int64_t seq = 0;

    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 0);
    ck_assert_int_eq(r.calls, 0);

    apply_ok(store, "ADD", run_make(&a, "run_a", "failure", NULL), NULL, NULL, 0);
    apply_ok(store, "ADD", run_make(&b, "run_b", "success", "[\"B\"]"), NULL, NULL, 0);
    apply_ok(store, "NOT", run_make(&x, "run_x", "success", NULL), "run_b", NULL, 0);
    apply_ok(store, "REPLACE", run_make(&c, "run_c", "success", NULL), "run_a", NULL, 0);
    apply_ok(store, "MERGE", run_make(&d, "run_d", "success", "[\"D\"]"), "run_b",
             "[\"B\",\"D\"]", 1);

    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 5);
    assert_sync_log(&r, "+run_a +run_b +run_c -run_a +run_d");

    sync_ok(store, &seq, &r);   /* nothing new */
    ck_assert_int_eq(seq, 5);
    ck_assert_int_eq(r.calls, 0);

    apply_ok(store, "ADD", run_make(&e, "run_e", "partial", NULL), NULL, NULL, 0);
    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 6);
    assert_sync_log(&r, "+run_e");

    apply_ok(store, "NOT", run_make(&y, "run_y", "success", NULL), "run_e", NULL, 0);
    sync_ok(store, &seq, &r);   /* a NOT moves seq and calls nothing */
    ck_assert_int_eq(seq, 7);
    ck_assert_int_eq(r.calls, 0);

    seq = 3;                    /* from the middle */
    sync_ok(store, &seq, &r);
    ck_assert_int_eq(seq, 7);
    assert_sync_log(&r, "+run_c -run_a +run_d +run_e");
    store_close(store);
}
END_TEST

/* A callback that fails stops the sync with its code; what it failed on
 * has not been followed, so the next sync from the returned seq must
 * replay it (store.h: "how an index is ... kept in step"). */
START_TEST(test_store_sync_failed_callback_replays)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b;
    struct recorder r;
    struct keel_error err;
    char expect[1024];

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", NULL), NULL, NULL, 0);
    apply_ok(store, "ADD", run_make(&b, "run_b", "success", NULL), NULL, NULL, 0);
    for (int fail_at = 1; fail_at <= 2; fail_at++) {
        int64_t seq = 0;
        int rc;

        memset(&r, 0, sizeof(r));
        r.fail_at = fail_at;
        keel_error_clear(&err);
        rc = store_memory_sync(store, &seq, record, &r, &err);
        ck_assert_int_eq(rc, KEEL_ENOMEM);
        ck_assert_int_eq(err.code, KEEL_ENOMEM);
        sync_ok(store, &seq, &r);
        expect[0] = '\0';
        if (fail_at == 1)
            expect_put(expect, sizeof(expect), "run_a");
        expect_put(expect, sizeof(expect), "run_b");
        ck_assert_msg(!strcmp(r.log, expect),
                      "callback %d failed; the next sync saw \"%s\", expected \"%s\"", fail_at,
                      r.log, expect);
        ck_assert_int_eq(seq, 2);
    }
    store_close(store);
}
END_TEST

START_TEST(test_store_get_order)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b, c, d;
    const char *ids[] = {"run_c", "run_nobody", "run_a", "run_d", "run_b"};
    struct keel_error err;
    json_t *list = NULL;

    apply_ok(store, "ADD", run_make(&a, "run_a", "failure", NULL), NULL, NULL, 0);
    apply_ok(store, "ADD", run_make(&b, "run_b", "success", NULL), NULL, NULL, 0);
    apply_ok(store, "ADD", run_make(&c, "run_c", "success", NULL), NULL, NULL, 0);
    apply_ok(store, "REPLACE", run_make(&d, "run_d", "success", NULL), "run_a", NULL, 0);
    keel_error_clear(&err);
    ck_assert_int_eq(store_memory_get(store, ids, 5, &list, &err), KEEL_OK);
    ck_assert_uint_eq(json_array_size(list), 4);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "id")), "run_c");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 1), "id")), "run_a");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 2), "id")), "run_d");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 3), "id")), "run_b");
    /* superseded runs are still there to read */
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 1), "status")),
                     "superseded");
    json_decref(list);

    list = NULL;
    ck_assert_int_eq(store_memory_get(store, ids, 0, &list, &err), KEEL_OK);
    assert_json(list, "[]", "no ids");
    json_decref(list);
    list = NULL;
    ck_assert_int_eq(store_memory_get(store, ids + 1, 1, &list, &err), KEEL_OK);
    assert_json(list, "[]", "unknown id");
    json_decref(list);
    store_close(store);

    /* a store that never had a decision */
    store = unit_store_fresh();
    list = NULL;
    ck_assert_int_eq(store_memory_get(store, ids, 5, &list, &err), KEEL_OK);
    assert_json(list, "[]", "empty store");
    json_decref(list);
    list = NULL;
    ck_assert_int_eq(store_memory_decisions(store, NULL, 10, 0, &list, &err), KEEL_OK);
    assert_json(list, "[]", "no decisions");
    json_decref(list);
    store_close(store);
}
END_TEST

/* A run read again is the run as it is now: whatever changed it, this
 * connection or another one (SQLite keeps the last runs read, and
 * reuses one only for the same row). */
START_TEST(test_store_get_follows_changes)
{
    struct store *store = unit_store_fresh(), *again = store_again(store);
    struct run_in a, b, c, x;
    const char *ids[40];
    char names[40][16];
    json_t *run;

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", "[\"A\"]"), NULL, NULL, 0);
    run = run_get(store, "run_a");
    assert_json(json_object_get(run, "references"), "[\"A\"]", "refs");
    json_decref(run);
    run = run_get(store, "run_a");   /* the same, read again */
    assert_json(json_object_get(run, "references"), "[\"A\"]", "refs again");
    ck_assert_int_eq(json_integer_value(json_object_get(run, "uses")), 1);
    json_decref(run);

    /* another connection merges into it: references, uses, canonical */
    apply_ok(again, "MERGE", run_make(&b, "run_b", "failure", "[\"B\"]"), "run_a",
             "[\"A\",\"B\"]", 0);
    run = run_get(store, "run_a");
    assert_json(json_object_get(run, "references"), "[\"A\",\"B\"]", "refs after the merge");
    ck_assert_int_eq(json_integer_value(json_object_get(run, "uses")), 2);
    ck_assert(json_is_true(json_object_get(run, "canonical")));
    json_decref(run);
    run = run_get(store, "run_b");
    ck_assert(json_is_false(json_object_get(run, "canonical")));
    json_decref(run);

    /* and replaces it: status, superseded_by */
    apply_ok(again, "REPLACE", run_make(&c, "run_c", "success", NULL), "run_a", NULL, 0);
    run = run_get(store, "run_a");
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "superseded");
    ck_assert_str_eq(json_string_value(json_object_get(run, "superseded_by")), "run_c");
    json_decref(run);

    /* more runs than are kept, then the first again */
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "run_x%02d", i);
        apply_ok(store, "ADD", run_make(&x, names[i], "partial", NULL), NULL, NULL, 0);
        ids[i] = names[i];
    }
    for (int pass = 0; pass < 2; pass++) {
        json_t *list = NULL;
        struct keel_error err;
        keel_error_clear(&err);
        ck_assert_int_eq(store_memory_get(store, ids, 40, &list, &err), KEEL_OK);
        ck_assert_uint_eq(json_array_size(list), 40);
        for (int i = 0; i < 40; i++)
            ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, (size_t)i),
                                                               "id")), names[i]);
        json_decref(list);
    }
    run = run_get(store, "run_a");
    ck_assert_str_eq(json_string_value(json_object_get(run, "superseded_by")), "run_c");
    assert_json(json_object_get(run, "references"), "[\"A\",\"B\"]", "refs at last");
    json_decref(run);

    /* a row too big to keep reads the same all the same */
    {
        static char big[16001];   /* over RUN_KEPT_MAX with the rest of its row */
        memset(big, 'w', sizeof(big) - 1);
        run_make(&x, "run_big", "success", NULL);
        x.run.summary = big;
        apply_ok(store, "ADD", &x.run, NULL, NULL, 0);
        for (int pass = 0; pass < 2; pass++) {
            run = run_get(store, "run_big");
            ck_assert_uint_eq(strlen(json_string_value(json_object_get(run, "summary"))),
                              sizeof(big) - 1);
            json_decref(run);
        }
        apply_ok(again, "MERGE", run_make(&b, "run_b2", "failure", "[\"B2\"]"), "run_big",
                 "[\"B2\"]", 0);
        run = run_get(store, "run_big");
        assert_json(json_object_get(run, "references"), "[\"B2\"]", "refs of the big run");
        json_decref(run);
    }
    store_again_close(store, again);
    store_close(store);
}
END_TEST

/* The seqs of a page of decisions, "5,4". */
static const char *page(struct store *store, int limit, int offset, char *out, size_t n)
{
    struct keel_error err;
    json_t *list = NULL, *d;
    size_t i, len = 0;

    keel_error_clear(&err);
    ck_assert_msg(store_memory_decisions(store, NULL, limit, offset, &list, &err) == KEEL_OK,
                  "decisions %d %d: %s", limit, offset, err.message);
    out[0] = '\0';
    json_array_foreach(list, i, d)
        len += (size_t)snprintf(out + len, n - len, "%s%lld", i ? "," : "",
                                (long long)json_integer_value(json_object_get(d, "seq")));
    json_decref(list);
    return out;
}

START_TEST(test_store_decisions_paging)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b, x, c, d;
    struct keel_error err;
    json_t *list = NULL;
    char seqs[256];

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", NULL), NULL, NULL, 0);
    apply_ok(store, "ADD", run_make(&b, "run_b", "success", NULL), NULL, NULL, 0);
    apply_ok(store, "NOT", run_make(&x, "run_x", "success", NULL), "run_a", NULL, 0);
    apply_ok(store, "ADD", run_make(&c, "run_c", "failure", NULL), NULL, NULL, 0);
    apply_ok(store, "REPLACE", run_make(&d, "run_d", "success", NULL), "run_c", NULL, 0);

    ck_assert_str_eq(page(store, STORE_LIMIT_MAX, 0, seqs, sizeof(seqs)), "5,4,3,2,1");
    ck_assert_str_eq(page(store, 2, 0, seqs, sizeof(seqs)), "5,4");
    ck_assert_str_eq(page(store, 2, 2, seqs, sizeof(seqs)), "3,2");
    ck_assert_str_eq(page(store, 2, 4, seqs, sizeof(seqs)), "1");
    ck_assert_str_eq(page(store, 1, 5, seqs, sizeof(seqs)), "");
    ck_assert_str_eq(page(store, 1, 1000, seqs, sizeof(seqs)), "");
    ck_assert_str_eq(page(store, 1, 2, seqs, sizeof(seqs)), "3");

    keel_error_clear(&err);
    ck_assert_int_eq(store_memory_decisions(store, NULL, 0, 0, &list, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "limit");
    keel_error_clear(&err);
    ck_assert_int_eq(store_memory_decisions(store, NULL, -3, 0, &list, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "limit");
    keel_error_clear(&err);
    ck_assert_int_eq(store_memory_decisions(store, NULL, STORE_LIMIT_MAX + 1, 0, &list, &err),
                     KEEL_EINVAL);
    ck_assert_str_eq(err.field, "limit");
    keel_error_clear(&err);
    ck_assert_int_eq(store_memory_decisions(store, NULL, 5, -1, &list, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "offset");
    ck_assert_ptr_null(list);
    store_close(store);
}
END_TEST

START_TEST(test_store_check_errors)
{
    struct store *store = unit_store_fresh();
    struct run_in in;
    char id64[65];
    struct store_memory_run *run;

    memset(id64, 'i', 64);
    id64[64] = '\0';
    run = run_make(&in, "run_a", "success", NULL);
    apply_fails(store, "DELETE", run, NULL, NULL, KEEL_EINVAL, "decision");
    apply_fails(store, "add", run, NULL, NULL, KEEL_EINVAL, "decision");
    apply_fails(store, NULL, run, NULL, NULL, KEEL_EINVAL, "decision");
    apply_fails(store, "ADD", NULL, NULL, NULL, KEEL_EINVAL, "id");

    run->outcome = "maybe";
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "outcome");
    run->outcome = NULL;
    apply_fails(store, "NOT", run, NULL, NULL, KEEL_EINVAL, "outcome");

    run = run_make(&in, "run_a", "success", NULL);
    run->dim = 0;
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "embedding");
    run->dim = 4097;
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "embedding");
    run->dim = 4;
    run->vector = NULL;
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "embedding");
    run = run_make(&in, "run_a", "success", NULL);
    run->embedder = NULL;
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "embedding");

    run = run_make(&in, "run_a", "success", NULL);
    apply_fails(store, "REPLACE", run, NULL, NULL, KEEL_EINVAL, "target_run_id");
    apply_fails(store, "REPLACE", run, "", NULL, KEEL_EINVAL, "target_run_id");
    apply_fails(store, "MERGE", run, NULL, "[]", KEEL_EINVAL, "target_run_id");
    apply_fails(store, "MERGE", run, "", "[]", KEEL_EINVAL, "target_run_id");
    apply_fails(store, "MERGE", run, "run_b", NULL, KEEL_EINVAL, "references");

    run->id = "";
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "id");
    run->id = NULL;
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "id");
    run->id = id64;
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "id");

    run = run_make(&in, "run_a", "success", NULL);
    run->task = "";
    apply_fails(store, "ADD", run, NULL, NULL, KEEL_EINVAL, "task");
    {
        struct store_memory_change c = {"ADD", run_make(&in, "run_a", "success", NULL), NULL,
                                        NULL, -1, "rules", TS, NULL, 0};
        struct keel_error err;
        keel_error_clear(&err);
        ck_assert_int_eq(store_memory_apply(store, &c, &err), KEEL_EINVAL);
        ck_assert_str_eq(err.field, "reason");
        c.reason = REASON;
        c.judge = NULL;
        keel_error_clear(&err);
        ck_assert_int_eq(store_memory_apply(store, &c, &err), KEEL_EINVAL);
        ck_assert_str_eq(err.field, "reason");
    }

    /* none of it stored anything */
    ck_assert_uint_eq(decision_count(store), 0);
    assert_run(store, "run_a", NULL);
    store_close(store);
}
END_TEST

/* Problems a fault sweep found. The sweep goes on after one, so that the
 * report lists every kind of problem (its first instance and how many
 * steps showed it); it asserts at its end that there were none. */
#define ISSUE_KINDS 8

struct issues {
    int kinds, total;
    char kind[ISSUE_KINDS][48];
    int count[ISSUE_KINDS];
    char first[ISSUE_KINDS][360];
};

static void note(struct issues *is, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(struct issues *is, const char *kind, const char *fmt, ...)
{
    va_list ap;
    int k;

    is->total++;
    for (k = 0; k < is->kinds && strcmp(is->kind[k], kind); k++)
        ;
    if (k == ISSUE_KINDS)
        return;
    if (k == is->kinds) {
        is->kinds++;
        snprintf(is->kind[k], sizeof(is->kind[k]), "%s", kind);
        va_start(ap, fmt);
        vsnprintf(is->first[k], sizeof(is->first[k]), fmt, ap);
        va_end(ap);
    }
    is->count[k]++;
}

static void assert_no_issues(const struct issues *is)
{
    char text[ISSUE_KINDS * 420] = "";
    size_t len = 0;

    for (int k = 0; k < is->kinds && len < sizeof(text); k++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "\n  [%s] %d step(s), first: %s",
                                is->kind[k], is->count[k], is->first[k]);
    ck_assert_msg(is->total == 0, "%d problem(s):%s", is->total, text);
}

/* Whether the stored run `id` equals `expected` (NULL: no such run);
 * when not, a note says what was found. */
static int run_is(struct store *store, const char *id, const char *expected, struct issues *is,
                  const char *when)
{
    json_t *run = run_get(store, id), *want = expected ? json_loads(expected, 0, NULL) : NULL;
    int same = expected ? run && json_equal(run, want) : !run;

    if (!same) {
        char *text = run ? json_dumps(run, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        note(is, id, "%s: run %s is %s, expected %s", when, id, text ? text : "missing",
             expected ? expected : "none");
        keel_free(text);
    }
    json_decref(run);
    json_decref(want);
    return same;
}

static int ignore_change(void *ctx, const char *id, const char *owner, const char *embedder,
                         int dim, const float *v)
{
    (void)ctx, (void)id, (void)owner, (void)embedder, (void)dim, (void)v;
    return KEEL_OK;
}

/* A call that lets a SQLite connection marked by a failure be replaced
 * now: before get or decisions use it (they read their statement before
 * they replace the connection: test_store_reads_after_failed_write), and
 * before a fault sweep's next step, whose allocations would otherwise
 * start with the reconnection's. */
static void settle(struct store *store)
{
    struct keel_error err;
    int64_t seq = INT64_MAX;

    keel_error_clear(&err);
    (void)store_memory_sync(store, &seq, ignore_change, NULL, &err);
}

/* Applies `kind` of run_b onto run_a with allocation `n` (and with
 * `sticky` every one after it) failing: KEEL_ENOMEM and nothing changed,
 * or all of it. Returns nonzero when the apply succeeded; *hit says
 * whether an allocation failed on the way (a success may have swallowed
 * it). */
static int fault_apply(struct store *store, const char *kind, long n, int sticky,
                       struct issues *is, int *hit)
{
    struct store *verify = store;
    long failures = keel_alloc_failures();
    struct run_in b;
    struct keel_error err;
    struct recorder r;
    char expect[1024], log_expect[1024], when[96];
    int64_t seq = 0;
    size_t count;
    int rc;

    snprintf(when, sizeof(when), "%s with allocation %ld failing (sticky %d)", kind, n, sticky);
    run_make(&b, "run_b", "success", "[\"B\"]");
    settle(store);
    keel_error_clear(&err);
    keel_alloc_fail_after(n, sticky);
    rc = apply_change(store, kind, &b.run, strcmp(kind, "ADD") ? "run_a" : NULL,
                      !strcmp(kind, "MERGE") ? "[\"A\",\"B\"]" : NULL, 1, &err);
    keel_alloc_fail_after(-1, 0);
    *hit = keel_alloc_failures() != failures;
    ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "%s: %s %s: %s", when, keel_strerror(rc),
                  err.field, err.message);
    settle(verify);
    count = decision_count(verify);
    if (rc != KEEL_OK) {
        ck_assert_int_eq(err.code, KEEL_ENOMEM);
        if (count != 1)
            note(is, "decisions", "%s: ENOMEM, but %zu decisions stored", when, count);
        run_is(verify, "run_b", NULL, is, when);
        run_is(verify, "run_a", RUN("run_a", "failure", "[\"A\"]", "active", NULL, 1, 1), is,
               when);
        return 0;
    }
    if (count != 2)
        note(is, "decisions", "%s: OK, but %zu decisions stored", when, count);
    log_expect[0] = '\0';
    expect_put(log_expect, sizeof(log_expect), "run_a");
    expect_put(log_expect, sizeof(log_expect), "run_b");
    if (!strcmp(kind, "REPLACE")) {
        expect_remove(log_expect, sizeof(log_expect), "run_a");
        run_is(verify, "run_a", RUN("run_a", "failure", "[\"A\"]", "superseded", "run_b", 0, 1),
               is, when);
        run_is(verify, "run_b", RUN("run_b", "success", "[\"B\"]", "active", NULL, 1, 1), is,
               when);
    } else if (!strcmp(kind, "MERGE")) {
        run_is(verify, "run_a", RUN("run_a", "failure", "[\"A\"]", "active", NULL, 0, 1), is,
               when);
        run_is(verify, "run_b", RUN("run_b", "success", "[\"A\",\"B\"]", "active", NULL, 1, 2),
               is, when);
    } else {
        run_is(verify, "run_a", RUN("run_a", "failure", "[\"A\"]", "active", NULL, 1, 1), is,
               when);
        run_is(verify, "run_b", RUN("run_b", "success", "[\"B\"]", "active", NULL, 1, 1), is,
               when);
    }
    sync_ok(verify, &seq, &r);
    if (strcmp(r.log, log_expect))
        note(is, "sync", "%s: sync saw %s, expected %s", when, r.log, log_expect);
    return 1;
}

START_TEST(test_store_apply_allocation_failures)
{
    static const char *const kinds[] = {"ADD", "REPLACE", "MERGE"};
    struct issues is = {.total = 0};

    for (size_t k = 0; k < 3; k++) {
        struct store *store = NULL;

        for (long n = 0;; n++) {
            struct run_in a;
            int hit, hit_once;

            if (!store) {   /* a store as the apply expects it */
                store = unit_store_fresh();
                apply_ok(store, "ADD", run_make(&a, "run_a", "failure", "[\"A\"]"), NULL, NULL,
                         0);
            }
            /* every allocation from n on failing; then, when that changed
             * nothing, allocation n alone */
            if (fault_apply(store, kinds[k], n, 1, &is, &hit) ||
                fault_apply(store, kinds[k], n, 0, &is, &hit_once)) {
                store_close(store);   /* changed: the next step needs a fresh one */
                store = NULL;
            }
            if (!hit) {   /* it needed fewer than n allocations: done */
                store_close(store);
                break;
            }
            ck_assert_msg(n < 5000, "%s never succeeds", kinds[k]);
        }
    }
    assert_no_issues(&is);
}
END_TEST

/* A write that failed (an allocation inside SQLite) marks the SQLite
 * connection for replacement; the reads that follow on the same store
 * must still work. */
START_TEST(test_store_reads_after_failed_write)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b;
    const char *ids[] = {"run_a", "run_b"};
    int failures = 0;

    apply_ok(store, "ADD", run_make(&a, "run_a", "success", NULL), NULL, NULL, 0);
    run_make(&b, "run_b", "success", NULL);
    for (long n = 0;; n++) {
        struct keel_error err;
        json_t *list = NULL;
        int rc;

        keel_alloc_fail_after(n, 1);
        rc = apply_change(store, "ADD", &b.run, NULL, NULL, 0, &err);
        keel_alloc_fail_after(-1, 0);
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "ADD at %ld: %s", n, err.message);
        failures += rc != KEEL_OK;

        keel_error_clear(&err);
        ck_assert_msg(store_memory_get(store, ids, 2, &list, &err) == KEEL_OK,
                      "get after a failed write: %s", err.message);
        ck_assert_uint_eq(json_array_size(list), rc == KEEL_OK ? 2 : 1);
        json_decref(list);
        list = NULL;
        keel_error_clear(&err);
        ck_assert_msg(store_memory_decisions(store, NULL, 10, 0, &list, &err) == KEEL_OK,
                      "decisions after a failed write: %s", err.message);
        ck_assert_uint_eq(json_array_size(list), rc == KEEL_OK ? 2 : 1);
        json_decref(list);
        if (rc == KEEL_OK)
            break;
        ck_assert_msg(n < 5000, "ADD never succeeds");
    }
    ck_assert_int_gt(failures, 0);
    store_close(store);
}
END_TEST

/* Reads (sync, get, decisions) with allocation `n` failing give
 * KEEL_ENOMEM or the whole answer, never a part of it. */
START_TEST(test_store_read_allocation_failures)
{
    struct store *store = unit_store_fresh();
    struct run_in a, b, x, c, d;
    const char *ids[] = {"run_a", "run_b", "run_c", "run_d"};
    struct recorder want_log, r;
    struct keel_error err;
    struct issues is = {.total = 0};
    json_t *want_runs = NULL, *want_decisions;
    int64_t seq = 0;

    apply_ok(store, "ADD", run_make(&a, "run_a", "failure", "[\"A\",\"A2\"]"), NULL, NULL, 0);
    apply_ok(store, "ADD", run_make(&b, "run_b", "success", "[\"B\"]"), NULL, NULL, 0);
    apply_ok(store, "NOT", run_make(&x, "run_x", "success", NULL), "run_b", NULL, 0);
    apply_ok(store, "REPLACE", run_make(&c, "run_c", "success", "[\"C\"]"), "run_a", NULL, 0);
    apply_ok(store, "MERGE", run_make(&d, "run_d", "success", "[\"D\"]"), "run_b",
             "[\"B\",\"D\"]", 1);
    sync_ok(store, &seq, &want_log);
    keel_error_clear(&err);
    ck_assert_int_eq(store_memory_get(store, ids, 4, &want_runs, &err), KEEL_OK);
    want_decisions = decisions_all(store);

    for (long n = 0;; n++) {
        long failures = keel_alloc_failures();
        for (int sticky = 0; sticky < 2; sticky++) {
            json_t *got = NULL;
            int rc;

            settle(store);
            memset(&r, 0, sizeof(r));
            seq = 0;
            keel_error_clear(&err);
            keel_alloc_fail_after(n, sticky);
            rc = store_memory_sync(store, &seq, record, &r, &err);
            keel_alloc_fail_after(-1, 0);
            ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "sync at %ld: %s", n, err.message);
            if (rc == KEEL_OK && (strcmp(r.log, want_log.log) || seq != 5))
                note(&is, "sync", "sync at %ld (sticky %d): OK with seq %lld and %s", n, sticky,
                     (long long)seq, r.log);

            settle(store);
            keel_error_clear(&err);
            keel_alloc_fail_after(n, sticky);
            rc = store_memory_get(store, ids, 4, &got, &err);
            keel_alloc_fail_after(-1, 0);
            ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "get at %ld: %s", n, err.message);
            if (rc == KEEL_OK) {
                if (!json_equal(got, want_runs)) {
                    char *text = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
                    note(&is, "get", "get at %ld (sticky %d): OK with %s", n, sticky,
                         text ? text : "(null)");
                    keel_free(text);
                }
                json_decref(got);
            }

            settle(store);
            got = NULL;
            keel_error_clear(&err);
            keel_alloc_fail_after(n, sticky);
            rc = store_memory_decisions(store, NULL, 50, 0, &got, &err);
            keel_alloc_fail_after(-1, 0);
            ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "decisions at %ld: %s", n,
                          err.message);
            if (rc == KEEL_OK) {
                if (!json_equal(got, want_decisions))
                    note(&is, "decisions", "decisions at %ld (sticky %d): OK with a part", n, sticky);
                json_decref(got);
            }
        }
        if (keel_alloc_failures() == failures)   /* no read reached allocation n */
            break;
        ck_assert_msg(n < 5000, "reads never succeed");
    }
    json_decref(want_runs);
    json_decref(want_decisions);
    store_close(store);
    assert_no_issues(&is);
}
END_TEST

/* ---- admission ------------------------------------------------------------- */

#define SCHEMA_TASK "Create a completely new database schema for user authentication"
#define SCHEMA_SUMMARY "Tables users, sessions and password_resets with foreign keys"
#define SQL_TASK "Generate optimized SQL queries for user data"
#define SQL_FAILED "SELECT * FROM users"
#define SQL_BETTER "SELECT id, name, email FROM users WHERE active = true"
#define API_TASK "Build REST API for user management"
#define API_FLASK "Flask app with SQLAlchemy models and Blueprints"
#define API_FASTAPI "FastAPI service with Pydantic models and dependency injection"
#define REF_FLASK "https://flask.palletsprojects.com/"
#define REF_FASTAPI "https://fastapi.tiangolo.com/"
#define OTHER_TASK "Translate the onboarding guide into French"
#define OTHER_SUMMARY "All twelve sections translated, glossary kept"

static struct memory *memory_new(struct store *store)
{
    struct memory *m = NULL;
    struct keel_error err;
    int rc;

    keel_error_clear(&err);
    rc = memory_open(store, NULL, NULL, &m, &err);
    ck_assert_msg(rc == KEEL_OK, "memory_open: %s %s: %s", keel_strerror(rc), err.field,
                  err.message);
    ck_assert_ptr_nonnull(m);
    return m;
}

static int admit_rc(struct memory *m, const char *id, const char *task, const char *summary,
                    const char *outcome, const char *refs, json_t **out, struct keel_error *err)
{
    json_t *references = refs ? json_loads(refs, 0, NULL) : NULL;
    json_t *artifacts = json_pack("[s]", "notes.md");
    struct memory_input in = {id, task, summary, outcome, references, artifacts, NULL, T0, NULL};
    int rc;

    ck_assert_msg(!refs || references, "bad references %s", refs);
    ck_assert_ptr_nonnull(artifacts);
    *out = NULL;
    keel_error_clear(err);
    rc = memory_admit(m, &in, out, err);
    json_decref(references);
    json_decref(artifacts);
    return rc;
}

/* Admits a run, asserts its decision (and target, NULL: none; decision
 * NULL: any) and returns the answer. */
static json_t *admit(struct memory *m, const char *id, const char *task, const char *summary,
                     const char *outcome, const char *refs, const char *decision,
                     const char *target)
{
    struct keel_error err;
    json_t *out = NULL;
    int rc = admit_rc(m, id, task, summary, outcome, refs, &out, &err);
    const char *got, *got_target;

    ck_assert_msg(rc == KEEL_OK, "admit %s: %s %s: %s", id, keel_strerror(rc), err.field,
                  err.message);
    ck_assert_ptr_nonnull(out);
    got = json_string_value(json_object_get(out, "decision"));
    got_target = json_string_value(json_object_get(out, "target_run_id"));
    ck_assert_ptr_nonnull(got);
    if (!decision)   /* the caller looks at it */
        return out;
    ck_assert_msg(!strcmp(got, decision), "%s: %s, expected %s (reason: %s)", id, got, decision,
                  json_string_value(json_object_get(out, "reason")));
    if (target)
        ck_assert_msg(got_target && !strcmp(got_target, target), "%s: target %s, expected %s",
                      id, got_target ? got_target : "(none)", target);
    else
        ck_assert_msg(!got_target, "%s: target %s, expected none", id, got_target);
    if (id)
        ck_assert_str_eq(json_string_value(json_object_get(out, "run_id")), id);
    ck_assert_str_eq(json_string_value(json_object_get(out, "judge")), "rules");
    ck_assert_msg(json_string_length(json_object_get(out, "reason")) > 0, "%s: no reason", id);
    ck_assert(json_is_array(json_object_get(out, "candidates")));
    return out;
}

#define ADMIT(m, id, task, summary, outcome, refs, decision, target) \
    json_decref(admit((m), (id), (task), (summary), (outcome), (refs), (decision), (target)))

static json_t *search(struct memory *m, const char *query, int limit)
{
    struct keel_error err;
    json_t *runs = NULL;
    int rc;

    keel_error_clear(&err);
    rc = memory_search(m, NULL, query, limit, &runs, &err);
    ck_assert_msg(rc == KEEL_OK, "search %s: %s", query, err.message);
    ck_assert(json_is_array(runs));
    return runs;
}

static const json_t *find_run(const json_t *runs, const char *id)
{
    const json_t *r;
    size_t i;

    json_array_foreach(runs, i, r)
        if (!strcmp(json_string_value(json_object_get(r, "id")), id))
            return r;
    return NULL;
}

/* Whether the references of `run` are exactly the strings given (in any
 * order). */
static int refs_set_is(const json_t *run, const char *const *refs, size_t n)
{
    const json_t *list = json_object_get(run, "references");
    int ok = json_is_array(list) && json_array_size(list) == n;

    for (size_t i = 0; ok && i < n; i++) {
        int seen = 0;
        for (size_t k = 0; k < n; k++) {
            const char *r = json_string_value(json_array_get(list, k));
            seen |= r && !strcmp(r, refs[i]);
        }
        ok = seen;
    }
    return ok;
}

static void assert_refs_set(const json_t *run, const char *const *refs, size_t n, const char *what)
{
    char *text;

    if (refs_set_is(run, refs, n))
        return;
    text = json_dumps(json_object_get(run, "references"), JSON_COMPACT);
    ck_assert_msg(0, "%s: references %s", what, text ? text : "(none)");
}

START_TEST(test_admit_add_then_not)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    json_t *out, *runs, *list;

    out = admit(m, "run_schema_1", SCHEMA_TASK, SCHEMA_SUMMARY, "success", "[\"rfc-6238\"]", "ADD",
                NULL);
    ck_assert(json_is_null(json_object_get(out, "similarity")));
    ck_assert_uint_eq(json_array_size(json_object_get(out, "candidates")), 0);
    json_decref(out);

    out = admit(m, "run_schema_2", SCHEMA_TASK, SCHEMA_SUMMARY, "success", "[\"rfc-6238\"]", "NOT",
                "run_schema_1");
    ck_assert_msg(json_real_value(json_object_get(out, "similarity")) >= 0.99, "similarity %f",
                  json_real_value(json_object_get(out, "similarity")));
    ck_assert_uint_eq(json_array_size(json_object_get(out, "candidates")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(out, "candidates"), 0), "id")),
                     "run_schema_1");
    json_decref(out);

    assert_run(store, "run_schema_2", NULL);
    list = decisions_all(store);
    ck_assert_uint_eq(json_array_size(list), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "decision")),
                     "NOT");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "run_id")),
                     "run_schema_2");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "target_run_id")),
                     "run_schema_1");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 1), "decision")),
                     "ADD");
    json_decref(list);

    runs = search(m, "database schema for user authentication", 10);
    ck_assert_uint_eq(json_array_size(runs), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 0), "id")),
                     "run_schema_1");
    ck_assert(json_real_value(json_object_get(json_array_get(runs, 0), "similarity")) > 0);
    json_decref(runs);
    memory_free(m);
    store_close(store);
}
END_TEST

START_TEST(test_admit_replace)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    json_t *out, *runs, *old;

    ADMIT(m, "run_sql_1", SQL_TASK, SQL_FAILED, "failure", "[]", "ADD", NULL);
    out = admit(m, "run_sql_2", SQL_TASK, SQL_BETTER, "success", "[]", "REPLACE", "run_sql_1");
    ck_assert(json_real_value(json_object_get(out, "similarity")) >= 0.7);
    json_decref(out);

    old = run_get(store, "run_sql_1");
    ck_assert_ptr_nonnull(old);
    ck_assert_str_eq(json_string_value(json_object_get(old, "status")), "superseded");
    ck_assert_str_eq(json_string_value(json_object_get(old, "superseded_by")), "run_sql_2");
    json_decref(old);
    old = run_get(store, "run_sql_2");
    ck_assert_str_eq(json_string_value(json_object_get(old, "status")), "active");
    json_decref(old);

    runs = search(m, "optimized SQL queries for user data", 100);
    ck_assert_ptr_nonnull(find_run(runs, "run_sql_2"));
    ck_assert_ptr_null(find_run(runs, "run_sql_1"));
    json_decref(runs);
    runs = search(m, SQL_FAILED, 100);   /* the old summary itself */
    ck_assert_ptr_null(find_run(runs, "run_sql_1"));
    json_decref(runs);

    /* The same failure again: compared with the success only, never the
     * superseded run. */
    out = admit(m, "run_sql_3", SQL_TASK, SQL_FAILED, "failure", "[]", "ADD", NULL);
    json_decref(out);
    memory_free(m);
    store_close(store);
}
END_TEST

START_TEST(test_admit_merge)
{
    static const char *const both[] = {REF_FLASK, REF_FASTAPI};
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    json_t *run, *runs;

    ADMIT(m, "run_api_1", API_TASK, API_FLASK, "success", "[\"" REF_FLASK "\"]", "ADD", NULL);
    ADMIT(m, "run_api_2", API_TASK, API_FASTAPI, "success", "[\"" REF_FASTAPI "\"]", "MERGE",
          "run_api_1");

    run = run_get(store, "run_api_2");
    ck_assert_ptr_nonnull(run);
    ck_assert(json_is_true(json_object_get(run, "canonical")));
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "active");
    ck_assert_int_eq(json_integer_value(json_object_get(run, "uses")), 2);
    assert_refs_set(run, both, 2, "canonical run_api_2");
    json_decref(run);
    run = run_get(store, "run_api_1");
    ck_assert(json_is_false(json_object_get(run, "canonical")));
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "active");
    assert_refs_set(run, both, 1, "run_api_1");
    json_decref(run);

    runs = search(m, "REST API for user management", 10);
    ck_assert_ptr_nonnull(find_run(runs, "run_api_1"));
    ck_assert_ptr_nonnull(find_run(runs, "run_api_2"));
    json_decref(runs);
    memory_free(m);
    store_close(store);
}
END_TEST

/* The seed's own test plan ("Testing"): each pair in a memory of its own,
 * tasks without summaries. */
START_TEST(test_admit_seed_test_plan)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);

    ADMIT(m, "run1", "Generate schema", NULL, "success", NULL, "ADD", NULL);
    ADMIT(m, "run2", "Generate schema", NULL, "success", NULL, "NOT", "run1");
    memory_free(m);
    store_close(store);

    store = unit_store_fresh();
    m = memory_new(store);
    ADMIT(m, "run3", "Generate schema", NULL, "failure", NULL, "ADD", NULL);
    ADMIT(m, "run4", "Generate schema", NULL, "success", NULL, "REPLACE", "run3");
    memory_free(m);
    store_close(store);

    store = unit_store_fresh();
    m = memory_new(store);
    ADMIT(m, "run5", "Generate schema", NULL, "success", "[\"A\"]", "ADD", NULL);
    ADMIT(m, "run6", "Generate schema", NULL, "success", "[\"B\"]", "MERGE", "run5");
    {
        static const char *const ab[] = {"A", "B"};
        json_t *run = run_get(store, "run6");
        assert_refs_set(run, ab, 2, "run6");
        json_decref(run);
    }
    memory_free(m);
    store_close(store);
}
END_TEST

/* The seed's scenarios one after another in one memory, and an unrelated
 * task at the end. */
START_TEST(test_admit_seed_sequence)
{
    static const char *const kinds[] = {"ADD", "MERGE", "ADD", "REPLACE", "ADD", "NOT", "ADD"};
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    json_t *out, *list, *runs;
    size_t i;

    ADMIT(m, "run_schema_1", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, "ADD", NULL);
    ADMIT(m, "run_schema_2", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, "NOT", "run_schema_1");
    ADMIT(m, "run_sql_1", SQL_TASK, SQL_FAILED, "failure", NULL, "ADD", NULL);
    ADMIT(m, "run_sql_2", SQL_TASK, SQL_BETTER, "success", NULL, "REPLACE", "run_sql_1");
    ADMIT(m, "run_api_1", API_TASK, API_FLASK, "success", "[\"" REF_FLASK "\"]", "ADD", NULL);
    ADMIT(m, "run_api_2", API_TASK, API_FASTAPI, "success", "[\"" REF_FASTAPI "\"]", "MERGE",
          "run_api_1");
    out = admit(m, "run_other", OTHER_TASK, OTHER_SUMMARY, "success", NULL, "ADD", NULL);
    ck_assert(json_is_null(json_object_get(out, "similarity")));
    ck_assert_uint_eq(json_array_size(json_object_get(out, "candidates")), 0);
    json_decref(out);

    list = decisions_all(store);
    ck_assert_uint_eq(json_array_size(list), 7);
    for (i = 0; i < 7; i++)
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, i), "decision")),
                         kinds[i]);
    json_decref(list);

    runs = search(m, "user", 100);   /* every active run mentions users */
    ck_assert_ptr_nonnull(find_run(runs, "run_schema_1"));
    ck_assert_ptr_null(find_run(runs, "run_schema_2"));
    ck_assert_ptr_null(find_run(runs, "run_sql_1"));
    ck_assert_ptr_nonnull(find_run(runs, "run_sql_2"));
    ck_assert_ptr_nonnull(find_run(runs, "run_api_1"));
    ck_assert_ptr_nonnull(find_run(runs, "run_api_2"));
    json_decref(runs);
    runs = search(m, "onboarding guide French", 1);
    ck_assert_uint_eq(json_array_size(runs), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 0), "id")),
                     "run_other");
    json_decref(runs);
    memory_free(m);
    store_close(store);
}
END_TEST

/* Two memories over one store (two connections to one SQLite file): each
 * sees the other's decisions. */
START_TEST(test_admit_two_memories)
{
    struct store *s1 = unit_store_fresh(), *s2 = store_again(s1);
    struct memory *a = memory_new(s1), *b = memory_new(s2);
    json_t *runs;

    ADMIT(a, "run_schema_1", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, "ADD", NULL);
    ADMIT(b, "run_schema_2", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, "NOT", "run_schema_1");
    ADMIT(b, "run_sql_1", SQL_TASK, SQL_FAILED, "failure", NULL, "ADD", NULL);
    ADMIT(a, "run_sql_2", SQL_TASK, SQL_BETTER, "success", NULL, "REPLACE", "run_sql_1");
    runs = search(b, "optimized SQL queries for user data", 100);
    ck_assert_ptr_null(find_run(runs, "run_sql_1"));
    ck_assert_ptr_nonnull(find_run(runs, "run_sql_2"));
    json_decref(runs);
    ADMIT(b, "run_api_1", API_TASK, API_FLASK, "success", "[\"" REF_FLASK "\"]", "ADD", NULL);
    ADMIT(a, "run_api_2", API_TASK, API_FASTAPI, "success", "[\"" REF_FASTAPI "\"]", "MERGE",
          "run_api_1");
    ADMIT(b, "run_api_3", API_TASK, API_FASTAPI, "success", "[\"" REF_FASTAPI "\"]", "NOT",
          "run_api_2");
    memory_free(a);
    memory_free(b);
    store_again_close(s1, s2);
    store_close(s1);
}
END_TEST

/* A memory opened after the decisions builds its index from them. */
START_TEST(test_admit_memory_opened_later)
{
    struct store *s1 = unit_store_fresh(), *s2;
    struct memory *a = memory_new(s1), *c;
    json_t *runs;

    ADMIT(a, "run_schema_1", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, "ADD", NULL);
    ADMIT(a, "run_sql_1", SQL_TASK, SQL_FAILED, "failure", NULL, "ADD", NULL);
    ADMIT(a, "run_sql_2", SQL_TASK, SQL_BETTER, "success", NULL, "REPLACE", "run_sql_1");
    memory_free(a);
    s2 = store_again(s1);
    c = memory_new(s2);
    runs = search(c, "optimized SQL queries for user data", 100);
    ck_assert_ptr_nonnull(find_run(runs, "run_sql_2"));
    ck_assert_ptr_null(find_run(runs, "run_sql_1"));
    json_decref(runs);
    ADMIT(c, "run_schema_3", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, "NOT", "run_schema_1");
    ADMIT(c, "run_sql_3", SQL_TASK, SQL_BETTER, "success", NULL, "NOT", "run_sql_2");
    memory_free(c);
    store_again_close(s1, s2);
    store_close(s1);
}
END_TEST

static void admit_fails(struct memory *m, const struct memory_input *in, int code,
                        const char *field)
{
    struct keel_error err;
    json_t *out = NULL;
    int rc;

    keel_error_clear(&err);
    rc = memory_admit(m, in, &out, &err);
    ck_assert_msg(rc == code, "expected %s on %s, got %s (%s: %s)", keel_strerror(code), field,
                  keel_strerror(rc), err.field, err.message);
    ck_assert_str_eq(err.field, field);
    ck_assert_ptr_null(out);
}

START_TEST(test_admit_input_errors)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    struct memory_input ok = {"run_ok", SQL_TASK, SQL_FAILED, "success", NULL, NULL, NULL, T0, NULL};
    struct memory_input in;
    json_t *numbers = json_pack("[s, i]", "a", 1), *object = json_pack("{s:s}", "a", "b");
    json_t *text = json_string("x");
    static char huge[MEMORY_TEXT_MAX + 2];
    char id64[65];

    memset(huge, 'a', MEMORY_TEXT_MAX + 1);
    memset(id64, 'i', 64);
    id64[64] = '\0';

    in = ok, in.task = "";
    admit_fails(m, &in, KEEL_EINVAL, "task");
    in = ok, in.task = NULL;
    admit_fails(m, &in, KEEL_EINVAL, "task");
    in = ok, in.task = huge;
    admit_fails(m, &in, KEEL_ETOOBIG, "task");
    in = ok, in.summary = "bad \xff utf-8";
    admit_fails(m, &in, KEEL_EINVAL, "summary");
    in = ok, in.outcome = "maybe";
    admit_fails(m, &in, KEEL_EINVAL, "outcome");
    in = ok, in.outcome = NULL;
    admit_fails(m, &in, KEEL_EINVAL, "outcome");
    in = ok, in.references = numbers;
    admit_fails(m, &in, KEEL_EINVAL, "references");
    in = ok, in.references = object;
    admit_fails(m, &in, KEEL_EINVAL, "references");
    in = ok, in.artifacts = text;
    admit_fails(m, &in, KEEL_EINVAL, "artifacts");
    in = ok, in.id = "run with spaces";
    admit_fails(m, &in, KEEL_EINVAL, "id");
    in = ok, in.id = "";
    admit_fails(m, &in, KEEL_EINVAL, "id");
    in = ok, in.id = "run/1";
    admit_fails(m, &in, KEEL_EINVAL, "id");
    in = ok, in.id = id64;
    admit_fails(m, &in, KEEL_EINVAL, "id");

    ck_assert_uint_eq(decision_count(store), 0);
    /* and the memory still works */
    ADMIT(m, "run_ok", SQL_TASK, SQL_FAILED, "success", NULL, "ADD", NULL);
    json_decref(numbers);
    json_decref(object);
    json_decref(text);
    memory_free(m);
    store_close(store);
}
END_TEST

START_TEST(test_search_errors)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    struct keel_error err;
    json_t *runs = NULL;

    runs = search(m, "anything", 5);   /* an empty memory */
    assert_json(runs, "[]", "empty memory");
    json_decref(runs);
    runs = NULL;
    keel_error_clear(&err);
    ck_assert_int_eq(memory_search(m, NULL, "x", 0, &runs, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "limit");
    keel_error_clear(&err);
    ck_assert_int_eq(memory_search(m, NULL, "x", MEMORY_SEARCH_MAX + 1, &runs, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "limit");
    keel_error_clear(&err);
    ck_assert_int_eq(memory_search(m, NULL, "", 5, &runs, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "query");
    keel_error_clear(&err);
    ck_assert_int_eq(memory_search(m, NULL, NULL, 5, &runs, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "query");
    ck_assert_ptr_null(runs);
    memory_free(m);
    store_close(store);
}
END_TEST

START_TEST(test_admit_fresh_ids)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    json_t *one, *two;
    const char *id1, *id2;

    one = admit(m, NULL, SQL_TASK, SQL_FAILED, "failure", NULL, "ADD", NULL);
    two = admit(m, NULL, OTHER_TASK, OTHER_SUMMARY, "success", NULL, "ADD", NULL);
    id1 = json_string_value(json_object_get(one, "run_id"));
    id2 = json_string_value(json_object_get(two, "run_id"));
    ck_assert_msg(id1 && keel_id_valid(id1, "run"), "fresh id %s", id1);
    ck_assert_msg(id2 && keel_id_valid(id2, "run"), "fresh id %s", id2);
    ck_assert_str_ne(id1, id2);
    {
        json_t *run = run_get(store, id1);
        ck_assert_msg(run != NULL, "run %s is not stored", id1);
        json_decref(run);
    }
    json_decref(one);
    json_decref(two);
    memory_free(m);
    store_close(store);
}
END_TEST

/* check_input accepts ids of up to 63 bytes; the run must keep it whole. */
START_TEST(test_admit_long_id_kept)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    char id63[64], other63[64];
    json_t *out, *run;

    memset(id63, 'r', 63);
    id63[63] = '\0';
    memcpy(other63, id63, sizeof(id63));
    other63[62] = 's';   /* differs only in the last byte */
    out = admit(m, id63, SQL_TASK, SQL_FAILED, "failure", NULL, "ADD", NULL);
    json_decref(out);
    run = run_get(store, id63);
    ck_assert_msg(run != NULL, "the run is not stored under its 63-byte id");
    json_decref(run);
    ADMIT(m, other63, OTHER_TASK, OTHER_SUMMARY, "success", NULL, "ADD", NULL);
    memory_free(m);
    store_close(store);
}
END_TEST

/* A text of `words` made-up words: tasks that are like no other. */
static void random_words(uint64_t *rng, char *out, size_t n, int words)
{
    size_t len = 0;

    out[0] = '\0';
    for (int w = 0; w < words && len + 12 < n; w++) {
        int letters = 4 + (int)(rng_next(rng) % 6);
        if (w)
            out[len++] = ' ';
        for (int i = 0; i < letters; i++)
            out[len++] = (char)('a' + rng_next(rng) % 26);
        out[len] = '\0';
    }
}

/* Memory B was opened before A added a run. Whatever allocation fails in
 * B's admission of the same run, B must afterwards know A's run: its
 * next admission of it is NOT. B follows the store at the start of an
 * admission, with an empty index that must grow; the first 64
 * allocations cover that on both backends (a fresh pair of stores each,
 * so that every step's B has a new decision to follow). */
START_TEST(test_admit_after_failed_sync)
{
    for (long n = 0; n < 64; n++) {
        struct store *s1 = unit_store_fresh(), *s2 = store_again(s1);
        struct memory *a = memory_new(s1), *b = memory_new(s2);
        struct keel_error err;
        json_t *out = NULL;
        const char *decision;
        long failures;
        int rc;

        ADMIT(a, "run_schema_1", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, "ADD", NULL);
        {
            json_t *refs = json_array(), *artifacts = json_array();
            struct memory_input in = {"run_schema_2", SCHEMA_TASK, SCHEMA_SUMMARY, "success",
                                      refs, artifacts, NULL, T0, NULL};
            keel_error_clear(&err);
            failures = keel_alloc_failures();
            keel_alloc_fail_after(n, 0);
            rc = memory_admit(b, &in, &out, &err);
            keel_alloc_fail_after(-1, 0);
            failures = keel_alloc_failures() - failures;
            json_decref(refs);
            json_decref(artifacts);
        }
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "allocation %ld: %s %s: %s", n,
                      keel_strerror(rc), err.field, err.message);
        if (rc == KEEL_OK) {
            decision = json_string_value(json_object_get(out, "decision"));
            ck_assert_msg(decision && !strcmp(decision, "NOT"), "allocation %ld: OK with %s", n,
                          decision ? decision : "(none)");
            json_decref(out);
        }
        out = admit(b, "run_schema_3", SCHEMA_TASK, SCHEMA_SUMMARY, "success", NULL, NULL, NULL);
        decision = json_string_value(json_object_get(out, "decision"));
        ck_assert_msg(!strcmp(decision, "NOT"),
                      "allocation %ld failed in B's admission (%s: %s); B's next admission of "
                      "the same run is %s, expected NOT",
                      n, keel_strerror(rc), err.message, decision);
        json_decref(out);
        memory_free(a);
        memory_free(b);
        store_again_close(s1, s2);
        store_close(s1);
        if (!failures)
            break;
    }
}
END_TEST

/* A MERGE admission with allocation `n` failing: ENOMEM or OK; whatever
 * was stored is whole (the union of references on the canonical run, 2
 * uses), and an OK answer is whole too (its candidate). Each step has a
 * pair of runs of its own (a made-up task), so one store and one memory
 * serve the whole sweep, which also shows the memory goes on working
 * after each failure. */
START_TEST(test_admit_allocation_failures)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    struct issues is = {.total = 0};
    uint64_t rng = 11;

    for (long n = 0;; n++) {
        char task[128], first[128], second[128], id1[32], id2[32], ref1[32], ref2[32];
        const char *both[2] = {ref1, ref2};
        struct keel_error err;
        json_t *out = NULL, *list, *run, *snapshot;
        const char *decision;
        long failures;
        size_t before, count;
        int rc;

        random_words(&rng, task, sizeof(task), 6);
        random_words(&rng, first, sizeof(first), 4);
        random_words(&rng, second, sizeof(second), 4);
        snprintf(id1, sizeof(id1), "run_first_%ld", n);
        snprintf(id2, sizeof(id2), "run_second_%ld", n);
        snprintf(ref1, sizeof(ref1), "https://a.example/%ld", n);
        snprintf(ref2, sizeof(ref2), "https://b.example/%ld", n);
        {
            json_t *refs = json_pack("[s]", ref1), *artifacts = json_pack("[s]", "app.py");
            struct memory_input in = {id1, task, first, "success", refs, artifacts, NULL, T0, NULL};
            keel_error_clear(&err);
            ck_assert_msg(memory_admit(m, &in, &out, &err) == KEEL_OK, "%s", err.message);
            ck_assert_str_eq(json_string_value(json_object_get(out, "decision")), "ADD");
            json_decref(out);
            out = NULL;
            json_decref(refs);
            json_decref(artifacts);
        }
        snapshot = run_get(store, id1);
        before = decision_count(store);
        {
            json_t *refs = json_pack("[s]", ref2), *artifacts = json_pack("[s]", "app.py");
            struct memory_input in = {id2, task, second, "success", refs, artifacts, NULL, T0, NULL};
            settle(store);
            keel_error_clear(&err);
            failures = keel_alloc_failures();
            keel_alloc_fail_after(n, 0);
            rc = memory_admit(m, &in, &out, &err);
            keel_alloc_fail_after(-1, 0);
            failures = keel_alloc_failures() - failures;
            json_decref(refs);
            json_decref(artifacts);
        }
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "allocation %ld: %s %s: %s", n,
                      keel_strerror(rc), err.field, err.message);
        settle(store);   /* the reads below on this very store */
        list = decision_newest(store);
        count = decision_count(store) - before;
        ck_assert_msg(count <= 1, "allocation %ld: %zu decisions", n, count);
        if (count == 0) {
            if (rc == KEEL_OK)
                note(&is, "nothing stored", "allocation %ld: OK, but nothing stored", n);
            run = run_get(store, id2);
            if (run)
                note(&is, "half stored", "allocation %ld: %s stored without its decision", n,
                     id2);
            json_decref(run);
            run = run_get(store, id1);
            if (!json_equal(run, snapshot))
                note(&is, "target changed", "allocation %ld: ENOMEM, but %s changed", n, id1);
            json_decref(run);
        } else {
            decision = json_string_value(json_object_get(list, "decision"));
            if (strcmp(decision, "MERGE"))
                note(&is, "decision", "allocation %ld: stored %s, expected MERGE", n, decision);
            run = run_get(store, id2);
            ck_assert_msg(run != NULL, "allocation %ld: the decision has no run", n);
            if (!json_is_true(json_object_get(run, "canonical")) ||
                json_integer_value(json_object_get(run, "uses")) != 2)
                note(&is, "canonical and uses",
                     "allocation %ld: %s is not the canonical run with 2 uses", n, id2);
            if (!refs_set_is(run, both, 2)) {
                char *text = json_dumps(json_object_get(run, "references"), JSON_COMPACT);
                note(&is, "merged references", "allocation %ld: %s has references %s, expected "
                     "[\"%s\", \"%s\"]", n, id2, text ? text : "(none)", ref1, ref2);
                keel_free(text);
            }
            json_decref(run);
            run = run_get(store, id1);
            if (!refs_set_is(run, both, 1))
                note(&is, "target references", "allocation %ld: %s lost its reference", n, id1);
            json_decref(run);
        }
        json_decref(list);
        json_decref(snapshot);
        if (rc == KEEL_OK) {
            size_t cands = json_array_size(json_object_get(out, "candidates"));
            if (strcmp(json_string_value(json_object_get(out, "decision")), "MERGE") || cands < 1 ||
                !json_is_real(json_object_get(out, "similarity")))
                note(&is, "answer", "allocation %ld: OK with %s, %zu candidate(s) and similarity %s",
                     n, json_string_value(json_object_get(out, "decision")), cands,
                     json_is_real(json_object_get(out, "similarity")) ? "a number" : "missing");
            json_decref(out);
        }
        if (!failures)   /* the admission made fewer than n allocations */
            break;
        ck_assert_msg(n < 20000, "admission never succeeds");
    }
    memory_free(m);
    store_close(store);
    assert_no_issues(&is);
}
END_TEST

/* "Same summary" sets case, spacing (anywhere) and trailing . ! ? aside,
 * nothing else: the same failure again with such a summary is NOT, with
 * any other an ADD. */
START_TEST(test_admit_same_text)
{
    static const struct {
        const char *summary;
        int same;
    } cases[] = {
        {"Created the tables and the foreign keys", 1},
        {"created THE tables and the foreign keys", 1},
        {"  Created the   tables\tand the foreign keys  ", 1},
        {"Created the tables and the foreign keys.", 1},
        {"Created the tables and the foreign keys?! \n", 1},
        {"Createdthe tables and the foreignkeys", 1},
        {"Created the tables and the foreign keys. Then", 0},
        {"Created the tables, and the foreign keys", 0},
        {"Created the tables and the foreign key", 0},
        {"Created the tables and the foreign keys;", 0},
        {"Created the tables and the foreign keys\v", 1},   /* a space to isspace */
        {"Created the tables and the foreign keys.\v.", 0},  /* not a trailing mark */
        {". Created the tables and the foreign keys", 0},
        {"Created the tables and the foreign keyz", 0},
    };
    char id[32];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct store *store = unit_store_fresh();
        struct memory *m = memory_new(store);
        json_t *out;

        ADMIT(m, "run_first", SQL_TASK, "Created the tables and the foreign keys", "failure",
              NULL, "ADD", NULL);
        snprintf(id, sizeof(id), "run_again%zu", i);
        out = admit(m, id, SQL_TASK, cases[i].summary, "failure", NULL, NULL, NULL);
        ck_assert_msg(!strcmp(json_string_value(json_object_get(out, "decision")),
                              cases[i].same ? "NOT" : "ADD"),
                      "\"%s\": %s (%s)", cases[i].summary,
                      json_string_value(json_object_get(out, "decision")),
                      json_string_value(json_object_get(out, "reason")));
        json_decref(out);
        memory_free(m);
        store_close(store);
    }
}
END_TEST

/* Each candidate is judged on its own summary: a failure unlike both
 * earlier failures of its task is an ADD, one like a candidate that is
 * not the nearest (its task written without a space: the same task,
 * other words) is NOT. */
START_TEST(test_admit_rules_each_candidate)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    json_t *out;

    ADMIT(m, "run_1", SQL_TASK, "Created the tables", "failure", NULL, "ADD", NULL);
    ADMIT(m, "run_2", "Generate optimized SQLqueries for user data", "Created the indexes",
          "failure", NULL, "ADD", NULL);
    out = admit(m, "run_3", SQL_TASK, "Created the views", "failure", NULL, "ADD", NULL);
    ck_assert_uint_eq(json_array_size(json_object_get(out, "candidates")), 2);
    json_decref(out);
    out = admit(m, "run_4", SQL_TASK, "created the INDEXES.", "failure", NULL, "NOT", "run_2");
    ck_assert_uint_eq(json_array_size(json_object_get(out, "candidates")), 3);
    ck_assert_str_ne(json_string_value(json_object_get(
                         json_array_get(json_object_get(out, "candidates"), 0), "id")),
                     "run_2");
    json_decref(out);
    memory_free(m);
    store_close(store);
}
END_TEST

/* A search's similarities are the answer's: the stored runs read later
 * (by a decision, by the next search) have none. */
START_TEST(test_search_leaves_runs_unchanged)
{
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    json_t *runs, *run;

    ADMIT(m, "run_sql", SQL_TASK, SQL_FAILED, "failure", NULL, "ADD", NULL);
    for (int i = 0; i < 2; i++) {
        runs = search(m, SQL_TASK, 5);
        ck_assert_uint_eq(json_array_size(runs), 1);
        ck_assert(json_is_real(json_object_get(json_array_get(runs, 0), "similarity")));
        json_decref(runs);
    }
    run = run_get(store, "run_sql");
    ck_assert_ptr_null(json_object_get(run, "similarity"));
    json_decref(run);
    ADMIT(m, "run_sql2", SQL_TASK, SQL_FAILED, "failure", NULL, "NOT", "run_sql");
    memory_free(m);
    store_close(store);
}
END_TEST

/* Without artifacts (NULL: an empty array) the admission stores [] and
 * leaves no allocation behind. */
START_TEST(test_admit_without_artifacts)
{
    long before = keel_alloc_live();
    struct store *store = unit_store_fresh();
    struct memory *m = memory_new(store);
    struct memory_input in = {"run_bare", SQL_TASK, SQL_FAILED, "failure", NULL, NULL, NULL, T0, NULL};
    struct keel_error err;
    json_t *out = NULL, *run;

    keel_error_clear(&err);
    ck_assert_int_eq(memory_admit(m, &in, &out, &err), KEEL_OK);
    json_decref(out);
    run = run_get(store, "run_bare");
    ck_assert_ptr_nonnull(run);
    assert_json(json_object_get(run, "artifacts"), "[]", "artifacts");
    assert_json(json_object_get(run, "references"), "[]", "references");
    json_decref(run);
    memory_free(m);
    store_close(store);
    ck_assert_msg(keel_alloc_live() == before, "an admission without artifacts leaked %ld "
                  "allocation(s)", keel_alloc_live() - before);
}
END_TEST

/* ---- owners and erasure (issue 7) ------------------------------------------ */

#define SECRET_TASK "find recent papers on alice secret sleep project"

/* Admits a run of `owner` (NULL: none) as the server would: with
 * `turn_seq` > 0 stored with turn `turn_seq` of conversation `conv`
 * (the remember stage's way), else applied alone (POST /v1/memory/runs)
 * naming `conv`. Asserts the decision; returns the candidates' count. */
static size_t admit_as(struct memory *m, const char *owner, const char *conv, int turn_seq,
                       const char *id, const char *task, const char *outcome,
                       const char *decision, const char *target)
{
    struct memory_input in = {id, task, "searched the sleep literature", outcome, NULL, NULL,
                              conv, T0 + turn_seq, owner};
    struct memory_decision *d = NULL;
    struct keel_error err;
    const json_t *out;
    const char *got_target;
    size_t cands;
    int rc;

    keel_error_clear(&err);
    rc = memory_decide(m, &in, &d, &err);
    ck_assert_msg(rc == KEEL_OK, "decide %s: %s", id, err.message);
    if (turn_seq > 0) {
        struct store_turn_record rec;
        char corr[64];
        memset(&rec, 0, sizeof(rec));
        snprintf(corr, sizeof(corr), "turn_%s", id);
        rec.conversation_id = conv;
        rec.pack = "scholar";
        rec.seq = turn_seq;
        rec.correlation_id = corr;
        rec.ts_ms = T0 + turn_seq;
        rec.user_text = task;
        rec.assistant_text = "an answer";
        rec.state_json = "{}";
        rec.deltas_json = "[]";
        rec.events_json = "[]";
        rec.sources_json = "[]";
        rec.intent = "search";
        rec.route = "tool";
        rec.stage_from = "exploring";
        rec.stage_to = "exploring";
        rec.reasons_json = "[]";
        rec.decision_json = "{}";
        rec.owner = owner;
        rec.memory = memory_decision_change(d);
        rc = store_save_turn(memory_store_of_test, &rec, &err);
    } else {
        rc = store_memory_apply(memory_store_of_test, memory_decision_change(d), &err);
    }
    ck_assert_msg(rc == KEEL_OK, "store %s: %s %s", id, err.field, err.message);
    memory_commit(m, d);
    out = memory_decision_json(d);
    ck_assert_msg(!strcmp(json_string_value(json_object_get(out, "decision")), decision),
                  "%s: %s, expected %s (%s)", id,
                  json_string_value(json_object_get(out, "decision")), decision,
                  json_string_value(json_object_get(out, "reason")));
    got_target = json_string_value(json_object_get(out, "target_run_id"));
    ck_assert_msg(target ? got_target && !strcmp(got_target, target) : !got_target,
                  "%s: target %s, expected %s", id, got_target ? got_target : "(none)",
                  target ? target : "(none)");
    cands = json_array_size(json_object_get(out, "candidates"));
    memory_decision_free(d);
    return cands;
}

/* The ids `owner` finds for `query`, as "id,id,". */
static void search_as(struct memory *m, const char *owner, const char *query, char *out,
                      size_t n)
{
    struct keel_error err;
    json_t *runs = NULL, *r;
    size_t i, len = 0;

    keel_error_clear(&err);
    ck_assert_msg(memory_search(m, owner, query, 10, &runs, &err) == KEEL_OK, "search: %s",
                  err.message);
    out[0] = '\0';
    json_array_foreach(runs, i, r) {
        const char *o = json_string_value(json_object_get(r, "owner"));
        ck_assert_msg(owner && *owner ? o && !strcmp(o, owner) : !o, "%s found a run of %s",
                      owner, o ? o : "(none)");
        len += (size_t)snprintf(out + len, n - len, "%s,",
                                json_string_value(json_object_get(r, "id")));
    }
    json_decref(runs);
}

/* The decisions of `owner` as "DECISION run_id task|…", newest first. */
static void decisions_as(struct store *store, const char *owner, char *out, size_t n)
{
    struct keel_error err;
    json_t *list = NULL, *d;
    size_t i, len = 0;

    keel_error_clear(&err);
    ck_assert_msg(store_memory_decisions(store, owner, 50, 0, &list, &err) == KEEL_OK, "%s",
                  err.message);
    out[0] = '\0';
    json_array_foreach(list, i, d)
        len += (size_t)snprintf(out + len, n - len, "%s %s %s|",
                                json_string_value(json_object_get(d, "decision")),
                                json_string_value(json_object_get(d, "run_id")),
                                json_string_value(json_object_get(d, "task")));
    json_decref(list);
}

/* After a batch of turns failed to commit, memory_reload drops the runs
 * those turns put in the index and keeps the stored ones. */
START_TEST(test_memory_reload_forgets_unstored_runs)
{
    struct store *store = unit_store_fresh();
    struct memory *m;
    struct keel_error err;
    char got[1024];

    memory_store_of_test = store;
    m = memory_new(store);
    ck_assert_uint_eq(admit_as(m, "alice", "conv_a", 1, "run_a1", SECRET_TASK, "success", "ADD",
                               NULL), 0);
    ck_assert_int_eq(store_batch_begin(store), 1);
    ck_assert_uint_eq(admit_as(m, "bob", "conv_b", 1, "run_b1", SECRET_TASK, "success", "ADD",
                               NULL), 0);
    search_as(m, "bob", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_b1,");   /* in the index before the commit */
    ((struct sqlite_store *)store)->reset = 1;   /* as a failed statement leaves it */
    keel_error_clear(&err);
    ck_assert_int_eq(store_batch_end(store, &err), KEEL_EIO);
    keel_error_clear(&err);
    ck_assert_int_eq(memory_reload(m, &err), KEEL_OK);
    search_as(m, "bob", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "");
    search_as(m, "alice", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_a1,");
    memory_free(m);
    store_close(store);
}
END_TEST

START_TEST(test_owner_isolation)
{
    struct store *store = unit_store_fresh(), *again;
    struct memory *m, *m2;
    char got[1024];

    memory_store_of_test = store;
    m = memory_new(store);
    ck_assert_uint_eq(admit_as(m, "alice", NULL, 0, "run_a1", SECRET_TASK, "failure", "ADD",
                               NULL), 0);
    /* Bob's same task: never a candidate of Alice's run (no REPLACE of it) */
    ck_assert_uint_eq(admit_as(m, "bob", NULL, 0, "run_b1", SECRET_TASK, "success", "ADD",
                               NULL), 0);
    ck_assert_uint_eq(admit_as(m, "bob", NULL, 0, "run_b2", SECRET_TASK, "success", "NOT",
                               "run_b1"), 1);
    ck_assert_uint_eq(admit_as(m, NULL, NULL, 0, "run_l1", SECRET_TASK, "success", "ADD",
                               NULL), 0);
    search_as(m, "bob", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_b1,");
    search_as(m, "alice", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_a1,");
    search_as(m, NULL, "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_l1,");
    search_as(m, "", "alice secret", got, sizeof(got));   /* "" is no owner too */
    ck_assert_str_eq(got, "run_l1,");
    search_as(m, "carol", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "");
    decisions_as(store, "bob", got, sizeof(got));
    ck_assert_str_eq(got, "NOT run_b2 " SECRET_TASK "|ADD run_b1 " SECRET_TASK "|");
    decisions_as(store, "carol", got, sizeof(got));
    ck_assert_str_eq(got, "");
    decisions_as(store, NULL, got, sizeof(got));
    ck_assert_str_eq(got, "ADD run_l1 " SECRET_TASK "|");
    /* Alice's own success still replaces her failure */
    ck_assert_uint_eq(admit_as(m, "alice", NULL, 0, "run_a2", SECRET_TASK, "success", "REPLACE",
                               "run_a1"), 1);
    /* another process replays the owners from the store */
    again = store_again(store);
    m2 = memory_new(again);
    search_as(m2, "bob", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_b1,");
    search_as(m2, "alice", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_a2,");
    memory_free(m2);
    store_again_close(store, again);
    memory_free(m);
    store_close(store);
}
END_TEST

START_TEST(test_erase_with_conversation)
{
    struct store *store = unit_store_fresh(), *again;
    struct memory *m, *m2;
    struct keel_error err;
    json_t *run;
    char got[2048];

    memory_store_of_test = store;
    m = memory_new(store);
    admit_as(m, "alice", "conv_alice", 1, "run_t1", SECRET_TASK, "success", "ADD", NULL);
    admit_as(m, "alice", "conv_alice", 2, "run_t2", SECRET_TASK, "success", "NOT", "run_t1");
    admit_as(m, "alice", NULL, 0, "run_p1", "water the garden tomatoes", "success", "ADD", NULL);
    /* Bob names Alice's conversation in a run of his: not erased with it */
    admit_as(m, "bob", "conv_alice", 0, "run_b1", SECRET_TASK, "success", "ADD", NULL);
    search_as(m, "alice", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_t1,run_p1,");   /* the same summary: similar */

    keel_error_clear(&err);
    ck_assert_msg(store_delete_conversation(store, "conv_alice", &err) == KEEL_OK, "%s",
                  err.message);
    search_as(m, "alice", "alice secret sleep project", got, sizeof(got));
    ck_assert_msg(!strstr(got, "run_t1"), "found after the delete: %s", got);
    search_as(m, "bob", "alice secret", got, sizeof(got));
    ck_assert_str_eq(got, "run_b1,");
    /* the open index dropped it: no candidate for the same task */
    ck_assert_uint_eq(admit_as(m, "alice", NULL, 0, "run_p2", SECRET_TASK, "failure", "ADD",
                               NULL), 0);
    /* nor does a memory opened afterwards put it back */
    again = store_again(store);
    m2 = memory_new(again);
    search_as(m2, "alice", "alice secret sleep project", got, sizeof(got));
    ck_assert_str_eq(got, "run_p2,run_p1,");
    memory_free(m2);
    store_again_close(store, again);
    /* the audit trail: an ERASE per run, no task of the conversation's */
    decisions_as(store, "alice", got, sizeof(got));
    ck_assert_str_eq(got, "ADD run_p2 " SECRET_TASK "|ERASE run_t1 |ADD run_p1 water the garden "
                          "tomatoes|NOT run_t2 |ADD run_t1 |");
    run = run_get(store, "run_t1");
    ck_assert_ptr_nonnull(run);
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "erased");
    ck_assert_str_eq(json_string_value(json_object_get(run, "task")), "");
    ck_assert_str_eq(json_string_value(json_object_get(run, "summary")), "");
    json_decref(run);
    run = run_get(store, "run_b1");
    ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "active");
    json_decref(run);
    memory_free(m);
    store_close(store);
}
END_TEST

/* ---- the suite ------------------------------------------------------------- */

static void add_store_tests(TCase *tc)
{
    unit_leak_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_store_add);
    tcase_add_test(tc, test_store_not);
    tcase_add_test(tc, test_store_replace);
    tcase_add_test(tc, test_store_inactive_target_changes_nothing);
    tcase_add_test(tc, test_store_self_target);
    tcase_add_test(tc, test_store_merge);
    tcase_add_test(tc, test_store_duplicate_id);
    tcase_add_test(tc, test_store_sync);
    tcase_add_test(tc, test_store_sync_failed_callback_replays);
    tcase_add_test(tc, test_store_get_order);
    tcase_add_test(tc, test_store_get_follows_changes);
    tcase_add_test(tc, test_store_decisions_paging);
    tcase_add_test(tc, test_store_check_errors);
    tcase_add_test(tc, test_store_apply_allocation_failures);
    tcase_add_test(tc, test_store_reads_after_failed_write);
    tcase_add_test(tc, test_store_read_allocation_failures);
}

static void add_admit_tests(TCase *tc)
{
    unit_leak_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_admit_add_then_not);
    tcase_add_test(tc, test_admit_replace);
    tcase_add_test(tc, test_admit_merge);
    tcase_add_test(tc, test_admit_seed_test_plan);
    tcase_add_test(tc, test_admit_seed_sequence);
    tcase_add_test(tc, test_admit_two_memories);
    tcase_add_test(tc, test_admit_memory_opened_later);
    tcase_add_test(tc, test_admit_input_errors);
    tcase_add_test(tc, test_search_errors);
    tcase_add_test(tc, test_admit_fresh_ids);
    tcase_add_test(tc, test_admit_long_id_kept);
    tcase_add_test(tc, test_admit_after_failed_sync);
    tcase_add_test(tc, test_admit_allocation_failures);
    tcase_add_test(tc, test_admit_without_artifacts);
    tcase_add_test(tc, test_admit_same_text);
    tcase_add_test(tc, test_admit_rules_each_candidate);
    tcase_add_test(tc, test_search_leaves_runs_unchanged);
    tcase_add_test(tc, test_owner_isolation);
    tcase_add_test(tc, test_erase_with_conversation);
}

Suite *suite_memory(void)
{
    Suite *s = suite_create("memory");
    TCase *embed = tcase_create("memory_embed");
    TCase *index = tcase_create("memory_index");
    TCase *store_mem = tcase_create("memory_store_mem");
    TCase *store_sqlite = tcase_create("memory_store_sqlite");
    TCase *admit_mem = tcase_create("memory_admit_mem");
    TCase *admit_sqlite = tcase_create("memory_admit_sqlite");

    unit_leak_fixture(embed);
    tcase_add_test(embed, test_embed_deterministic);
    tcase_add_test(embed, test_embed_matches_reference);
    tcase_add_test(embed, test_embed_unit_norm_and_zero);
    tcase_add_test(embed, test_embed_case_and_plurals);
    tcase_add_test(embed, test_embed_ed_meets_base_form);
    tcase_add_test(embed, test_embed_seed_pairs);
    tcase_add_test(embed, test_embed_dot_matches_naive);
    suite_add_tcase(s, embed);

    unit_leak_fixture(index);
    tcase_set_timeout(index, 60);
    tcase_add_test(index, test_index_put_search_remove);
    tcase_add_test(index, test_index_top_k_order_and_ties);
    tcase_add_test(index, test_index_ties_after_swap_remove);
    tcase_add_test(index, test_index_k_capped);
    tcase_add_test(index, test_index_k_zero);
    tcase_add_test(index, test_index_exact_k_zero);
    tcase_add_test(index, test_index_ties_beyond_rescore_window);
    tcase_add_test(index, test_index_min_threshold);
    tcase_add_test(index, test_index_replace_by_id);
    tcase_add_test(index, test_index_remove_middle);
    tcase_add_test(index, test_index_remove_unknown);
    tcase_add_test(index, test_index_long_id);
    tcase_add_test(index, test_index_growth_and_rehash);
    tcase_add_test(index, test_index_churn);
    tcase_add_test(index, test_index_matches_brute_force);
    tcase_add_test(index, test_index_owned_matches_brute_force);
    tcase_add_test(index, test_index_allocation_failures);
    suite_add_tcase(s, index);

    tcase_add_unchecked_fixture(store_mem, unit_backend_mem, NULL);
    add_store_tests(store_mem);
    suite_add_tcase(s, store_mem);
    tcase_add_unchecked_fixture(store_sqlite, backend_sqlite, unit_backend_sqlite_remove);
    add_store_tests(store_sqlite);
    suite_add_tcase(s, store_sqlite);

    tcase_add_unchecked_fixture(admit_mem, unit_backend_mem, NULL);
    add_admit_tests(admit_mem);
    suite_add_tcase(s, admit_mem);
    tcase_add_unchecked_fixture(admit_sqlite, backend_sqlite, unit_backend_sqlite_remove);
    add_admit_tests(admit_sqlite);
    tcase_add_test(admit_sqlite, test_memory_reload_forgets_unstored_runs);   /* batches: SQLite's */
    suite_add_tcase(s, admit_sqlite);
    return s;
}
