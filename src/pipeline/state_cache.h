/*
 * state_cache.h — the parsed thread states of a pipeline's recent
 * conversations, so a follow-up turn does not parse its conversation's
 * state again (jansson reads ~500 bytes of state at ~190 instructions a
 * byte: ~7% of a turn).
 *
 * An entry is the state's stored text and the state it stands for: the
 * state a turn published (state_to_json's text of it round-trips exactly,
 * test_state_json_round_trip) or one parsed from the store. A load uses
 * an entry only when the text the store holds now is exactly the entry's,
 * so a conversation another worker, process or restore changed is parsed
 * as before. STATE_CACHE_SIZE entries, least recently used out first.
 */
#ifndef KEEL_PIPELINE_STATE_CACHE_H
#define KEEL_PIPELINE_STATE_CACHE_H

#include <stddef.h>

#include "pipeline/state.h"

#define STATE_CACHE_SIZE 32

struct state_cache;

/* A new, empty cache, or NULL when out of memory (then nothing is cached). */
struct state_cache *state_cache_new(void);
void state_cache_free(struct state_cache *cache);

/* Copies into `state` (made by state_init under `cfg`) the cached state
 * of conversation `id` when it stands for exactly `text`; 1 then, else 0
 * and `state` untouched. A NULL cache holds nothing. */
int state_cache_get(struct state_cache *cache, const char *id, const char *text,
                    const struct pipeline_config *cfg, struct thread_state *state);

/* Remembers `state` as what `text` stands for in conversation `id`,
 * replacing that conversation's entry or the least recently used. Out of
 * memory forgets the conversation instead; never an error. */
void state_cache_put(struct state_cache *cache, const char *id, const char *text,
                     const struct thread_state *state, const struct pipeline_config *cfg);

#endif
