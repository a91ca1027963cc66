/*
 * store_lock_int.h — for store.c: freeing a shared store's lock
 * (store_lock.c) when the store closes.
 */
#ifndef KEEL_STORE_LOCK_INT_H
#define KEEL_STORE_LOCK_INT_H

struct store_lock;

/* Frees `lock` (NULL: nothing); no thread may hold or wait for it. */
void store_lock_free(struct store_lock *lock);

#endif
