/*
 * store_sqlite_scenario.c — the active scenario (seed 004) in the SQLite
 * backend: a conversation's scenario and its version (migration 8), the
 * scenario after each turn and the turn's changes of it.
 *
 * A turn writes its scenario inside publish's transaction (the turn's
 * own columns are written with its row, store_sqlite_conv.c); a change
 * outside a turn (PATCH/DELETE over HTTP) is a transaction of its own.
 * Both replace the scenario only when its version is still the one the
 * writer read, so a turn and a PATCH racing each other cannot lose
 * either change silently: the later writer gets a conflict.
 */
#include <string.h>

#include "store/store_sqlite_int.h"

/* Replaces the scenario of `id` if its version is `version`; the caller
 * holds a transaction. */
static int replace(struct sqlite_store *st, const char *id, int64_t version, const char *json,
                   struct keel_error *err)
{
    sqlite3_stmt *stmt = st->stmt[ST_SCENARIO_SET];
    int rc;

    BIND_TEXT(stmt, 1, id);
    BIND_TEXT(stmt, 2, json);   /* NULL binds NULL: no scenario */
    sqlite3_bind_int64(stmt, 3, version);
    if ((rc = sqlite_stmt_exec(st, ST_SCENARIO_SET, "saving the scenario", err)))
        return rc;
    if (sqlite3_changes(st->db) != 1)
        return keel_error_set(err, KEEL_EFAIL, "active_scenario",
                              "the scenario of conversation \"%s\" changed since it was read", id);
    return KEEL_OK;
}

int sqlite_scenario_turn_write(struct sqlite_store *st, const struct store_turn_record *rec,
                               struct keel_error *err)
{
    if (!rec->scenario_changed)
        return KEEL_OK;
    return replace(st, rec->conversation_id, rec->scenario_version, rec->scenario_json, err);
}

int sqlite_scenario_set(struct store *store, const char *id, int64_t version,
                        const char *scenario_json, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    struct store_conversation conv;
    int rc;

    if ((rc = sqlite_load_conversation(store, id, &conv, err)))
        return rc;
    store_conversation_release(&conv);
    if ((rc = sqlite_tx_begin(st, "saving the scenario", err)))
        return rc;
    if ((rc = replace(st, id, version, scenario_json, err)) ||
        (rc = sqlite_tx_commit(st, "saving the scenario", err)))
        sqlite_tx_rollback(st);
    return rc;
}
