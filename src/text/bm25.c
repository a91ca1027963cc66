/*
 * bm25.c — building the in-memory BM25 index of bm25.h (searching it is
 * bm25_search.c; the frozen layout is bm25_int.h).
 *
 * Building. Each token is looked up in an open-addressing table of terms
 * (FNV-1a over its bytes; the bytes live in one string pool). Within a
 * row a term's count grows in the term itself; when the row closes, its
 * (term, count) pairs are appended as varints to one byte stream, so the
 * build needs no allocation per term. Freezing sorts the terms by bytes,
 * measures each term's postings (row gap, count: two varints), counts
 * them (its df) and the rows holding it or a longer term it begins (its
 * rows: each row counted up the chain of a term's prefixes that are
 * terms) in a first pass over the stream, and writes them, term
 * after term, into one pool in a second, with a skip entry at the start
 * of every block of BM25_SKIP_EVERY postings after the first; then the
 * stream goes. The second pass also sets the dense terms' bits and count
 * bytes.
 */
#include "text/bm25.h"
#include "text/bm25_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

#define POOL_MAX 0xffffffffu
#define NO_PARENT UINT32_MAX         /* term_parents(): begins with no other term */
#define LONE (UINT32_MAX - 1)        /* … and no other term begins with it */

/* ---- varints --------------------------------------------------------------- */

struct bytes {
    unsigned char *data;
    size_t len, cap;
};

static int bytes_reserve(struct bytes *b, size_t more)
{
    size_t want;
    unsigned char *grown;

    if (b->len + more <= b->cap)
        return KEEL_OK;
    if (b->len + more > POOL_MAX)
        return KEEL_ETOOBIG;
    want = b->cap ? b->cap * 2 : 4096;
    while (want < b->len + more)
        want *= 2;
    if (!(grown = keel_realloc(b->data, want)))
        return KEEL_ENOMEM;
    b->data = grown;
    b->cap = want;
    return KEEL_OK;
}

static unsigned char *varint_put(unsigned char *p, uint32_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static size_t varint_len(uint32_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static int bytes_varint(struct bytes *b, uint32_t v)
{
    int rc = bytes_reserve(b, 5);

    if (!rc)
        b->len = (size_t)(varint_put(b->data + b->len, v) - b->data);
    return rc;
}

/* ---- building ---------------------------------------------------------------- */

struct build_term {
    uint32_t off, len;    /* bytes in the string pool */
    uint32_t row;         /* the row its count is for, plus one; 0: none yet */
    uint32_t tf;          /* count in that row */
};

struct bm25_builder {
    struct bytes strings;
    struct build_term *terms;
    size_t n_terms, cap_terms;
    uint32_t *slots;      /* term id + 1; 0 empty */
    size_t n_slots;       /* a power of two */
    uint32_t *row_terms;  /* terms of the open row */
    size_t n_row_terms, cap_row_terms;
    uint32_t *lengths;    /* tokens per closed row */
    size_t n_rows, cap_rows;
    uint32_t open_length; /* tokens of the open row */
    int open;             /* a row is open */
    struct bytes stream;  /* per closed row: count, then (term, tf) pairs */
    uint64_t tokens;
};

static uint32_t hash_token(const char *s, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int grow(void **items, size_t *cap, size_t need, size_t size)
{
    size_t want;
    void *grown;

    if (need <= *cap)
        return KEEL_OK;
    want = *cap ? *cap * 2 : 64;
    while (want < need)
        want *= 2;
    if (want > SIZE_MAX / size || !(grown = keel_realloc(*items, want * size)))
        return KEEL_ENOMEM;
    *items = grown;
    *cap = want;
    return KEEL_OK;
}

int bm25_builder_new(struct bm25_builder **out)
{
    struct bm25_builder *b = keel_calloc(1, sizeof(*b));

    *out = NULL;
    if (!b)
        return KEEL_ENOMEM;
    b->n_slots = 1024;
    if (!(b->slots = keel_calloc(b->n_slots, sizeof(*b->slots)))) {
        keel_free(b);
        return KEEL_ENOMEM;
    }
    *out = b;
    return KEEL_OK;
}

void bm25_builder_free(struct bm25_builder *b)
{
    if (!b)
        return;
    keel_free(b->strings.data);
    keel_free(b->terms);
    keel_free(b->slots);
    keel_free(b->row_terms);
    keel_free(b->lengths);
    keel_free(b->stream.data);
    keel_free(b);
}

/* Doubles the slot table when it is half full. */
static int rehash(struct bm25_builder *b)
{
    size_t n = b->n_slots * 2;
    uint32_t *slots;

    if (n > SIZE_MAX / sizeof(*slots) || !(slots = keel_calloc(n, sizeof(*slots))))
        return KEEL_ENOMEM;
    for (size_t t = 0; t < b->n_terms; t++) {
        const struct build_term *term = &b->terms[t];
        size_t i = hash_token((const char *)b->strings.data + term->off, term->len) & (n - 1);
        while (slots[i])
            i = (i + 1) & (n - 1);
        slots[i] = (uint32_t)t + 1;
    }
    keel_free(b->slots);
    b->slots = slots;
    b->n_slots = n;
    return KEEL_OK;
}

/* The id of the term `token`, added when new; -1 on failure (*rc). */
static long term_id(struct bm25_builder *b, const char *token, size_t len, int *rc)
{
    size_t i = hash_token(token, len) & (b->n_slots - 1);
    struct build_term *term;

    for (; b->slots[i]; i = (i + 1) & (b->n_slots - 1)) {
        term = &b->terms[b->slots[i] - 1];
        if (term->len == len && !memcmp(b->strings.data + term->off, token, len))
            return (long)b->slots[i] - 1;
    }
    if (b->n_terms >= BM25_ROWS_MAX) {
        *rc = KEEL_ETOOBIG;
        return -1;
    }
    if ((*rc = grow((void **)&b->terms, &b->cap_terms, b->n_terms + 1, sizeof(*b->terms))) ||
        (*rc = bytes_reserve(&b->strings, len ? len : 1)))
        return -1;
    term = &b->terms[b->n_terms];
    term->off = (uint32_t)b->strings.len;
    term->len = (uint32_t)len;
    term->row = 0;
    term->tf = 0;
    memcpy(b->strings.data + b->strings.len, token, len);
    b->strings.len += len;
    b->slots[i] = (uint32_t)++b->n_terms;
    if (b->n_terms * 2 > b->n_slots && (*rc = rehash(b)))
        return -1;
    return (long)b->n_terms - 1;
}

int bm25_builder_token(struct bm25_builder *b, const char *token, size_t len)
{
    struct build_term *term;
    uint32_t row_plus1 = (uint32_t)b->n_rows + 1;
    long id;
    int rc = KEEL_OK;

    if (b->n_rows >= BM25_ROWS_MAX)
        return KEEL_ETOOBIG;
    if (len > BM25_TOKEN_MAX)
        len = BM25_TOKEN_MAX;
    if ((id = term_id(b, token, len, &rc)) < 0)
        return rc;
    b->open = 1;
    b->open_length++;
    term = &b->terms[id];
    if (term->row != row_plus1) {
        if ((rc = grow((void **)&b->row_terms, &b->cap_row_terms, b->n_row_terms + 1,
                       sizeof(*b->row_terms))))
            return rc;
        b->row_terms[b->n_row_terms++] = (uint32_t)id;
        term->row = row_plus1;
        term->tf = 0;
    }
    term->tf++;
    return KEEL_OK;
}

int bm25_builder_end_row(struct bm25_builder *b)
{
    int rc;

    if (b->n_rows >= BM25_ROWS_MAX)
        return KEEL_ETOOBIG;
    if ((rc = grow((void **)&b->lengths, &b->cap_rows, b->n_rows + 1, sizeof(*b->lengths))) ||
        (rc = bytes_varint(&b->stream, (uint32_t)b->n_row_terms)))
        return rc;
    for (size_t i = 0; i < b->n_row_terms; i++) {
        uint32_t id = b->row_terms[i];
        if ((rc = bytes_varint(&b->stream, id)) ||
            (rc = bytes_varint(&b->stream, b->terms[id].tf)))
            return rc;
    }
    b->lengths[b->n_rows++] = b->open_length;
    b->tokens += b->open_length;
    b->open_length = 0;
    b->n_row_terms = 0;
    b->open = 0;
    return KEEL_OK;
}

static const char *sort_strings;

static int by_bytes(const void *x, const void *y)
{
    const struct bm25_term *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int order = memcmp(sort_strings + a->off, sort_strings + b->off, n);

    return order ? order : (a->len > b->len) - (a->len < b->len);
}

/* The postings of every term from the stream: pass 0 measures (into
 * terms[].post_len, .df and .rows), pass 1 writes at `at` (per sorted
 * term, from terms[].post on), fills the skip entries and the dense
 * terms' bits and count bytes. `rank` maps a build id to its sorted
 * place; `prev` is per build id, `seen` per sorted term, both zeroed by
 * the caller; `parent` is term_parents'. */
static void postings_pass(const struct bm25_builder *b, struct bm25_index *ix,
                          const uint32_t *rank, const uint32_t *parent, uint32_t *prev,
                          uint32_t *at, uint32_t *seen, int pass)
{
    const unsigned char *p = b->stream.data;

    for (uint32_t row = 0; row < b->n_rows; row++) {
        uint32_t k, id, tf;
        p = bm25_varint_get(p, &k);
        while (k--) {
            uint32_t gap, t;
            struct bm25_term *term;
            p = bm25_varint_get(p, &id);
            p = bm25_varint_get(p, &tf);
            t = rank[id];
            term = &ix->terms[t];
            gap = row + 1 - prev[id];
            if (pass == 0) {
                term->post_len += (uint32_t)(varint_len(gap) + varint_len(tf));
                term->df++;
                /* The row counts once for the term and each term it
                 * begins with (seen: the last row counted, plus one); an
                 * ancestor counted already had its own counted too. */
                if (parent[t] == LONE) {
                    term->rows++;
                } else {
                    for (uint32_t a = t; a != NO_PARENT && seen[a] != row + 1; a = parent[a]) {
                        seen[a] = row + 1;
                        ix->terms[a].rows++;
                    }
                }
            } else {
                unsigned char *w = ix->postings + at[t];
                uint32_t nth = seen[t]++;   /* postings written before this one */
                if (nth && nth % BM25_SKIP_EVERY == 0) {
                    struct bm25_skip *skip = &ix->skips[term->skip + nth / BM25_SKIP_EVERY - 1];
                    skip->row_plus1 = prev[id];
                    skip->off = at[t];
                }
                if (term->dense != BM25_SPARSE) {
                    uint64_t *bits = ix->dense_bits + (size_t)term->dense * ix->words_per_term;
                    bits[row / 64] |= (uint64_t)1 << (row % 64);
                    ix->dense_tfs[ix->dense_tf_off[term->dense] + nth] =
                        (unsigned char)(tf < BM25_TF_BIG ? tf : BM25_TF_BIG);
                }
                w = varint_put(w, gap);
                w = varint_put(w, tf);
                at[t] = (uint32_t)(w - ix->postings);
            }
            prev[id] = row + 1;
        }
    }
}

/* Whether sorted term `a` begins with term `b`. */
static int term_begins(const struct bm25_index *ix, const char *strings, uint32_t a, uint32_t b)
{
    const struct bm25_term *ta = &ix->terms[a], *tb = &ix->terms[b];

    return ta->len >= tb->len && !memcmp(strings + ta->off, strings + tb->off, tb->len);
}

/* Each sorted term's parent: the longest shorter term it begins with;
 * NO_PARENT for a term that begins with no other, LONE for one that
 * neither begins with another nor is begun by one (its rows are its df).
 * The terms that begin with one follow it in sorted order, so a stack of
 * the current term's prefixes finds them; `stack` has room for every
 * term, `child` is zeroed and left so. */
static void term_parents(const struct bm25_index *ix, const char *strings, uint32_t *parent,
                         uint32_t *stack, uint32_t *child)
{
    size_t depth = 0;

    for (uint32_t t = 0; t < ix->n_terms; t++) {
        while (depth && !term_begins(ix, strings, t, stack[depth - 1]))
            depth--;
        parent[t] = depth ? stack[depth - 1] : NO_PARENT;
        if (depth)
            child[stack[depth - 1]] = 1;
        stack[depth++] = t;
    }
    for (uint32_t t = 0; t < ix->n_terms; t++) {
        if (parent[t] == NO_PARENT && !child[t])
            parent[t] = LONE;
        child[t] = 0;
    }
}

/* Places every term's postings and skip entries in their pools (measured
 * by pass 0) and allocates the pools; KEEL_ETOOBIG past POOL_MAX bytes,
 * KEEL_ENOMEM. */
static int postings_place(struct bm25_index *ix, uint32_t *at)
{
    size_t total = 0, skips = 0;

    for (size_t t = 0; t < ix->n_terms; t++) {
        struct bm25_term *term = &ix->terms[t];
        if (total + term->post_len > POOL_MAX)
            return KEEL_ETOOBIG;
        term->post = at[t] = (uint32_t)total;
        total += term->post_len;
        term->skip = (uint32_t)skips;   /* fewer entries than postings: fits */
        skips += bm25_skips_of(term->df);
    }
    if (!(ix->postings = keel_malloc(total ? total : 1)) ||
        !(ix->skips = keel_malloc((skips ? skips : 1) * sizeof(*ix->skips))))
        return KEEL_ENOMEM;
    ix->postings_len = total;
    ix->n_skips = skips;
    return KEEL_OK;
}

/* Picks the dense terms (sets terms[].dense) and allocates their
 * bitmaps (clear), rank directories and count bytes, which pass 1 and
 * dense_ranks() fill. KEEL_ENOMEM. */
static int dense_place(struct bm25_index *ix, size_t n_rows)
{
    size_t words = (n_rows + 63) / 64, n = 0, tfs = 0;

    for (size_t t = 0; t < ix->n_terms; t++) {
        struct bm25_term *term = &ix->terms[t];
        term->dense = BM25_SPARSE;
        if ((size_t)term->df * BM25_DENSE_SHARE >= n_rows) {   /* df > 0: the term is in a row */
            term->dense = (uint32_t)n++;
            tfs += term->df;
        }
    }
    ix->n_dense = n;
    ix->words_per_term = words;
    ix->dense_tfs_len = tfs;
    if (!n)
        return KEEL_OK;
    if (words > SIZE_MAX / n / sizeof(*ix->dense_bits) ||
        !(ix->dense_bits = keel_calloc(n * words, sizeof(*ix->dense_bits))) ||
        !(ix->dense_ranks = keel_malloc(n * words * sizeof(*ix->dense_ranks))) ||
        !(ix->dense_tf_off = keel_malloc(n * sizeof(*ix->dense_tf_off))) ||
        !(ix->dense_tfs = keel_malloc(tfs)))
        return KEEL_ENOMEM;
    tfs = 0;
    for (size_t t = 0; t < ix->n_terms; t++) {
        if (ix->terms[t].dense != BM25_SPARSE) {
            ix->dense_tf_off[ix->terms[t].dense] = (uint32_t)tfs;
            tfs += ix->terms[t].df;
        }
    }
    return KEEL_OK;
}

/* The rank directories of the dense terms, from their bitmaps. */
static void dense_ranks(struct bm25_index *ix)
{
    for (size_t d = 0; d < ix->n_dense; d++) {
        const uint64_t *bits = ix->dense_bits + d * ix->words_per_term;
        uint32_t *ranks = ix->dense_ranks + d * ix->words_per_term, rank = 0;
        for (size_t i = 0; i < ix->words_per_term; i++) {
            ranks[i] = rank;
            rank += bm25_popcount(bits[i]);
        }
    }
}

int bm25_builder_finish(struct bm25_builder *b, struct bm25_index **out)
{
    struct bm25_index *ix = NULL;
    uint32_t *rank = NULL, *prev = NULL, *at = NULL, *seen = NULL, *parent = NULL;
    size_t n_terms = b->n_terms ? b->n_terms : 1;
    int rc = KEEL_ENOMEM;

    *out = NULL;
    if (b->open && (rc = bm25_builder_end_row(b)))
        goto out;
    rc = KEEL_ENOMEM;
    if (!(ix = keel_calloc(1, sizeof(*ix))) ||
        !(ix->terms = keel_calloc(n_terms, sizeof(*ix->terms))) ||
        !(rank = keel_malloc(n_terms * sizeof(*rank))) ||
        !(prev = keel_calloc(n_terms, sizeof(*prev))) ||
        !(at = keel_malloc(n_terms * sizeof(*at))) ||
        !(seen = keel_calloc(n_terms, sizeof(*seen))) ||
        !(parent = keel_malloc(n_terms * sizeof(*parent))))
        goto out;
    for (size_t t = 0; t < b->n_terms; t++) {
        ix->terms[t].off = b->terms[t].off;
        ix->terms[t].len = b->terms[t].len;
        ix->terms[t].post = (uint32_t)t;   /* the build id, until sorted */
    }
    sort_strings = (const char *)b->strings.data;
    qsort(ix->terms, b->n_terms, sizeof(*ix->terms), by_bytes);
    for (size_t t = 0; t < b->n_terms; t++) {
        rank[ix->terms[t].post] = (uint32_t)t;
        ix->terms[t].post = 0;
    }
    ix->n_terms = b->n_terms;
    term_parents(ix, (const char *)b->strings.data, parent, at, seen);
    postings_pass(b, ix, rank, parent, prev, at, seen, 0);
    if ((rc = postings_place(ix, at)) || (rc = dense_place(ix, b->n_rows)))
        goto out;
    rc = KEEL_ENOMEM;
    memset(prev, 0, n_terms * sizeof(*prev));
    memset(seen, 0, n_terms * sizeof(*seen));
    postings_pass(b, ix, rank, parent, prev, at, seen, 1);
    dense_ranks(ix);
    /* Hand over the strings and lengths; the rest of the builder goes. */
    ix->strings = (char *)b->strings.data;
    b->strings.data = NULL;
    ix->lengths = b->lengths;
    b->lengths = NULL;
    ix->n_rows = b->n_rows;
    ix->tokens = b->tokens;
    if (!(ix->norm = keel_malloc((ix->n_rows ? ix->n_rows : 1) * sizeof(*ix->norm))))
        goto out;
    if (ix->n_rows && ix->tokens) {
        /* The length part of FTS5's denominator, the same expression once
         * per row instead of once per row and word. */
        double avgdl = (double)ix->tokens / (double)ix->n_rows;
        for (size_t r = 0; r < ix->n_rows; r++)
            ix->norm[r] = BM25_K1 * (1 - BM25_B + BM25_B * (double)ix->lengths[r] / avgdl);
    }
    *out = ix;
    ix = NULL;
    rc = KEEL_OK;
out:
    keel_free(rank);
    keel_free(prev);
    keel_free(at);
    keel_free(seen);
    keel_free(parent);
    bm25_index_free(ix);
    bm25_builder_free(b);
    return rc;
}

void bm25_index_free(struct bm25_index *ix)
{
    if (!ix)
        return;
    keel_free(ix->strings);
    keel_free(ix->terms);
    keel_free(ix->postings);
    keel_free(ix->skips);
    keel_free(ix->dense_bits);
    keel_free(ix->dense_ranks);
    keel_free(ix->dense_tf_off);
    keel_free(ix->dense_tfs);
    keel_free(ix->lengths);
    keel_free(ix->norm);
    keel_free(ix);
}

size_t bm25_index_rows(const struct bm25_index *ix)
{
    return ix ? ix->n_rows : 0;
}

size_t bm25_index_bytes(const struct bm25_index *ix)
{
    size_t strings = 0;

    if (!ix)
        return 0;
    for (size_t t = 0; t < ix->n_terms; t++)
        strings += ix->terms[t].len;
    return sizeof(*ix) + strings + ix->n_terms * sizeof(*ix->terms) + ix->postings_len +
           ix->n_skips * sizeof(*ix->skips) +
           ix->n_dense * (ix->words_per_term * (sizeof(*ix->dense_bits) + sizeof(*ix->dense_ranks)) +
                          sizeof(*ix->dense_tf_off)) +
           ix->dense_tfs_len +
           ix->n_rows * (sizeof(*ix->lengths) + sizeof(*ix->norm));
}

