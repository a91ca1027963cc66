/*
 * store_sqlite_batch.c — batches of turns in the SQLite backend
 * (store.h: store_batch_begin … store_batch_end; docs/store.md).
 *
 * In a batch, each turn's rows (sqlite_turn_write, store_sqlite_conv.c)
 * are written under a savepoint of their own inside one open write
 * transaction, which the first turn begins and the batch's end, a
 * flush, or any other write of the connection (sqlite_batch_before_write)
 * commits. The turns' quality counters are added up per name and minute
 * and written once, before the commit. A transaction found lost (a
 * failed statement, SQLite's own rollback, a failed commit) fails the
 * batch: its turns since the last commit are not stored, and every later
 * save and the end report the same error. The counts of turns saved and
 * committed tell a caller which turns an earlier commit stored.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "store/store_sqlite_int.h"

/* The batch's counter for `name` in `minute`: found, or a new one (NULL
 * when there is no room, or the name is too long to keep). */
static struct batch_metric *batch_metric_of(struct sqlite_store *st, const char *name,
                                            int64_t minute, int add)
{
    for (int i = 0; i < st->n_batch_metrics; i++)
        if (st->batch_metrics[i].minute == minute && !strcmp(st->batch_metrics[i].name, name))
            return &st->batch_metrics[i];
    if (!add || st->n_batch_metrics == BATCH_METRICS_MAX || strlen(name) >= BATCH_METRIC_NAME)
        return NULL;
    struct batch_metric *m = &st->batch_metrics[st->n_batch_metrics++];
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->minute = minute;
    m->delta = 0;
    return m;
}

/* 1 when the turn's counters fit among the batch's (each name and minute
 * found, or room for it), so they can be added after its writes. */
static int batch_metrics_fit(struct sqlite_store *st, const struct store_turn_record *rec)
{
    int room = BATCH_METRICS_MAX - st->n_batch_metrics;

    for (size_t i = 0; i < rec->n_metrics; i++)
        if (strlen(rec->metrics[i].name) >= BATCH_METRIC_NAME ||
            (!batch_metric_of(st, rec->metrics[i].name, rec->ts_ms / 60000, 0) && --room < 0))
            return 0;
    return 1;
}

static void batch_add_metrics(struct sqlite_store *st, const struct store_turn_record *rec)
{
    for (size_t i = 0; i < rec->n_metrics; i++)
        batch_metric_of(st, rec->metrics[i].name, rec->ts_ms / 60000, 1)->delta +=
            rec->metrics[i].delta;
}

/* Writes the batch's counters, one minute at a time (each minute's sums
 * go to the totals too). */
static int batch_write_metrics(struct sqlite_store *st, struct keel_error *err)
{
    struct store_metric m[BATCH_METRICS_MAX];
    int done[BATCH_METRICS_MAX] = {0};
    int rc = KEEL_OK;

    for (int i = 0; i < st->n_batch_metrics && !rc; i++) {
        int64_t minute = st->batch_metrics[i].minute;
        size_t n = 0;
        if (done[i])
            continue;
        for (int j = i; j < st->n_batch_metrics; j++)
            if (!done[j] && st->batch_metrics[j].minute == minute) {
                done[j] = 1;
                m[n++] = (struct store_metric){st->batch_metrics[j].name,
                                               st->batch_metrics[j].delta};
            }
        rc = sqlite_metrics_write(st, m, n, minute * 60000, err);
    }
    st->n_batch_metrics = 0;
    return rc;
}

/* 1 when the batch's write transaction is still open. A read snapshot
 * begun after SQLite rolled it back (an error such as SQLITE_NOMEM does,
 * also in a read) is open too, but not as a write. */
static int batch_open(const struct sqlite_store *st)
{
    return st->db && !st->reset && sqlite3_txn_state(st->db, NULL) == SQLITE_TXN_WRITE;
}

/* The batch's error, for a save it refuses. */
static int batch_failure(struct sqlite_store *st, struct keel_error *err)
{
    if (err)
        *err = st->batch_err;
    return st->batch_err.code;
}

void sqlite_batch_lose(struct sqlite_store *st, const char *why)
{
    if (!st->batch_turns)
        return;
    st->batch_turns = 0;
    st->n_batch_metrics = 0;
    sqlite_tx_rollback(st);
    keel_error_set(&st->batch_err, KEEL_EIO, "store", "%s: %s", st->path, why);
}

int sqlite_batch_flush(struct store *store, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc;

    if (st->batch_err.code)
        return batch_failure(st, err);
    if (!st->batch_turns)
        return KEEL_OK;
    /* SQLite rolled it back, or a statement failed since (the connection
     * is to be replaced: sqlite_fail) */
    if (!batch_open(st)) {
        sqlite_batch_lose(st, "the turns' transaction was lost before its commit");
        return batch_failure(st, err);
    }
    if ((rc = batch_write_metrics(st, &st->batch_err))) {
        sqlite_batch_lose(st, "the turns' counters could not be written");
        return batch_failure(st, err);
    }
    st->batch_turns = 0;
    if ((rc = sqlite_tx_commit(st, "committing turns", &st->batch_err)))
        return batch_failure(st, err);
    st->batch_committed = st->batch_saved;
    return KEEL_OK;
}

/* Undoes a turn of the batch whose writes failed: back to its savepoint
 * while the transaction is open, and the batch goes on; when SQLite
 * rolled the transaction back, the turns before it went too and the
 * batch is lost. `joined`: turns before it are in the transaction. */
static void undo_turn(struct sqlite_store *st, int joined)
{
    int undone = !sqlite3_get_autocommit(st->db) &&
                 sqlite3_step(st->stmt[ST_ROLLBACK_TO]) == SQLITE_DONE;

    sqlite3_reset(st->stmt[ST_ROLLBACK_TO]);
    if (undone) {
        sqlite3_step(st->stmt[ST_RELEASE]);
        sqlite3_reset(st->stmt[ST_RELEASE]);
    }
    if (!joined)
        sqlite_tx_rollback(st);   /* the transaction held nothing else */
    else if (!undone)
        sqlite_batch_lose(st, "the turns' transaction was rolled back before its commit");
}

int sqlite_batch_save(struct sqlite_store *st, const struct store_turn_record *rec,
                      struct keel_error *err)
{
    int joined = st->batch_turns > 0, later, rc;

    /* The store changes threads only between batches (a server's worker
     * ends its batch before it lets the store go): another thread's save
     * is a caller's mistake, refused rather than let its turn ride on an
     * uncommitted batch. */
    if (!pthread_equal(st->batch_owner, pthread_self()))
        return keel_error_set(err, KEEL_EFAIL, "store",
                              "a batch of turns of another thread is open on this store");
    if (st->batch_err.code)
        return batch_failure(st, err);
    if (joined && !batch_open(st)) {
        sqlite_batch_lose(st, "the turns' transaction was lost before its commit");
        return batch_failure(st, err);
    }
    if (!joined && ((rc = sqlite_connection_ready(st, err)) ||
                    (rc = sqlite_tx_begin(st, "saving a turn", err))))
        return rc;
    later = batch_metrics_fit(st, rec);
    if ((rc = sqlite_stmt_exec(st, ST_SAVEPOINT, "saving a turn", err)) ||
        (rc = sqlite_turn_write(st, rec, later, err)) ||
        (rc = sqlite_stmt_exec(st, ST_RELEASE, "saving a turn", err))) {
        undo_turn(st, joined);
        return rc;
    }
    if (later)
        batch_add_metrics(st, rec);
    st->batch_turns++;
    st->batch_saved++;
    return KEEL_OK;
}

void sqlite_batch_before_write(struct sqlite_store *st)
{
    struct keel_error ignored;

    if (st->batch_turns)
        (void)sqlite_batch_flush(&st->base, &ignored);
}

int sqlite_batch_begin(struct store *store)
{
    struct sqlite_store *st = (struct sqlite_store *)store;

    if (st->batch)
        return 0;
    st->batch = 1;
    st->batch_owner = pthread_self();
    st->batch_turns = 0;
    st->batch_saved = st->batch_committed = 0;
    st->n_batch_metrics = 0;
    keel_error_clear(&st->batch_err);
    return 1;
}

void sqlite_batch_counts(struct store *store, long *saved, long *committed)
{
    struct sqlite_store *st = (struct sqlite_store *)store;

    if (saved)
        *saved = st->batch_saved;
    if (committed)
        *committed = st->batch_committed;
}

int sqlite_batch_end(struct store *store, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc = sqlite_batch_flush(store, err);

    st->batch = 0;
    keel_error_clear(&st->batch_err);
    return rc;
}

