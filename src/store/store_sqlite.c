/*
 * store_sqlite.c — the SQLite backend of the store port (store.h): one
 * connection per store, WAL journal, numbered migrations, prepared
 * statements only, and FTS5 with BM25 for the paper library and the
 * document chunks.
 *
 * Schema. `papers` and `chunks` each carry an INTEGER PRIMARY KEY `seq`
 * beside their natural key (`papers.id`, `chunks(document_id, ordinal)`,
 * both UNIQUE NOT NULL, so they behave exactly like the primary keys the
 * port describes). The FTS5 tables are *external content* tables over those
 * rows with content_rowid='seq': the text is stored once, in the real
 * table, and the index maps FTS rowid -> seq. The rowid has to be an
 * explicit INTEGER PRIMARY KEY because VACUUM (and a dump and restore) may
 * renumber an implicit rowid, which would silently point every index entry
 * at the wrong row. The index is kept in step by AFTER INSERT / UPDATE /
 * DELETE triggers, which also fire for the ON DELETE CASCADE from
 * `documents` to `chunks`, so no code path can write a row without its
 * index entry. A contentless table would work the same way but could not
 * be rebuilt ('rebuild') from the content, nor return column values.
 *
 * Change detection. A put hashes every field (FNV-1a 64 over
 * length-prefixed values, NULL distinct from "", authors as compact
 * key-sorted JSON) into `content_hash`, "fnv1a64:<16 hex>". The hash is
 * only ever compared for the same id, so 64 bits are plenty; the prefix
 * names the algorithm so a future change shows up as one UPDATED per row,
 * never as a false UNCHANGED.
 *
 * Memory. SQLite is pointed at keel_malloc/keel_free (with an 8-byte size
 * header, which SQLite's xSize needs) before it first initialises, so the
 * failure injection of core/alloc.h reaches SQLite too (SQLITE_NOMEM
 * becomes KEEL_ENOMEM) and the unit tests' leak check covers connections
 * left open. When something initialised SQLite earlier, sqlite3_config()
 * refuses and SQLite keeps its own allocator; nothing else changes.
 *
 * A connection is used by one thread at a time (NOMUTEX): a store shared
 * by threads (store_share_threads, the server's workers) serializes its
 * calls under the store's lock in store.c. Other stores of the file (the
 * server's loop thread, other processes) read while one writes, through
 * WAL and a 5 s busy timeout.
 */
#include "store/store.h"

#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/json.h"
#include "store/store_sqlite_int.h"

/* ---- SQLite on keel's allocator ------------------------------------------ */

static void *mem_malloc(int n)
{
    uint64_t *block = keel_malloc((size_t)(n > 0 ? n : 0) + sizeof(uint64_t));

    if (!block)
        return NULL;
    block[0] = (uint64_t)(n > 0 ? n : 0);
    return block + 1;
}

static void mem_free(void *p)
{
    if (p)
        keel_free((uint64_t *)p - 1);
}

static void *mem_realloc(void *p, int n)
{
    uint64_t *block;

    if (!p)
        return mem_malloc(n);
    block = keel_realloc((uint64_t *)p - 1, (size_t)(n > 0 ? n : 0) + sizeof(uint64_t));
    if (!block)
        return NULL;
    block[0] = (uint64_t)(n > 0 ? n : 0);
    return block + 1;
}

static int mem_size(void *p)
{
    return p ? (int)((uint64_t *)p)[-1] : 0;
}

static int mem_roundup(int n)
{
    return (n + 7) & ~7;
}

static int mem_init(void *unused)
{
    (void)unused;
    return SQLITE_OK;
}

static void mem_shutdown(void *unused)
{
    (void)unused;
}

static pthread_once_t mem_once = PTHREAD_ONCE_INIT;

static void mem_install(void)
{
    static const sqlite3_mem_methods methods = {
        mem_malloc, mem_free, mem_realloc, mem_size, mem_roundup, mem_init, mem_shutdown, NULL,
    };

    /* SQLITE_MISUSE when SQLite is already initialised: it then keeps its
     * own allocator, which is correct, only not counted. */
    (void)sqlite3_config(SQLITE_CONFIG_MALLOC, &methods);
    /* Without its memory statistics (keel reads none) SQLite allocates
     * without taking its one process-wide allocation mutex, which every
     * connection's every allocation otherwise queues on. */
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* ---- errors, statements, transactions ------------------------------------ */

/* Fills `err` from the connection's last error: KEEL_ENOMEM for
 * SQLITE_NOMEM, else KEEL_EIO. Call before anything resets the error. */
int sqlite_fail(struct sqlite_store *st, int sqlite_rc, const char *op, struct keel_error *err)
{
    int code = (sqlite_rc & 0xff) == SQLITE_NOMEM || sqlite_rc == SQLITE_IOERR_NOMEM
                   ? KEEL_ENOMEM
                   : KEEL_EIO;

    st->reset = 1;
    return keel_error_set(err, code, st->path, "%s failed: %s", op, sqlite3_errmsg(st->db));
}

/* Makes a used statement ready for its next use and drops the bindings,
 * which point at the caller's strings (SQLITE_STATIC). */
void sqlite_stmt_done(sqlite3_stmt *stmt)
{
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
}

/* See store_sqlite_int.h. A failed add is jansson out of memory, not the
 * connection's: it is reported on `field` and leaves the connection be. */
int sqlite_rows_json(struct sqlite_store *st, sqlite3_stmt *stmt, json_t *container,
                     int (*add)(sqlite3_stmt *stmt, json_t *container), const char *field,
                     const char *op, json_t **out, struct keel_error *err)
{
    int rc, step = SQLITE_DONE, added = 0;

    if (container)
        while ((step = sqlite3_step(stmt)) == SQLITE_ROW)
            if ((added = add(stmt, container)) != 0)
                break;
    sqlite_stmt_done(stmt);
    rc = !container || added ? keel_error_set(err, KEEL_ENOMEM, field, "out of memory")
         : step == SQLITE_DONE ? KEEL_OK
                               : sqlite_fail(st, step, op, err);
    if (rc)
        json_decref(container);
    else
        *out = container;
    return rc;
}

/* Steps a statement that returns no rows, then makes it ready again. */
int sqlite_stmt_exec(struct sqlite_store *st, enum stmt_id id, const char *op,
                     struct keel_error *err)
{
    int rc = sqlite3_step(st->stmt[id]);
    int result = rc == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, rc, op, err);

    sqlite_stmt_done(st->stmt[id]);
    return result;
}

/* Steps a statement that returns at most one text column in one row:
 * *found says whether there was a row; its text is copied into `out`. */
static int stmt_lookup_text(struct sqlite_store *st, enum stmt_id id, char *out, size_t n,
                            int *found, const char *op, struct keel_error *err)
{
    sqlite3_stmt *stmt = st->stmt[id];
    int rc = sqlite3_step(stmt);
    int result = KEEL_OK;

    *found = 0;
    out[0] = '\0';
    if (rc == SQLITE_ROW) {
        const unsigned char *text = sqlite3_column_text(stmt, 0);
        if (text) {
            *found = 1;
            snprintf(out, n, "%s", (const char *)text);
        } else {   /* the column is NOT NULL: out of memory */
            result = sqlite_fail(st, SQLITE_NOMEM, op, err);
        }
    } else if (rc != SQLITE_DONE) {
        result = sqlite_fail(st, rc, op, err);
    }
    sqlite_stmt_done(stmt);
    return result;
}

/* Rolls back the connection's open transaction, if any (errors are the
 * connection's next statement's to report). */
static void rollback_open(struct sqlite_store *st)
{
    if (st->db && !sqlite3_get_autocommit(st->db)) {
        sqlite3_step(st->stmt[ST_ROLLBACK]);
        sqlite3_reset(st->stmt[ST_ROLLBACK]);
    }
}

/* Rolls back the open transaction, if any (SQLite may already have rolled
 * it back after an error such as SQLITE_NOMEM or SQLITE_FULL), and gives
 * back the write mutex. */
void sqlite_tx_rollback(struct sqlite_store *st)
{
    rollback_open(st);
    st->reading = 0;   /* a read snapshot open here ended with it */
    sqlite_write_unlock(st);
}

/* A read snapshot is a deferred BEGIN: SQLite takes its read lock (a WAL
 * read mark) at the first read and keeps it to the COMMIT, so the reads
 * between share one transaction. */
static int sqlite_read_begin(struct store *store, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc;

    if (sqlite_in_snapshot(st))
        return KEEL_OK;
    st->reading = 0;
    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    if (!sqlite3_get_autocommit(st->db))
        return KEEL_OK;   /* a transaction is open: its reads are one already */
    st->read_backfills = sqlite_wal_backfill_count();
    if ((rc = sqlite_stmt_exec(st, ST_BEGIN_READ, "beginning a read", err)))
        return rc;
    st->reading = 1;
    return KEEL_OK;
}

/* Ends the snapshot at once, even on a connection that failed meanwhile
 * (which the next operation replaces): an idle connection must not keep
 * its read mark, which would hold the WAL. */
static void sqlite_read_end(struct store *store)
{
    struct sqlite_store *st = (struct sqlite_store *)store;

    if (!st->reading)
        return;
    st->reading = 0;
    if (st->db && !sqlite3_get_autocommit(st->db)) {
        int rc = sqlite3_step(st->stmt[ST_COMMIT]);
        sqlite3_reset(st->stmt[ST_COMMIT]);
        if (rc != SQLITE_DONE)
            rollback_open(st);
    }
}

/* Makes the open read snapshot's transaction the write transaction: a
 * statement that writes nothing takes SQLite's write lock. That works only
 * while the snapshot is the newest state of the file; when another
 * connection has committed since (SQLITE_BUSY_SNAPSHOT) or holds the lock
 * (SQLITE_BUSY: an upgrade does not wait), or on any other failure, the
 * snapshot is rolled back and 0 returned. It saves ending the snapshot
 * and beginning again: a COMMIT, a BEGIN and two fcntl()s a turn. The
 * caller holds the file's write mutex. */
static int snapshot_to_write(struct sqlite_store *st)
{
    int rc = sqlite3_step(st->stmt[ST_TAKE_WRITE]);

    sqlite3_reset(st->stmt[ST_TAKE_WRITE]);
    st->reading = 0;   /* from now on the transaction is a write one, or none */
    if (rc == SQLITE_DONE)
        return 1;
    rollback_open(st);
    return 0;
}

/* BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy
 * timeout), so a put never fails half-way for want of the lock. Writers
 * of this process queue on the file's mutex first. A read snapshot
 * becomes the write transaction when no commit came after it (its reads
 * are then as current as BEGIN IMMEDIATE's would be); else it ends first.
 * It never waits for the mutex: the checkpoint thread's RESTART pass holds
 * the mutex while it waits for readers of older snapshots, so a snapshot
 * kept while waiting would hold both up until the checkpoint gave up. Nor
 * is a snapshot older than the last full checkpoint taken over: only a
 * write that begins after it starts the WAL over. */
int sqlite_tx_begin(struct sqlite_store *st, const char *op, struct keel_error *err)
{
    int rc;

    sqlite_batch_before_write(st);
    if (sqlite_in_snapshot(st) && st->read_backfills == sqlite_wal_backfill_count() &&
        sqlite_write_trylock(st) && snapshot_to_write(st))
        return KEEL_OK;
    sqlite_read_end(&st->base);
    sqlite_write_lock(st);
    if ((rc = sqlite_stmt_exec(st, ST_BEGIN, op, err)))
        sqlite_write_unlock(st);
    return rc;
}

/* A COMMIT that fails with the transaction still open rolls it back, so
 * the write mutex is always given back here (a caller's ROLLBACK after a
 * failed COMMIT is then a no-op). */
int sqlite_tx_commit(struct sqlite_store *st, const char *op, struct keel_error *err)
{
    int rc = sqlite_stmt_exec(st, ST_COMMIT, op, err);

    if (rc)
        sqlite_tx_rollback(st);
    sqlite_write_unlock(st);
    return rc;
}

/* ---- connections --------------------------------------------------------- */

/* Runs a one-off statement (migration bookkeeping) with up to two int/text
 * parameters; *value receives column 0 of the first row when non-NULL. */
static int run_once(struct sqlite_store *st, const char *sql, int param, const char *text,
                    int *value, const char *op, struct keel_error *err)
{
    sqlite3_stmt *stmt = NULL;
    int sqlite_rc = sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL);
    int rc = KEEL_OK;

    if (sqlite_rc == SQLITE_OK && sqlite3_bind_parameter_count(stmt) >= 1)
        sqlite_rc = sqlite3_bind_int(stmt, 1, param);
    if (sqlite_rc == SQLITE_OK && sqlite3_bind_parameter_count(stmt) >= 2)
        sqlite_rc = sqlite3_bind_text(stmt, 2, text, -1, SQLITE_STATIC);
    if (sqlite_rc == SQLITE_OK) {
        sqlite_rc = sqlite3_step(stmt);
        if (sqlite_rc == SQLITE_ROW && value)
            *value = sqlite3_column_int(stmt, 0);
        if (sqlite_rc == SQLITE_ROW || sqlite_rc == SQLITE_DONE)
            sqlite_rc = SQLITE_OK;
    }
    if (sqlite_rc != SQLITE_OK)
        rc = sqlite_fail(st, sqlite_rc, op, err);
    sqlite3_finalize(stmt);
    return rc;
}

static int exec_static(struct sqlite_store *st, const char *sql, const char *op,
                       struct keel_error *err)
{
    int sqlite_rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

    return sqlite_rc == SQLITE_OK ? KEEL_OK : sqlite_fail(st, sqlite_rc, op, err);
}

/* Applies migration `m` in its own transaction unless a concurrent opener
 * applied it first. */
static int apply_migration(struct sqlite_store *st, const struct migration *m,
                           struct keel_error *err)
{
    char op[48], now[KEEL_RFC3339_MAX];
    int rc, applied = 0;

    snprintf(op, sizeof(op), "migration %d", m->version);
    if ((rc = exec_static(st, "BEGIN IMMEDIATE", op, err)))
        goto out;
    if ((rc = run_once(st, "SELECT count(*) FROM schema_migrations WHERE version = ?1",
                       m->version, NULL, &applied, op, err)))
        goto out;
    if (!applied) {
        keel_time_format(keel_clock_now(), now, sizeof(now));
        if ((rc = exec_static(st, m->sql, op, err)) ||
            (rc = run_once(st, "INSERT INTO schema_migrations (version, applied_at)"
                               " VALUES (?1, ?2)",
                           m->version, now, NULL, op, err)))
            goto out;
    }
    rc = exec_static(st, "COMMIT", op, err);
out:
    if (rc && !sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int migrate(struct sqlite_store *st, struct keel_error *err)
{
    int rc, current = 0;
    const int latest = sqlite_migrations[sqlite_n_migrations - 1].version;

    if ((rc = exec_static(st,
                          "CREATE TABLE IF NOT EXISTS schema_migrations ("
                          " version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
                          "creating schema_migrations", err)) ||
        (rc = run_once(st, "SELECT coalesce(max(version), 0) FROM schema_migrations", 0, NULL,
                       &current, "reading schema_migrations", err)))
        return rc;
    if (current > latest)
        return keel_error_set(err, KEEL_EIO, st->path,
                              "schema version %d is newer than this keel knows (%d)", current,
                              latest);
    for (size_t i = 0; i < sqlite_n_migrations; i++)
        if (sqlite_migrations[i].version > current && (rc = apply_migration(st, &sqlite_migrations[i], err)))
            return rc;
    return KEEL_OK;
}

static int prepare_all(struct sqlite_store *st, struct keel_error *err)
{
    for (int i = 0; i < ST_COUNT; i++) {
        int sqlite_rc = sqlite3_prepare_v3(st->db, sqlite_stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                           &st->stmt[i], NULL);
        if (sqlite_rc != SQLITE_OK)
            return sqlite_fail(st, sqlite_rc, "preparing statements", err);
    }
    return KEEL_OK;
}

/* Opens the connection and sets it up; the first statement is the first
 * read of the file, so a file that is not a database fails here. */
static int connect(struct sqlite_store *st, struct keel_error *err)
{
    int sqlite_rc = sqlite3_open_v2(st->path, &st->db,
                                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                        SQLITE_OPEN_NOMUTEX,
                                    sqlite_vfs_name());

    if (!st->db)
        return keel_error_set(err, KEEL_ENOMEM, st->path, "out of memory opening the store");
    if (sqlite_rc != SQLITE_OK)
        return sqlite_fail(st, sqlite_rc, "opening the store", err);
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, 5000);
    /* Switching a new file to WAL takes a lock the busy timeout does not
     * always wait for when several processes open it at once: retry for
     * up to the same 5 s. A file already in WAL mode needs no switch. */
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(st->db, "PRAGMA journal_mode = WAL;", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            break;
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            return sqlite_fail(st, rc, "opening the store", err);
        if (attempt == 500)
            return sqlite_fail(st, rc, "opening the store (another process holds it)", err);
        usleep(10000);
    }
    /* SQLite's default 2 MB page cache: since a turn is one row
     * (migration 13) and searches rank in memory, a 6 MB one made no turn
     * faster (3,101 against 3,105 turns/s in the pipeline bench) and cost
     * 4 MB per connection; and a connection's cache is dropped whenever
     * another connection of the file commits (WAL), as the server's
     * workers do all the time.
     * Temporary files in memory: above all the statement journal of a
     * batch's savepoints (store_batch_begin), which keeps the pages a
     * turn changes as they were before it (~60 KB a turn) and was
     * written to a temporary file once past 64 KiB, a pwrite per page. */
    return exec_static(st,
                       sqlite_sync_full()
                           ? "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;"
                             " PRAGMA temp_store = MEMORY;"
                           : "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;"
                             " PRAGMA temp_store = MEMORY;",
                       "opening the store", err);
}

/* Finalizes the statements and closes the connection; the store keeps its
 * path and may connect again. */
static void connection_close(struct sqlite_store *st)
{
    sqlite_index_detach(st);   /* its statements and tokenizer are the connection's */
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(st->stmt[i]);
        st->stmt[i] = NULL;
    }
    sqlite3_close_v2(st->db);   /* NULL is a no-op; an open transaction rolls back */
    st->db = NULL;
    st->reading = 0;
}

/* Connects, migrates and prepares; on failure nothing stays open. */
static int connection_open(struct sqlite_store *st, struct keel_error *err)
{
    int rc;

    if ((rc = connect(st, err)) || (rc = migrate(st, err)) || (rc = prepare_all(st, err)))
        connection_close(st);
    else {
        sqlite_checkpointer_attach(st);
        sqlite_index_attach(st);
    }
    return rc;
}

/* Called first by every operation. A connection that reported an error is
 * replaced before it is used again: after a failed write (seen with an
 * allocation failure inside FTS5's 'delete' in SQLite 3.40) FTS5 can keep
 * stale per-connection caches, and the next MATCH on that connection
 * reports "database disk image is malformed" although the file is sound
 * and every other connection reads it fine. Errors are rare, reconnecting
 * is cheap, and a new connection holds no state from the failure. When
 * reconnecting fails the store stays usable: the next operation tries
 * again. */
int sqlite_connection_ready(struct sqlite_store *st, struct keel_error *err)
{
    int rc;

    if (st->db && !st->reset)
        return KEEL_OK;
    sqlite_batch_lose(st, "the connection failed before the turns were committed");
    connection_close(st);
    if ((rc = connection_open(st, err)))
        return rc;
    st->reset = 0;
    return KEEL_OK;
}

int sqlite_write_ready(struct sqlite_store *st, struct keel_error *err)
{
    sqlite_batch_before_write(st);
    sqlite_read_end(&st->base);
    return sqlite_connection_ready(st, err);
}

/* ---- content hashes ------------------------------------------------------ */

#define HASH_TEXT_MAX 32   /* "fnv1a64:" + 16 hex + NUL */

static void hash_bytes(uint64_t *h, const void *data, size_t n)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < n; i++)
        *h = (*h ^ p[i]) * 1099511628211ull;
}

/* Length-prefixed, so ("ab", "c") and ("a", "bc") differ; NULL differs
 * from "". */
static void hash_text(uint64_t *h, const char *text)
{
    unsigned char tag = text ? 1 : 0;
    uint64_t len = text ? strlen(text) : 0;

    hash_bytes(h, &tag, 1);
    if (text) {
        hash_bytes(h, &len, sizeof(len));
        hash_bytes(h, text, len);
    }
}

static void hash_int(uint64_t *h, long long value)
{
    int64_t v = value;

    hash_bytes(h, &v, sizeof(v));
}

static void hash_format(uint64_t h, char *out)
{
    snprintf(out, HASH_TEXT_MAX, "fnv1a64:%016llx", (unsigned long long)h);
}

/* `authors_json` is the compact serialisation stored in the row (or NULL). */
static void paper_hash(const struct store_paper *paper, const char *authors_json, char *out)
{
    uint64_t h = 1469598103934665603ull;

    hash_text(&h, paper->title);
    hash_text(&h, paper->abstract);
    hash_int(&h, paper->year);
    hash_text(&h, paper->venue);
    hash_text(&h, authors_json);
    hash_text(&h, paper->doi);
    hash_text(&h, paper->url);
    hash_text(&h, paper->pdf_url);
    hash_int(&h, paper->is_open_access ? 1 : 0);
    hash_text(&h, paper->source);
    hash_format(h, out);
}

static void document_hash(const struct store_document *doc, const struct store_chunk *chunks,
                          size_t n_chunks, char *out)
{
    uint64_t h = 1469598103934665603ull;

    hash_text(&h, doc->title);
    hash_text(&h, doc->source);
    hash_text(&h, doc->lang);
    hash_int(&h, (long long)n_chunks);
    for (size_t i = 0; i < n_chunks; i++) {
        hash_text(&h, chunks[i].section);
        hash_text(&h, chunks[i].text);
    }
    hash_format(h, out);
}

/* ---- match expressions --------------------------------------------------- */

#define MATCH_MAX 8192   /* 32 words of at most 64 bytes, every byte a quote */

/* Builds the FTS5 expression `"w1" OR "w2" …` from the words of `text`
 * (store_query_words, so both backends match the same words). Each word is
 * an FTS5 string with `"` doubled, so no word can be read as an operator
 * or a column filter. *n_words 0 means there is nothing to match. */
static int match_expression(const char *text, enum store_match match, struct keel_buf *out,
                            size_t *n_words)
{
    char words_buf[STORE_QUERY_WORDS * 65 + 1];
    const char *words[STORE_QUERY_WORDS];
    int rc = KEEL_OK;

    *n_words = store_query_words(text, words_buf, sizeof(words_buf), words, STORE_QUERY_WORDS);
    for (size_t i = 0; i < *n_words && !rc; i++) {
        if (i)
            rc = keel_buf_adds(out, match == STORE_MATCH_ALL ? " AND " : " OR ");
        if (!rc)
            rc = keel_buf_addc(out, '"');
        for (const char *p = words[i]; *p && !rc; p++)
            rc = *p == '"' ? keel_buf_adds(out, "\"\"") : keel_buf_addc(out, *p);
        if (!rc)
            rc = keel_buf_addc(out, '"');
        if (!rc && match == STORE_MATCH_ALL)
            rc = keel_buf_addc(out, '*');   /* a prefix: "limit" finds "limits" */
    }
    return rc;
}

/* ---- papers -------------------------------------------------------------- */

/* Binds ?1..?12 of ST_PAPER_INSERT / ST_PAPER_UPDATE. Returns a SQLite code. */
static int bind_paper(sqlite3_stmt *stmt, const char *id, const struct store_paper *paper,
                      const char *authors_json, const char *hash)
{
    int rc = sqlite3_bind_text(stmt, 1, id, -1, SQLITE_STATIC);

    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 2, paper->title, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 3, paper->abstract, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(stmt, 4, paper->year);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 5, paper->venue, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 6, authors_json, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 7, paper->doi, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 8, paper->url, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 9, paper->pdf_url, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(stmt, 10, paper->is_open_access ? 1 : 0);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 11, paper->source, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 12, hash, -1, SQLITE_STATIC);
    return rc;
}

/* Serialises `authors` (may be NULL) compactly with sorted keys into `out`. */
static int authors_serialise(const json_t *authors, struct keel_buf *out, struct keel_error *err)
{
    if (!authors)
        return KEEL_OK;
    if (keel_json_append(out, authors, JSON_COMPACT))
        return keel_error_set(err, KEEL_ENOMEM, "authors", "out of memory");
    if (out->len > STORE_TEXT_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, "authors", "is longer than %u bytes",
                              STORE_TEXT_MAX);
    return KEEL_OK;
}

static int sqlite_put_paper(struct store *store, const struct store_paper *paper,
                            enum store_outcome *outcome, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    char derived[256], hash[HASH_TEXT_MAX], stored[HASH_TEXT_MAX];
    const char *id = paper->id;
    struct keel_buf authors;
    enum store_outcome result = STORE_ADDED;
    enum stmt_id write;
    int rc, sqlite_rc, found;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    keel_buf_init(&authors, 0);
    if (!id || !*id) {
        store_paper_id(paper, derived, sizeof(derived));
        id = derived;
    }
    if ((rc = authors_serialise(paper->authors, &authors, err)))
        goto out;
    paper_hash(paper, paper->authors ? authors.data : NULL, hash);
    if ((rc = sqlite_tx_begin(st, "put_paper", err)))
        goto out;
    sqlite_rc = sqlite3_bind_text(st->stmt[ST_PAPER_HASH], 1, id, -1, SQLITE_STATIC);
    if (sqlite_rc != SQLITE_OK) {
        rc = sqlite_fail(st, sqlite_rc, "put_paper", err);
        sqlite_stmt_done(st->stmt[ST_PAPER_HASH]);
        goto out;
    }
    if ((rc = stmt_lookup_text(st, ST_PAPER_HASH, stored, sizeof(stored), &found, "put_paper",
                               err)))
        goto out;
    if (found && !strcmp(stored, hash)) {
        result = STORE_UNCHANGED;
    } else {
        result = found ? STORE_UPDATED : STORE_ADDED;
        write = found ? ST_PAPER_UPDATE : ST_PAPER_INSERT;
        sqlite_rc = bind_paper(st->stmt[write], id, paper, paper->authors ? authors.data : NULL,
                               hash);
        if (sqlite_rc != SQLITE_OK) {
            rc = sqlite_fail(st, sqlite_rc, "put_paper", err);
            sqlite_stmt_done(st->stmt[write]);
            goto out;
        }
        if ((rc = sqlite_stmt_exec(st, write, "put_paper", err)))
            goto out;
    }
    if ((rc = sqlite_tx_commit(st, "put_paper", err)))
        goto out;
    if (outcome)
        *outcome = result;
out:
    if (rc)
        sqlite_tx_rollback(st);
    keel_buf_release(&authors);
    return rc;
}

/* Copies text column `col` into *out (NULL for SQL NULL). */
int sqlite_column_dup(sqlite3_stmt *stmt, int col, char **out)
{
    const unsigned char *text;

    *out = NULL;
    if (sqlite3_column_type(stmt, col) == SQLITE_NULL)
        return KEEL_OK;
    text = sqlite3_column_text(stmt, col);
    if (!text)
        return KEEL_ENOMEM;   /* the only way a non-NULL value has no text */
    *out = keel_strndup((const char *)text, (size_t)sqlite3_column_bytes(stmt, col));
    return *out ? KEEL_OK : KEEL_ENOMEM;
}

/* Fills `paper` from the current row of ST_PAPER_SEARCH. On failure
 * `paper` is released and err says why. */
int sqlite_paper_from_row(struct sqlite_store *st, sqlite3_stmt *stmt, struct store_paper *paper,
                          struct keel_error *err)
{
    char *authors = NULL;
    json_error_t jerr;
    int rc;

    memset(paper, 0, sizeof(*paper));
    paper->year = sqlite3_column_int(stmt, 3);
    paper->is_open_access = sqlite3_column_int(stmt, 9) != 0;
    if (sqlite_column_dup(stmt, 0, &paper->id) || sqlite_column_dup(stmt, 1, &paper->title) ||
        sqlite_column_dup(stmt, 2, &paper->abstract) || sqlite_column_dup(stmt, 4, &paper->venue) ||
        sqlite_column_dup(stmt, 5, &authors) || sqlite_column_dup(stmt, 6, &paper->doi) ||
        sqlite_column_dup(stmt, 7, &paper->url) || sqlite_column_dup(stmt, 8, &paper->pdf_url) ||
        sqlite_column_dup(stmt, 10, &paper->source)) {
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
        goto out;
    }
    if (authors) {
        memset(&jerr, 0, sizeof(jerr));
        paper->authors = json_loads(authors, 0, &jerr);
        if (!paper->authors) {
            rc = json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0]
                     ? keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory")
                     : keel_error_set(err, KEEL_EIO, st->path,
                                      "stored authors of paper \"%.80s\" are not JSON: %s",
                                      paper->id, jerr.text);
            goto out;
        }
    }
    rc = KEEL_OK;
out:
    if (rc)
        store_paper_release(paper);
    keel_free(authors);
    return rc;
}

/* Returns `items` with room for item `n` (the array grows by doubling, to
 * at most `limit` items, and `*cap` follows), or NULL when allocation
 * fails; `items` is then unchanged and still owned by the caller. */
static void *hits_grow(void *items, size_t n, size_t *cap, size_t item_size, size_t limit)
{
    size_t want;
    void *grown;

    if (n < *cap)
        return items;
    want = *cap ? *cap * 2 : 8;
    if (want > limit)
        want = limit;
    grown = keel_realloc(items, want * item_size);
    if (grown)
        *cap = want;
    return grown;
}

/* The wrappers check 1..STORE_LIMIT_MAX; a direct call through ops stays
 * in bounds too (SQLite reads a negative LIMIT as "no limit"). */
static int clamp_limit(int limit)
{
    return limit < 0 ? 0 : limit > STORE_LIMIT_MAX ? STORE_LIMIT_MAX : limit;
}

/* Binds ?2..?5 of ST_PAPER_SEARCH (?1, the match, is bound by run_search). */
static int bind_paper_filters(sqlite3_stmt *stmt, const void *arg)
{
    const struct paper_query *query = arg;
    int rc = sqlite3_bind_int(stmt, 2, query->year_from);

    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(stmt, 3, query->year_to);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(stmt, 4, query->open_access_only ? 1 : 0);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(stmt, 5, clamp_limit(query->limit));
    return rc;
}

/* A search statement: how to bind its parameters after the match, and
 * how to add one result row to the caller's hit list. */
struct search_run {
    enum stmt_id id;
    const char *op;          /* names the operation in errors */
    int (*bind)(sqlite3_stmt *stmt, const void *arg);
    int (*add_row)(struct sqlite_store *st, sqlite3_stmt *stmt, void *hits, size_t *cap,
                   int limit, struct keel_error *err);
};

/* Runs a full-text search: builds the match from `text` (no words: no
 * hits), binds, steps, and adds each row through run->add_row. On
 * failure the caller releases what `hits` holds. */
static int run_search(struct sqlite_store *st, const struct search_run *run, const char *text,
                      enum store_match match_mode, const void *bind_arg, int limit, void *hits,
                      struct keel_error *err)
{
    struct keel_buf match;
    sqlite3_stmt *stmt;
    size_t n_words, cap = 0;
    int rc, sqlite_rc;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[run->id];
    keel_buf_init(&match, MATCH_MAX);
    if ((rc = match_expression(text, match_mode, &match, &n_words))) {
        rc = keel_error_set(err, rc, "query", "cannot build the search expression");
        goto out;
    }
    if (!n_words)
        goto out;   /* nothing to match: no hits */
    sqlite_rc = sqlite3_bind_text(stmt, 1, match.data, -1, SQLITE_STATIC);
    if (sqlite_rc == SQLITE_OK)
        sqlite_rc = run->bind(stmt, bind_arg);
    if (sqlite_rc != SQLITE_OK) {
        rc = sqlite_fail(st, sqlite_rc, run->op, err);
        goto out;
    }
    while ((sqlite_rc = sqlite3_step(stmt)) == SQLITE_ROW)
        if ((rc = run->add_row(st, stmt, hits, &cap, limit, err)))
            goto out;
    if (sqlite_rc != SQLITE_DONE)
        rc = sqlite_fail(st, sqlite_rc, run->op, err);
out:
    sqlite_stmt_done(stmt);
    keel_buf_release(&match);
    return rc;
}

/* The hit list of a paper search and the query whose accept callback
 * picks its rows. */
struct paper_search {
    const struct paper_query *query;
    struct paper_hits hits;
};

static int add_paper_row(struct sqlite_store *st, sqlite3_stmt *stmt, void *opaque, size_t *cap,
                         int limit, struct keel_error *err)
{
    struct paper_search *search = opaque;
    struct paper_hits *hits = &search->hits;
    struct paper_hit *grown;
    int rc;

    if (paper_query_full(search->query, hits->n))
        return KEEL_OK;   /* the caller has all it wants: the rest are not read */
    grown = hits_grow(hits->items, hits->n, cap, sizeof(*hits->items), (size_t)clamp_limit(limit));
    if (!grown)
        return keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
    hits->items = grown;
    if ((rc = sqlite_paper_from_row(st, stmt, &hits->items[hits->n].paper, err)))
        return rc;
    hits->items[hits->n].score = sqlite3_column_double(stmt, 11);
    paper_hits_offer(search->query, hits);
    return KEEL_OK;
}

static int sqlite_search_papers(struct store *store, const struct paper_query *query,
                                struct paper_hits *out, struct keel_error *err)
{
    static const struct search_run run = {ST_PAPER_SEARCH, "search_papers", bind_paper_filters,
                                          add_paper_row};
    struct paper_search search = {query, {NULL, 0}};
    int served, rc;

    if ((rc = sqlite_connection_ready((struct sqlite_store *)store, err)) ||
        (rc = sqlite_index_search_papers((struct sqlite_store *)store, query, out, &served, err)) ||
        served)
        return rc;
    rc = run_search((struct sqlite_store *)store, &run, query->text, query->match, query,
                    query->limit, &search, err);
    out->items = NULL;
    out->n = 0;
    if (rc) {
        paper_hits_release(&search.hits);
        return rc;
    }
    *out = search.hits;
    return KEEL_OK;
}

/* ---- documents and chunks ------------------------------------------------ */

static int bind_document(sqlite3_stmt *stmt, const struct store_document *doc, const char *hash)
{
    int rc = sqlite3_bind_text(stmt, 1, doc->id, -1, SQLITE_STATIC);

    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 2, doc->title, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 3, doc->source, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 4, doc->lang, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 5, hash, -1, SQLITE_STATIC);
    return rc;
}

/* Writes the document row and replaces its chunks; inside a transaction. */
static int write_document(struct sqlite_store *st, const struct store_document *doc,
                          const struct store_chunk *chunks, size_t n_chunks, int exists,
                          const char *hash, struct keel_error *err)
{
    enum stmt_id write = exists ? ST_DOC_UPDATE : ST_DOC_INSERT;
    sqlite3_stmt *insert = st->stmt[ST_CHUNK_INSERT];
    int rc, sqlite_rc;

    if ((sqlite_rc = bind_document(st->stmt[write], doc, hash)) != SQLITE_OK) {
        rc = sqlite_fail(st, sqlite_rc, "put_document", err);   /* before the reset clears it */
        sqlite_stmt_done(st->stmt[write]);
        return rc;
    }
    if ((rc = sqlite_stmt_exec(st, write, "put_document", err)))
        return rc;
    if (exists) {
        /* The delete trigger takes the old chunks out of the index. */
        sqlite_rc = sqlite3_bind_text(st->stmt[ST_CHUNKS_DELETE], 1, doc->id, -1, SQLITE_STATIC);
        if (sqlite_rc != SQLITE_OK) {
            rc = sqlite_fail(st, sqlite_rc, "put_document", err);
            sqlite_stmt_done(st->stmt[ST_CHUNKS_DELETE]);
            return rc;
        }
        if ((rc = sqlite_stmt_exec(st, ST_CHUNKS_DELETE, "put_document", err)))
            return rc;
    }
    for (size_t i = 0; i < n_chunks; i++) {
        sqlite_rc = sqlite3_bind_text(insert, 1, doc->id, -1, SQLITE_STATIC);
        if (sqlite_rc == SQLITE_OK)
            sqlite_rc = sqlite3_bind_int(insert, 2, (int)i);
        if (sqlite_rc == SQLITE_OK)
            sqlite_rc = sqlite3_bind_text(insert, 3, chunks[i].section, -1, SQLITE_STATIC);
        if (sqlite_rc == SQLITE_OK)
            sqlite_rc = sqlite3_bind_text(insert, 4, chunks[i].text, -1, SQLITE_STATIC);
        if (sqlite_rc != SQLITE_OK) {
            rc = sqlite_fail(st, sqlite_rc, "put_document", err);
            sqlite_stmt_done(insert);
            return rc;
        }
        if ((rc = sqlite_stmt_exec(st, ST_CHUNK_INSERT, "put_document", err)))
            return rc;
    }
    return KEEL_OK;
}

static int sqlite_put_document(struct store *store, const struct store_document *doc,
                               const struct store_chunk *chunks, size_t n_chunks,
                               enum store_outcome *outcome, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    char hash[HASH_TEXT_MAX], stored[HASH_TEXT_MAX];
    enum store_outcome result = STORE_UNCHANGED;
    int rc, sqlite_rc, found;

    if (n_chunks > INT_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, "chunks", "more than %d chunks", INT_MAX);
    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    document_hash(doc, chunks, n_chunks, hash);
    if ((rc = sqlite_tx_begin(st, "put_document", err)))
        goto out;
    sqlite_rc = sqlite3_bind_text(st->stmt[ST_DOC_HASH], 1, doc->id, -1, SQLITE_STATIC);
    if (sqlite_rc != SQLITE_OK) {
        rc = sqlite_fail(st, sqlite_rc, "put_document", err);
        sqlite_stmt_done(st->stmt[ST_DOC_HASH]);
        goto out;
    }
    if ((rc = stmt_lookup_text(st, ST_DOC_HASH, stored, sizeof(stored), &found, "put_document",
                               err)))
        goto out;
    if (!found || strcmp(stored, hash)) {
        result = found ? STORE_UPDATED : STORE_ADDED;
        if ((rc = write_document(st, doc, chunks, n_chunks, found, hash, err)))
            goto out;
    }
    if ((rc = sqlite_tx_commit(st, "put_document", err)))
        goto out;
    if (outcome)
        *outcome = result;
out:
    if (rc)
        sqlite_tx_rollback(st);
    return rc;
}

/* Fills `hit` from the current row of ST_CHUNK_SEARCH; released on failure. */
int sqlite_chunk_from_row(sqlite3_stmt *stmt, struct chunk_hit *hit)
{
    memset(hit, 0, sizeof(*hit));
    hit->ordinal = sqlite3_column_int(stmt, 5);
    hit->score = sqlite3_column_double(stmt, 6);
    if (sqlite_column_dup(stmt, 0, &hit->document_id) || sqlite_column_dup(stmt, 1, &hit->title) ||
        sqlite_column_dup(stmt, 2, &hit->source) || sqlite_column_dup(stmt, 3, &hit->section) ||
        sqlite_column_dup(stmt, 4, &hit->text)) {
        keel_free(hit->document_id);
        keel_free(hit->title);
        keel_free(hit->source);
        keel_free(hit->section);
        keel_free(hit->text);
        memset(hit, 0, sizeof(*hit));
        return KEEL_ENOMEM;
    }
    return KEEL_OK;
}

/* Binds ?2 of ST_CHUNK_SEARCH, the limit. */
static int bind_chunk_limit(sqlite3_stmt *stmt, const void *arg)
{
    return sqlite3_bind_int(stmt, 2, clamp_limit(*(const int *)arg));
}

static int add_chunk_row(struct sqlite_store *st, sqlite3_stmt *stmt, void *opaque, size_t *cap,
                         int limit, struct keel_error *err)
{
    struct chunk_hits *hits = opaque;
    struct chunk_hit *grown = hits_grow(hits->items, hits->n, cap, sizeof(*hits->items),
                                        (size_t)clamp_limit(limit));

    (void)st;
    if (grown)
        hits->items = grown;
    if (!grown || sqlite_chunk_from_row(stmt, &hits->items[hits->n]))
        return keel_error_set(err, KEEL_ENOMEM, "search_chunks", "out of memory");
    hits->n++;
    return KEEL_OK;
}

static int sqlite_search_chunks(struct store *store, const char *text, enum store_match match,
                                int limit, struct chunk_hits *out, struct keel_error *err)
{
    static const struct search_run run = {ST_CHUNK_SEARCH, "search_chunks", bind_chunk_limit,
                                          add_chunk_row};
    struct chunk_hits hits = {NULL, 0};
    int served, rc;

    if ((rc = sqlite_connection_ready((struct sqlite_store *)store, err)) ||
        (rc = sqlite_index_search_chunks((struct sqlite_store *)store, text, match, limit, out,
                                         &served, err)) ||
        served)
        return rc;
    rc = run_search((struct sqlite_store *)store, &run, text, match, &limit, limit, &hits, err);
    out->items = NULL;
    out->n = 0;
    if (rc) {
        chunk_hits_release(&hits);
        return rc;
    }
    *out = hits;
    return KEEL_OK;
}

static int sqlite_counts(struct store *store, struct store_counts *out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc, sqlite_rc;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_COUNTS];
    sqlite_rc = sqlite3_step(stmt);
    if (sqlite_rc == SQLITE_ROW) {
        out->papers = (long)sqlite3_column_int64(stmt, 0);
        out->documents = (long)sqlite3_column_int64(stmt, 1);
        out->chunks = (long)sqlite3_column_int64(stmt, 2);
    } else {
        rc = sqlite_fail(st, sqlite_rc, "counts", err);
    }
    sqlite_stmt_done(stmt);
    return rc;
}

/* ---- opening and closing ------------------------------------------------- */

static void sqlite_close(struct store *store)
{
    struct sqlite_store *st = (struct sqlite_store *)store;

    /* A transaction left open holds the file's write mutex, which the
     * checkpointer may be waiting for (its catch-up): give both back
     * before joining it. */
    sqlite_tx_rollback(st);
    sqlite_checkpointer_stop(st);   /* first: the last connection to close cleans up the WAL */
    connection_close(st);
    sqlite_index_free(st);
    sqlite_memory_cache_free(st);
    keel_free(st->path);
    keel_free(st);
}

static const struct store_ops sqlite_ops = {
    .name = "sqlite",
    .close = sqlite_close,
    .put_paper = sqlite_put_paper,
    .search_papers = sqlite_search_papers,
    .put_document = sqlite_put_document,
    .search_chunks = sqlite_search_chunks,
    .counts = sqlite_counts,
    .load_conversation = sqlite_load_conversation,
    .save_turn = sqlite_save_turn,
    .metrics = sqlite_metrics,
    .list_turns = sqlite_list_turns,
    .get_turn = sqlite_get_turn,
    .key_put = sqlite_key_put,
    .key_find = sqlite_key_find,
    .key_list = sqlite_key_list,
    .key_revoke = sqlite_key_revoke,
    .share_put = sqlite_share_put,
    .share_find = sqlite_share_find,
    .list_conversations = sqlite_list_conversations,
    .delete_conversation = sqlite_delete_conversation,
    .metrics_reset = sqlite_metrics_reset,
    .metrics_history = sqlite_metrics_history,
    .memory_apply = sqlite_memory_apply,
    .memory_sync = sqlite_memory_sync,
    .memory_get = sqlite_memory_get,
    .memory_decisions = sqlite_memory_decisions,
    .personal_list = sqlite_personal_list,
    .personal_stats = sqlite_personal_stats,
    .artifacts_list = sqlite_artifacts_list,
    .artifact_get = sqlite_artifact_get,
    .facts_list = sqlite_facts_list,
    .scenario_set = sqlite_scenario_set,
    .read_begin = sqlite_read_begin,
    .read_end = sqlite_read_end,
    .batch_begin = sqlite_batch_begin,
    .batch_flush = sqlite_batch_flush,
    .batch_end = sqlite_batch_end,
    .batch_counts = sqlite_batch_counts,
};

/* Opens (creating and migrating when needed) the SQLite store at `path`.
 * Returns KEEL_EINVAL for an empty path, KEEL_ENOMEM, or KEEL_EIO with err
 * naming the path and SQLite's reason (not a database, cannot be created,
 * a failed migration, a schema newer than this build). Migrations already
 * applied stay as they were; on failure nothing is left open and *out is
 * untouched. The caller closes the store with store_close(). */
int store_sqlite_open(const char *path, struct store **out, struct keel_error *err)
{
    struct sqlite_store *st = NULL;
    int rc = KEEL_ENOMEM;

    if (!path || !*path) {
        rc = keel_error_set(err, KEEL_EINVAL, "db", "a SQLite file path is required");
        goto out;
    }
    pthread_once(&mem_once, mem_install);
    st = keel_calloc(1, sizeof(*st));
    if (!st || !(st->path = keel_strdup(path))) {
        rc = keel_error_set(err, KEEL_ENOMEM, "db", "out of memory");
        goto out;
    }
    st->base.ops = &sqlite_ops;
    st->write_stripe = -1;
    /* Without the thread SQLite checkpoints inside COMMIT: slower, same
     * data. */
    (void)sqlite_checkpointer_start(st);
    if ((rc = connection_open(st, err)))
        goto out;
    *out = &st->base;
    st = NULL;   /* owned by the caller now */
    rc = KEEL_OK;
out:
    if (st)
        sqlite_close(&st->base);
    return rc;
}

int sqlite_sync_full(void)
{
    const char *sync = getenv("KEEL_DB_SYNC");

    return sync && !strcmp(sync, "full");
}
