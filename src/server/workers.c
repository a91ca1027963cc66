/*
 * workers.c — the worker threads: all share one store (one connection,
 * store_share_threads), each holds one pipeline per served pack, takes
 * turns from the queue (one worker at a time, see worker_main), and
 * publishes on the bus what the user may see: stage lines (events of
 * level user or both), the answer in small pieces (`token`), then `done`
 * with the result's summary, or `error`. With a model, the pieces are
 * the model's, published as they arrive; when the model fails
 * mid-answer, `reset` says the pieces so far are void and the whole
 * answer (extractive, with a notice) follows in pieces.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/blocking.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "pipeline/pipeline.h"
#include "server/server_int.h"

/* A turn that ran, waiting for its batch's commit to be answered. */
struct ran {
    struct job *job;
    json_t *summary;   /* the result's summary (server_result_summary), or NULL … */
    json_t *error;     /* … and why the turn failed */
    int streamed;      /* answer pieces went out on the bus */
    long saved_from, saved_to;   /* store_batch_counts' saved, before and after it ran */
};

struct worker {
    struct server *srv;
    pthread_t thread;
    int running;
    struct pipeline *pl[SERVER_PACKS_MAX];
    int yielded;   /* store_yield's depth while its turn waits on the network */
    int counted;   /* it counts in srv->resuming while in line for the store */
    int batching;  /* store_batch_begin began the batch of `ran` */
    uint64_t batch_began;              /* now_ns() */
    struct ran ran[SERVER_BATCH_TURNS];
    int n_ran;
};

struct turn_ctx {
    struct bus *bus;
    struct server_metrics *metrics;
    const char *correlation_id;
    uint64_t stage_start[METRICS_STAGES];   /* monotonic ns */
    int streamed;                           /* model tokens went out and were not voided */
    int quiet;                              /* the job's: its events stay off the bus */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Times each stage from its start event to its end event. */
static void time_stage(struct turn_ctx *c, const struct pipeline_event *event)
{
    const char *kind = event->kind;
    int i = metrics_stage_index(event->stage);

    if (i < 0)
        return;
    if (!strcmp(kind, "start"))
        c->stage_start[i] = now_ns();
    else if (!strcmp(kind, "end") && c->stage_start[i])
        histogram_observe(&c->metrics->stages[i], (double)(now_ns() - c->stage_start[i]) / 1e6);
}

/* A piece of the model's answer as it arrives; NULL: the pieces so far
 * are void. */
static void on_token(void *arg, const char *text, size_t n)
{
    struct turn_ctx *c = arg;

    c->streamed = text != NULL;
    if (c->quiet)
        return;
    if (!text)
        bus_publish(c->bus, c->correlation_id, "reset",
                    json_pack("{s:s}", "reason", "the model stopped; the answer follows"));
    else
        bus_publish(c->bus, c->correlation_id, "token", json_pack("{s:s%}", "text", text, n));
}

static void on_event(void *arg, const struct pipeline_event *event)
{
    struct turn_ctx *c = arg;

    time_stage(c, event);
    if (!event->user_message || c->quiet)
        return;   /* a technical line, or nobody to see it */
    bus_publish(c->bus, c->correlation_id, "stage",
                json_pack("{s:s, s:s, s:s}", "stage", event->stage, "kind", event->kind,
                          "message", event->user_message));
}

size_t server_answer_piece(const char *answer, size_t len, size_t at)
{
    size_t end = at + SERVER_TOKEN_BYTES < len ? at + SERVER_TOKEN_BYTES : len;

    while (end < len && answer[end - 1] != ' ' && answer[end - 1] != '\n' &&
           end - at < SERVER_TOKEN_BYTES * 3)
        end++;
    while (end < len && ((unsigned char)answer[end] & 0xc0) == 0x80)
        end++;
    return end;
}

static void publish_tokens(struct bus *bus, const char *cid, const char *answer)
{
    size_t len = answer ? strlen(answer) : 0;

    for (size_t at = 0; at < len;) {
        char piece[SERVER_TOKEN_BYTES * 4 + 1];
        size_t end = server_answer_piece(answer, len, at);
        snprintf(piece, sizeof(piece), "%.*s", (int)(end - at), answer + at);
        /* one burst: the "done" that follows wakes the loop once */
        bus_append(bus, cid, "token", json_pack("{s:s}", "text", piece));
        at = end;
    }
}

json_t *server_result_summary(const json_t *result)
{
    const json_t *decision = json_object_get(result, "decision");
    const json_t *a = json_object_get(result, "artifact");
    /* What the stored turn also says (its artifact event), so a summary
     * replayed from the store is the same. */
    json_t *artifact = json_is_object(a)
                           ? json_pack("{s:O, s:O, s:O, s:O}", "id", json_object_get(a, "id"),
                                       "type", json_object_get(a, "type"), "title",
                                       json_object_get(a, "title"), "facts",
                                       json_object_get(a, "facts"))
                           : json_null();

    return json_pack("{s:O, s:O, s:O, s:O, s:O, s:{s:O, s:O, s:O, s:O}, s:O, s:O, s:O?, s:O,"
                     " s:O, s:O*, s:O?, s:O?, s:O?, s:o}",
                     "correlation_id", json_object_get(result, "correlation_id"),
                     "conversation_id", json_object_get(result, "conversation_id"), "turn",
                     json_object_get(result, "turn"), "answer", json_object_get(result, "answer"),
                     "sources", json_object_get(result, "sources"), "decision", "intent",
                     json_object_get(decision, "intent"), "route",
                     json_object_get(decision, "route"), "tool",
                     json_object_get(decision, "force_tool"), "reasons",
                     json_object_get(decision, "reasons"), "stage",
                     json_object_get(result, "stage"), "clarification",
                     json_object_get(result, "clarification"), "kind",
                     json_object_get(result, "kind"), "tools_called",
                     json_object_get(result, "tools_called"), "state",
                     json_object_get(result, "state"), "providers",
                     json_object_get(result, "providers"), "active_scenario",
                     json_object_get(result, "active_scenario"), "scenario_summary",
                     json_object_get(result, "scenario_summary"), "scenario_changes",
                     json_object_get(result, "scenario_changes"), "artifact", artifact);
}

/* Runs one job's turn; what it ended with goes to `out`, for finish()
 * once its batch is committed. */
static void run_job(struct worker *w, struct job *job, struct ran *out)
{
    struct server *srv = w->srv;
    struct turn_ctx ctx = {srv->bus, &srv->metrics, job->correlation_id, {0}, 0, job->quiet};
    uint64_t t0 = now_ns();
    int p = server_pack_index(srv, job->pack);
    struct turn_request req = {
        .conversation_id = job->new_conversation ? NULL : job->conversation_id,
        .message = job->message,
        .message_len = job->message_len,
        .role = NULL,   /* the API role, mapped below */
        .now_ms = job->now_ms,
        .on_event = on_event,
        .event_ctx = &ctx,
        .no_events_list = 1,   /* the stream and the store carry them */
        .new_conversation_id = job->new_conversation ? job->conversation_id : NULL,
        .correlation_id = job->correlation_id,
        .on_token = on_token,
        .token_ctx = &ctx,
    };
    struct keel_error err;
    json_t *result = NULL, *scenario = NULL;

    out->job = job;   /* its saved_from is the caller's */
    out->summary = out->error = NULL;
    out->streamed = 0;
    keel_error_clear(&err);
    if (job->scenario_json &&
        keel_json_parse(job->scenario_json, strlen(job->scenario_json), SCENARIO_BYTES_LIMIT * 2,
                        "active_scenario", &scenario, &err))
        p = -2;   /* checked when queued: only memory fails here */
    req.active_scenario = scenario;
    bus_running(srv->bus, job->correlation_id);
    req.owner = job->owner[0] ? job->owner : NULL;
    req.traceparent = job->traceparent[0] ? job->traceparent : NULL;
    if (p == -2)
        ;   /* err says why */
    else if (p < 0)
        keel_error_set(&err, KEEL_EINVAL, "pack", "pack \"%s\" is not served", job->pack);
    else if (job->role[0] && !(req.role = pipeline_role_for(w->pl[p], job->role)))
        keel_error_set(&err, KEEL_EINVAL, "role", "pack %s has no read-only role for a viewer",
                       job->pack);
    else
        pipeline_turn(w->pl[p], &req, &result, &err);
    atomic_fetch_add(&srv->metrics.turns, 1);
    histogram_observe(&srv->metrics.turn, (double)(now_ns() - t0) / 1e6);
    if (result && (out->summary = server_result_summary(result))) {
        if (!job->quiet && !json_is_true(json_object_get(result, "streamed")))
            publish_tokens(srv->bus, job->correlation_id,
                           json_string_value(json_object_get(result, "answer")));
        out->streamed = !job->quiet;
    } else {
        if (!err.code)
            keel_error_set(&err, KEEL_ENOMEM, "turn", "out of memory");
        out->error = bus_error(err.code, err.field, err.message);
        out->streamed = ctx.streamed && !job->quiet;   /* never stored */
    }
    json_decref(result);
    json_decref(scenario);
}

/* Answers a turn on the bus — its summary, or its error, or when what it
 * saved was never committed (`lost`: its batch's commit failed) the
 * store's error — and lets its conversation's next turn run. */
static void finish(struct worker *w, struct ran *r, const struct keel_error *lost)
{
    struct server *srv = w->srv;
    const char *cid = r->job->correlation_id;

    if (lost) {
        json_decref(r->summary);
        json_decref(r->error);
        r->summary = NULL;
        r->error = bus_error(lost->code, lost->field, lost->message);
    }
    if (r->summary) {
        bus_finish(srv->bus, cid, r->summary, NULL, keel_clock_now());
    } else {
        atomic_fetch_add(&srv->metrics.errors, 1);
        if (r->streamed)   /* the answer that went out was never stored */
            bus_publish(srv->bus, cid, "reset", json_pack("{s:s}", "reason", "the turn failed"));
        bus_finish(srv->bus, cid, NULL, r->error ? r->error : json_object(), keel_clock_now());
    }
    queue_done(srv->queue, r->job);
    job_free(r->job);
}

/* Commits the batch of turns that ran (store_batch_end) and answers
 * them. When the commit fails, the turns whose saves it held are not
 * stored (those an earlier flush of the batch committed are): each
 * answers with the store's error, and the pipelines forget what the
 * batch's turns left in memory. Called before the worker lets the store
 * go. */
static void batch_end(struct worker *w)
{
    struct keel_error err, reload;
    long committed = 0;
    int rc = KEEL_OK;

    keel_error_clear(&err);
    if (w->batching) {
        rc = store_batch_end(w->srv->worker_store, &err);
        store_batch_counts(w->srv->worker_store, NULL, &committed);
    }
    w->batching = 0;
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "turns.commit_failed",
                 json_pack("{s:i, s:s, s:s}", "turns", w->n_ran, "field", err.field, "error",
                           err.message));
        for (int p = 0; p < w->srv->n_packs; p++) {
            keel_error_clear(&reload);
            if (w->pl[p] && pipeline_batch_failed(w->pl[p], &reload))
                keel_log(KEEL_LOG_WARN, "memory.reload_failed",
                         json_pack("{s:s}", "error", reload.message));
        }
    }
    for (int i = 0; i < w->n_ran; i++) {
        struct ran *r = &w->ran[i];
        finish(w, r, rc && r->saved_to > r->saved_from && r->saved_to > committed ? &err : NULL);
    }
    w->n_ran = 0;
}

/* keel_blocking's hooks: a turn waiting on a model or a provider lets
 * the store go for another worker's turns, and takes it back after. The
 * worker holding the store may be waiting for a job, or running turns:
 * `resuming` and a kick of the queue tell it to hand the store over. */
static void on_blocking(void *arg)
{
    struct worker *w = arg;

    batch_end(w);   /* the turns before this one are answered, not kept waiting */
    w->yielded = store_yield(w->srv->worker_store);
}

/* store_resume's `waiting`: in line for the store now, this turn asks the
 * holder to let go. A holder waiting for a job gets NULL (queue_kick); a
 * running one, or an idle worker the store passes to first, sees
 * `resuming`. Counted only once in line, so no holder lets go for a turn
 * that has not yet taken its place (it would take the store straight
 * back, and again). */
static void kick(void *arg)
{
    struct worker *w = arg;

    atomic_fetch_add(&w->srv->resuming, 1);
    w->counted = 1;
    queue_kick(w->srv->queue);
}

static void on_unblocking(void *arg)
{
    struct worker *w = arg;

    if (!w->yielded)
        return;
    w->counted = 0;
    store_resume(w->srv->worker_store, w->yielded, kick, w);
    if (w->counted)
        atomic_fetch_sub(&w->srv->resuming, 1);
    w->yielded = 0;
}

/* One worker holds the workers' store and runs the queued turns, taking
 * any conversation's next one; the others wait for the store. The store
 * changes hands only when a turn waits on the network (on_blocking: a
 * waiting worker takes over and runs other conversations' turns
 * meanwhile) and when that turn comes back (on_unblocking). Before, the
 * workers took turns on the store at every store call of every turn,
 * each handover a wake-up of the other thread, and two workers ran CPU-
 * bound turns slower than one. The store's lock serves waiters in the
 * order they came, so a turn back from the network gets it next. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct server *srv = w->srv;
    struct job *job;

    keel_blocking_hooks(on_blocking, on_unblocking, w);
    store_enter(srv->worker_store);
    for (;;) {
        /* Not while a turn back from the network waits for the store: the
         * kick that told the holder may have gone to another worker, which
         * let go; this one would then wait for a job with the store held.
         * Nor wait for one while turns that ran wait for their commit. */
        job = atomic_load(&srv->resuming) ? NULL : queue_take(srv->queue, w->n_ran == 0);
        if (job) {
            struct ran ran;
            int back;
            if (!w->n_ran) {
                w->batching = store_batch_begin(srv->worker_store);
                w->batch_began = now_ns();
            }
            store_batch_counts(srv->worker_store, &ran.saved_from, NULL);
            run_job(w, job, &ran);
            store_batch_counts(srv->worker_store, &ran.saved_to, NULL);
            w->ran[w->n_ran++] = ran;
            back = atomic_load(&srv->resuming);   /* read once: it decides both below */
            if (back || !w->batching || w->n_ran == SERVER_BATCH_TURNS ||
                now_ns() - w->batch_began > SERVER_BATCH_NS)
                batch_end(w);
            if (!back)
                continue;
        } else if (w->n_ran) {
            batch_end(w);   /* no turn is ready: commit and answer */
            continue;
        } else if (queue_drained(srv->queue)) {
            break;
        }
        /* a turn back from the network waits for the store: its turn (the
         * batch, if any, is ended: the store never changes hands in one) */
        batch_end(w);
        store_leave(srv->worker_store, KEEL_OK);
        store_enter(srv->worker_store);
    }
    batch_end(w);
    store_leave(srv->worker_store, KEEL_OK);
    keel_blocking_hooks(NULL, NULL, NULL);
    return NULL;
}

static void worker_release(struct worker *w)
{
    for (int i = 0; i < SERVER_PACKS_MAX; i++)
        pipeline_free(w->pl[i]);
}

int workers_start(struct server *srv, struct keel_error *err)
{
    int rc;

    if (!(srv->workers = keel_calloc((size_t)srv->n_workers, sizeof(*srv->workers))))
        return keel_error_set(err, KEEL_ENOMEM, "workers", "out of memory");
    /* One store for all workers: with a connection each, every commit
     * made the other workers read their pages again (store.h). */
    if ((rc = store_open(srv->opt.db, &srv->worker_store, err)) ||
        (srv->n_workers > 1 && (rc = store_share_threads(srv->worker_store, err))))
        return rc;
    for (int i = 0; i < srv->n_workers; i++) {
        struct worker *w = &srv->workers[i];
        w->srv = srv;
        for (int p = 0; p < srv->n_packs; p++) {
            struct pipeline_options o = {.packs_dir = srv->opt.packs_dir, .pack = srv->packs[p],
                                         .store = srv->worker_store, .providers = srv->opt.providers,
                                         .llm = srv->opt.llm,
                                         .websearch_url = srv->opt.websearch_url};
            if ((rc = pipeline_new(&o, &w->pl[p], err)) ||
                (rc = pipeline_set_artifacts_dir(w->pl[p], srv->opt.artifacts_dir, err)))
                return rc;
        }
    }
    for (int i = 0; i < srv->n_workers; i++) {
        if (pthread_create(&srv->workers[i].thread, NULL, worker_main, &srv->workers[i]))
            return keel_error_set(err, KEEL_ENOMEM, "workers", "cannot start worker %d", i);
        srv->workers[i].running = 1;
    }
    return KEEL_OK;
}

void workers_join(struct server *srv)
{
    if (!srv->workers)
        return;
    for (int i = 0; i < srv->n_workers; i++)
        if (srv->workers[i].running)
            pthread_join(srv->workers[i].thread, NULL);
    for (int i = 0; i < srv->n_workers; i++)
        worker_release(&srv->workers[i]);
    keel_free(srv->workers);
    srv->workers = NULL;
    store_close(srv->worker_store);
    srv->worker_store = NULL;
}
