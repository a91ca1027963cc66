/*
 * queue.c — the in-process job queue of queue.h.
 */
#include "server/queue.h"

#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

struct partition {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    struct job *head, *tail;
};

struct queue {
    int n;
    size_t capacity;
    pthread_mutex_t count_lock;   /* depth and closed */
    size_t depth;
    int closed;
    struct partition parts[];
};

struct queue *queue_new(int partitions, size_t capacity)
{
    struct queue *q;

    if (partitions < 1)
        partitions = 1;
    q = keel_calloc(1, sizeof(*q) + (size_t)partitions * sizeof(q->parts[0]));
    if (!q)
        return NULL;
    q->n = partitions;
    q->capacity = capacity;
    pthread_mutex_init(&q->count_lock, NULL);
    for (int i = 0; i < partitions; i++) {
        pthread_mutex_init(&q->parts[i].lock, NULL);
        pthread_cond_init(&q->parts[i].ready, NULL);
    }
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
    struct partition *p = &q->parts[partition_of(q, job->conversation_id)];

    pthread_mutex_lock(&q->count_lock);
    if (q->closed || q->depth >= q->capacity) {
        pthread_mutex_unlock(&q->count_lock);
        return KEEL_EFAIL;
    }
    q->depth++;
    pthread_mutex_unlock(&q->count_lock);
    job->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->tail)
        p->tail->next = job;
    else
        p->head = job;
    p->tail = job;
    pthread_cond_signal(&p->ready);
    pthread_mutex_unlock(&p->lock);
    return KEEL_OK;
}

static int closed(struct queue *q)
{
    int c;

    pthread_mutex_lock(&q->count_lock);
    c = q->closed;
    pthread_mutex_unlock(&q->count_lock);
    return c;
}

struct job *queue_pop(struct queue *q, int partition)
{
    struct partition *p = &q->parts[partition % q->n];
    struct job *job;

    pthread_mutex_lock(&p->lock);
    while (!p->head && !closed(q))
        pthread_cond_wait(&p->ready, &p->lock);
    job = p->head;
    if (job) {
        p->head = job->next;
        if (!p->head)
            p->tail = NULL;
        job->next = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    if (job) {
        pthread_mutex_lock(&q->count_lock);
        q->depth--;
        pthread_mutex_unlock(&q->count_lock);
    }
    return job;
}

size_t queue_depth(struct queue *q)
{
    size_t d;

    pthread_mutex_lock(&q->count_lock);
    d = q->depth;
    pthread_mutex_unlock(&q->count_lock);
    return d;
}

void queue_close(struct queue *q)
{
    pthread_mutex_lock(&q->count_lock);
    q->closed = 1;
    pthread_mutex_unlock(&q->count_lock);
    for (int i = 0; i < q->n; i++) {
        pthread_mutex_lock(&q->parts[i].lock);
        pthread_cond_broadcast(&q->parts[i].ready);
        pthread_mutex_unlock(&q->parts[i].lock);
    }
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
    for (int i = 0; i < q->n; i++) {
        struct job *job = q->parts[i].head;
        while (job) {
            struct job *next = job->next;
            job_free(job);
            job = next;
        }
        pthread_cond_destroy(&q->parts[i].ready);
        pthread_mutex_destroy(&q->parts[i].lock);
    }
    pthread_mutex_destroy(&q->count_lock);
    keel_free(q);
}
