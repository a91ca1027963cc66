/*
 * store_sqlite_artifacts.c — artifacts and facts in the SQLite store
 * (migration 9). A turn's artifact and its facts are written by
 * sqlite_save_turn inside the turn's transaction, so under kill -9 a
 * turn, its artifact and its facts exist together or not at all. Reads
 * hand back the artifact as stored (its JSON text parsed).
 */
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "store/store_sqlite_int.h"

int sqlite_artifact_write(struct sqlite_store *st, const struct store_turn_record *rec,
                          struct keel_error *err)
{
    const struct store_artifact *a = rec->artifact;
    sqlite3_stmt *stmt = st->stmt[ST_ART_INSERT];
    int rc;

    BIND_TEXT(stmt, 1, a->id);
    BIND_TEXT(stmt, 2, rec->conversation_id);
    sqlite3_bind_int(stmt, 3, rec->seq);
    BIND_TEXT(stmt, 4, a->type);
    BIND_TEXT(stmt, 5, a->title);
    BIND_TEXT(stmt, 6, a->body_json);
    sqlite3_bind_int64(stmt, 7, rec->ts_ms);
    rc = sqlite3_step(stmt);
    sqlite_stmt_done(stmt);
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return keel_error_set(err, KEEL_EFAIL, "artifact.id", "an artifact \"%s\" exists", a->id);
    if (rc != SQLITE_DONE)
        return sqlite_fail(st, rc, "saving an artifact", err);
    for (size_t i = 0; i < a->n_facts; i++) {
        const struct store_fact *f = &a->facts[i];
        stmt = st->stmt[ST_FACT_INSERT];
        BIND_TEXT(stmt, 1, f->id);
        BIND_TEXT(stmt, 2, a->id);
        BIND_TEXT(stmt, 3, rec->conversation_id);
        BIND_TEXT(stmt, 4, f->store);
        BIND_TEXT(stmt, 5, f->topic);
        BIND_TEXT(stmt, 6, f->fact);
        BIND_TEXT(stmt, 7, f->source);
        sqlite3_bind_double(stmt, 8, f->confidence);
        BIND_TEXT(stmt, 9, f->tags_json);
        BIND_TEXT(stmt, 10, f->evidence_snippet);
        sqlite3_bind_int64(stmt, 11, rec->ts_ms);
        BIND_TEXT(stmt, 12, f->domain);
        rc = sqlite3_step(stmt);
        sqlite_stmt_done(stmt);
        if ((rc & 0xff) == SQLITE_CONSTRAINT)
            return keel_error_set(err, KEEL_EFAIL, "artifact.facts.id", "a fact \"%s\" exists",
                                  f->id);
        if (rc != SQLITE_DONE)
            return sqlite_fail(st, rc, "saving a fact", err);
    }
    return KEEL_OK;
}

/* Column `col` (JSON text stored by this backend) parsed; NULL when out
 * of memory. */
static json_t *column_json(sqlite3_stmt *stmt, int col)
{
    const char *text = (const char *)sqlite3_column_text(stmt, col);

    return text ? json_loads(text, 0, NULL) : json_null();
}

/* {id, type, title, turn, created_ms, artifact} of the current row. */
static json_t *artifact_row(sqlite3_stmt *stmt)
{
    json_t *body = column_json(stmt, 5);

    if (!body)
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:i, s:I, s:o}", "id",
                     (const char *)sqlite3_column_text(stmt, 0), "type",
                     (const char *)sqlite3_column_text(stmt, 1), "title",
                     (const char *)sqlite3_column_text(stmt, 2), "turn",
                     sqlite3_column_int(stmt, 3), "created_ms",
                     (json_int_t)sqlite3_column_int64(stmt, 4), "artifact", body);
}

/* Rows come newest first; each goes to the front, so the list is in turn
 * order. */
static int prepend_artifact(sqlite3_stmt *stmt, json_t *list)
{
    return json_array_insert_new(list, 0, artifact_row(stmt));
}

int sqlite_artifacts_list(struct store *store, const char *conversation_id, const char *type,
                          int last, json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_ART_LIST];   /* after: a replaced connection has new statements */
    BIND_TEXT(stmt, 1, conversation_id);
    BIND_TEXT(stmt, 2, type);
    sqlite3_bind_int(stmt, 3, last);
    return sqlite_rows_json(st, stmt, json_array(), prepend_artifact, "artifacts",
                            "listing artifacts", out, err);
}

static json_t *fact_row(sqlite3_stmt *stmt)
{
    json_t *tags = column_json(stmt, 8);

    if (!tags)
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:o, s:s, s:I, s:s}", "id",
                     (const char *)sqlite3_column_text(stmt, 0), "artifact_id",
                     (const char *)sqlite3_column_text(stmt, 1), "conversation_id",
                     (const char *)sqlite3_column_text(stmt, 2), "store",
                     (const char *)sqlite3_column_text(stmt, 3), "topic",
                     (const char *)sqlite3_column_text(stmt, 4), "fact",
                     (const char *)sqlite3_column_text(stmt, 5), "source",
                     (const char *)sqlite3_column_text(stmt, 6), "confidence",
                     sqlite3_column_double(stmt, 7), "tags", tags, "evidence_snippet",
                     (const char *)sqlite3_column_text(stmt, 9), "created_ms",
                     (json_int_t)sqlite3_column_int64(stmt, 10), "domain",
                     (const char *)sqlite3_column_text(stmt, 11));
}

static int append_fact(sqlite3_stmt *stmt, json_t *list)
{
    return json_array_append_new(list, fact_row(stmt));
}

static int collect_facts(struct sqlite_store *st, const struct store_fact_query *q, json_t **out,
                         struct keel_error *err)
{
    sqlite3_stmt *stmt = st->stmt[ST_FACTS_LIST];

    BIND_TEXT(stmt, 1, q->owner);
    BIND_TEXT(stmt, 2, q->store);
    BIND_TEXT(stmt, 3, q->conversation_id);
    BIND_TEXT(stmt, 4, q->artifact_id);
    BIND_TEXT(stmt, 5, q->text);
    sqlite3_bind_int(stmt, 6, q->limit);
    sqlite3_bind_int(stmt, 7, q->offset);
    return sqlite_rows_json(st, stmt, json_array(), append_fact, "facts", "listing facts", out,
                            err);
}

int sqlite_facts_list(struct store *store, const struct store_fact_query *q, json_t **out,
                      struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc = sqlite_connection_ready(st, err);

    return rc ? rc : collect_facts(st, q, out, err);
}

int sqlite_artifact_get(struct store *store, const char *id, json_t **out,
                        struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    struct store_fact_query q = {.artifact_id = id, .limit = STORE_LIMIT_MAX};
    sqlite3_stmt *stmt;
    json_t *row = NULL, *facts = NULL;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_ART_GET];
    BIND_TEXT(stmt, 1, id);
    step = sqlite3_step(stmt);
    if (step == SQLITE_ROW && (!(row = artifact_row(stmt)) ||
                               json_object_set_new(row, "conversation_id",
                                                   json_string((const char *)sqlite3_column_text(
                                                       stmt, 6)))))
        step = SQLITE_NOMEM;
    sqlite_stmt_done(stmt);
    if (step == SQLITE_DONE)
        return keel_error_set(err, KEEL_ENOTFOUND, "artifact_id", "no artifact \"%s\"", id);
    if (step != SQLITE_ROW) {
        json_decref(row);
        return step == SQLITE_NOMEM ? keel_error_set(err, KEEL_ENOMEM, "artifact_id", "out of memory")
                                    : sqlite_fail(st, step, "reading an artifact", err);
    }
    if ((rc = collect_facts(st, &q, &facts, err))) {
        json_decref(row);
        return rc;
    }
    if (json_object_set_new(row, "facts", facts)) {
        json_decref(row);
        return keel_error_set(err, KEEL_ENOMEM, "artifact_id", "out of memory");
    }
    *out = row;
    return KEEL_OK;
}
