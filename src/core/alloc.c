/*
 * alloc.c — allocation wrapper with a failure-injection countdown and a
 * live-allocation counter; both are atomics so worker threads may allocate.
 */
#include "core/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

void *keel_malloc(size_t size)
{
    void *p;

    if (injected_failure())
        return NULL;
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
