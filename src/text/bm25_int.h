/*
 * bm25_int.h — the frozen index of bm25.h as bm25.c builds it and
 * bm25_search.c reads it.
 *
 * Terms are sorted by bytes, so the terms a prefix begins are one range.
 * Each term knows the rows holding it (df) and the rows holding it or a
 * longer term it begins (rows): a BM25_ALL word that is a term has its n
 * without decoding. A term's postings are `df` (row gap, count) pairs of varints, rows
 * ascending, in one pool shared by every term. Every BM25_SKIP_EVERY
 * postings a skip entry says where the next block starts and which row
 * preceded it, so a reader looking for a later row jumps over blocks it
 * does not need instead of decoding them (a term with df postings has
 * (df - 1) / BM25_SKIP_EVERY entries, the first at skips[term.skip]).
 *
 * A dense term (one row in BM25_DENSE_SHARE or more holds it) also has a
 * bitmap of its rows, the rows before each 64-bit word of it (its rank
 * directory), and its counts as bytes in row order: whether a row holds
 * it, and with which count, is a bit test and a popcount instead of a
 * walk through its postings. A count of BM25_TF_BIG or more is stored as
 * BM25_TF_BIG and read from the postings (from the skip entry before it).
 */
#ifndef KEEL_TEXT_BM25_INT_H
#define KEEL_TEXT_BM25_INT_H

#include <stddef.h>
#include <stdint.h>

#include "text/bm25.h"

#define BM25_K1 1.2
#define BM25_B 0.75
#define BM25_SKIP_EVERY 64   /* postings a skip entry covers */

struct bm25_term {
    uint32_t off, len;       /* bytes in `strings` */
    uint32_t post, post_len; /* bytes in `postings` */
    uint32_t df;             /* postings: rows holding the term */
    uint32_t rows;           /* rows holding a term that begins with this one */
    uint32_t skip;           /* its first entry in `skips` */
    uint32_t dense;          /* its place among the dense terms; BM25_SPARSE: none */
};

#define BM25_SPARSE UINT32_MAX
#define BM25_DENSE_SHARE 16  /* dense: at least one row in 16 holds the term */
#define BM25_TF_BIG 255      /* a dense count byte of 255: read the postings */

/* Block k (k >= 1) of a term's postings: it starts at byte `off` of the
 * pool, and the posting before it is row `row_plus1` - 1. */
struct bm25_skip {
    uint32_t row_plus1, off;
};

struct bm25_index {
    char *strings;
    struct bm25_term *terms;   /* sorted by bytes */
    size_t n_terms;
    unsigned char *postings;
    size_t postings_len;
    struct bm25_skip *skips;
    size_t n_skips;
    uint64_t *dense_bits;      /* per dense term: words_per_term bits, one per row */
    uint32_t *dense_ranks;     /* per dense term and bit word: its rows before that word */
    uint32_t *dense_tf_off;    /* per dense term: its counts at dense_tfs[off] */
    unsigned char *dense_tfs;  /* counts of the dense terms' postings, in row order */
    size_t n_dense, words_per_term, dense_tfs_len;
    uint32_t *lengths;
    double *norm;              /* per row: k1 * (1 - b + b * length / avgdl) */
    size_t n_rows;
    uint64_t tokens;
};

/* Skip entries of a term of `df` postings. */
static inline uint32_t bm25_skips_of(uint32_t df)
{
    return df ? (df - 1) / BM25_SKIP_EVERY : 0;
}

/* Set bits of `x` (SWAR: the build has no popcount instruction to rely
 * on, and libgcc's is a call). */
static inline uint32_t bm25_popcount(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555u;
    x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fu;
    return (uint32_t)((x * 0x0101010101010101u) >> 56);
}

/* Reads one varint (at most 5 bytes, written by bm25.c) into *v. */
static inline const unsigned char *bm25_varint_get(const unsigned char *p, uint32_t *v)
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

#endif
