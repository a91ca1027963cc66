/*
 * log.c — one JSON object per line, timestamped by keel's clock.
 */
#include "core/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/json.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_stream;
static enum keel_log_level log_level = KEEL_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void keel_log_init(void)
{
    const char *env = getenv("KEEL_LOG_LEVEL");

    if (!env)
        return;
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (!strcmp(env, level_names[i]))
            log_level = (enum keel_log_level)i;
}

void keel_log_set_stream(FILE *stream)
{
    pthread_mutex_lock(&log_lock);
    log_stream = stream;
    pthread_mutex_unlock(&log_lock);
}

void keel_log_set_level(enum keel_log_level level)
{
    log_level = level;
}

int keel_log_enabled(enum keel_log_level level)
{
    return level >= log_level;
}

void keel_log(enum keel_log_level level, const char *event, json_t *fields)
{
    char ts[KEEL_RFC3339_MAX];
    struct keel_buf line;
    json_t *record;

    if (!keel_log_enabled(level)) {
        json_decref(fields);
        return;
    }
    record = json_object();
    if (!record) {
        json_decref(fields);
        return;
    }
    if (fields && json_is_object(fields))
        json_object_update(record, fields);
    json_decref(fields);
    keel_time_format(keel_clock_now(), ts, sizeof(ts));
    json_object_set_new(record, "ts", json_string(ts));
    json_object_set_new(record, "level", json_string(level_names[level]));
    json_object_set_new(record, "event", json_string(event));
    keel_buf_init(&line, 1 << 20);
    if (!keel_json_append(&line, record, JSON_COMPACT) && !keel_buf_addc(&line, '\n')) {
        pthread_mutex_lock(&log_lock);
        fwrite(line.data, 1, line.len, log_stream ? log_stream : stderr);
        fflush(log_stream ? log_stream : stderr);
        pthread_mutex_unlock(&log_lock);
    }
    keel_buf_release(&line);
    json_decref(record);
}
