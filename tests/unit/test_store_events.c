/*
 * test_store_events.c — a turn's events stored without their correlation
 * ids (src/store/store_events_text.c): compact strips the member from
 * every top-level event, expand puts it back byte for byte, and any text
 * not of exactly that form is left alone (KEEL_EINVAL) rather than
 * changed. The last test saves a turn through the SQLite store and reads
 * it back: compacted in the row, whole through store_get_turn; events
 * the caller compacted are stored as they are (SQLite) or put back
 * whole (in memory).
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "store/store.h"
#include "store/store_events_text.h"
#include "unit.h"

#define ID "turn_01KGVZJ8G0AEKFB8DZERBRGM3C"
#define CID "\"correlation_id\":\"" ID "\""

static void assert_round_trip(const char *events, const char *want_compact)
{
    char *compact = NULL, *back = NULL;
    size_t n = 0, m = 0;

    ck_assert_int_eq(store_events_compact(events, strlen(events), ID, &compact, &n), KEEL_OK);
    ck_assert_uint_eq(n, strlen(compact));
    ck_assert_str_eq(compact, want_compact);
    ck_assert_int_eq(store_events_expand(compact, n, ID, 1 << 20, &back, &m), KEEL_OK);
    ck_assert_uint_eq(m, strlen(events));
    ck_assert_str_eq(back, events);
    keel_free(compact);
    keel_free(back);
}

static void assert_kept(const char *events, const char *id)
{
    char *out = NULL;
    size_t n = 0;

    ck_assert_msg(store_events_compact(events, strlen(events), id, &out, &n) == KEEL_EINVAL,
                  "compacted: %s", events);
    ck_assert_ptr_null(out);
}

START_TEST(test_events_round_trip)
{
    assert_round_trip("[]", "[]");
    assert_round_trip("[{" CID ",\"seq\":1}]", "[{\"seq\":1}]");
    /* strings holding braces, brackets, quotes and the member itself;
     * nested objects that begin with the member keep it */
    assert_round_trip(
        "[{" CID ",\"extra\":{" CID ",\"q\":\"}]{[\\\"\\\\\"},\"kind\":\"start\"},"
        "{" CID ",\"extra\":{},\"message\":\"{\\\"correlation_id\\\":\\\"x\\\",\",\"seq\":2}]",
        "[{\"extra\":{" CID ",\"q\":\"}]{[\\\"\\\\\"},\"kind\":\"start\"},"
        "{\"extra\":{},\"message\":\"{\\\"correlation_id\\\":\\\"x\\\",\",\"seq\":2}]");
}
END_TEST

START_TEST(test_events_other_forms_kept)
{
    assert_kept("[{" CID ",\"seq\":1},{\"seq\":2}]", ID);             /* one without */
    assert_kept("[{" CID ",\"seq\":1}]", "turn_other");                /* another turn's */
    assert_kept("[{" CID "}]", ID);                                    /* nothing after it */
    assert_kept("[{\"correlation_id\":\"" ID "x\",\"seq\":1}]", ID);   /* a longer id */
    assert_kept("[ {" CID ",\"seq\":1}]", ID);                         /* whitespace */
    assert_kept("[{" CID ",\"seq\":1},]", ID);
    assert_kept("[{" CID ",\"seq\":1}", ID);                           /* cut short */
    assert_kept("[{" CID ",\"seq\":\"1}]", ID);                        /* open string */
    assert_kept("{" CID ",\"seq\":1}", ID);                            /* not a list */
    assert_kept("[1]", ID);
    assert_kept("[", ID);
    assert_kept("", ID);
    assert_kept("[{\"correlation_id\":\"a\\\"b\",\"seq\":1}]", "a\"b");   /* needs escaping */
    assert_kept("[{" CID ",\"seq\":1}]", "");
}
END_TEST

START_TEST(test_events_expand_refuses)
{
    static const char *const bad[] = {"", "[", "[{}]", "[{\"a\":1}", "[{\"a\":1},]", "[1]",
                                      "[{\"a\":1}x]", "{\"a\":1}", "[ {\"a\":1}]"};
    char *out = NULL;
    size_t n = 0;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(store_events_expand(bad[i], strlen(bad[i]), ID, 1 << 20, &out, &n) ==
                          KEEL_EINVAL,
                      "expanded: %s", bad[i]);
        ck_assert_ptr_null(out);
    }
    /* the cap holds */
    ck_assert_int_eq(store_events_expand("[{\"a\":1}]", 9, ID, 20, &out, &n), KEEL_ETOOBIG);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(store_events_expand("[{\"a\":1}]", 9, ID, 1 << 20, &out, &n), KEEL_OK);
    ck_assert_str_eq(out, "[{" CID ",\"a\":1}]");
    keel_free(out);
}
END_TEST

START_TEST(test_events_out_of_memory)
{
    const char *events = "[{" CID ",\"seq\":1},{" CID ",\"seq\":2}]";
    char *out = NULL;
    size_t n = 0;

    keel_alloc_fail_after(0, 1);
    ck_assert_int_eq(store_events_compact(events, strlen(events), ID, &out, &n), KEEL_ENOMEM);
    ck_assert_int_eq(store_events_expand("[{\"a\":1}]", 9, ID, 1 << 20, &out, &n), KEEL_ENOMEM);
    keel_alloc_fail_after(-1, 0);
    ck_assert_ptr_null(out);
}
END_TEST

/* ---- through the SQLite store ---------------------------------------------- */

static void backend_sqlite(void)
{
    unit_backend_sqlite("events", 0);
}

START_TEST(test_events_stored_compact_read_whole)
{
    static const char *const events[2] = {
        "[{" CID ",\"seq\":1},{" CID ",\"extra\":{\"id\":\"" ID "\"},\"seq\":2}]",
        "[{" CID ",\"seq\":1},{\"seq\":2}]"};   /* not the usual form: kept as it is */
    struct store *store = unit_store_fresh();
    char path[UNIT_STORE_PATH_MAX], result[512];
    struct keel_error err;
    json_t *turn = NULL, *want;

    snprintf(path, sizeof(path), "%s", unit_store_path());
    for (int seq = 1; seq <= 2; seq++) {
        char cid[48];
        struct store_turn_record rec = {
            .conversation_id = "conv_e", .pack = "payer", .seq = seq, .correlation_id = cid,
            .ts_ms = 1000, .user_text = "q", .assistant_text = "a", .state_json = "{}",
            .deltas_json = "[]", .events_json = events[seq - 1], .sources_json = "[]",
            .reasons_json = "[]", .decision_json = "{}"};
        snprintf(cid, sizeof(cid), "%s", seq == 1 ? ID : "turn_second");
        keel_error_clear(&err);
        ck_assert_msg(store_save_turn(store, &rec, &err) == KEEL_OK, "%s", err.message);
    }
    for (int seq = 1; seq <= 2; seq++) {
        ck_assert_int_eq(store_get_turn(store, seq == 1 ? ID : "turn_second", &turn, &err),
                         KEEL_OK);
        want = json_loads(seq == 1 ? events[0] : events[1], 0, NULL);
        ck_assert(json_equal(json_object_get(turn, "events"), want));
        json_decref(want);
        json_decref(turn);
    }
    store_close(store);
    unit_sql_text(path, "SELECT events_compact || ' ' || events FROM turns WHERE seq = 1", result,
                  sizeof(result));
    ck_assert_str_eq(result, "1 [{\"seq\":1},{\"extra\":{\"id\":\"" ID "\"},\"seq\":2}]");
    unit_sql_text(path, "SELECT events_compact || ' ' || events FROM turns WHERE seq = 2", result,
                  sizeof(result));
    ck_assert_str_eq(result, "0 [{" CID ",\"seq\":1},{\"seq\":2}]");
}
END_TEST

/* Events the caller wrote compact already (events_compacted, as the
 * pipeline does) are stored as they are by SQLite and put back whole by
 * the in-memory store; both read them whole. Text that is not compact
 * is refused by the in-memory store, naming the field. */
START_TEST(test_events_given_compact)
{
    static const char *const whole = "[{" CID ",\"seq\":1},{" CID ",\"extra\":{},\"seq\":2}]";
    static const char *const compact = "[{\"seq\":1},{\"extra\":{},\"seq\":2}]";
    struct store *stores[2] = {unit_store_fresh(), NULL};
    char path[UNIT_STORE_PATH_MAX], result[512];
    struct keel_error err;
    json_t *turn = NULL, *want = json_loads(whole, 0, NULL);

    snprintf(path, sizeof(path), "%s", unit_store_path());
    ck_assert_int_eq(store_open("mem:", &stores[1], &err), KEEL_OK);
    ck_assert(store_events_id_plain(ID));
    ck_assert(!store_events_id_plain("turn_\"q"));
    ck_assert(!store_events_id_plain(""));
    for (int i = 0; i < 2; i++) {
        struct store_turn_record rec = {
            .conversation_id = "conv_c", .pack = "payer", .seq = 1, .correlation_id = ID,
            .ts_ms = 1000, .user_text = "q", .assistant_text = "a", .state_json = "{}",
            .deltas_json = "[]", .events_json = compact, .events_compacted = 1,
            .sources_json = "[]", .reasons_json = "[]", .decision_json = "{}"};
        keel_error_clear(&err);
        ck_assert_msg(store_save_turn(stores[i], &rec, &err) == KEEL_OK, "%s", err.message);
        ck_assert_int_eq(store_get_turn(stores[i], ID, &turn, &err), KEEL_OK);
        ck_assert(json_equal(json_object_get(turn, "events"), want));
        json_decref(turn);
    }
    {
        struct store_turn_record rec = {
            .conversation_id = "conv_d", .pack = "payer", .seq = 1, .correlation_id = "turn_d",
            .ts_ms = 1000, .user_text = "q", .assistant_text = "a", .state_json = "{}",
            .deltas_json = "[]", .events_json = "[{}]", .events_compacted = 1,
            .sources_json = "[]", .reasons_json = "[]", .decision_json = "{}"};
        keel_error_clear(&err);
        ck_assert_int_eq(store_save_turn(stores[1], &rec, &err), KEEL_EINVAL);
        ck_assert_str_eq(err.field, "events");
    }
    for (int i = 0; i < 2; i++)
        store_close(stores[i]);
    json_decref(want);
    unit_sql_text(path, "SELECT events_compact || ' ' || events FROM turns", result,
                  sizeof(result));
    ck_assert_str_eq(result, "1 [{\"seq\":1},{\"extra\":{},\"seq\":2}]");
}
END_TEST

/* A turn's events have no cap of their own (publish allows 4 x
 * STORE_TEXT_MAX): events that pass STORE_TEXT_MAX once put back are read
 * whole, as they were before they were stored compact. */
START_TEST(test_events_past_text_max_read_whole)
{
    enum { N = 30000 };   /* ~40 bytes each: ~1.2 MB whole, ~0.3 MB compact */
    struct store *store = unit_store_fresh();
    struct keel_buf b;
    struct keel_error err;
    json_t *turn = NULL;
    char *events;

    keel_buf_init(&b, 0);
    ck_assert_int_eq(keel_buf_addc(&b, '['), KEEL_OK);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(keel_buf_addf(&b, "%s{" CID ",\"seq\":%d}", i ? "," : "", i), KEEL_OK);
    ck_assert_int_eq(keel_buf_addc(&b, ']'), KEEL_OK);
    ck_assert_uint_gt(b.len, STORE_TEXT_MAX);
    events = keel_buf_detach(&b, NULL);
    struct store_turn_record rec = {
        .conversation_id = "conv_big", .pack = "payer", .seq = 1, .correlation_id = ID,
        .ts_ms = 1000, .user_text = "q", .assistant_text = "a", .state_json = "{}",
        .deltas_json = "[]", .events_json = events, .sources_json = "[]",
        .reasons_json = "[]", .decision_json = "{}"};
    keel_error_clear(&err);
    ck_assert_msg(store_save_turn(store, &rec, &err) == KEEL_OK, "%s", err.message);
    keel_error_clear(&err);
    ck_assert_msg(store_get_turn(store, ID, &turn, &err) == KEEL_OK, "%s", err.message);
    ck_assert_uint_eq(json_array_size(json_object_get(turn, "events")), N);
    json_decref(turn);
    keel_free(events);
    store_close(store);
}
END_TEST

Suite *suite_store_events(void)
{
    Suite *s = suite_create("store_events");
    TCase *text = tcase_create("events_text");
    TCase *file = tcase_create("events_sqlite");

    unit_leak_fixture(text);
    tcase_add_test(text, test_events_round_trip);
    tcase_add_test(text, test_events_other_forms_kept);
    tcase_add_test(text, test_events_expand_refuses);
    tcase_add_test(text, test_events_out_of_memory);
    suite_add_tcase(s, text);

    tcase_add_unchecked_fixture(file, backend_sqlite, unit_backend_sqlite_remove);
    unit_leak_fixture(file);
    tcase_set_timeout(file, 60);
    tcase_add_test(file, test_events_stored_compact_read_whole);
    tcase_add_test(file, test_events_given_compact);
    tcase_add_test(file, test_events_past_text_max_read_whole);
    suite_add_tcase(s, file);
    return s;
}
