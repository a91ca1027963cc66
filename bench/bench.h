/*
 * bench.h — the benchmark groups of `make bench` and their shared timing
 * helpers. Each group prints one JSON object per line:
 *   {"bench": NAME, "median_ns": …, "p99_ns": …, "n": …, …}
 */
#ifndef KEEL_BENCH_BENCH_H
#define KEEL_BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Run one group each; return 0 on success. */
int bench_policy(void);
int bench_store(void);
int bench_pipeline(void);
int bench_http(void);
int bench_memory(void);

/* Monotonic nanoseconds. */
uint64_t bench_now_ns(void);

/* Sorts `samples` in ascending order (for medians and percentiles). */
void bench_sort(uint64_t *samples, size_t n);

/* Sorts `samples` and prints the JSON line for `name` with the median and
 * the 99th percentile. `extra` (may be NULL) is appended inside the object,
 * e.g. "\"pack\": \"scholar\"". */
void bench_report(const char *name, uint64_t *samples, size_t n, const char *extra);

/* Project root for packs: KEEL_ROOT or ".". */
const char *bench_root(void);

#endif
