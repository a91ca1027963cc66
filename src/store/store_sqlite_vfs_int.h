/*
 * store_sqlite_vfs_int.h — what the two halves of keel's WAL write VFS
 * share: the file object, the buffering rules' entry points
 * (store_sqlite_vfs.c) and the pass-through methods with the VFS's
 * registration (store_sqlite_vfs_pass.c).
 */
#ifndef KEEL_STORE_SQLITE_VFS_INT_H
#define KEEL_STORE_SQLITE_VFS_INT_H

#include <sqlite3.h>
#include <stddef.h>

/* One open file of the VFS: SQLite's view first, the unix VFS's file
 * right after it (szOsFile covers both). A main database file uses the
 * first group of fields, a WAL file the second. */
struct vfs_file {
    sqlite3_file base;           /* first: SQLite's view */
    sqlite3_file *real;          /* the unix VFS's file, right after this struct */
    /* a main database file */
    const char *name;            /* the sqlite3_filename SQLite opened it with */
    struct vfs_file *wal;        /* its connection's WAL file, NULL: none open */
    struct vfs_file *next, *prev;   /* the list of open main files */
    /* a WAL file */
    struct vfs_file *main;       /* NULL: not linked, writes go through */
    unsigned char *buf;
    size_t cap;                  /* allocated */
    sqlite3_int64 start, end;    /* buffered range [start, end); empty when equal */
    sqlite3_int64 written_to;    /* end of what this file wrote since the lock or a restart */
    sqlite3_int64 commit_end;    /* a commit frame ends here, flush when reached; 0: none */
    sqlite3_int64 commit_hdr;    /* its header, while the page size is unknown; -1: none */
    sqlite3_int64 last_hdr;      /* offset of the last 24-byte write; -1: none */
    int page_size;               /* 0: not known yet */
    int failed;                  /* a flush lost bytes: writes fail until the lock goes */
};

/* The buffering rules (store_sqlite_vfs.c). open: the VFS's xOpen, which
 * wraps main database and WAL files and links a WAL to its database file;
 * on failure nothing stays open and file->pMethods is NULL. main_close,
 * main_shm_lock, main_shm_barrier: the main database file's methods that
 * act on its WAL's buffer (the rest pass through). */
int sqlite_vfs_open(sqlite3_vfs *self, sqlite3_filename name, sqlite3_file *file, int flags,
                    int *out_flags);
int sqlite_vfs_main_close(sqlite3_file *file);
int sqlite_vfs_main_shm_lock(sqlite3_file *file, int offset, int n, int flags);
void sqlite_vfs_main_shm_barrier(sqlite3_file *file);

/* The pass-through half (store_sqlite_vfs_pass.c). sqlite_vfs_real: the
 * unix VFS underneath, set once when the VFS is registered (before any
 * open). main_methods: the main database file's methods. sector_size and
 * device_characteristics: properties of the device, asked of the unix
 * file of any wrapped file. */
extern sqlite3_vfs *sqlite_vfs_real;
extern const sqlite3_io_methods sqlite_vfs_main_methods;
int sqlite_vfs_sector_size(sqlite3_file *file);
int sqlite_vfs_device_characteristics(sqlite3_file *file);

#endif
