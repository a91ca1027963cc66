/*
 * log.h — JSON-lines logging.
 *
 * One log record is one line of JSON: {"ts", "level", "event", …fields}.
 * Records go to stderr unless keel_log_open() names a file. The level
 * threshold comes from KEEL_LOG_LEVEL (debug|info|warn|error, default info).
 * Writing is serialised by a mutex so worker threads can log.
 */
#ifndef KEEL_CORE_LOG_H
#define KEEL_CORE_LOG_H

#include <jansson.h>
#include <stdio.h>

enum keel_log_level { KEEL_LOG_DEBUG, KEEL_LOG_INFO, KEEL_LOG_WARN, KEEL_LOG_ERROR };

/* Reads KEEL_LOG_LEVEL; unknown values leave the default (info). */
void keel_log_init(void);

/* Sends records to `stream` (not owned). NULL restores stderr. */
void keel_log_set_stream(FILE *stream);

/* Sets the threshold below which records are dropped. */
void keel_log_set_level(enum keel_log_level level);

/* Returns nonzero when a record at `level` would be written. */
int keel_log_enabled(enum keel_log_level level);

/* Writes one record. `fields` (may be NULL) is an object whose keys are
 * added to the record; the reference is stolen. Logging never fails the
 * caller: when memory runs out the record is dropped. */
void keel_log(enum keel_log_level level, const char *event, json_t *fields);

#endif
