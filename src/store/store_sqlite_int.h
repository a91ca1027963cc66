/*
 * store_sqlite_int.h — what store_sqlite.c and store_sqlite_schema.c
 * share: the migration list and the prepared statements, by id.
 */
#ifndef KEEL_STORE_SQLITE_INT_H
#define KEEL_STORE_SQLITE_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>

#include "core/error.h"
#include "store/store.h"

struct migration {
    int version;
    const char *sql;   /* static text, run with sqlite3_exec */
};

/* The schema's history, oldest first; a version is never edited once
 * released, only followed by a new one. */
extern const struct migration sqlite_migrations[];
extern const size_t sqlite_n_migrations;

enum stmt_id {
    ST_BEGIN,
    ST_BEGIN_READ,
    ST_TAKE_WRITE,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_PAPER_HASH,
    ST_PAPER_INSERT,
    ST_PAPER_UPDATE,
    ST_PAPER_SEARCH,
    ST_DOC_HASH,
    ST_DOC_INSERT,
    ST_DOC_UPDATE,
    ST_CHUNKS_DELETE,
    ST_CHUNK_INSERT,
    ST_CHUNK_SEARCH,
    ST_COUNTS,
    ST_CONV_GET,
    ST_CONV_INSERT,
    ST_CONV_UPDATE,
    ST_TURN_INSERT,
    ST_METRIC_ADD,
    ST_METRICS,
    ST_TURNS_LIST,
    ST_TURN_GET,
    ST_KEY_INSERT,
    ST_KEY_FIND,
    ST_KEY_LIST,
    ST_KEY_REVOKE,
    ST_SHARE_INSERT,
    ST_SHARE_FIND,
    ST_CONV_LIST,
    ST_CONV_DELETE_SHARES,
    ST_CONV_DELETE_TURNS,
    ST_CONV_DELETE,
    ST_METRICS_RESET,
    ST_METRIC_MINUTE_ADD,
    ST_METRICS_HISTORY,
    ST_MEM_RUN_INSERT,
    ST_MEM_SUPERSEDE,
    ST_MEM_MERGE,
    ST_MEM_DECISION_INSERT,
    ST_MEM_SYNC,
    ST_MEM_GET,
    ST_MEM_DECISIONS,
    ST_ART_INSERT,
    ST_FACT_INSERT,
    ST_ART_LIST,
    ST_ART_GET,
    ST_FACTS_LIST,
    ST_CONV_DELETE_FACTS,
    ST_CONV_DELETE_ARTIFACTS,
    ST_SCENARIO_SET,
    ST_PERSONAL_UPSERT,
    ST_PERSONAL_DELETE,
    ST_PERSONAL_LIST,
    ST_PERSONAL_STATS,
    ST_COUNT
};

/* Counter rows in one ST_METRIC_ADD / ST_METRIC_MINUTE_ADD: a turn with
 * more counters runs them again for the rest. */
#define METRIC_SLOTS 10

/* A batch's counters (store_sqlite_batch.c): the sums of its turns', per
 * name and minute, written once before its commit. */
#define BATCH_METRICS_MAX 64
#define BATCH_METRIC_NAME 48

struct batch_metric {
    char name[BATCH_METRIC_NAME];
    int64_t minute;
    long delta;
};

/* The SQL of each statement, prepared once per connection. */
extern const char *const sqlite_stmt_sql[ST_COUNT];

struct sqlite_store {
    struct store base;   /* first: a struct store * is a struct sqlite_store * */
    sqlite3 *db;
    char *path;          /* for error messages */
    sqlite3_stmt *stmt[ST_COUNT];
    int reset;           /* the connection reported an error: replace it */
    int reading;         /* a read snapshot is open (store_read_begin) */
    unsigned long read_backfills;   /* sqlite_wal_backfill_count() when it began */
    struct sqlite_checkpointer *checkpointer;   /* NULL: SQLite's auto-checkpoint */
    struct sqlite_index *index;                 /* store_sqlite_index.c; NULL: none */
    int write_stripe;                           /* store_sqlite_writelock.c; -1: not yet known */
    int write_locked;                           /* this store holds it */
    struct sqlite_run_cache *run_cache;         /* store_sqlite_memory.c; NULL: none yet */
    /* store_batch_begin … end (store_sqlite_batch.c): turns saved in one
     * transaction, each under its own savepoint. */
    int batch;                                  /* a batch is on … */
    pthread_t batch_owner;                      /* … of this thread (store_batch_begin) */
    int batch_turns;                            /* turns saved in its open transaction */
    long batch_saved, batch_committed;          /* turns saved, and committed, since it began */
    struct keel_error batch_err;                /* .code: a commit of the batch failed */
    struct batch_metric batch_metrics[BATCH_METRICS_MAX];   /* not yet written */
    int n_batch_metrics;
};

/* Batches of turns (store_sqlite_batch.c). */

/* Commits the turns of the open batch (store_batch_flush); a failure
 * sticks to the batch until its end. KEEL_OK when none is open. */
int sqlite_batch_flush(struct store *store, struct keel_error *err);

/* Before a write other than a batch's turn (sqlite_tx_begin,
 * sqlite_write_ready): commits the batch's turns, so the write is not
 * held in its transaction. A failure is the batch's to report
 * (store_batch_end). */
void sqlite_batch_before_write(struct sqlite_store *st);

/* The open batch's transaction is lost (the connection failed, or SQLite
 * rolled it back): rolls back what is left, gives back the write mutex,
 * and fails the batch with `why`. No-op without saved turns. */
void sqlite_batch_lose(struct sqlite_store *st, const char *why);

/* save_turn while a batch is on: the turn under its own savepoint in the
 * batch's transaction (the first turn begins it). KEEL_EFAIL (field
 * "store") from a thread other than the batch's. */
int sqlite_batch_save(struct sqlite_store *st, const struct store_turn_record *rec,
                      struct keel_error *err);

/* The process's writers of one file take turns on a mutex around their
 * transactions (store_sqlite_writelock.c): sqlite_tx_begin locks, commit
 * and rollback unlock; both are no-ops when already so. */
void sqlite_write_lock(struct sqlite_store *st);
void sqlite_write_unlock(struct sqlite_store *st);

/* sqlite_write_lock without waiting: 1 when this store now holds the
 * mutex (or held it already), 0 when another writer has it. */
int sqlite_write_trylock(struct sqlite_store *st);

/* A checkpoint of this process copied every frame of a WAL back (any
 * file's: the count is process-wide) — its callers, the checkpoint
 * thread and the commit path's backstop, say so here. SQLite starts the
 * WAL over only for a writer whose read began after such a checkpoint, so
 * a read snapshot older than the last one is not turned into a write
 * transaction (sqlite_tx_begin): the write begins anew and restarts the
 * WAL. sqlite_wal_backfill_count() is how many there were. */
void sqlite_wal_backfilled(void);
unsigned long sqlite_wal_backfill_count(void);

/* The same mutex for code that holds no store (the checkpointer's own
 * connection): lock_path takes the mutex of the file at `path` and
 * returns its stripe, which unlock_stripe gives back. */
int sqlite_write_lock_path(const char *path);
void sqlite_write_unlock_stripe(int stripe);

/* Helpers of store_sqlite.c shared with store_sqlite_conv.c. */

/* Fills `err` from the connection's last error (KEEL_ENOMEM or KEEL_EIO)
 * and marks the connection for replacement. Returns the code. */
int sqlite_fail(struct sqlite_store *st, int sqlite_rc, const char *op, struct keel_error *err);

/* Binds a caller's string without copying it (SQLITE_STATIC): it must
 * outlive the statement's use, which sqlite_stmt_done ends. */
#define BIND_TEXT(stmt, i, s) sqlite3_bind_text((stmt), (i), (s), -1, SQLITE_STATIC)

/* Resets a used statement and drops its bindings. */
void sqlite_stmt_done(sqlite3_stmt *stmt);

/* Steps `stmt` to its end, adding each row to `container` with `add`
 * (0 on success, KEEL_EIO for a row whose stored text is not JSON, any
 * other nonzero for out of memory); hands the container to *out, or
 * frees it on failure (a NULL container: out of memory). `op` names the
 * work in errors. */
int sqlite_collect_rows(struct sqlite_store *st, sqlite3_stmt *stmt, json_t *container,
                        int (*add)(sqlite3_stmt *stmt, json_t *container), const char *op,
                        json_t **out, struct keel_error *err);

/* Steps a statement that returns no rows, then resets it. */
int sqlite_stmt_exec(struct sqlite_store *st, enum stmt_id id, const char *op,
                     struct keel_error *err);

/* Steps a bound statement that lists rows to its end, adding each row to
 * `container` with `add` (nonzero when out of memory), then resets it.
 * On success hands the container to *out; on failure frees it: a NULL
 * container or a failed add is KEEL_ENOMEM on `field`, a failed step is
 * sqlite_fail(op). */
int sqlite_rows_json(struct sqlite_store *st, sqlite3_stmt *stmt, json_t *container,
                     int (*add)(sqlite3_stmt *stmt, json_t *container), const char *field,
                     const char *op, json_t **out, struct keel_error *err);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK (the latter only when a transaction
 * is open). */
int sqlite_tx_begin(struct sqlite_store *st, const char *op, struct keel_error *err);
int sqlite_tx_commit(struct sqlite_store *st, const char *op, struct keel_error *err);
void sqlite_tx_rollback(struct sqlite_store *st);

/* Copies column `col` of the current row (NULL stays NULL). Returns
 * KEEL_ENOMEM on failure. */
int sqlite_column_dup(sqlite3_stmt *stmt, int col, char **out);

/* Replaces a connection that reported an error; called first by every
 * operation. */
int sqlite_connection_ready(struct sqlite_store *st, struct keel_error *err);

/* sqlite_connection_ready() for an operation that writes one statement
 * outside sqlite_tx_begin: it also ends a read snapshot and commits an
 * open batch, so the write commits on its own and is not held in the
 * snapshot's or the batch's transaction. */
int sqlite_write_ready(struct sqlite_store *st, struct keel_error *err);

/* Nonzero while a read snapshot (store_read_begin) still holds its
 * transaction: an error that made SQLite roll it back ended it too. */
static inline int sqlite_in_snapshot(const struct sqlite_store *st)
{
    return st->reading && st->db && !sqlite3_get_autocommit(st->db);
}

/* Nonzero when KEEL_DB_SYNC=full asks for synchronous=FULL (survives
 * power loss) instead of NORMAL (survives a process crash). */
int sqlite_sync_full(void);

/* The VFS that writes a commit's WAL frames as one write
 * (store_sqlite_vfs.c). name: what sqlite3_open_v2 takes, the VFS
 * registered on the first call; NULL (SQLite's default VFS) when
 * store_sqlite_wal_coalescing(0) turned it off or it could not be
 * registered. fail_flushes: for tests, the next `n` flushes of buffered
 * WAL writes fail as a failed write does (SQLITE_IOERR_WRITE). */
const char *sqlite_vfs_name(void);
void sqlite_vfs_fail_flushes(int n);

/* WAL checkpoints on a thread of their own (store_sqlite_checkpoint.c).
 * start: launches the thread; KEEL_ENOMEM when it cannot, and the store
 * then keeps SQLite's auto-checkpoint inside COMMIT. attach: points the
 * current connection's WAL hook at the thread (after every connect).
 * stop: unhooks, ends and joins the thread; a no-op without one. */
int sqlite_checkpointer_start(struct sqlite_store *st);
void sqlite_checkpointer_attach(struct sqlite_store *st);
void sqlite_checkpointer_stop(struct sqlite_store *st);

/* Fill a paper / chunk hit from the current row of a statement with the
 * columns of ST_PAPER_SEARCH / ST_CHUNK_SEARCH. The paper version sets
 * err; the chunk version returns KEEL_ENOMEM. On failure nothing is kept. */
int sqlite_paper_from_row(struct sqlite_store *st, sqlite3_stmt *stmt, struct store_paper *paper,
                          struct keel_error *err);
int sqlite_chunk_from_row(sqlite3_stmt *stmt, struct chunk_hit *hit);

/* The in-memory ranked index (store_sqlite_index.c). attach: after every
 * connect, prepares its statements and takes FTS5's tokenizer (on failure
 * the FTS5 statements serve every search); detach: before the connection
 * closes; free: with the store. search_*: *served 0 means the caller runs
 * the FTS5 statement instead (same contract); otherwise *out holds the
 * hits, ranked exactly as that statement ranks them. */
void sqlite_index_attach(struct sqlite_store *st);
void sqlite_index_detach(struct sqlite_store *st);
void sqlite_index_free(struct sqlite_store *st);
int sqlite_index_search_papers(struct sqlite_store *st, const struct paper_query *query,
                               struct paper_hits *out, int *served, struct keel_error *err);
int sqlite_index_search_chunks(struct sqlite_store *st, const char *text, enum store_match match,
                               int limit, struct chunk_hits *out, int *served,
                               struct keel_error *err);

/* The conversation operations of the port (store_sqlite_conv.c). */
int sqlite_load_conversation(struct store *store, const char *id, struct store_conversation *out,
                             struct keel_error *err);
int sqlite_save_turn(struct store *store, const struct store_turn_record *rec,
                     struct keel_error *err);

/* The turn's rows in the open transaction (store_sqlite_conv.c): the
 * conversation, the turn, its counters unless `metrics_later` (a batch
 * adds them up), scenario, memory, personal fact and artifact. */
int sqlite_turn_write(struct sqlite_store *st, const struct store_turn_record *rec,
                      int metrics_later, struct keel_error *err);

/* Adds `n` counters to their totals and to the minute of `ts_ms`,
 * METRIC_SLOTS counters per statement. */
int sqlite_metrics_write(struct sqlite_store *st, const struct store_metric *metrics, size_t n,
                         int64_t ts_ms, struct keel_error *err);
int sqlite_batch_begin(struct store *store);
int sqlite_batch_end(struct store *store, struct keel_error *err);
void sqlite_batch_counts(struct store *store, long *saved, long *committed);
int sqlite_metrics(struct store *store, json_t **out, struct keel_error *err);
int sqlite_list_turns(struct store *store, const char *id, json_t **out, struct keel_error *err);
int sqlite_get_turn(struct store *store, const char *correlation_id, json_t **out,
                    struct keel_error *err);

/* Keys and share links (store_sqlite_auth.c). */
int sqlite_key_put(struct store *store, const struct store_key *key, const char *hash,
                   struct keel_error *err);
int sqlite_key_find(struct store *store, const char *hash, struct store_key *out,
                    struct keel_error *err);
int sqlite_key_list(struct store *store, json_t **out, struct keel_error *err);
int sqlite_key_revoke(struct store *store, const char *id, int64_t now_ms,
                      struct keel_error *err);
int sqlite_share_put(struct store *store, const char *hash, const char *conversation_id,
                     const char *user, int64_t now_ms, struct keel_error *err);
int sqlite_share_find(struct store *store, const char *hash, char **conversation_id,
                      struct keel_error *err);
int sqlite_list_conversations(struct store *store, const char *owner, int limit, int offset,
                              json_t **out, struct keel_error *err);
int sqlite_delete_conversation(struct store *store, const char *id, struct keel_error *err);
int sqlite_metrics_reset(struct store *store, struct keel_error *err);
/* Long-term memory (store_sqlite_memory.c). write: a decision and its
 * change inside the caller's transaction (a turn's). */
int sqlite_memory_write(struct sqlite_store *st, const struct store_memory_change *change,
                        struct keel_error *err);
int sqlite_memory_apply(struct store *store, const struct store_memory_change *change,
                        struct keel_error *err);
int sqlite_memory_sync(struct store *store, int64_t *seq, store_memory_fn fn, void *ctx,
                       struct keel_error *err);
int sqlite_memory_get(struct store *store, const char *const *ids, size_t n, json_t **out,
                      struct keel_error *err);
/* Frees the runs sqlite_memory_get keeps (st->run_cache); nothing when
 * none. */
void sqlite_memory_cache_free(struct sqlite_store *st);
/* erase_conversation: inside the caller's transaction, before the
 * conversation row goes, erases the runs of its owner made from it (see
 * store_delete_conversation). */
int sqlite_memory_erase_conversation(struct sqlite_store *st, const char *conversation_id,
                                     int64_t now_ms, struct keel_error *err);
int sqlite_memory_decisions(struct store *store, const char *owner, int limit, int offset,
                            json_t **out,
                            struct keel_error *err);

/* Personal facts (store_sqlite_personal.c). write: a change inside the
 * caller's transaction (a turn's). */
int sqlite_personal_write(struct sqlite_store *st, const struct store_personal_change *change,
                          struct keel_error *err);
int sqlite_personal_list(struct store *store, const char *user, json_t **out,
                         struct keel_error *err);
int sqlite_personal_stats(struct store *store, json_t **out, struct keel_error *err);
/* Artifacts and facts (store_sqlite_artifacts.c). write: a turn's
 * artifact and facts inside the caller's transaction. */
int sqlite_artifact_write(struct sqlite_store *st, const struct store_turn_record *rec,
                          struct keel_error *err);
int sqlite_artifacts_list(struct store *store, const char *conversation_id, const char *type,
                          int last, json_t **out, struct keel_error *err);
int sqlite_artifact_get(struct store *store, const char *id, json_t **out,
                        struct keel_error *err);
int sqlite_facts_list(struct store *store, const struct store_fact_query *query, json_t **out,
                      struct keel_error *err);

int sqlite_metrics_history(struct store *store, int aggregate_minutes, int limit, json_t **out,
                           struct keel_error *err);

/* The active scenario (store_sqlite_scenario.c). turn_write: a turn's
 * change of the conversation's scenario inside the caller's transaction
 * (the turn row carries the scenario after it and its delta). set:
 * the port's scenario_set, in a transaction of its own. */
int sqlite_scenario_turn_write(struct sqlite_store *st, const struct store_turn_record *rec,
                               struct keel_error *err);
int sqlite_scenario_set(struct store *store, const char *id, int64_t version,
                        const char *scenario_json, struct keel_error *err);

#endif
