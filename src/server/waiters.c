/*
 * waiters.c — the ?wait=1 requests (POST /v1/chat, and the OpenAI
 * completion without streaming) held on the loop thread until their turn
 * ends: a list of waiters, answered from the bus when a turn has ended
 * (bus_finished) and dropped when their client leaves.
 */
#include <stdio.h>

#include "core/alloc.h"
#include "server/server_int.h"

static void waiter_unlink(struct waiter *w)
{
    struct server *srv = w->srv;

    if (w->prev)
        w->prev->next = w->next;
    else
        srv->waiters = w->next;
    if (w->next)
        w->next->prev = w->prev;
}

/* The client of a ?wait=1 request left: forget it (the turn goes on). */
static void on_waiter_closed(struct evhttp_connection *conn, void *arg)
{
    struct waiter *w = arg;

    (void)conn;
    waiter_unlink(w);
    keel_free(w);
}

static void waiter_answer(struct waiter *w, enum bus_status status, json_t *result,
                          json_t *error)
{
    evhttp_connection_set_closecb(evhttp_request_get_connection(w->req), NULL, NULL);
    if (status == BUS_DONE && w->format == FORMAT_OPENAI) {
        http_json(w->req, 200, openai_completion(w->model, result));
    } else if (status == BUS_DONE) {   /* the body as the worker wrote it (bus_finish) */
        size_t len = 0;
        char *text = bus_result_text(w->srv->bus, w->correlation_id, 1, &len);
        http_json_text(w->req, 200, text, len, w->correlation_id);
    } else {
        http_error(w->req, chat_error_status(error), "turn_failed",
                   json_string_value(json_object_get(error, "field")), "%s",
                   json_string_value(json_object_get(error, "message")));
    }
    waiter_unlink(w);
    keel_free(w);
}

void chat_wait(struct server *srv, struct evhttp_request *req, const char *cid,
               enum reply_format format, const char *model)
{
    struct waiter *w = keel_calloc(1, sizeof(*w));

    if (!w) {   /* the turn runs; the caller may poll */
        http_error(req, 503, "no_memory", NULL, "out of memory");
        return;
    }
    w->srv = srv;
    w->req = req;
    w->format = format;
    snprintf(w->model, sizeof(w->model), "%s", model ? model : "");
    snprintf(w->correlation_id, sizeof(w->correlation_id), "%s", cid);
    w->next = srv->waiters;
    if (w->next)
        w->next->prev = w;
    srv->waiters = w;
    srv->waiters_new = 1;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_waiter_closed, w);
}

void waiters_pump(struct server *srv)
{
    struct waiter *w = srv->waiters;
    long finished = bus_finished(srv->bus);

    /* A waiter hears only its turn's end: look at them when a turn has
     * ended since the last look (each of a turn's events wakes the loop). */
    if (finished == srv->waiters_finished && !srv->waiters_new)
        return;
    srv->waiters_finished = finished;
    srv->waiters_new = 0;
    while (w) {
        struct waiter *next = w->next;
        json_t *result = NULL, *error = NULL;
        enum bus_status status =
            bus_read(srv->bus, w->correlation_id, 0, NULL,
                     w->format == FORMAT_OPENAI ? &result : NULL, &error, NULL, 0);
        if (status == BUS_DONE || status == BUS_FAILED || status == BUS_UNKNOWN)
            waiter_answer(w, status, result, error);
        json_decref(result);
        json_decref(error);
        w = next;
    }
}

void waiters_close_all(struct server *srv)
{
    while (srv->waiters) {
        struct waiter *w = srv->waiters;
        evhttp_connection_set_closecb(evhttp_request_get_connection(w->req), NULL, NULL);
        http_error(w->req, 503, "shutting_down", NULL, "the server stopped before the turn ended");
        waiter_unlink(w);
        keel_free(w);
    }
}
