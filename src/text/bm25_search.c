/*
 * bm25_search.c — searching the frozen index of bm25.h (built by bm25.c,
 * laid out in bm25_int.h).
 *
 * A word's n (the rows holding it, for its IDF) is mostly stored: a
 * term's df (BM25_ANY, or a BM25_ALL word beginning one term), or the
 * rows of the first term of a BM25_ALL word's range when every term of
 * the range begins with that one (the word is a term, or begins one term
 * and the longer ones that begin with it). Only a BM25_ALL word whose
 * range is several such families, or a word of several terms that gives
 * the candidates, is decoded, term after term, into one list of (row,
 * summed count) in row order: a bitmap over the rows marks the rows seen
 * (and counts them: n), the counts add up per row, and a scan of the
 * bitmap reads the rows out sorted and leaves it clear.
 *
 * BM25_ANY (each word an exact term): every posting of every word is
 * scored; rows are marked with epoch stamps instead of clearing arrays.
 *
 * BM25_ALL: the word with the fewest rows gives the candidates (its rows
 * in order); each other word, fewest rows first, keeps the candidates it
 * holds and records its count for them: a dense term by a bit test and a
 * rank per candidate, a sparse one by walking its postings with the skip
 * entries (blocks wholly before the next candidate are jumped over), a
 * word of a few terms by each term in turn adding its counts, a decoded
 * list by walking it. Only the rows left at the end are scored.
 *
 * Scores: a row's score is 0.0 plus each word's term in query order —
 * the very sum FTS5's bm25() makes (a word a row lacks adds exactly 0.0),
 * with the same expression, so the scores are equal bit for bit however
 * the rows were found. A bounded heap keeps the best `limit`; keep() is
 * asked only about rows that would enter it.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/bm25.h"
#include "text/bm25_int.h"

#define LIMIT_MAX 1000

struct bm25_scratch {
    uint32_t *row_stamp;   /* per row: BM25_ANY's epoch of its score */
    double *score;         /* per row: BM25_ANY's score */
    uint32_t *rows;        /* BM25_ANY's rows scored; BM25_ALL's candidates */
    uint32_t *alive;       /* BM25_ALL: candidates (indexes into rows) still matching */
    uint32_t *freq;        /* per row: a prefix word's summed count */
    uint64_t *bits;        /* per row: a prefix word's row seen; clear between uses */
    size_t cap;            /* rows the per-row arrays hold */
    uint32_t row_epoch;
    uint32_t *lists;       /* (row, count) pairs of prefix words' lists */
    size_t lists_cap;      /* uint32s */
    uint32_t *counts;      /* BM25_ALL: per candidate, each word's count */
    size_t counts_cap;     /* uint32s */
};

/* How a BM25_ALL word's rows are read: the postings of its one term; of
 * its several terms, each in turn (its n is the first term's rows: every
 * term of the range begins with that one); or its decoded list. */
enum word_kind { WORD_TERM, WORD_RANGE, WORD_LIST };

/* One query word: its terms, its n, where its rows are read from. */
struct word {
    size_t first, end;     /* its terms [first, end) */
    uint32_t n;            /* rows holding it */
    enum word_kind kind;
    size_t list;           /* WORD_LIST: its pairs at lists[list], n of them */
    double idf;
};

/* A reader of one word's rows in order, for BM25_ALL: a term's postings
 * (with its skip entries) or a decoded list of pairs. */
struct cursor {
    const unsigned char *pool, *p, *end;
    const struct bm25_skip *skip, *skip_end;
    const uint32_t *pair, *pair_end;   /* a list: the next pair */
    uint32_t row_plus1;                /* the current posting's row + 1; 0 before the first */
    uint32_t tf;                       /* its count */
};

/* ---- scratch ------------------------------------------------------------------ */

/* Frees the per-row arrays (cap 0). */
static void scratch_release_rows(struct bm25_scratch *s)
{
    keel_free(s->row_stamp);
    keel_free(s->score);
    keel_free(s->rows);
    keel_free(s->alive);
    keel_free(s->freq);
    keel_free(s->bits);
    s->row_stamp = s->rows = s->alive = s->freq = NULL;
    s->score = NULL;
    s->bits = NULL;
    s->cap = 0;
}

void bm25_scratch_free(struct bm25_scratch *s)
{
    if (!s)
        return;
    scratch_release_rows(s);
    keel_free(s->lists);
    keel_free(s->counts);
    keel_free(s);
}

/* Makes room for `rows` rows; every stamp starts unmarked, every bit clear. */
static int scratch_fit(struct bm25_scratch *s, size_t rows)
{
    size_t n = rows ? rows : 1;

    if (n <= s->cap)
        return KEEL_OK;
    scratch_release_rows(s);
    s->row_stamp = keel_calloc(n, sizeof(*s->row_stamp));
    s->score = keel_malloc(n * sizeof(*s->score));
    s->rows = keel_malloc(n * sizeof(*s->rows));
    s->alive = keel_malloc(n * sizeof(*s->alive));
    s->freq = keel_malloc(n * sizeof(*s->freq));
    s->bits = keel_calloc((n + 63) / 64, sizeof(*s->bits));
    s->row_epoch = 0;
    if (!s->row_stamp || !s->score || !s->rows || !s->alive || !s->freq || !s->bits) {
        scratch_release_rows(s);
        return KEEL_ENOMEM;
    }
    s->cap = n;
    return KEEL_OK;
}

/* Makes *items hold at least `need` uint32s (contents kept). */
static int fit_u32(uint32_t **items, size_t *cap, size_t need)
{
    size_t want = *cap ? *cap : 1024;
    uint32_t *grown;

    if (need <= *cap)
        return KEEL_OK;
    while (want < need)
        want *= 2;
    if (want > SIZE_MAX / sizeof(**items) || !(grown = keel_realloc(*items, want * sizeof(**items))))
        return KEEL_ENOMEM;
    *items = grown;
    *cap = want;
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

/* ---- terms and postings ------------------------------------------------------- */

/* The first term whose bytes are >= `word`. */
static size_t lower_bound(const struct bm25_index *ix, const char *word, size_t len)
{
    size_t lo = 0, hi = ix->n_terms;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct bm25_term *t = &ix->terms[mid];
        size_t n = t->len < len ? t->len : len;
        int order = memcmp(ix->strings + t->off, word, n);
        if (order < 0 || (!order && t->len < len))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether term `t` begins with `word`. */
static int begins(const struct bm25_index *ix, size_t t, const char *word, size_t len)
{
    const struct bm25_term *term = &ix->terms[t];

    return term->len >= len && !memcmp(ix->strings + term->off, word, len);
}

/* The terms of query word `w`: the exact term (BM25_ANY) or every term it
 * begins (BM25_ALL), an empty range when there is none; its n when that
 * needs no decoding (else WORD_LIST: word_list counts it). */
static void word_terms(const struct bm25_index *ix, const struct bm25_query *q, size_t w,
                       struct word *word)
{
    const char *text = q->words[w];
    size_t len = q->lens[w], t = lower_bound(ix, text, len), end = t;

    if (q->match == BM25_ANY) {
        if (t < ix->n_terms && ix->terms[t].len == len && begins(ix, t, text, len))
            end = t + 1;
    } else {
        while (end < ix->n_terms && begins(ix, end, text, len))
            end++;
    }
    word->first = t;
    word->end = end;
    word->list = 0;
    word->n = 0;
    word->kind = WORD_LIST;
    if (end - t == 1) {
        word->n = ix->terms[t].df;
        word->kind = WORD_TERM;
    } else if (end > t && begins(ix, end - 1, ix->strings + ix->terms[t].off, ix->terms[t].len)) {
        word->n = ix->terms[t].rows;   /* every term of the range begins with the first */
        word->kind = WORD_RANGE;
    }
}

/* Reads the posting at *p (gap and count) into *row_plus1, *tf. */
static inline const unsigned char *posting_get(const unsigned char *p, uint32_t *row_plus1,
                                               uint32_t *tf)
{
    uint32_t gap;

    if (!((p[0] | p[1]) & 0x80)) {
        /* both one byte: most postings of a common word (a posting has
         * two varints, so a second byte is there) */
        *row_plus1 += p[0];
        *tf = p[1];
        return p + 2;
    }
    p = bm25_varint_get(p, &gap);
    *row_plus1 += gap;
    return bm25_varint_get(p, tf);
}

/* FTS5's IDF of a word in `hits` of the index's rows. */
static double idf_of(const struct bm25_index *ix, uint32_t hits)
{
    double idf = log(((double)ix->n_rows - (double)hits + 0.5) / ((double)hits + 0.5));

    return idf <= 0.0 ? 1e-6 : idf;
}

/* FTS5's term of one word in one row: idf * (f * (k1 + 1)) / (f + norm). */
static double term_of(double idf, uint32_t freq, double norm)
{
    double f = (double)freq;

    return idf * ((f * (BM25_K1 + 1.0)) / (f + norm));
}

/* Decodes the postings of every term of `word` (several) into one list of
 * (row, summed count) pairs in row order at s->lists[*used], sets
 * word->n and word->list and advances *used. KEEL_ENOMEM (the scratch
 * stays usable). */
static int word_list(const struct bm25_index *ix, struct word *word, struct bm25_scratch *s,
                     size_t *used)
{
    uint32_t n = 0, *pair;

    for (size_t t = word->first; t < word->end; t++) {
        const struct bm25_term *term = &ix->terms[t];
        const unsigned char *p = ix->postings + term->post, *end = p + term->post_len;
        uint32_t row_plus1 = 0, tf;
        while (p < end) {
            uint32_t row;
            uint64_t bit;
            p = posting_get(p, &row_plus1, &tf);
            row = row_plus1 - 1;
            bit = (uint64_t)1 << (row & 63);
            if (s->bits[row >> 6] & bit) {
                s->freq[row] += tf;
            } else {
                s->bits[row >> 6] |= bit;
                s->freq[row] = tf;
                n++;
            }
        }
    }
    if (fit_u32(&s->lists, &s->lists_cap, *used + 2 * (size_t)n)) {
        memset(s->bits, 0, (s->cap + 63) / 64 * sizeof(*s->bits));
        return KEEL_ENOMEM;
    }
    pair = s->lists + *used;
    for (size_t i = 0; i < (ix->n_rows + 63) / 64; i++) {
        uint64_t bits = s->bits[i];
        if (!bits)
            continue;
        s->bits[i] = 0;
        do {
            uint32_t row = (uint32_t)(i * 64 + (size_t)__builtin_ctzll(bits));
            *pair++ = row;
            *pair++ = s->freq[row];
            bits &= bits - 1;
        } while (bits);
    }
    word->n = n;
    word->kind = WORD_LIST;
    word->list = *used;
    *used += 2 * (size_t)n;
    return KEEL_OK;
}

/* A cursor on the postings of term `t`. */
static void cursor_term(struct cursor *c, const struct bm25_index *ix, size_t t)
{
    const struct bm25_term *term = &ix->terms[t];

    memset(c, 0, sizeof(*c));
    c->pool = ix->postings;
    c->p = ix->postings + term->post;
    c->end = c->p + term->post_len;
    c->skip = ix->skips + term->skip;
    c->skip_end = c->skip + bm25_skips_of(term->df);
}

/* A cursor on a decoded list of `n` pairs. */
static void cursor_list(struct cursor *c, const uint32_t *pairs, uint32_t n)
{
    memset(c, 0, sizeof(*c));
    c->pair = pairs;
    c->pair_end = pairs + 2 * (size_t)n;
}

/* Moves `c` to its first row >= `row` (c->row_plus1, c->tf): 1, or 0 when
 * it has none. */
static inline int cursor_seek(struct cursor *c, uint32_t row)
{
    uint32_t target = row + 1;

    if (c->row_plus1 >= target)
        return 1;
    if (c->pair_end) {
        while (c->pair < c->pair_end) {
            uint32_t row_plus1 = c->pair[0] + 1, tf = c->pair[1];
            c->pair += 2;
            if (row_plus1 >= target) {
                c->row_plus1 = row_plus1;
                c->tf = tf;
                return 1;
            }
        }
        return 0;
    }
    /* Blocks whose preceding posting is still before `row` hold nothing
     * wanted before their start: jump to the last such block ahead. */
    for (; c->skip < c->skip_end && c->skip->row_plus1 < target; c->skip++) {
        if (c->pool + c->skip->off > c->p) {
            c->p = c->pool + c->skip->off;
            c->row_plus1 = c->skip->row_plus1;
        }
    }
    while (c->p < c->end) {
        c->p = posting_get(c->p, &c->row_plus1, &c->tf);
        if (c->row_plus1 >= target)
            return 1;
    }
    return 0;
}

/* ---- the best `limit` ------------------------------------------------------------ */

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

struct best {
    struct bm25_hit *heap;
    size_t kept, limit;
    bm25_keep_fn keep;
    void *ctx;
};

/* Puts a hit that beats the heap's worst (or fills it) in, when keep()
 * accepts it. */
static void best_enter(struct best *b, struct bm25_hit hit)
{
    if (b->keep && !b->keep(b->ctx, hit.row))
        return;
    if (b->kept < b->limit) {
        b->heap[b->kept] = hit;
        sift_up(b->heap, b->kept++);
    } else {
        b->heap[0] = hit;
        sift_down(b->heap, b->kept, 0);
    }
}

/* Offers a hit to the heap; keep() is asked only when it would enter. */
static inline void best_offer(struct best *b, uint32_t row, double score)
{
    struct bm25_hit hit = {row, score};

    if (b->kept < b->limit || worse(&b->heap[0], &hit))
        best_enter(b, hit);
}

/* Heap order to best first: takes the worst off the end, one by one. */
static void best_sort(struct best *b)
{
    for (size_t end = b->kept; end > 1; end--) {
        struct bm25_hit tmp = b->heap[0];
        b->heap[0] = b->heap[end - 1];
        b->heap[end - 1] = tmp;
        sift_down(b->heap, end - 1, 0);
    }
}

/* ---- the two matches ----------------------------------------------------------- */

/* BM25_ANY: every row holding a word, scored word after word. */
static void search_any(const struct bm25_index *ix, const struct bm25_query *q,
                       struct bm25_scratch *s, struct best *best)
{
    uint32_t epoch = next_epoch(&s->row_epoch, s->row_stamp, s->cap);
    size_t n_rows = 0;

    for (size_t w = 0; w < q->n; w++) {
        struct word word;
        const struct bm25_term *term;
        const unsigned char *p, *end;
        uint32_t row_plus1 = 0, tf;
        double idf;
        word_terms(ix, q, w, &word);
        if (word.first == word.end)
            continue;   /* no row holds it: its term is 0.0 everywhere */
        term = &ix->terms[word.first];
        idf = idf_of(ix, word.n);
        p = ix->postings + term->post;
        end = p + term->post_len;
        while (p < end) {
            uint32_t row;
            p = posting_get(p, &row_plus1, &tf);
            row = row_plus1 - 1;
            if (s->row_stamp[row] != epoch) {
                s->row_stamp[row] = epoch;
                s->score[row] = 0.0;
                s->rows[n_rows++] = row;
            }
            s->score[row] += term_of(idf, tf, ix->norm[row]);
        }
    }
    for (size_t i = 0; i < n_rows; i++)
        best_offer(best, s->rows[i], s->score[s->rows[i]]);
}

/* BM25_ALL's candidates: the rows of word `src` (a term or a list) into
 * s->rows[0..n) with their counts in column `src` of s->counts (`nw`
 * columns), all alive. */
static void candidates(const struct bm25_index *ix, const struct word *word, size_t src,
                       size_t nw, struct bm25_scratch *s)
{
    uint32_t *counts = s->counts + src;

    if (word->kind == WORD_TERM) {
        const struct bm25_term *term = &ix->terms[word->first];
        const unsigned char *p = ix->postings + term->post, *end = p + term->post_len;
        uint32_t row_plus1 = 0, i = 0;
        while (p < end) {
            p = posting_get(p, &row_plus1, &counts[i * nw]);
            s->rows[i] = row_plus1 - 1;
            s->alive[i] = i;
            i++;
        }
        return;
    }
    for (uint32_t i = 0; i < word->n; i++) {
        s->rows[i] = s->lists[word->list + 2 * (size_t)i];
        counts[i * nw] = s->lists[word->list + 2 * (size_t)i + 1];
        s->alive[i] = i;
    }
}

/* Walks the `n_alive` candidates with `c`: sets the count in column `w`
 * of those it holds and keeps only them (returns how many), or, when
 * `add`, adds its count to theirs and keeps every candidate. */
static size_t intersect(struct bm25_scratch *s, const struct cursor *c, size_t w, size_t nw,
                        size_t n_alive, int add)
{
    struct cursor at = *c;   /* local copies the compiler keeps in registers */
    uint32_t *alive = s->alive, *counts = s->counts + w;
    const uint32_t *rows = s->rows;
    size_t kept = 0;

    for (size_t i = 0; i < n_alive; i++) {
        uint32_t cand = alive[i], row = rows[cand];
        if (!cursor_seek(&at, row))
            break;
        if (at.row_plus1 - 1 != row)
            continue;
        if (add) {
            counts[cand * nw] += at.tf;
        } else {
            counts[cand * nw] = at.tf;
            alive[kept++] = cand;
        }
    }
    return add ? n_alive : kept;
}

/* The count of posting `k` of `term`, read from its postings: the skip
 * entry before it, then the postings up to it. */
static uint32_t posting_tf(const struct bm25_index *ix, const struct bm25_term *term, uint32_t k)
{
    const unsigned char *p = ix->postings + term->post;
    uint32_t block = k / BM25_SKIP_EVERY, row_plus1 = 0, tf = 0;

    if (block)
        p = ix->postings + ix->skips[term->skip + block - 1].off;
    for (uint32_t i = block * BM25_SKIP_EVERY; i <= k; i++)
        p = posting_get(p, &row_plus1, &tf);
    return tf;
}

/* As intersect, for a dense term: a bit test per candidate, and its
 * count by rank for the candidates it holds. */
static size_t intersect_dense(const struct bm25_index *ix, struct bm25_scratch *s,
                              const struct bm25_term *term, size_t w, size_t nw, size_t n_alive,
                              int add)
{
    const uint64_t *bits = ix->dense_bits + (size_t)term->dense * ix->words_per_term;
    const uint32_t *ranks = ix->dense_ranks + (size_t)term->dense * ix->words_per_term;
    const unsigned char *tfs = ix->dense_tfs + ix->dense_tf_off[term->dense];
    uint32_t *alive = s->alive, *counts = s->counts + w;
    const uint32_t *rows = s->rows;
    size_t kept = 0;

    for (size_t i = 0; i < n_alive; i++) {
        uint32_t cand = alive[i], row = rows[cand], k, tf;
        uint64_t word = bits[row / 64], below = ((uint64_t)1 << (row % 64)) - 1;
        if (!((word >> (row % 64)) & 1))
            continue;
        k = ranks[row / 64] + bm25_popcount(word & below);
        if ((tf = tfs[k]) == BM25_TF_BIG)
            tf = posting_tf(ix, term, k);
        if (add) {
            counts[cand * nw] += tf;
        } else {
            counts[cand * nw] = tf;
            alive[kept++] = cand;
        }
    }
    return add ? n_alive : kept;
}

#define RANGE_TERMS_MAX 8   /* a range of more terms is decoded into a list */

/* Keeps the candidates that word `w` holds, with their counts; how many.
 * KEEL_ENOMEM as word_list (then *n_alive is unchanged). */
static int keep_holding(const struct bm25_index *ix, struct word *word, size_t w, size_t nw,
                        struct bm25_scratch *s, size_t *used, size_t *n_alive)
{
    struct cursor c;
    size_t kept = 0;
    int rc;

    if (word->kind == WORD_RANGE && word->end - word->first > RANGE_TERMS_MAX &&
        (rc = word_list(ix, word, s, used)))
        return rc;
    if (word->kind == WORD_TERM && ix->terms[word->first].dense != BM25_SPARSE) {
        *n_alive = intersect_dense(ix, s, &ix->terms[word->first], w, nw, *n_alive, 0);
        return KEEL_OK;
    }
    if (word->kind == WORD_TERM) {
        cursor_term(&c, ix, word->first);
    } else if (word->kind == WORD_LIST) {
        cursor_list(&c, s->lists + word->list, word->n);
    } else {
        /* each term in turn adds its counts; the rows with none go */
        for (size_t i = 0; i < *n_alive; i++)
            s->counts[s->alive[i] * nw + w] = 0;
        for (size_t t = word->first; t < word->end; t++) {
            if (ix->terms[t].dense != BM25_SPARSE) {
                intersect_dense(ix, s, &ix->terms[t], w, nw, *n_alive, 1);
                continue;
            }
            cursor_term(&c, ix, t);
            intersect(s, &c, w, nw, *n_alive, 1);
        }
        for (size_t i = 0; i < *n_alive; i++)
            if (s->counts[s->alive[i] * nw + w])
                s->alive[kept++] = s->alive[i];
        *n_alive = kept;
        return KEEL_OK;
    }
    *n_alive = intersect(s, &c, w, nw, *n_alive, 0);
    return KEEL_OK;
}

/* BM25_ALL: rows holding every word. KEEL_ENOMEM. */
static int search_all(const struct bm25_index *ix, const struct bm25_query *q,
                      struct bm25_scratch *s, struct best *best)
{
    struct word words[BM25_WORDS_MAX];
    size_t order[BM25_WORDS_MAX], used = 0, n_alive, nw = q->n;
    int rc;

    if (!nw || nw > BM25_WORDS_MAX)
        return KEEL_OK;   /* (bm25_search's checks; said again for the compiler) */
    for (size_t w = 0; w < nw; w++) {
        word_terms(ix, q, w, &words[w]);
        if (words[w].first == words[w].end)
            return KEEL_OK;   /* no row holds every word */
        if (words[w].kind == WORD_LIST && (rc = word_list(ix, &words[w], s, &used)))
            return rc;
        words[w].idf = idf_of(ix, words[w].n);
    }
    /* The words by rows, fewest first (stable: ties in query order). */
    for (size_t w = 0; w < nw; w++) {
        size_t i = w;
        for (; i > 0 && words[order[i - 1]].n > words[w].n; i--)
            order[i] = order[i - 1];
        order[i] = w;
    }
    n_alive = words[order[0]].n;
    if ((rc = fit_u32(&s->counts, &s->counts_cap, n_alive * nw)) ||
        (words[order[0]].kind == WORD_RANGE && (rc = word_list(ix, &words[order[0]], s, &used))))
        return rc;
    candidates(ix, &words[order[0]], order[0], nw, s);
    for (size_t k = 1; k < nw && n_alive; k++)
        if ((rc = keep_holding(ix, &words[order[k]], order[k], nw, s, &used, &n_alive)))
            return rc;
    for (size_t i = 0; i < n_alive; i++) {
        uint32_t cand = s->alive[i], row = s->rows[cand];
        const uint32_t *counts = s->counts + cand * nw;
        double score = 0.0;
        for (size_t w = 0; w < nw; w++)
            score += term_of(words[w].idf, counts[w], ix->norm[row]);
        best_offer(best, row, score);
    }
    return KEEL_OK;
}

int bm25_search(const struct bm25_index *ix, const struct bm25_query *q, bm25_keep_fn keep,
                void *ctx, size_t limit, struct bm25_scratch *s, struct bm25_hit *out,
                size_t *n)
{
    struct best best = {out, 0, limit, keep, ctx};
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
    if (q->match == BM25_ANY)
        search_any(ix, q, s, &best);
    else if ((rc = search_all(ix, q, s, &best)))
        return rc;
    best_sort(&best);
    *n = best.kept;
    return KEEL_OK;
}
