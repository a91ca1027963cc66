/*
 * store_sqlite_writelock.c — one writer at a time per database file
 * within the process, waiting on a mutex instead of SQLite's busy handler.
 *
 * Several stores (connections) of one process may write the same file:
 * the server's loop thread and its workers' shared store, the checkpoint
 * thread's last pass, a bench's threads with a store each. When two of
 * them commit at once, the second one's BEGIN IMMEDIATE
 * finds the write lock taken and SQLite's busy handler sleeps — 1 ms,
 * then 2, 5, 10 ms — although the first transaction (a turn's publish)
 * ends within a fraction of a millisecond. So in-process writers of a
 * file queue on a mutex, taken before BEGIN IMMEDIATE and given back
 * after COMMIT or ROLLBACK: the next writer starts the moment the lock is
 * free. Writers in other processes still meet SQLite's own lock and busy
 * timeout, as before.
 *
 * The mutex of a file is one of 64, chosen by a hash of its real path (the
 * path as given when it cannot be resolved): nothing is allocated, and two
 * files that share a mutex only take turns needlessly. No code holds a
 * write transaction on one store while it begins one on another, so
 * sharing cannot deadlock.
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "store/store_sqlite_int.h"

#define STRIPES 64

static pthread_mutex_t stripes[STRIPES];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void)
{
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&stripes[i], NULL);
}

/* The stripe of `path`: FNV-1a of its real path. */
static int stripe_of(const char *path)
{
    char real[PATH_MAX];
    const char *key = realpath(path, real) ? real : path;
    uint32_t h = 2166136261u;

    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    return (int)(h % STRIPES);
}

/* The mutex of the store's file (its stripe found once). */
static pthread_mutex_t *stripe_mutex(struct sqlite_store *st)
{
    pthread_once(&stripes_once, stripes_init);
    if (st->write_stripe < 0)
        st->write_stripe = stripe_of(st->path);
    return &stripes[st->write_stripe];
}

void sqlite_write_lock(struct sqlite_store *st)
{
    if (st->write_locked)
        return;
    pthread_mutex_lock(stripe_mutex(st));
    st->write_locked = 1;
}

int sqlite_write_trylock(struct sqlite_store *st)
{
    if (!st->write_locked && pthread_mutex_trylock(stripe_mutex(st)))
        return 0;
    st->write_locked = 1;
    return 1;
}

void sqlite_write_unlock(struct sqlite_store *st)
{
    if (!st->write_locked)
        return;
    st->write_locked = 0;
    pthread_mutex_unlock(&stripes[st->write_stripe]);
}

int sqlite_write_lock_path(const char *path)
{
    int stripe;

    pthread_once(&stripes_once, stripes_init);
    stripe = stripe_of(path);
    pthread_mutex_lock(&stripes[stripe]);
    return stripe;
}

void sqlite_write_unlock_stripe(int stripe)
{
    pthread_mutex_unlock(&stripes[stripe]);
}
