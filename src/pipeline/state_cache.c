/*
 * state_cache.c — a small least-recently-used table of parsed thread
 * states by conversation (state_cache.h). A pipeline's turns run on one
 * thread at a time, but the table takes its own lock so that needs no
 * proof.
 */
#include "pipeline/state_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/id.h"

struct entry {
    char id[KEEL_ID_MAX + 80];         /* as turn.conversation_id; "" = free */
    char *text;                        /* the stored state it stands for */
    struct thread_state state;         /* its history allocated once */
    uint64_t used;
};

struct state_cache {
    pthread_mutex_t lock;
    struct entry e[STATE_CACHE_SIZE];
    uint64_t clock;
};

struct state_cache *state_cache_new(void)
{
    struct state_cache *c = keel_calloc(1, sizeof(*c));

    if (c)
        pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void entry_clear(struct entry *e)
{
    keel_free(e->text);
    e->text = NULL;
    e->id[0] = '\0';
}

void state_cache_free(struct state_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < STATE_CACHE_SIZE; i++) {
        entry_clear(&c->e[i]);
        state_release(&c->e[i].state);
    }
    pthread_mutex_destroy(&c->lock);
    keel_free(c);
}

static struct entry *find(struct state_cache *c, const char *id)
{
    for (int i = 0; i < STATE_CACHE_SIZE; i++)
        if (c->e[i].id[0] && !strcmp(c->e[i].id, id))
            return &c->e[i];
    return NULL;
}

int state_cache_get(struct state_cache *c, const char *id, const char *text,
                    const struct pipeline_config *cfg, struct thread_state *state)
{
    struct entry *e;
    int hit = 0;

    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    if ((e = find(c, id)) && !strcmp(e->text, text)) {
        state_copy(state, &e->state, cfg);
        e->used = ++c->clock;
        hit = 1;
    }
    pthread_mutex_unlock(&c->lock);
    return hit;
}

void state_cache_put(struct state_cache *c, const char *id, const char *text,
                     const struct thread_state *state, const struct pipeline_config *cfg)
{
    struct entry *e;
    size_t n = strlen(id);

    if (!c || n >= sizeof(c->e[0].id))
        return;
    pthread_mutex_lock(&c->lock);
    if (!(e = find(c, id))) {
        e = &c->e[0];
        for (int i = 1; i < STATE_CACHE_SIZE && e->id[0]; i++)
            if (!c->e[i].id[0] || c->e[i].used < e->used)
                e = &c->e[i];
        entry_clear(e);
    }
    keel_free(e->text);
    if (!(e->text = keel_strdup(text)) ||
        (!e->state.history && state_init(&e->state, cfg))) {
        entry_clear(e);
    } else {
        memcpy(e->id, id, n + 1);
        state_copy(&e->state, state, cfg);
        e->used = ++c->clock;
    }
    pthread_mutex_unlock(&c->lock);
}
