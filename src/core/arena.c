/*
 * arena.c — chunked bump allocator freed in one call per turn.
 */
#include "core/arena.h"

#include <stdint.h>
#include <string.h>

#include "core/alloc.h"

#define ARENA_ALIGN 16

struct keel_arena_chunk {
    struct keel_arena_chunk *next;
    size_t size;  /* usable bytes in data[] */
    size_t used;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

void keel_arena_init(struct keel_arena *arena, size_t chunk_size, size_t max)
{
    arena->head = NULL;
    arena->chunk_size = chunk_size ? chunk_size : 4096;
    arena->used = 0;
    arena->max = max ? max : (size_t)64 << 20;
}

void *keel_arena_alloc(struct keel_arena *arena, size_t size)
{
    struct keel_arena_chunk *chunk = arena->head;
    size_t rounded, chunk_size;
    void *p;

    if (size > arena->max || size > SIZE_MAX - ARENA_ALIGN)
        return NULL;
    rounded = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (rounded == 0)
        rounded = ARENA_ALIGN;
    if (arena->used > arena->max - rounded)
        return NULL;
    if (!chunk || chunk->size - chunk->used < rounded) {
        chunk_size = rounded > arena->chunk_size ? rounded : arena->chunk_size;
        chunk = keel_malloc(sizeof(*chunk) + chunk_size);
        if (!chunk)
            return NULL;
        chunk->size = chunk_size;
        chunk->used = 0;
        chunk->next = arena->head;
        arena->head = chunk;
    }
    p = chunk->data + chunk->used;
    chunk->used += rounded;
    arena->used += rounded;
    memset(p, 0, size);
    return p;
}

char *keel_arena_strndup(struct keel_arena *arena, const char *s, size_t n)
{
    char *copy;

    if (n == SIZE_MAX)
        return NULL;
    copy = keel_arena_alloc(arena, n + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, n);
    copy[n] = '\0';
    return copy;
}

char *keel_arena_strdup(struct keel_arena *arena, const char *s)
{
    return keel_arena_strndup(arena, s, strlen(s));
}

void keel_arena_reset(struct keel_arena *arena)
{
    struct keel_arena_chunk *keep = arena->head, *chunk;

    if (!keep)
        return;
    chunk = keep->next;
    while (chunk) {
        struct keel_arena_chunk *next = chunk->next;
        keel_free(chunk);
        chunk = next;
    }
    keep->next = NULL;
    keep->used = 0;
    arena->used = 0;
}

void keel_arena_release(struct keel_arena *arena)
{
    keel_arena_reset(arena);
    keel_free(arena->head);
    arena->head = NULL;
}
