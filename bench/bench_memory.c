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

static uint64_t state = 0x9e3779b97f4a7c15ull;

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

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int one_size(size_t runs)
{
    struct memory_index *ix = memory_index_new(MEMORY_DIM);
    uint64_t samples[QUERIES];
    size_t found = 0, wanted = 0;
    float v[MEMORY_DIM];
    char task[160], summary[160], id[32];

    if (!ix)
        return 1;
    for (size_t i = 0; i < runs; i++) {
        run_text(task, sizeof(task), summary, sizeof(summary));
        memory_embed(task, summary, v);
        snprintf(id, sizeof(id), "run_%zu", i);
        if (memory_index_put(ix, id, v)) {
            memory_index_free(ix);
            return 1;
        }
    }
    for (size_t q = 0; q < QUERIES; q++) {
        struct memory_hit hits[MEMORY_TOP_K], exact[MEMORY_TOP_K];
        uint64_t t0;
        size_t n, m;
        /* Half the queries are variants of stored runs (near neighbours
         * exist), half new tasks. */
        if (q % 2) {
            run_text(task, sizeof(task), summary, sizeof(summary));
        } else {
            uint64_t keep = state;
            state = 0x9e3779b97f4a7c15ull;
            for (uint32_t skip = next() % (uint32_t)(runs < 1000 ? runs : 1000); skip; skip--)
                run_text(task, sizeof(task), summary, sizeof(summary));
            run_text(task, sizeof(task), summary, sizeof(summary));
            snprintf(summary, sizeof(summary), "A different approach, attempt %zu", q);
            state = keep;
        }
        t0 = bench_now_ns();
        memory_embed(task, summary, v);
        memory_index_search(ix, v, MEMORY_TOP_K, 0.7f, hits);
        samples[q] = bench_now_ns() - t0;
        /* recall@3: the 3 nearest without a threshold, against exact */
        n = memory_index_search(ix, v, MEMORY_TOP_K, -1.0f, hits);
        m = memory_index_search_exact(ix, v, MEMORY_TOP_K, -1.0f, exact);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                found += !strcmp(exact[i].id, hits[j].id);
        wanted += m;
    }
    qsort(samples, QUERIES, sizeof(samples[0]), by_value);
    printf("{\"bench\": \"memory.decide\", \"runs\": %zu, \"median_us\": %.1f, \"p99_us\": %.1f,"
           " \"recall_at3\": %.4f, \"bytes_per_run\": %zu, \"index\": \"int8 scan + exact rescore\","
           " \"scope\": \"embed + top 3 of the active runs\", \"n\": %d}\n",
           runs, samples[QUERIES / 2] / 1e3, samples[QUERIES * 99 / 100] / 1e3,
           wanted ? (double)found / (double)wanted : 1.0,
           MEMORY_DIM * (sizeof(float) + 1) + 64 + 8 + 2 * sizeof(int32_t), QUERIES);
    fflush(stdout);
    memory_index_free(ix);
    return 0;
}

int bench_memory(void)
{
    const char *max = getenv("KEEL_BENCH_MEMORY_MAX");
    size_t limit = max ? (size_t)strtoull(max, NULL, 10) : 1000000;
    int rc = 0;

    for (size_t runs = 10000; runs <= limit && !rc; runs *= 10)
        rc = one_size(runs);
    return rc;
}
