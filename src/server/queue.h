/*
 * queue.h — the job queue port: turns waiting for a worker.
 *
 * A job is one chat turn to run. Jobs come out in the order they came,
 * except that a conversation's turns run one at a time and in order: the
 * queue puts every job of a conversation in the same partition (by a
 * hash of its id), and a partition whose job a worker has taken gives
 * out no other until the worker says it is done (queue_done). Any worker
 * may take any job; different conversations run in parallel. This file's
 * implementation is in process (one mutex and condition variable); a
 * Redis one can stand behind the same functions later.
 */
#ifndef KEEL_SERVER_QUEUE_H
#define KEEL_SERVER_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "core/id.h"

struct job {
    char correlation_id[KEEL_ID_MAX];
    char conversation_id[KEEL_ID_MAX + 96];
    int new_conversation;       /* conversation_id names a conversation this turn creates */
    char pack[64];
    char role[32];              /* the API role (owner, editor, viewer); "": the pack's default */
    char owner[129];            /* the API user; "": none (--auth none) */
    char *message;              /* owned, NUL-terminated */
    size_t message_len;
    int64_t now_ms;             /* 0: the clock when the turn runs */
    char traceparent[64];       /* the caller's W3C traceparent, "" when none */
    char *scenario_json;        /* owned: the request's active_scenario (seed 004), or NULL */
    int quiet;                  /* nobody can follow it while it runs (bus_open's `quiet`) */
    int partition;              /* the queue's, set by queue_push */
    struct job *next;
};

struct queue;

/* A queue of `partitions` partitions holding at most `capacity` jobs in
 * all. NULL when out of memory. */
struct queue *queue_new(int partitions, size_t capacity);

/* Adds `job` (owned by the queue from now on) to its conversation's
 * partition. KEEL_EFAIL when the queue is full or closed (the caller
 * keeps the job). */
int queue_push(struct queue *q, struct job *job);

/* The first job, in the order they came, of a partition no worker is
 * running a job of; that partition is then the caller's until
 * queue_done. With `wait`, waits while there is none. NULL when there is
 * none and: the queue is closed and drained (queue_drained), or the wait
 * was cut short (queue_kick), or the caller would not wait. The caller
 * owns the job (job_free, after queue_done). */
struct job *queue_take(struct queue *q, int wait);

/* Cuts short a queue_take waiting now (or the next one to wait): it
 * returns NULL, so its worker can let go of what it holds. */
void queue_kick(struct queue *q);

/* 1 once the queue is closed and every job has been taken. */
int queue_drained(struct queue *q);

/* The job taken by queue_take has run: its partition's next job may go. */
void queue_done(struct queue *q, const struct job *job);

/* Jobs waiting, all partitions. */
size_t queue_depth(struct queue *q);

/* Refuses new jobs; workers drain what is queued, then get NULL. */
void queue_close(struct queue *q);

/* Frees the queue and any job still in it. */
void queue_free(struct queue *q);

/* Frees a job and its message. */
void job_free(struct job *job);

#endif
