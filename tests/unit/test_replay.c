/*
 * test_replay.c — unit tests of the replay harness (src/replay/replay.h):
 * fixtures written inline run through replay_run_text against the real
 * packs, with the report captured in an open_memstream. A passing case
 * prints nothing; a mismatch prints one exact FAIL line per wrong field;
 * an unknown key at any level, a missing `now` on an unpinned clock or a
 * malformed file is an ERROR, never a silent pass; one case, an array of
 * cases and JSON lines all work, and the stats count each case once.
 * Fixtures are written with ' for " to keep them readable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "replay/expect.h"
#include "replay/replay.h"
#include "unit.h"

#define NOW_MS INT64_C(1770465600000)  /* 2026-02-07T12:00:00Z */

struct outcome {
    char text[8192];           /* everything the runner printed */
    struct replay_stats stats;
};

/* Runs `fixture` (with ' standing for ") as origin "t.json". */
static void run(const char *fixture, struct outcome *o)
{
    char packs[1024], *printed = NULL, *json = strdup(fixture);
    size_t printed_len = 0;
    FILE *out = open_memstream(&printed, &printed_len);
    struct replay *replay;

    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(out);
    for (char *p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    snprintf(packs, sizeof(packs), "%s/packs", unit_root());
    replay = replay_new(packs, out);
    ck_assert_ptr_nonnull(replay);
    memset(&o->stats, 0, sizeof(o->stats));
    replay_run_text(replay, json, strlen(json), "t.json", &o->stats);
    replay_free(replay);
    fclose(out);
    snprintf(o->text, sizeof(o->text), "%s", printed ? printed : "");
    free(printed);
    free(json);
}

static void assert_printed(const struct outcome *o, const char *needle)
{
    ck_assert_msg(strstr(o->text, needle) != NULL, "output lacks\n  %s\ngot\n%s", needle, o->text);
}

static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);

    for (const char *line = text; *line; ) {
        const char *end = strchr(line, '\n');
        if (!strncmp(line, prefix, len))
            n++;
        if (!end)
            break;
        line = end + 1;
    }
    return n;
}

#define SEARCH_CASE(name, expect)                                                  \
    "{'name': '" name "', 'pack': 'scholar', 'now': '2026-02-07T12:00:00Z',"     \
    " 'turns': [{'user': 'Find open access papers on CRISPR since 2020',"       \
    " 'expect': " expect "}]}"

START_TEST(test_passing_case)
{
    struct outcome o;

    run(SEARCH_CASE("passes",
                    "{'intent': 'direct_search', 'route': 'websearch', 'tool_veto': false,"
                    " 'reason': 'paper_search_request', 'force_tool': 'search_papers',"
                    " 'stage_transition': 'finding_papers',"
                    " 'signals': {'explicit': true, 'volatile': false, 'topic_class': 'science'},"
                    " 'search': {'query': 'CRISPR', 'query_contains': ['crispr'],"
                    "            'query_not_contains': ['papers', 'since'], 'count': 5,"
                    "            'year_from': 2020, 'year_to': null, 'open_access_only': true},"
                    " 'reasons_include': ['year_since', 'open_access_requested'],"
                    " 'reasons_exclude': ['input_truncated']}"),
        &o);
    ck_assert_str_eq(o.text, "");
    ck_assert_int_eq(o.stats.passed, 1);
    ck_assert_int_eq(o.stats.failed, 0);

    /* Only the keys present are checked: an empty expect passes. */
    run(SEARCH_CASE("empty expect", "{}"), &o);
    ck_assert_str_eq(o.text, "");
    ck_assert_int_eq(o.stats.passed, 1);
}
END_TEST

START_TEST(test_mismatch_lines)
{
    struct outcome o;

    run(SEARCH_CASE("wrong route", "{'route': 'llm_only', 'intent': 'direct_search'}"), &o);
    ck_assert_str_eq(o.text, "FAIL t.json: case \"wrong route\" turn 1: route: expected "
                             "\"llm_only\", actual \"websearch\"\n");
    ck_assert_int_eq(o.stats.passed, 0);
    ck_assert_int_eq(o.stats.failed, 1);

    /* Every wrong field is named, nested ones by their path; one case fails once. */
    run(SEARCH_CASE("many",
                    "{'tool_veto': true, 'search': {'count': 7, 'year_from': 2019},"
                    " 'signals': {'topic_class': 'news'}, 'force_tool': null}"),
        &o);
    assert_printed(&o, "FAIL t.json: case \"many\" turn 1: tool_veto: expected true, actual false\n");
    assert_printed(&o, "FAIL t.json: case \"many\" turn 1: search.count: expected 7, actual 5\n");
    assert_printed(&o, "FAIL t.json: case \"many\" turn 1: search.year_from: expected 2019, "
                       "actual 2020\n");
    assert_printed(&o, "FAIL t.json: case \"many\" turn 1: signals.topic_class: expected \"news\", "
                       "actual \"science\"\n");
    assert_printed(&o, "FAIL t.json: case \"many\" turn 1: force_tool: expected null, "
                       "actual \"search_papers\"\n");
    ck_assert_int_eq(count_lines(o.text, "FAIL "), 5);
    ck_assert_int_eq(o.stats.failed, 1);

    /* List checks report the item that is missing or present. */
    run(SEARCH_CASE("lists",
                    "{'reasons_include': ['year_range'], 'reasons_exclude': ['year_since'],"
                    " 'search': {'query_contains': ['bees'], 'query_not_contains': ['crispr']}}"),
        &o);
    assert_printed(&o, "turn 1: reasons_include: expected \"year_range\", actual [");
    assert_printed(&o, "turn 1: reasons_exclude: expected \"year_since\", actual [");
    assert_printed(&o, "turn 1: search.query_contains: expected \"bees\", actual \"CRISPR\"\n");
    assert_printed(&o, "turn 1: search.query_not_contains: expected \"crispr\", "
                       "actual \"CRISPR\"\n");
    ck_assert_int_eq(o.stats.failed, 1);
}
END_TEST

START_TEST(test_mismatch_names_turn)
{
    struct outcome o;

    run("{'name': 'two turns', 'pack': 'assistant', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hello', 'expect': {'reason': 'smalltalk'}},"
        "           {'user': 'convert 5 km to miles', 'expect': {'route': 'websearch'}}]}",
        &o);
    ck_assert_str_eq(o.text, "FAIL t.json: case \"two turns\" turn 2: route: expected "
                             "\"websearch\", actual \"conversion_tool\"\n");
    ck_assert_int_eq(o.stats.failed, 1);
}
END_TEST

START_TEST(test_unknown_keys)
{
    struct outcome o;

    run("{'name': 'case level', 'pack': 'scholar', 'now': '2026-02-07', 'turnz': [],"
        " 'turns': [{'user': 'hi', 'expect': {}}]}",
        &o);
    ck_assert_str_eq(o.text, "ERROR t.json: case \"case level\": turnz: unknown key \"turnz\"\n");
    ck_assert_int_eq(o.stats.failed, 1);
    ck_assert_int_eq(o.stats.passed, 0);

    run("{'name': 'turn level', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hi', 'expect': {}, 'expected': {}}]}",
        &o);
    ck_assert_str_eq(o.text, "ERROR t.json: case \"turn level\": turns[0].expected: unknown "
                             "key \"expected\"\n");

    /* A typo in expect is an error even when the other keys would pass or fail. */
    run(SEARCH_CASE("expect level", "{'route': 'llm_only', 'rout': 'websearch'}"), &o);
    ck_assert_str_eq(o.text, "ERROR t.json: case \"expect level\": turns[0].expect.rout: unknown "
                             "key \"rout\"\n");
    ck_assert_int_eq(count_lines(o.text, "FAIL "), 0);
    ck_assert_int_eq(o.stats.failed, 1);

    run(SEARCH_CASE("search level", "{'search': {'count': 5, 'cnt': 5}}"), &o);
    ck_assert_str_eq(o.text, "ERROR t.json: case \"search level\": turns[0].expect.search.cnt: "
                             "unknown key \"cnt\"\n");
    run(SEARCH_CASE("signals level", "{'signals': {'explicitly': true}}"), &o);
    assert_printed(&o, "ERROR t.json: case \"signals level\": turns[0].expect.signals.explicitly: "
                       "unknown key \"explicitly\"\n");

    /* Nested keys are checked even when the decision has no search. */
    run("{'name': 'no search', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hello', 'expect': {'search': {'cuont': 1}}}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"no search\": turns[0].expect.search.cuont: unknown key");

    run("{'name': 'context level', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'context': {'topic': 'bees'}, 'turns': [{'user': 'hi', 'expect': {}}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"context level\": context.topic: unknown key");
    run("{'name': 'bad list', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hi', 'expect': {'reasons_include': 'smalltalk'}}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"bad list\": turns[0].expect.reasons_include: must be "
                       "a list of strings\n");
}
END_TEST

START_TEST(test_null_expectations)
{
    struct outcome o;

    run("{'name': 'nulls', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hello', 'expect': {'search': null, 'force_tool': null,"
        "            'stage_transition': null, 'signals': {'topic_class': null}}}]}",
        &o);
    ck_assert_str_eq(o.text, "");
    ck_assert_int_eq(o.stats.passed, 1);

    /* null means "must be null": a search is not null. */
    run(SEARCH_CASE("not null", "{'search': null, 'stage_transition': null}"), &o);
    assert_printed(&o, "FAIL t.json: case \"not null\" turn 1: search: expected null, actual {");
    assert_printed(&o, "FAIL t.json: case \"not null\" turn 1: stage_transition: expected null, "
                       "actual \"finding_papers\"\n");
    ck_assert_int_eq(o.stats.failed, 1);

    /* Expecting a search where there is none. */
    run("{'name': 'wanted search', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hello', 'expect': {'search': {'count': 5}}}]}",
        &o);
    ck_assert_str_eq(o.text, "FAIL t.json: case \"wanted search\" turn 1: search: expected "
                             "{\"count\":5}, actual null\n");
}
END_TEST

START_TEST(test_arrays_and_lines)
{
    struct outcome o;
    const char *ok1 = SEARCH_CASE("one", "{'route': 'websearch'}");
    const char *ok2 = SEARCH_CASE("two", "{'search': {'count': 5}}");
    const char *bad = SEARCH_CASE("three", "{'route': 'command'}");
    char text[4096];

    snprintf(text, sizeof(text), "[%s, %s,\n %s]", ok1, ok2, bad);
    run(text, &o);
    ck_assert_int_eq(o.stats.passed, 2);
    ck_assert_int_eq(o.stats.failed, 1);
    ck_assert_int_eq(count_lines(o.text, "FAIL t.json: case \"three\""), 1);

    /* JSON lines, with blank lines and CRLF. */
    snprintf(text, sizeof(text), "%s\n\n%s\r\n%s\n", ok1, bad, ok2);
    run(text, &o);
    ck_assert_int_eq(o.stats.passed, 2);
    ck_assert_int_eq(o.stats.failed, 1);

    /* Arrays on lines of their own, too. */
    snprintf(text, sizeof(text), "[%s]\n[%s, %s]\n", ok1, ok2, ok1);
    run(text, &o);
    ck_assert_int_eq(o.stats.passed, 3);
    ck_assert_str_eq(o.text, "");
}
END_TEST

START_TEST(test_malformed_files)
{
    struct outcome o;
    char text[4096];

    run("", &o);
    ck_assert_str_eq(o.text, "ERROR t.json: no cases\n");
    ck_assert_int_eq(o.stats.failed, 1);
    run("  \n\t\n", &o);
    ck_assert_str_eq(o.text, "ERROR t.json: no cases\n");

    run("{'name': 'x',\n 'pack': }", &o);
    assert_printed(&o, "ERROR t.json: invalid JSON near line 2");
    ck_assert_int_eq(o.stats.failed, 1);

    /* A good case, then garbage: the good one still counts. */
    snprintf(text, sizeof(text), "%s\nnot json\n", SEARCH_CASE("first", "{}"));
    run(text, &o);
    ck_assert_int_eq(o.stats.passed, 1);
    ck_assert_int_eq(o.stats.failed, 1);
    assert_printed(&o, "ERROR t.json: invalid JSON near line");

    run("[1, {'pack': 'scholar', 'turns': []}]", &o);
    assert_printed(&o, "ERROR t.json: case \"#1\": a case must be an object, not integer\n");
    assert_printed(&o, "ERROR t.json: case \"#2\": name: is required\n");
    ck_assert_int_eq(o.stats.failed, 2);

    run("{'name': 'dup', 'name': 'dup', 'pack': 'scholar'}", &o);
    assert_printed(&o, "ERROR t.json: invalid JSON");

    run("{'name': 'no turns', 'pack': 'scholar', 'now': '2026-02-07', 'turns': []}", &o);
    assert_printed(&o, "ERROR t.json: case \"no turns\": turns: must be a non-empty list of turns\n");
    run("{'name': 'no pack', 'pack': 'nosuchpack', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hi', 'expect': {}}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"no pack\": pack: no pack \"nosuchpack\"");
    run("{'name': 'no expect', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hi'}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"no expect\": turns[0].expect: is required\n");
    run("{'name': 'expect list', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'turns': [{'user': 'hi', 'expect': ['route']}]}",
        &o);
    ck_assert_str_eq(o.text, "ERROR t.json: case \"expect list\": turns[0].expect: must be an "
                             "object\n");
    run("{'name': 'bad role', 'pack': 'scholar', 'now': '2026-02-07', 'role': 'admin',"
        " 'turns': [{'user': 'hi', 'expect': {}}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"bad role\": role: ");
    run("{'name': 'bad tool', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'context': {'tools': ['get_paper', 'hammer']}, 'turns': [{'user': 'hi', 'expect': {}}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"bad tool\": tools[1]: ");
    ck_assert_int_eq(o.stats.failed, 1);
}
END_TEST

START_TEST(test_now_required)
{
    struct outcome o;
    const char *no_now = "{'name': 'timeless', 'pack': 'scholar',"
                         " 'turns': [{'user': 'Find recent papers on bees',"
                         "            'expect': {'search': {'year_from': 2022, 'year_to': 2026}}}]}";

    keel_clock_unpin();
    unsetenv("KEEL_NOW");
    run(no_now, &o);
    ck_assert_str_eq(o.text, "ERROR t.json: case \"timeless\": now: is required (or pin the clock "
                             "with KEEL_NOW) so the case is reproducible\n");
    ck_assert_int_eq(o.stats.failed, 1);

    /* A pinned clock stands in for `now`, and is what "recent" counts from. */
    keel_clock_pin(NOW_MS);
    run(no_now, &o);
    ck_assert_str_eq(o.text, "");
    ck_assert_int_eq(o.stats.passed, 1);
    keel_clock_pin(NOW_MS + INT64_C(365) * 86400 * 1000);  /* 2027 */
    run(no_now, &o);
    assert_printed(&o, "search.year_to: expected 2026, actual 2027\n");

    /* The case's own `now` wins over the pinned clock. */
    run("{'name': 'own now', 'pack': 'scholar', 'now': '2026-02-07T12:00:00Z',"
        " 'turns': [{'user': 'Find recent papers on bees',"
        "            'expect': {'search': {'year_to': 2026}}}]}",
        &o);
    ck_assert_int_eq(o.stats.passed, 1);

    run("{'name': 'bad now', 'pack': 'scholar', 'now': 'tomorrow',"
        " 'turns': [{'user': 'hi', 'expect': {}}]}",
        &o);
    assert_printed(&o, "ERROR t.json: case \"bad now\": now: expected an RFC 3339 time");
}
END_TEST

START_TEST(test_contexts)
{
    struct outcome o;

    /* Case context applies to every turn; a turn's context overrides it. */
    run("{'name': 'hints', 'pack': 'scholar', 'now': '2026-02-07',"
        " 'context': {'topic_hint': 'bees', 'tools': ['get_paper']},"
        " 'turns': [{'user': 'Find papers on this topic',"
        "            'expect': {'search': {'query': 'bees'}, 'force_tool': null,"
        "                       'reasons_include': ['tool_unavailable']}},"
        "           {'user': 'Find papers on this topic',"
        "            'context': {'topic_hint': 'wasps', 'tools': ['search_papers']},"
        "            'expect': {'search': {'query': 'wasps'}, 'force_tool': 'search_papers'}},"
        "           {'user': 'Find papers on this topic', 'context': {'topic_hint': null},"
        "            'expect': {'intent': 'clarify'}}]}",
        &o);
    ck_assert_str_eq(o.text, "");
    ck_assert_int_eq(o.stats.passed, 1);

    run("{'name': 'viewer', 'pack': 'assistant', 'now': '2026-02-07', 'role': 'guest',"
        " 'notes': 'a guest may read', 'turns': [{'user': 'convert 5 km to miles',"
        " 'expect': {'force_tool': 'convert_units'}}]}",
        &o);
    ck_assert_str_eq(o.text, "");
}
END_TEST

START_TEST(test_stats_count_cases)
{
    struct outcome o;
    char text[8192];

    snprintf(text, sizeof(text), "[%s, %s, %s, %s, %s]",
             SEARCH_CASE("a", "{'route': 'websearch'}"),
             SEARCH_CASE("b", "{'route': 'llm_only', 'tool_veto': true}"),
             SEARCH_CASE("c", "{'bogus': 1}"),
             SEARCH_CASE("d", "{}"),
             SEARCH_CASE("e", "{'search': {'open_access_only': true}}"));
    run(text, &o);
    ck_assert_int_eq(o.stats.passed, 3);
    ck_assert_int_eq(o.stats.failed, 2);
    ck_assert_int_eq(count_lines(o.text, "FAIL "), 2);   /* both from case b */
    ck_assert_int_eq(count_lines(o.text, "ERROR "), 1);  /* case c */
}
END_TEST

/* ---- files and directories --------------------------------------------- */

START_TEST(test_run_path)
{
    char dir[64], sub[128], files[4][160], packs[1024], *printed = NULL;
    const char *names[4] = {"a.json", "b.jsonl", "notes.txt", "sub/c.json"};
    size_t printed_len = 0;
    struct replay_stats stats = {0, 0}, missing_stats = {0, 0};
    struct keel_error err, missing_err;
    struct replay *replay;
    FILE *out;
    int rc, missing_rc;

    snprintf(dir, sizeof(dir), "/tmp/keel-unit-replay-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    mkdir(sub, 0700);
    for (int i = 0; i < 4; i++) {
        FILE *f;
        snprintf(files[i], sizeof(files[i]), "%s/%s", dir, names[i]);
        f = fopen(files[i], "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "{\"name\": \"%s\", \"pack\": \"scholar\", \"now\": \"2026-02-07\","
                   " \"turns\": [{\"user\": \"hello\", \"expect\": {\"reason\": \"%s\"}}]}\n",
                names[i], i == 3 ? "default_llm" : "smalltalk");
        fclose(f);
    }
    snprintf(packs, sizeof(packs), "%s/packs", unit_root());
    out = open_memstream(&printed, &printed_len);
    replay = replay_new(packs, out);
    rc = replay_run_path(replay, dir, &stats, &err);
    missing_rc = replay_run_path(replay, files[2], &missing_stats, &missing_err);
    {
        char gone[200];
        snprintf(gone, sizeof(gone), "%s/gone.json", dir);
        missing_rc = replay_run_path(replay, gone, &missing_stats, &missing_err);
    }
    replay_free(replay);
    fclose(out);
    for (int i = 0; i < 4; i++)
        unlink(files[i]);
    rmdir(sub);
    rmdir(dir);

    ck_assert_int_eq(rc, KEEL_OK);
    /* a.json and b.jsonl pass, sub/c.json fails, notes.txt is not a fixture. */
    ck_assert_int_eq(stats.passed, 2);
    ck_assert_int_eq(stats.failed, 1);
    ck_assert_ptr_nonnull(strstr(printed, "/sub/c.json: case \"sub/c.json\" turn 1: reason: "
                                          "expected \"default_llm\", actual \"smalltalk\""));
    /* notes.txt named directly is run (and passes); a missing file is an error. */
    ck_assert_int_eq(missing_rc, KEEL_ENOTFOUND);
    ck_assert_int_eq(missing_stats.passed, 1);
    ck_assert_int_eq(missing_stats.failed, 1);
    ck_assert_ptr_nonnull(strstr(missing_err.field, "gone.json"));
    ck_assert_ptr_nonnull(strstr(printed, "ERROR "));
    free(printed);
}
END_TEST

/* ---- expect_check directly ---------------------------------------------- */

static int mismatches_seen;

static void count_report(void *ctx, const char *field, const json_t *expected,
                         const json_t *actual)
{
    (void)ctx;
    (void)field;
    (void)expected;
    (void)actual;
    mismatches_seen++;
}

START_TEST(test_expect_check)
{
    json_t *actual = json_pack("{s:s, s:b, s:[s, s], s:n, s:{s:i}}", "route", "websearch",
                               "tool_veto", 0, "reasons", "a", "b", "search", "signals",
                               "topic_class", 3);
    json_t *good = json_pack("{s:s, s:[s]}", "route", "websearch", "reasons_include", "b");
    json_t *two_bad = json_pack("{s:s, s:[s, s]}", "route", "command", "reasons_exclude", "a", "z");
    json_t *not_object = json_string("x");
    struct keel_error err;
    int mismatches = -1;

    mismatches_seen = 0;
    ck_assert_int_eq(expect_check(good, actual, "", count_report, NULL, &mismatches, &err),
                     KEEL_OK);
    ck_assert_int_eq(mismatches, 0);
    ck_assert_int_eq(expect_check(two_bad, actual, "", count_report, NULL, &mismatches, &err),
                     KEEL_OK);
    ck_assert_int_eq(mismatches, 2);
    ck_assert_int_eq(mismatches_seen, 2);
    ck_assert_int_eq(expect_check(not_object, actual, "turns[3].expect", count_report, NULL,
                                  &mismatches, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "turns[3].expect");
    json_decref(actual);
    json_decref(good);
    json_decref(two_bad);
    json_decref(not_object);
}
END_TEST

Suite *suite_replay(void)
{
    Suite *s = suite_create("replay");
    TCase *cases = tcase_create("cases"), *files = tcase_create("files");

    unit_leak_fixture(cases);
    tcase_set_timeout(cases, 30);
    tcase_add_test(cases, test_passing_case);
    tcase_add_test(cases, test_mismatch_lines);
    tcase_add_test(cases, test_mismatch_names_turn);
    tcase_add_test(cases, test_unknown_keys);
    tcase_add_test(cases, test_null_expectations);
    tcase_add_test(cases, test_now_required);
    tcase_add_test(cases, test_contexts);
    tcase_add_test(cases, test_stats_count_cases);
    tcase_add_test(cases, test_expect_check);
    suite_add_tcase(s, cases);

    unit_leak_fixture(files);
    tcase_set_timeout(files, 30);
    tcase_add_test(files, test_arrays_and_lines);
    tcase_add_test(files, test_malformed_files);
    tcase_add_test(files, test_run_path);
    suite_add_tcase(s, files);
    return s;
}
