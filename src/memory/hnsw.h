/*
 * hnsw.h — the approximate nearest-neighbour graph of memory's index: a
 * C interface over hnswlib (Debian's libhnswlib-dev, header-only C++),
 * implemented in hnsw.cc. Vectors are compared by inner product, which
 * is the cosine similarity for memory's L2-normalised vectors.
 *
 * Each element has a label (a 64-bit number the caller chooses; memory's
 * index uses the order in which a run was first added). No C++
 * exception crosses into C: every function returns a keel_result
 * (KEEL_ENOMEM when an allocation fails).
 *
 * Threads: hnsw_add may run on several threads at once, and
 * hnsw_search on several threads at once, but neither alongside
 * hnsw_reserve, hnsw_remove or the other; index.c guarantees that with
 * its read-write lock (the background builders add under the read lock
 * while no search uses the graph; puts and removes hold the write lock).
 */
#ifndef KEEL_MEMORY_HNSW_H
#define KEEL_MEMORY_HNSW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hnsw;

/* Elements a graph can hold: hnswlib counts them in int and unsigned. */
#define HNSW_CAPACITY_MAX ((size_t)INT32_MAX)

struct hnsw_params {
    int m;                /* links per element and layer (layer 0: twice) */
    int ef_construction;  /* candidates considered while linking a new element */
    int ef_search;        /* candidates kept while searching */
};

/* An empty graph of `dim`-dimensional vectors with room for `capacity`
 * elements. KEEL_EINVAL for a dim or parameter below 1 (or m above
 * 1000); KEEL_ETOOBIG above HNSW_CAPACITY_MAX; KEEL_ENOMEM when the room
 * cannot be allocated. */
int hnsw_new(int dim, size_t capacity, const struct hnsw_params *params, struct hnsw **out);
void hnsw_free(struct hnsw *h);

/* Makes room for at least `capacity` elements (deleted ones count).
 * KEEL_ENOMEM (or KEEL_ETOOBIG above HNSW_CAPACITY_MAX) leaves the graph
 * as it was. Not concurrent with anything. */
int hnsw_reserve(struct hnsw *h, size_t capacity);

/* Sets ef_search (at least 1). Not concurrent with searches. */
void hnsw_set_ef(struct hnsw *h, int ef_search);

/* Adds the vector of `label`, or replaces it (and undeletes it) when the
 * label is there. KEEL_ETOOBIG when the graph is full (see hnsw_reserve);
 * KEEL_ENOMEM. */
int hnsw_add(struct hnsw *h, uint64_t label, const float *v);

/* Marks `label` deleted: never returned again until it is added anew.
 * Nothing when it is not there or already deleted. */
int hnsw_remove(struct hnsw *h, uint64_t label);

/* 1 when `label` is in the graph and not deleted. */
int hnsw_has(const struct hnsw *h, uint64_t label);

/* The at most `k` labels nearest `q`, best first, with their inner
 * products; returns how many were written into labels/sims (0 on an
 * error, which it reports in *rc when rc is not NULL). */
size_t hnsw_search(const struct hnsw *h, const float *q, size_t k, uint64_t *labels, float *sims,
                   int *rc);

/* Elements held (deleted ones included), deleted ones, room. */
size_t hnsw_count(const struct hnsw *h);
size_t hnsw_deleted(const struct hnsw *h);
size_t hnsw_capacity(const struct hnsw *h);

/* Bytes the graph holds (vectors, links, labels, locks), estimated from
 * its sizes. */
size_t hnsw_bytes(const struct hnsw *h);

#ifdef __cplusplus
}
#endif

#endif
