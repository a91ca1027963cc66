/*
 * alloc.c — allocation wrapper with a failure-injection countdown and a
 * live-allocation counter; both are atomics so worker threads may allocate.
 *
 * In front of malloc sits a small per-thread cache of freed small blocks.
 * A turn allocates and frees ~2,400 blocks (jansson's objects and
 * strings, SQLite's statement memory), nearly all under 520 bytes, and
 * frees most of them at its end. glibc's own per-thread cache holds 7
 * blocks per size, so the rest went through its arena bins (and their
 * consolidation): ~10% of a turn. This cache keeps up to
 * CACHE_CLASS_BYTES of freed blocks per size class and thread, and hands
 * them out again without a call into malloc.
 *
 * The blocks are glibc's own: a size class is read back from
 * malloc_usable_size(), class c holding blocks with at least
 * 16c + CACHE_MIN usable bytes, so any block may be freed by any thread,
 * realloc'd or passed to free() as usual. A thread's blocks go back to
 * malloc when it exits. Built with AddressSanitizer the cache is off: a
 * block parked in it would hide a use after free from the sanitizer.
 */
#include "core/alloc.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define CACHE_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define CACHE_ON 0
#endif
#endif
#ifndef CACHE_ON
#define CACHE_ON 1
#endif

#define CACHE_CLASSES 32          /* usable sizes 24, 40, … 520 bytes */
#define CACHE_MIN 24              /* the smallest block worth a class */
#define CACHE_MAX (CACHE_MIN + 16 * (CACHE_CLASSES - 1))
#define CACHE_CLASS_BYTES 32768   /* per class and thread, at most … */
#define CACHE_CLASS_BLOCKS 512    /* … and this many blocks */

static atomic_long fail_countdown = -1;  /* < 0: injection off */
static atomic_int fail_sticky;
static atomic_long live_count;
/* Counting live allocations is a read-modify-write of one shared word on
 * every malloc and free: with turns on several threads that word bounced
 * between the cores on each of a turn's thousands of allocations. So it
 * is kept only while a test asks for it (keel_alloc_count_live). */
static atomic_int count_live;
static atomic_long failure_count;   /* allocations refused, injected or real */

/* Returns nonzero when this allocation must fail. */
static int injected_failure(void)
{
    long left = atomic_load(&fail_countdown);

    while (left >= 0) {
        if (left == 0) {
            if (!atomic_load(&fail_sticky))
                atomic_store(&fail_countdown, -1);
            atomic_fetch_add(&failure_count, 1);
            return 1;
        }
        if (atomic_compare_exchange_weak(&fail_countdown, &left, left - 1))
            return 0;
    }
    return 0;
}

void keel_alloc_fail_after(long n, int sticky)
{
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_countdown, n < 0 ? -1 : n);
}

void keel_alloc_count_live(int on)
{
    atomic_store(&count_live, on != 0);
}

/* Counts one allocation more (+1) or fewer (-1) while counting is on. */
static void count_allocation(long delta)
{
    if (atomic_load_explicit(&count_live, memory_order_relaxed))
        atomic_fetch_add_explicit(&live_count, delta, memory_order_relaxed);
}

long keel_alloc_live(void)
{
    return atomic_load(&live_count);
}

long keel_alloc_failures(void)
{
    return atomic_load(&failure_count);
}

/* ---- the per-thread cache of small blocks ------------------------------- */

struct cache {
    void *head[CACHE_CLASSES];        /* a list through each block's first word */
    unsigned short count[CACHE_CLASSES];
    int state;                        /* 0 new, 1 caching, -1 thread exiting */
};

static _Thread_local struct cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_key_made;

/* The thread's exit: its blocks go back to malloc, and it caches no
 * more (later destructors may still free). */
static void cache_drain(void *arg)
{
    struct cache *c = arg;

    c->state = -1;
    for (int k = 0; k < CACHE_CLASSES; k++) {
        while (c->head[k]) {
            void *next = *(void **)c->head[k];
            free(c->head[k]);
            c->head[k] = next;
        }
        c->count[k] = 0;
    }
}

static void cache_make_key(void)
{
    cache_key_made = pthread_key_create(&cache_key, cache_drain) == 0;
}

/* A free block from the cache with at least `size` usable bytes, or NULL. */
static void *cache_take(size_t size)
{
    size_t k = size <= CACHE_MIN ? 0 : (size - CACHE_MIN + 15) / 16;
    void *p;

    if (!CACHE_ON || size > CACHE_MAX || !(p = cache.head[k]))
        return NULL;
    cache.head[k] = *(void **)p;
    cache.count[k]--;
    return p;
}

/* Parks a block being freed; 0 when it must go to free() instead. */
static int cache_put(void *p)
{
    size_t usable, k;

    if (!CACHE_ON || cache.state < 0)
        return 0;
    usable = malloc_usable_size(p);
    if (usable < CACHE_MIN || usable > CACHE_MAX + 15)
        return 0;
    k = (usable - CACHE_MIN) / 16;
    if (cache.count[k] >= CACHE_CLASS_BLOCKS ||
        (size_t)cache.count[k] * usable >= CACHE_CLASS_BYTES)
        return 0;
    if (!cache.state) {
        /* the first block: arrange for the drain at thread exit */
        pthread_once(&cache_once, cache_make_key);
        if (!cache_key_made || pthread_setspecific(cache_key, &cache)) {
            cache.state = -1;
            return 0;
        }
        cache.state = 1;
    }
    *(void **)p = cache.head[k];
    cache.head[k] = p;
    cache.count[k]++;
    return 1;
}

/* ---- the wrapper ----------------------------------------------------------- */

void *keel_malloc(size_t size)
{
    void *p;

    if (injected_failure())
        return NULL;
    if ((p = cache_take(size))) {
        count_allocation(1);
        return p;
    }
    p = malloc(size ? size : 1);
    if (p)
        count_allocation(1);
    else
        atomic_fetch_add(&failure_count, 1);
    return p;
}

void *keel_calloc(size_t count, size_t size)
{
    void *p;

    if (injected_failure())
        return NULL;
    p = calloc(count ? count : 1, size ? size : 1);
    if (p)
        count_allocation(1);
    else
        atomic_fetch_add(&failure_count, 1);
    return p;
}

void *keel_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return keel_malloc(size);
    void *p;

    if (injected_failure())
        return NULL;
    if (!(p = realloc(ptr, size ? size : 1)))
        atomic_fetch_add(&failure_count, 1);
    return p;
}

void keel_free(void *ptr)
{
    if (!ptr)
        return;
    count_allocation(-1);
    if (!cache_put(ptr))
        free(ptr);
}

char *keel_strndup(const char *s, size_t n)
{
    char *copy = keel_malloc(n + 1);

    if (!copy)
        return NULL;
    memcpy(copy, s, n);
    copy[n] = '\0';
    return copy;
}

char *keel_strdup(const char *s)
{
    return keel_strndup(s, strlen(s));
}
