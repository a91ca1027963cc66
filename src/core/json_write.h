/*
 * json_write.h — a fast writer of compact JSON text that is byte for byte
 * what jansson writes with JSON_COMPACT and any of JSON_SORT_KEYS,
 * JSON_REAL_PRECISION(n), JSON_ENCODE_ANY (keel_json_append() and
 * keel_json_dumps() use it).
 */
#ifndef KEEL_CORE_JSON_WRITE_H
#define KEEL_CORE_JSON_WRITE_H

#include <jansson.h>

#include "core/buf.h"
#include "core/error.h"

/* Appends the compact text of `value` to `buf`. KEEL_ENOMEM / KEEL_ETOOBIG
 * from the buffer; KEEL_EINVAL for what only jansson may decide (a string
 * that is not UTF-8, nesting over 256 levels, an object over 4,096 keys,
 * NULL). On failure `buf` is as it was. */
int keel_json_write_compact(struct keel_buf *buf, const json_t *value);

/* As keel_json_write_compact, with jansson's dump `flags`: JSON_COMPACT
 * (required) and any of JSON_SORT_KEYS, JSON_REAL_PRECISION(n),
 * JSON_ENCODE_ANY, JSON_PRESERVE_ORDER. Any other flag: KEEL_EINVAL
 * (jansson writes it). The value is written whatever its type, as with
 * JSON_ENCODE_ANY. */
int keel_json_write(struct keel_buf *buf, const json_t *value, size_t flags);

/* Appends the `n` bytes of `s` as a JSON string, as jansson writes one.
 * KEEL_EINVAL when `s` is not UTF-8 (jansson refuses it), KEEL_ENOMEM /
 * KEEL_ETOOBIG from the buffer; on failure `buf` is as it was. */
int keel_json_write_string(struct keel_buf *buf, const char *s, size_t n);

#endif
