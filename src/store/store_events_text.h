/*
 * store_events_text.h — a turn's events as the SQLite backend stores them:
 * without the correlation id every event repeats (the turn row holds it).
 *
 * A turn's events are a compact JSON array of objects, each beginning with
 * "correlation_id":"<the turn's id>" (keys sorted); that member is ~50 of
 * an event's ~250 bytes. compact takes it out of every top-level object,
 * expand puts it back, so expand(compact(text)) is the text byte for byte.
 * Both scan the text only as far as they need (strings, nesting); neither
 * parses it into values.
 */
#ifndef KEEL_STORE_EVENTS_TEXT_H
#define KEEL_STORE_EVENTS_TEXT_H

#include <stddef.h>

/* 1 when events of `correlation_id` can be compacted: 1 to 256 bytes
 * that need no escaping in JSON (printable ASCII without '"' and '\\'). */
int store_events_id_plain(const char *correlation_id);

/* Copies `events` (`len` bytes) into a new NUL-terminated text *out
 * (*out_len bytes; free with keel_free) without the leading member
 * "correlation_id":"`correlation_id`", of each top-level object. Returns
 * KEEL_EINVAL, writing nothing, unless the text is exactly a compact JSON
 * array whose every element is an object beginning with that member and
 * another after it, and the id needs no JSON escaping — the caller then
 * keeps the text as it is; KEEL_ENOMEM. "[]" compacts to itself. */
int store_events_compact(const char *events, size_t len, const char *correlation_id, char **out,
                         size_t *out_len);

/* The inverse of store_events_compact: a new text with the member put
 * back at the start of each top-level object of `compact`. KEEL_EINVAL
 * when `compact` is not a compact array of non-empty objects (so far as
 * the scan sees) or the id needs escaping, KEEL_ETOOBIG when the result
 * would pass `max` bytes, KEEL_ENOMEM. */
int store_events_expand(const char *compact, size_t len, const char *correlation_id, size_t max,
                        char **out, size_t *out_len);

#endif
