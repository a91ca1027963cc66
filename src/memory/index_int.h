/*
 * index_int.h — the similarity index's insides, shared by index.c (the
 * runs' vectors, their codes and the id table; the code scan) and
 * index_graph.c (the HNSW graph: its background build, keeping it in
 * step, searching it). See the opening comments of both.
 */
#ifndef KEEL_MEMORY_INDEX_INT_H
#define KEEL_MEMORY_INDEX_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "memory/hnsw.h"
#include "memory/memory.h"

#define ID_MAX 64
#define RESCORE 32          /* candidates rescored exactly beyond the k asked for */
#define CODE_SCALE 127.0f
#define NO_SLOT UINT32_MAX
#define BUILD_BATCH 256     /* labels a builder claims at once */
#define BUILDERS_MAX 4
#define OWNER_WIDEN 4       /* graph candidates per hit wanted, when filtered by owner */

/* memory_index_stats' `graph` values */
enum { GRAPH_NONE, GRAPH_BUILDING, GRAPH_READY, GRAPH_FAILED };

struct memory_index {
    int dim;
    size_t n, cap;
    float *vectors;           /* n × dim */
    int8_t *codes;            /* n × dim: round(v × 127) */
    char (*ids)[ID_MAX];      /* n */
    uint64_t *order;          /* n: when each was added, for ties */
    uint64_t *owners;         /* n: memory_owner_tag of each run's owner */
    uint64_t next_order;
    int32_t *table;           /* slot + 1, 0 empty, -1 deleted; table_cap entries */
    size_t table_cap, table_used;
    uint32_t *slot_of;        /* by order: the run's slot, NO_SLOT once removed */
    size_t slot_of_cap;
    pthread_rwlock_t lock;
    /* the approximate index; all but the atomics change under the write lock */
    struct memory_index_conf conf;
    struct hnsw *graph;       /* while building and when ready */
    int state;                /* GRAPH_* */
    uint64_t build_end;       /* labels below it are the builders' */
    atomic_uint_fast64_t cursor;   /* the next label a builder claims */
    atomic_int stop, failed, finished;
    pthread_t builders[BUILDERS_MAX];
    int n_builders;           /* started, not yet joined */
    int want_builders;        /* of the build running */
    struct timespec build_start;
    double build_seconds;
    unsigned builds;
};

/* index.c: puts slot `s` with similarity `sim` among the best `k` hits
 * (*n of them so far), best first; among equal similarities the earlier
 * added first. */
void index_add_hit(const struct memory_index *ix, struct memory_hit *hits, uint64_t *orders,
                   size_t *n, size_t k, float sim, size_t s);

/* index_graph.c, each with the write lock held: index_graph_put puts
 * run `label`'s vector into the graph when it belongs there;
 * index_graph_remove marks it deleted (and builds the graph again when
 * removed runs outnumber live ones); index_graph_maybe_build starts the
 * build once the index is big enough; a graph that fails is dropped. */
void index_graph_put(struct memory_index *ix, uint64_t label, const float *v);
void index_graph_remove(struct memory_index *ix, uint64_t label);
void index_graph_maybe_build(struct memory_index *ix);

/* index_graph.c: stops and joins the builders and frees the graph (for
 * memory_index_free; no lock: nothing else uses the index). */
void index_graph_release(struct memory_index *ix);

/* index_graph.c, with the read lock held: the graph's nearest k (at
 * most MEMORY_SEARCH_MAX) with similarity ≥ min, rescored exactly, into
 * hits and orders; -1 when the graph does not answer (not built, below
 * approximate_from, or failed): the caller scans instead. With `owner`
 * only runs of that owner tag count: the graph's nearest OWNER_WIDEN
 * times as many are rescored, and when fewer than k of them are the
 * owner's while the graph had more to give, -1 (the scan, which skips
 * other owners' runs before reading their codes, answers exactly). */
long index_graph_search(const struct memory_index *ix, const float *q, size_t k, float min,
                        const uint64_t *owner, struct memory_hit *hits, uint64_t *orders);

#endif
