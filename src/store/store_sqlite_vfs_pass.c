/*
 * store_sqlite_vfs_pass.c — the part of keel's WAL write VFS ("keel-wal")
 * that only passes through to SQLite's unix VFS, and its registration.
 *
 * The buffering of WAL writes and the rules for when the buffer is
 * written live in store_sqlite_vfs.c; this file holds what they do not
 * touch: the main database file's methods other than xClose, xShmLock and
 * xShmBarrier, the device properties asked of any wrapped file, the
 * VFS-level methods (delete, access, time, randomness, system calls),
 * which all go to the unix VFS unchanged, and the one-time registration
 * over the default VFS.
 */
#include <pthread.h>
#include <sqlite3.h>

#include "store/store.h"
#include "store/store_sqlite_int.h"
#include "store/store_sqlite_vfs_int.h"

#define VFS_NAME "keel-wal"

#define REAL(f) (((struct vfs_file *)(f))->real)
#define RM(f) (REAL(f)->pMethods)

sqlite3_vfs *sqlite_vfs_real;

static sqlite3_vfs vfs;
static pthread_once_t vfs_once = PTHREAD_ONCE_INIT;
static int vfs_ready;
static int coalescing = 1;

/* See store_sqlite_vfs_int.h. Properties of the device, not of the
 * bytes: a WAL file's buffer need not be flushed first. */
int sqlite_vfs_sector_size(sqlite3_file *file)
{
    return RM(file)->xSectorSize(REAL(file));
}

/* See store_sqlite_vfs_int.h. */
int sqlite_vfs_device_characteristics(sqlite3_file *file)
{
    return RM(file)->xDeviceCharacteristics(REAL(file));
}

/* ---- the main database file: pass-through -------------------------------- */

static int main_read(sqlite3_file *f, void *out, int amt, sqlite3_int64 off)
{
    return RM(f)->xRead(REAL(f), out, amt, off);
}

static int main_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 off)
{
    return RM(f)->xWrite(REAL(f), data, amt, off);
}

static int main_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return RM(f)->xTruncate(REAL(f), size);
}

static int main_sync(sqlite3_file *f, int flags)
{
    return RM(f)->xSync(REAL(f), flags);
}

static int main_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return RM(f)->xFileSize(REAL(f), size);
}

static int main_lock(sqlite3_file *f, int lock)
{
    return RM(f)->xLock(REAL(f), lock);
}

static int main_unlock(sqlite3_file *f, int lock)
{
    return RM(f)->xUnlock(REAL(f), lock);
}

static int main_check_reserved(sqlite3_file *f, int *out)
{
    return RM(f)->xCheckReservedLock(REAL(f), out);
}

static int main_file_control(sqlite3_file *f, int op, void *arg)
{
    return RM(f)->xFileControl(REAL(f), op, arg);
}

static int main_shm_map(sqlite3_file *f, int region, int size, int extend, void volatile **out)
{
    return RM(f)->xShmMap(REAL(f), region, size, extend, out);
}

static int main_shm_unmap(sqlite3_file *f, int delete_flag)
{
    return RM(f)->xShmUnmap(REAL(f), delete_flag);
}

static int main_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **out)
{
    return RM(f)->xFetch(REAL(f), off, amt, out);
}

static int main_unfetch(sqlite3_file *f, sqlite3_int64 off, void *page)
{
    return RM(f)->xUnfetch(REAL(f), off, page);
}

/* See store_sqlite_vfs_int.h. */
const sqlite3_io_methods sqlite_vfs_main_methods = {
    3,
    sqlite_vfs_main_close, main_read, main_write, main_truncate, main_sync, main_file_size,
    main_lock, main_unlock, main_check_reserved, main_file_control, sqlite_vfs_sector_size,
    sqlite_vfs_device_characteristics, main_shm_map, sqlite_vfs_main_shm_lock,
    sqlite_vfs_main_shm_barrier, main_shm_unmap, main_fetch, main_unfetch,
};

/* ---- the VFS -------------------------------------------------------------- */

static int vfs_delete(sqlite3_vfs *self, const char *name, int sync_dir)
{
    (void)self;
    return sqlite_vfs_real->xDelete(sqlite_vfs_real, name, sync_dir);
}

static int vfs_access(sqlite3_vfs *self, const char *name, int flags, int *out)
{
    (void)self;
    return sqlite_vfs_real->xAccess(sqlite_vfs_real, name, flags, out);
}

static int vfs_full_pathname(sqlite3_vfs *self, const char *name, int n, char *out)
{
    (void)self;
    return sqlite_vfs_real->xFullPathname(sqlite_vfs_real, name, n, out);
}

static void *vfs_dl_open(sqlite3_vfs *self, const char *name)
{
    (void)self;
    return sqlite_vfs_real->xDlOpen(sqlite_vfs_real, name);
}

static void vfs_dl_error(sqlite3_vfs *self, int n, char *out)
{
    (void)self;
    sqlite_vfs_real->xDlError(sqlite_vfs_real, n, out);
}

static void (*vfs_dl_sym(sqlite3_vfs *self, void *handle, const char *symbol))(void)
{
    (void)self;
    return sqlite_vfs_real->xDlSym(sqlite_vfs_real, handle, symbol);
}

static void vfs_dl_close(sqlite3_vfs *self, void *handle)
{
    (void)self;
    sqlite_vfs_real->xDlClose(sqlite_vfs_real, handle);
}

static int vfs_randomness(sqlite3_vfs *self, int n, char *out)
{
    (void)self;
    return sqlite_vfs_real->xRandomness(sqlite_vfs_real, n, out);
}

static int vfs_sleep(sqlite3_vfs *self, int us)
{
    (void)self;
    return sqlite_vfs_real->xSleep(sqlite_vfs_real, us);
}

static int vfs_current_time(sqlite3_vfs *self, double *out)
{
    (void)self;
    return sqlite_vfs_real->xCurrentTime(sqlite_vfs_real, out);
}

static int vfs_last_error(sqlite3_vfs *self, int n, char *out)
{
    (void)self;
    return sqlite_vfs_real->xGetLastError(sqlite_vfs_real, n, out);
}

static int vfs_current_time_int64(sqlite3_vfs *self, sqlite3_int64 *out)
{
    (void)self;
    return sqlite_vfs_real->xCurrentTimeInt64(sqlite_vfs_real, out);
}

static int vfs_set_system_call(sqlite3_vfs *self, const char *name, sqlite3_syscall_ptr call)
{
    (void)self;
    return sqlite_vfs_real->xSetSystemCall(sqlite_vfs_real, name, call);
}

static sqlite3_syscall_ptr vfs_get_system_call(sqlite3_vfs *self, const char *name)
{
    (void)self;
    return sqlite_vfs_real->xGetSystemCall(sqlite_vfs_real, name);
}

static const char *vfs_next_system_call(sqlite3_vfs *self, const char *name)
{
    (void)self;
    return sqlite_vfs_real->xNextSystemCall(sqlite_vfs_real, name);
}

static void vfs_register(void)
{
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);

    /* The wrapper needs a version 3 VFS (shared memory, int64 time,
     * system calls), as SQLite's unix VFS is. */
    if (!base || base->iVersion < 3)
        return;
    sqlite_vfs_real = base;
    vfs = (sqlite3_vfs){
        .iVersion = 3,
        .szOsFile = (int)sizeof(struct vfs_file) + base->szOsFile,
        .mxPathname = base->mxPathname,
        .zName = VFS_NAME,
        .xOpen = sqlite_vfs_open,
        .xDelete = vfs_delete,
        .xAccess = vfs_access,
        .xFullPathname = vfs_full_pathname,
        .xDlOpen = vfs_dl_open,
        .xDlError = vfs_dl_error,
        .xDlSym = vfs_dl_sym,
        .xDlClose = vfs_dl_close,
        .xRandomness = vfs_randomness,
        .xSleep = vfs_sleep,
        .xCurrentTime = vfs_current_time,
        .xGetLastError = vfs_last_error,
        .xCurrentTimeInt64 = vfs_current_time_int64,
        .xSetSystemCall = vfs_set_system_call,
        .xGetSystemCall = vfs_get_system_call,
        .xNextSystemCall = vfs_next_system_call,
    };
    vfs_ready = sqlite3_vfs_register(&vfs, 0) == SQLITE_OK;
}

/* See store_sqlite_int.h. */
const char *sqlite_vfs_name(void)
{
    if (!__atomic_load_n(&coalescing, __ATOMIC_RELAXED))
        return NULL;
    pthread_once(&vfs_once, vfs_register);
    return vfs_ready ? VFS_NAME : NULL;
}

/* See store.h. */
void store_sqlite_wal_coalescing(int on)
{
    __atomic_store_n(&coalescing, on ? 1 : 0, __ATOMIC_RELAXED);
}
