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

/* One constructor per tests/unit/test_*.c file. */
Suite *suite_core(void);
Suite *suite_clock(void);
Suite *suite_yaml(void);
Suite *suite_pack(void);
Suite *suite_lexicon(void);
Suite *suite_policy(void);
Suite *suite_replay(void);
Suite *suite_store(void);
Suite *suite_store_conv(void);
Suite *suite_pipeline(void);
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
Suite *suite_json_write(void);

#endif
