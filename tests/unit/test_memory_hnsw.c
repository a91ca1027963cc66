/*
 * test_memory_hnsw.c — memory's approximate index: the C wrapper over
 * hnswlib (src/memory/hnsw.cc) and the graph behind memory_index
 * (src/memory/index.c).
 *
 * TCase "memory_hnsw": the wrapper adds, replaces (and undeletes),
 * removes and searches by label; a full graph says KEEL_ETOOBIG until
 * room is reserved; bad parameters are KEEL_EINVAL; allocation failures
 * are KEEL_ENOMEM, never an exception, and leave a graph as it was (the
 * wrapper's own struct through keel's failure injection; hnswlib's own
 * allocations under an address-space limit, not under ASan, whose
 * shadow memory needs the space); capacities hnswlib cannot count are
 * KEEL_ETOOBIG.
 * TCase "memory_index_graph": the index switches to the graph at
 * approximate_from runs (built in the background, the code scan
 * answering meanwhile) and back below it; recall@3 against exact search
 * on a few thousand random vectors, before and after removals; removed
 * runs never come back; puts, replacements and removes made while the
 * graph is built all reach it; many removals rebuild it; a graph whose
 * build fails leaves the code scan answering; memory_open refuses a bad
 * index conf naming the field, and a pack's memory.approximate_from is
 * read (a bad one names the field).
 * Every TCase has the leak fixture.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/alloc.h"
#include "memory/hnsw.h"
#include "memory/memory.h"
#include "pipeline/pipeline.h"
#include "store/store.h"
#include "unit.h"

/* splitmix64 */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void random_unit(uint64_t *state, float *v, int dim)
{
    double norm = 0;

    for (int i = 0; i < dim; i++) {
        v[i] = (float)((double)(rng_next(state) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        norm += (double)v[i] * v[i];
    }
    norm = sqrt(norm);
    for (int i = 0; i < dim; i++)
        v[i] = (float)(v[i] / norm);
}

static const struct hnsw_params PARAMS = {16, 64, 64};

/* ---- the wrapper ------------------------------------------------------------ */

#define W_DIM 16
#define W_N 500

START_TEST(test_hnsw_add_replace_remove_search)
{
    static float v[W_N][W_DIM];
    struct hnsw *h;
    uint64_t labels[5], rng = 99;
    float sims[5], other[W_DIM];
    int rc;

    ck_assert_int_eq(hnsw_new(W_DIM, W_N, &PARAMS, &h), KEEL_OK);
    for (int i = 0; i < W_N; i++) {
        random_unit(&rng, v[i], W_DIM);
        ck_assert_int_eq(hnsw_add(h, 1000 + (uint64_t)i, v[i]), KEEL_OK);
    }
    ck_assert_uint_eq(hnsw_count(h), W_N);
    ck_assert_int_eq(hnsw_has(h, 1000), 1);
    ck_assert_int_eq(hnsw_has(h, 999), 0);
    /* every vector finds itself first, with similarity 1 */
    for (int i = 0; i < W_N; i++) {
        size_t n = hnsw_search(h, v[i], 3, labels, sims, &rc);
        ck_assert_int_eq(rc, KEEL_OK);
        ck_assert_uint_eq(n, 3);
        ck_assert_uint_eq(labels[0], 1000 + (uint64_t)i);
        ck_assert_float_eq_tol(sims[0], 1.0f, 1e-5f);
        ck_assert(sims[0] >= sims[1] && sims[1] >= sims[2]);
    }
    ck_assert_uint_eq(hnsw_search(h, v[0], 0, labels, sims, NULL), 0);
    /* replace: the label now has the other vector */
    random_unit(&rng, other, W_DIM);
    ck_assert_int_eq(hnsw_add(h, 1007, other), KEEL_OK);
    ck_assert_uint_eq(hnsw_count(h), W_N);
    hnsw_search(h, other, 1, labels, sims, &rc);
    ck_assert_uint_eq(labels[0], 1007);
    ck_assert_float_eq_tol(sims[0], 1.0f, 1e-5f);
    hnsw_search(h, v[7], 1, labels, sims, &rc);
    ck_assert(labels[0] != 1007 || sims[0] < 0.999f);
    /* remove: never returned; twice or unknown: nothing */
    ck_assert_int_eq(hnsw_remove(h, 1003), KEEL_OK);
    ck_assert_int_eq(hnsw_remove(h, 1003), KEEL_OK);
    ck_assert_int_eq(hnsw_remove(h, 5), KEEL_OK);
    ck_assert_uint_eq(hnsw_deleted(h), 1);
    ck_assert_int_eq(hnsw_has(h, 1003), 0);
    for (int k = 1; k <= 5; k++) {
        size_t n = hnsw_search(h, v[3], (size_t)k, labels, sims, &rc);
        ck_assert_uint_eq(n, (size_t)k);
        for (size_t j = 0; j < n; j++)
            ck_assert_uint_ne(labels[j], 1003);
    }
    /* added again: undeleted with its new vector */
    ck_assert_int_eq(hnsw_add(h, 1003, v[3]), KEEL_OK);
    ck_assert_uint_eq(hnsw_deleted(h), 0);
    hnsw_search(h, v[3], 1, labels, sims, &rc);
    ck_assert_uint_eq(labels[0], 1003);
    ck_assert_uint_ge(hnsw_bytes(h), (size_t)W_N * W_DIM * sizeof(float));
    hnsw_free(h);
    hnsw_free(NULL);
}
END_TEST

START_TEST(test_hnsw_full_and_reserve)
{
    struct hnsw *h;
    float v[W_DIM];
    uint64_t rng = 5, label;
    float sim;

    ck_assert_int_eq(hnsw_new(W_DIM, 10, &PARAMS, &h), KEEL_OK);
    for (uint64_t i = 0; i < 10; i++) {
        random_unit(&rng, v, W_DIM);
        ck_assert_int_eq(hnsw_add(h, i, v), KEEL_OK);
    }
    random_unit(&rng, v, W_DIM);
    ck_assert_int_eq(hnsw_add(h, 10, v), KEEL_ETOOBIG);
    ck_assert_int_eq(hnsw_add(h, 3, v), KEEL_OK);   /* a replacement needs no room */
    ck_assert_int_eq(hnsw_reserve(h, 5), KEEL_OK);   /* smaller: nothing */
    ck_assert_uint_eq(hnsw_capacity(h), 10);
    ck_assert_int_eq(hnsw_reserve(h, 40), KEEL_OK);
    ck_assert_uint_eq(hnsw_capacity(h), 40);
    random_unit(&rng, v, W_DIM);
    ck_assert_int_eq(hnsw_add(h, 10, v), KEEL_OK);
    ck_assert_uint_eq(hnsw_search(h, v, 1, &label, &sim, NULL), 1);
    ck_assert_uint_eq(label, 10);
    hnsw_free(h);
}
END_TEST

START_TEST(test_hnsw_bad_params)
{
    struct hnsw *h = (struct hnsw *)&h;
    struct hnsw_params p = PARAMS;

    ck_assert_int_eq(hnsw_new(0, 10, &p, &h), KEEL_EINVAL);
    ck_assert_ptr_null(h);
    p.m = 1;
    ck_assert_int_eq(hnsw_new(8, 10, &p, &h), KEEL_EINVAL);
    p = PARAMS;
    p.ef_search = 0;
    ck_assert_int_eq(hnsw_new(8, 10, &p, &h), KEEL_EINVAL);
    p = PARAMS;
    p.ef_construction = 0;
    ck_assert_int_eq(hnsw_new(8, 10, &p, &h), KEEL_EINVAL);
}
END_TEST

#if !defined(__SANITIZE_ADDRESS__)   /* ASan's shadow memory needs the address space */
/* Limits the address space to what the process uses now plus `extra`
 * bytes, so a big allocation fails on any machine; 0: the old limit
 * back (in `saved`). */
static void limit_memory(size_t extra, struct rlimit *saved)
{
    struct rlimit r;
    unsigned long pages = 0;
    FILE *f;

    if (!extra) {
        ck_assert_int_eq(setrlimit(RLIMIT_AS, saved), 0);
        return;
    }
    ck_assert_int_eq(getrlimit(RLIMIT_AS, saved), 0);
    ck_assert_ptr_nonnull(f = fopen("/proc/self/statm", "r"));
    ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    r = *saved;
    r.rlim_cur = (rlim_t)(pages * (unsigned long)sysconf(_SC_PAGESIZE) + extra);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &r), 0);
}
#endif

START_TEST(test_hnsw_allocation_failures)
{
    struct hnsw *h = NULL;
    long before = keel_alloc_live();
    float v[W_DIM] = {1};
    uint64_t label;
    float sim;

    keel_alloc_fail_after(0, 1);
    ck_assert_int_eq(hnsw_new(W_DIM, 10, &PARAMS, &h), KEEL_ENOMEM);
    keel_alloc_fail_after(-1, 0);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(keel_alloc_live(), before);
    ck_assert_int_eq(hnsw_new(W_DIM, HNSW_CAPACITY_MAX + 1, &PARAMS, &h), KEEL_ETOOBIG);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(hnsw_new(W_DIM, 10, &PARAMS, &h), KEEL_OK);
    ck_assert_int_eq(hnsw_reserve(h, HNSW_CAPACITY_MAX + 1), KEEL_ETOOBIG);
#if !defined(__SANITIZE_ADDRESS__)
    {
        /* hnswlib's own allocations (malloc, new) fail: a bad_alloc or
         * its "Not enough memory", both KEEL_ENOMEM, never a throw */
        struct rlimit saved;
        struct hnsw *big = NULL;
        int rc_new, rc_reserve;
        limit_memory((size_t)64 << 20, &saved);
        rc_new = hnsw_new(W_DIM, (size_t)20 << 20, &PARAMS, &big);
        rc_reserve = hnsw_reserve(h, (size_t)20 << 20);
        limit_memory(0, &saved);
        ck_assert_int_eq(rc_new, KEEL_ENOMEM);
        ck_assert_ptr_null(big);
        ck_assert_int_eq(rc_reserve, KEEL_ENOMEM);
    }
#endif
    /* the graph is as it was, and usable */
    ck_assert_uint_eq(hnsw_capacity(h), 10);
    for (uint64_t i = 0; i < 10; i++) {
        v[i % W_DIM] += 1.0f;
        ck_assert_int_eq(hnsw_add(h, i, v), KEEL_OK);
    }
    ck_assert_int_eq(hnsw_add(h, 10, v), KEEL_ETOOBIG);
    ck_assert_uint_eq(hnsw_search(h, v, 1, &label, &sim, NULL), 1);
    ck_assert_uint_eq(label, 9);
    ck_assert_int_eq(hnsw_reserve(h, 20), KEEL_OK);
    ck_assert_int_eq(hnsw_add(h, 10, v), KEEL_OK);
    hnsw_free(h);
    ck_assert_int_eq(keel_alloc_live(), before);
}
END_TEST

/* ---- the graph behind memory_index ------------------------------------------------ */

#define G_DIM 32

static struct memory_index *graph_index(size_t from, int threads)
{
    struct memory_index *ix = memory_index_new(G_DIM);
    struct memory_index_conf c;

    ck_assert_ptr_nonnull(ix);
    memory_index_conf_default(&c);
    c.approximate_from = from;
    c.threads = threads;
    ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_OK);
    return ix;
}

static void put_ok(struct memory_index *ix, const char *id, const float *v)
{
    int rc = memory_index_put(ix, id, v);

    ck_assert_msg(rc == KEEL_OK, "put %s: %s", id, keel_strerror(rc));
}

static const char *answering(struct memory_index *ix)
{
    struct memory_index_stats st;

    memory_index_stats(ix, &st);
    return st.answering;
}

/* recall@3 of memory_index_search against the exact search, over
 * `queries` random queries and the stored vectors `v` (every 7th). */
static double recall3(struct memory_index *ix, const float *v, int n, uint64_t *rng, int queries)
{
    size_t found = 0, wanted = 0;
    float q[G_DIM];

    for (int i = 0; i < queries; i++) {
        struct memory_hit a[3], e[3];
        size_t na, ne;
        if (i % 2)
            random_unit(rng, q, G_DIM);
        else
            memcpy(q, v + (size_t)(i * 7 % n) * G_DIM, sizeof(q));
        na = memory_index_search(ix, q, 3, -1.0f, a);
        ne = memory_index_search_exact(ix, q, 3, -1.0f, e);
        for (size_t x = 0; x < ne; x++)
            for (size_t y = 0; y < na; y++)
                found += !strcmp(e[x].id, a[y].id);
        wanted += ne;
        /* the similarities returned are exact, best first */
        for (size_t y = 1; y < na; y++)
            ck_assert(a[y - 1].similarity >= a[y].similarity);
    }
    return wanted ? (double)found / (double)wanted : 1.0;
}

/* Searches by owner (issue 7), with the scan (from 0) and the graph:
 * run i belongs to owner tag 7 when i % 10 == 0 (a tenth), else 3. No
 * hit is ever another owner's, and the owner's 3 nearest are found (the
 * graph's widened candidates, else the scan). */
START_TEST(test_owner_filtered_search)
{
    static const size_t froms[] = {0, 500};
    enum { N = 2000 };
    float *v = keel_malloc((size_t)N * G_DIM * sizeof(float)), q[G_DIM];

    ck_assert_ptr_nonnull(v);
    for (size_t f = 0; f < 2; f++) {
        struct memory_index *ix = graph_index(froms[f], 1);
        uint64_t rng = 5, none = 99;
        size_t found = 0, wanted = 0;
        char id[32];

        for (int i = 0; i < N; i++) {
            random_unit(&rng, v + (size_t)i * G_DIM, G_DIM);
            snprintf(id, sizeof(id), "r%d", i);
            ck_assert_int_eq(memory_index_put_owned(ix, id, i % 10 ? 3 : 7,
                                                    v + (size_t)i * G_DIM), KEEL_OK);
        }
        if (froms[f]) {
            ck_assert_int_eq(memory_index_wait(ix), 1);
            ck_assert_str_eq(answering(ix), "hnsw");
        }
        for (int k = 0; k < 100; k++) {
            uint64_t owner = k % 2 ? 7 : 3;
            struct memory_hit hits[3];
            float best[3] = {-2, -2, -2};
            size_t n;
            if (k % 4 < 2)
                memcpy(q, v + (size_t)(k * 13 % N) * G_DIM, sizeof(q));
            else
                random_unit(&rng, q, G_DIM);
            n = memory_index_search_owned(ix, q, 3, -1.0f, &owner, hits);
            ck_assert_uint_eq(n, 3);
            for (size_t h = 0; h < n; h++) {
                int i = (int)strtol(hits[h].id + 1, NULL, 10);
                ck_assert_msg((i % 10 ? 3u : 7u) == owner, "%s is not owner %u's", hits[h].id,
                              (unsigned)owner);
            }
            /* the owner's exact 3 nearest */
            for (int i = 0; i < N; i++) {
                float sim;
                if ((i % 10 ? 3u : 7u) != owner)
                    continue;
                sim = memory_dot(q, v + (size_t)i * G_DIM, G_DIM);
                for (int b = 0; b < 3; b++)
                    if (sim > best[b]) {
                        memmove(best + b + 1, best + b, (size_t)(2 - b) * sizeof(float));
                        best[b] = sim;
                        break;
                    }
            }
            for (int b = 0; b < 3; b++)
                for (size_t h = 0; h < n; h++)
                    found += hits[h].similarity == best[b];
            wanted += 3;
        }
        ck_assert_msg((double)found / (double)wanted >= 0.95, "from %zu: recall@3 %.3f",
                      froms[f], (double)found / (double)wanted);
        {
            struct memory_hit hits[3];
            ck_assert_uint_eq(memory_index_search_owned(ix, q, 3, -1.0f, &none, hits), 0);
        }
        memory_index_free(ix);
    }
    keel_free(v);
}
END_TEST

#define R_N 4000

START_TEST(test_graph_threshold_switch)
{
    struct memory_index *ix = graph_index(500, 1);
    float v[G_DIM];
    uint64_t rng = 11;
    char id[32];
    struct memory_hit hit;

    for (int i = 0; i < 499; i++) {
        random_unit(&rng, v, G_DIM);
        snprintf(id, sizeof(id), "r%d", i);
        put_ok(ix, id, v);
    }
    ck_assert_str_eq(answering(ix), "int8 scan");
    ck_assert_int_eq(memory_index_wait(ix), 0);   /* no graph: nothing to wait for */
    random_unit(&rng, v, G_DIM);
    put_ok(ix, "r499", v);   /* the 500th: the build starts */
    ck_assert_int_eq(memory_index_wait(ix), 1);
    ck_assert_str_eq(answering(ix), "hnsw");
    ck_assert_uint_eq(memory_index_search(ix, v, 1, 0.5f, &hit), 1);
    ck_assert_str_eq(hit.id, "r499");
    memory_index_remove(ix, "r3");
    ck_assert_str_eq(answering(ix), "int8 scan");   /* below: the scan again */
    put_ok(ix, "r3", v);
    ck_assert_str_eq(answering(ix), "hnsw");
    /* 0: never the graph */
    {
        struct memory_index_conf c;
        memory_index_conf_default(&c);
        c.approximate_from = 0;
        ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_OK);
        ck_assert_str_eq(answering(ix), "int8 scan");
        c.threads = 9;
        ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_EINVAL);
    }
    memory_index_free(ix);
}
END_TEST

START_TEST(test_graph_recall_and_removals)
{
    struct memory_index *ix = graph_index(1000, 2);
    float *v = malloc((size_t)R_N * G_DIM * sizeof(float));
    uint64_t rng = 4242;
    char id[32];
    double r;

    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < R_N; i++) {
        random_unit(&rng, v + (size_t)i * G_DIM, G_DIM);
        snprintf(id, sizeof(id), "v%04d", i);
        put_ok(ix, id, v + (size_t)i * G_DIM);
    }
    ck_assert_int_eq(memory_index_wait(ix), 1);
    ck_assert_str_eq(answering(ix), "hnsw");
    r = recall3(ix, v, R_N, &rng, 300);
    ck_assert_msg(r >= 0.95, "recall@3 %.3f below 0.95", r);
    /* every fifth goes; none comes back, recall holds */
    for (int i = 0; i < R_N; i += 5) {
        snprintf(id, sizeof(id), "v%04d", i);
        memory_index_remove(ix, id);
    }
    ck_assert_str_eq(answering(ix), "hnsw");
    for (int i = 0; i < R_N; i += 5) {
        struct memory_hit hits[10];
        size_t n = memory_index_search(ix, v + (size_t)i * G_DIM, 10, -1.0f, hits);
        snprintf(id, sizeof(id), "v%04d", i);
        ck_assert_uint_eq(n, 10);
        for (size_t j = 0; j < n; j++)
            ck_assert_msg(strcmp(hits[j].id, id), "removed %s found", id);
    }
    r = recall3(ix, v, R_N, &rng, 300);
    ck_assert_msg(r >= 0.95, "recall@3 %.3f below 0.95 after removals", r);
    memory_index_free(ix);
    free(v);
}
END_TEST

/* Puts, replacements and removes while the builders run: afterwards
 * the graph holds exactly the live runs with their last vectors. */
START_TEST(test_graph_changes_during_build)
{
    struct memory_index *ix = memory_index_new(G_DIM);
    struct memory_index_conf c;
    float *v = malloc((size_t)(R_N + 1000) * G_DIM * sizeof(float));
    static int gone[R_N + 1000];
    uint64_t rng = 77;
    char id[32];
    int misses = 0;

    ck_assert_ptr_nonnull(ix);
    ck_assert_ptr_nonnull(v);
    memory_index_conf_default(&c);
    c.approximate_from = 0;
    ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_OK);
    for (int i = 0; i < R_N; i++) {
        random_unit(&rng, v + (size_t)i * G_DIM, G_DIM);
        snprintf(id, sizeof(id), "v%04d", i);
        put_ok(ix, id, v + (size_t)i * G_DIM);
    }
    c.approximate_from = 1000;
    c.threads = 2;
    ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_OK);   /* the build starts */
    for (int i = 0; i < 1000; i++) {
        int old = (i * 13) % R_N;
        /* new runs, */
        random_unit(&rng, v + (size_t)(R_N + i) * G_DIM, G_DIM);
        snprintf(id, sizeof(id), "v%04d", R_N + i);
        put_ok(ix, id, v + (size_t)(R_N + i) * G_DIM);
        /* replaced vectors and removed runs, early and late labels */
        snprintf(id, sizeof(id), "v%04d", old);
        if (i % 3) {
            if (!gone[old]) {
                random_unit(&rng, v + (size_t)old * G_DIM, G_DIM);
                put_ok(ix, id, v + (size_t)old * G_DIM);
            }
        } else {
            memory_index_remove(ix, id);
            gone[old] = 1;
        }
    }
    ck_assert_int_eq(memory_index_wait(ix), 1);
    ck_assert_str_eq(answering(ix), "hnsw");
    for (int i = 0; i < R_N + 1000; i++) {
        struct memory_hit hits[3];
        size_t n = memory_index_search(ix, v + (size_t)i * G_DIM, 3, -1.0f, hits);
        snprintf(id, sizeof(id), "v%04d", i);
        if (gone[i]) {
            for (size_t j = 0; j < n; j++)
                ck_assert_msg(strcmp(hits[j].id, id), "removed %s found", id);
        } else if (!n || strcmp(hits[0].id, id) || hits[0].similarity < 0.9999f) {
            misses++;
        }
    }
    /* A graph may miss a few; a run the builders skipped or a stale
     * vector would miss every time. */
    ck_assert_msg(misses <= (R_N + 1000) / 100, "%d runs not found by their own vector", misses);
    memory_index_free(ix);
    free(v);
}
END_TEST

/* Removed runs leave the graph's answers: 60 copies of one vector,
 * all but one removed, must not crowd out the next nearest runs (a
 * graph that kept them would fill its candidates with them). */
START_TEST(test_graph_removed_leave_candidates)
{
    struct memory_index *ix = graph_index(100, 1);
    float x[G_DIM], v[G_DIM];
    struct memory_hit hits[3], exact[3];
    uint64_t rng = 21;
    char id[32];

    random_unit(&rng, x, G_DIM);
    for (int i = 0; i < 60; i++) {
        snprintf(id, sizeof(id), "dup%02d", i);
        put_ok(ix, id, x);
    }
    for (int i = 0; i < 2000; i++) {
        random_unit(&rng, v, G_DIM);
        for (int d = 0; d < G_DIM; d++)   /* some near x */
            v[d] = i % 10 ? v[d] : (x[d] * 3 + v[d]) / 4;
        snprintf(id, sizeof(id), "v%04d", i);
        put_ok(ix, id, v);
    }
    ck_assert_int_eq(memory_index_wait(ix), 1);
    for (int i = 1; i < 60; i++) {
        snprintf(id, sizeof(id), "dup%02d", i);
        memory_index_remove(ix, id);
    }
    ck_assert_str_eq(answering(ix), "hnsw");
    ck_assert_uint_eq(memory_index_search(ix, x, 3, -1.0f, hits), 3);
    ck_assert_uint_eq(memory_index_search_exact(ix, x, 3, -1.0f, exact), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_str_eq(hits[i].id, exact[i].id);
    ck_assert_str_eq(hits[0].id, "dup00");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_graph_rebuilt_after_removals)
{
    struct memory_index *ix = graph_index(100, 1);
    struct memory_index_stats st;
    float *v = malloc((size_t)400 * G_DIM * sizeof(float));
    uint64_t rng = 3;
    char id[32];

    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < 400; i++) {
        random_unit(&rng, v + (size_t)i * G_DIM, G_DIM);
        snprintf(id, sizeof(id), "v%03d", i);
        put_ok(ix, id, v + (size_t)i * G_DIM);
    }
    ck_assert_int_eq(memory_index_wait(ix), 1);
    memory_index_stats(ix, &st);
    ck_assert_uint_eq(st.builds, 1);
    for (int i = 0; i < 250; i++) {   /* removed outnumber live: a new build */
        snprintf(id, sizeof(id), "v%03d", i);
        memory_index_remove(ix, id);
        if (i == 198) {   /* 199 removed, 201 live: not yet */
            memory_index_stats(ix, &st);
            ck_assert_uint_eq(st.builds, 1);
            ck_assert_int_eq(st.graph, 2);
        }
    }
    ck_assert_int_eq(memory_index_wait(ix), 1);
    memory_index_stats(ix, &st);
    ck_assert_uint_eq(st.builds, 2);
    ck_assert_str_eq(answering(ix), "hnsw");
    for (int i = 0; i < 400; i++) {
        struct memory_hit hit;
        size_t n = memory_index_search(ix, v + (size_t)i * G_DIM, 1, -1.0f, &hit);
        snprintf(id, sizeof(id), "v%03d", i);
        ck_assert_uint_eq(n, 1);
        if (i < 250)
            ck_assert_str_ne(hit.id, id);
        else
            ck_assert_str_eq(hit.id, id);
    }
    memory_index_free(ix);
    free(v);
}
END_TEST

START_TEST(test_graph_build_fails)
{
    struct memory_index *ix = memory_index_new(G_DIM);
    struct memory_index_conf c;
    struct memory_index_stats st;
    float v[G_DIM];
    uint64_t rng = 8;
    char id[32];
    struct memory_hit hit;

    ck_assert_ptr_nonnull(ix);
    memory_index_conf_default(&c);
    c.approximate_from = 0;
    ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_OK);
    for (int i = 0; i < 300; i++) {
        random_unit(&rng, v, G_DIM);
        snprintf(id, sizeof(id), "v%03d", i);
        put_ok(ix, id, v);
    }
    c.approximate_from = 100;
    keel_alloc_fail_after(0, 1);   /* the graph's struct cannot be made */
    ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_OK);
    keel_alloc_fail_after(-1, 0);
    ck_assert_int_eq(memory_index_wait(ix), 0);
    memory_index_stats(ix, &st);
    ck_assert_int_eq(st.graph, 3);
    ck_assert_str_eq(st.answering, "int8 scan");
    ck_assert_uint_eq(memory_index_search(ix, v, 1, 0.5f, &hit), 1);
    ck_assert_str_eq(hit.id, "v299");
    /* puts go on without it; configuring again tries again */
    put_ok(ix, "more", v);
    ck_assert_int_eq(memory_index_configure(ix, &c), KEEL_OK);
    ck_assert_int_eq(memory_index_wait(ix), 1);
    ck_assert_str_eq(answering(ix), "hnsw");
    memory_index_free(ix);
}
END_TEST

START_TEST(test_graph_open_bad_conf)
{
    struct store *store;
    struct memory *m = NULL;
    struct memory_conf conf;
    struct keel_error err;

    keel_error_clear(&err);
    ck_assert_int_eq(store_mem_open(&store, &err), KEEL_OK);
    memory_conf_default(&conf);
    conf.index.ef_search = 0;
    ck_assert_int_eq(memory_open(store, &conf, NULL, &m, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "memory.index");
    ck_assert_ptr_null(m);
    store_close(store);
}
END_TEST

/* The scholar pack with its approximate_from line set to `value`, in
 * `dir`; then a pipeline over it. */
static int pipeline_with(const char *dir, const char *value, struct keel_error *err)
{
    struct store *store;
    struct pipeline *pl = NULL;
    char cmd[2048];
    int rc;

    snprintf(cmd, sizeof(cmd),
             "rm -rf '%s/scholar' && cp -r '%s/packs/scholar' '%s/' && "
             "sed -i 's/^  approximate_from: .*/  approximate_from: %s/' '%s/scholar/pack.yaml' && "
             "grep -q '^  approximate_from: %s$' '%s/scholar/pack.yaml'",
             dir, unit_root(), dir, value, dir, value, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(store_mem_open(&store, err), KEEL_OK);
    {
        struct pipeline_options options = {.packs_dir = dir, .pack = "scholar", .store = store,
                                           .providers = "none", .llm = {NULL, NULL, NULL},
                                           .websearch_url = "none"};
        rc = pipeline_new(&options, &pl, err);
    }
    pipeline_free(pl);
    store_close(store);
    return rc;
}

START_TEST(test_graph_pack_setting)
{
    struct keel_error err;
    char dir[256];

    unit_temp_dir(dir, sizeof(dir), "hnsw-pack", 0);
    keel_error_clear(&err);
    ck_assert_int_eq(pipeline_with(dir, "1000", &err), KEEL_OK);
    ck_assert_int_eq(pipeline_with(dir, "0", &err), KEEL_OK);
    ck_assert_int_eq(pipeline_with(dir, "lots", &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "memory.approximate_from");
    keel_error_clear(&err);
    ck_assert_int_eq(pipeline_with(dir, "-5", &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "memory.approximate_from");
    {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
}
END_TEST

Suite *suite_memory_hnsw(void)
{
    Suite *s = suite_create("memory_hnsw");
    TCase *wrapper = tcase_create("memory_hnsw");
    TCase *graph = tcase_create("memory_index_graph");

    unit_leak_fixture(wrapper);
    tcase_add_test(wrapper, test_hnsw_add_replace_remove_search);
    tcase_add_test(wrapper, test_hnsw_full_and_reserve);
    tcase_add_test(wrapper, test_hnsw_bad_params);
    tcase_add_test(wrapper, test_hnsw_allocation_failures);
    suite_add_tcase(s, wrapper);

    unit_leak_fixture(graph);
    tcase_set_timeout(graph, 120);
    tcase_add_test(graph, test_graph_threshold_switch);
    tcase_add_test(graph, test_graph_recall_and_removals);
    tcase_add_test(graph, test_graph_changes_during_build);
    tcase_add_test(graph, test_graph_removed_leave_candidates);
    tcase_add_test(graph, test_graph_rebuilt_after_removals);
    tcase_add_test(graph, test_graph_build_fails);
    tcase_add_test(graph, test_graph_open_bad_conf);
    tcase_add_test(graph, test_graph_pack_setting);
    tcase_add_test(graph, test_owner_filtered_search);
    suite_add_tcase(s, graph);
    return s;
}
