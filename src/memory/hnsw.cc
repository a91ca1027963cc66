/*
 * hnsw.cc — the C interface of hnsw.h over hnswlib's HierarchicalNSW
 * (inner-product space). Every entry point catches what hnswlib throws
 * and returns a keel_result instead: std::bad_alloc, std::length_error
 * and hnswlib's "Not enough memory" become KEEL_ENOMEM, its "exceeds the
 * specified limit" KEEL_ETOOBIG, anything else KEEL_EFAIL.
 *
 * hnswlib 0.6.2's SSE path prefetches the element after the last link
 * of a full list, reading up to 3 bytes past an upper layer's malloc
 * request (always within glibc's chunk, so harmless, but ASan stops
 * there): sanitized builds compile this file with
 * NO_MANUAL_VECTORIZATION (plain loops, no prefetch).
 *
 * The wrapper's own struct comes from keel_calloc (so allocation-failure
 * injection reaches it); hnswlib allocates its graph with malloc and
 * new, which keel cannot route through its wrapper.
 */
#include <hnswlib/hnswlib.h>

#include <climits>
#include <cstring>
#include <new>
#include <stdexcept>

extern "C" {
#include "core/alloc.h"
#include "core/error.h"
}
#include "memory/hnsw.h"

typedef hnswlib::HierarchicalNSW<float> graph_t;

struct hnsw {
    hnswlib::InnerProductSpace *space;
    graph_t *graph;
    int dim;
};

/* The keel_result of an exception hnswlib threw. */
static int result_of(const std::runtime_error &e)
{
    const char *what = e.what();

    if (!strncmp(what, "Not enough memory", 17))
        return KEEL_ENOMEM;
    if (strstr(what, "exceeds the specified limit"))
        return KEEL_ETOOBIG;
    return KEEL_EFAIL;
}

#define CATCH_ALL(rc)                                         \
    catch (const std::bad_alloc &) { rc = KEEL_ENOMEM; }      \
    catch (const std::length_error &) { rc = KEEL_ENOMEM; }   \
    catch (const std::runtime_error &e) { rc = result_of(e); } \
    catch (...) { rc = KEEL_EFAIL; }

extern "C" int hnsw_new(int dim, size_t capacity, const struct hnsw_params *p, struct hnsw **out)
{
    struct hnsw *h;
    int rc = KEEL_OK;

    *out = NULL;
    if (dim < 1 || p->m < 2 || p->m > 1000 || p->ef_construction < 1 || p->ef_search < 1)
        return KEEL_EINVAL;
    if (capacity > HNSW_CAPACITY_MAX)
        return KEEL_ETOOBIG;
    if (!(h = static_cast<struct hnsw *>(keel_calloc(1, sizeof(*h)))))
        return KEEL_ENOMEM;
    h->dim = dim;
    try {
        h->space = new hnswlib::InnerProductSpace(static_cast<size_t>(dim));
        h->graph = new graph_t(h->space, capacity ? capacity : 1, static_cast<size_t>(p->m),
                               static_cast<size_t>(p->ef_construction));
        h->graph->setEf(static_cast<size_t>(p->ef_search));
    }
    CATCH_ALL(rc)
    if (rc) {
        hnsw_free(h);
        return rc;
    }
    *out = h;
    return KEEL_OK;
}

extern "C" void hnsw_free(struct hnsw *h)
{
    if (!h)
        return;
    delete h->graph;   /* destructors do not throw */
    delete h->space;
    keel_free(h);
}

/* hnswlib's resizeIndex frees the visited-list pool before making the
 * new one, so a failure there leaves a dangling pool. This grows the
 * same members, everything that can fail first: until the last step
 * the graph is as it was (a moved block holds the same bytes). */
extern "C" int hnsw_reserve(struct hnsw *h, size_t capacity)
{
    graph_t *g = h->graph;
    hnswlib::VisitedListPool *pool = nullptr;
    int rc = KEEL_OK;

    if (capacity <= g->max_elements_)
        return KEEL_OK;
    if (capacity > HNSW_CAPACITY_MAX)
        return KEEL_ETOOBIG;
    try {
        std::vector<int> levels(g->element_levels_);
        std::vector<std::mutex> locks(capacity);
        char *data, **links;
        levels.resize(capacity);
        pool = new hnswlib::VisitedListPool(1, static_cast<int>(capacity));
        if (!(data = static_cast<char *>(
                  realloc(g->data_level0_memory_, capacity * g->size_data_per_element_))))
            throw std::bad_alloc();
        g->data_level0_memory_ = data;
        if (!(links = static_cast<char **>(realloc(g->linkLists_, capacity * sizeof(char *)))))
            throw std::bad_alloc();
        g->linkLists_ = links;
        /* nothing below fails */
        delete g->visited_list_pool_;
        g->visited_list_pool_ = pool;
        pool = nullptr;
        g->element_levels_.swap(levels);
        g->link_list_locks_.swap(locks);
        g->max_elements_ = capacity;
    }
    CATCH_ALL(rc)
    delete pool;
    return rc;
}

extern "C" void hnsw_set_ef(struct hnsw *h, int ef_search)
{
    h->graph->setEf(static_cast<size_t>(ef_search > 0 ? ef_search : 1));
}

extern "C" int hnsw_add(struct hnsw *h, uint64_t label, const float *v)
{
    int rc = KEEL_OK;

    try {
        h->graph->addPoint(v, static_cast<hnswlib::labeltype>(label));
    }
    CATCH_ALL(rc)
    return rc;
}

extern "C" int hnsw_remove(struct hnsw *h, uint64_t label)
{
    int rc = KEEL_OK;

    try {
        auto at = h->graph->label_lookup_.find(static_cast<hnswlib::labeltype>(label));
        if (at != h->graph->label_lookup_.end() && !h->graph->isMarkedDeleted(at->second))
            h->graph->markDeletedInternal(at->second);
    }
    CATCH_ALL(rc)
    return rc;
}

extern "C" int hnsw_has(const struct hnsw *h, uint64_t label)
{
    auto at = h->graph->label_lookup_.find(static_cast<hnswlib::labeltype>(label));

    return at != h->graph->label_lookup_.end() && !h->graph->isMarkedDeleted(at->second);
}

extern "C" size_t hnsw_search(const struct hnsw *h, const float *q, size_t k, uint64_t *labels,
                              float *sims, int *rc)
{
    size_t n = 0;
    int r = KEEL_OK;

    if (rc)
        *rc = KEEL_OK;
    if (!k)
        return 0;
    try {
        /* worst first */
        auto found = h->graph->searchKnn(q, k);
        n = found.size();
        for (size_t i = n; i > 0; i--) {
            labels[i - 1] = static_cast<uint64_t>(found.top().second);
            sims[i - 1] = 1.0f - found.top().first;
            found.pop();
        }
    }
    CATCH_ALL(r)
    if (r) {
        if (rc)
            *rc = r;
        return 0;
    }
    return n;
}

extern "C" size_t hnsw_count(const struct hnsw *h)
{
    return h->graph->cur_element_count;
}

extern "C" size_t hnsw_deleted(const struct hnsw *h)
{
    return h->graph->num_deleted_;
}

extern "C" size_t hnsw_capacity(const struct hnsw *h)
{
    return h->graph->max_elements_;
}

extern "C" size_t hnsw_bytes(const struct hnsw *h)
{
    const graph_t *g = h->graph;
    size_t links = 0;

    for (size_t i = 0; i < g->cur_element_count; i++)
        links += static_cast<size_t>(g->element_levels_[i]) * g->size_links_per_element_;
    return g->max_elements_ * (g->size_data_per_element_ + sizeof(char *) + sizeof(std::mutex) +
                               sizeof(int) + sizeof(hnswlib::vl_type)) +
           links +
           /* the label table: a node and a bucket per element */
           g->label_lookup_.size() * (sizeof(std::pair<const hnswlib::labeltype, unsigned>) +
                                      2 * sizeof(void *)) +
           graph_t::max_update_element_locks * sizeof(std::mutex);
}
