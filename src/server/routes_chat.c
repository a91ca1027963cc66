/*
 * routes_chat.c — a turn over HTTP: POST /v1/chat queues it (or waits
 * for it with ?wait=1), GET /v1/responses/{id} polls it (from the bus,
 * else the store). The conversations named before their first turn is
 * stored are remembered here too. Streams of a turn's events and the
 * ?wait=1 waiters live in streams.c.
 */
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/id.h"
#include "core/json.h"
#include "pipeline/pipeline.h"
#include "server/server_int.h"
#include "core/utf8.h"

#define PENDING_KEEP_MS (10 * 60 * 1000)

/* ---- POST /v1/chat -------------------------------------------------------- */

int server_pack_index(const struct server *srv, const char *pack)
{
    for (int i = 0; i < srv->n_packs; i++)
        if (!strcmp(srv->packs[i], pack))
            return i;
    return -1;
}

int server_pack_served(const struct server *srv, const char *pack)
{
    return server_pack_index(srv, pack) >= 0;
}

/* Conversations created by a queued turn, not yet in the store: their
 * next message may arrive before the first turn ends. {id: {pack, at}}. */
static json_t *pending_conversations;

void server_pending_add(const char *id, const char *pack, const char *owner, int reserved)
{
    static int64_t swept;
    const char *key;
    json_t *v, *tmp;
    int64_t now = keel_clock_now();

    if (!pending_conversations && !(pending_conversations = json_object()))
        return;
    /* Swept once a second, not on every new conversation (thousands of
     * entries at a few thousand turns a second); a lookup checks the age
     * itself (pending_get). */
    if (now - swept >= 1000 || now < swept) {
        swept = now;
        json_object_foreach_safe(pending_conversations, tmp, key, v)
            if (now - json_integer_value(json_object_get(v, "at")) > PENDING_KEEP_MS)
                json_object_del(pending_conversations, key);
    }
    json_object_set_new(pending_conversations, id,
                        json_pack("{s:s, s:s, s:I, s:b}", "pack", pack, "owner", owner, "at",
                                  (json_int_t)now, "reserved", reserved));
}

/* The pending entry of conversation `id`, unless it is older than
 * PENDING_KEEP_MS (or there is none): NULL. */
static json_t *pending_get(const char *id)
{
    json_t *v = pending_conversations ? json_object_get(pending_conversations, id) : NULL;

    if (v && keel_clock_now() - json_integer_value(json_object_get(v, "at")) > PENDING_KEEP_MS)
        return NULL;
    return v;
}

void server_pending_forget(const char *id)
{
    if (pending_conversations)
        json_object_del(pending_conversations, id);
}

static int message_ok(struct evhttp_request *req, const json_t *message)
{
    const char *text = json_string_value(message);
    size_t len = json_string_length(message), blank = 0;

    if (!json_is_string(message)) {
        http_error(req, 400, "bad_request", "message", message ? "must be a string"
                                                               : "is required");
        return 0;
    }
    if (len > PIPELINE_MESSAGE_MAX) {
        http_error(req, 413, "too_large", "message", "is longer than %d bytes",
                   PIPELINE_MESSAGE_MAX);
        return 0;
    }
    while (blank < len && strchr(" \t\r\n\f\v", text[blank]))
        blank++;
    if (blank == len || memchr(text, '\0', len)) {
        http_error(req, 400, "bad_request", "message",
                   blank == len ? "must not be blank" : "must not hold NUL");
        return 0;
    }
    return 1;
}

/* Fills job->conversation_id/pack: an existing (or pending) conversation
 * of `who`, or a new one (named `id` when `name_new` and the id is free).
 * Sends the error and returns 0 on failure. */
static int conversation_for(struct server *srv, struct evhttp_request *req, const char *id,
                            const char *pack, int name_new, const struct principal *who,
                            struct job *job)
{
    struct store_conversation conv;
    struct keel_error err;
    const char *have = NULL;

    if (pack && !server_pack_served(srv, pack)) {
        http_error(req, 400, "bad_request", "pack", "\"%s\" is not a pack this server serves",
                   pack);
        return 0;
    }
    if (id) {
        json_t *pending;
        size_t n = strlen(id);
        if (!n || n > 128 || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-.:") != n) {
            http_error(req, 400, "bad_request", "conversation_id",
                       "must be 1 to 128 letters, digits or _ - . :");
            return 0;
        }
        snprintf(job->conversation_id, sizeof(job->conversation_id), "%s", id);
        keel_error_clear(&err);
        if (!store_load_conversation(srv->store, job->conversation_id, &conv, &err)) {
            int mine = principal_may_read(who, conv.owner);
            snprintf(job->pack, sizeof(job->pack), "%s", conv.pack);
            store_conversation_release(&conv);
            if (!mine) {   /* another user's conversation: as if absent */
                http_error(req, 404, "not_found", "conversation_id", "no conversation \"%s\"",
                           job->conversation_id);
                return 0;
            }
        } else if (err.code == KEEL_ENOTFOUND &&
                   (pending = pending_get(job->conversation_id))) {
            if (!principal_may_read(who,
                                    json_string_value(json_object_get(pending, "owner")))) {
                http_error(req, 404, "not_found", "conversation_id", "no conversation \"%s\"",
                           job->conversation_id);
                return 0;
            }
            snprintf(job->pack, sizeof(job->pack), "%s",
                     json_string_value(json_object_get(pending, "pack")));
            if (json_is_true(json_object_get(pending, "reserved"))) {
                /* named by POST /v1/conversations: this turn creates it */
                job->new_conversation = 1;
                json_object_set_new(pending, "reserved", json_false());
            }
        } else if (err.code == KEEL_ENOTFOUND && name_new) {
            job->new_conversation = 1;
            snprintf(job->pack, sizeof(job->pack), "%s", pack ? pack : srv->packs[0]);
            return 1;
        } else {
            http_keel_error(req, &err);
            return 0;
        }
        have = job->pack;
        if (pack && strcmp(pack, have)) {
            http_error(req, 400, "bad_request", "pack",
                       "conversation %s belongs to pack %s", job->conversation_id, have);
            return 0;
        }
        if (!server_pack_served(srv, have)) {
            http_error(req, 400, "bad_request", "conversation_id",
                       "conversation %s belongs to pack %s, which this server does not serve",
                       job->conversation_id, have);
            return 0;
        }
        return 1;
    }
    job->new_conversation = 1;
    keel_id_new("conv", job->conversation_id, sizeof(job->conversation_id));
    snprintf(job->pack, sizeof(job->pack), "%s", pack ? pack : srv->packs[0]);
    return 1;
}

struct job *chat_job(struct server *srv, struct evhttp_request *req, const struct principal *who,
                     const char *message, size_t len, const char *conversation_id,
                     const char *pack, int name_new)
{
    const char *trace = evhttp_find_header(evhttp_request_get_input_headers(req), "traceparent");
    struct job *job;

    if (srv->draining) {
        http_error(req, 503, "shutting_down", NULL, "the server is shutting down");
        return NULL;
    }
    if (!(job = keel_calloc(1, sizeof(*job)))) {
        http_error(req, 503, "no_memory", NULL, "out of memory");
        return NULL;
    }
    if (!conversation_for(srv, req, conversation_id, pack, name_new, who, job)) {
        job_free(job);
        return NULL;
    }
    if (!who->open) {
        snprintf(job->owner, sizeof(job->owner), "%s", who->user);
        snprintf(job->role, sizeof(job->role), "%s", who->role);
    }
    job->message_len = len;
    if (!(job->message = keel_strndup(message, len))) {
        http_error(req, 503, "no_memory", NULL, "out of memory");
        job_free(job);
        return NULL;
    }
    if (trace && strlen(trace) < sizeof(job->traceparent))
        snprintf(job->traceparent, sizeof(job->traceparent), "%s", trace);
    keel_id_new("turn", job->correlation_id, sizeof(job->correlation_id));
    return job;
}

int chat_enqueue(struct server *srv, struct evhttp_request *req, const struct principal *who,
                 struct job *job, char cid[KEEL_ID_MAX], char *conv, size_t conv_n)
{
    char pack[64];
    int created;

    if (bus_open(srv->bus, job->correlation_id, job->conversation_id, job->owner, job->quiet,
                 keel_clock_now())) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        http_error(req, 503, "busy", NULL, "too many turns in progress");
        return -1;
    }
    /* Once queued, a worker may run and free the job at any moment: what
     * the reply needs is copied first. */
    snprintf(cid, KEEL_ID_MAX, "%s", job->correlation_id);
    snprintf(conv, conv_n, "%s", job->conversation_id);
    snprintf(pack, sizeof(pack), "%s", job->pack);
    created = job->new_conversation;
    if (queue_push(srv->queue, job)) {
        bus_finish(srv->bus, job->correlation_id, NULL,
                   bus_error(KEEL_EFAIL, "", "the queue is full"), keel_clock_now());
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        http_error(req, 503, "busy", NULL, "the queue is full");
        return -1;
    }
    if (created)
        server_pending_add(conv, pack, who->open ? "" : who->user, 0);
    return 0;
}

void route_chat(struct server *srv, struct evhttp_request *req, const struct principal *who)
{
    static const char *const keys[] = {"message", "conversation_id", "pack", "active_scenario",
                                       NULL};
    struct keel_error err;
    char wait_buf[8], cid[KEEL_ID_MAX], conv[KEEL_ID_MAX + 96];
    const char *wait = http_query(req, "wait", wait_buf, sizeof(wait_buf));
    int waiting = wait && strcmp(wait, "0");
    json_t *body = NULL, *scenario, *id, *pack;
    struct job *job;

    if (http_body_json(req, &body))
        return;
    keel_error_clear(&err);
    if (keel_json_check_keys(body, keys, "", &err)) {
        http_keel_error(req, &err);
        goto out;
    }
    if (!message_ok(req, json_object_get(body, "message")))
        goto out;
    scenario = json_object_get(body, "active_scenario");
    if (json_is_null(scenario))
        scenario = NULL;   /* the client holds none: the stored one stays */
    if (scenario && !who->open && !strcmp(who->role, "viewer")) {
        http_error(req, 403, "forbidden", "active_scenario", "a viewer cannot change the scenario");
        goto out;
    }
    id = json_object_get(body, "conversation_id");
    pack = json_object_get(body, "pack");
    if ((id && !json_is_null(id) && !json_is_string(id)) || (pack && !json_is_string(pack))) {
        http_error(req, 400, "bad_request", id && !json_is_string(id) ? "conversation_id" : "pack",
                   "must be a string");
        goto out;
    }
    job = chat_job(srv, req, who, json_string_value(json_object_get(body, "message")),
                   json_string_length(json_object_get(body, "message")), json_string_value(id),
                   json_string_value(pack), 0);
    if (!job)
        goto out;
    if (scenario) {   /* client-owns-state: the copy wins and is saved by the turn */
        int oom = 0;
        if (scenario_check(server_scenario_conf(srv, job->pack), scenario, "active_scenario",
                           &err)) {
            http_keel_error(req, &err);
            job_free(job);
            goto out;
        }
        if (!(job->scenario_json = scenario_dump(scenario, &oom))) {
            http_error(req, 503, "no_memory", NULL, "out of memory");
            job_free(job);
            goto out;
        }
    }
    /* A waiting client learns the turn's correlation id from its answer:
     * nobody can follow its events while it runs. */
    job->quiet = waiting;
    if (chat_enqueue(srv, req, who, job, cid, conv, sizeof(conv))) {
        job_free(job);
        goto out;
    }
    if (waiting) {
        chat_wait(srv, req, cid, FORMAT_KEEL, NULL);
        goto out;
    }
    {
        char response[160], stream[160];
        snprintf(response, sizeof(response), "/v1/responses/%s", cid);
        snprintf(stream, sizeof(stream), "/v1/stream/%s", cid);
        http_json(req, 202,
                  json_pack("{s:s, s:s, s:s, s:{s:s, s:s}}", "correlation_id", cid,
                            "conversation_id", conv, "status", "queued", "links", "response",
                            response, "stream", stream));
    }
out:
    json_decref(body);
}

/* ---- results -------------------------------------------------------------- */

/* The summary of a stored turn, in the shape of a live `done`
 * (server_result_summary): the kind and the tools that ran come from the
 * stored events (classify's info event carries the kind, each tool call
 * an event with the tool and its arguments), the provider reports from
 * the decision log. */
json_t *chat_summary_from_store(struct server *srv, const json_t *turn)
{
    const json_t *decision = json_object_get(turn, "decision");
    const json_t *state = json_object_get(turn, "state");
    json_t *tools = json_array(), *e, *result, *summary;
    const json_t *artifact = NULL;
    const char *kind = NULL;
    size_t i;

    json_array_foreach(json_object_get(turn, "events"), i, e) {
        const json_t *extra = json_object_get(e, "extra");
        const char *stage = json_string_value(json_object_get(e, "stage"));
        if (!stage)
            continue;
        if (!strcmp(stage, "classify") && json_is_string(json_object_get(extra, "kind")))
            kind = json_string_value(json_object_get(extra, "kind"));
        if (!strcmp(stage, "resolve") && json_object_get(extra, "args") && tools)
            json_array_append(tools, json_object_get(extra, "tool"));
        if (!strcmp(stage, "artifact") && json_object_get(extra, "id"))
            artifact = extra;   /* the artifact.built event */
    }
    /* The stored turn in the shape of a pipeline result, summarised by
     * the one function that summarises live results. */
    result = json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:s?, s:o, s:O?, s:O*,"
                       " s:O?, s:o?, s:O?}",
                       "correlation_id", json_object_get(turn, "correlation_id"),
                       "conversation_id", json_object_get(turn, "conversation_id"), "turn",
                       json_object_get(turn, "turn"), "answer",
                       json_object_get(turn, "assistant"), "sources",
                       json_object_get(turn, "sources"), "decision", decision, "stage",
                       json_object_get(state, "stage"), "clarification",
                       json_is_true(json_object_get(turn, "clarification"))
                           ? json_object_get(turn, "assistant")
                           : json_null(),
                       "kind", kind, "tools_called", tools ? tools : json_array(), "state", state,
                       "providers", json_object_get(decision, "providers"), "active_scenario",
                       json_object_get(turn, "active_scenario"), "scenario_summary",
                       server_scenario_summary(
                           srv, json_string_value(json_object_get(turn, "conversation_id")),
                           json_object_get(turn, "active_scenario")),
                       "scenario_changes", json_object_get(turn, "scenario_delta"));
    if (result && artifact)
        json_object_set(result, "artifact", (json_t *)artifact);
    summary = result ? server_result_summary(result) : NULL;
    json_decref(result);
    return summary;
}

int chat_error_status(const json_t *error)
{
    switch ((int)json_integer_value(json_object_get(error, "code"))) {
    case KEEL_EINVAL: return 400;
    case KEEL_ENOTFOUND: return 404;
    case KEEL_ETOOBIG: return 413;
    case KEEL_EFAIL: return 409;
    case KEEL_ENOMEM: return 503;
    default: return 500;
    }
}

/* Sends 404 (or the error) and returns 0 unless `who` may read turn `cid`. */
int chat_may_read_turn(struct server *srv, struct evhttp_request *req, const char *cid,
                       const struct principal *who)
{
    struct keel_error err;
    char owner[160];

    keel_error_clear(&err);
    if (turn_owner(srv, cid, owner, sizeof(owner), &err)) {
        http_keel_error(req, &err);
        return 0;
    }
    if (!principal_may_read(who, owner)) {
        http_error(req, 404, "not_found", "correlation_id", "no turn \"%s\"", cid);
        return 0;
    }
    return 1;
}

void route_response(struct server *srv, struct evhttp_request *req, const char *cid,
                    const struct principal *who)
{
    char conv[KEEL_ID_MAX + 96] = "";
    json_t *result = NULL, *error = NULL, *turn = NULL;
    struct keel_error err;
    enum bus_status status;

    if (!chat_may_read_turn(srv, req, cid, who))
        return;
    status = bus_read(srv->bus, cid, 0, NULL, &result, &error, conv, sizeof(conv));

    if (status != BUS_UNKNOWN) {
        http_json(req, 200,
                  json_pack("{s:s, s:s, s:s, s:o*, s:o*}", "correlation_id", cid,
                            "conversation_id", conv, "status", bus_status_name(status), "result",
                            result, "error", error));
        return;
    }
    keel_error_clear(&err);
    if (store_get_turn(srv->store, cid, &turn, &err)) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200,
              json_pack("{s:s, s:O, s:s, s:o}", "correlation_id", cid, "conversation_id",
                        json_object_get(turn, "conversation_id"), "status", "done", "result",
                        chat_summary_from_store(srv, turn)));
    json_decref(turn);
}

void server_pending_release(void)
{
    json_decref(pending_conversations);
    pending_conversations = NULL;
}
