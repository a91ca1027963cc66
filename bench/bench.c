/*
 * bench.c — `keel-bench [GROUP]`: runs every benchmark group, or one.
 * Timings are medians and 99th percentiles of many single measurements,
 * so a noisy shared machine moves the tail, not the median.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/json.h"

static const struct {
    const char *name;
    int (*run)(void);
} groups[] = {
    {"policy", bench_policy},
    {"store", bench_store},
    {"pipeline", bench_pipeline},
    {"http", bench_http},
    {"memory", bench_memory},
};

uint64_t bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

void bench_sort(uint64_t *samples, size_t n)
{
    qsort(samples, n, sizeof(*samples), by_value);
}

void bench_report(const char *name, uint64_t *samples, size_t n, const char *extra)
{
    bench_sort(samples, n);
    printf("{\"bench\": \"%s\", \"median_ns\": %llu, \"p99_ns\": %llu, \"n\": %zu%s%s}\n", name,
           (unsigned long long)samples[n / 2], (unsigned long long)samples[n * 99 / 100], n,
           extra ? ", " : "", extra ? extra : "");
    fflush(stdout);
}

const char *bench_root(void)
{
    const char *root = getenv("KEEL_ROOT");

    return root && *root ? root : ".";
}

int main(int argc, char **argv)
{
    int rc = 0, ran = 0;

    keel_json_init();
    keel_clock_pin(1770465600000);  /* 2026-02-07T12:00:00Z: reproducible years */
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
        if (argc > 1 && strcmp(argv[1], groups[i].name))
            continue;
        ran = 1;
        rc |= groups[i].run();
    }
    if (!ran) {
        fprintf(stderr, "keel-bench: no benchmark group \"%s\" (groups:", argc > 1 ? argv[1] : "");
        for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
            fprintf(stderr, " %s", groups[i].name);
        fprintf(stderr, ")\n");
        return 2;
    }
    return rc ? 1 : 0;
}
