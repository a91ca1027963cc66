/*
 * error.h — keel's one result enum and the error struct that names the
 * offending field.
 *
 * Every function that can fail returns an `int` holding a `keel_result`
 * (0 = KEEL_OK). Details meant for a person go into a caller-owned
 * `struct keel_error`: the code, the field that was wrong (a JSON-path-like
 * string such as "search.count" or "packs/scholar/pack.yaml:12"), and a
 * sentence saying what was wrong. Both are fixed-size so filling one never
 * allocates and never fails.
 */
#ifndef KEEL_CORE_ERROR_H
#define KEEL_CORE_ERROR_H

#include <stddef.h>

enum keel_result {
    KEEL_OK = 0,
    KEEL_ENOMEM,        /* an allocation failed */
    KEEL_EINVAL,        /* bad input: a field is missing, of the wrong type or out of range */
    KEEL_EPARSE,        /* input could not be parsed (JSON, YAML, a date) */
    KEEL_ETOOBIG,       /* input or a buffer is over its cap */
    KEEL_ENOTFOUND,     /* a named thing (file, pack, tool, case) does not exist */
    KEEL_EIO,           /* reading or writing a file failed */
    KEEL_EUNSUPPORTED,  /* a valid request keel cannot serve */
    KEEL_EFAIL,         /* a check failed (replay mismatch, test assertion) */
    KEEL_RESULT_COUNT
};

#define KEEL_ERROR_FIELD_MAX 192
#define KEEL_ERROR_MESSAGE_MAX 320

struct keel_error {
    int code;                               /* a keel_result; KEEL_OK when clear */
    char field[KEEL_ERROR_FIELD_MAX];       /* the offending field, "" if none */
    char message[KEEL_ERROR_MESSAGE_MAX];   /* one sentence for a person */
};

/* Returns a static, human-readable name for `rc`; never NULL, also for
 * values outside the enum. */
const char *keel_strerror(int rc);

/* Returns the short stable token for `rc` ("invalid", "too_big", …) used in
 * JSON error bodies; never NULL. */
const char *keel_result_token(int rc);

/* Clears `err` to KEEL_OK with empty field and message. `err` may be NULL. */
void keel_error_clear(struct keel_error *err);

/* Fills `err` (which may be NULL) with `code`, `field` (may be NULL) and a
 * printf-style message; over-long text is truncated, never overflowed.
 * Returns `code` so callers can write `return keel_error_set(...)`. */
int keel_error_set(struct keel_error *err, int code, const char *field,
                   const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes "field: message" (or just the message when there is no field) into
 * `out` of size `n`. Returns `out`. */
const char *keel_error_format(const struct keel_error *err, char *out, size_t n);

#endif
