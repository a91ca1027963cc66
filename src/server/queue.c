/*
 * queue.c — the in-process job queue of queue.h: every queued job on one
 * list in the order they came, and a flag per partition while a worker
 * runs one of its jobs. Taking scans from the front for the first job
 * whose partition is free (the list holds at most `capacity` jobs, and
 * the few in front are usually free).
 */
#include "server/queue.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

struct queue {
    int n;
    size_t capacity;
    pthread_mutex_t lock;
    pthread_cond_t ready;        /* a job came, a partition was freed, or the queue closed */
    struct job *head, *tail;     /* in the order they came */
    size_t depth;
    int closed;
    int kicked;                  /* queue_kick: a waiting queue_take returns NULL */
    unsigned char busy[];        /* per partition: a worker runs one of its jobs */
};

struct queue *queue_new(int partitions, size_t capacity)
{
    struct queue *q;

    if (partitions < 1)
        partitions = 1;
    q = keel_calloc(1, sizeof(*q) + (size_t)partitions);
    if (!q)
        return NULL;
    q->n = partitions;
    q->capacity = capacity;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->ready, NULL);
    return q;
}

/* FNV-1a of the conversation id: its partition. */
static int partition_of(const struct queue *q, const char *id)
{
    uint32_t h = 2166136261u;

    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return (int)(h % (uint32_t)q->n);
}

int queue_push(struct queue *q, struct job *job)
{
    pthread_mutex_lock(&q->lock);
    if (q->closed || q->depth >= q->capacity) {
        pthread_mutex_unlock(&q->lock);
        return KEEL_EFAIL;
    }
    job->partition = partition_of(q, job->conversation_id);
    job->next = NULL;
    if (q->tail)
        q->tail->next = job;
    else
        q->head = job;
    q->tail = job;
    q->depth++;
    pthread_mutex_unlock(&q->lock);
    pthread_cond_signal(&q->ready);
    return KEEL_OK;
}

/* The link pointing at the first job whose partition is free, or NULL.
 * Called with the lock held. */
static struct job **first_free(struct queue *q)
{
    for (struct job **at = &q->head; *at; at = &(*at)->next)
        if (!q->busy[(*at)->partition])
            return at;
    return NULL;
}

struct job *queue_take(struct queue *q, int wait)
{
    struct job **at, *job = NULL;

    pthread_mutex_lock(&q->lock);
    while (!(at = first_free(q)) && wait && !(q->closed && !q->depth) && !q->kicked)
        pthread_cond_wait(&q->ready, &q->lock);
    if (!at) {
        q->kicked = 0;
    } else {
        job = *at;
        *at = job->next;
        if (q->tail == job)   /* the job before it: the one whose `next` `at` is, if any */
            q->tail = at == &q->head ? NULL
                                     : (struct job *)((char *)at - offsetof(struct job, next));
        job->next = NULL;
        q->busy[job->partition] = 1;
        q->depth--;
    }
    pthread_mutex_unlock(&q->lock);
    return job;
}

/* Sets one of the queue's flags (closed, kicked) and wakes the waiters. */
static void raise_flag(struct queue *q, int *flag)
{
    pthread_mutex_lock(&q->lock);
    *flag = 1;
    pthread_mutex_unlock(&q->lock);
    pthread_cond_broadcast(&q->ready);
}

void queue_kick(struct queue *q)
{
    raise_flag(q, &q->kicked);
}

int queue_drained(struct queue *q)
{
    int drained;

    pthread_mutex_lock(&q->lock);
    drained = q->closed && !q->depth;
    pthread_mutex_unlock(&q->lock);
    return drained;
}

void queue_done(struct queue *q, const struct job *job)
{
    pthread_mutex_lock(&q->lock);
    q->busy[job->partition] = 0;
    pthread_mutex_unlock(&q->lock);
    /* another worker may wait for this partition's next job, or (closed)
     * for the queue to drain */
    pthread_cond_broadcast(&q->ready);
}

size_t queue_depth(struct queue *q)
{
    size_t d;

    pthread_mutex_lock(&q->lock);
    d = q->depth;
    pthread_mutex_unlock(&q->lock);
    return d;
}

void queue_close(struct queue *q)
{
    raise_flag(q, &q->closed);
}

void job_free(struct job *job)
{
    if (!job)
        return;
    keel_free(job->message);
    keel_free(job->scenario_json);
    keel_free(job);
}

void queue_free(struct queue *q)
{
    if (!q)
        return;
    while (q->head) {
        struct job *next = q->head->next;
        job_free(q->head);
        q->head = next;
    }
    pthread_cond_destroy(&q->ready);
    pthread_mutex_destroy(&q->lock);
    keel_free(q);
}
