/*
 * json.h — helpers on jansson for reading untrusted JSON with caps and for
 * naming the offending field when a value is wrong.
 *
 * Field paths are written as "turns[0].expect.search.count": the helpers
 * take the parent's path and add the key, so every error says exactly where
 * the bad value was.
 */
#ifndef KEEL_CORE_JSON_H
#define KEEL_CORE_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/error.h"

#define KEEL_JSON_PATH_MAX 160

/* Points jansson's allocator at keel's wrapper and seeds its hash function
 * deterministically. Call once at start, before any json_t exists. */
void keel_json_init(void);

/* Parses `n` bytes of JSON text (one value; trailing garbage is an error).
 * Inputs over `max` bytes fail with KEEL_ETOOBIG before parsing. `origin`
 * names the input in errors ("request body", a file name). On success
 * *out owns a new reference; on failure it is untouched. */
int keel_json_parse(const char *text, size_t n, size_t max, const char *origin,
                    json_t **out, struct keel_error *err);

/* As keel_json_parse, but any JSON value is accepted at the top level
 * ("married", 42, null), not only an object or an array: for callers
 * that answer a value of the wrong type with their own error. */
int keel_json_parse_any(const char *text, size_t n, size_t max, const char *origin,
                        json_t **out, struct keel_error *err);

/* Writes "parent.key" (or "key" when parent is empty) into `out`. */
void keel_json_path_key(char *out, size_t n, const char *parent, const char *key);

/* Writes "parent[index]" into `out`. */
void keel_json_path_index(char *out, size_t n, const char *parent, size_t index);

/* Fails with KEEL_EINVAL naming the first key of `obj` not in the
 * NULL-terminated `allowed` list. Returns KEEL_OK when all keys are known. */
int keel_json_check_keys(const json_t *obj, const char *const *allowed,
                         const char *path, struct keel_error *err);

/* Typed getters. `required` nonzero: a missing key is KEEL_EINVAL. A key of
 * the wrong type is always KEEL_EINVAL naming "path.key". On KEEL_OK with a
 * missing optional key the output is left as it was (so callers preset
 * defaults). Strings are borrowed from `obj`. */
int keel_json_get_string(const json_t *obj, const char *key, int required,
                         const char *path, const char **out, struct keel_error *err);
int keel_json_get_int(const json_t *obj, const char *key, int required,
                      long long min, long long max, const char *path,
                      long long *out, struct keel_error *err);
int keel_json_get_bool(const json_t *obj, const char *key, int required,
                       const char *path, int *out, struct keel_error *err);

/* Returns a static name of the JSON type of `value` ("object", "null", …). */
const char *keel_json_type_name(const json_t *value);

/* Appends the key-sorted serialisation of `value` to `buf`, formatted by
 * jansson `flags` (JSON_COMPACT, JSON_INDENT(n), …). Returns KEEL_OK, or
 * KEEL_ENOMEM when jansson or the buffer fails (also when the buffer's cap
 * is reached); `buf` is then as it was. */
int keel_json_append(struct keel_buf *buf, const json_t *value, size_t flags);

/* json_dumps(value, flags), the same text, made by the fast writer
 * (core/json_write.h) for the flags it knows (JSON_COMPACT with any of
 * JSON_SORT_KEYS, JSON_REAL_PRECISION(n), JSON_ENCODE_ANY) and by jansson
 * otherwise. NULL when jansson's would be NULL (out of memory, a value
 * that is not an object or array without JSON_ENCODE_ANY, a string that
 * is not UTF-8). The caller frees it with keel_free. */
char *keel_json_dumps(const json_t *value, size_t flags);

/* keel_json_dumps() that also sets *len (when not NULL) to the text's
 * length and leaves room for `spare` more bytes after its NUL, so a
 * caller can append a newline in place. */
char *keel_json_dumps_len(const json_t *value, size_t flags, size_t spare, size_t *len);

/* Sets obj[key] to the string `text` (JSON null when `text` is NULL),
 * checked by utf8_valid_prefix, which passes ASCII sixteen bytes at a
 * time, rather than by jansson's byte-by-byte check: for the long texts a
 * turn moves (abstracts, passages, answers). `key` must be valid UTF-8 (a
 * literal). Returns KEEL_OK, KEEL_EINVAL (`text` is not UTF-8; obj is
 * unchanged) or KEEL_ENOMEM. */
int keel_json_set_text(json_t *obj, const char *key, const char *text);

/* The string `text` as a new value, checked as keel_json_set_text checks
 * it; NULL when `text` is not UTF-8 or memory ran out. */
json_t *keel_json_text(const char *text);

#endif
