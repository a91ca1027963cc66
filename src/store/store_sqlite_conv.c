/*
 * store_sqlite_conv.c — conversations, turns, the decision log and the
 * quality counters' updates in the SQLite backend (see store.h); reading
 * the counters is store_sqlite_metrics.c's.
 *
 * save_turn is the pipeline's publish: one BEGIN IMMEDIATE … COMMIT
 * around the conversation row, the turn's one row (migration 13: both
 * texts, the decision log and the scenario after the turn are columns of
 * it; `messages` and `decisions` are views over it) and the counters
 * (one upsert per table for up to METRIC_SLOTS of them). The events are
 * stored without the correlation id each repeats and get it back when
 * read (store_events_text.h). Any failure rolls the whole transaction back, so a
 * reader (or a process started after a kill -9) sees a turn fully or not
 * at all. The conversation row is only updated when its turn count is
 * the one the turn was computed from; a stale writer changes nothing and
 * gets a conflict. In a batch of turns (store_batch_begin) the turn's
 * rows go into the batch's transaction instead: store_sqlite_batch.c.
 */
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/json.h"
#include "store/store_events_text.h"
#include "store/store_sqlite_int.h"

int sqlite_load_conversation(struct store *store, const char *id, struct store_conversation *out,
                             struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc, step;

    memset(out, 0, sizeof(*out));
    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_CONV_GET];
    BIND_TEXT(stmt, 1, id);
    step = sqlite3_step(stmt);
    if (step == SQLITE_DONE) {
        rc = keel_error_set(err, KEEL_ENOTFOUND, "conversation_id",
                            "no conversation \"%s\"", id);
    } else if (step != SQLITE_ROW) {
        rc = sqlite_fail(st, step, "reading a conversation", err);
    } else {
        out->turns = sqlite3_column_int(stmt, 2);
        out->created_ms = sqlite3_column_int64(stmt, 3);
        out->updated_ms = sqlite3_column_int64(stmt, 4);
        out->scenario_version = sqlite3_column_int64(stmt, 7);
        if (!(out->id = keel_strdup(id)) || sqlite_column_dup(stmt, 0, &out->pack) ||
            sqlite_column_dup(stmt, 1, &out->state_json) ||
            sqlite_column_dup(stmt, 5, &out->owner) ||
            sqlite_column_dup(stmt, 6, &out->scenario_json)) {
            store_conversation_release(out);
            rc = keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
        }
    }
    sqlite_stmt_done(stmt);
    return rc;
}

static int write_conversation(struct sqlite_store *st, const struct store_turn_record *rec,
                              struct keel_error *err)
{
    sqlite3_stmt *stmt;
    int rc;

    if (rec->seq == 1) {
        stmt = st->stmt[ST_CONV_INSERT];
        BIND_TEXT(stmt, 1, rec->conversation_id);
        BIND_TEXT(stmt, 2, rec->pack);
        BIND_TEXT(stmt, 3, rec->state_json);
        sqlite3_bind_int64(stmt, 4, rec->ts_ms);
        BIND_TEXT(stmt, 5, rec->owner);   /* NULL binds NULL */
        rc = sqlite3_step(stmt);
        sqlite_stmt_done(stmt);
        if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
            return keel_error_set(err, KEEL_EFAIL, "conversation_id",
                                  "conversation \"%s\" already exists", rec->conversation_id);
        return rc == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, rc, "saving a conversation", err);
    }
    stmt = st->stmt[ST_CONV_UPDATE];
    BIND_TEXT(stmt, 1, rec->conversation_id);
    BIND_TEXT(stmt, 2, rec->state_json);
    sqlite3_bind_int(stmt, 3, rec->seq);
    sqlite3_bind_int64(stmt, 4, rec->ts_ms);
    BIND_TEXT(stmt, 5, rec->pack);
    if ((rc = sqlite_stmt_exec(st, ST_CONV_UPDATE, "saving a conversation", err)))
        return rc;
    if (sqlite3_changes(st->db) != 1)
        return keel_error_set(err, KEEL_EFAIL, "conversation_id",
                              "conversation \"%s\" changed since it was read (turn %d of %s)",
                              rec->conversation_id, rec->seq, rec->pack);
    return KEEL_OK;
}

/* The turn's one row (migration 13): texts, decision log, scenario, and
 * the events without their correlation ids when they have the usual form
 * (store_events_text.h), else as they are. */
static int write_turn(struct sqlite_store *st, const struct store_turn_record *rec,
                      struct keel_error *err)
{
    sqlite3_stmt *stmt = st->stmt[ST_TURN_INSERT];
    char *events = NULL;
    size_t events_len = 0;
    int rc = rec->events_compacted ? KEEL_OK
                                   : store_events_compact(rec->events_json,
                                                          strlen(rec->events_json),
                                                          rec->correlation_id, &events,
                                                          &events_len);

    if (rc == KEEL_ENOMEM)
        return keel_error_set(err, KEEL_ENOMEM, "events", "out of memory");

    BIND_TEXT(stmt, 1, rec->conversation_id);
    sqlite3_bind_int(stmt, 2, rec->seq);
    BIND_TEXT(stmt, 3, rec->correlation_id);
    sqlite3_bind_int64(stmt, 4, rec->ts_ms);
    sqlite3_bind_int(stmt, 5, rec->clarification != 0);
    BIND_TEXT(stmt, 6, rec->user_text);
    BIND_TEXT(stmt, 7, rec->assistant_text);
    BIND_TEXT(stmt, 8, rec->intent);
    BIND_TEXT(stmt, 9, rec->route);
    BIND_TEXT(stmt, 10, rec->tool);
    BIND_TEXT(stmt, 11, rec->stage_from);
    BIND_TEXT(stmt, 12, rec->stage_to);
    BIND_TEXT(stmt, 13, rec->arguments_json);
    BIND_TEXT(stmt, 14, rec->reasons_json);
    BIND_TEXT(stmt, 15, rec->state_json);
    BIND_TEXT(stmt, 16, rec->deltas_json);
    BIND_TEXT(stmt, 17, rec->sources_json);
    BIND_TEXT(stmt, 18, rec->scenario_json);         /* NULL binds NULL: none */
    BIND_TEXT(stmt, 19, rec->scenario_delta_json);
    BIND_TEXT(stmt, 20, rec->decision_json);
    if (rec->events_compacted)
        BIND_TEXT(stmt, 21, rec->events_json);
    else if (rc == KEEL_OK)
        sqlite3_bind_text(stmt, 21, events, (int)events_len, SQLITE_STATIC);
    else
        BIND_TEXT(stmt, 21, rec->events_json);
    sqlite3_bind_int(stmt, 22, rc == KEEL_OK);
    rc = sqlite_stmt_exec(st, ST_TURN_INSERT, "saving a turn", err);
    keel_free(events);   /* the statement was reset: SQLite holds no pointer to it */
    return rc;
}

int sqlite_metrics_write(struct sqlite_store *st, const struct store_metric *metrics, size_t n,
                         int64_t ts_ms, struct keel_error *err)
{
    static const enum stmt_id ids[2] = {ST_METRIC_ADD, ST_METRIC_MINUTE_ADD};
    int rc;

    for (size_t first = 0; first < n; first += METRIC_SLOTS) {
        size_t k = n - first < METRIC_SLOTS ? n - first : METRIC_SLOTS;
        for (int t = 0; t < 2; t++) {
            sqlite3_stmt *stmt = st->stmt[ids[t]];
            for (size_t i = 0; i < k; i++) {   /* slots past k stay NULL: unused */
                BIND_TEXT(stmt, (int)(2 * i + 1), metrics[first + i].name);
                sqlite3_bind_int64(stmt, (int)(2 * i + 2), metrics[first + i].delta);
            }
            if (ids[t] == ST_METRIC_MINUTE_ADD)
                sqlite3_bind_int64(stmt, 2 * METRIC_SLOTS + 1, ts_ms / 60000);
            if ((rc = sqlite_stmt_exec(st, ids[t], "updating metrics", err)))
                return rc;
        }
    }
    return KEEL_OK;
}

int sqlite_turn_write(struct sqlite_store *st, const struct store_turn_record *rec,
                      int metrics_later, struct keel_error *err)
{
    int rc;

    if ((rc = write_conversation(st, rec, err)) || (rc = write_turn(st, rec, err)) ||
        (!metrics_later &&
         (rc = sqlite_metrics_write(st, rec->metrics, rec->n_metrics, rec->ts_ms, err))) ||
        (rc = sqlite_scenario_turn_write(st, rec, err)) ||
        (rec->memory && (rc = sqlite_memory_write(st, rec->memory, err))) ||
        (rec->personal && (rc = sqlite_personal_write(st, rec->personal, err))))
        return rc;
    return rec->artifact ? sqlite_artifact_write(st, rec, err) : KEEL_OK;
}

int sqlite_save_turn(struct store *store, const struct store_turn_record *rec,
                     struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc;

    if (st->batch)
        return sqlite_batch_save(st, rec, err);
    if ((rc = sqlite_connection_ready(st, err)) ||
        (rc = sqlite_tx_begin(st, "saving a turn", err)))
        return rc;
    if ((rc = sqlite_turn_write(st, rec, 0, err)) ||
        (rc = sqlite_tx_commit(st, "saving a turn", err)))
        sqlite_tx_rollback(st);
    return rc;
}

int sqlite_collect_rows(struct sqlite_store *st, sqlite3_stmt *stmt, json_t *container,
                        int (*add)(sqlite3_stmt *stmt, json_t *container), const char *op,
                        json_t **out, struct keel_error *err)
{
    int rc, step, bad_json = 0;

    if (!container) {
        sqlite_stmt_done(stmt);
        return keel_error_set(err, KEEL_ENOMEM, op, "out of memory");
    }
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW)
        if ((rc = add(stmt, container))) {
            bad_json = rc == KEEL_EIO;
            step = SQLITE_NOMEM;
            break;
        }
    if (bad_json)
        rc = keel_error_set(err, KEEL_EIO, op, "%s: a stored row is not valid JSON", st->path);
    else
        rc = step == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, step, op, err);
    sqlite_stmt_done(stmt);
    if (rc)
        json_decref(container);
    else
        *out = container;
    return rc;
}

/* Parses JSON `text` (`len` bytes; NULL: JSON null) into `obj`[key];
 * KEEL_ENOMEM (a text that is not JSON is reported as KEEL_EIO). */
static int set_parsed_text(json_t *obj, const char *key, const char *text, size_t len,
                           struct keel_error *err)
{
    json_t *value = NULL;
    int rc;

    if (!text)
        return json_object_set_new(obj, key, json_null())
                   ? keel_error_set(err, KEEL_ENOMEM, "correlation_id", "out of memory")
                   : KEEL_OK;
    if ((rc = keel_json_parse(text, len, len + 1, key, &value, err)))
        return rc == KEEL_ENOMEM ? rc : keel_error_set(err, KEEL_EIO, key, "stored %s is not JSON", key);
    return json_object_set_new(obj, key, value)
               ? keel_error_set(err, KEEL_ENOMEM, "correlation_id", "out of memory")
               : KEEL_OK;
}

/* set_parsed_text of a stored JSON text column. */
static int set_parsed(json_t *obj, const char *key, sqlite3_stmt *stmt, int col,
                      struct keel_error *err)
{
    const char *text = (const char *)sqlite3_column_text(stmt, col);

    return set_parsed_text(obj, key, text, text ? strlen(text) : 0, err);
}

/* One turn of ST_TURNS_LIST with the sources its answer cites by number
 * (KEEL_EIO: a stored text that is not JSON; other nonzero: out of
 * memory). */
static int add_turn(sqlite3_stmt *stmt, json_t *list)
{
    json_t *turn = json_pack("{s:i,s:I,s:s?,s:s?,s:b}", "turn", sqlite3_column_int(stmt, 0), "ts",
                             (json_int_t)sqlite3_column_int64(stmt, 1), "user",
                             (const char *)sqlite3_column_text(stmt, 3), "assistant",
                             (const char *)sqlite3_column_text(stmt, 4), "clarification",
                             sqlite3_column_int(stmt, 2));
    struct keel_error err;

    int rc = turn ? set_parsed(turn, "sources", stmt, 5, &err) : KEEL_ENOMEM;

    if (rc) {
        json_decref(turn);
        return rc;
    }
    return json_array_append_new(list, turn);
}

/* The turn's events (column `col`), their correlation ids put back when
 * the row stored them without (column `flag`, migration 13). */
static int set_events(json_t *obj, sqlite3_stmt *stmt, int col, int flag, const char *id,
                      struct keel_error *err)
{
    const char *text = (const char *)sqlite3_column_text(stmt, col);
    char *events = NULL;
    size_t len = 0;
    int rc;

    if (!text || !sqlite3_column_int(stmt, flag))
        return set_parsed(obj, "events", stmt, col, err);
    if (!id)
        return keel_error_set(err, KEEL_EIO, "events", "stored events lack their turn's id");
    /* no cap: a turn's events have none of their own (publish allows
     * 4 x STORE_TEXT_MAX), and the text read back is the one written */
    rc = store_events_expand(text, (size_t)sqlite3_column_bytes(stmt, col), id, SIZE_MAX / 2,
                             &events, &len);
    if (rc == KEEL_ENOMEM)
        return keel_error_set(err, KEEL_ENOMEM, "correlation_id", "out of memory");
    if (rc)
        return keel_error_set(err, KEEL_EIO, "events", "stored events are not a list of events");
    rc = set_parsed_text(obj, "events", events, len, err);
    keel_free(events);
    return rc;
}

int sqlite_get_turn(struct store *store, const char *correlation_id, json_t **out,
                    struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    json_t *turn = NULL;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_TURN_GET];
    BIND_TEXT(stmt, 1, correlation_id);
    step = sqlite3_step(stmt);
    if (step == SQLITE_DONE) {
        rc = keel_error_set(err, KEEL_ENOTFOUND, "correlation_id", "no turn \"%s\"",
                            correlation_id);
    } else if (step != SQLITE_ROW) {
        rc = sqlite_fail(st, step, "reading a turn", err);
    } else if (!(turn = json_pack("{s:s?,s:i,s:I,s:b,s:s?,s:s?,s:s?}", "conversation_id",
                                  (const char *)sqlite3_column_text(stmt, 0), "turn",
                                  sqlite3_column_int(stmt, 1), "ts",
                                  (json_int_t)sqlite3_column_int64(stmt, 2), "clarification",
                                  sqlite3_column_int(stmt, 3), "user",
                                  (const char *)sqlite3_column_text(stmt, 4), "assistant",
                                  (const char *)sqlite3_column_text(stmt, 5), "correlation_id",
                                  (const char *)sqlite3_column_text(stmt, 10)))) {
        rc = keel_error_set(err, KEEL_ENOMEM, "correlation_id", "out of memory");
    } else if (!(rc = set_parsed(turn, "state", stmt, 6, err)) &&
               !(rc = set_events(turn, stmt, 7, 13, json_string_value(json_object_get(
                                                          turn, "correlation_id")), err)) &&
               !(rc = set_parsed(turn, "sources", stmt, 8, err)) &&
               !(rc = set_parsed(turn, "decision", stmt, 9, err)) &&
               !(rc = set_parsed(turn, "active_scenario", stmt, 11, err)) &&
               !(rc = set_parsed(turn, "scenario_delta", stmt, 12, err))) {
        *out = turn;
        turn = NULL;
    }
    json_decref(turn);
    sqlite_stmt_done(stmt);
    return rc;
}

int sqlite_list_turns(struct store *store, const char *id, json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    struct store_conversation conv;
    int rc;

    if ((rc = sqlite_load_conversation(store, id, &conv, err)))
        return rc;
    store_conversation_release(&conv);
    BIND_TEXT(st->stmt[ST_TURNS_LIST], 1, id);
    return sqlite_collect_rows(st, st->stmt[ST_TURNS_LIST], json_array(), add_turn,
                               "reading turns", out, err);
}

static int add_conversation(sqlite3_stmt *stmt, json_t *list)
{
    json_t *c = json_pack("{s:s?,s:s?,s:i,s:I,s:I}", "id",
                          (const char *)sqlite3_column_text(stmt, 0), "pack",
                          (const char *)sqlite3_column_text(stmt, 1), "turns",
                          sqlite3_column_int(stmt, 2), "created_ms",
                          (json_int_t)sqlite3_column_int64(stmt, 3), "updated_ms",
                          (json_int_t)sqlite3_column_int64(stmt, 4));

    return !c || json_array_append_new(list, c);
}

int sqlite_list_conversations(struct store *store, const char *owner, int limit, int offset,
                              json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc = sqlite_connection_ready(st, err);

    if (rc)
        return rc;
    stmt = st->stmt[ST_CONV_LIST];
    BIND_TEXT(stmt, 1, owner);
    sqlite3_bind_int(stmt, 2, limit);
    sqlite3_bind_int(stmt, 3, offset);
    return sqlite_collect_rows(st, stmt, json_array(), add_conversation,
                               "listing conversations", out, err);
}

int sqlite_delete_conversation(struct store *store, const char *id, struct keel_error *err)
{
    static const enum stmt_id steps[] = {ST_CONV_DELETE_FACTS, ST_CONV_DELETE_ARTIFACTS,
                                         ST_CONV_DELETE_SHARES, ST_CONV_DELETE_TURNS,
                                         ST_CONV_DELETE};
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc;

    if ((rc = sqlite_connection_ready(st, err)) ||
        (rc = sqlite_tx_begin(st, "deleting a conversation", err)))
        return rc;
    rc = sqlite_memory_erase_conversation(st, id, keel_clock_now(), err);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && !rc; i++) {
        BIND_TEXT(st->stmt[steps[i]], 1, id);
        rc = sqlite_stmt_exec(st, steps[i], "deleting a conversation", err);
    }
    if (!rc && sqlite3_changes(st->db) != 1)
        rc = keel_error_set(err, KEEL_ENOTFOUND, "conversation_id", "no conversation \"%s\"",
                            id);
    if (!rc)
        rc = sqlite_tx_commit(st, "deleting a conversation", err);
    if (rc)
        sqlite_tx_rollback(st);
    return rc;
}
