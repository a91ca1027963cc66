/*
 * store_sqlite_int.h — what store_sqlite.c and store_sqlite_schema.c
 * share: the migration list and the prepared statements, by id.
 */
#ifndef KEEL_STORE_SQLITE_INT_H
#define KEEL_STORE_SQLITE_INT_H

#include <stddef.h>

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
    ST_COMMIT,
    ST_ROLLBACK,
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
    ST_COUNT
};

/* The SQL of each statement, prepared once per connection. */
extern const char *const sqlite_stmt_sql[ST_COUNT];

#endif
