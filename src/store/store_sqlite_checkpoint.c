/*
 * store_sqlite_checkpoint.c — WAL checkpoints off the commit path.
 *
 * SQLite's default auto-checkpoint runs inside the COMMIT that pushes the
 * WAL past 1,000 pages: every hundredth turn or so then waits 5–15 ms
 * while the WAL is copied back into the database. Here the store's
 * connection only notes the WAL size after each commit (a WAL hook, which
 * replaces the auto-checkpoint); a thread of its own, on a connection of
 * its own, runs a PASSIVE checkpoint when the WAL has grown past the
 * threshold. PASSIVE never waits for readers or writers: turns keep
 * committing while it copies.
 *
 * SQLite starts the WAL over (writes from its beginning again) only when
 * a writer begins while every frame has been copied back. Turns commit
 * while the thread copies, so a copy beside them always ends a few frames
 * short and the WAL never starts over; asking again at every commit past
 * the threshold then ran a checkpoint every few turns, each with two
 * fsyncs. So a commit asks again only when the WAL has grown by another
 * CHECKPOINT_PAGES, and once it holds RESTART_PAGES the thread catches
 * up: it syncs the files and copies what was committed meanwhile (up to
 * MAX_PASSES times while many frames wait), then copies the last few
 * under the file's in-process write lock (store_sqlite_writelock.c), in
 * RESTART mode, which also waits briefly for readers of older snapshots,
 * so the next writer finds the WAL fully copied and starts it over. That
 * holds writers for a few ms once in some 1,300 turns. Should the thread
 * fall far behind (a reader pins the WAL, the thread cannot open the
 * file), the commit path checkpoints itself once the WAL holds
 * BACKSTOP_PAGES, so the WAL stays bounded either way.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "store/store_sqlite_int.h"

/* Four times SQLite's own threshold (1,000 pages). Each cycle of copies
 * costs a handful of fsyncs and copies each page once however often turns
 * rewrote it, so on a disk (not tmpfs) a longer cycle is much cheaper per
 * turn: the pipeline bench ran ~13% more turns a second (4,340 -> 4,895,
 * medians of three, 8x: 4,961), its p99 ~20% lower. The price is disk:
 * the WAL grows to ~16,000 pages (64 MB with 4 KiB pages) before it
 * starts over, at most BACKSTOP_PAGES (128 MB); SQLite keeps the file at
 * its largest size and overwrites it. */
#define CHECKPOINT_PAGES 4000
#define RESTART_PAGES    (4 * CHECKPOINT_PAGES)
#define BACKSTOP_PAGES   (8 * CHECKPOINT_PAGES)
#define CATCH_UP_FRAMES  16          /* few enough to copy under the lock */
#define MAX_PASSES       4
#define RESTART_WAIT_STEPS 50        /* of 100 µs: the locked pass waits 5 ms at most */

struct sqlite_checkpointer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int pending;         /* a checkpoint is asked for */
    int stop;
    const char *path;    /* the store's; outlives the thread */
    sqlite3 *db;         /* the thread's own connection, opened on first use */
    int next_request;    /* WAL pages at which a commit asks again */
    int last_pages;      /* WAL pages at the last commit (atomic: both threads read it) */
};

/* Logs a failed checkpoint once per failure; the next request retries on
 * a fresh connection. */
static void checkpoint_failed(struct sqlite_checkpointer *c, int rc)
{
    keel_log(KEEL_LOG_WARN, "store.checkpoint_failed",
             json_pack("{s:s, s:s}", "path", c->path, "reason", sqlite3_errstr(rc)));
    sqlite3_close_v2(c->db);
    c->db = NULL;
}

/* Flushes the database file and the WAL to disk, so the syncs of the
 * checkpoint that follows have little left to write. */
static void sync_files(sqlite3 *db)
{
    sqlite3_file *file = NULL;

    if (sqlite3_file_control(db, NULL, SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK && file &&
        file->pMethods)
        (void)file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
    file = NULL;
    if (sqlite3_file_control(db, NULL, SQLITE_FCNTL_JOURNAL_POINTER, &file) == SQLITE_OK && file &&
        file->pMethods)
        (void)file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
}

/* The checkpoint connection's busy handler, used by the locked RESTART
 * pass only (PASSIVE never waits): 100 µs steps, 5 ms at most, while the
 * process's writers wait on the write lock. */
static int restart_wait(void *arg, int tries)
{
    (void)arg;
    if (tries >= RESTART_WAIT_STEPS)
        return 0;
    usleep(100);
    return 1;
}

/* sqlite3_wal_checkpoint_v2 in `mode`; a copy of every frame is counted
 * (sqlite_wal_backfilled). *log and *copied as SQLite sets them. */
static int wal_checkpoint(sqlite3 *db, const char *schema, int mode, int *log, int *copied)
{
    int rc = sqlite3_wal_checkpoint_v2(db, schema, mode, log, copied);

    if (rc == SQLITE_OK && *log > 0 && *copied == *log)
        sqlite_wal_backfilled();
    return rc;
}

static void checkpoint_once(struct sqlite_checkpointer *c)
{
    int rc;

    if (!c->db) {
        rc = sqlite3_open_v2(c->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             sqlite_vfs_name());
        if (rc == SQLITE_OK)
            sqlite3_busy_handler(c->db, restart_wait, NULL);
        /* A connection learns that the file is in WAL mode on its first
         * read; until then a checkpoint does nothing. */
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(c->db, "PRAGMA schema_version;", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            checkpoint_failed(c, rc);
            return;
        }
    }
    /* Copy what the WAL holds beside the turns. Once the WAL is long,
     * catch up: sync, copy what was committed meanwhile, and again while
     * many frames wait, then the last few frames under the write lock, in
     * RESTART mode: it also waits (restart_wait) for the readers of older
     * snapshots, whose read marks would keep the next writer from
     * starting the WAL over. A turn's read snapshot ends before its
     * publish waits for that lock, so they end within a turn. A frame a
     * reader still needs (copied < log) is left to the locked pass. */
    for (int pass = 0, copied_to = 0;; pass++) {
        int behind = __atomic_load_n(&c->last_pages, __ATOMIC_RELAXED) - copied_to;
        int locked = pass > 0 && (behind < CATCH_UP_FRAMES || pass == MAX_PASSES);
        int log = 0, copied = 0, stripe;

        if (locked) {
            stripe = sqlite_write_lock_path(c->path);
            rc = wal_checkpoint(c->db, NULL, SQLITE_CHECKPOINT_RESTART, &log, &copied);
            sqlite_write_unlock_stripe(stripe);
            break;
        }
        rc = wal_checkpoint(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
        if (rc != SQLITE_OK || log < RESTART_PAGES)
            break;
        sync_files(c->db);
        copied_to = copied;
    }
    /* BUSY: another checkpoint is running; it does the same work. */
    if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
        checkpoint_failed(c, rc);
}

/* Bumped whenever a checkpoint of this process copied every frame; see
 * sqlite_wal_backfilled() in store_sqlite_int.h. */
static atomic_ulong backfilled;

void sqlite_wal_backfilled(void)
{
    atomic_fetch_add_explicit(&backfilled, 1, memory_order_relaxed);
}

unsigned long sqlite_wal_backfill_count(void)
{
    return atomic_load_explicit(&backfilled, memory_order_relaxed);
}

static void *checkpoint_main(void *arg)
{
    struct sqlite_checkpointer *c = arg;

    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->pending && !c->stop)
            pthread_cond_wait(&c->wake, &c->lock);
        if (c->stop)
            break;
        c->pending = 0;
        pthread_mutex_unlock(&c->lock);
        checkpoint_once(c);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    sqlite3_close_v2(c->db);
    return NULL;
}

/* The WAL hook: runs on the committing thread after each commit. */
static int on_wal_commit(void *arg, sqlite3 *db, const char *schema, int pages)
{
    struct sqlite_checkpointer *c = arg;

    if (pages >= BACKSTOP_PAGES) {
        int log = 0, copied = 0;
        (void)wal_checkpoint(db, schema, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
        return SQLITE_OK;
    }
    if (pages < __atomic_load_n(&c->last_pages, __ATOMIC_RELAXED))   /* the WAL started over */
        c->next_request = CHECKPOINT_PAGES;
    __atomic_store_n(&c->last_pages, pages, __ATOMIC_RELAXED);
    if (pages >= CHECKPOINT_PAGES && pages >= c->next_request) {
        c->next_request = pages + CHECKPOINT_PAGES;
        pthread_mutex_lock(&c->lock);
        if (!c->pending) {
            c->pending = 1;
            pthread_cond_signal(&c->wake);
        }
        pthread_mutex_unlock(&c->lock);
    }
    return SQLITE_OK;
}

int sqlite_checkpointer_start(struct sqlite_store *st)
{
    struct sqlite_checkpointer *c = keel_calloc(1, sizeof(*c));

    if (!c)
        return KEEL_ENOMEM;
    c->path = st->path;
    if (pthread_mutex_init(&c->lock, NULL)) {
        keel_free(c);
        return KEEL_ENOMEM;
    }
    if (pthread_cond_init(&c->wake, NULL)) {
        pthread_mutex_destroy(&c->lock);
        keel_free(c);
        return KEEL_ENOMEM;
    }
    if (pthread_create(&c->thread, NULL, checkpoint_main, c)) {
        pthread_cond_destroy(&c->wake);
        pthread_mutex_destroy(&c->lock);
        keel_free(c);
        return KEEL_ENOMEM;
    }
    st->checkpointer = c;
    return KEEL_OK;
}

void sqlite_checkpointer_attach(struct sqlite_store *st)
{
    if (st->checkpointer && st->db)
        sqlite3_wal_hook(st->db, on_wal_commit, st->checkpointer);
}

void sqlite_checkpointer_stop(struct sqlite_store *st)
{
    struct sqlite_checkpointer *c = st->checkpointer;

    if (!c)
        return;
    if (st->db)
        sqlite3_wal_hook(st->db, NULL, NULL);
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    keel_free(c);
    st->checkpointer = NULL;
}
