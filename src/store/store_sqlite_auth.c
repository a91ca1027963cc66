/*
 * store_sqlite_auth.c — API keys and share links in the SQLite store
 * (migration 5). Only hashes of tokens are stored.
 */
#include <string.h>

#include "core/alloc.h"
#include "store/store_sqlite_int.h"

int sqlite_key_put(struct store *store, const struct store_key *key, const char *hash,
                   struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc;

    if ((rc = sqlite_write_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_KEY_INSERT];
    BIND_TEXT(stmt, 1, key->id);
    BIND_TEXT(stmt, 2, key->user);
    BIND_TEXT(stmt, 3, key->role);
    BIND_TEXT(stmt, 4, hash);
    sqlite3_bind_int64(stmt, 5, key->created_ms);
    rc = sqlite3_step(stmt);
    sqlite_stmt_done(stmt);
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return keel_error_set(err, KEEL_EFAIL, "id", "a key with this id or token exists");
    return rc == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, rc, "saving a key", err);
}

static int key_from_row(sqlite3_stmt *stmt, struct store_key *out)
{
    out->created_ms = sqlite3_column_int64(stmt, 3);
    out->revoked_ms = sqlite3_column_int64(stmt, 4);
    return sqlite_column_dup(stmt, 0, &out->id) || sqlite_column_dup(stmt, 1, &out->user) ||
           sqlite_column_dup(stmt, 2, &out->role);
}

int sqlite_key_find(struct store *store, const char *hash, struct store_key *out,
                    struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_KEY_FIND];
    BIND_TEXT(stmt, 1, hash);
    step = sqlite3_step(stmt);
    if (step == SQLITE_DONE)
        rc = keel_error_set(err, KEEL_ENOTFOUND, "key", "no such key");
    else if (step != SQLITE_ROW)
        rc = sqlite_fail(st, step, "reading a key", err);
    else if (key_from_row(stmt, out)) {
        store_key_release(out);
        rc = keel_error_set(err, KEEL_ENOMEM, "key", "out of memory");
    }
    sqlite_stmt_done(stmt);
    return rc;
}

int sqlite_key_list(struct store *store, json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    json_t *list;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    if (!(list = json_array()))
        return keel_error_set(err, KEEL_ENOMEM, "keys", "out of memory");
    stmt = st->stmt[ST_KEY_LIST];
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
        json_t *key = json_pack("{s:s?, s:s?, s:s?, s:I, s:I}", "id",
                                (const char *)sqlite3_column_text(stmt, 0), "user",
                                (const char *)sqlite3_column_text(stmt, 1), "role",
                                (const char *)sqlite3_column_text(stmt, 2), "created_ms",
                                (json_int_t)sqlite3_column_int64(stmt, 3), "revoked_ms",
                                (json_int_t)sqlite3_column_int64(stmt, 4));
        if (!key || json_array_append_new(list, key)) {
            step = SQLITE_NOMEM;
            break;
        }
    }
    rc = step == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, step, "listing keys", err);
    sqlite_stmt_done(stmt);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}

int sqlite_key_revoke(struct store *store, const char *id, int64_t now_ms,
                      struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc;

    if ((rc = sqlite_write_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_KEY_REVOKE];
    BIND_TEXT(stmt, 1, id);
    sqlite3_bind_int64(stmt, 2, now_ms);
    if ((rc = sqlite_stmt_exec(st, ST_KEY_REVOKE, "revoking a key", err)))
        return rc;
    return sqlite3_changes(st->db) == 1
               ? KEEL_OK
               : keel_error_set(err, KEEL_ENOTFOUND, "id", "no key \"%s\"", id);
}

int sqlite_share_put(struct store *store, const char *hash, const char *conversation_id,
                     const char *user, int64_t now_ms, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc;

    if ((rc = sqlite_write_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_SHARE_INSERT];
    BIND_TEXT(stmt, 1, hash);
    BIND_TEXT(stmt, 2, conversation_id);
    BIND_TEXT(stmt, 3, user);
    sqlite3_bind_int64(stmt, 4, now_ms);
    if ((rc = sqlite_stmt_exec(st, ST_SHARE_INSERT, "sharing a conversation", err)))
        return rc;
    return sqlite3_changes(st->db) == 1
               ? KEEL_OK
               : keel_error_set(err, KEEL_ENOTFOUND, "conversation_id", "no conversation \"%s\"",
                                conversation_id);
}

int sqlite_share_find(struct store *store, const char *hash, char **conversation_id,
                      struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_SHARE_FIND];
    BIND_TEXT(stmt, 1, hash);
    step = sqlite3_step(stmt);
    if (step == SQLITE_DONE)
        rc = keel_error_set(err, KEEL_ENOTFOUND, "token", "no such share link");
    else if (step != SQLITE_ROW)
        rc = sqlite_fail(st, step, "reading a share link", err);
    else if (sqlite_column_dup(stmt, 0, conversation_id))
        rc = keel_error_set(err, KEEL_ENOMEM, "token", "out of memory");
    sqlite_stmt_done(stmt);
    return rc;
}
