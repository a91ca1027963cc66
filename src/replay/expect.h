/*
 * expect.h — checking one turn's `expect` object against the decision
 * JSON (and, in pipeline cases, the turn result), through the tables of
 * known keys in expect.c.
 */
#ifndef KEEL_REPLAY_EXPECT_H
#define KEEL_REPLAY_EXPECT_H

#include <jansson.h>
#include <stdio.h>

#include "core/error.h"

/* Called once per mismatch with the field path and both values. */
typedef void (*expect_report_fn)(void *ctx, const char *field, const json_t *expected,
                                 const json_t *actual);

/* Checks `expect` against `actual`. Returns KEEL_OK with *mismatches set
 * to the number reported, or KEEL_EINVAL (err names the field) when the
 * expect object itself is malformed: an unknown key, a value of the wrong
 * JSON type, a list that is not a list of strings. `path` prefixes field
 * names in err and in reports. */
int expect_check(const json_t *expect, const json_t *actual, const char *path,
                 expect_report_fn report, void *ctx, int *mismatches,
                 struct keel_error *err);

/* The same, with `pipeline` nonzero for a turn run through the pipeline:
 * `actual` then holds the decision fields and the turn result's fields
 * (stage, answer, state, events, …), and the pipeline keys (stage,
 * tools_called, state, events_order, …) may be used. With `pipeline` 0 a
 * pipeline key is a fixture error naming it. expect_check() is this with
 * `pipeline` 0. */
int expect_check_turn(const json_t *expect, const json_t *actual, int pipeline, const char *path,
                      expect_report_fn report, void *ctx, int *mismatches,
                      struct keel_error *err);

#endif
