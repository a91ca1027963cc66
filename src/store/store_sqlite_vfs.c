/*
 * store_sqlite_vfs.c — a SQLite VFS over the default one ("unix") that
 * writes a commit's WAL frames with one write instead of two per frame.
 *
 * Why. SQLite's walFrames() writes every frame with two sqlite3OsWrite
 * calls (walWriteOneFrame: the 24-byte frame header, then the page), so a
 * turn's commit of ~12 frames was ~25 pwrite calls, each a trip through
 * the kernel's buffered write path; 4,120-byte frames straddle page-cache
 * folios. Here the WAL file's contiguous writes are gathered in a buffer
 * of the file's own and handed to the unix VFS's xWrite as one range, so
 * SQLite's unix VFS stays in charge of the descriptor, partial writes,
 * EINTR, locking and error codes. This file holds the buffer and the
 * rules for writing it; store_sqlite_vfs_pass.c the methods that only pass
 * through and the VFS's registration (store_sqlite_vfs_int.h between).
 *
 * Which files. Only files opened with SQLITE_OPEN_WAL buffer. The main
 * database file is wrapped too, as a pass-through, for its xShmLock and
 * xShmBarrier (below). Every other file (journals, temporary files) is the
 * unix VFS's own object with its own methods.
 *
 * When the buffer is written (a "flush"), checked against SQLite 3.40's
 * wal.c (walFrames, walWriteOneFrame, walRewriteChecksums,
 * walIndexWriteHdr, sqlite3WalUndo):
 *  - When the commit frame is complete. A frame header (24 bytes at
 *    32 + k * (pagesize + 24)) whose bytes 4..7 (database size after
 *    commit, big-endian) are not zero marks the commit frame; the flush
 *    happens once its page data is in the buffer, inside that xWrite,
 *    before it returns. walFrames() appends the frames to the wal-index
 *    (walIndexAppend) and publishes the new header (walIndexWriteHdr) —
 *    what makes the transaction visible to other connections, this
 *    process's checkpointer thread and server workers included — only
 *    after every frame write returned, and a failed write returns before
 *    either: so a failed flush fails the COMMIT, which SQLite rolls back.
 *  - At once when a commit frame's header is written again in place:
 *    walRewriteChecksums() (a page written twice in one transaction)
 *    reads each frame and rewrites its header, the commit frame's last,
 *    with no page write after it. A header at an offset this file has
 *    already written past (since its writer lock was taken, or since it
 *    wrote the WAL header at offset 0 — a WAL restart) is such a rewrite.
 *  - Before any other method of the file touches it: xRead (the writer
 *    reads its own frames back: walRewriteChecksums, pages spilled from a
 *    full cache), xSync, xTruncate, xFileSize, xFileControl, xLock and
 *    friends, xClose; and before a write that is not contiguous with (nor
 *    inside) the buffered range, or that would grow it past the cap.
 *  - Before every wal-index lock change (the main file's xShmLock), above
 *    all when the connection gives up the WAL write lock (slot 0), before
 *    the unlock: a transaction that spilled frames and then rolled back
 *    touches the WAL no more (sqlite3WalUndo only resets the in-memory
 *    index), and its frames must not sit in this buffer while another
 *    connection writes the same offsets. They belong to no commit, so
 *    writing them is harmless, as SQLite's own writes of them would have
 *    been. A connection leaving exclusive locking mode gives the file
 *    back without unlocking slot 0 (see sqlite_vfs_main_shm_lock).
 *  - At the main file's xShmBarrier, a safety net: walIndexWriteHdr()
 *    calls it between the two copies of the new wal-index header. The
 *    rules above leave nothing buffered by then.
 * A flush that fails has lost its bytes: the error goes to the call that
 * flushed, and every later xWrite and xSync of the file fails too until
 * the write lock is given back, so that transaction can never commit
 * (also when the failing call was one whose error SQLite ignores).
 *
 * Pagesize comes from the WAL header (bytes 8..11) when this file writes
 * or reads it, else from the page write that follows a frame header;
 * until known, a 24-byte write is taken as a frame header. A write inside
 * the buffered range (a frame rewritten in place) is copied over it.
 *
 * Limits. A WAL file whose database file lacks
 * SQLITE_IOCAP_POWERSAFE_OVERWRITE (SQLite, which asks the database file,
 * then pads commits to sector boundaries, splitting writes around an
 * xSync) and one whose database file is not open through this VFS write
 * through unbuffered. The buffer starts at 64 KiB and holds at most
 * 128 KiB less one byte: os_unix.c's seekAndWriteFd masks every write's
 * size with 0x1ffff (SQLite itself writes a page at most), so a larger
 * flush would be cut short; a bigger transaction is written in several
 * flushes. It is allocated with keel_malloc; when it cannot grow, writes
 * go straight through. In exclusive locking mode SQLite calls no xShmLock
 * (none at all without shared memory): the commit rule still holds there,
 * frames of a rolled-back transaction are written before this
 * connection's next write or when it leaves exclusive mode (no other
 * connection writes that WAL meanwhile), and a failed flush fails every
 * later write until the connection leaves exclusive mode or closes.
 *
 * Threads. A sqlite3_file belongs to one connection (keel's are NOMUTEX and
 * used by one thread at a time); a WAL file and its database file are the
 * same connection's. The only state shared between files is the list of
 * open main database files, under a mutex, read when a WAL file opens to
 * find its database file (by the filename pointer SQLite passes both:
 * sqlite3_filename_database).
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "store/store_sqlite_int.h"
#include "store/store_sqlite_vfs_int.h"

#define BUF_FIRST (64 * 1024)
/* The unix VFS writes at most 0x1ffff bytes per xWrite (os_unix.c's
 * seekAndWriteFd masks the size with it: SQLite's own writes are a page
 * at most), so one flush is at most that. */
#define BUF_MAX 0x1ffff
#define WAL_HDR 32
#define FRAME_HDR 24

static int fail_flushes;   /* tests: this many flushes fail */

static pthread_mutex_t mains_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vfs_file *mains;

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int valid_page_size(sqlite3_int64 n)
{
    return n >= 512 && n <= 65536 && (n & (n - 1)) == 0;
}

/* ---- the WAL buffer ------------------------------------------------------ */

/* Writes the buffered range with one xWrite of the unix VFS and empties
 * the buffer, also on failure (the bytes are then lost and `failed` keeps
 * the transaction from committing). */
static int flush(struct vfs_file *w)
{
    int rc = SQLITE_OK;

    if (w->end == w->start)
        return SQLITE_OK;
    if (__atomic_load_n(&fail_flushes, __ATOMIC_RELAXED) > 0 &&
        __atomic_sub_fetch(&fail_flushes, 1, __ATOMIC_RELAXED) >= 0)
        rc = SQLITE_IOERR_WRITE;
    else
        rc = w->real->pMethods->xWrite(w->real, w->buf, (int)(w->end - w->start), w->start);
    w->start = w->end = 0;
    if (rc != SQLITE_OK)
        w->failed = 1;
    return rc;
}

/* Room for [start, new_end) in the buffer: grows it by doubling up to
 * BUF_MAX. Returns 0 when it cannot. */
static int reserve(struct vfs_file *w, sqlite3_int64 need)
{
    size_t cap = w->cap ? w->cap : BUF_FIRST;
    unsigned char *grown;

    if (need > BUF_MAX)
        return 0;
    if ((size_t)need <= w->cap)
        return 1;
    while (cap < (size_t)need)
        cap *= 2;
    if (!(grown = keel_realloc(w->buf, cap)))
        return 0;
    w->buf = grown;
    w->cap = cap;
    return 1;
}

/* Puts one write into the buffer, flushing first when it does not extend
 * or overlap the buffered range; writes it through when it cannot be
 * buffered. */
static int buffer_write(struct vfs_file *w, const void *data, int amt, sqlite3_int64 off)
{
    sqlite3_int64 end = off + amt;
    int rc;

    if (w->end > w->start &&
        (off < w->start || off > w->end || (end > w->end ? end : w->end) - w->start > BUF_MAX) &&
        (rc = flush(w)) != SQLITE_OK)
        return rc;
    if (w->end == w->start)
        w->start = w->end = off;
    if (!reserve(w, (end > w->end ? end : w->end) - w->start)) {
        if ((rc = flush(w)) != SQLITE_OK)
            return rc;
        return w->real->pMethods->xWrite(w->real, data, amt, off);
    }
    memcpy(w->buf + (off - w->start), data, (size_t)amt);
    if (end > w->end)
        w->end = end;
    return SQLITE_OK;
}

/* Called when the WAL write lock changes hands: a new transaction starts
 * with nothing written and no commit pending. */
static void wal_reset(struct vfs_file *w)
{
    w->written_to = 0;
    w->commit_end = 0;
    w->commit_hdr = -1;
    w->last_hdr = -1;
    w->failed = 0;
}

static int wal_write(sqlite3_file *file, const void *data, int amt, sqlite3_int64 off)
{
    struct vfs_file *w = (struct vfs_file *)file;
    const unsigned char *bytes = data;
    sqlite3_int64 end = off + amt, frame;
    int header, commit, rewrite, rc;

    if (!w->main)
        return w->real->pMethods->xWrite(w->real, data, amt, off);
    if (w->failed)
        return SQLITE_IOERR_WRITE;
    if (off == 0 && amt >= WAL_HDR) {   /* the WAL header: a (re)start */
        uint32_t size = get_be32(bytes + 8);
        w->page_size = size == 1 ? 65536 : valid_page_size(size) ? (int)size : 0;
        w->written_to = 0;
        w->commit_end = 0;
        w->commit_hdr = -1;
    } else if (!w->page_size && off == w->last_hdr + FRAME_HDR && valid_page_size(amt)) {
        w->page_size = amt;   /* the page after a frame header */
    }
    frame = w->page_size + FRAME_HDR;
    header = off >= WAL_HDR && (w->page_size ? (off - WAL_HDR) % frame == 0 && amt >= FRAME_HDR
                                             : amt == FRAME_HDR);
    commit = header && get_be32(bytes + 4) != 0;
    rewrite = commit && w->written_to > off + FRAME_HDR;
    if ((rc = buffer_write(w, data, amt, off)) != SQLITE_OK)
        return rc;
    if (end > w->written_to)
        w->written_to = end;
    if (amt == FRAME_HDR)
        w->last_hdr = off;
    if (commit) {
        w->commit_hdr = w->page_size ? -1 : off;
        w->commit_end = w->page_size ? off + frame : 0;
        /* A rewrite: the frame's page is written already and nothing may
         * follow. Should a page follow after all, commit_end flushes it. */
        if (rewrite)
            return flush(w);
    } else if (w->commit_hdr >= 0 && off == w->commit_hdr + FRAME_HDR && w->page_size) {
        w->commit_end = w->commit_hdr + frame;
        w->commit_hdr = -1;
    }
    if (w->commit_end && end >= w->commit_end && off < w->commit_end) {
        w->commit_end = 0;
        return flush(w);
    }
    return SQLITE_OK;
}

/* ---- the WAL file's other methods: flush first --------------------------- */

static int wal_close(sqlite3_file *file)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = w->main ? flush(w) : SQLITE_OK, close_rc;

    if (w->main) {
        pthread_mutex_lock(&mains_lock);
        if (w->main->wal == w)
            w->main->wal = NULL;
        pthread_mutex_unlock(&mains_lock);
    }
    keel_free(w->buf);
    w->buf = NULL;
    close_rc = w->real->pMethods->xClose(w->real);
    return rc != SQLITE_OK ? rc : close_rc;
}

static int wal_read(sqlite3_file *file, void *out, int amt, sqlite3_int64 off)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = flush(w);

    if (rc == SQLITE_OK)
        rc = w->real->pMethods->xRead(w->real, out, amt, off);
    if (rc == SQLITE_OK && off == 0 && amt >= WAL_HDR) {
        uint32_t size = get_be32((const unsigned char *)out + 8);
        if (size == 1 || valid_page_size(size))
            w->page_size = size == 1 ? 65536 : (int)size;
    }
    return rc;
}

static int wal_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = flush(w);

    return rc != SQLITE_OK ? rc : w->real->pMethods->xTruncate(w->real, size);
}

static int wal_sync(sqlite3_file *file, int flags)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = w->failed ? SQLITE_IOERR_WRITE : flush(w);

    return rc != SQLITE_OK ? rc : w->real->pMethods->xSync(w->real, flags);
}

static int wal_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = flush(w);

    return rc != SQLITE_OK ? rc : w->real->pMethods->xFileSize(w->real, size);
}

static int wal_lock(sqlite3_file *file, int lock)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = flush(w);

    return rc != SQLITE_OK ? rc : w->real->pMethods->xLock(w->real, lock);
}

static int wal_unlock(sqlite3_file *file, int lock)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = flush(w);

    return rc != SQLITE_OK ? rc : w->real->pMethods->xUnlock(w->real, lock);
}

static int wal_check_reserved(sqlite3_file *file, int *out)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = flush(w);

    return rc != SQLITE_OK ? rc : w->real->pMethods->xCheckReservedLock(w->real, out);
}

static int wal_file_control(sqlite3_file *file, int op, void *arg)
{
    struct vfs_file *w = (struct vfs_file *)file;
    int rc = flush(w);

    return rc != SQLITE_OK ? rc : w->real->pMethods->xFileControl(w->real, op, arg);
}

static const sqlite3_io_methods wal_methods = {
    1,   /* no shared memory nor mmap: SQLite uses neither on a WAL file */
    wal_close, wal_read, wal_write, wal_truncate, wal_sync, wal_file_size, wal_lock,
    wal_unlock, wal_check_reserved, wal_file_control, sqlite_vfs_sector_size,
    sqlite_vfs_device_characteristics, NULL, NULL, NULL, NULL, NULL, NULL,
};

/* ---- the main database file: its three methods that touch the WAL ------- */

/* See store_sqlite_vfs_int.h. */
int sqlite_vfs_main_close(sqlite3_file *file)
{
    struct vfs_file *m = (struct vfs_file *)file;

    pthread_mutex_lock(&mains_lock);
    if (m->prev)
        m->prev->next = m->next;
    else
        mains = m->next;
    if (m->next)
        m->next->prev = m->prev;
    if (m->wal)
        m->wal->main = NULL;   /* SQLite closes the WAL first; in case it did not */
    pthread_mutex_unlock(&mains_lock);
    return m->real->pMethods->xClose(m->real);
}

/* Nothing buffered outlives a change of the wal-index locks. Slot 0 is
 * SQLite's WAL write lock: giving it up ends the connection's write
 * transaction, so whatever is still buffered (frames of a transaction
 * that rolled back) is written while the lock is still held; taking it
 * starts one afresh. A connection leaving exclusive locking mode never
 * took slot 0 through shared memory: its first call here is a read lock,
 * taken while it still holds the database file exclusively, and the
 * flush before it writes what a rollback left before other connections
 * may write the same offsets. Inside a write transaction SQLite locks
 * nothing here once a frame is written, so this costs no extra write.
 * See store_sqlite_vfs_int.h. */
int sqlite_vfs_main_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    struct vfs_file *m = (struct vfs_file *)f;
    struct vfs_file *w = m->wal;
    int rc;

    if (w)
        (void)flush(w);   /* no commit's bytes: a failure loses nothing committed */
    if (w && offset == 0 && (flags & SQLITE_SHM_UNLOCK))
        wal_reset(w);
    rc = m->real->pMethods->xShmLock(m->real, offset, n, flags);
    if (w && rc == SQLITE_OK && offset == 0 && (flags & SQLITE_SHM_LOCK) &&
        (flags & SQLITE_SHM_EXCLUSIVE))
        wal_reset(w);
    return rc;
}

/* See store_sqlite_vfs_int.h. The rules above leave nothing buffered
 * here: a safety net. */
void sqlite_vfs_main_shm_barrier(sqlite3_file *f)
{
    struct vfs_file *m = (struct vfs_file *)f;

    if (m->wal && m->wal->end > m->wal->start)
        (void)flush(m->wal);   /* a failure marks the WAL failed */
    m->real->pMethods->xShmBarrier(m->real);
}

/* ---- opening a file -------------------------------------------------------- */

/* See store_sqlite_vfs_int.h. */
int sqlite_vfs_open(sqlite3_vfs *self, sqlite3_filename name, sqlite3_file *file, int flags,
                    int *out_flags)
{
    struct vfs_file *f = (struct vfs_file *)file;
    int rc;

    (void)self;
    if (!name || !(flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL)))
        return sqlite_vfs_real->xOpen(sqlite_vfs_real, name, file, flags, out_flags);
    memset(f, 0, sizeof(*f));
    f->real = (sqlite3_file *)(f + 1);
    rc = sqlite_vfs_real->xOpen(sqlite_vfs_real, name, f->real, flags, out_flags);
    if (rc != SQLITE_OK) {
        if (f->real->pMethods)
            f->real->pMethods->xClose(f->real);
        file->pMethods = NULL;
        return rc;
    }
    if ((flags & SQLITE_OPEN_MAIN_DB) && f->real->pMethods->iVersion < 3) {
        /* no shared memory to hook: SQLite's own file, unwrapped */
        f->real->pMethods->xClose(f->real);
        return sqlite_vfs_real->xOpen(sqlite_vfs_real, name, file, flags, out_flags);
    }
    if (flags & SQLITE_OPEN_MAIN_DB) {
        f->name = name;
        pthread_mutex_lock(&mains_lock);
        f->next = mains;
        if (mains)
            mains->prev = f;
        mains = f;
        pthread_mutex_unlock(&mains_lock);
        file->pMethods = &sqlite_vfs_main_methods;
        return SQLITE_OK;
    }
    wal_reset(f);
    /* Without powersafe overwrite SQLite pads commits to a sector and
     * splits writes around an xSync: leave such a WAL unbuffered. SQLite
     * asks the database file (sqlite3WalOpen), not the WAL, whose unix
     * file never sees the database's URI parameters (psow=0). */
    const char *db = sqlite3_filename_database(name);
    pthread_mutex_lock(&mains_lock);
    for (struct vfs_file *m = mains; m; m = m->next)
        if (m->name == db && !m->wal) {
            if (m->real->pMethods->xDeviceCharacteristics(m->real) &
                SQLITE_IOCAP_POWERSAFE_OVERWRITE) {
                m->wal = f;
                f->main = m;
            }
            break;
        }
    pthread_mutex_unlock(&mains_lock);
    file->pMethods = &wal_methods;
    return SQLITE_OK;
}

/* See store_sqlite_int.h. */
void sqlite_vfs_fail_flushes(int n)
{
    __atomic_store_n(&fail_flushes, n, __ATOMIC_RELAXED);
}
