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
 * left out (and no code is read: every run is rescored), and above it a
 * run is missed only when the rounding of the codes moves it past
 * RESCORE others (measured as recall@3 by make bench BENCH=memory).
 *
 * From conf.approximate_from runs on, an HNSW graph answers instead
 * (index_graph.c); every put and remove here goes to it too.
 */
#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/alloc.h"
#include "memory/index_int.h"

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

void memory_index_free(struct memory_index *ix)
{
    if (!ix)
        return;
    index_graph_release(ix);
    keel_free(ix->slot_of);
    pthread_rwlock_destroy(&ix->lock);
    keel_free(ix->vectors);
    keel_free(ix->codes);
    keel_free(ix->ids);
    keel_free(ix->order);
    keel_free(ix->owners);
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
    if (!(order = keel_realloc(ix->owners, cap * sizeof(*order))))
        return KEEL_ENOMEM;
    ix->owners = order;
    ix->cap = cap;
    return KEEL_OK;
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

uint64_t memory_owner_tag(const char *owner)
{
    uint64_t h;

    if (!owner || !*owner)
        return 0;
    h = hash_id(owner);
    return h ? h : 1;
}

int memory_index_put(struct memory_index *ix, const char *id, const float *v)
{
    return memory_index_put_owned(ix, id, 0, v);
}

int memory_index_put_owned(struct memory_index *ix, const char *id, uint64_t owner,
                           const float *v)
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
            ix->owners[s] = owner;
            if (memcmp(to, v, (size_t)ix->dim * sizeof(float))) {   /* a replay: the same */
                memcpy(to, v, (size_t)ix->dim * sizeof(float));
                encode(ix->codes + s * (size_t)ix->dim, v, ix->dim);
                index_graph_put(ix, ix->order[s], v);
            }
        } else if ((ix->n < ix->cap || !(rc = grow(ix))) &&
                   !(rc = slot_of_room(ix, ix->next_order))) {
            size_t s = ix->n++;
            memcpy(ix->vectors + s * (size_t)ix->dim, v, (size_t)ix->dim * sizeof(float));
            encode(ix->codes + s * (size_t)ix->dim, v, ix->dim);
            memcpy(ix->ids[s], id, strlen(id) + 1);   /* < ID_MAX: checked above */
            ix->order[s] = ix->next_order++;
            ix->owners[s] = owner;
            ix->slot_of[ix->order[s]] = (uint32_t)s;
            if (ix->table[at] == 0)
                ix->table_used++;
            ix->table[at] = (int32_t)s + 1;
            index_graph_put(ix, ix->order[s], v);
            index_graph_maybe_build(ix);
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
        ix->owners[s] = ix->owners[last];
        ix->slot_of[ix->order[s]] = (uint32_t)s;
        ix->table[probe(ix, ix->ids[s], &f)] = (int32_t)s + 1;
    }
    index_graph_remove(ix, label);
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

void index_add_hit(const struct memory_index *ix, struct memory_hit *hits, uint64_t *orders,
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

size_t memory_index_search(const struct memory_index *ix, const float *q, size_t k, float min,
                           struct memory_hit *hits)
{
    return memory_index_search_owned(ix, q, k, min, NULL, hits);
}

size_t memory_index_search_owned(const struct memory_index *ix, const float *q, size_t k,
                                 float min, const uint64_t *owner, struct memory_hit *hits)
{
    uint64_t orders[MEMORY_SEARCH_MAX];
    int32_t score[MEMORY_SEARCH_MAX + RESCORE];
    size_t slot[MEMORY_SEARCH_MAX + RESCORE], cands = 0, n = 0;
    size_t cap = (k > MEMORY_SEARCH_MAX ? MEMORY_SEARCH_MAX : k) + RESCORE;
    int8_t qcode[4096];
    int dim = ix->dim > 4096 ? 4096 : ix->dim, encoded = 0;

    if (k > MEMORY_SEARCH_MAX)
        k = MEMORY_SEARCH_MAX;
    if (!k)
        return 0;
    pthread_rwlock_rdlock((pthread_rwlock_t *)&ix->lock);
    {
        long got = index_graph_search(ix, q, k, min, owner, hits, orders);
        if (got >= 0) {
            pthread_rwlock_unlock((pthread_rwlock_t *)&ix->lock);
            return (size_t)got;
        }
    }
    /* 1. the codes: the best k + RESCORE by the approximate dot (of the
     * owner's runs only: another owner's code is never read). Until the
     * runs searched are more than that, the codes would keep every one
     * of them: they are taken unread, and scored only once one more
     * comes (keep ranks the same whatever the order of its pairs). */
    for (size_t s = 0; s < ix->n; s++) {
        if (owner && ix->owners[s] != *owner)
            continue;
        if (!encoded && cands < cap) {
            slot[cands++] = s;
            continue;
        }
        if (!encoded) {
            size_t taken[MEMORY_SEARCH_MAX + RESCORE], n_taken = cands;
            memcpy(taken, slot, n_taken * sizeof(*taken));
            encode(qcode, q, dim);
            encoded = 1;
            cands = 0;
            for (size_t t = 0; t < n_taken; t++)
                keep(ix, score, slot, &cands, cap,
                     code_dot(qcode, ix->codes + taken[t] * (size_t)ix->dim, dim), taken[t]);
        }
        keep(ix, score, slot, &cands, cap, code_dot(qcode, ix->codes + s * (size_t)ix->dim, dim),
             s);
    }
    /* 2. those, exactly */
    for (size_t c = 0; c < cands; c++) {
        float sim = memory_dot(q, ix->vectors + slot[c] * (size_t)ix->dim, ix->dim);
        if (sim >= min)
            index_add_hit(ix, hits, orders, &n, k, sim, slot[c]);
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
            index_add_hit(ix, hits, orders, &n, k, sim, s);
    }
    pthread_rwlock_unlock((pthread_rwlock_t *)&ix->lock);
    return n;
}
