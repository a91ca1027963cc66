/*
 * expect.h — checking one turn's `expect` object against the decision
 * JSON, through the table of known keys in expect.c.
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

#endif
