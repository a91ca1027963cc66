/*
 * bench_data.h — the benchmarks' deterministic data: one seeded
 * generator (64-bit LCG) and synthetic words with skewed frequencies,
 * shared by the store and pipeline groups so both fill stores alike.
 */
#ifndef KEEL_BENCH_BENCH_DATA_H
#define KEEL_BENCH_BENCH_DATA_H

#include <stdint.h>

#include "core/buf.h"

/* Restarts the calling thread's generator (each thread has its own); a
 * group seeds it first so its data does not depend on which groups ran
 * before it. */
void bench_seed(uint64_t seed);

/* The next 31-bit value. */
uint32_t bench_rand(void);

/* A synthetic word (lower-case syllables, at most 7 bytes) from a
 * vocabulary of 8,000 whose frequency falls off like 1/i, so common words
 * match many rows and most words few, as in real abstracts. */
const char *bench_word(void);

/* `buf` emptied, then `words` synthetic words separated by spaces. */
void bench_sentence(struct keel_buf *buf, int words);

/* Appends `words` synthetic words to `buf`, a space before each when
 * `buf` is not empty. */
void bench_add_words(struct keel_buf *buf, int words);

/* Removes a benchmark's SQLite file `path` with its -wal and -shm
 * files, then its folder `dir`. An empty `path` is a no-op; with
 * BENCH_KEEP_DB set the files stay (for a look with sqlite3). */
void bench_remove_db(const char *path, const char *dir);

#endif
