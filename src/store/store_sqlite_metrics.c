/*
 * store_sqlite_metrics.c — the seed-000 quality counters of the SQLite
 * backend as read back: their totals, their reset, and their history by
 * periods of N minutes (see store.h). The turn's publish adds to them
 * (store_sqlite_conv.c).
 */
#include <stdint.h>

#include "store/store_sqlite_int.h"

static int add_metric(sqlite3_stmt *stmt, json_t *obj)
{
    const char *name = (const char *)sqlite3_column_text(stmt, 0);

    return !name || json_object_set_new(obj, name, json_integer(sqlite3_column_int64(stmt, 1)));
}

int sqlite_metrics(struct store *store, json_t **out, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc = sqlite_connection_ready(st, err);

    return rc ? rc : sqlite_collect_rows(st, st->stmt[ST_METRICS], json_object(), add_metric,
                                  "reading metrics", out, err);
}

int sqlite_metrics_reset(struct store *store, struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    int rc = sqlite_write_ready(st, err);

    return rc ? rc : sqlite_stmt_exec(st, ST_METRICS_RESET, "resetting metrics", err);
}

int sqlite_metrics_history(struct store *store, int aggregate_minutes, int limit, json_t **out,
                           struct keel_error *err)
{
    struct sqlite_store *st = (struct sqlite_store *)store;
    sqlite3_stmt *stmt;
    json_t *list, *period = NULL;
    int64_t current = -1;
    int rc, step;

    if ((rc = sqlite_connection_ready(st, err)))
        return rc;
    if (!(list = json_array()))
        return keel_error_set(err, KEEL_ENOMEM, "metrics", "out of memory");
    stmt = st->stmt[ST_METRICS_HISTORY];
    sqlite3_bind_int(stmt, 1, aggregate_minutes);
    sqlite3_bind_int(stmt, 2, limit);
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
        int64_t start = sqlite3_column_int64(stmt, 0);
        const char *name = (const char *)sqlite3_column_text(stmt, 1);
        if (start != current) {
            period = json_pack("{s:I, s:i, s:{}}", "start_ms", (json_int_t)(start * 60000),
                               "minutes", aggregate_minutes, "counters");
            if (!period || json_array_append_new(list, period)) {
                step = SQLITE_NOMEM;
                break;
            }
            current = start;
        }
        if (!name || json_object_set_new(json_object_get(period, "counters"), name,
                                         json_integer(sqlite3_column_int64(stmt, 2)))) {
            step = SQLITE_NOMEM;
            break;
        }
    }
    rc = step == SQLITE_DONE ? KEEL_OK : sqlite_fail(st, step, "reading the metrics history", err);
    sqlite_stmt_done(stmt);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}
