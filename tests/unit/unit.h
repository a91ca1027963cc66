/*
 * unit.h — shared by the Check unit tests: the suite constructors and a
 * fixture that fails a test which leaves keel allocations behind.
 *
 * Every test runs in its own process (Check's fork mode), so a crash, an
 * overflow caught by ASan or a leak fails that test alone.
 */
#ifndef KEEL_TESTS_UNIT_H
#define KEEL_TESTS_UNIT_H

#include <check.h>
#include <stddef.h>

/* Adds the leak-check fixture: setup initialises jansson on keel's
 * allocator and records the live allocation count; teardown asserts it is
 * back where it started. */
void unit_leak_fixture(TCase *tc);

/* Path of the project root (KEEL_ROOT, else "."), for packs and fixtures. */
const char *unit_root(void);

/* Makes a fresh folder "BASE/keel-unit-TAG-XXXXXX" into `out` (size `n`,
 * at least 64) and fails the test when it cannot; BASE is /dev/shm when
 * `prefer_shm` and writable (fast commits), else /tmp. */
void unit_temp_dir(char *out, size_t n, const char *tag, int prefer_shm);

/* Removes the files of a folder made by unit_temp_dir, then the folder. */
void unit_temp_dir_remove(const char *dir);

/* ---- a store of the TCase's backend --------------------------------------
 * Store tests run the same functions on both backends. A TCase picks one
 * with an unchecked fixture (in the parent, so a SQLite folder goes away
 * even when a forked test fails): unit_backend_mem, or a wrapper calling
 * unit_backend_sqlite(TAG, prefer_shm) with unit_backend_sqlite_remove as
 * teardown. */
struct store;

#define UNIT_STORE_PATH_MAX 192

void unit_backend_mem(void);
/* Makes the folder (unit_temp_dir) the SQLite files go into; `tag` must
 * outlive the TCase (a literal) and prefixes both folder and files. */
void unit_backend_sqlite(const char *tag, int prefer_shm);
void unit_backend_sqlite_remove(void);
int unit_backend_is_sqlite(void);

/* Opens a fresh, empty store of the TCase's backend ("mem:" or a new
 * SQLite file); fails the test when it cannot. The caller closes it. */
struct store *unit_store_fresh(void);

/* The file of the last store unit_store_fresh opened (SQLite), else "". */
const char *unit_store_path(void);

/* Runs `sql` on the SQLite file `path` through a read-only connection of
 * its own: the text of the first column of the first row into `out` ("" if
 * none). Fails the test when the statement does not prepare. */
void unit_sql_text(const char *path, const char *sql, char *out, size_t n);

/* Runs `sql` (statements separated by ';') on the open connection `db`;
 * fails the test with SQLite's message when any fails. */
struct sqlite3;
void unit_sql_exec(struct sqlite3 *db, const char *sql);

/* One constructor per tests/unit/test_*.c file. */
Suite *suite_core(void);
Suite *suite_clock(void);
Suite *suite_yaml(void);
Suite *suite_pack(void);
Suite *suite_lexicon(void);
Suite *suite_policy(void);
Suite *suite_policy_refine(void);
Suite *suite_replay(void);
Suite *suite_store(void);
Suite *suite_store_conv(void);
Suite *suite_pipeline(void);
Suite *suite_compose(void);
Suite *suite_ingest(void);
Suite *suite_providers(void);
Suite *suite_llm(void);
Suite *suite_memory(void);
Suite *suite_memory_hnsw(void);
Suite *suite_server(void);
Suite *suite_assistant(void);
Suite *suite_artifact(void);
Suite *suite_artifact_store(void);
Suite *suite_scenario(void);
Suite *suite_bm25(void);
Suite *suite_bm25_search(void);
Suite *suite_json_write(void);
Suite *suite_store_migrate(void);
Suite *suite_store_events(void);
Suite *suite_store_vfs(void);

#endif
