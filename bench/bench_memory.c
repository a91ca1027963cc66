/*
 * bench_memory.c — memory admission's search at 10k, 100k and 1M runs:
 * one line per size,
 *
 *   {"bench": "memory.decide", "runs": N, "median_us": …, "p99_us": …,
 *    "recall_at3": …, "bytes_per_run": …, "index": "exact", "scope": …}
 *
 * A decision's cost that grows with the memory is embedding the new run
 * and finding its 3 nearest active runs; that is what is timed (the
 * store's three point reads and one write do not grow with it). The
 * runs are synthetic tasks and summaries from a seeded generator, so
 * every run of the bench sees the same data; half the queries are
 * variants of stored runs. recall_at3 compares the index's 3 nearest
 * (8-bit code scan, then exact rescoring) with an exact scan of every
 * float vector.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/alloc.h"
#include "memory/memory.h"

#define QUERIES 300

static const char *const verbs[] = {"Generate", "Build", "Create", "Refactor", "Test",
                                    "Document", "Optimize", "Migrate", "Review", "Deploy"};
static const char *const things[] = {"SQL queries", "REST API", "database schema",
                                     "login page", "payment flow", "search index",
                                     "report export", "cache layer", "CI pipeline",
                                     "mobile client", "rate limiter", "audit log"};
static const char *const domains[] = {"user data", "orders", "invoices", "sessions",
                                      "products", "tickets", "shipments", "reviews",
                                      "subscriptions", "inventory", "payroll", "claims"};

static uint64_t state;

static uint32_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 32);
}

static void run_text(char *task, size_t nt, char *summary, size_t ns)
{
    snprintf(task, nt, "%s %s for %s #%u", verbs[next() % 10], things[next() % 12],
             domains[next() % 12], next() % 5000);
    snprintf(summary, ns, "Used %s with %s; step %u of %u", things[next() % 12],
             domains[next() % 12], next() % 100, next() % 100);
}

struct query {
    char task[160], summary[160];
};

struct timing {
    double median_us, p99_us, recall;
};

/* The queries, the same for every index of one size: half are variants
 * of stored runs (near neighbours exist), half new tasks. */
static void make_queries(struct query *qs, size_t runs)
{
    for (size_t q = 0; q < QUERIES; q++) {
        if (q % 2) {
            run_text(qs[q].task, sizeof(qs[q].task), qs[q].summary, sizeof(qs[q].summary));
        } else {
            uint64_t keep = state;
            state = 0x9e3779b97f4a7c15ull;
            for (uint32_t skip = next() % (uint32_t)(runs < 1000 ? runs : 1000); skip; skip--)
                run_text(qs[q].task, sizeof(qs[q].task), qs[q].summary, sizeof(qs[q].summary));
            run_text(qs[q].task, sizeof(qs[q].task), qs[q].summary, sizeof(qs[q].summary));
            snprintf(qs[q].summary, sizeof(qs[q].summary), "A different approach, attempt %zu",
                     q);
            state = keep;
        }
    }
}

/* Times embedding + the index's top 3 (≥ 0.7) for every query, and the
 * recall@3 of the index's 3 nearest (no threshold) against exact. */
static void time_queries(struct memory_index *ix, const struct query *qs, struct timing *t)
{
    uint64_t samples[QUERIES];
    size_t found = 0, wanted = 0;
    float v[MEMORY_DIM];

    for (size_t q = 0; q < QUERIES; q++) {
        struct memory_hit hits[MEMORY_TOP_K], exact[MEMORY_TOP_K];
        uint64_t t0 = bench_now_ns();
        size_t n, m;
        memory_embed(qs[q].task, qs[q].summary, v);
        memory_index_search(ix, v, MEMORY_TOP_K, 0.7f, hits);
        samples[q] = bench_now_ns() - t0;
        n = memory_index_search(ix, v, MEMORY_TOP_K, -1.0f, hits);
        m = memory_index_search_exact(ix, v, MEMORY_TOP_K, -1.0f, exact);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                found += !strcmp(exact[i].id, hits[j].id);
        wanted += m;
    }
    bench_sort(samples, QUERIES);
    t->median_us = samples[QUERIES / 2] / 1e3;
    t->p99_us = samples[QUERIES * 99 / 100] / 1e3;
    t->recall = wanted ? (double)found / (double)wanted : 1.0;
}

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);

    return s && *s ? (int)strtol(s, NULL, 10) : dflt;
}

/* Times embedding + the top 3 (≥ 0.7) among one owner's runs, as
 * admission searches (issue 7): run i belongs to owner i % owners + 1,
 * query q asks as owner q % owners + 1. */
static void time_owned(struct memory_index *ix, const struct query *qs, size_t owners,
                       struct timing *t)
{
    uint64_t samples[QUERIES];
    float v[MEMORY_DIM];

    for (size_t q = 0; q < QUERIES; q++) {
        struct memory_hit hits[MEMORY_TOP_K];
        uint64_t owner = q % owners + 1, t0 = bench_now_ns();
        memory_embed(qs[q].task, qs[q].summary, v);
        memory_index_search_owned(ix, v, MEMORY_TOP_K, 0.7f, &owner, hits);
        samples[q] = bench_now_ns() - t0;
    }
    bench_sort(samples, QUERIES);
    t->median_us = samples[QUERIES / 2] / 1e3;
    t->p99_us = samples[QUERIES * 99 / 100] / 1e3;
    t->recall = -1;
}

/* KEEL_BENCH_HNSW_EF_SWEEP="32,64,128": a line per ef_search on the
 * same graph (for tuning; the conf's ef_search is set back after). */
static void sweep_ef(struct memory_index *ix, const struct memory_index_conf *conf,
                     const struct query *qs, size_t runs)
{
    const char *list = getenv("KEEL_BENCH_HNSW_EF_SWEEP");
    struct memory_index_conf c = *conf;
    struct timing t;
    char *end;

    while (list && *list) {
        long ef = strtol(list, &end, 10);
        if (end == list)
            break;
        c.ef_search = (int)ef;
        if (!memory_index_configure(ix, &c)) {
            time_queries(ix, qs, &t);
            printf("{\"bench\": \"memory.decide.ef\", \"runs\": %zu, \"ef_search\": %ld,"
                   " \"median_us\": %.1f, \"p99_us\": %.1f, \"recall_at3\": %.4f}\n",
                   runs, ef, t.median_us, t.p99_us, t.recall);
            fflush(stdout);
        }
        list = *end == ',' ? end + 1 : end;
    }
    memory_index_configure(ix, conf);
}

static int one_size(size_t runs, const struct memory_index_conf *conf)
{
    struct memory_index *ix = memory_index_new(MEMORY_DIM);
    struct memory_index_conf off = *conf;
    struct memory_index_stats st;
    struct timing scan, used, owned, owned_used;
    size_t owners = (size_t)(env_int("KEEL_BENCH_MEMORY_OWNERS", 10) > 0
                                 ? env_int("KEEL_BENCH_MEMORY_OWNERS", 10) : 1);
    struct query *qs = keel_malloc(QUERIES * sizeof(*qs));
    float v[MEMORY_DIM];
    char task[160], summary[160], id[32];
    double build_s = 0;

    off.approximate_from = 0;
    if (!ix || !qs || memory_index_configure(ix, &off)) {
        memory_index_free(ix);
        keel_free(qs);
        return 1;
    }
    state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < runs; i++) {
        run_text(task, sizeof(task), summary, sizeof(summary));
        memory_embed(task, summary, v);
        snprintf(id, sizeof(id), "run_%zu", i);
        if (memory_index_put_owned(ix, id, i % owners + 1, v)) {
            memory_index_free(ix);
            keel_free(qs);
            return 1;
        }
    }
    make_queries(qs, runs);
    /* 1. the code scan, for every size */
    time_queries(ix, qs, &scan);
    time_owned(ix, qs, owners, &owned);
    used = scan;
    owned_used = owned;
    /* 2. the graph, from the size it is used at: built as a service
     * builds it (in the background), waited for */
    if (conf->approximate_from && runs >= conf->approximate_from) {
        uint64_t t0 = bench_now_ns();
        if (memory_index_configure(ix, conf) || !memory_index_wait(ix)) {
            fprintf(stderr, "bench memory: the graph of %zu runs could not be built\n", runs);
            memory_index_free(ix);
            keel_free(qs);
            return 1;
        }
        build_s = (bench_now_ns() - t0) / 1e9;
        sweep_ef(ix, conf, qs, runs);
        time_queries(ix, qs, &used);
        time_owned(ix, qs, owners, &owned_used);
    }
    printf("{\"bench\": \"memory.decide.owned\", \"runs\": %zu, \"owners\": %zu,"
           " \"median_us\": %.1f, \"p99_us\": %.1f, \"scan_median_us\": %.1f,"
           " \"scan_p99_us\": %.1f}\n",
           runs, owners, owned_used.median_us, owned_used.p99_us, owned.median_us,
           owned.p99_us);
    memory_index_stats(ix, &st);
    printf("{\"bench\": \"memory.decide\", \"runs\": %zu, \"median_us\": %.1f, \"p99_us\": %.1f,"
           " \"recall_at3\": %.4f, \"bytes_per_run\": %zu, \"index\": \"%s\","
           " \"scan_median_us\": %.1f, \"scan_p99_us\": %.1f, \"scan_recall_at3\": %.4f,",
           runs, used.median_us, used.p99_us, used.recall, st.bytes / runs, st.answering,
           scan.median_us, scan.p99_us, scan.recall);
    if (!strcmp(st.answering, "hnsw"))
        printf(" \"build_s\": %.1f, \"m\": %d, \"ef_construction\": %d, \"ef_search\": %d,"
               " \"threads\": %d,",
               build_s, conf->m, conf->ef_construction, conf->ef_search, conf->threads);
    printf(" \"scope\": \"embed + top 3 of the active runs\", \"n\": %d}\n", QUERIES);
    fflush(stdout);
    memory_index_free(ix);
    keel_free(qs);
    return 0;
}

/* KEEL_BENCH_MEMORY_MAX caps the sizes; KEEL_BENCH_HNSW_FROM, _M, _EFC,
 * _EF and _THREADS override the graph's conf (for tuning it). */
int bench_memory(void)
{
    const char *max = getenv("KEEL_BENCH_MEMORY_MAX");
    size_t limit = max ? (size_t)strtoull(max, NULL, 10) : 1000000;
    struct memory_index_conf conf;
    int rc = 0;

    memory_index_conf_default(&conf);
    conf.approximate_from = (size_t)env_int("KEEL_BENCH_HNSW_FROM", (int)conf.approximate_from);
    conf.m = env_int("KEEL_BENCH_HNSW_M", conf.m);
    conf.ef_construction = env_int("KEEL_BENCH_HNSW_EFC", conf.ef_construction);
    conf.ef_search = env_int("KEEL_BENCH_HNSW_EF", conf.ef_search);
    conf.threads = env_int("KEEL_BENCH_HNSW_THREADS", conf.threads);
    for (size_t runs = 10000; runs <= limit && !rc; runs *= 10)
        rc = one_size(runs, &conf);
    return rc;
}
