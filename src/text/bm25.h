/*
 * bm25.h — an in-memory inverted index ranked by BM25 exactly as SQLite
 * FTS5's bm25() ranks (k1 = 1.2, b = 0.75, IDF = log((N - n + 0.5) /
 * (n + 0.5)) floored at 1e-6, N every row, n the rows holding the query
 * word, one term per query word summed in query order, row length = its
 * tokens).
 *
 * The index knows tokens, not text: the caller tokenizes each row (the
 * SQLite store uses FTS5's own tokenizer, so both paths see the same
 * tokens) and hands them in row by row, rows numbered 0, 1, … in the
 * order added. Row numbers are also the tie-break: among equal scores the
 * lower row comes first, so a caller that adds rows in its key order (a
 * paper's id) gets the ORDER BY score DESC, key ASC of the SQL path.
 *
 * Build: bm25_builder_* collects postings (row gap and term frequency as
 * varints, per term) and bm25_builder_finish() turns them into a frozen
 * index (bm25_int.h): terms sorted by bytes (a prefix is a range), each
 * with its df and the rows holding it or a longer term it begins, one
 * contiguous posting pool with a skip entry every 64 postings, and for a
 * term in at least one row in 16 a bitmap of its rows and its counts as
 * bytes. A frozen index is read-only; searches need a bm25_scratch of
 * their own (so one index may serve several threads, each with its
 * scratch).
 *
 * Search: query words are tokens. BM25_ALL keeps rows holding every word,
 * each as a token or the start of one (FTS5's `"w1"* AND "w2"*`); BM25_ANY
 * keeps rows holding any word as a whole token (`"w1" OR "w2"`). A word's
 * n (for the IDF) is stored when the word is a term; only a prefix that
 * is not itself a term but begins several has its postings decoded to
 * count it. OR scores every posting of every word. AND starts from the
 * word with the fewest rows and keeps those of its rows every other word
 * holds, fewest rows first: a bit test for a dense term, a walk that
 * jumps over blocks of postings for a sparse one; only the rows left are
 * scored. Either way a row's score is its words' terms summed in query
 * order, so the scores are FTS5's bit for bit. A bounded heap keeps the
 * best `limit`; the filter is asked only about rows that would enter it.
 * No top-k pruning (MaxScore, WAND): OR reads every posting of its words.
 */
#ifndef KEEL_TEXT_BM25_H
#define KEEL_TEXT_BM25_H

#include <stddef.h>
#include <stdint.h>

#define BM25_TOKEN_MAX 32768   /* FTS5 cuts longer tokens to this many bytes */
#define BM25_WORDS_MAX 32      /* query words */
#define BM25_ROWS_MAX 0x7fffffffu

enum bm25_match { BM25_ANY, BM25_ALL };

struct bm25_builder;
struct bm25_index;
struct bm25_scratch;

struct bm25_query {
    const char *words[BM25_WORDS_MAX];   /* tokens, as the index's tokenizer makes them */
    size_t lens[BM25_WORDS_MAX];
    size_t n;
    enum bm25_match match;
};

struct bm25_hit {
    uint32_t row;
    double score;   /* higher is better; FTS5's -bm25() */
};

/* Says whether `row` may be returned (filters); NULL keeps every row. */
typedef int (*bm25_keep_fn)(void *ctx, uint32_t row);

/* A new empty builder in *out; KEEL_ENOMEM. */
int bm25_builder_new(struct bm25_builder **out);

/* Adds `len` bytes of token to the current row (cut to BM25_TOKEN_MAX);
 * the first token after bm25_builder_end_row() (or of a new builder)
 * opens a row. KEEL_ENOMEM (the builder is then unusable: free it);
 * KEEL_ETOOBIG past BM25_ROWS_MAX rows or 4 GiB of postings. */
int bm25_builder_token(struct bm25_builder *b, const char *token, size_t len);

/* Closes the current row (a row without tokens counts, with length 0).
 * KEEL_ENOMEM, KEEL_ETOOBIG as above. */
int bm25_builder_end_row(struct bm25_builder *b);

/* Freezes the builder into *out and frees the builder (also on failure).
 * KEEL_ENOMEM. */
int bm25_builder_finish(struct bm25_builder *b, struct bm25_index **out);

/* Frees a builder that was not finished; NULL is a no-op. */
void bm25_builder_free(struct bm25_builder *b);

/* Frees an index; NULL is a no-op. */
void bm25_index_free(struct bm25_index *ix);

/* Rows and bytes held by an index (the latter for reports). */
size_t bm25_index_rows(const struct bm25_index *ix);
size_t bm25_index_bytes(const struct bm25_index *ix);

/* Scratch space for searching indexes of up to `rows` rows; KEEL_ENOMEM.
 * It grows when a search needs more (bm25_search). */
int bm25_scratch_new(size_t rows, struct bm25_scratch **out);
void bm25_scratch_free(struct bm25_scratch *s);

/* The best `limit` rows (at most 1000) for `q` that `keep` accepts, best
 * first (score descending, row ascending), into out[0..*n). `keep` is
 * asked only about matching rows that would rank among those kept so far
 * (so it must be a pure filter, not a count of matches). Words of 0
 * bytes or longer than BM25_TOKEN_MAX match nothing. KEEL_ENOMEM when the
 * scratch cannot grow; KEEL_EINVAL for a limit over 1000 or more than
 * BM25_WORDS_MAX words. */
int bm25_search(const struct bm25_index *ix, const struct bm25_query *q, bm25_keep_fn keep,
                void *ctx, size_t limit, struct bm25_scratch *s, struct bm25_hit *out,
                size_t *n);

#endif
