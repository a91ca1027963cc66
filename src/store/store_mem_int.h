/*
 * store_mem_int.h — the in-memory backend's conversations
 * (store_mem_conv.c), used by store_mem.c's ops.
 */
#ifndef KEEL_STORE_MEM_INT_H
#define KEEL_STORE_MEM_INT_H

#include "store/store.h"

struct mem_conversations;

/* Frees every conversation; NULL is a no-op. */
void mem_conv_free(struct mem_conversations *conv);

/* The port's conversation operations (see store.h). `conv` may be NULL
 * (no turn saved yet); mem_conv_save creates it. */
int mem_conv_load(const struct mem_conversations *conv, const char *id,
                  struct store_conversation *out, struct keel_error *err);
int mem_conv_save(struct mem_conversations **conv, const struct store_turn_record *rec,
                  struct keel_error *err);
int mem_conv_metrics(const struct mem_conversations *conv, json_t **out, struct keel_error *err);
int mem_conv_list(const struct mem_conversations *conv, const char *id, json_t **out,
                  struct keel_error *err);
int mem_conv_list_all(const struct mem_conversations *conv, const char *owner, int limit,
                      int offset, json_t **out, struct keel_error *err);
int mem_conv_delete(struct mem_conversations *conv, const char *id, struct keel_error *err);
int mem_conv_metrics_reset(struct mem_conversations *conv, struct keel_error *err);
int mem_conv_metrics_history(const struct mem_conversations *conv, int aggregate_minutes,
                             int limit, json_t **out, struct keel_error *err);
int mem_conv_scenario_set(struct mem_conversations *conv, const char *id, int64_t version,
                          const char *scenario_json, struct keel_error *err);
int mem_conv_get_turn(const struct mem_conversations *conv, const char *correlation_id,
                      json_t **out, struct keel_error *err);

/* Long-term memory (store_mem_memory.c); `m` may be NULL (none yet). */
struct mem_memory;
void mem_memory_free(struct mem_memory *m);
int mem_memory_apply(struct mem_memory **m, const struct store_memory_change *change,
                     struct keel_error *err);
int mem_memory_sync(const struct mem_memory *m, int64_t *seq, store_memory_fn fn, void *ctx,
                    struct keel_error *err);
int mem_memory_get(const struct mem_memory *m, const char *const *ids, size_t n, json_t **out,
                   struct keel_error *err);
int mem_memory_decisions(const struct mem_memory *m, const char *owner, int limit, int offset,
                         json_t **out, struct keel_error *err);
/* Erases the runs of `owner` (NULL: none) made from conversation
 * `conversation_id`, as the SQLite store does (store_delete_conversation). */
int mem_memory_erase_conversation(struct mem_memory *m, const char *conversation_id,
                                  const char *owner, int64_t now_ms, struct keel_error *err);

/* Personal facts (store_mem_personal.c): `facts` is {user: {key: row}},
 * NULL until the first write. prepare: builds the user's facts after
 * `change` into *copy (made, with the user's key reserved) without
 * changing what is stored; commit: swaps *copy in once the turn is saved
 * (cannot fail). list and stats as store_personal_list/_stats. */
int mem_personal_prepare(json_t **facts, const struct store_personal_change *change,
                         json_t **copy, struct keel_error *err);
void mem_personal_commit(json_t *facts, const char *user, json_t *copy);
int mem_personal_list(const json_t *facts, const char *user, json_t **out,
                      struct keel_error *err);
int mem_personal_stats(const json_t *facts, json_t **out, struct keel_error *err);
/* Artifacts and facts (store_mem_artifacts.c); `a` may be NULL (none
 * yet). A save prepares `next` before the turn is written, then commits
 * it (cannot fail) or discards it. */
struct mem_artifacts {
    json_t *artifacts;   /* oldest first: {id, type, title, conversation_id, turn, created_ms,
                          * artifact} */
    json_t *facts;       /* oldest first, as store_facts_list shows them */
};
void mem_artifacts_free(struct mem_artifacts *a);
int mem_artifacts_prepare(struct mem_artifacts **a, const struct store_turn_record *rec,
                          struct mem_artifacts *next, struct keel_error *err);
void mem_artifacts_commit(struct mem_artifacts *a, struct mem_artifacts *next);
void mem_artifacts_discard(struct mem_artifacts *next);
void mem_artifacts_delete(struct mem_artifacts *a, const char *conversation_id);
int mem_artifacts_list(const struct mem_artifacts *a, const char *conversation_id,
                       const char *type, int last, json_t **out, struct keel_error *err);
int mem_artifact_get(const struct mem_artifacts *a, const char *id, json_t **out,
                     struct keel_error *err);
int mem_facts_list(const struct mem_artifacts *a, const struct mem_conversations *conv,
                   const struct store_fact_query *q, json_t **out, struct keel_error *err);

#endif
