/*
 * main.c — runs every unit suite, each test forked; exits non-zero when any
 * test fails or errors. Check prints the closing "N%: Checks: …" line.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "core/alloc.h"
#include "core/json.h"
#include "store/store.h"
#include "unit.h"

static long live_at_start;

static void leak_setup(void)
{
    keel_json_init();
    keel_alloc_fail_after(-1, 0);
    live_at_start = keel_alloc_live();
}

static void leak_teardown(void)
{
    keel_alloc_fail_after(-1, 0);
    ck_assert_msg(keel_alloc_live() == live_at_start,
                  "test leaked %ld keel allocation(s)", keel_alloc_live() - live_at_start);
}

void unit_leak_fixture(TCase *tc)
{
    tcase_add_checked_fixture(tc, leak_setup, leak_teardown);
}

void unit_temp_dir(char *out, size_t n, const char *tag, int prefer_shm)
{
    snprintf(out, n, "%s/keel-unit-%s-XXXXXX",
             prefer_shm && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", tag);
    ck_assert_ptr_nonnull(mkdtemp(out));
}

void unit_temp_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *entry;
    char path[4096];

    if (!d)
        return;
    while ((entry = readdir(d))) {
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* The backend the store tests of this TCase run on, set by the TCase's
 * unchecked fixture in the parent and inherited by every forked test. */
static int backend_sqlite;
static const char *backend_tag = "store";
static char backend_dir[64];
static char backend_path[UNIT_STORE_PATH_MAX];
static int backend_opened;   /* stores opened by this test: fresh file names */

void unit_backend_mem(void)
{
    backend_sqlite = 0;
}

void unit_backend_sqlite(const char *tag, int prefer_shm)
{
    backend_sqlite = 1;
    backend_tag = tag;
    unit_temp_dir(backend_dir, sizeof(backend_dir), tag, prefer_shm);
}

void unit_backend_sqlite_remove(void)
{
    unit_temp_dir_remove(backend_dir);
}

int unit_backend_is_sqlite(void)
{
    return backend_sqlite;
}

const char *unit_store_path(void)
{
    return backend_path;
}

void unit_sql_text(const char *path, const char *sql, char *out, size_t n)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;

    out[0] = '\0';
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
        snprintf(out, n, "%s", (const char *)sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

void unit_sql_exec(struct sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);

    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
}

struct store *unit_store_fresh(void)
{
    struct store *store = NULL;
    struct keel_error err;
    const char *location = "mem:";

    if (backend_sqlite) {
        snprintf(backend_path, sizeof(backend_path), "%s/%s-%ld-%d.db", backend_dir, backend_tag,
                 (long)getpid(), backend_opened++);
        location = backend_path;
    }
    keel_error_clear(&err);
    ck_assert_msg(store_open(location, &store, &err) == KEEL_OK, "open %s: %s %s", location,
                  err.field, err.message);
    ck_assert_ptr_nonnull(store);
    return store;
}

const char *unit_root(void)
{
    const char *root = getenv("KEEL_ROOT");

    return root && *root ? root : ".";
}

int main(void)
{
    Suite *(*const suites[])(void) = {
        suite_core, suite_clock, suite_yaml, suite_pack, suite_lexicon, suite_policy,
        suite_policy_refine, suite_replay,
        suite_store, suite_store_conv, suite_ingest, suite_pipeline, suite_compose, suite_providers,
        suite_llm,
        suite_memory, suite_memory_hnsw, suite_server, suite_assistant, suite_artifact,
        suite_artifact_store, suite_scenario, suite_bm25, suite_bm25_search, suite_json_write,
        suite_store_migrate, suite_store_events, suite_store_vfs,
    };
    SRunner *runner = srunner_create(NULL);
    int failed;

    keel_alloc_count_live(1);   /* the leak checks compare keel_alloc_live() */
    for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
        srunner_add_suite(runner, suites[i]());
    srunner_set_fork_status(runner, CK_FORK);
    srunner_run_all(runner, CK_NORMAL);
    failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
