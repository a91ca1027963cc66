/*
 * store_sqlite_index.c — the SQLite store's in-memory ranked index: the
 * papers and the chunks as two BM25 indexes (text/bm25.h), tokenized by
 * FTS5's own tokenizer (unicode61 remove_diacritics 2, taken from the
 * connection through fts5_api), so a search ranks exactly as the FTS5
 * statement of the same query would — same rows, same scores bit for bit,
 * same ties — without reading every matching row's sizes and positions.
 *
 * Kept in step. Migration 11 keeps a generation per table in
 * `search_generation`, bumped by triggers on every insert, update and
 * delete of a paper or a chunk, by any connection of any process. A
 * search reads the generation and the hit rows in one read transaction;
 * the index serves it only when it was built at that generation. A stale
 * index is rebuilt from a scan (in key order: papers by id, chunks by
 * document and ordinal, so a row's number is its tie-break) unless the last
 * build ended less than ten build-durations ago (an ingest in progress):
 * then the FTS5 statement answers, so rebuilds take at most about a tenth
 * of the time and every answer is current.
 *
 * Shared. Every store of one file in the process (the server's workers
 * each have one) uses the same index data (store_sqlite_index_share.c):
 * one build and one copy in memory, not one per connection. A search
 * holds its lock for reading from the generation check until it has read
 * its hits' rows; a rebuild holds it for writing. A store whose snapshot
 * is older than the index (another store rebuilt it for a later write)
 * leaves that search to FTS5 rather than rebuild it backwards.
 *
 * KEEL_SEARCH_INDEX=off leaves every search to the FTS5 statements (to
 * compare, or should the index ever be suspected).
 *
 * Not served here (the FTS5 statement answers, same contract): a query
 * word that FTS5 would read as a phrase of several tokens or as none
 * ("a—b", "—"), a connection without the FTS5 API, a failed build.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "store/store_sqlite_int.h"
#include "store/store_sqlite_index_int.h"
#include "text/bm25.h"

#define QUERY_TOKEN_MAX 256    /* bytes of one query word's token */
#define HITS_MAX 1000          /* bm25_search's limit; STORE_LIMIT_MAX is less */

enum index_stmt { IX_BEGIN, IX_COMMIT, IX_GENERATION, IX_PAPERS_SCAN, IX_CHUNKS_SCAN, IX_PAPER_ROW,
                  IX_CHUNK_ROW, IX_COUNT };

static const char *const index_sql[IX_COUNT] = {
    [IX_BEGIN] = "BEGIN",
    [IX_COMMIT] = "COMMIT",
    [IX_GENERATION] = "SELECT value FROM search_generation WHERE name = ?1",
    [IX_PAPERS_SCAN] = "SELECT seq, year, is_open_access, title, abstract FROM papers ORDER BY id",
    [IX_CHUNKS_SCAN] = "SELECT seq, section, text FROM chunks ORDER BY document_id, ordinal",
    /* The columns of ST_PAPER_SEARCH / ST_CHUNK_SEARCH, score last. */
    [IX_PAPER_ROW] = "SELECT id, title, abstract, year, venue, authors, doi, url, pdf_url,"
                     " is_open_access, source, 0.0 FROM papers WHERE seq = ?1",
    [IX_CHUNK_ROW] = "SELECT c.document_id, d.title, d.source, c.section, c.text, c.ordinal, 0.0"
                     " FROM chunks AS c JOIN documents AS d ON d.id = c.document_id"
                     " WHERE c.seq = ?1",
};

struct sqlite_index {
    /* of the connection: replaced with it */
    sqlite3_stmt *stmt[IX_COUNT];
    fts5_tokenizer tokenizer;
    Fts5Tokenizer *tok;         /* NULL: no FTS5 API, nothing served */
    /* of the data: kept across connections, checked by generation, and
     * shared with the process's other stores of the file */
    struct index_data *data;    /* NULL: none (FTS5 answers) */
    int locked;                 /* this store holds data->lock for reading */
    int began;                  /* search_begin opened the read transaction */
    struct bm25_scratch *scratch;
    struct bm25_hit hits[HITS_MAX];
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the connection's part ----------------------------------------------------- */

static fts5_api *fts5_api_of(sqlite3 *db)
{
    fts5_api *api = NULL;
    sqlite3_stmt *stmt = NULL;

    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_bind_pointer(stmt, 1, (void *)&api, "fts5_api_ptr", NULL) == SQLITE_OK)
        sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    return api;
}

void sqlite_index_attach(struct sqlite_store *st)
{
    /* The tables' tokenize option (TOKENIZE in store_sqlite_schema.c):
     * the two must change together. */
    static const char *args[] = {"remove_diacritics", "2"};
    struct sqlite_index *ix = st->index;
    void *tok_ctx = NULL;
    fts5_api *api;
    const char *knob = getenv("KEEL_SEARCH_INDEX");

    if (knob && !strcmp(knob, "off"))
        return;   /* asked for the FTS5 statements only */
    if (!ix && !(ix = st->index = keel_calloc(1, sizeof(*ix))))
        return;   /* out of memory: the FTS5 statements serve every search */
    for (int i = 0; i < IX_COUNT; i++)
        if (sqlite3_prepare_v3(st->db, index_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &ix->stmt[i], NULL) != SQLITE_OK)
            goto fail;
    api = fts5_api_of(st->db);
    if (!api || api->iVersion < 2 ||
        api->xFindTokenizer(api, "unicode61", &tok_ctx, &ix->tokenizer) != SQLITE_OK ||
        ix->tokenizer.xCreate(tok_ctx, args, 2, &ix->tok) != SQLITE_OK)
        goto fail;
    if (!ix->data && !(ix->data = index_data_acquire(st->path)))
        goto fail;
    return;
fail:
    ix->tok = NULL;
    sqlite_index_detach(st);
}

void sqlite_index_detach(struct sqlite_store *st)
{
    struct sqlite_index *ix = st->index;

    if (!ix)
        return;
    if (ix->tok)
        ix->tokenizer.xDelete(ix->tok);
    ix->tok = NULL;
    for (int i = 0; i < IX_COUNT; i++) {
        sqlite3_finalize(ix->stmt[i]);
        ix->stmt[i] = NULL;
    }
}

void sqlite_index_free(struct sqlite_store *st)
{
    struct sqlite_index *ix = st->index;

    if (!ix)
        return;
    sqlite_index_detach(st);
    index_data_release(ix->data);
    bm25_scratch_free(ix->scratch);
    keel_free(ix);
    st->index = NULL;
}

/* ---- building ------------------------------------------------------------------ */

static int on_document_token(void *ctx, int tflags, const char *token, int n, int start, int end)
{
    (void)start;
    (void)end;
    if (tflags & FTS5_TOKEN_COLOCATED)
        return SQLITE_OK;   /* a synonym takes no place of its own (unicode61 makes none) */
    return bm25_builder_token(ctx, token, (size_t)(n > 0 ? n : 0)) ? SQLITE_NOMEM : SQLITE_OK;
}

/* Adds column `col` of the current row to the builder's open row. */
static int tokenize_column(struct sqlite_index *ix, sqlite3_stmt *stmt, int col,
                           struct bm25_builder *b)
{
    const char *text = (const char *)sqlite3_column_text(stmt, col);
    int n = sqlite3_column_bytes(stmt, col);

    if (!text)
        return sqlite3_column_type(stmt, col) == SQLITE_NULL ? SQLITE_OK : SQLITE_NOMEM;
    return ix->tokenizer.xTokenize(ix->tok, b, FTS5_TOKENIZE_DOCUMENT, text, n, on_document_token);
}

/* Rebuilds `t` from a scan of its table, at generation `gen`; on failure
 * `t` is left without an index. Inside the caller's read transaction. */
static int build(struct sqlite_index *ix, struct table_index *t, int papers, int64_t gen)
{
    sqlite3_stmt *scan = ix->stmt[papers ? IX_PAPERS_SCAN : IX_CHUNKS_SCAN];
    struct bm25_builder *b = NULL;
    size_t n = 0, cap = 0;
    uint64_t started = now_ns();
    int rc = SQLITE_NOMEM, step;

    table_index_release(t);
    if (bm25_builder_new(&b))
        goto out;
    while ((step = sqlite3_step(scan)) == SQLITE_ROW) {
        if (n == cap) {
            size_t want = cap ? cap * 2 : 1024;
            int64_t *seq = keel_realloc(t->seq, want * sizeof(*seq));
            if (seq)
                t->seq = seq;
            if (seq && papers) {
                uint16_t *year = keel_realloc(t->year, want * sizeof(*year));
                unsigned char *oa = year ? (t->year = year, keel_realloc(t->oa, want)) : NULL;
                if (oa)
                    t->oa = oa;
                else
                    seq = NULL;
            }
            if (!seq)
                goto out;
            cap = want;
        }
        t->seq[n] = sqlite3_column_int64(scan, 0);
        if (papers) {
            int year = sqlite3_column_int(scan, 1);
            t->year[n] = (uint16_t)(year > 0 && year < 65536 ? year : 0);
            t->oa[n] = sqlite3_column_int(scan, 2) != 0;
        }
        if ((rc = tokenize_column(ix, scan, papers ? 3 : 1, b)) ||
            (rc = tokenize_column(ix, scan, papers ? 4 : 2, b)))
            goto out;
        if (bm25_builder_end_row(b)) {
            rc = SQLITE_NOMEM;
            goto out;
        }
        n++;
    }
    if (step != SQLITE_DONE) {
        rc = step;
        goto out;
    }
    rc = bm25_builder_finish(b, &t->bm25) ? SQLITE_NOMEM : SQLITE_OK;
    b = NULL;
out:
    sqlite3_reset(scan);
    bm25_builder_free(b);
    if (rc) {
        table_index_release(t);
    } else {
        t->generation = gen;
        t->built_ns = now_ns();
        t->build_ns = t->built_ns - started;
    }
    return rc;
}

/* ---- searching ---------------------------------------------------------------------- */

struct query_tokens {
    char buf[STORE_QUERY_WORDS][QUERY_TOKEN_MAX];
    struct bm25_query q;
    int tokens;          /* of the word being tokenized */
    int bad;             /* a token too long */
};

static int on_query_token(void *ctx, int tflags, const char *token, int n, int start, int end)
{
    struct query_tokens *qt = ctx;
    size_t w = qt->q.n;

    (void)start;
    (void)end;
    if (tflags & FTS5_TOKEN_COLOCATED)
        return SQLITE_OK;
    if (qt->tokens++ == 0) {
        if (n <= 0 || (size_t)n > QUERY_TOKEN_MAX)
            qt->bad = 1;
        else
            memcpy(qt->buf[w], token, (size_t)n);
        qt->q.lens[w] = n > 0 ? (size_t)n : 0;
    }
    return SQLITE_OK;
}

/* The query words of `text` (store_query_words) as FTS5 tokens. Returns
 * 0 when every word is exactly one token (*qt ready), 1 when some word
 * is not (FTS5 would make it a phrase of several tokens or of none). */
static int query_tokens(struct sqlite_index *ix, const char *text, enum store_match match,
                        struct query_tokens *qt)
{
    char words_buf[STORE_QUERY_WORDS * 65 + 1];
    const char *words[STORE_QUERY_WORDS];
    size_t n = store_query_words(text, words_buf, sizeof(words_buf), words, STORE_QUERY_WORDS);
    int flags = FTS5_TOKENIZE_QUERY | (match == STORE_MATCH_ALL ? FTS5_TOKENIZE_PREFIX : 0);

    qt->q.n = 0;
    qt->q.match = match == STORE_MATCH_ALL ? BM25_ALL : BM25_ANY;
    for (size_t i = 0; i < n; i++) {
        qt->tokens = 0;
        qt->bad = 0;
        if (ix->tokenizer.xTokenize(ix->tok, qt, flags, words[i], (int)strlen(words[i]),
                                    on_query_token) != SQLITE_OK ||
            qt->tokens != 1 || qt->bad)
            return 1;
        qt->q.words[i] = qt->buf[i];
        qt->q.n++;
    }
    return 0;
}

struct paper_filter {
    const struct table_index *t;
    const struct paper_query *query;
};

/* The filters of ST_PAPER_SEARCH: a year range (dropping unknown years)
 * and open access. */
static int paper_passes(void *ctx, uint32_t row)
{
    const struct paper_filter *f = ctx;
    int year = f->t->year[row];

    if ((f->query->year_from || f->query->year_to) && !year)
        return 0;
    if (f->query->year_from && year < f->query->year_from)
        return 0;
    if (f->query->year_to && year > f->query->year_to)
        return 0;
    return !f->query->open_access_only || f->t->oa[row];
}

static int stmt_run(struct sqlite_store *st, sqlite3_stmt *stmt, const char *op,
                    struct keel_error *err)
{
    int rc = sqlite3_step(stmt);

    sqlite3_reset(stmt);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? KEEL_OK : sqlite_fail(st, rc, op, err);
}

/* Whether `t` was built at `generation`. */
static int current(const struct table_index *t, int64_t generation)
{
    return t->bm25 && t->generation == generation;
}

/* Whether a search at `generation` rebuilds `t` (under its lock for
 * writing): not when another search just did, nor when another store
 * built it at a later generation than this snapshot sees, nor while the
 * table keeps changing (FTS5 answers between rebuilds). */
static int rebuild_due(const struct table_index *t, int64_t generation)
{
    if (t->bm25 && t->generation >= generation)
        return 0;
    return !t->built_ns || now_ns() - t->built_ns >= 10 * t->build_ns;
}

/* Opens the read transaction of a search and makes the index of the
 * papers (or the chunks) current: *ready says whether it may answer, and
 * then the store holds the index data's lock for reading until
 * search_end(). A stale index is rebuilt under the lock for writing, from
 * this connection's snapshot; one built by another store at a later
 * generation than this snapshot sees is left to it (FTS5 answers). The
 * caller ends the transaction with search_end() whatever this returns. */
static int search_begin(struct sqlite_store *st, int papers, int *ready, struct keel_error *err)
{
    struct sqlite_index *ix = st->index;
    struct index_data *d = ix->data;
    struct table_index *t = papers ? &d->papers : &d->chunks;
    sqlite3_stmt *gen = ix->stmt[IX_GENERATION];
    int64_t generation;
    int rc = KEEL_OK, step;

    *ready = 0;
    /* In a read snapshot (store_read_begin) the generation and the rows
     * are read in one transaction already, unless an error (out of
     * memory in a step) rolled it back. Inside a write transaction,
     * whose rows may not be committed, leave it to FTS5 — but for a
     * batch's (below). */
    if (!sqlite_in_snapshot(st) && !st->batch_turns) {
        if (!sqlite3_get_autocommit(st->db))
            return KEEL_OK;
        if ((rc = stmt_run(st, ix->stmt[IX_BEGIN], "search", err)))
            return rc;
        ix->began = 1;
    }
    /* A batch's transaction (store_batch_begin) holds only turns: a write
     * of rows ends it first (sqlite_tx_begin), so its generation and
     * rows are committed ones, as in a snapshot. */
    sqlite3_bind_text(gen, 1, papers ? "papers" : "chunks", -1, SQLITE_STATIC);
    step = sqlite3_step(gen);
    generation = sqlite3_column_int64(gen, 0);
    sqlite3_reset(gen);
    if (step != SQLITE_ROW)
        return sqlite_fail(st, step == SQLITE_DONE ? SQLITE_CORRUPT : step, "search", err);
    pthread_rwlock_rdlock(&d->lock);
    if (current(t, generation))
        goto ready;
    pthread_rwlock_unlock(&d->lock);
    pthread_rwlock_wrlock(&d->lock);
    if (rebuild_due(t, generation) && (rc = build(ix, t, papers, generation)) &&
        (rc & 0xff) != SQLITE_NOMEM)
        rc = sqlite_fail(st, rc, "building the search index", err);
    else
        rc = KEEL_OK;   /* out of memory: the FTS5 statement may still manage */
    pthread_rwlock_unlock(&d->lock);
    if (rc)
        return rc;
    pthread_rwlock_rdlock(&d->lock);
    if (!current(t, generation)) {
        pthread_rwlock_unlock(&d->lock);
        return KEEL_OK;
    }
ready:
    if (!ix->scratch && bm25_scratch_new(bm25_index_rows(t->bm25), &ix->scratch)) {
        pthread_rwlock_unlock(&d->lock);
        return KEEL_OK;   /* out of memory: FTS5 answers */
    }
    ix->locked = 1;
    *ready = 1;
    return KEEL_OK;
}

static void search_end(struct sqlite_store *st)
{
    struct sqlite_index *ix = st->index;

    if (ix->locked) {
        ix->locked = 0;
        pthread_rwlock_unlock(&ix->data->lock);
    }
    /* only the transaction search_begin opened: a caller's stays open */
    if (ix->began) {
        ix->began = 0;
        if (!sqlite3_get_autocommit(st->db))
            stmt_run(st, ix->stmt[IX_COMMIT], "search", NULL);
    }
}

/* Ranks with the index: the hits into ix->hits[0..*n). */
static int rank(struct sqlite_index *ix, const struct table_index *t, const char *text,
                enum store_match match, int limit, bm25_keep_fn keep, void *ctx, size_t *n,
                int *served)
{
    struct query_tokens *qt = keel_malloc(sizeof(*qt));
    int rc;

    *n = 0;
    *served = 0;
    if (!qt)
        return KEEL_OK;   /* FTS5 answers */
    if (query_tokens(ix, text, match, qt)) {
        keel_free(qt);
        return KEEL_OK;
    }
    rc = bm25_search(t->bm25, &qt->q, keep, ctx, (size_t)(limit < 0 ? 0 : limit), ix->scratch,
                     ix->hits, n);
    keel_free(qt);
    *served = rc == KEEL_OK;
    return KEEL_OK;
}

/* Reads the row of hit `i` with `stmt` (IX_PAPER_ROW / IX_CHUNK_ROW):
 * SQLITE_ROW when it is there. */
static int hit_row(struct sqlite_index *ix, sqlite3_stmt *stmt, const struct table_index *t,
                   size_t i)
{
    sqlite3_bind_int64(stmt, 1, t->seq[ix->hits[i].row]);
    return sqlite3_step(stmt);
}

int sqlite_index_search_papers(struct sqlite_store *st, const struct paper_query *query,
                               struct paper_hits *out, int *served, struct keel_error *err)
{
    struct sqlite_index *ix = st->index;
    struct paper_filter filter = {NULL, query};
    sqlite3_stmt *stmt;
    size_t n = 0;
    int rc, ready, limit = query->limit > STORE_LIMIT_MAX ? STORE_LIMIT_MAX : query->limit;

    *served = 0;
    out->items = NULL;
    out->n = 0;
    if (!ix || !ix->tok || !ix->data)
        return KEEL_OK;
    filter.t = &ix->data->papers;
    if ((rc = search_begin(st, 1, &ready, err)) || !ready)
        goto out;
    rank(ix, &ix->data->papers, query->text, query->match, limit, paper_passes, &filter, &n, served);
    if (!*served || !n)
        goto out;
    if (!(out->items = keel_calloc(n, sizeof(*out->items)))) {
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
        goto out;
    }
    /* Rows are read one at a time, so a caller's accept callback spares
     * reading the rows after its last wanted one (often most of them). */
    stmt = ix->stmt[IX_PAPER_ROW];
    for (size_t i = 0; i < n && !rc && !paper_query_full(query, out->n); i++) {
        struct paper_hit *hit = &out->items[out->n];
        int step = hit_row(ix, stmt, &ix->data->papers, i);
        if (step == SQLITE_ROW && !(rc = sqlite_paper_from_row(st, stmt, &hit->paper, err))) {
            hit->score = ix->hits[i].score;
            paper_hits_offer(query, out);
        } else if (!rc) {
            rc = sqlite_fail(st, step == SQLITE_DONE ? SQLITE_CORRUPT : step, "search_papers", err);
        }
        sqlite3_reset(stmt);
    }
out:
    if (ix)
        search_end(st);
    if (rc) {
        paper_hits_release(out);
        *served = 0;
    }
    return rc;
}

int sqlite_index_search_chunks(struct sqlite_store *st, const char *text, enum store_match match,
                               int limit, struct chunk_hits *out, int *served,
                               struct keel_error *err)
{
    struct sqlite_index *ix = st->index;
    sqlite3_stmt *stmt;
    size_t n = 0;
    int rc, ready;

    *served = 0;
    out->items = NULL;
    out->n = 0;
    if (!ix || !ix->tok || !ix->data)
        return KEEL_OK;
    if (limit > STORE_LIMIT_MAX)
        limit = STORE_LIMIT_MAX;
    if ((rc = search_begin(st, 0, &ready, err)) || !ready)
        goto out;
    rank(ix, &ix->data->chunks, text, match, limit, NULL, NULL, &n, served);
    if (!*served || !n)
        goto out;
    if (!(out->items = keel_calloc(n, sizeof(*out->items)))) {
        rc = keel_error_set(err, KEEL_ENOMEM, "search_chunks", "out of memory");
        goto out;
    }
    stmt = ix->stmt[IX_CHUNK_ROW];
    for (size_t i = 0; i < n && !rc; i++) {
        int step = hit_row(ix, stmt, &ix->data->chunks, i);
        if (step == SQLITE_ROW) {
            if (sqlite_chunk_from_row(stmt, &out->items[i]))
                rc = keel_error_set(err, KEEL_ENOMEM, "search_chunks", "out of memory");
            else {
                out->items[i].score = ix->hits[i].score;
                out->n++;
            }
        } else {
            rc = sqlite_fail(st, step == SQLITE_DONE ? SQLITE_CORRUPT : step, "search_chunks", err);
        }
        sqlite3_reset(stmt);
    }
out:
    if (ix)
        search_end(st);
    if (rc) {
        chunk_hits_release(out);
        *served = 0;
    }
    return rc;
}
