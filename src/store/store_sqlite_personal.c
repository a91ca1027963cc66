/*
 * store_sqlite_personal.c — personal facts in the SQLite store
 * (migration 10): one row per user and key. A change is written inside
 * the turn's transaction (sqlite_personal_write, called by save_turn),
 * so a fact exists exactly when the turn that stored it does.
 *
 * These statements run a few times per personal-fact turn, never in a
 * hot loop, so they are prepared per call here rather than kept with the
 * connection's statements: the SQL of this concern stays in this file.
 */
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "store/store_sqlite_int.h"

#define BIND_TEXT(stmt, i, s) sqlite3_bind_text((stmt), (i), (s), -1, SQLITE_STATIC)

static const char upsert_sql[] =
    "INSERT INTO personal_facts (user, key, value, kind, conversation_id, created_at, updated_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)"
    " ON CONFLICT (user, key) DO UPDATE SET value = excluded.value, kind = excluded.kind,"
    " conversation_id = excluded.conversation_id, updated_at = excluded.updated_at";
static const char delete_sql[] = "DELETE FROM personal_facts WHERE user = ?1 AND key = ?2";
static const char list_sql[] =
    "SELECT key, value, kind, created_at, updated_at, conversation_id FROM personal_facts"
    " WHERE user = ?1 ORDER BY key LIMIT ?2";
static const char stats_sql[] =
    "SELECT count(DISTINCT user), coalesce(sum(kind = 'fact'), 0),"
    " coalesce(sum(kind = 'note'), 0) FROM personal_facts";

static int prepare(struct sqlite_store *st, const char *sql, sqlite3_stmt **stmt,
                   struct keel_error *err)
{
    int rc = sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL);

    return rc == SQLITE_OK ? KEEL_OK : sqlite_fail(st, rc, "preparing a personal-fact statement",
                                                   err);
}

int sqlite_personal_write(struct sqlite_store *st, const struct store_personal_change *c,
                          struct keel_error *err)
{
    sqlite3_stmt *stmt;
    int rc;

    if ((rc = prepare(st, c->value ? upsert_sql : delete_sql, &stmt, err)))
        return rc;
    BIND_TEXT(stmt, 1, c->user);
    BIND_TEXT(stmt, 2, c->key);
    if (c->value) {
        BIND_TEXT(stmt, 3, c->value);
        BIND_TEXT(stmt, 4, c->kind);
        BIND_TEXT(stmt, 5, c->conversation_id);
        sqlite3_bind_int64(stmt, 6, c->ts_ms);
    }
    rc = sqlite3_step(stmt);
    rc = rc == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, rc, "saving a personal fact", err);
    sqlite3_finalize(stmt);
    return rc;
}

static json_t *row_json(sqlite3_stmt *stmt)
{
    const char *conv = (const char *)sqlite3_column_text(stmt, 5);

    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:s?}", "key", sqlite3_column_text(stmt, 0),
                     "value", sqlite3_column_text(stmt, 1), "kind", sqlite3_column_text(stmt, 2),
                     "created_ms", (json_int_t)sqlite3_column_int64(stmt, 3), "updated_ms",
                     (json_int_t)sqlite3_column_int64(stmt, 4), "conversation_id", conv);
}

int sqlite_personal_list(struct store *store, const char *user, json_t **out,
                         struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    json_t *list;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)) || (rc = prepare(st, list_sql, &stmt, err)))
        return rc;
    BIND_TEXT(stmt, 1, user);
    sqlite3_bind_int(stmt, 2, STORE_PERSONAL_FACTS_MAX);
    if (!(list = json_array())) {
        sqlite3_finalize(stmt);
        return keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
    }
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW)
        if (json_array_append_new(list, row_json(stmt))) {
            step = SQLITE_NOMEM;
            break;
        }
    rc = step == SQLITE_DONE ? KEEL_OK
         : step == SQLITE_NOMEM ? keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory")
                                : sqlite_fail(st, step, "reading personal facts", err);
    sqlite3_finalize(stmt);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}

int sqlite_personal_stats(struct store *store, json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)) || (rc = prepare(st, stats_sql, &stmt, err)))
        return rc;
    *out = NULL;
    step = sqlite3_step(stmt);
    if (step == SQLITE_ROW)
        *out = json_pack("{s:I, s:I, s:I}", "users", (json_int_t)sqlite3_column_int64(stmt, 0),
                         "facts", (json_int_t)sqlite3_column_int64(stmt, 1), "notes",
                         (json_int_t)sqlite3_column_int64(stmt, 2));
    rc = step != SQLITE_ROW ? sqlite_fail(st, step, "counting personal facts", err)
         : *out ? KEEL_OK : keel_error_set(err, KEEL_ENOMEM, "personal", "out of memory");
    sqlite3_finalize(stmt);
    return rc;
}
