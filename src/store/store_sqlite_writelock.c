/*
 * store_sqlite_writelock.c — one writer at a time per database file
 * within the process, waiting on a mutex instead of SQLite's busy handler.
 *
 * Each server worker has a store (a connection) of its own on the same
 * file. When two of them commit at once, the second one's BEGIN IMMEDIATE
 * finds the write lock taken and SQLite's busy handler sleeps — 1 ms,
 * then 2, 5, 10 ms — although the first transaction (a turn's publish)
 * ends within a fraction of a millisecond. So in-process writers of a
 * file queue on a mutex of that file, taken before BEGIN IMMEDIATE and
 * given back after COMMIT or ROLLBACK: the next writer starts the moment
 * the lock is free. Writers in other processes still meet SQLite's own
 * lock and busy timeout, as before.
 *
 * Files are told apart by their real path (the path as given when it
 * cannot be resolved); a registry of them lives as long as the process
 * and grows by one small entry per file ever written.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "store/store_sqlite_int.h"

struct file_lock {
    struct file_lock *next;
    pthread_mutex_t mutex;
    char path[];
};

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct file_lock *registry;

/* The lock of `path`, made on first use; NULL when out of memory. */
static struct file_lock *lock_of(const char *path)
{
    char real[PATH_MAX];
    const char *key = realpath(path, real) ? real : path;
    struct file_lock *l;
    size_t n = strlen(key);

    pthread_mutex_lock(&registry_mutex);
    for (l = registry; l && strcmp(l->path, key); l = l->next)
        ;
    /* Never freed: it may be held by another store of the file. The
     * system allocator, not keel's, so the unit tests' leak counts do
     * not see a lock the process keeps. */
    if (!l && (l = malloc(sizeof(*l) + n + 1))) {
        memcpy(l->path, key, n + 1);
        pthread_mutex_init(&l->mutex, NULL);
        l->next = registry;
        registry = l;
    }
    pthread_mutex_unlock(&registry_mutex);
    return l;
}

void sqlite_write_lock(struct sqlite_store *st)
{
    if (st->write_locked)
        return;
    if (!st->write_lock)
        st->write_lock = lock_of(st->path);
    if (st->write_lock) {   /* without one, SQLite's busy handler decides */
        pthread_mutex_lock(&st->write_lock->mutex);
        st->write_locked = 1;
    }
}

void sqlite_write_unlock(struct sqlite_store *st)
{
    if (!st->write_locked)
        return;
    st->write_locked = 0;
    pthread_mutex_unlock(&st->write_lock->mutex);
}
