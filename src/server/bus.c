/*
 * bus.c — the in-process event bus of bus.h: a JSON object of records
 * under one mutex. A record keeps its events as their SSE text and its
 * result as JSON text, written by the publishing worker before it takes
 * the lock: the loop thread sends them as they are, and dropping a
 * record frees a few strings rather than the trees of values a turn
 * made. Readers copy what they need, so the lock is held briefly.
 */
#include "server/bus.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/id.h"
#include "core/json.h"

/* An event's data: as the SSE data line has always carried it. */
#define EVENT_FLAGS (JSON_COMPACT | JSON_SORT_KEYS)
/* A quiet turn's result: as the ?wait=1 body has always carried it. */
#define BODY_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(10))

struct bus {
    pthread_mutex_t lock;
    json_t *turns;           /* correlation id -> {status, conversation_id, owner, opened,
                              * quiet, events (SSE texts), result (JSON text), error,
                              * finished} */
    /* Correlation ids in the order their turns finished, a ring of
     * 2 x capacity: make_room takes the oldest finished record from its
     * front instead of looking at every record. Ids of records already
     * gone (expired, forgotten) are skipped when they come up. */
    char (*finished)[KEEL_ID_MAX];
    size_t ring_head, ring_n, ring_cap;
    size_t capacity, open;
    int64_t keep_ms;
    long finished_turns;     /* bus_finish calls, for bus_finished */
    /* Records dropped (make_room, expiry, forgetting), freed by the next
     * bus_finish after it lets go of the lock: a record is a few hundred
     * values a worker made, and freeing them was a large part of the
     * HTTP loop's time per request (bus_open drops one per new turn). */
    json_t **dead;
    size_t n_dead;
    void (*notify)(void *, int);
    void *ctx;
};

static const char *const names[] = {"unknown", "queued", "running", "done", "failed"};

const char *bus_status_name(enum bus_status status)
{
    return (unsigned)status < sizeof(names) / sizeof(names[0]) ? names[status] : "unknown";
}

struct bus *bus_new(size_t capacity, int64_t keep_ms, void (*notify)(void *, int), void *ctx)
{
    struct bus *bus = keel_calloc(1, sizeof(*bus));

    if (!bus)
        return NULL;
    if (!(bus->turns = json_object())) {
        keel_free(bus);
        return NULL;
    }
    bus->ring_cap = capacity ? 2 * capacity : 1;
    if (!(bus->finished = keel_calloc(bus->ring_cap, sizeof(*bus->finished))) ||
        !(bus->dead = keel_calloc(capacity ? capacity : 1, sizeof(*bus->dead)))) {
        keel_free(bus->finished);
        json_decref(bus->turns);
        keel_free(bus);
        return NULL;
    }
    pthread_mutex_init(&bus->lock, NULL);
    bus->capacity = capacity;
    bus->keep_ms = keep_ms;
    bus->notify = notify;
    bus->ctx = ctx;
    return bus;
}

void bus_free(struct bus *bus)
{
    if (!bus)
        return;
    json_decref(bus->turns);
    while (bus->n_dead)
        json_decref(bus->dead[--bus->n_dead]);
    keel_free(bus->dead);
    keel_free(bus->finished);
    pthread_mutex_destroy(&bus->lock);
    keel_free(bus);
}

/* `ended`: a turn ended (bus_finish). */
static void wake(struct bus *bus, int ended)
{
    if (bus->notify)
        bus->notify(bus->ctx, ended);
}

/* Takes record `key` out of the bus; its values are freed later, by
 * bus_finish (else now, when more than `capacity` wait). Called with the
 * lock held. */
static void drop(struct bus *bus, const char *key)
{
    json_t *rec = json_object_get(bus->turns, key);

    if (rec && bus->n_dead < bus->capacity)
        bus->dead[bus->n_dead++] = json_incref(rec);
    json_object_del(bus->turns, key);
}

/* Frees the dropped records; called without the lock. */
static void free_dead(struct bus *bus)
{
    json_t *dead[32];
    size_t n;

    do {
        n = 0;
        pthread_mutex_lock(&bus->lock);
        while (bus->n_dead && n < sizeof(dead) / sizeof(dead[0]))
            dead[n++] = bus->dead[--bus->n_dead];
        pthread_mutex_unlock(&bus->lock);
        for (size_t i = 0; i < n; i++)
            json_decref(dead[i]);
    } while (n == sizeof(dead) / sizeof(dead[0]));
}

/* Drops the oldest finished records while the bus is over capacity:
 * the front of the finish-order ring, else (its ids all gone, or it lost
 * some when it was full) the oldest found by looking at every record.
 * Called with the lock held. */
static void make_room(struct bus *bus)
{
    while (json_object_size(bus->turns) >= bus->capacity) {
        const char *key, *oldest = NULL;
        json_t *rec;
        int64_t when = 0;

        while (bus->ring_n) {
            const char *id = bus->finished[bus->ring_head];
            rec = json_object_get(bus->turns, id);
            bus->ring_head = (bus->ring_head + 1) % bus->ring_cap;
            bus->ring_n--;
            if (rec && json_object_get(rec, "finished")) {
                drop(bus, id);
                break;
            }
        }
        if (json_object_size(bus->turns) < bus->capacity)
            return;
        json_object_foreach(bus->turns, key, rec) {
            json_t *finished = json_object_get(rec, "finished");
            if (finished && (!oldest || json_integer_value(finished) < when)) {
                oldest = key;
                when = json_integer_value(finished);
            }
        }
        if (!oldest)
            return;   /* all running: the caller refuses */
        drop(bus, oldest);
    }
}

/* Appends a finished turn's id to the ring; a full ring forgets its
 * oldest id (make_room then finds that record by looking). */
static void ring_push(struct bus *bus, const char *correlation_id)
{
    if (bus->ring_n == bus->ring_cap) {
        bus->ring_head = (bus->ring_head + 1) % bus->ring_cap;
        bus->ring_n--;
    }
    snprintf(bus->finished[(bus->ring_head + bus->ring_n) % bus->ring_cap], KEEL_ID_MAX, "%s",
             correlation_id);
    bus->ring_n++;
}

int bus_open(struct bus *bus, const char *correlation_id, const char *conversation_id,
             const char *owner, int quiet, int64_t now_ms)
{
    json_t *rec;
    int rc = KEEL_OK;

    pthread_mutex_lock(&bus->lock);
    make_room(bus);
    if (json_object_size(bus->turns) >= bus->capacity) {
        rc = KEEL_EFAIL;
    } else if (!(rec = json_pack("{s:i, s:s, s:s, s:[], s:I, s:b}", "status", BUS_QUEUED,
                                 "conversation_id", conversation_id, "owner",
                                 owner ? owner : "", "events", "opened", (json_int_t)now_ms,
                                 "quiet", quiet)) ||
               json_object_set_new(bus->turns, correlation_id, rec)) {
        rc = KEEL_ENOMEM;
    } else {
        bus->open++;
    }
    pthread_mutex_unlock(&bus->lock);
    return rc;
}

static void set_status(struct bus *bus, const char *correlation_id, enum bus_status status)
{
    json_t *rec;

    pthread_mutex_lock(&bus->lock);
    rec = json_object_get(bus->turns, correlation_id);
    if (rec)
        json_object_set_new(rec, "status", json_integer(status));
    pthread_mutex_unlock(&bus->lock);
}

void bus_running(struct bus *bus, const char *correlation_id)
{
    set_status(bus, correlation_id, BUS_RUNNING);
    wake(bus, 0);
}

/* Appends an event's SSE text (its data already JSON text) to record
 * `rec`, under the lock; returns its number, or 0 when memory ran out. */
static long append_text(json_t *rec, const char *name, const char *data, size_t data_len)
{
    json_t *events = json_object_get(rec, "events"), *text;
    long id = (long)json_array_size(events) + 1;
    size_t len;
    char *frame = bus_frame(id, name, data, data_len, &len);

    text = frame ? json_stringn_nocheck(frame, len) : NULL;
    keel_free(frame);
    return text && !json_array_append_new(events, text) ? id : 0;
}

long bus_append(struct bus *bus, const char *correlation_id, const char *name, json_t *data)
{
    size_t len = 0;
    char *text = data ? keel_json_dumps_len(data, EVENT_FLAGS | JSON_ENCODE_ANY, 0, &len) : NULL;
    json_t *rec;
    long id = 0;

    json_decref(data);
    if (!text)
        return 0;
    pthread_mutex_lock(&bus->lock);
    rec = json_object_get(bus->turns, correlation_id);
    if (rec)
        id = append_text(rec, name, text, len);
    pthread_mutex_unlock(&bus->lock);
    keel_free(text);
    return id;
}

long bus_publish(struct bus *bus, const char *correlation_id, const char *name, json_t *data)
{
    long id = bus_append(bus, correlation_id, name, data);

    if (id)
        wake(bus, 0);
    return id;
}

long bus_finished(struct bus *bus)
{
    long n;

    pthread_mutex_lock(&bus->lock);
    n = bus->finished_turns;
    pthread_mutex_unlock(&bus->lock);
    return n;
}

/* 1 when the bus knows the turn and it was opened quiet; *known, when
 * not NULL, says whether the bus knows it. */
static int quiet_of(struct bus *bus, const char *correlation_id, int *known)
{
    json_t *rec;
    int quiet;

    pthread_mutex_lock(&bus->lock);
    rec = json_object_get(bus->turns, correlation_id);
    quiet = json_is_true(json_object_get(rec, "quiet"));
    if (known)
        *known = rec != NULL;
    pthread_mutex_unlock(&bus->lock);
    return quiet;
}

json_t *bus_error(int code, const char *field, const char *message)
{
    return json_pack("{s:i, s:s, s:s}", "code", code, "field", field ? field : "", "message",
                     message ? message : "");
}

void bus_finish(struct bus *bus, const char *correlation_id, json_t *result, json_t *error,
                int64_t now_ms)
{
    int quiet = quiet_of(bus, correlation_id, NULL);
    size_t len = 0, error_len = 0;
    /* Written before the lock: the result as its `done` event's data, or
     * (quiet: it has no events) as the waiting request's body. */
    char *text = result ? keel_json_dumps_len(result, quiet ? BODY_FLAGS : EVENT_FLAGS, 0, &len)
                        : NULL;
    char *error_text = NULL;
    json_t *rec;

    if (result && !text && !error)   /* out of memory: the turn fails rather than hangs */
        error = bus_error(KEEL_ENOMEM, "", "out of memory");
    if (error)   /* a failed turn stores nothing: even a quiet one keeps its error event */
        error_text = keel_json_dumps_len(error, EVENT_FLAGS, 0, &error_len);
    json_decref(result);
    pthread_mutex_lock(&bus->lock);
    rec = json_object_get(bus->turns, correlation_id);
    if (rec) {
        if (!quiet && text)
            append_text(rec, "done", text, len);
        else if (error_text)
            append_text(rec, "error", error_text, error_len);
        json_object_set_new(rec, "status", json_integer(text ? BUS_DONE : BUS_FAILED));
        if (text)
            json_object_set_new(rec, "result", json_stringn_nocheck(text, len));
        else if (error)
            json_object_set(rec, "error", error);
        json_object_set_new(rec, "finished", json_integer(now_ms));
        ring_push(bus, correlation_id);
        bus->open--;
    }
    bus->finished_turns++;   /* also for a turn the bus forgot: its waiter must hear */
    pthread_mutex_unlock(&bus->lock);
    keel_free(text);
    keel_free(error_text);
    json_decref(error);
    wake(bus, 1);
    free_dead(bus);   /* after the wake: the loop need not wait for this */
}

enum bus_status bus_read(struct bus *bus, const char *correlation_id, long after, json_t **events,
                         json_t **result, json_t **error, char *conversation_id, size_t n)
{
    enum bus_status status = BUS_UNKNOWN;
    json_t *rec, *text = NULL;

    if (events)
        *events = NULL;
    if (result)
        *result = NULL;
    if (error)
        *error = NULL;
    pthread_mutex_lock(&bus->lock);
    rec = json_object_get(bus->turns, correlation_id);
    if (rec) {
        json_t *all = json_object_get(rec, "events");
        status = (enum bus_status)json_integer_value(json_object_get(rec, "status"));
        if (events && (*events = json_array()))
            for (size_t i = after > 0 ? (size_t)after : 0; i < json_array_size(all); i++)
                json_array_append(*events, json_array_get(all, i));
        if (result)
            text = json_incref(json_object_get(rec, "result"));
        if (error)
            *error = json_incref(json_object_get(rec, "error"));
        if (conversation_id && n)
            snprintf(conversation_id, n, "%s",
                     json_string_value(json_object_get(rec, "conversation_id")));
    }
    pthread_mutex_unlock(&bus->lock);
    if (text)   /* parsed outside the lock, for a reader that wants the value (a poll) */
        *result = json_loadb(json_string_value(text), json_string_length(text), 0, NULL);
    json_decref(text);
    return status;
}

char *bus_result_text(struct bus *bus, const char *correlation_id, size_t spare, size_t *len)
{
    json_t *text;
    char *copy = NULL;

    pthread_mutex_lock(&bus->lock);
    text = json_incref(json_object_get(json_object_get(bus->turns, correlation_id), "result"));
    pthread_mutex_unlock(&bus->lock);
    if (text && (copy = keel_malloc(json_string_length(text) + 1 + spare))) {
        memcpy(copy, json_string_value(text), json_string_length(text) + 1);
        if (len)
            *len = json_string_length(text);
    }
    json_decref(text);
    return copy;
}

int bus_events_kept(struct bus *bus, const char *correlation_id)
{
    int known, quiet = quiet_of(bus, correlation_id, &known);

    return known && !quiet;
}

int bus_owner(struct bus *bus, const char *correlation_id, char *out, size_t n)
{
    json_t *rec;
    int known;

    pthread_mutex_lock(&bus->lock);
    rec = json_object_get(bus->turns, correlation_id);
    known = rec != NULL;
    if (rec && n)
        snprintf(out, n, "%s", json_string_value(json_object_get(rec, "owner")));
    pthread_mutex_unlock(&bus->lock);
    return known;
}

void bus_forget_conversation(struct bus *bus, const char *conversation_id)
{
    const char *key;
    json_t *rec, *tmp;

    pthread_mutex_lock(&bus->lock);
    json_object_foreach_safe(bus->turns, tmp, key, rec) {
        const char *conv = json_string_value(json_object_get(rec, "conversation_id"));
        if (json_object_get(rec, "finished") && conv && !strcmp(conv, conversation_id))
            drop(bus, key);
    }
    pthread_mutex_unlock(&bus->lock);
    free_dead(bus);
}

size_t bus_open_turns(struct bus *bus)
{
    size_t open;

    pthread_mutex_lock(&bus->lock);
    open = bus->open;
    pthread_mutex_unlock(&bus->lock);
    return open;
}

void bus_expire(struct bus *bus, int64_t now_ms)
{
    const char *key;
    json_t *rec, *tmp;

    pthread_mutex_lock(&bus->lock);
    json_object_foreach_safe(bus->turns, tmp, key, rec) {
        json_t *finished = json_object_get(rec, "finished");
        if (finished && now_ms - json_integer_value(finished) > bus->keep_ms)
            drop(bus, key);
    }
    pthread_mutex_unlock(&bus->lock);
    free_dead(bus);
}
