/*
 * store_lock.c — the lock of a store shared by threads (store.h:
 * store_share_threads, store_enter/leave, store_yield/resume) and the read
 * snapshots such a store takes for the thread that holds it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/alloc.h"
#include "store/store.h"
#include "store/store_lock_int.h"

/* ---- a store shared by threads --------------------------------------------
 *
 * One connection for every worker of a process: a SQLite connection's page
 * cache is dropped whenever another connection of the file commits, so
 * each of two workers with its own connection read again, after the
 * other's commit, every page its turn touched (~30 reads a turn against
 * ~5, a third of a turn's time). Shared, the store's calls take turns
 * under one lock.
 *
 * The lock is a ticket lock: a thread takes a number and waits until it
 * is served, so waiting threads get the store in the order they came (a
 * plain mutex lets the thread that just let go take it straight back,
 * and a worker that holds it for whole turns would keep the other out
 * for as long as its own queue had work). It is recursive through the
 * holder's depth, kept in the lock: a backend's callback may call the
 * store again, and a worker may hold it across turns. */

struct store_lock {
    pthread_mutex_t mutex;
    pthread_cond_t turn;
    unsigned long next;      /* the number the next thread takes */
    unsigned long serving;   /* the number that holds the lock */
    atomic_uintptr_t owner;  /* the holder's thread_token(), 0: none */
    int depth;               /* the holder's: read and written by it alone */
    int reading;             /* the holder's read snapshot is open (one depth of its own) */
};

/* A number no other live thread has: the address of a thread-local. */
static uintptr_t thread_token(void)
{
    static _Thread_local char me;

    return (uintptr_t)&me;
}

int store_share_threads(struct store *store, struct keel_error *err)
{
    struct store_lock *lock;

    if (store->lock)
        return KEEL_OK;
    if (!(lock = keel_calloc(1, sizeof(*lock))))
        return keel_error_set(err, KEEL_ENOMEM, "store", "out of memory");
    if (pthread_mutex_init(&lock->mutex, NULL)) {
        keel_free(lock);
        return keel_error_set(err, KEEL_ENOMEM, "store", "cannot make the store's lock");
    }
    if (pthread_cond_init(&lock->turn, NULL)) {
        pthread_mutex_destroy(&lock->mutex);
        keel_free(lock);
        return keel_error_set(err, KEEL_ENOMEM, "store", "cannot make the store's lock");
    }
    store->lock = lock;
    return KEEL_OK;
}

/* Takes a number and waits for it; `waiting(ctx)`, when given, is
 * called once the number is taken if it must wait (to tell the holder). */
static void lock_take(struct store_lock *lock, void (*waiting)(void *), void *ctx)
{
    unsigned long mine;

    pthread_mutex_lock(&lock->mutex);
    mine = lock->next++;
    if (lock->serving != mine && waiting) {
        pthread_mutex_unlock(&lock->mutex);
        waiting(ctx);
        pthread_mutex_lock(&lock->mutex);
    }
    while (lock->serving != mine)
        pthread_cond_wait(&lock->turn, &lock->mutex);
    pthread_mutex_unlock(&lock->mutex);
}

static void lock_give(struct store_lock *lock)
{
    int waiting;

    pthread_mutex_lock(&lock->mutex);
    waiting = ++lock->serving != lock->next;
    pthread_mutex_unlock(&lock->mutex);
    if (waiting)   /* every waiter looks; the one whose number it is goes on */
        pthread_cond_broadcast(&lock->turn);
}

void store_enter(struct store *store)
{
    struct store_lock *lock = store->lock;

    if (!lock)
        return;
    if (atomic_load(&lock->owner) == thread_token()) {
        lock->depth++;
        return;
    }
    lock_take(lock, NULL, NULL);
    atomic_store(&lock->owner, thread_token());
    lock->depth = 1;
}

int store_leave(struct store *store, int rc)
{
    struct store_lock *lock = store->lock;

    if (lock && atomic_load(&lock->owner) == thread_token() && !--lock->depth) {
        atomic_store(&lock->owner, 0);
        lock_give(lock);
    }
    return rc;
}

int store_yield(struct store *store)
{
    struct store_lock *lock = store ? store->lock : NULL;

    /* Only the caller's own hold: never in the middle of a store call. */
    if (!lock || atomic_load(&lock->owner) != thread_token() || lock->depth != 1)
        return 0;
    lock->depth = 0;
    atomic_store(&lock->owner, 0);
    lock_give(lock);
    return 1;
}

void store_resume(struct store *store, int depth, void (*waiting)(void *ctx), void *ctx)
{
    struct store_lock *lock = store ? store->lock : NULL;

    if (!lock || depth <= 0)
        return;
    lock_take(lock, waiting, ctx);
    atomic_store(&lock->owner, thread_token());
    lock->depth = depth;
}

/* 1 when `store` is shared and this thread holds it (store_enter). */
static int held_here(const struct store *store)
{
    return store->lock && atomic_load(&store->lock->owner) == thread_token();
}

/* A shared store takes a snapshot only for a thread that holds it across
 * the snapshot (a server's worker holds it across turns): for any other,
 * the snapshot would hold the lock between its calls. The snapshot holds
 * one more depth of the lock, so store_yield refuses while it is open:
 * another thread would read and write inside its transaction. */
int store_read_begin(struct store *store, struct keel_error *err)
{
    int rc;

    if (!store->ops->read_begin)
        return KEEL_OK;
    if (!store->lock)
        return store->ops->read_begin(store, err);
    if (!held_here(store) || store->lock->reading)
        return KEEL_OK;
    store_enter(store);
    if ((rc = store->ops->read_begin(store, err)))
        return store_leave(store, rc);
    store->lock->reading = 1;
    return KEEL_OK;
}

void store_read_end(struct store *store)
{
    if (!store->lock) {
        if (store->ops->read_end)
            store->ops->read_end(store);
        return;
    }
    if (!held_here(store) || !store->lock->reading)
        return;
    store->lock->reading = 0;
    if (store->ops->read_end)
        store->ops->read_end(store);
    store_leave(store, KEEL_OK);
}

void store_lock_free(struct store_lock *lock)
{
    if (!lock)
        return;
    pthread_cond_destroy(&lock->turn);
    pthread_mutex_destroy(&lock->mutex);
    keel_free(lock);
}
