/*
 * main.c — runs every unit suite, each test forked; exits non-zero when any
 * test fails or errors. Check prints the closing "N%: Checks: …" line.
 */
#include <stdlib.h>

#include "core/alloc.h"
#include "core/json.h"
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

const char *unit_root(void)
{
    const char *root = getenv("KEEL_ROOT");

    return root && *root ? root : ".";
}

int main(void)
{
    Suite *(*const suites[])(void) = {
        suite_core, suite_clock, suite_yaml, suite_pack, suite_lexicon, suite_policy, suite_replay,
        suite_store, suite_store_conv, suite_ingest, suite_pipeline,
    };
    SRunner *runner = srunner_create(NULL);
    int failed;

    for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
        srunner_add_suite(runner, suites[i]());
    srunner_set_fork_status(runner, CK_FORK);
    srunner_run_all(runner, CK_NORMAL);
    failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
