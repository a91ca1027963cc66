/*
 * memory.h — long-term memory of finished runs (seed 003): what enters
 * it is decided by code — ADD, NOT, REPLACE or MERGE — with an optional
 * model as judge for the ambiguous middle, and every decision is kept.
 *
 *   run → embed → the top 3 active runs with similarity ≥ 0.7 →
 *     none: ADD (deterministic)
 *     else: the judge (the model when configured, else the rules) →
 *   execute in the store (one transaction) → the index follows
 *
 * The embedder (embed.c) hashes word unigrams and bigrams and character
 * trigrams into a fixed dimension, L2-normalised: deterministic, no
 * model needed. The index (index.c) holds the active runs' vectors and
 * answers the nearest ones by exact search. admit.c holds the rules, the
 * model judge and the execution.
 */
#ifndef KEEL_MEMORY_MEMORY_H
#define KEEL_MEMORY_MEMORY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define MEMORY_DIM 256               /* the hashed embedder's dimension */
#define MEMORY_TEXT_MAX (16u << 10)  /* bytes of a task or summary */
#define MEMORY_TOP_K 3
#define MEMORY_SEARCH_MAX 100        /* runs one search returns at most */

/* ---- the hashed embedder (embed.c) ------------------------------------------- */

#define MEMORY_EMBEDDER "hashed-v1"

/* Writes the embedding of a run — its task and its summary, the task
 * weighing twice — into out[MEMORY_DIM]: word unigrams and bigrams
 * after case folding and light suffix stripping, character trigrams of
 * each word, each hashed to a signed position; L2-normalised (all zero
 * for a text without words). Deterministic across runs and machines. */
void memory_embed(const char *task, const char *summary, float out[MEMORY_DIM]);

/* The cosine similarity of two normalised vectors. */
float memory_dot(const float *a, const float *b, int dim);

/* ---- the index (index.c) ------------------------------------------------------ */

struct memory_hit {
    char id[64];
    float similarity;
};

struct memory_index;

/* The approximate index (an HNSW graph, hnsw.h): used for searches
 * while the index holds at least `approximate_from` runs and the graph
 * is built. It is built in the background (`threads` threads) once the
 * index reaches that size, while the code scan answers; from then on
 * every put and remove goes to both. */
struct memory_index_conf {
    size_t approximate_from;  /* active runs; 0: never build the graph */
    int m;                    /* graph links per run and layer */
    int ef_construction;      /* candidates while linking a run */
    int ef_search;            /* candidates while searching */
    int threads;              /* builders, 1..4 */
};

#define MEMORY_APPROXIMATE_FROM 200000

/* approximate_from MEMORY_APPROXIMATE_FROM, and the graph parameters
 * measured by make bench BENCH=memory (docs/memory.md). */
void memory_index_conf_default(struct memory_index_conf *conf);

/* KEEL_EINVAL when a parameter is out of range: m 2..100, ef_construction
 * and ef_search 1..4096, threads 1..4. */
int memory_index_conf_check(const struct memory_index_conf *conf);

/* An empty index of `dim`-dimensional vectors, with the default conf.
 * NULL when out of memory. */
struct memory_index *memory_index_new(int dim);
void memory_index_free(struct memory_index *ix);

/* Sets the approximate index's conf: starts building the graph when
 * the index already holds enough runs, and forgets a graph whose build
 * failed, so it is tried again. ef_search applies to a graph at once,
 * m and ef_construction from its next build. KEEL_EINVAL for a parameter out of
 * range (nothing changes). */
int memory_index_configure(struct memory_index *ix, const struct memory_index_conf *conf);

/* Waits until no graph is being built. Returns 1 when a built graph is
 * ready (it answers searches at or above approximate_from runs). */
int memory_index_wait(struct memory_index *ix);

struct memory_index_stats {
    size_t runs;
    const char *answering;   /* what a search uses now: "int8 scan" or "hnsw" */
    int graph;               /* 0 none, 1 building, 2 ready, 3 failed */
    size_t bytes;            /* held by the index (the graph's estimated) */
    double build_seconds;    /* of the last finished graph build */
    unsigned builds;         /* graph builds finished */
};

void memory_index_stats(struct memory_index *ix, struct memory_index_stats *out);

/* The tag the index keeps for a run's owner: 0 for none (NULL or ""),
 * else a 64-bit hash of the name (never 0). Two owners whose tags
 * collide share candidates; memory_decide and memory_search check the
 * owner of every run the store returns, so they never mix. */
uint64_t memory_owner_tag(const char *owner);

/* Adds or replaces the vector of run `id` (at most 63 bytes), owned by
 * owner tag `owner` (memory_index_put: 0, none). */
int memory_index_put(struct memory_index *ix, const char *id, const float *v);
int memory_index_put_owned(struct memory_index *ix, const char *id, uint64_t owner,
                           const float *v);

/* Removes run `id`; nothing when it is not there. */
void memory_index_remove(struct memory_index *ix, const char *id);

size_t memory_index_size(const struct memory_index *ix);

/* The at most `k` (≤ MEMORY_SEARCH_MAX) runs nearest `q` with
 * similarity ≥ `min`, best first (ties: the earlier added first), with
 * exact similarities. Candidates come from the graph when it answers,
 * else from a scan of 8-bit codes (see index.c);
 * memory_index_search_exact reads every float vector instead (the
 * reference for recall). Return how many hits were written. */
size_t memory_index_search(const struct memory_index *ix, const float *q, size_t k, float min,
                           struct memory_hit *hits);
size_t memory_index_search_exact(const struct memory_index *ix, const float *q, size_t k,
                                 float min, struct memory_hit *hits);
/* memory_index_search among the runs of owner tag *owner only (NULL:
 * every run). The scan skips other owners' runs before reading their
 * codes; the graph's candidates are widened and filtered (see
 * index_graph_search), else the scan answers. */
size_t memory_index_search_owned(const struct memory_index *ix, const float *q, size_t k,
                                 float min, const uint64_t *owner, struct memory_hit *hits);

/* ---- admission (admit.c) ------------------------------------------------------ */

struct store;
struct store_memory_change;
struct llm;

struct memory_conf {
    double min_similarity;       /* candidates from here: 0.7 */
    double same_task_similarity; /* a run this close is the same task: 0.95 */
    struct llm *embedder;        /* an OpenAI-compatible /v1/embeddings (borrowed); NULL: the
                                  * hashed embedder */
    struct memory_index_conf index; /* the approximate index: from 200,000 runs */
};

/* The defaults above, with the hashed embedder. */
void memory_conf_default(struct memory_conf *conf);

/* A finished run to admit. references/artifacts are arrays (borrowed;
 * NULL: empty); id NULL: a fresh "run_…" id. */
struct memory_input {
    const char *id;
    const char *task;
    const char *summary;
    const char *outcome;         /* success | failure | partial */
    const json_t *references;    /* strings */
    const json_t *artifacts;
    const char *conversation_id; /* may be NULL */
    int64_t now_ms;
    const char *owner;           /* the API user it belongs to; NULL or "": none (the local
                                  * user). Only runs of the same owner are candidates. */
};

struct memory;

/* Memory over `store` (borrowed): the index is built from the store's
 * decisions. `judge` (borrowed, may be NULL) is the model that decides
 * the ambiguous cases; without one the rules do. */
int memory_open(struct store *store, const struct memory_conf *conf, struct llm *judge,
                struct memory **out, struct keel_error *err);
void memory_free(struct memory *m);

/* Checks `in` (KEEL_EINVAL naming the field), finds the top 3 active runs
 * with similarity ≥ min_similarity, decides ADD / NOT / REPLACE / MERGE
 * and stores the decision and its change in one transaction. *out is a
 * new object {run_id, decision, target_run_id, reason, similarity,
 * judge, candidates[{id, similarity}]}. */
int memory_admit(struct memory *m, const struct memory_input *in, json_t **out,
                 struct keel_error *err);

/* memory_admit in two steps, for a caller that stores the decision in
 * a transaction of its own (the remember stage: with its turn).
 * memory_decide checks and decides, writing nothing; the decision owns
 * its change (memory_decision_change, for store_memory_apply or a turn
 * record) and its JSON. memory_commit moves the index after the change
 * was stored. */
struct memory_decision;
int memory_decide(struct memory *m, const struct memory_input *in, struct memory_decision **out,
                  struct keel_error *err);
const struct store_memory_change *memory_decision_change(const struct memory_decision *d);
const json_t *memory_decision_json(const struct memory_decision *d);
void memory_commit(struct memory *m, const struct memory_decision *d);

/* Builds the index again from the store's decisions alone: after a
 * commit that failed (store_batch_end), it drops what memory_commit
 * added for turns that were never stored. KEEL_ENOMEM or the store's
 * error; the index then holds what could be read, and the next
 * memory_decide reads the rest. */
int memory_reload(struct memory *m, struct keel_error *err);
void memory_decision_free(struct memory_decision *d);

/* The active runs of `owner` (NULL or "": none, the local user)
 * nearest `query`, at most `limit` (1..100), best first: a new array of
 * runs, each with its similarity. Superseded and erased runs, and other
 * owners' runs, are never returned. */
int memory_search(struct memory *m, const char *owner, const char *query, int limit,
                  json_t **out, struct keel_error *err);

#endif
