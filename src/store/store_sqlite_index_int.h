/*
 * store_sqlite_index_int.h — the data of the SQLite store's in-memory
 * ranked index (store_sqlite_index.c), shared by every store of one
 * database file in the process (store_sqlite_index_share.c): the server's
 * workers each have a connection, and would otherwise each hold a copy of
 * the same index.
 */
#ifndef KEEL_STORE_SQLITE_INDEX_INT_H
#define KEEL_STORE_SQLITE_INDEX_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "text/bm25.h"

/* One table's index and what a hit needs to find its row. */
struct table_index {
    struct bm25_index *bm25;    /* NULL: none built */
    int64_t *seq;               /* row -> the table's seq */
    uint16_t *year;             /* papers only */
    unsigned char *oa;          /* papers only */
    int64_t generation;         /* the generation it was built at */
    uint64_t built_ns;          /* when the last build ended (monotonic) */
    uint64_t build_ns;          /* how long it took */
};

/* The index of one file. A search holds `lock` for reading from the
 * check of the generation until it has read its hits' rows; a build
 * holds it for writing. */
struct index_data {
    pthread_rwlock_t lock;
    struct table_index papers, chunks;
    /* the registry's (store_sqlite_index_share.c) */
    char *key;                  /* the file's real path */
    dev_t dev;                  /* and the file itself (see the registry) */
    ino_t ino;
    int refs;
    struct index_data *next;
};

/* The index data of the file now at `path` (by its real path, device
 * and inode: not an earlier file deleted from that path; a database
 * without a file, ":memory:", has one of its own), made empty on first
 * use; NULL when out of memory. Each acquire is matched by one release,
 * which frees the data with the last store of the file. Thread-safe. */
struct index_data *index_data_acquire(const char *path);
void index_data_release(struct index_data *data);

/* Frees what `t` holds and empties it. */
void table_index_release(struct table_index *t);

#endif
