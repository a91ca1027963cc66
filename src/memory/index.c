/*
 * index.c — the similarity index: the active runs' vectors in one
 * contiguous array, and an open-addressing table from run id to slot for
 * puts and removes. A removed run's slot takes the last one
 * (swap-remove), so the arrays stay dense. Searches share a read lock;
 * puts and removes take it exclusively.
 *
 * A search is memory-bandwidth bound (../shared/DEPENDENCIES.md), so it
 * reads each vector as 8-bit codes (a quarter of the bytes): every run's
 * code dot product (SSE2 pmaddwd, 16 products per step), the best
 * RESCORE of them kept, then those rescored with their float vectors —
 * the similarities returned are exact. Below RESCORE runs nothing is
 * left out, and above it a run is missed only when the rounding of the
 * codes moves it past RESCORE others (measured as recall@3 by make
 * bench BENCH=memory).
 *
 * From conf.approximate_from runs on, an HNSW graph (hnsw.h) answers
 * instead: its candidates are rescored with the float vectors the same
 * way. Each run's graph label is its `order`, and slot_of maps a label
 * back to the run's slot. The graph is built in the background by
 * conf.threads builders, which claim batches of labels and add them
 * under the read lock (so no put or remove runs meanwhile, and searches
 * go on with the code scan); a put or remove while it is built goes to
 * the graph when its label is there or is newer than the build (the
 * builders read every run's current vector, and skip removed runs).
 * When the graph holds more removed runs than live ones it is built
 * again. A graph that cannot be built or followed (out of memory) is
 * dropped and the code scan answers.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/alloc.h"
#include "memory/hnsw.h"
#include "memory/memory.h"

#define ID_MAX 64
#define NO_SLOT UINT32_MAX
#define BUILD_BATCH 256     /* labels a builder claims at once */
#define BUILDERS_MAX 4

enum { GRAPH_NONE, GRAPH_BUILDING, GRAPH_READY, GRAPH_FAILED };
#define RESCORE 32          /* code-scan candidates rescored exactly */
#define CODE_SCALE 127.0f

struct memory_index {
    int dim;
    size_t n, cap;
    float *vectors;           /* n × dim */
    int8_t *codes;            /* n × dim: round(v × 127) */
    char (*ids)[ID_MAX];      /* n */
    uint64_t *order;          /* n: when each was added, for ties */
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

void memory_index_conf_default(struct memory_index_conf *conf)
{
    conf->approximate_from = MEMORY_APPROXIMATE_FROM;
    conf->m = 16;
    conf->ef_construction = 64;
    conf->ef_search = 128;
    conf->threads = 2;
}

static void encode(int8_t *code, const float *v, int dim)
{
    for (int i = 0; i < dim; i++) {
        float x = v[i] * CODE_SCALE;
        code[i] = (int8_t)(x > 127 ? 127 : x < -127 ? -127 : lrintf(x));
    }
}

/* The dot product of two code vectors. */
static int32_t code_dot(const int8_t *a, const int8_t *b, int dim)
{
    int32_t sum = 0;
    int i = 0;
#ifdef __SSE2__
    __m128i acc = _mm_setzero_si128();

    for (; i + 16 <= dim; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(a + i));
        __m128i y = _mm_loadu_si128((const __m128i *)(b + i));
        /* sign-extend to 16 bits: the high bytes from a compare */
        __m128i xs = _mm_cmpgt_epi8(_mm_setzero_si128(), x);
        __m128i ys = _mm_cmpgt_epi8(_mm_setzero_si128(), y);
        acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi8(x, xs),
                                                _mm_unpacklo_epi8(y, ys)));
        acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpackhi_epi8(x, xs),
                                                _mm_unpackhi_epi8(y, ys)));
    }
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4e));
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xb1));
    sum = _mm_cvtsi128_si32(acc);
#endif
    for (; i < dim; i++)
        sum += (int32_t)a[i] * b[i];
    return sum;
}

static uint64_t hash_id(const char *id)
{
    uint64_t h = 14695981039346656037ull;

    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 1099511628211ull;
    return h;
}

struct memory_index *memory_index_new(int dim)
{
    struct memory_index *ix = keel_calloc(1, sizeof(*ix));
    pthread_rwlockattr_t attr;

    if (!ix)
        return NULL;
    ix->dim = dim;
    memory_index_conf_default(&ix->conf);
    /* Writers first: builders take the read lock batch after batch, and
     * a put must not wait for the whole build. */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&ix->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return ix;
}

static void join_builders(struct memory_index *ix)
{
    for (int i = 0; i < ix->n_builders; i++)
        pthread_join(ix->builders[i], NULL);
    ix->n_builders = 0;
}

void memory_index_free(struct memory_index *ix)
{
    if (!ix)
        return;
    atomic_store(&ix->stop, 1);
    join_builders(ix);
    hnsw_free(ix->graph);
    keel_free(ix->slot_of);
    pthread_rwlock_destroy(&ix->lock);
    keel_free(ix->vectors);
    keel_free(ix->codes);
    keel_free(ix->ids);
    keel_free(ix->order);
    keel_free(ix->table);
    keel_free(ix);
}

size_t memory_index_size(const struct memory_index *ix)
{
    return ix->n;
}

/* The table position of `id`, or of the first free one on its probe
 * path (*found 0). */
static size_t probe(const struct memory_index *ix, const char *id, int *found)
{
    size_t mask = ix->table_cap - 1, i = hash_id(id) & mask, free_at = SIZE_MAX;

    for (;; i = (i + 1) & mask) {
        int32_t t = ix->table[i];
        if (t == 0) {
            *found = 0;
            return free_at != SIZE_MAX ? free_at : i;
        }
        if (t < 0) {
            if (free_at == SIZE_MAX)
                free_at = i;
        } else if (!strcmp(ix->ids[t - 1], id)) {
            *found = 1;
            return i;
        }
    }
}

static int rehash(struct memory_index *ix, size_t cap)
{
    int32_t *table = keel_calloc(cap, sizeof(*table));

    if (!table)
        return KEEL_ENOMEM;
    keel_free(ix->table);
    ix->table = table;
    ix->table_cap = cap;
    ix->table_used = ix->n;
    for (size_t s = 0; s < ix->n; s++) {
        int found;
        table[probe(ix, ix->ids[s], &found)] = (int32_t)s + 1;
    }
    return KEEL_OK;
}

static int grow(struct memory_index *ix)
{
    size_t cap = ix->cap ? ix->cap * 2 : 64;
    float *v = keel_realloc(ix->vectors, cap * (size_t)ix->dim * sizeof(float));
    char(*ids)[ID_MAX];
    uint64_t *order;

    int8_t *codes;

    if (!v)
        return KEEL_ENOMEM;
    ix->vectors = v;
    if (!(codes = keel_realloc(ix->codes, cap * (size_t)ix->dim)))
        return KEEL_ENOMEM;
    ix->codes = codes;
    if (!(ids = keel_realloc(ix->ids, cap * ID_MAX)))
        return KEEL_ENOMEM;
    ix->ids = ids;
    if (!(order = keel_realloc(ix->order, cap * sizeof(*order))))
        return KEEL_ENOMEM;
    ix->order = order;
    ix->cap = cap;
    return KEEL_OK;
}

/* ---- the graph ------------------------------------------------------------------- */

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

static void maybe_build(struct memory_index *ix)
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

/* Puts run `label`'s vector into the graph when it belongs there (the
 * write lock held): always once built; while building, when the
 * builders have added it already or it is newer than the build. */
static void graph_put(struct memory_index *ix, uint64_t label, const float *v)
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

static void graph_remove(struct memory_index *ix, uint64_t label)
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
        maybe_build(ix);
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
    if (!conf->approximate_from && ix->graph) {   /* never: the graph goes */
        if (ix->state == GRAPH_BUILDING) {
            atomic_store(&ix->failed, 1);
        } else {
            hnsw_free(ix->graph);
            ix->graph = NULL;
            ix->state = GRAPH_NONE;
        }
    }
    if (ix->state == GRAPH_FAILED)
        ix->state = GRAPH_NONE;
    maybe_build(ix);
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

/* Room in slot_of for label `order`. */
static int slot_of_room(struct memory_index *ix, uint64_t order)
{
    size_t cap;
    uint32_t *p;

    if (order < ix->slot_of_cap)
        return KEEL_OK;
    cap = ix->slot_of_cap ? ix->slot_of_cap * 2 : 128;
    if (!(p = keel_realloc(ix->slot_of, cap * sizeof(*p))))
        return KEEL_ENOMEM;
    ix->slot_of = p;
    ix->slot_of_cap = cap;
    return KEEL_OK;
}

int memory_index_put(struct memory_index *ix, const char *id, const float *v)
{
    size_t at;
    int found, rc = KEEL_OK;

    if (strlen(id) >= ID_MAX)
        return KEEL_EINVAL;
    pthread_rwlock_wrlock(&ix->lock);
    if ((ix->table_used + 1) * 2 > ix->table_cap)
        rc = rehash(ix, ix->table_cap ? ix->table_cap * 2 : 128);
    if (!rc) {
        at = probe(ix, id, &found);
        if (found) {
            size_t s = (size_t)ix->table[at] - 1;
            float *to = ix->vectors + s * (size_t)ix->dim;
            if (memcmp(to, v, (size_t)ix->dim * sizeof(float))) {   /* a replay: the same */
                memcpy(to, v, (size_t)ix->dim * sizeof(float));
                encode(ix->codes + s * (size_t)ix->dim, v, ix->dim);
                graph_put(ix, ix->order[s], v);
            }
        } else if ((ix->n < ix->cap || !(rc = grow(ix))) &&
                   !(rc = slot_of_room(ix, ix->next_order))) {
            size_t s = ix->n++;
            memcpy(ix->vectors + s * (size_t)ix->dim, v, (size_t)ix->dim * sizeof(float));
            encode(ix->codes + s * (size_t)ix->dim, v, ix->dim);
            strcpy(ix->ids[s], id);
            ix->order[s] = ix->next_order++;
            ix->slot_of[ix->order[s]] = (uint32_t)s;
            if (ix->table[at] == 0)
                ix->table_used++;
            ix->table[at] = (int32_t)s + 1;
            graph_put(ix, ix->order[s], v);
            maybe_build(ix);
        }
    }
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

void memory_index_remove(struct memory_index *ix, const char *id)
{
    uint64_t label;
    size_t at, s, last;
    int found;

    pthread_rwlock_wrlock(&ix->lock);
    if (!ix->table_cap || strlen(id) >= ID_MAX || (at = probe(ix, id, &found), !found)) {
        pthread_rwlock_unlock(&ix->lock);
        return;
    }
    s = (size_t)ix->table[at] - 1;
    ix->table[at] = -1;
    label = ix->order[s];
    ix->slot_of[label] = NO_SLOT;
    last = --ix->n;
    if (s != last) {   /* the last one takes the freed slot */
        int f;
        memcpy(ix->vectors + s * (size_t)ix->dim, ix->vectors + last * (size_t)ix->dim,
               (size_t)ix->dim * sizeof(float));
        memcpy(ix->codes + s * (size_t)ix->dim, ix->codes + last * (size_t)ix->dim,
               (size_t)ix->dim);
        memcpy(ix->ids[s], ix->ids[last], ID_MAX);
        ix->order[s] = ix->order[last];
        ix->slot_of[ix->order[s]] = (uint32_t)s;
        ix->table[probe(ix, ix->ids[s], &f)] = (int32_t)s + 1;
    }
    graph_remove(ix, label);
    pthread_rwlock_unlock(&ix->lock);
}

/* Keeps the best `cap` (score, slot) pairs in `best`, best first; among
 * equal scores the earlier added (smaller order) ranks first, so ties
 * do not depend on where swap-removes left a run. */
static void keep(const struct memory_index *ix, int32_t *score, size_t *slot, size_t *n,
                 size_t cap, int32_t sc, size_t s)
{
    size_t at;

    if (*n == cap && (sc < score[cap - 1] ||
                      (sc == score[cap - 1] && ix->order[s] > ix->order[slot[cap - 1]])))
        return;
    at = *n < cap ? (*n)++ : cap - 1;
    while (at > 0 && (score[at - 1] < sc ||
                      (score[at - 1] == sc && ix->order[slot[at - 1]] > ix->order[s]))) {
        score[at] = score[at - 1];
        slot[at] = slot[at - 1];
        at--;
    }
    score[at] = sc;
    slot[at] = s;
}

/* Puts slot `s` with similarity `sim` among the best `k` hits (n of
 * them so far), best first; among equal similarities the earlier added
 * first. */
static void add_hit(const struct memory_index *ix, struct memory_hit *hits, uint64_t *orders,
                    size_t *n, size_t k, float sim, size_t s)
{
    size_t at;

    if (*n == k && (sim < hits[*n - 1].similarity ||
                    (sim == hits[*n - 1].similarity && ix->order[s] > orders[*n - 1])))
        return;
    at = *n < k ? (*n)++ : k - 1;
    while (at > 0 && (hits[at - 1].similarity < sim ||
                      (hits[at - 1].similarity == sim && orders[at - 1] > ix->order[s]))) {
        hits[at] = hits[at - 1];
        orders[at] = orders[at - 1];
        at--;
    }
    hits[at].similarity = sim;
    memcpy(hits[at].id, ix->ids[s], ID_MAX);
    orders[at] = ix->order[s];
}

/* The graph's nearest k + RESCORE, rescored exactly (the read lock
 * held). -1 when the graph failed: the caller scans instead. */
static long graph_search(const struct memory_index *ix, const float *q, size_t k, float min,
                         struct memory_hit *hits, uint64_t *orders)
{
    uint64_t labels[MEMORY_SEARCH_MAX + RESCORE];
    float sims[MEMORY_SEARCH_MAX + RESCORE];
    size_t got, n = 0;
    int rc;

    got = hnsw_search(ix->graph, q, k + RESCORE, labels, sims, &rc);
    if (rc)
        return -1;
    for (size_t c = 0; c < got; c++) {
        uint32_t s = labels[c] < ix->slot_of_cap ? ix->slot_of[labels[c]] : NO_SLOT;
        float sim;
        if (s == NO_SLOT)
            continue;   /* not possible: removed runs are marked in the graph */
        sim = memory_dot(q, ix->vectors + (size_t)s * (size_t)ix->dim, ix->dim);
        if (sim >= min)
            add_hit(ix, hits, orders, &n, k, sim, s);
    }
    return (long)n;
}

size_t memory_index_search(const struct memory_index *ix, const float *q, size_t k, float min,
                           struct memory_hit *hits)
{
    uint64_t orders[MEMORY_SEARCH_MAX];
    int32_t score[MEMORY_SEARCH_MAX + RESCORE];
    size_t slot[MEMORY_SEARCH_MAX + RESCORE], cands = 0, n = 0;
    size_t cap = (k > MEMORY_SEARCH_MAX ? MEMORY_SEARCH_MAX : k) + RESCORE;
    int8_t qcode[4096];
    int dim = ix->dim > 4096 ? 4096 : ix->dim;

    if (k > MEMORY_SEARCH_MAX)
        k = MEMORY_SEARCH_MAX;
    if (!k)
        return 0;
    pthread_rwlock_rdlock((pthread_rwlock_t *)&ix->lock);
    if (ix->state == GRAPH_READY && ix->conf.approximate_from &&
        ix->n >= ix->conf.approximate_from) {
        long got = graph_search(ix, q, k, min, hits, orders);
        if (got >= 0) {
            pthread_rwlock_unlock((pthread_rwlock_t *)&ix->lock);
            return (size_t)got;
        }
    }
    encode(qcode, q, dim);
    /* 1. the codes: the best k + RESCORE by the approximate dot */
    for (size_t s = 0; s < ix->n; s++)
        keep(ix, score, slot, &cands, cap, code_dot(qcode, ix->codes + s * (size_t)ix->dim, dim), s);
    /* 2. those, exactly */
    for (size_t c = 0; c < cands; c++) {
        float sim = memory_dot(q, ix->vectors + slot[c] * (size_t)ix->dim, ix->dim);
        if (sim >= min)
            add_hit(ix, hits, orders, &n, k, sim, slot[c]);
    }
    pthread_rwlock_unlock((pthread_rwlock_t *)&ix->lock);
    return n;
}

size_t memory_index_search_exact(const struct memory_index *ix, const float *q, size_t k,
                                 float min, struct memory_hit *hits)
{
    uint64_t orders[MEMORY_SEARCH_MAX];
    size_t n = 0;

    if (k > MEMORY_SEARCH_MAX)
        k = MEMORY_SEARCH_MAX;
    if (!k)
        return 0;
    pthread_rwlock_rdlock((pthread_rwlock_t *)&ix->lock);
    for (size_t s = 0; s < ix->n; s++) {
        float sim = memory_dot(q, ix->vectors + s * (size_t)ix->dim, ix->dim);
        if (sim >= min)
            add_hit(ix, hits, orders, &n, k, sim, s);
    }
    pthread_rwlock_unlock((pthread_rwlock_t *)&ix->lock);
    return n;
}
