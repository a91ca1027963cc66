/*
 * events.c — a turn's events: turn_emit hands each event to the caller's
 * callback as a struct, writes down its stored text as the events' dump
 * would (so publish does not serialise the events again), and makes its
 * JSON object only for a caller that wants the result's events[].
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/json_write.h"
#include "core/log.h"
#include "core/utf8.h"
#include "pipeline/turn.h"
#include "store/store_events_text.h"

/* The index of `kind` in event_text's table; 4 for an unknown one. */
static int kind_index(const char *kind)
{
    static const char *const kinds[4] = {"start", "end", "info", "token"};

    for (int i = 0; i < 4; i++)
        if (!strcmp(kind, kinds[i]))
            return i;
    return 4;
}

/* `text` as a JSON string into out[n] (after `before` and before
 * `after`); nonzero when it does not fit or is not UTF-8. */
static int json_piece(char *out, size_t n, const char *before, const char *text, const char *after)
{
    struct keel_buf b;
    int rc;

    keel_buf_init(&b, n - 1);
    rc = keel_buf_adds(&b, before);
    rc = rc ? rc : keel_json_write_string(&b, text, strlen(text));
    rc = rc ? rc : keel_buf_adds(&b, after);
    if (!rc)
        memcpy(out, b.data, b.len + 1);
    keel_buf_release(&b);
    return rc;
}

#define EVENTS_TEXT_FIRST 8192

/* Appends an emitted event's text to t->events_text: the keys in sorted
 * order with the same values as the event object, as keel_json_append
 * writes the events array, without correlation_id when
 * t->events_compacted. The parts every event of the turn repeats are
 * made once (t->event_parts). The event was made, so
 * every text is UTF-8. */
static int event_text(struct turn *t, int kind, const char *kind_name, const char *user,
                      const char *message, const json_t *extra, const char *ts)
{
    static const char *const kinds[4][2] = {
        {",\"kind\":\"start\",\"level\":\"technical\",\"message\":",
         ",\"kind\":\"start\",\"level\":\"both\",\"message\":"},
        {",\"kind\":\"end\",\"level\":\"technical\",\"message\":",
         ",\"kind\":\"end\",\"level\":\"both\",\"message\":"},
        {",\"kind\":\"info\",\"level\":\"technical\",\"message\":",
         ",\"kind\":\"info\",\"level\":\"both\",\"message\":"},
        {",\"kind\":\"token\",\"level\":\"technical\",\"message\":",
         ",\"kind\":\"token\",\"level\":\"both\",\"message\":"},
    };
    struct keel_buf *b = &t->events_text;
    size_t before = b->len;
    char seq[24];
    size_t n = sizeof(seq);
    int rc = KEEL_OK;

    /* Written as the SQLite store keeps them, without the turn's id in
     * each event (store_events_text.h), when the id allows. */
    if (!t->event_parts.head[0]) {
        if ((t->events_compacted = store_events_id_plain(t->correlation_id)))
            snprintf(t->event_parts.head, sizeof(t->event_parts.head), "{\"extra\":");
        else
            rc = json_piece(t->event_parts.head, sizeof(t->event_parts.head),
                            "{\"correlation_id\":", t->correlation_id, ",\"extra\":");
        /* Room for a usual turn's events at once (~6 KB): growing from
         * 64 bytes by doubling cost seven reallocs a turn. */
        rc = rc ? rc : keel_buf_grow(b, EVENTS_TEXT_FIRST);
        rc = rc ? rc : json_piece(t->event_parts.tail, sizeof(t->event_parts.tail), ",\"ts\":",
                                  ts, ",\"user_message\":");
        if (rc)
            t->event_parts.head[0] = '\0';
    }
    for (unsigned v = (unsigned)t->event_seq; n == sizeof(seq) || v; v /= 10)
        seq[--n] = (char)('0' + v % 10);
    rc = rc ? rc : keel_buf_addc(b, before ? ',' : '[');
    rc = rc ? rc : keel_buf_adds(b, t->event_parts.head);
    rc = rc ? rc : json_is_object(extra) && !json_object_size(extra)
                       ? keel_buf_add(b, "{}", 2)
                       : keel_json_write(b, extra, JSON_COMPACT | JSON_SORT_KEYS);
    if (!rc && kind < 4) {
        rc = keel_buf_adds(b, kinds[kind][user != NULL]);
    } else if (!rc) {
        rc = keel_buf_adds(b, ",\"kind\":");
        rc = rc ? rc : keel_json_write_string(b, kind_name, strlen(kind_name));
        rc = rc ? rc : keel_buf_adds(b, user ? ",\"level\":\"both\",\"message\":"
                                             : ",\"level\":\"technical\",\"message\":");
    }
    rc = rc ? rc : keel_json_write_string(b, message, strlen(message));
    rc = rc ? rc : keel_buf_add(b, ",\"seq\":", 7);
    rc = rc ? rc : keel_buf_add(b, seq + n, sizeof(seq) - n);
    rc = rc ? rc : keel_buf_add(b, ",\"stage\":", 9);
    rc = rc ? rc : keel_json_write_string(b, t->stage_name, strlen(t->stage_name));
    rc = rc ? rc : keel_buf_adds(b, t->event_parts.tail);
    rc = rc ? rc : user ? keel_json_write_string(b, user, strlen(user)) : keel_buf_add(b, "null", 4);
    rc = rc ? rc : keel_buf_addc(b, '}');
    if (rc)
        keel_buf_truncate(b, before);
    return rc;
}

json_t *pipeline_event_json(const struct pipeline_event *e)
{
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s?, s:s, s:O}", "correlation_id",
                     e->correlation_id, "seq", e->seq, "stage", e->stage, "kind", e->kind,
                     "level", e->level, "message", e->message, "user_message", e->user_message,
                     "ts", e->ts, "extra", (json_t *)e->extra);
}

int turn_emit(struct turn *t, const char *kind, const char *key, json_t *extra,
              const char *fmt, ...)
{
    const char *user = config_event_text(&t->pl->cfg, key ? key : t->stage_name);
    /* The turn's clock is fixed, so its time is formatted once per thread
     * and turn time, not once per event. */
    static _Thread_local int64_t ts_ms = INT64_MIN;
    static _Thread_local char ts[KEEL_RFC3339_MAX];
    char message[512];
    struct pipeline_event e;
    json_t *event = NULL;
    va_list ap;
    int rc = KEEL_OK;

    /* A stage's user text shows at its start only, never at its end. */
    if (!key && strcmp(kind, "start"))
        user = NULL;
    va_start(ap, fmt);
    if (!strcmp(fmt, "%s")) {   /* most lines: no formatting to do */
        const char *line = va_arg(ap, const char *);
        size_t n = strlen(line);
        n = n < sizeof(message) ? n : sizeof(message) - 1;
        memcpy(message, line, n);
        message[n] = '\0';
    } else {
        vsnprintf(message, sizeof(message), fmt, ap);
    }
    va_end(ap);
    /* a line cut short may end inside a character: end it before */
    message[utf8_valid_prefix(message, strlen(message))] = '\0';
    if (ts_ms != t->now) {
        keel_time_format(t->now, ts, sizeof(ts));
        ts_ms = t->now;
    }
    if (!extra && !t->no_extra && !(t->no_extra = json_object()))
        return KEEL_ENOMEM;
    if (!extra)
        extra = json_incref(t->no_extra);
    e = (struct pipeline_event){t->correlation_id, ++t->event_seq, t->stage_name, kind,
                                user ? "both" : "technical", message, user, ts, extra};
    if (t->events &&
        (!(event = pipeline_event_json(&e)) || json_array_append_new(t->events, event)))
        rc = KEEL_ENOMEM;
    /* Without the list, the text is the only record of the event. */
    if (!rc && !t->events_text_failed && event_text(t, kind_index(kind), kind, user, message,
                                                    extra, ts))
        t->events_text_failed = 1;
    if (!rc && t->events_text_failed && !t->events)
        rc = KEEL_ENOMEM;
    if (!rc && t->req->on_event)
        t->req->on_event(t->req->event_ctx, &e);
    if (!rc && t->pl->trace && (event = pipeline_event_json(&e))) {
        /* a copy: the extra object may be read by the caller meanwhile */
        keel_log(KEEL_LOG_WARN, "turn.trace", json_deep_copy(event));
        json_decref(event);
    }
    json_decref(extra);
    return rc;
}

void turn_events_release(struct turn *t)
{
    json_decref(t->events);
    keel_buf_release(&t->events_text);
    json_decref(t->no_extra);
}
