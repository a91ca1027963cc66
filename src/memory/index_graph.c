/*
 * index_graph.c — the approximate half of the similarity index: an HNSW
 * graph (hnsw.h, over hnswlib) that answers searches from
 * conf.approximate_from runs on, its candidates rescored with the float
 * vectors as the code scan's are (index.c).
 *
 * Each run's graph label is its `order` (when it was first added), and
 * slot_of maps a label back to the run's slot. The graph is built in the
 * background by conf.threads builders, which claim batches of labels and
 * add them under the read lock (so no put or remove runs meanwhile, and
 * searches go on with the code scan); a put or remove while it is built
 * goes to the graph when its label is there or is newer than the build
 * (the builders read every run's current vector, and skip removed runs).
 * When the graph holds more removed runs than live ones it is built
 * again. A graph that cannot be built or followed (out of memory) is
 * dropped and the code scan answers.
 */
#include <string.h>

#include "memory/index_int.h"

void memory_index_conf_default(struct memory_index_conf *conf)
{
    conf->approximate_from = MEMORY_APPROXIMATE_FROM;
    conf->m = 16;
    conf->ef_construction = 64;
    conf->ef_search = 128;
    conf->threads = 2;
}

static void join_builders(struct memory_index *ix)
{
    for (int i = 0; i < ix->n_builders; i++)
        pthread_join(ix->builders[i], NULL);
    ix->n_builders = 0;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Ends a build (the write lock held): the graph answers, or it is
 * dropped when a builder failed or the index is being freed. */
static void build_done_locked(struct memory_index *ix)
{
    if (atomic_load(&ix->failed) || atomic_load(&ix->stop)) {
        hnsw_free(ix->graph);
        ix->graph = NULL;
        ix->state = atomic_load(&ix->stop) ? GRAPH_NONE : GRAPH_FAILED;
        return;
    }
    ix->state = GRAPH_READY;
    ix->build_seconds = seconds_since(&ix->build_start);
    ix->builds++;
}

/* A builder: adds the runs of the labels it claims with their current
 * vectors, under the read lock; the last one to finish ends the build. */
static void *build_main(void *arg)
{
    struct memory_index *ix = arg;

    while (!atomic_load(&ix->stop) && !atomic_load(&ix->failed)) {
        uint64_t from = atomic_fetch_add(&ix->cursor, BUILD_BATCH), to;
        int rc = KEEL_OK;
        if (from >= ix->build_end)
            break;
        to = from + BUILD_BATCH < ix->build_end ? from + BUILD_BATCH : ix->build_end;
        pthread_rwlock_rdlock(&ix->lock);
        for (uint64_t label = from; label < to && !rc; label++) {
            uint32_t s = ix->slot_of[label];
            if (s != NO_SLOT)
                rc = hnsw_add(ix->graph, label, ix->vectors + (size_t)s * (size_t)ix->dim);
        }
        pthread_rwlock_unlock(&ix->lock);
        if (rc)
            atomic_store(&ix->failed, 1);
    }
    if (atomic_fetch_add(&ix->finished, 1) + 1 == ix->want_builders) {
        pthread_rwlock_wrlock(&ix->lock);
        build_done_locked(ix);
        pthread_rwlock_unlock(&ix->lock);
    }
    return NULL;
}

/* Starts building the graph of every run held now (the write lock
 * held; the builders wait for it). */
static void start_build(struct memory_index *ix)
{
    struct hnsw_params params = {ix->conf.m, ix->conf.ef_construction, ix->conf.ef_search};
    int started = 0;

    join_builders(ix);   /* finished: no build is running */
    if (hnsw_new(ix->dim, ix->n + ix->n / 4 + 1024, &params, &ix->graph)) {
        ix->state = GRAPH_FAILED;
        return;
    }
    ix->state = GRAPH_BUILDING;
    ix->build_end = ix->next_order;
    atomic_store(&ix->cursor, 0);
    atomic_store(&ix->stop, 0);
    atomic_store(&ix->failed, 0);
    atomic_store(&ix->finished, 0);
    ix->want_builders = ix->conf.threads;
    clock_gettime(CLOCK_MONOTONIC, &ix->build_start);
    for (int i = 0; i < ix->want_builders; i++)
        if (!pthread_create(&ix->builders[ix->n_builders], NULL, build_main, ix))
            ix->n_builders++, started++;
    if (started < ix->want_builders) {
        /* The builders that did not start count as finished, failed. */
        atomic_store(&ix->failed, 1);
        if (atomic_fetch_add(&ix->finished, ix->want_builders - started) + ix->want_builders -
                started ==
            ix->want_builders)
            build_done_locked(ix);
    }
}

void index_graph_maybe_build(struct memory_index *ix)
{
    if (ix->state == GRAPH_NONE && ix->conf.approximate_from &&
        ix->n >= ix->conf.approximate_from)
        start_build(ix);
}

/* A graph that cannot follow the index is dropped (the write lock
 * held); a running build is told to end, and its last builder drops it. */
static void graph_broken(struct memory_index *ix)
{
    if (ix->state == GRAPH_BUILDING) {
        atomic_store(&ix->failed, 1);
    } else {
        hnsw_free(ix->graph);
        ix->graph = NULL;
        ix->state = GRAPH_FAILED;
    }
}

/* Always once built; while building, when the builders have added the
 * run already or it is newer than the build. */
void index_graph_put(struct memory_index *ix, uint64_t label, const float *v)
{
    size_t need;

    if (!ix->graph || atomic_load(&ix->failed))
        return;
    if (label < ix->build_end && ix->state == GRAPH_BUILDING && !hnsw_has(ix->graph, label))
        return;   /* a builder adds it, with this vector */
    need = hnsw_count(ix->graph) + 1;
    if (ix->state == GRAPH_BUILDING) {
        /* room for the labels still to be added, and the batches in flight */
        uint64_t at = atomic_load(&ix->cursor);
        need += (at < ix->build_end ? ix->build_end - at : 0) +
                (size_t)ix->want_builders * BUILD_BATCH;
    }
    if (need > hnsw_capacity(ix->graph) &&
        hnsw_reserve(ix->graph, need + hnsw_capacity(ix->graph) / 2)) {
        graph_broken(ix);
        return;
    }
    if (hnsw_add(ix->graph, label, v))
        graph_broken(ix);
}

void index_graph_remove(struct memory_index *ix, uint64_t label)
{
    if (!ix->graph || atomic_load(&ix->failed) || !hnsw_has(ix->graph, label))
        return;
    if (hnsw_remove(ix->graph, label)) {
        graph_broken(ix);
        return;
    }
    /* More removed runs than live ones: built again. */
    if (ix->state == GRAPH_READY && hnsw_deleted(ix->graph) > ix->n) {
        hnsw_free(ix->graph);
        ix->graph = NULL;
        ix->state = GRAPH_NONE;
        index_graph_maybe_build(ix);
    }
}

int memory_index_conf_check(const struct memory_index_conf *conf)
{
    return conf->m < 2 || conf->m > 100 || conf->ef_construction < 1 ||
                   conf->ef_construction > 4096 || conf->ef_search < 1 ||
                   conf->ef_search > 4096 || conf->threads < 1 || conf->threads > BUILDERS_MAX
               ? KEEL_EINVAL
               : KEEL_OK;
}

int memory_index_configure(struct memory_index *ix, const struct memory_index_conf *conf)
{
    if (memory_index_conf_check(conf))
        return KEEL_EINVAL;
    pthread_rwlock_wrlock(&ix->lock);
    ix->conf = *conf;
    if (ix->graph)   /* m and ef_construction apply from the next build */
        hnsw_set_ef(ix->graph, conf->ef_search);
    if (!conf->approximate_from && ix->graph)   /* never: the graph goes */
        graph_broken(ix);   /* GRAPH_FAILED (now NONE below), or a build told to end */
    if (ix->state == GRAPH_FAILED)
        ix->state = GRAPH_NONE;
    index_graph_maybe_build(ix);
    pthread_rwlock_unlock(&ix->lock);
    return KEEL_OK;
}

int memory_index_wait(struct memory_index *ix)
{
    struct timespec pause = {0, 5 * 1000 * 1000};
    int state;

    for (;;) {
        pthread_rwlock_rdlock(&ix->lock);
        state = ix->state;
        pthread_rwlock_unlock(&ix->lock);
        if (state != GRAPH_BUILDING)
            return state == GRAPH_READY;
        nanosleep(&pause, NULL);
    }
}

void memory_index_stats(struct memory_index *ix, struct memory_index_stats *out)
{
    pthread_rwlock_rdlock(&ix->lock);
    out->runs = ix->n;
    out->graph = ix->state;
    out->answering = ix->state == GRAPH_READY && ix->conf.approximate_from &&
                             ix->n >= ix->conf.approximate_from
                         ? "hnsw"
                         : "int8 scan";
    out->bytes = ix->cap * ((size_t)ix->dim * (sizeof(float) + 1) + ID_MAX + sizeof(uint64_t)) +
                 ix->table_cap * sizeof(int32_t) + ix->slot_of_cap * sizeof(uint32_t) +
                 (ix->graph && ix->state == GRAPH_READY ? hnsw_bytes(ix->graph) : 0);
    out->build_seconds = ix->build_seconds;
    out->builds = ix->builds;
    pthread_rwlock_unlock(&ix->lock);
}

void index_graph_release(struct memory_index *ix)
{
    atomic_store(&ix->stop, 1);
    join_builders(ix);
    hnsw_free(ix->graph);
    ix->graph = NULL;
}

/* Asks the graph for k + RESCORE, so ties and the threshold behave as
 * with the code scan. */
long index_graph_search(const struct memory_index *ix, const float *q, size_t k, float min,
                         const uint64_t *owner, struct memory_hit *hits, uint64_t *orders)
{
    uint64_t labels[OWNER_WIDEN * (MEMORY_SEARCH_MAX + RESCORE)];
    float sims[OWNER_WIDEN * (MEMORY_SEARCH_MAX + RESCORE)];
    size_t got, n = 0, want = owner ? OWNER_WIDEN * (k + RESCORE) : k + RESCORE, own = 0;
    int rc;

    if (ix->state != GRAPH_READY || !ix->conf.approximate_from ||
        ix->n < ix->conf.approximate_from)
        return -1;
    got = hnsw_search(ix->graph, q, want, labels, sims, &rc);
    if (rc)
        return -1;
    for (size_t c = 0; c < got; c++) {
        uint32_t s = labels[c] < ix->slot_of_cap ? ix->slot_of[labels[c]] : NO_SLOT;
        float sim;
        if (s == NO_SLOT)
            continue;   /* not possible: removed runs are marked in the graph */
        if (owner && ix->owners[s] != *owner)
            continue;   /* another owner's run: never a hit */
        own++;
        sim = memory_dot(q, ix->vectors + (size_t)s * (size_t)ix->dim, ix->dim);
        if (sim >= min)
            index_add_hit(ix, hits, orders, &n, k, sim, s);
    }
    if (owner && own < k && got == want)
        return -1;   /* the owner's nearest may lie further out: the scan */
    return (long)n;
}
