/*
 * id.h — identifiers for conversations, turns and runs.
 *
 * An id is a prefix, an underscore and a 26-character ULID-style string:
 * 48 bits of the clock's milliseconds then 80 bits from a generator, in
 * Crockford base 32, so ids sort by creation time. The generator is
 * splitmix64 seeded from KEEL_SEED when set (deterministic runs with a
 * pinned clock give the same ids) and from getrandom() otherwise.
 */
#ifndef KEEL_CORE_ID_H
#define KEEL_CORE_ID_H

#include <stddef.h>
#include <stdint.h>

#define KEEL_ID_MAX 48  /* prefix (<= 16) + '_' + 26 + NUL, with room */

/* Seeds the generator from KEEL_SEED (decimal) or the system's entropy. */
void keel_id_init(void);

/* Seeds the generator explicitly (tests, replays). */
void keel_id_seed(uint64_t seed);

/* Writes a new id "prefix_XXXXXXXXXXXXXXXXXXXXXXXXXX" into `out` of size `n`
 * (at least KEEL_ID_MAX) and returns `out`. Thread-safe. A prefix longer
 * than 16 bytes is cut to 16. */
char *keel_id_new(const char *prefix, char *out, size_t n);

/* Returns nonzero when `id` looks like an id keel made with `prefix`. */
int keel_id_valid(const char *id, const char *prefix);

#endif
