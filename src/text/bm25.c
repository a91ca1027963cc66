/*
 * bm25.c — the in-memory BM25 index of bm25.h.
 *
 * Building. Each token is looked up in an open-addressing table of terms
 * (FNV-1a over its bytes; the bytes live in one string pool). Within a
 * row a term's count grows in the term itself; when the row closes, its
 * (term, count) pairs are appended as varints to one byte stream, so the
 * build needs no allocation per term. Freezing sorts the terms by bytes,
 * measures each term's postings (row gap, count: two varints) in a first
 * pass over the stream and writes them, term after term, into one pool in
 * a second; then the stream goes.
 *
 * Searching. For each query word in order: the postings of its term (or,
 * for BM25_ALL, of every term it begins: a range of the sorted terms) are
 * summed per row into a frequency; the number of rows seen is the word's
 * n, hence its IDF; each of those rows then gets the word's term added to
 * its score. Rows are marked with epoch stamps instead of clearing arrays.
 * Adding a word's term in query order, starting from 0.0, is the very sum
 * FTS5's bm25() makes (a word a row lacks adds exactly 0.0), with the same
 * expression, so the scores are equal bit for bit.
 */
#include "text/bm25.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

#define BM25_K1 1.2
#define BM25_B 0.75
#define LIMIT_MAX 1000
#define POOL_MAX 0xffffffffu

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

static const unsigned char *varint_get(const unsigned char *p, uint32_t *v)
{
    uint32_t x = 0;
    int shift = 0;

    while (*p & 0x80) {
        x |= (uint32_t)(*p++ & 0x7f) << shift;
        shift += 7;
    }
    *v = x | (uint32_t)*p++ << shift;
    return p;
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

/* The frozen index. */
struct term {
    uint32_t off, len;       /* bytes in `strings` */
    uint32_t post, post_len; /* bytes in `postings` */
};

struct bm25_index {
    char *strings;
    struct term *terms;      /* sorted by bytes */
    size_t n_terms;
    unsigned char *postings;
    size_t postings_len;
    uint32_t *lengths;
    double *norm;            /* per row: k1 * (1 - b + b * length / avgdl) */
    size_t n_rows;
    uint64_t tokens;
};

struct bm25_scratch {
    uint32_t *freq, *first_freq, *word_stamp, *row_stamp, *word_rows, *rows;
    double *score;
    unsigned char *matched;
    size_t cap;
    uint32_t word_epoch, row_epoch;
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
    const struct term *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int order = memcmp(sort_strings + a->off, sort_strings + b->off, n);

    return order ? order : (a->len > b->len) - (a->len < b->len);
}

/* The postings of every term from the stream: pass 0 measures (into
 * terms[].post_len), pass 1 writes at terms[].post. `rank` maps a build
 * id to its sorted place; `prev` is per build id, zeroed by the caller. */
static void postings_pass(const struct bm25_builder *b, struct bm25_index *ix,
                          const uint32_t *rank, uint32_t *prev, uint32_t *at, int pass)
{
    const unsigned char *p = b->stream.data;

    for (uint32_t row = 0; row < b->n_rows; row++) {
        uint32_t k, id, tf;
        p = varint_get(p, &k);
        while (k--) {
            struct term *term;
            uint32_t gap;
            p = varint_get(p, &id);
            p = varint_get(p, &tf);
            term = &ix->terms[rank[id]];
            gap = row + 1 - prev[id];
            prev[id] = row + 1;
            if (pass == 0) {
                term->post_len += (uint32_t)(varint_len(gap) + varint_len(tf));
            } else {
                unsigned char *w = ix->postings + at[rank[id]];
                w = varint_put(w, gap);
                w = varint_put(w, tf);
                at[rank[id]] = (uint32_t)(w - ix->postings);
            }
        }
    }
}

int bm25_builder_finish(struct bm25_builder *b, struct bm25_index **out)
{
    struct bm25_index *ix = NULL;
    uint32_t *rank = NULL, *prev = NULL, *at = NULL;
    size_t total = 0;
    int rc = KEEL_ENOMEM;

    *out = NULL;
    if (b->open && (rc = bm25_builder_end_row(b)))
        goto out;
    rc = KEEL_ENOMEM;
    if (!(ix = keel_calloc(1, sizeof(*ix))) ||
        !(ix->terms = keel_calloc(b->n_terms ? b->n_terms : 1, sizeof(*ix->terms))) ||
        !(rank = keel_malloc((b->n_terms ? b->n_terms : 1) * sizeof(*rank))) ||
        !(prev = keel_calloc(b->n_terms ? b->n_terms : 1, sizeof(*prev))) ||
        !(at = keel_malloc((b->n_terms ? b->n_terms : 1) * sizeof(*at))))
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
    postings_pass(b, ix, rank, prev, at, 0);
    for (size_t t = 0; t < ix->n_terms; t++) {
        if (total + ix->terms[t].post_len > POOL_MAX) {
            rc = KEEL_ETOOBIG;
            goto out;
        }
        ix->terms[t].post = at[t] = (uint32_t)total;
        total += ix->terms[t].post_len;
    }
    if (!(ix->postings = keel_malloc(total ? total : 1)))
        goto out;
    ix->postings_len = total;
    memset(prev, 0, (b->n_terms ? b->n_terms : 1) * sizeof(*prev));
    postings_pass(b, ix, rank, prev, at, 1);
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
           ix->n_rows * (sizeof(*ix->lengths) + sizeof(*ix->norm));
}

/* ---- searching ------------------------------------------------------------- */

void bm25_scratch_free(struct bm25_scratch *s)
{
    if (!s)
        return;
    keel_free(s->freq);
    keel_free(s->first_freq);
    keel_free(s->word_stamp);
    keel_free(s->row_stamp);
    keel_free(s->word_rows);
    keel_free(s->rows);
    keel_free(s->score);
    keel_free(s->matched);
    keel_free(s);
}

/* Makes room for `rows` rows; every stamp starts unmarked. */
static int scratch_fit(struct bm25_scratch *s, size_t rows)
{
    size_t n = rows ? rows : 1;

    if (n <= s->cap)
        return KEEL_OK;
    keel_free(s->freq);
    keel_free(s->first_freq);
    keel_free(s->word_stamp);
    keel_free(s->row_stamp);
    keel_free(s->word_rows);
    keel_free(s->rows);
    keel_free(s->score);
    keel_free(s->matched);
    s->freq = keel_malloc(n * sizeof(*s->freq));
    s->first_freq = keel_malloc(n * sizeof(*s->first_freq));
    s->word_stamp = keel_calloc(n, sizeof(*s->word_stamp));
    s->row_stamp = keel_calloc(n, sizeof(*s->row_stamp));
    s->word_rows = keel_malloc(n * sizeof(*s->word_rows));
    s->rows = keel_malloc(n * sizeof(*s->rows));
    s->score = keel_malloc(n * sizeof(*s->score));
    s->matched = keel_malloc(n);
    s->word_epoch = s->row_epoch = 0;
    if (!s->freq || !s->first_freq || !s->word_stamp || !s->row_stamp || !s->word_rows || !s->rows || !s->score ||
        !s->matched) {
        s->cap = 0;
        return KEEL_ENOMEM;
    }
    s->cap = n;
    return KEEL_OK;
}

int bm25_scratch_new(size_t rows, struct bm25_scratch **out)
{
    struct bm25_scratch *s = keel_calloc(1, sizeof(*s));

    *out = NULL;
    if (!s || scratch_fit(s, rows)) {
        bm25_scratch_free(s);
        return KEEL_ENOMEM;
    }
    *out = s;
    return KEEL_OK;
}

/* The next epoch of a stamp array; on wrap-around every stamp is cleared. */
static uint32_t next_epoch(uint32_t *epoch, uint32_t *stamps, size_t n)
{
    if (++*epoch == 0) {
        memset(stamps, 0, n * sizeof(*stamps));
        *epoch = 1;
    }
    return *epoch;
}

/* The first term whose bytes are >= `word`. */
static size_t lower_bound(const struct bm25_index *ix, const char *word, size_t len)
{
    size_t lo = 0, hi = ix->n_terms;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct term *t = &ix->terms[mid];
        size_t n = t->len < len ? t->len : len;
        int order = memcmp(ix->strings + t->off, word, n);
        if (order < 0 || (!order && t->len < len))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* FTS5's term of one word in one row: idf * (f * (k1 + 1)) / (f + norm). */
static double term_of(double idf, uint32_t freq, double norm)
{
    double f = (double)freq;

    return idf * ((f * (BM25_K1 + 1.0)) / (f + norm));
}

/* Counts word `w` in every row holding it (its n, hence idfs[w]) and adds
 * its term to the score of the rows that may still match. */
static void score_word(const struct bm25_index *ix, const struct bm25_query *q, size_t w,
                       double *idfs, struct bm25_scratch *s, size_t *n_rows)
{
    const char *word = q->words[w];
    size_t len = q->lens[w], t = lower_bound(ix, word, len), n_word = 0;
    uint32_t wep = next_epoch(&s->word_epoch, s->word_stamp, s->cap);
    double idf, hits;

    for (; t < ix->n_terms; t++) {
        const struct term *term = &ix->terms[t];
        const unsigned char *p = ix->postings + term->post, *end = p + term->post_len;
        uint32_t row_plus1 = 0;
        if (term->len < len || memcmp(ix->strings + term->off, word, len))
            break;   /* past the words that begin with `word` */
        if (q->match == BM25_ANY && term->len != len)
            break;   /* the exact term is the first of the range */
        while (p < end) {
            uint32_t gap, tf, row;
            if (end - p >= 2 && !((p[0] | p[1]) & 0x80)) {
                gap = p[0];   /* both one byte: most postings of a common word */
                tf = p[1];
                p += 2;
            } else {
                p = varint_get(p, &gap);
                p = varint_get(p, &tf);
            }
            row_plus1 += gap;
            row = row_plus1 - 1;
            if (s->word_stamp[row] != wep) {
                s->word_stamp[row] = wep;
                s->freq[row] = 0;
                s->word_rows[n_word++] = row;
            }
            s->freq[row] += tf;
        }
        if (q->match == BM25_ANY)
            break;
    }
    hits = (double)n_word;
    idf = log(((double)ix->n_rows - hits + 0.5) / (hits + 0.5));
    if (idf <= 0.0)
        idf = 1e-6;
    idfs[w] = idf;
    if (q->match == BM25_ANY) {
        for (size_t i = 0; i < n_word; i++) {
            uint32_t row = s->word_rows[i];
            if (s->row_stamp[row] != s->row_epoch) {
                s->row_stamp[row] = s->row_epoch;
                s->score[row] = 0.0;
                s->rows[(*n_rows)++] = row;
            }
            s->score[row] += term_of(idf, s->freq[row], ix->norm[row]);
        }
        return;
    }
    /* AND: a row missing an earlier word can no longer match; the first
     * word's count waits for the second word, so rows holding only the
     * first are never scored. The sum stays in word order. */
    for (size_t i = 0; i < n_word; i++) {
        uint32_t row = s->word_rows[i];
        if (w == 0) {
            s->row_stamp[row] = s->row_epoch;
            s->matched[row] = 1;
            s->first_freq[row] = s->freq[row];
            s->rows[(*n_rows)++] = row;
            continue;
        }
        if (s->row_stamp[row] != s->row_epoch || s->matched[row] != w)
            continue;
        if (w == 1)
            s->score[row] = 0.0 + term_of(idfs[0], s->first_freq[row], ix->norm[row]);
        s->score[row] += term_of(idf, s->freq[row], ix->norm[row]);
        s->matched[row]++;
    }
}

/* a is worse than b: a lower score, or the same score and a later row. */
static int worse(const struct bm25_hit *a, const struct bm25_hit *b)
{
    return a->score < b->score || (a->score == b->score && a->row > b->row);
}

/* Restores the heap (worst at the root) below `i`. */
static void sift_down(struct bm25_hit *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        struct bm25_hit tmp;
        if (l < n && worse(&h[l], &h[m]))
            m = l;
        if (r < n && worse(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

static void sift_up(struct bm25_hit *h, size_t i)
{
    while (i) {
        size_t parent = (i - 1) / 2;
        struct bm25_hit tmp;
        if (!worse(&h[i], &h[parent]))
            return;
        tmp = h[i];
        h[i] = h[parent];
        h[parent] = tmp;
        i = parent;
    }
}

int bm25_search(const struct bm25_index *ix, const struct bm25_query *q, bm25_keep_fn keep,
                void *ctx, size_t limit, struct bm25_scratch *s, struct bm25_hit *out,
                size_t *n)
{
    size_t n_rows = 0, kept = 0;
    double idfs[BM25_WORDS_MAX];
    int rc;

    *n = 0;
    if (limit > LIMIT_MAX || q->n > BM25_WORDS_MAX)
        return KEEL_EINVAL;
    if (!limit || !q->n || !ix->n_rows || !ix->tokens)
        return KEEL_OK;   /* no row has a token: nothing matches */
    if ((rc = scratch_fit(s, ix->n_rows)))
        return rc;
    for (size_t w = 0; w < q->n; w++)
        if (!q->lens[w] || q->lens[w] > BM25_TOKEN_MAX)
            return KEEL_OK;   /* (FTS5 would not match such a word either) */
    next_epoch(&s->row_epoch, s->row_stamp, s->cap);
    for (size_t w = 0; w < q->n; w++)
        score_word(ix, q, w, idfs, s, &n_rows);
    for (size_t i = 0; i < n_rows; i++) {
        uint32_t row = s->rows[i];
        struct bm25_hit hit = {row, 0.0};
        if (q->match == BM25_ALL) {
            if (s->matched[row] != q->n)
                continue;
            if (q->n == 1)
                s->score[row] = 0.0 + term_of(idfs[0], s->first_freq[row], ix->norm[row]);
        }
        hit.score = s->score[row];
        if (keep && !keep(ctx, row))
            continue;
        if (kept < limit) {
            out[kept] = hit;
            sift_up(out, kept++);
        } else if (worse(&out[0], &hit)) {
            out[0] = hit;
            sift_down(out, kept, 0);
        }
    }
    /* Heap order to best first: take the worst off the end, one by one. */
    for (size_t end = kept; end > 1; end--) {
        struct bm25_hit tmp = out[0];
        out[0] = out[end - 1];
        out[end - 1] = tmp;
        sift_down(out, end - 1, 0);
    }
    *n = kept;
    return KEEL_OK;
}
