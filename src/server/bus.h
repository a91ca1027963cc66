/*
 * bus.h — the event bus port: what a turn has said so far, for every
 * reader that asks.
 *
 * Each turn (by correlation id) has a record: its status (queued,
 * running, done, failed), the events published so far, numbered from 1
 * (stage lines, answer tokens, and a last `done` or `error`), and its
 * final result or error. Workers publish; HTTP readers take copies of
 * the events after a number they already have (SSE Last-Event-ID) and
 * of the result. Finished records stay for `keep_ms` or until `capacity`
 * records exist (oldest finished first), then readers turn to the store.
 * A record dropped to make room for a new turn (bus_open, on the HTTP
 * loop) is freed by the next bus_finish (on a worker), outside the lock.
 * A notify function (set once) is called after every change, from the
 * changing thread, with `ended` 1 when a turn ended (bus_finish), else 0:
 * the HTTP loop uses it to wake up. This implementation
 * is in process; a Redis stream can stand behind it later.
 */
#ifndef KEEL_SERVER_BUS_H
#define KEEL_SERVER_BUS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum bus_status { BUS_UNKNOWN, BUS_QUEUED, BUS_RUNNING, BUS_DONE, BUS_FAILED };

struct bus;

/* NULL when out of memory. */
struct bus *bus_new(size_t capacity, int64_t keep_ms, void (*notify)(void *, int), void *ctx);
void bus_free(struct bus *bus);

/* Starts the record of a queued turn. KEEL_ENOMEM; KEEL_EFAIL when the
 * bus holds `capacity` unfinished turns. A `quiet` turn is one no reader
 * can follow while it runs (a ?wait=1 request: its correlation id is
 * first told in its answer): its publisher puts none of its events on
 * the bus but an `error` (bus_finish), and bus_events_kept says so to
 * readers. */
int bus_open(struct bus *bus, const char *correlation_id, const char *conversation_id,
             const char *owner, int quiet, int64_t now_ms);

/* 1 when the bus holds every event of the turn so far; 0 when it does
 * not know the turn or the turn is quiet (its events are the store's,
 * once it is done). */
int bus_events_kept(struct bus *bus, const char *correlation_id);

/* The owner given at bus_open ("" for none) into `out`; 0 when the bus
 * does not know the turn. */
int bus_owner(struct bus *bus, const char *correlation_id, char *out, size_t n);

void bus_running(struct bus *bus, const char *correlation_id);

/* Appends event `name` ("stage", "token", "reset") with `data` (stolen)
 * and returns its number, or 0 (unknown turn, out of memory). The bus
 * keeps the event as its SSE text (bus_frame), its data written compact
 * with sorted keys. */
long bus_publish(struct bus *bus, const char *correlation_id, const char *name, json_t *data);

/* As bus_publish, without waking the loop: for a burst of events (an
 * answer's pieces) whose last one is published with bus_publish. */
long bus_append(struct bus *bus, const char *correlation_id, const char *name, json_t *data);

/* How many turns have ended (bus_finish) since the bus was made: the
 * loop looks at its ?wait=1 waiters only when it has changed. */
long bus_finished(struct bus *bus);

/* A turn's error as bus_finish takes it: {code, field, message} (a new
 * value; NULL when out of memory). */
json_t *bus_error(int code, const char *field, const char *message);

/* Ends a turn: `result` (stolen) on success, else `error` (stolen). Its
 * last event, `done` with the result as data or `error`, is appended
 * first; a quiet turn gets only the `error` (a failed turn is not stored,
 * so no replay would have it). The bus keeps the result as JSON text:
 * the `done` event's data, or for a quiet turn compact in the order it
 * was built with reals to 10 digits (a ?wait=1 body, bus_result_text). */
void bus_finish(struct bus *bus, const char *correlation_id, json_t *result, json_t *error,
                int64_t now_ms);

/* What a reader sees: the status (BUS_UNKNOWN when the bus does not know
 * the turn), the events numbered above `after` as a new array of their
 * SSE texts (JSON strings, see bus_frame; may be NULL when not wanted),
 * the result (parsed from its text) or error (new references, NULL when
 * none) and the conversation id. */
enum bus_status bus_read(struct bus *bus, const char *correlation_id, long after, json_t **events,
                         json_t **result, json_t **error, char *conversation_id, size_t n);

/* The result of a done turn as the bus keeps it (bus_finish): a copy the
 * caller frees with keel_free, with room for `spare` more bytes after its
 * NUL, and its length in *len; NULL when there is none or memory ran out. */
char *bus_result_text(struct bus *bus, const char *correlation_id, size_t spare, size_t *len);

/* Event `id` named `name` with `data_len` bytes of JSON text `data` as
 * SSE text, "id: ID\nevent: NAME\ndata: DATA\n\n" (a new string, its
 * length in *len), or NULL when out of memory. Streams replayed from the
 * store are written by it too, so they are the same bytes. */
char *bus_frame(long id, const char *name, const char *data, size_t data_len, size_t *len);

/* Splits an event's SSE text (bus_frame) back into its number, its name
 * (into `name`, of `name_n` bytes) and its data (a pointer into `frame`
 * and a length). 0, or -1 when `frame` is not such a text. */
int bus_frame_parse(const char *frame, size_t len, long *id, char *name, size_t name_n,
                    const char **data, size_t *data_len);

/* Forgets the finished turns of a conversation (it was deleted): their
 * results and events are no longer served. */
void bus_forget_conversation(struct bus *bus, const char *conversation_id);

/* Turns not yet finished. */
size_t bus_open_turns(struct bus *bus);

/* Forgets finished turns older than keep_ms at `now_ms`. */
void bus_expire(struct bus *bus, int64_t now_ms);

const char *bus_status_name(enum bus_status status);

#endif
