/*
 * store_sqlite_index_share.c — one in-memory ranked index per database
 * file and process (see store_sqlite_index_int.h): a registry of the
 * index data of each open file, keyed by its real path and counted by the
 * stores that use it.
 *
 * The path alone does not name a file: one deleted and made again at the
 * same path while a store of the old one is open is another file, whose
 * generations count from the start again and may equal those the old
 * file's index was built at. So an entry also records the file's device
 * and inode, which no other file has while a store holds this one open;
 * a database without a file (":memory:") shares its index with no one.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "store/store_sqlite_index_int.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct index_data *registry;

void table_index_release(struct table_index *t)
{
    bm25_index_free(t->bm25);
    keel_free(t->seq);
    keel_free(t->year);
    keel_free(t->oa);
    memset(t, 0, sizeof(*t));
}

/* A new, empty entry for `key` (the file `file`), or NULL. */
static struct index_data *data_new(const char *key, const struct stat *file)
{
    struct index_data *d = keel_calloc(1, sizeof(*d));
    pthread_rwlockattr_t attr;
    int failed;

    if (!d || !(d->key = keel_strdup(key))) {
        keel_free(d);
        return NULL;
    }
    d->dev = file->st_dev;
    d->ino = file->st_ino;
    /* A rebuild must not wait behind an endless line of searches. */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    failed = pthread_rwlock_init(&d->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (failed) {
        keel_free(d->key);
        keel_free(d);
        return NULL;
    }
    return d;
}

struct index_data *index_data_acquire(const char *path)
{
    char real[PATH_MAX];
    const char *key = realpath(path, real) ? real : path;
    struct stat file;
    struct index_data *d;

    if (stat(key, &file)) {   /* no file (":memory:"): nothing to share */
        if ((d = data_new(key, &(struct stat){0})))
            d->refs = 1;
        return d;
    }
    pthread_mutex_lock(&registry_lock);
    for (d = registry;
         d && (strcmp(d->key, key) || d->dev != file.st_dev || d->ino != file.st_ino);
         d = d->next)
        ;
    if (!d && (d = data_new(key, &file))) {
        d->next = registry;
        registry = d;
    }
    if (d)
        d->refs++;
    pthread_mutex_unlock(&registry_lock);
    return d;
}

void index_data_release(struct index_data *data)
{
    struct index_data **p;

    if (!data)
        return;
    pthread_mutex_lock(&registry_lock);
    if (--data->refs > 0) {
        pthread_mutex_unlock(&registry_lock);
        return;
    }
    for (p = &registry; *p && *p != data; p = &(*p)->next)
        ;
    if (*p)   /* else never registered: no file to share */
        *p = data->next;
    pthread_mutex_unlock(&registry_lock);
    table_index_release(&data->papers);
    table_index_release(&data->chunks);
    pthread_rwlock_destroy(&data->lock);
    keel_free(data->key);
    keel_free(data);
}
