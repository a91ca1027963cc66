/*
 * streams.c — the open connections a turn answers later, on the loop
 * thread: SSE streams of a turn's events (GET /v1/stream/{id}, and the
 * OpenAI stream of POST /v1/chat/completions); the waiters of ?wait=1
 * requests are waiters.c's. An SSE event looks like
 *
 *   id: 3
 *   event: stage
 *   data: {"stage":"resolve","kind":"start","message":"Searching for papers…"}
 *
 * Events are numbered from 1 per turn: stage lines, answer pieces
 * (`token`), then `done` (the result summary) or `error`. Last-Event-ID
 * resumes after a number. A turn the bus has forgotten is replayed from
 * the store with the same numbering. streams_pump, called after the bus
 * changed, queues the streams for their new events and has waiters.c
 * answer the waiters whose turn ended.
 *
 * Memory: what a stream is sent sits in its connection's buffers until
 * the loop writes it to the socket, on a later pass. Sending the end of a
 * turn (its answer's pieces and a done of a few KB) to 5,000 streams in
 * one go held ~20 KB per stream at once, and malloc kept that high-water
 * mark. So the pump queue: a stream with something to send (new events,
 * a heartbeat, just opened) is queued once, and each loop pass sends to
 * at most SERVER_PUMP_BATCH of them, the rest after the loop has written
 * those. A stream's new events go out as one chunk.
 */
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "server/server_int.h"

static int key_streams_add(struct server *srv, const char *key_id, int delta);
static json_t *stored_events(struct server *srv, const json_t *turn);

/* ---- streams -------------------------------------------------------------- */

/* Appends one event {id, event, data} in SSE's format to `out`, the
 * same text as the bus keeps for a live event (bus_frame). */
static void sse_add(struct evbuffer *out, const json_t *event)
{
    size_t data_len = 0, len = 0;
    char *data = keel_json_dumps_len(json_object_get(event, "data"),
                                     JSON_COMPACT | JSON_SORT_KEYS, 0, &data_len);
    char *frame = data ? bus_frame((long)json_integer_value(json_object_get(event, "id")),
                                   json_string_value(json_object_get(event, "event")), data,
                                   data_len, &len)
                       : NULL;

    if (frame)
        evbuffer_add(out, frame, len);
    keel_free(frame);
    keel_free(data);
}

/* Sends what `out` holds as one chunk (it is left empty). */
static void chunk_send(struct evhttp_request *req, struct evbuffer *out)
{
    if (evbuffer_get_length(out))
        evhttp_send_reply_chunk(req, out);
}

static void pump_unqueue(struct stream *s)
{
    struct server *srv = s->srv;

    if (!s->queued)
        return;
    if (s->pump_prev)
        s->pump_prev->pump_next = s->pump_next;
    else
        srv->pump_head = s->pump_next;
    if (s->pump_next)
        s->pump_next->pump_prev = s->pump_prev;
    else
        srv->pump_tail = s->pump_prev;
    s->pump_prev = s->pump_next = NULL;
    s->queued = 0;
}

/* Queues `s` for the pump (once) and makes sure the pump runs. */
static void pump_queue(struct stream *s)
{
    struct server *srv = s->srv;
    static const struct timeval next_pass = {0, 0};

    if (!s->queued) {
        s->pump_prev = srv->pump_tail;
        s->pump_next = NULL;
        if (srv->pump_tail)
            srv->pump_tail->pump_next = s;
        else
            srv->pump_head = s;
        srv->pump_tail = s;
        s->queued = 1;
    }
    if (srv->pump && !evtimer_pending(srv->pump, NULL))
        evtimer_add(srv->pump, &next_pass);
}

int streams_pending(const struct server *srv)
{
    return srv->pump_head != NULL;
}

static void stream_unlink(struct stream *s)
{
    struct server *srv = s->srv;

    pump_unqueue(s);
    key_streams_add(srv, s->key_id, -1);
    if (s->prev)
        s->prev->next = s->next;
    else
        srv->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    srv->n_streams--;
    atomic_store(&srv->streams_open, srv->n_streams);
}

static void on_stream_closed(struct evhttp_connection *conn, void *arg)
{
    struct stream *s = arg;

    (void)conn;
    stream_unlink(s);
    keel_free(s);
}

/* Ends a stream after its last event. */
static void stream_end(struct stream *s)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(s->req);

    evhttp_connection_set_closecb(conn, NULL, NULL);
    evhttp_send_reply_end(s->req);
    stream_unlink(s);
    keel_free(s);
}

/* Appends `data` (stolen) as an OpenAI stream line "data: {…}". */
static void openai_send(struct evbuffer *out, json_t *data)
{
    char *text = data ? keel_json_dumps(data, JSON_COMPACT) : NULL;

    if (text)
        evbuffer_add_printf(out, "data: %s\n\n", text);
    keel_free(text);
    json_decref(data);
}

static void openai_done(struct evbuffer *out)
{
    evbuffer_add_printf(out, "data: [DONE]\n\n");
}

/* One bus event (`name`, its data as `n` bytes of JSON text) on an
 * OpenAI stream: answer pieces become content deltas, `done` the last
 * chunk and [DONE], `error` an error object; stage lines are not part of
 * OpenAI's format. */
static void openai_event(struct stream *s, struct evbuffer *out, const char *name,
                         const char *text, size_t n)
{
    json_t *data = NULL;

    if (!s->started) {
        openai_send(out, openai_chunk(s->correlation_id, s->model, NULL, 1, NULL));
        s->started = 1;
    }
    if (!strcmp(name, "token") || !strcmp(name, "error"))
        data = json_loadb(text, n, 0, NULL);
    if (!strcmp(name, "token")) {
        openai_send(out, openai_chunk(s->correlation_id, s->model,
                                         json_string_value(json_object_get(data, "text")), 0,
                                         NULL));
    } else if (!strcmp(name, "reset")) {
        /* OpenAI's format cannot take text back: the whole answer
         * follows after a blank line. */
        openai_send(out, openai_chunk(s->correlation_id, s->model, "\n\n", 0, NULL));
    } else if (!strcmp(name, "done")) {
        openai_send(out, openai_chunk(s->correlation_id, s->model, NULL, 0, "stop"));
        openai_done(out);
    } else if (!strcmp(name, "error")) {
        openai_send(out, json_pack("{s:{s:O?, s:s, s:O?}}", "error", "message",
                                      json_object_get(data, "message"), "type", "turn_failed",
                                      "param", json_object_get(data, "field")));
        openai_done(out);
    }
    json_decref(data);
}

/* The events of turn `cid` after number `after` as the store replays
 * them (stored_events), appended to `out`. */
static int stored_chunk(struct server *srv, const char *cid, long after, struct evbuffer *out,
                        struct keel_error *err)
{
    json_t *turn = NULL, *events, *event;
    size_t i;
    int rc = store_get_turn(srv->store, cid, &turn, err);

    if (rc)
        return rc;
    events = stored_events(srv, turn);
    json_array_foreach(events, i, event)
        if (json_integer_value(json_object_get(event, "id")) > after)
            sse_add(out, event);
    json_decref(events);
    json_decref(turn);
    return KEEL_OK;
}

/* Sends what the bus has beyond s->sent as one chunk (or the keep-alive
 * comment when a heartbeat is due and there is nothing new); ends the
 * stream when the turn has ended and all is sent. A quiet turn (bus.h)
 * that ended while the stream was open has its events replayed from the
 * store. */
static void stream_pump(struct stream *s)
{
    json_t *events = NULL, *event;
    enum bus_status status = bus_read(s->srv->bus, s->correlation_id, s->sent, &events, NULL,
                                      NULL, NULL, 0);
    struct evbuffer *out = evbuffer_new();
    size_t i;

    pump_unqueue(s);
    if (!out) {   /* out of memory: the events stay on the bus for the next pump */
        json_decref(events);
        return;
    }
    json_array_foreach(events, i, event) {
        const char *frame = json_string_value(event), *data;
        size_t len = json_string_length(event), data_len;
        char name[32];
        long id;
        if (bus_frame_parse(frame, len, &id, name, sizeof(name), &data, &data_len))
            continue;
        if (s->format == FORMAT_OPENAI)
            openai_event(s, out, name, data, data_len);
        else
            evbuffer_add(out, frame, len);
        s->sent = id;
    }
    json_decref(events);
    if (status == BUS_DONE && !bus_events_kept(s->srv->bus, s->correlation_id) &&
        s->format == FORMAT_KEEL) {
        struct keel_error err;
        keel_error_clear(&err);
        stored_chunk(s->srv, s->correlation_id, s->sent, out, &err);   /* else it just ends */
    }
    if (s->beat && !evbuffer_get_length(out))
        evbuffer_add_printf(out, ": keep-alive\n\n");
    s->beat = 0;
    chunk_send(s->req, out);
    evbuffer_free(out);
    if (status == BUS_DONE || status == BUS_FAILED || status == BUS_UNKNOWN)
        stream_end(s);
}

static void stream_headers(struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    evhttp_add_header(h, "Content-Type", "text/event-stream; charset=utf-8");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_add_header(h, "X-Accel-Buffering", "no");
}

/* The events of a stored turn, numbered as they were live. */
static json_t *stored_events(struct server *srv, const json_t *turn)
{
    json_t *out = json_array(), *e, *summary;
    const char *answer = json_string_value(json_object_get(turn, "assistant"));
    size_t i;
    long id = 0;

    json_array_foreach(json_object_get(turn, "events"), i, e) {
        const char *level = json_string_value(json_object_get(e, "level"));
        const char *user = json_string_value(json_object_get(e, "user_message"));
        if (!level || !strcmp(level, "technical") || !user)
            continue;
        json_array_append_new(out, json_pack("{s:I, s:s, s:{s:O?, s:O?, s:s}}", "id",
                                             (json_int_t)++id, "event", "stage", "data", "stage",
                                             json_object_get(e, "stage"), "kind",
                                             json_object_get(e, "kind"), "message", user));
    }
    for (size_t at = 0, len = answer ? strlen(answer) : 0; at < len;) {
        char piece[SERVER_TOKEN_BYTES * 4 + 1];
        size_t end = server_answer_piece(answer, len, at);
        snprintf(piece, sizeof(piece), "%.*s", (int)(end - at), answer + at);
        json_array_append_new(out, json_pack("{s:I, s:s, s:{s:s}}", "id", (json_int_t)++id,
                                             "event", "token", "data", "text", piece));
        at = end;
    }
    summary = chat_summary_from_store(srv, turn);
    json_array_append_new(out, json_pack("{s:I, s:s, s:o}", "id", (json_int_t)++id, "event",
                                         "done", "data", summary ? summary : json_object()));
    return out;
}

/* The largest Last-Event-ID taken: a turn's events are numbered from 1
 * and never come near it. */
#define LAST_EVENT_ID_MAX 2147483647L

/* Reads the request's Last-Event-ID into *after: 0 when there is none or
 * it is empty (EventSource sends no id rather than an empty one).
 * Anything but the decimal digits keel writes in its `id:` lines (a
 * sign, a space inside, a fraction, a number past LAST_EVENT_ID_MAX)
 * cannot have come from this server: -1, and the stream is refused
 * rather than replayed from its start as if no id were given. */
static int last_event_id(struct evhttp_request *req, long *after)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Last-Event-ID");
    long v = 0;

    *after = 0;
    if (!h || !h[0])
        return 0;
    for (const char *p = h; *p; p++) {
        if (*p < '0' || *p > '9' || v > (LAST_EVENT_ID_MAX - (*p - '0')) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *after = v;
    return 0;
}

void route_stream(struct server *srv, struct evhttp_request *req, const char *cid,
                  const struct principal *who)
{
    long after;

    if (last_event_id(req, &after)) {
        http_error(req, 400, "bad_request", "Last-Event-ID",
                   "must be the number of an event of this stream (its \"id:\" line), "
                   "from 0 to %ld", LAST_EVENT_ID_MAX);
        return;
    }
    if (chat_may_read_turn(srv, req, cid, who))
        stream_open(srv, req, cid, after, FORMAT_KEEL, NULL, who->key_id);
}

/* Open streams per key: counted up when a stream opens, down when it
 * ends or its client leaves. */
static int key_streams_add(struct server *srv, const char *key_id, int delta)
{
    json_int_t n;

    if (!key_id[0])
        return 0;
    if (!srv->key_streams && !(srv->key_streams = json_object()))
        return 0;
    n = json_integer_value(json_object_get(srv->key_streams, key_id)) + delta;
    if (n <= 0)
        json_object_del(srv->key_streams, key_id);
    else
        json_object_set_new(srv->key_streams, key_id, json_integer(n));
    return (int)n;
}

void stream_open(struct server *srv, struct evhttp_request *req, const char *cid, long after,
                 enum reply_format format, const char *model, const char *key_id)
{
    enum bus_status status = bus_read(srv->bus, cid, 0, NULL, NULL, NULL, NULL, 0);
    struct stream *s;

    /* Finished long ago, or finished quietly (a ?wait=1 turn, whose
     * stage lines and answer pieces were not kept): replay from the store. */
    if (status == BUS_UNKNOWN || (status == BUS_DONE && !bus_events_kept(srv->bus, cid))) {
        struct keel_error err;
        struct evbuffer *out = evbuffer_new();
        keel_error_clear(&err);
        if (!out) {
            http_error(req, 503, "no_memory", NULL, "out of memory");
            return;
        }
        if (stored_chunk(srv, cid, after, out, &err)) {
            evbuffer_free(out);
            http_keel_error(req, &err);
            return;
        }
        stream_headers(req);
        http_log(req, 200, cid);
        evhttp_send_reply_start(req, 200, "OK");
        chunk_send(req, out);
        evbuffer_free(out);
        evhttp_send_reply_end(req);
        return;
    }
    if (srv->n_streams >= SERVER_STREAMS_MAX) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        http_error(req, 503, "busy", NULL, "too many open streams");
        return;
    }
    if (key_id && key_id[0] &&
        json_integer_value(json_object_get(srv->key_streams, key_id)) >= SERVER_STREAMS_PER_KEY) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        http_error(req, 429, "too_many_streams", "Authorization",
                   "this key has %d streams open already", SERVER_STREAMS_PER_KEY);
        return;
    }
    if (!(s = keel_calloc(1, sizeof(*s)))) {
        http_error(req, 503, "no_memory", NULL, "out of memory");
        return;
    }
    s->srv = srv;
    s->req = req;
    s->sent = after;
    s->format = format;
    snprintf(s->model, sizeof(s->model), "%s", model ? model : "");
    snprintf(s->key_id, sizeof(s->key_id), "%s", key_id ? key_id : "");
    key_streams_add(srv, s->key_id, 1);
    snprintf(s->correlation_id, sizeof(s->correlation_id), "%s", cid);
    s->next = srv->streams;
    if (s->next)
        s->next->prev = s;
    srv->streams = s;
    srv->n_streams++;
    /* Before the stream first reads the bus (pump_queue): an event a
     * worker adds after that read sees the stream and wakes the loop. */
    atomic_store(&srv->streams_open, srv->n_streams);
    stream_headers(req);
    http_log(req, 200, cid);
    evhttp_send_reply_start(req, 200, "OK");
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_stream_closed, s);
    pump_queue(s);   /* the events so far, on the pump's next pass */
}

/* ---- the loop's wake-up ----------------------------------------------------- */

void streams_pump_cb(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;

    (void)fd;
    (void)what;
    for (int n = 0; n < SERVER_PUMP_BATCH && srv->pump_head; n++)
        stream_pump(srv->pump_head);   /* unqueues it; it may end */
    if (srv->pump_head)   /* the rest after this pass's writes */
        pump_queue(srv->pump_head);
}

void streams_pump(struct server *srv)
{
    for (struct stream *s = srv->streams; s; s = s->next)
        pump_queue(s);
    waiters_pump(srv);
}

void streams_heartbeat(struct server *srv)
{
    for (struct stream *s = srv->streams; s; s = s->next) {
        s->beat = 1;
        pump_queue(s);
    }
}

void streams_close_all(struct server *srv)
{
    for (struct stream *s = srv->streams, *next; s; s = next) {
        next = s->next;   /* s may end */
        s->beat = 0;
        stream_pump(s);
    }
    while (srv->streams)
        stream_end(srv->streams);
    waiters_close_all(srv);
    server_pending_release();
}
