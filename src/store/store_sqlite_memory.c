/*
 * store_sqlite_memory.c — long-term memory in the SQLite store
 * (migration 7): runs with their vectors (a BLOB of floats) and every
 * admission decision. A decision and its change are one transaction;
 * the decisions' sequence is what indexes replay to stay in step.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/json.h"
#include "store/store_sqlite_int.h"

static int insert_run(struct sqlite_store *st, const struct store_memory_run *r,
                      struct keel_error *err)
{
    sqlite3_stmt *stmt = st->stmt[ST_MEM_RUN_INSERT];
    int rc;

    BIND_TEXT(stmt, 1, r->id);
    BIND_TEXT(stmt, 2, r->task);
    BIND_TEXT(stmt, 3, r->summary);
    BIND_TEXT(stmt, 4, r->outcome);
    BIND_TEXT(stmt, 5, r->refs_json);
    BIND_TEXT(stmt, 6, r->artifacts_json);
    BIND_TEXT(stmt, 7, r->conversation_id);
    sqlite3_bind_int64(stmt, 8, r->created_ms);
    BIND_TEXT(stmt, 9, r->embedder);
    sqlite3_bind_int(stmt, 10, r->dim);
    sqlite3_bind_blob(stmt, 11, r->vector, r->dim * (int)sizeof(float), SQLITE_STATIC);
    BIND_TEXT(stmt, 12, r->owner);
    rc = sqlite3_step(stmt);
    sqlite_stmt_done(stmt);
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return keel_error_set(err, KEEL_EFAIL, "id", "a run with id \"%s\" exists", r->id);
    return rc == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, rc, "saving a run", err);
}

/* Runs a statement of the change that must touch `want` rows. */
static int change_rows(struct sqlite_store *st, sqlite3_stmt *stmt, int want, const char *target,
                       struct keel_error *err)
{
    int rc = sqlite3_step(stmt);

    sqlite_stmt_done(stmt);
    if (rc != SQLITE_DONE)
        return sqlite_fail(st, rc, "changing a run", err);
    if (sqlite3_changes(st->db) != want)
        return keel_error_set(err, KEEL_ENOTFOUND, "target_run_id",
                              "\"%s\" is not an active run", target);
    return KEEL_OK;
}

int sqlite_memory_write(struct sqlite_store *st, const struct store_memory_change *c,
                        struct keel_error *err)
{
    sqlite3_stmt *stmt;
    int rc = KEEL_OK;

    if (strcmp(c->decision, "NOT"))
        rc = insert_run(st, c->run, err);
    if (!rc && !strcmp(c->decision, "REPLACE")) {
        stmt = st->stmt[ST_MEM_SUPERSEDE];
        BIND_TEXT(stmt, 1, c->target_id);
        BIND_TEXT(stmt, 2, c->run->id);
        rc = change_rows(st, stmt, 1, c->target_id, err);
    } else if (!rc && !strcmp(c->decision, "MERGE")) {
        stmt = st->stmt[ST_MEM_MERGE];
        BIND_TEXT(stmt, 1, c->target_id);
        BIND_TEXT(stmt, 2, c->run->id);
        sqlite3_bind_int(stmt, 3, c->new_canonical);
        BIND_TEXT(stmt, 4, c->merged_refs_json);
        rc = change_rows(st, stmt, 2, c->target_id, err);
    }
    if (rc)
        return rc;
    stmt = st->stmt[ST_MEM_DECISION_INSERT];
    BIND_TEXT(stmt, 1, c->run->id);
    BIND_TEXT(stmt, 2, c->decision);
    BIND_TEXT(stmt, 3, c->target_id);
    BIND_TEXT(stmt, 4, c->reason);
    if (c->similarity >= 0)
        sqlite3_bind_double(stmt, 5, c->similarity);
    else
        sqlite3_bind_null(stmt, 5);
    BIND_TEXT(stmt, 6, c->judge);
    BIND_TEXT(stmt, 7, c->run->task);
    sqlite3_bind_int64(stmt, 8, c->ts_ms);
    BIND_TEXT(stmt, 9, c->run->owner);
    BIND_TEXT(stmt, 10, c->run->conversation_id);
    rc = sqlite3_step(stmt);
    sqlite_stmt_done(stmt);
    return rc == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, rc, "saving a decision", err);
}

int sqlite_memory_apply(struct store *store, const struct store_memory_change *change,
                        struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc;

    if ((rc = sqlite_connection_ready(st, err)) ||
        (rc = sqlite_tx_begin(st, "saving a memory decision", err)))
        return rc;
    if ((rc = sqlite_memory_write(st, change, err))) {
        sqlite_tx_rollback(st);
        return rc;
    }
    return sqlite_tx_commit(st, "saving a memory decision", err);
}

int sqlite_memory_sync(struct store *store, int64_t *seq, store_memory_fn fn, void *ctx,
                       struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_MEM_SYNC];
    sqlite3_bind_int64(stmt, 1, *seq);
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *decision = (const char *)sqlite3_column_text(stmt, 1);
        const char *run = (const char *)sqlite3_column_text(stmt, 2);
        const char *target = (const char *)sqlite3_column_text(stmt, 3);
        int dim = sqlite3_column_int(stmt, 5);
        const void *blob = sqlite3_column_blob(stmt, 6);

        int64_t at = sqlite3_column_int64(stmt, 0);
        int erased = sqlite3_column_type(stmt, 8) != SQLITE_NULL;
        if (!strcmp(decision, "NOT")) {
            *seq = at;
            continue;
        }
        if (!strcmp(decision, "ERASE")) {   /* its conversation was deleted */
            if ((rc = fn(ctx, run, NULL, NULL, 0, NULL)))
                break;
            *seq = at;
            continue;
        }
        if (!erased && (!blob || sqlite3_column_bytes(stmt, 6) != dim * (int)sizeof(float))) {
            rc = keel_error_set(err, KEEL_EIO, "memory", "run \"%s\" has a damaged vector", run);
            break;
        }
        /* an erased run (its vector emptied) is never put back */
        if (!erased && (rc = fn(ctx, run, (const char *)sqlite3_column_text(stmt, 7),
                                (const char *)sqlite3_column_text(stmt, 4), dim, blob)))
            break;
        if (!strcmp(decision, "REPLACE") && (rc = fn(ctx, target, NULL, NULL, 0, NULL)))
            break;
        *seq = at;   /* only once its changes were followed */
    }
    sqlite_stmt_done(stmt);
    if (!rc && step != SQLITE_DONE)
        rc = sqlite_fail(st, step, "reading memory decisions", err);
    else if (rc && !err->code)
        keel_error_set(err, rc, "memory", "the index could not follow the store");
    return rc;
}

static json_t *run_json(sqlite3_stmt *stmt)
{
    json_t *refs = NULL, *artifacts = NULL;
    const char *r = (const char *)sqlite3_column_text(stmt, 4);
    const char *a = (const char *)sqlite3_column_text(stmt, 5);

    refs = json_loads(r, 0, NULL);
    artifacts = json_loads(a, 0, NULL);
    if (!refs || !artifacts) {   /* stored as JSON arrays: out of memory */
        json_decref(refs);
        json_decref(artifacts);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s?, s:I, s:s, s:s?, s:b, s:i, s:s*}", "id",
                     (const char *)sqlite3_column_text(stmt, 0), "task",
                     (const char *)sqlite3_column_text(stmt, 1), "summary",
                     (const char *)sqlite3_column_text(stmt, 2), "outcome",
                     (const char *)sqlite3_column_text(stmt, 3), "references",
                     refs ? refs : json_array(), "artifacts", artifacts ? artifacts : json_array(),
                     "conversation_id", (const char *)sqlite3_column_text(stmt, 6), "created_at",
                     (json_int_t)sqlite3_column_int64(stmt, 7), "status",
                     (const char *)sqlite3_column_text(stmt, 8), "superseded_by",
                     (const char *)sqlite3_column_text(stmt, 9), "canonical",
                     sqlite3_column_int(stmt, 10), "uses", sqlite3_column_int(stmt, 11),
                     "owner", (const char *)sqlite3_column_text(stmt, 12));
}

/* ---- the runs read, kept -------------------------------------------------------- */

/* Memory admission asks for the same few runs decision after decision
 * (the nearest ones to each new run), and making a run's JSON — parsing
 * its references and artifacts, checking its texts — was most of a
 * read. So the JSON of the last RUN_CACHE_SIZE runs read is kept with
 * the exact bytes of the row it was made from: each read still reads
 * the row, and reuses the JSON only when every column is the same,
 * byte for byte. Whatever changes a row (this process or another)
 * makes another JSON; nothing has to tell the cache. Rows over
 * RUN_KEPT_MAX bytes are not kept, so the cache holds at most about
 * 32 × 16 KiB of rows and their JSON. */
#define RUN_CACHE_SIZE 32
#define RUN_KEPT_MAX (16u << 10)   /* bytes of a row kept: a run's texts may be 16 KiB each */
#define RUN_COLUMNS 13                               /* of ST_MEM_GET */
#define RUN_INT_COLUMNS ((1u << 7) | (1u << 10) | (1u << 11))  /* created_at, canonical, uses */

struct run_entry {
    char *row;          /* the row's bytes (row_bytes); NULL: a free entry */
    size_t len;
    json_t *run;        /* made from them by run_json */
    uint64_t used;
};

struct sqlite_run_cache {
    struct run_entry e[RUN_CACHE_SIZE];
    uint64_t clock;
    struct keel_buf row;   /* the row being read */
};

void sqlite_memory_cache_free(struct sqlite_store *st)
{
    struct sqlite_run_cache *c = st->run_cache;

    if (!c)
        return;
    for (int i = 0; i < RUN_CACHE_SIZE; i++) {
        keel_free(c->e[i].row);
        json_decref(c->e[i].run);
    }
    keel_buf_release(&c->row);
    keel_free(c);
    st->run_cache = NULL;
}

/* The row's bytes into `b`: every column run_json reads, each told from
 * NULL and from the others by its length. Nonzero when a text could not
 * be read (out of memory): such a row is not kept. */
static int row_bytes(sqlite3_stmt *stmt, struct keel_buf *b)
{
    int rc = KEEL_OK;

    keel_buf_truncate(b, 0);
    for (int i = 0; i < RUN_COLUMNS && !rc; i++) {
        if (RUN_INT_COLUMNS >> i & 1) {
            int64_t v = sqlite3_column_int64(stmt, i);
            rc = keel_buf_add(b, &v, sizeof(v));
        } else if (sqlite3_column_type(stmt, i) == SQLITE_NULL) {   /* before any conversion */
            rc = keel_buf_add(b, "N", 1);
        } else {
            const unsigned char *t = sqlite3_column_text(stmt, i);
            size_t n = (size_t)sqlite3_column_bytes(stmt, i);
            if (!t)
                return KEEL_ENOMEM;
            if (!(rc = keel_buf_add(b, "T", 1)) && !(rc = keel_buf_add(b, &n, sizeof(n))))
                rc = keel_buf_add(b, t, n);
        }
    }
    return rc;
}

/* The JSON of the row `stmt` is on: the kept one when the row is the
 * same, else a new one, then kept. A new reference, or NULL when out of
 * memory. */
static json_t *run_json_kept(struct sqlite_store *st, sqlite3_stmt *stmt)
{
    struct sqlite_run_cache *c = st->run_cache;
    struct run_entry *e, *oldest;
    json_t *run;
    char *row;

    if (!c && (c = st->run_cache = keel_calloc(1, sizeof(*c))))
        keel_buf_init(&c->row, 0);
    if (!c || row_bytes(stmt, &c->row) || c->row.len > RUN_KEPT_MAX)
        return run_json(stmt);   /* not kept */
    oldest = &c->e[0];
    for (e = c->e; e < c->e + RUN_CACHE_SIZE; e++) {
        if (e->row && e->len == c->row.len && !memcmp(e->row, c->row.data, e->len)) {
            e->used = ++c->clock;
            return json_incref(e->run);
        }
        if (e->used < oldest->used)
            oldest = e;
    }
    if (!(run = run_json(stmt)) || !(row = keel_malloc(c->row.len)))
        return run;   /* not kept */
    memcpy(row, c->row.data, c->row.len);
    keel_free(oldest->row);
    json_decref(oldest->run);
    *oldest = (struct run_entry){row, c->row.len, json_incref(run), ++c->clock};
    return run;
}

int sqlite_memory_get(struct store *store, const char *const *ids, size_t n, json_t **out,
                      struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    json_t *list;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_MEM_GET];   /* after: a replaced connection has new statements */
    if (!(list = json_array()))
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        BIND_TEXT(stmt, 1, ids[i]);
        step = sqlite3_step(stmt);
        if (step == SQLITE_ROW) {
            if (json_array_append_new(list, run_json_kept(st, stmt)))
                rc = keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        } else if (step != SQLITE_DONE) {
            rc = sqlite_fail(st, step, "reading runs", err);
        }
        sqlite_stmt_done(stmt);
    }
    if (rc) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return KEEL_OK;
}

static int append_decision(sqlite3_stmt *stmt, json_t *list)
{
    json_t *d = json_pack(
        "{s:I, s:s, s:s, s:s?, s:s, s:o, s:s, s:s, s:I}", "seq",
        (json_int_t)sqlite3_column_int64(stmt, 0), "run_id",
        (const char *)sqlite3_column_text(stmt, 1), "decision",
        (const char *)sqlite3_column_text(stmt, 2), "target_run_id",
        (const char *)sqlite3_column_text(stmt, 3), "reason",
        (const char *)sqlite3_column_text(stmt, 4), "similarity",
        sqlite3_column_type(stmt, 5) == SQLITE_NULL ? json_null()
                                                    : json_real(sqlite3_column_double(stmt, 5)),
        "judge", (const char *)sqlite3_column_text(stmt, 6), "task",
        (const char *)sqlite3_column_text(stmt, 7), "ts",
        (json_int_t)sqlite3_column_int64(stmt, 8));

    return json_array_append_new(list, d);
}

int sqlite_memory_decisions(struct store *store, const char *owner, int limit, int offset,
                            json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    int rc;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    stmt = st->stmt[ST_MEM_DECISIONS];   /* after: a replaced connection has new statements */
    sqlite3_bind_int(stmt, 1, limit);
    sqlite3_bind_int(stmt, 2, offset);
    BIND_TEXT(stmt, 3, owner);
    return sqlite_rows_json(st, stmt, json_array(), append_decision, "memory",
                            "reading memory decisions", out, err);
}

/* The runs an erasure of conversation ?1 takes: made from its turns (or
 * posted naming it) by its owner, not yet erased. */
#define ERASED_RUNS                                                                 \
    "SELECT id FROM memory_runs WHERE conversation_id = ?1 AND erased_at IS NULL" \
    " AND coalesce(owner, '') = coalesce((SELECT owner FROM conversations WHERE id = ?1), '')"

/* Decisions made in conversation ?1 (NOT ones included: they store no
 * run) by its owner. */
#define SAME_CONVERSATION \
    "(conversation_id = ?1 AND coalesce(owner, '') ="                \
    " coalesce((SELECT owner FROM conversations WHERE id = ?1), ''))"

int sqlite_memory_erase_conversation(struct sqlite_store *st, const char *conversation_id,
                                     int64_t now_ms, struct keel_error *err)
{
    static const char *const steps[] = {
        /* 1. the decisions of those runs stop showing their task; a
         * model's reason (free text) about them is replaced */
        "UPDATE memory_decisions SET task = '' WHERE " SAME_CONVERSATION
        " OR run_id IN (" ERASED_RUNS ")",
        "UPDATE memory_decisions SET reason = '(erased with its conversation)'"
        " WHERE judge = 'model' AND (" SAME_CONVERSATION " OR run_id IN (" ERASED_RUNS ")"
        " OR target_run_id IN (" ERASED_RUNS "))",
        /* 2. an ERASE decision per run: other processes' indexes drop it */
        "INSERT INTO memory_decisions (run_id, decision, target_run_id, reason, similarity,"
        " judge, task, created_at, owner, conversation_id)"
        " SELECT id, 'ERASE', NULL, 'its conversation was deleted', NULL, 'delete', '', ?2,"
        " owner, ?1 FROM memory_runs WHERE id IN (" ERASED_RUNS ") ORDER BY seq",
        /* 3. the runs keep their id, outcome, owner and times; their texts,
         * references, artifacts and vector are gone */
        "UPDATE memory_runs SET erased_at = ?2, task = '', summary = '', refs = '[]',"
        " artifacts = '[]', vector = X'', canonical = 0 WHERE id IN (" ERASED_RUNS ")",
    };
    int rc = KEEL_OK;

    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && !rc; i++) {
        sqlite3_stmt *stmt = NULL;
        int step = sqlite3_prepare_v2(st->db, steps[i], -1, &stmt, NULL);
        if (step == SQLITE_OK) {
            BIND_TEXT(stmt, 1, conversation_id);
            sqlite3_bind_int64(stmt, 2, now_ms);
            step = sqlite3_step(stmt);
        }
        sqlite3_finalize(stmt);
        if (step != SQLITE_DONE)
            rc = sqlite_fail(st, step, "erasing a conversation's runs", err);
    }
    return rc;
}
