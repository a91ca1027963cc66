/*
 * store_sqlite_personal.c — personal facts in the SQLite store
 * (migration 10): one row per user and key. A change is written inside
 * the turn's transaction (sqlite_personal_write, called by save_turn),
 * so a fact exists exactly when the turn that stored it does. The
 * statements are the connection's (ST_PERSONAL_*, store_sqlite_schema.c).
 */

#include "core/json.h"
#include "store/store_sqlite_int.h"

int sqlite_personal_write(struct sqlite_store *st, const struct store_personal_change *c,
                          struct keel_error *err)
{
    enum stmt_id id = c->value ? ST_PERSONAL_UPSERT : ST_PERSONAL_DELETE;
    sqlite3_stmt *stmt = st->stmt[id];

    BIND_TEXT(stmt, 1, c->user);
    BIND_TEXT(stmt, 2, c->key);
    if (c->value) {
        BIND_TEXT(stmt, 3, c->value);
        BIND_TEXT(stmt, 4, c->kind);
        BIND_TEXT(stmt, 5, c->conversation_id);
        sqlite3_bind_int64(stmt, 6, c->ts_ms);
    }
    return sqlite_stmt_exec(st, id, "saving a personal fact", err);
}

static int append_fact(sqlite3_stmt *stmt, json_t *list)
{
    const char *conv = (const char *)sqlite3_column_text(stmt, 5);

    return json_array_append_new(
        list, json_pack("{s:s, s:s, s:s, s:I, s:I, s:s?}", "key", sqlite3_column_text(stmt, 0),
                        "value", sqlite3_column_text(stmt, 1), "kind",
                        sqlite3_column_text(stmt, 2), "created_ms",
                        (json_int_t)sqlite3_column_int64(stmt, 3), "updated_ms",
                        (json_int_t)sqlite3_column_int64(stmt, 4), "conversation_id", conv));
}

int sqlite_personal_list(struct store *store, const char *user, json_t **out,
                         struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_PERSONAL_LIST];   /* after: a replaced connection has new statements */
    BIND_TEXT(stmt, 1, user);
    sqlite3_bind_int(stmt, 2, STORE_PERSONAL_FACTS_MAX);
    return sqlite_rows_json(st, stmt, json_array(), append_fact, "personal",
                            "reading personal facts", out, err);
}

int sqlite_personal_stats(struct store *store, json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_PERSONAL_STATS];
    *out = NULL;
    step = sqlite3_step(stmt);
    if (step == SQLITE_ROW)
        *out = json_pack("{s:I, s:I, s:I}", "users", (json_int_t)sqlite3_column_int64(stmt, 0),
                         "facts", (json_int_t)sqlite3_column_int64(stmt, 1), "notes",
                         (json_int_t)sqlite3_column_int64(stmt, 2));
    rc = step != SQLITE_ROW ? sqlite_fail(st, step, "counting personal facts", err)
         : *out ? KEEL_OK : keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
    sqlite_stmt_done(stmt);
    return rc;
}
