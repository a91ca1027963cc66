/*
 * clock.h — keel's one clock, which tests and replays pin.
 *
 * Time is an int64 count of milliseconds since the Unix epoch, UTC. The
 * clock is pinned by KEEL_NOW (RFC 3339, read by keel_clock_init) or by
 * `--now`; a pinned clock never moves, which makes "recent", ids and event
 * timestamps reproducible.
 */
#ifndef KEEL_CORE_CLOCK_H
#define KEEL_CORE_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define KEEL_RFC3339_MAX 32  /* "2026-02-07T12:00:00.000Z" plus room */

/* Reads KEEL_NOW from the environment and pins the clock to it when set.
 * Returns KEEL_EPARSE (with err naming KEEL_NOW) when it is not RFC 3339;
 * the clock is then left as it was. */
int keel_clock_init(struct keel_error *err);

/* Pins the clock to `ms` (ms since the epoch). */
void keel_clock_pin(int64_t ms);

/* Unpins the clock: keel_clock_now() follows the system clock again. */
void keel_clock_unpin(void);

/* Returns nonzero when the clock is pinned. */
int keel_clock_pinned(void);

/* Returns the current time in ms since the epoch (the pinned time if any). */
int64_t keel_clock_now(void);

/* Parses RFC 3339 ("2026-02-07T12:00:00Z", "…T12:00:00.250+01:00") or a
 * bare date ("2026-02-07", taken as midnight UTC) of exactly `n` bytes into
 * ms since the epoch. Returns KEEL_OK or KEEL_EPARSE (err names `field`);
 * `*out` is untouched on failure. */
int keel_time_parse(const char *text, size_t n, int64_t *out,
                    const char *field, struct keel_error *err);

/* Formats `ms` as RFC 3339 UTC with milliseconds into `out` (at least
 * KEEL_RFC3339_MAX bytes). Returns `out`. */
char *keel_time_format(int64_t ms, char *out, size_t n);

/* Returns the UTC calendar year of `ms`. */
int keel_time_year(int64_t ms);

#endif
