/*
 * test_store_migrate.c — a SQLite file made by an older keel comes through
 * a migration with its data intact.
 *
 * Migration 13 folds the rows of turns, messages and decisions into one
 * turns row per turn. The test builds a file at schema version 12 by
 * running migrations 1–12 from the migration list on a raw connection,
 * fills the old tables with raw SQL (a turn without a decision row
 * among them, as the old LEFT JOIN allowed), opens it through the store
 * API, which migrates it, and reads everything back through the store
 * API and through the `messages` and `decisions` views. The expected
 * texts are those the version-12 queries gave for the same rows.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "store/store.h"
#include "store/store_sqlite_int.h"
#include "unit.h"

static char dir[64];

static void dir_make(void)
{
    unit_temp_dir(dir, sizeof(dir), "migrate", 0);
}

static void dir_remove(void)
{
    unit_temp_dir_remove(dir);
}

/* A file at schema version 12 with two conversations: conv_a (two turns,
 * the second with a tool, arguments and a scenario) and conv_b (one turn
 * whose decision row is missing). */
static void make_v12(const char *path)
{
    sqlite3 *db = NULL;
    char sql[160];

    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    unit_sql_exec(db, "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                      " applied_at TEXT NOT NULL)");
    for (size_t i = 0; i < sqlite_n_migrations && sqlite_migrations[i].version <= 12; i++) {
        unit_sql_exec(db, sqlite_migrations[i].sql);
        snprintf(sql, sizeof(sql),
                 "INSERT INTO schema_migrations VALUES (%d, '2026-01-01T00:00:00.000Z')",
                 sqlite_migrations[i].version);
        unit_sql_exec(db, sql);
    }
    unit_sql_exec(db,
            "INSERT INTO conversations (id, pack, state, turns, created_at, updated_at, owner,"
            " scenario, scenario_version) VALUES"
            " ('conv_a', 'payer', '{\"stage\":\"claim\"}', 2, 1000, 2000, 'alice',"
            "  '{\"name\":\"s\"}', 1),"
            " ('conv_b', 'scholar', '{\"stage\":\"exploring\"}', 1, 1500, 1500, NULL, NULL, 0);"
            "INSERT INTO turns (conversation_id, seq, correlation_id, created_at, clarification,"
            " state_after, deltas, events, sources, scenario_after, scenario_delta) VALUES"
            " ('conv_a', 1, 'turn_a1', 1000, 1, '{\"stage\":\"exploring\"}', '[]',"
            "  '[{\"correlation_id\":\"turn_a1\",\"seq\":1}]', '[]', NULL, NULL),"
            " ('conv_a', 2, 'turn_a2', 2000, 0, '{\"stage\":\"claim\"}', '[{\"op\":\"set\"}]',"
            "  '[{\"correlation_id\":\"turn_a2\",\"seq\":1},{\"correlation_id\":\"turn_a2\","
            "\"seq\":2}]', '[{\"id\":\"d1\"}]', '{\"name\":\"s\"}', '[{\"field\":\"name\"}]'),"
            " ('conv_b', 1, 'turn_b1', 1500, 0, '{\"stage\":\"exploring\"}', '[]', '[]', '[]',"
            "  NULL, NULL);"
            "INSERT INTO messages (conversation_id, turn_seq, role, text, created_at) VALUES"
            " ('conv_a', 1, 'user', 'hello', 1000),"
            " ('conv_a', 1, 'assistant', 'which claim?', 1000),"
            " ('conv_a', 2, 'user', 'claim 7', 2000), ('conv_a', 2, 'assistant', 'found it', 2000),"
            " ('conv_b', 1, 'user', 'papers on ice', 1500),"
            " ('conv_b', 1, 'assistant', 'three papers', 1500);"
            "INSERT INTO decisions (conversation_id, turn_seq, intent, route, tool, arguments,"
            " stage_from, stage_to, reasons, decision) VALUES"
            " ('conv_a', 1, 'general', 'clarify', NULL, NULL, 'exploring', 'exploring',"
            "  '[\"ask\"]', '{\"intent\":\"general\"}'),"
            " ('conv_a', 2, 'lookup', 'tool', 'claim_lookup', '{\"id\":7}', 'exploring', 'claim',"
            "  '[\"forced\"]', '{\"intent\":\"lookup\"}');"
            "INSERT INTO metrics (name, value) VALUES ('turns', 3), ('clarifications', 1);"
            "INSERT INTO metrics_minutes (minute, name, value) VALUES (0, 'turns', 3),"
            " (0, 'clarifications', 1);");
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

static void assert_json(json_t *value, const char *want)
{
    char *text = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS);

    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, want);
    keel_free(text);
}

static void assert_turn(struct store *store, const char *correlation_id, const char *want)
{
    struct keel_error err;
    json_t *turn = NULL;

    keel_error_clear(&err);
    ck_assert_msg(store_get_turn(store, correlation_id, &turn, &err) == KEEL_OK, "%s: %s",
                  correlation_id, err.message);
    assert_json(turn, want);
    json_decref(turn);
}

/* The migrated conversation b's one turn, as store_get_turn gives it. */
static const char turn_b1[] =
    "{\"active_scenario\":null,\"assistant\":\"three papers\",\"clarification\":false,"
    "\"conversation_id\":\"conv_b\",\"correlation_id\":\"turn_b1\",\"decision\":null,"
    "\"events\":[],\"scenario_delta\":null,\"sources\":[],"
    "\"state\":{\"stage\":\"exploring\"},\"ts\":1500,\"turn\":1,"
    "\"user\":\"papers on ice\"}";

START_TEST(test_migrate_12_to_13_keeps_turns)
{
    char path[sizeof(dir) + 16], result[1024];
    struct store *store = NULL;
    struct keel_error err;
    json_t *list = NULL;

    snprintf(path, sizeof(path), "%s/v12.db", dir);
    make_v12(path);
    keel_error_clear(&err);
    ck_assert_msg(store_open(path, &store, &err) == KEEL_OK, "%s", err.message);

    /* Everything the store API gave at version 12. */
    assert_turn(store, "turn_a1",
                "{\"active_scenario\":null,\"assistant\":\"which claim?\",\"clarification\":true,"
                "\"conversation_id\":\"conv_a\",\"correlation_id\":\"turn_a1\","
                "\"decision\":{\"intent\":\"general\"},"
                "\"events\":[{\"correlation_id\":\"turn_a1\",\"seq\":1}],"
                "\"scenario_delta\":null,\"sources\":[],\"state\":{\"stage\":\"exploring\"},"
                "\"ts\":1000,\"turn\":1,\"user\":\"hello\"}");
    assert_turn(store, "turn_a2",
                "{\"active_scenario\":{\"name\":\"s\"},\"assistant\":\"found it\","
                "\"clarification\":false,\"conversation_id\":\"conv_a\","
                "\"correlation_id\":\"turn_a2\",\"decision\":{\"intent\":\"lookup\"},"
                "\"events\":[{\"correlation_id\":\"turn_a2\",\"seq\":1},"
                "{\"correlation_id\":\"turn_a2\",\"seq\":2}],"
                "\"scenario_delta\":[{\"field\":\"name\"}],\"sources\":[{\"id\":\"d1\"}],"
                "\"state\":{\"stage\":\"claim\"},\"ts\":2000,\"turn\":2,\"user\":\"claim 7\"}");
    assert_turn(store, "turn_b1", turn_b1);
    ck_assert_int_eq(store_list_turns(store, "conv_a", &list, &err), KEEL_OK);
    assert_json(list, "[{\"assistant\":\"which claim?\",\"clarification\":true,"
                      "\"sources\":[],\"ts\":1000,\"turn\":1,\"user\":\"hello\"},"
                      "{\"assistant\":\"found it\",\"clarification\":false,"
                      "\"sources\":[{\"id\":\"d1\"}],\"ts\":2000,\"turn\":2,\"user\":\"claim 7\"}]");
    json_decref(list);
    ck_assert_int_eq(store_metrics(store, &list, &err), KEEL_OK);
    assert_json(list, "{\"clarifications\":1,\"turns\":3}");
    json_decref(list);

    /* The old tables live on as views with their columns. */
    unit_sql_text(path,
          "SELECT group_concat(conversation_id || ':' || turn_seq || ':' || role || ':' || text"
          " || ':' || created_at, '|') FROM (SELECT * FROM messages"
          " ORDER BY conversation_id, turn_seq, role DESC)",
          result, sizeof(result));
    ck_assert_str_eq(result, "conv_a:1:user:hello:1000|conv_a:1:assistant:which claim?:1000|"
                             "conv_a:2:user:claim 7:2000|conv_a:2:assistant:found it:2000|"
                             "conv_b:1:user:papers on ice:1500|"
                             "conv_b:1:assistant:three papers:1500");
    unit_sql_text(path,
          "SELECT group_concat(conversation_id || ':' || turn_seq || ':' || intent || ':' || route"
          " || ':' || coalesce(tool, '-') || ':' || coalesce(arguments, '-') || ':' || stage_from"
          " || ':' || stage_to || ':' || reasons || ':' || decision, '|')"
          " FROM (SELECT * FROM decisions ORDER BY conversation_id, turn_seq)",
          result, sizeof(result));
    ck_assert_str_eq(result, "conv_a:1:general:clarify:-:-:exploring:exploring:[\"ask\"]:"
                             "{\"intent\":\"general\"}|conv_a:2:lookup:tool:claim_lookup:"
                             "{\"id\":7}:exploring:claim:[\"forced\"]:{\"intent\":\"lookup\"}");
    unit_sql_text(path, "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema"
                " WHERE tbl_name IN ('turns', 'messages', 'decisions') ORDER BY name)",
          result, sizeof(result));
    ck_assert_str_eq(result, "decisions,messages,turns,turns_conversation,turns_correlation");
    unit_sql_text(path, "SELECT max(version) FROM schema_migrations", result, sizeof(result));
    ck_assert_str_eq(result, "13");
    unit_sql_text(path, "PRAGMA integrity_check", result, sizeof(result));
    ck_assert_str_eq(result, "ok");

    /* The migrated conversation goes on, and is deleted whole. */
    struct store_turn_record rec = {
        .conversation_id = "conv_a", .pack = "payer", .seq = 3, .correlation_id = "turn_a3",
        .ts_ms = 3000, .user_text = "thanks", .assistant_text = "welcome",
        .state_json = "{\"stage\":\"claim\"}", .deltas_json = "[]", .events_json = "[]",
        .sources_json = "[]", .reasons_json = "[]", .decision_json = "{}"};
    ck_assert_msg(store_save_turn(store, &rec, &err) == KEEL_OK, "%s", err.message);
    ck_assert_int_eq(store_list_turns(store, "conv_a", &list, &err), KEEL_OK);
    ck_assert_uint_eq(json_array_size(list), 3);
    json_decref(list);
    rec.seq = 4;   /* the correlation id is still unique */
    ck_assert_int_eq(store_save_turn(store, &rec, &err), KEEL_EIO);
    ck_assert_int_eq(store_delete_conversation(store, "conv_a", &err), KEEL_OK);
    ck_assert_int_eq(store_get_turn(store, "turn_a2", &list, &err), KEEL_ENOTFOUND);
    assert_turn(store, "turn_b1", turn_b1);
    store_close(store);
    unit_sql_text(path, "SELECT count(*) || ' ' || (SELECT count(*) FROM messages) FROM turns", result,
          sizeof(result));
    ck_assert_str_eq(result, "1 2");
}
END_TEST

Suite *suite_store_migrate(void)
{
    Suite *s = suite_create("store_migrate");
    TCase *tc = tcase_create("from_12");

    tcase_add_unchecked_fixture(tc, dir_make, dir_remove);
    unit_leak_fixture(tc);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_migrate_12_to_13_keeps_turns);
    suite_add_tcase(s, tc);
    return s;
}
