/*
 * arena.h — a per-turn bump allocator.
 *
 * A turn allocates its short-lived strings and structs from an arena and
 * frees them all with one keel_arena_reset() or keel_arena_release() when
 * the turn ends. Allocations are 16-byte aligned. The arena has a total cap
 * so a hostile input cannot make one turn take unbounded memory.
 */
#ifndef KEEL_CORE_ARENA_H
#define KEEL_CORE_ARENA_H

#include <stddef.h>

struct keel_arena_chunk;

struct keel_arena {
    struct keel_arena_chunk *head;  /* newest chunk first */
    size_t chunk_size;              /* default size of a new chunk */
    size_t used;                    /* bytes handed out since the last reset */
    size_t max;                     /* cap on `used` */
};

/* Initialises an empty arena (allocates nothing yet). `chunk_size` 0 means
 * 4 KiB; `max` 0 means 64 MiB. */
void keel_arena_init(struct keel_arena *arena, size_t chunk_size, size_t max);

/* Returns `size` bytes of 16-byte-aligned zeroed memory owned by the arena,
 * or NULL when allocation fails or the cap would be passed. */
void *keel_arena_alloc(struct keel_arena *arena, size_t size);

/* Copies `n` bytes of `s` (NUL-terminated) / a C string into the arena.
 * NULL on failure. */
char *keel_arena_strndup(struct keel_arena *arena, const char *s, size_t n);
char *keel_arena_strdup(struct keel_arena *arena, const char *s);

/* Frees everything but the newest chunk, which is kept for reuse. All
 * pointers handed out before become invalid. */
void keel_arena_reset(struct keel_arena *arena);

/* Frees all memory; the arena may be used again afterwards. */
void keel_arena_release(struct keel_arena *arena);

#endif
