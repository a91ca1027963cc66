/*
 * breaker.c — the circuit breaker of each upstream model server, kept
 * for the whole process: every worker and pipeline calling the same URL
 * sees the same state, as a server that is down is down for all of them.
 *
 *   closed     calls go out; failures in a row are counted
 *   open       `threshold` failures in a row: calls fail at once until
 *              the cooldown is over
 *   half-open  after the cooldown one call (the probe) goes out; its
 *              success closes the circuit, its failure opens it again
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "llm/llm.h"

#define BREAKERS 16
#define BREAKER_URL_MAX 512

struct breaker {
    char url[BREAKER_URL_MAX];    /* "": free */
    int failures;
    long long open_until_ms;      /* monotonic; 0: closed */
    int probing;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct breaker breakers[BREAKERS];

static long long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The breaker of `url`, made when `make` and a slot is free; NULL else. */
static struct breaker *find(const char *url, int make)
{
    struct breaker *free_slot = NULL;

    if (strlen(url) >= BREAKER_URL_MAX)
        return NULL;
    for (int i = 0; i < BREAKERS; i++) {
        if (!strcmp(breakers[i].url, url))
            return &breakers[i];
        if (!breakers[i].url[0] && !free_slot)
            free_slot = &breakers[i];
    }
    if (make && free_slot) {
        memset(free_slot, 0, sizeof(*free_slot));
        strcpy(free_slot->url, url);
        return free_slot;
    }
    return NULL;
}

int llm_breaker_allow(const char *url, long *wait_s)
{
    long long now = mono_ms();
    struct breaker *b;
    int ok = 1;

    pthread_mutex_lock(&lock);
    b = find(url, 0);
    if (b && b->open_until_ms) {
        if (now < b->open_until_ms || b->probing) {
            ok = 0;
            *wait_s = now < b->open_until_ms ? (long)((b->open_until_ms - now + 999) / 1000) : 1;
        } else {
            b->probing = 1;   /* half-open: this call is the probe */
        }
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

void llm_breaker_record(const char *url, int ok, int threshold, long cooldown_ms)
{
    struct breaker *b;

    pthread_mutex_lock(&lock);
    if ((b = find(url, !ok))) {
        b->probing = 0;
        if (ok) {
            b->failures = 0;
            b->open_until_ms = 0;
        } else if (++b->failures >= threshold) {
            b->open_until_ms = mono_ms() + cooldown_ms;
        }
    }
    pthread_mutex_unlock(&lock);
}

void llm_breaker_reset(void)
{
    pthread_mutex_lock(&lock);
    memset(breakers, 0, sizeof(breakers));
    pthread_mutex_unlock(&lock);
}
