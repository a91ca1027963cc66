/*
 * id.c — time-ordered ids from the pinned clock and a seeded generator.
 */
#include "core/id.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"

static _Atomic uint64_t generator_state = 0x9e3779b97f4a7c15ull;

static const char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/* splitmix64: one atomic add gives each caller its own state. */
static uint64_t next_random(void)
{
    uint64_t z = atomic_fetch_add(&generator_state, 0x9e3779b97f4a7c15ull) +
                 0x9e3779b97f4a7c15ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void keel_id_seed(uint64_t seed)
{
    atomic_store(&generator_state, seed);
}

void keel_id_init(void)
{
    const char *env = getenv("KEEL_SEED");
    uint64_t seed;

    if (env && *env) {
        char *end;
        seed = strtoull(env, &end, 10);
        if (*end == '\0') {
            keel_id_seed(seed);
            return;
        }
    }
    if (getrandom(&seed, sizeof(seed), 0) == (ssize_t)sizeof(seed))
        keel_id_seed(seed);
}

char *keel_id_new(const char *prefix, char *out, size_t n)
{
    uint64_t ms = (uint64_t)keel_clock_now();
    uint64_t hi = next_random(), lo = next_random();
    char body[27];
    int i;

    /* 10 chars of time (50 bits, top 2 zero), 16 chars of randomness (80 bits). */
    for (i = 9; i >= 0; i--) {
        body[i] = crockford[ms & 31];
        ms >>= 5;
    }
    for (i = 10; i < 26; i++) {
        uint64_t *src = i < 22 ? &hi : &lo;
        body[i] = crockford[*src & 31];
        *src >>= 5;
    }
    body[26] = '\0';
    snprintf(out, n, "%.16s_%s", prefix, body);
    return out;
}

int keel_id_valid(const char *id, const char *prefix)
{
    size_t plen = strlen(prefix);

    if (strncmp(id, prefix, plen) || id[plen] != '_' || strlen(id + plen + 1) != 26)
        return 0;
    for (const char *p = id + plen + 1; *p; p++)
        if (!strchr(crockford, *p))
            return 0;
    return 1;
}
