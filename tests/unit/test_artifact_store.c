/*
 * test_artifact_store.c — artifacts and facts in the store (migration 9)
 * and in the turn.
 *
 * TCases "artifact_store_mem" and "artifact_store_sqlite" run the same
 * tests against the in-memory backend and a SQLite file: a turn's
 * artifact and facts saved with it and read back (list in turn order,
 * by type, the last N; get with its facts in order; unknown ids), the
 * facts' filters (store, owner, text, conversation, artifact, paging),
 * all-or-nothing saves (a taken artifact or fact id, a stale turn, bad
 * fields naming the field: neither the turn nor the artifact is stored),
 * deleting a conversation with its artifacts and facts, and allocation
 * failures in a save (all of it or none).
 * TCase "artifact_turn": the pipeline on the scholar pack: a brief is
 * built, stored with its facts and its gate decision in the decision
 * log; a failed build stores the turn without one; and every allocation
 * failure during a turn leaves the turn and its artifact both stored or
 * both absent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/log.h"
#include "pipeline/pipeline.h"
#include "store/store.h"
#include "unit.h"

#define T0 INT64_C(1770465600000)   /* 2026-02-07T12:00:00Z */

/* The store tests run on both backends (unit_backend_mem, or SQLite
 * through backend_sqlite), each store from unit_store_fresh. */
static void backend_sqlite(void)
{
    unit_backend_sqlite("artifact", 1);
}

static const char *const brief_body =
    "{\"id\":\"art_A\",\"type\":\"research_brief\",\"title\":\"naps\"}";

static struct store_fact brief_facts[] = {
    {"fact_A_1", "researched", "naps and memory", "Naps help recall.", "https://example.org/1",
     0.6, "science", "[\"scholar\",\"research_brief\"]", "Naps help recall. More."},
    {"fact_A_2", "researched", "naps and memory", "Slow waves fall with age.", "Age paper", 0.6,
     "science", "[\"scholar\",\"research_brief\"]", "Slow waves fall with age."},
};

/* Saves turn `seq` of `conv` (owner `owner`) with `art` (may be NULL). */
static int save(struct store *store, const char *conv, int seq, const char *owner,
                const struct store_artifact *art, struct keel_error *err)
{
    static const struct store_metric turns[] = {{"turns", 1}};
    struct store_turn_record rec = {
        .conversation_id = conv, .pack = "scholar", .owner = owner, .seq = seq,
        .correlation_id = NULL, .ts_ms = T0 + seq, .user_text = "hi", .assistant_text = "hello",
        .state_json = "{}", .deltas_json = "[]", .events_json = "[]", .sources_json = "[]",
        .intent = "general", .route = "llm_only", .reasons_json = "[]", .decision_json = "{}",
        .metrics = turns, .n_metrics = 1, .artifact = art};
    char cid[64];

    snprintf(cid, sizeof(cid), "turn_%s_%d", conv, seq);
    rec.correlation_id = cid;
    keel_error_clear(err);
    return store_save_turn(store, &rec, err);
}

static const struct store_artifact brief = {"art_A", "research_brief", "naps", NULL, brief_facts, 2};

static struct store_artifact make(const char *id, const char *type, const char *body)
{
    return (struct store_artifact){id, type, "t", body, NULL, 0};
}

static json_t *list(struct store *store, const char *conv, const char *type, int last)
{
    struct keel_error err;
    json_t *out = NULL;

    keel_error_clear(&err);
    ck_assert_msg(store_artifacts_list(store, conv, type, last, &out, &err) == KEEL_OK, "%s: %s",
                  err.field, err.message);
    return out;
}

static json_t *facts(struct store *store, struct store_fact_query q)
{
    struct keel_error err;
    json_t *out = NULL;

    if (!q.limit)
        q.limit = 50;
    keel_error_clear(&err);
    ck_assert_msg(store_facts_list(store, &q, &out, &err) == KEEL_OK, "%s", err.message);
    return out;
}

static long turns_metric(struct store *store)
{
    struct keel_error err;
    json_t *m = NULL;
    long n;

    ck_assert_int_eq(store_metrics(store, &m, &err), KEEL_OK);
    n = (long)json_integer_value(json_object_get(m, "turns"));
    json_decref(m);
    return n;
}

static struct store_artifact with_body(struct store_artifact a)
{
    a.body_json = brief_body;
    return a;
}

START_TEST(test_store_round_trip)
{
    struct store *store = unit_store_fresh();
    struct store_artifact plan = make("art_B", "plan", "{\"id\":\"art_B\",\"type\":\"plan\"}");
    struct keel_error err;
    json_t *l, *a = NULL;

    ck_assert_int_eq(save(store, "c1", 1, "alice", &(struct store_artifact){0}, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "artifact.id");   /* an empty artifact is refused */
    ck_assert_int_eq(save(store, "c1", 1, "alice", NULL, &err), KEEL_OK);
    {
        struct store_artifact b = with_body(brief);
        ck_assert_int_eq(save(store, "c1", 2, "alice", &b, &err), KEEL_OK);
    }
    ck_assert_int_eq(save(store, "c1", 3, "alice", &plan, &err), KEEL_OK);
    ck_assert_int_eq(save(store, "c1", 4, "alice", NULL, &err), KEEL_OK);

    l = list(store, "c1", NULL, 0);
    ck_assert_uint_eq(json_array_size(l), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(l, 0), "id")), "art_A");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(l, 0), "turn")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(json_array_get(l, 1),
                                                                       "artifact"),
                                                       "type")),
                     "plan");
    json_decref(l);
    l = list(store, "c1", "research_brief", 0);
    ck_assert_uint_eq(json_array_size(l), 1);
    json_decref(l);
    l = list(store, "c1", NULL, 1);   /* the last one */
    ck_assert_uint_eq(json_array_size(l), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(l, 0), "id")), "art_B");
    json_decref(l);
    l = list(store, "c2", NULL, 0);
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);

    keel_error_clear(&err);
    ck_assert_int_eq(store_artifact_get(store, "art_A", &a, &err), KEEL_OK);
    ck_assert_str_eq(json_string_value(json_object_get(a, "conversation_id")), "c1");
    ck_assert_uint_eq(json_array_size(json_object_get(a, "facts")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(a, "facts"), 0), "id")),
                     "fact_A_1");   /* in the order distilled */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "artifact"), "title")),
                     "naps");
    json_decref(a);
    keel_error_clear(&err);
    ck_assert_int_eq(store_artifact_get(store, "art_Z", &a, &err), KEEL_ENOTFOUND);
    ck_assert_str_eq(err.field, "artifact_id");
    ck_assert_int_eq(store_artifacts_list(store, "c1", NULL, 201, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "last");
    store_close(store);
}
END_TEST

START_TEST(test_store_fact_filters)
{
    struct store *store = unit_store_fresh();
    struct store_artifact b = with_body(brief);
    struct keel_error err;
    json_t *f;

    ck_assert_int_eq(save(store, "c1", 1, "alice", &b, &err), KEEL_OK);
    ck_assert_int_eq(save(store, "c2", 1, "bob", NULL, &err), KEEL_OK);
    f = facts(store, (struct store_fact_query){0});
    ck_assert_uint_eq(json_array_size(f), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "id")), "fact_A_2");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "artifact_id")), "art_A");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(json_array_get(f, 0), "tags"), 1)),
                     "research_brief");
    ck_assert(json_real_value(json_object_get(json_array_get(f, 0), "confidence")) == 0.6);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "domain")), "science");
    json_decref(f);
    f = facts(store, (struct store_fact_query){.store = "verified"});
    ck_assert_uint_eq(json_array_size(f), 0);
    json_decref(f);
    f = facts(store, (struct store_fact_query){.owner = "alice"});
    ck_assert_uint_eq(json_array_size(f), 2);
    json_decref(f);
    f = facts(store, (struct store_fact_query){.owner = "bob"});
    ck_assert_uint_eq(json_array_size(f), 0);
    json_decref(f);
    f = facts(store, (struct store_fact_query){.text = "SLOW"});
    ck_assert_uint_eq(json_array_size(f), 1);
    json_decref(f);
    f = facts(store, (struct store_fact_query){.text = "naps and"});   /* the topic */
    ck_assert_uint_eq(json_array_size(f), 2);
    json_decref(f);
    f = facts(store, (struct store_fact_query){.conversation_id = "c2"});
    ck_assert_uint_eq(json_array_size(f), 0);
    json_decref(f);
    f = facts(store, (struct store_fact_query){.artifact_id = "art_A", .limit = 1, .offset = 1});
    ck_assert_uint_eq(json_array_size(f), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "id")), "fact_A_1");
    json_decref(f);
    keel_error_clear(&err);
    ck_assert_int_eq(store_facts_list(store, &(struct store_fact_query){.limit = 0}, &f, &err),
                     KEEL_EINVAL);
    ck_assert_str_eq(err.field, "limit");
    ck_assert_int_eq(store_facts_list(store, &(struct store_fact_query){.limit = 5, .store = "x"},
                                      &f, &err),
                     KEEL_EINVAL);
    ck_assert_str_eq(err.field, "store");
    store_close(store);
}
END_TEST

START_TEST(test_store_all_or_nothing)
{
    struct store *store = unit_store_fresh();
    struct store_artifact b = with_body(brief), dup = make("art_A", "plan", "{\"x\":1}");
    struct store_fact taken[] = {brief_facts[0]};
    struct store_artifact fact_taken = {"art_C", "research_brief", "t", "{\"x\":1}", taken, 1};
    struct store_fact bad_fact = brief_facts[0];
    struct store_artifact bad;
    struct keel_error err;
    json_t *l;

    ck_assert_int_eq(save(store, "c1", 1, NULL, &b, &err), KEEL_OK);
    /* a taken artifact id: neither the turn nor the artifact */
    ck_assert_int_eq(save(store, "c1", 2, NULL, &dup, &err), KEEL_EFAIL);
    ck_assert_str_eq(err.field, "artifact.id");
    ck_assert_int_eq(turns_metric(store), 1);
    /* a taken fact id */
    ck_assert_int_eq(save(store, "c1", 2, NULL, &fact_taken, &err), KEEL_EFAIL);
    ck_assert_str_eq(err.field, "artifact.facts.id");
    ck_assert_int_eq(turns_metric(store), 1);
    /* a stale turn (seq 5 of a conversation at 1): its artifact is not kept */
    dup.id = "art_D";
    ck_assert_int_eq(save(store, "c1", 5, NULL, &dup, &err), KEEL_EFAIL);
    ck_assert_str_eq(err.field, "conversation_id");
    /* bad fields name themselves */
    bad = make("art_E", "memo", "{}");
    ck_assert_int_eq(save(store, "c1", 2, NULL, &bad, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "artifact.type");
    bad = make("art_E", "plan", "[1]");
    ck_assert_int_eq(save(store, "c1", 2, NULL, &bad, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "artifact.body");
    bad_fact.id = "fact_new";
    bad_fact.store = "cloud";
    bad = (struct store_artifact){"art_E", "plan", "t", "{}", &bad_fact, 1};
    ck_assert_int_eq(save(store, "c1", 2, NULL, &bad, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "artifact.facts.store");
    bad_fact.store = "verified";
    bad_fact.confidence = 1.5;
    ck_assert_int_eq(save(store, "c1", 2, NULL, &bad, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "artifact.facts.confidence");
    bad_fact.confidence = 0.5;
    bad_fact.tags_json = "{}";
    ck_assert_int_eq(save(store, "c1", 2, NULL, &bad, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "artifact.facts.tags");

    ck_assert_int_eq(turns_metric(store), 1);
    l = list(store, "c1", NULL, 0);
    ck_assert_uint_eq(json_array_size(l), 1);
    json_decref(l);
    l = facts(store, (struct store_fact_query){0});
    ck_assert_uint_eq(json_array_size(l), 2);
    json_decref(l);
    /* and the conversation goes on */
    ck_assert_int_eq(save(store, "c1", 2, NULL, &fact_taken, &err), KEEL_EFAIL);
    fact_taken.facts = NULL;
    fact_taken.n_facts = 0;
    ck_assert_int_eq(save(store, "c1", 2, NULL, &fact_taken, &err), KEEL_OK);
    store_close(store);
}
END_TEST

START_TEST(test_store_delete_conversation)
{
    struct store *store = unit_store_fresh();
    struct store_artifact b = with_body(brief), other = make("art_X", "plan", "{}");
    struct keel_error err;
    json_t *l;

    ck_assert_int_eq(save(store, "c1", 1, NULL, &b, &err), KEEL_OK);
    ck_assert_int_eq(save(store, "c2", 1, NULL, &other, &err), KEEL_OK);
    keel_error_clear(&err);
    ck_assert_int_eq(store_delete_conversation(store, "c1", &err), KEEL_OK);
    l = list(store, "c1", NULL, 0);
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);
    l = facts(store, (struct store_fact_query){0});
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);
    ck_assert_int_eq(store_artifact_get(store, "art_A", &l, &err), KEEL_ENOTFOUND);
    l = list(store, "c2", NULL, 0);
    ck_assert_uint_eq(json_array_size(l), 1);
    json_decref(l);
    store_close(store);
}
END_TEST

START_TEST(test_store_allocation_failures)
{
    int done = 0;

    keel_log_set_level(KEEL_LOG_ERROR);
    for (long n = 0; !done && n < 20000; n++) {
        struct store *store = unit_store_fresh();
        struct store_artifact b = with_body(brief);
        struct keel_error err;
        json_t *l;
        int rc;

        ck_assert_int_eq(save(store, "c1", 1, NULL, NULL, &err), KEEL_OK);
        keel_alloc_fail_after(n, 0);
        rc = save(store, "c1", 2, NULL, &b, &err);
        keel_alloc_fail_after(-1, 0);
        l = list(store, "c1", NULL, 0);
        if (rc == KEEL_OK) {
            ck_assert_uint_eq(json_array_size(l), 1);
            ck_assert_int_eq(turns_metric(store), 2);
            done = 1;
        } else {
            ck_assert_msg(json_array_size(l) == 0 && turns_metric(store) == 1,
                          "at %ld: %zu artifacts, %ld turns after %s", n, json_array_size(l),
                          turns_metric(store), err.message);
        }
        json_decref(l);
        l = facts(store, (struct store_fact_query){0});
        ck_assert_uint_eq(json_array_size(l), rc == KEEL_OK ? 2 : 0);
        json_decref(l);
        store_close(store);
    }
    ck_assert(done);
}
END_TEST

/* ---- artifact_turn ------------------------------------------------------------ */

static struct pipeline *scholar(struct store *store)
{
    char packs[600];
    struct pipeline_options o = {.packs_dir = packs, .pack = "scholar", .store = store,
                                 .providers = "none", .llm = {"none", NULL, NULL},
                                 .websearch_url = "none"};
    struct pipeline *pl = NULL;
    struct keel_error err;
    long ingested;

    snprintf(packs, sizeof(packs), "%s/packs", unit_root());
    keel_error_clear(&err);
    ck_assert_msg(pipeline_new(&o, &pl, &err) == KEEL_OK, "%s", err.message);
    ck_assert_int_eq(pipeline_ingest_sample(pl, &ingested, &err), KEEL_OK);
    return pl;
}

static int turn(struct pipeline *pl, const char *message, json_t **out, struct keel_error *err)
{
    struct turn_request req = {.message = message, .message_len = strlen(message), .now_ms = T0};

    *out = NULL;
    keel_error_clear(err);
    return pipeline_turn(pl, &req, out, err);
}

static const char *const ask =
    "find papers on sleep and memory and summarize the evidence with citations";

START_TEST(test_turn_builds_and_stores)
{
    struct store *store = unit_store_fresh();
    struct pipeline *pl = scholar(store);
    struct keel_error err;
    json_t *r, *l, *t = NULL, *gate;

    keel_log_set_level(KEEL_LOG_ERROR);
    ck_assert_int_eq(turn(pl, ask, &r, &err), KEEL_OK);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "artifact"), "type")),
                     "research_brief");
    ck_assert_int_ge(json_integer_value(json_object_get(json_object_get(r, "artifact"), "facts")), 2);
    ck_assert(json_is_false(json_object_get(json_object_get(r, "artifact"), "exported")));
    l = list(store, json_string_value(json_object_get(r, "conversation_id")), NULL, 0);
    ck_assert_uint_eq(json_array_size(l), 1);
    ck_assert(json_equal(json_object_get(json_array_get(l, 0), "id"),
                         json_object_get(json_object_get(r, "artifact"), "id")));
    json_decref(l);
    ck_assert_int_eq(store_get_turn(store, json_string_value(json_object_get(r, "correlation_id")),
                                    &t, &err),
                     KEEL_OK);
    gate = json_object_get(json_object_get(t, "decision"), "artifact");
    ck_assert_str_eq(json_string_value(json_object_get(gate, "reason")), "selected");
    ck_assert_str_eq(json_string_value(json_object_get(gate, "outcome")), "built");
    json_decref(t);
    json_decref(r);

    /* one paper: the brief fails closed, the turn is stored without it */
    ck_assert_int_eq(turn(pl, "find papers on sparse autoencoders and summarize with citations",
                          &r, &err),
                     KEEL_OK);
    ck_assert(json_is_null(json_object_get(r, "artifact")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "artifact_gate"), "reason")),
                     "too_few_sources");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "artifact_gate"), "outcome")),
                     "failed");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(r, "answer")), "I found 1 paper"));
    l = list(store, json_string_value(json_object_get(r, "conversation_id")), NULL, 0);
    ck_assert_uint_eq(json_array_size(l), 0);
    json_decref(l);
    json_decref(r);
    pipeline_free(pl);
    store_close(store);
}
END_TEST

START_TEST(test_turn_export)
{
    struct store *store = unit_store_fresh();
    struct pipeline *pl = scholar(store);
    char dir[256], sub[300];
    struct keel_error err;
    json_t *r;

    keel_log_set_level(KEEL_LOG_ERROR);
    unit_temp_dir(dir, sizeof(dir), "artexp", 0);
    snprintf(sub, sizeof(sub), "%s/exports", dir);
    ck_assert_int_eq(pipeline_set_artifacts_dir(pl, sub, &err), KEEL_OK);
    ck_assert_int_eq(turn(pl, ask, &r, &err), KEEL_OK);
    ck_assert(json_is_true(json_object_get(json_object_get(r, "artifact"), "exported")));
    json_decref(r);
    /* an export that cannot be written: the turn and its artifact stand */
    ck_assert_int_eq(pipeline_set_artifacts_dir(pl, "/proc/keel-no-such/dir", &err), KEEL_OK);
    ck_assert_int_eq(turn(pl, ask, &r, &err), KEEL_OK);
    ck_assert(json_is_false(json_object_get(json_object_get(r, "artifact"), "exported")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "artifact"), "type")),
                     "research_brief");
    json_decref(r);
    {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    pipeline_free(pl);
    store_close(store);
}
END_TEST

START_TEST(test_turn_allocation_failures)
{
    long needed = -1;

    keel_log_set_level(KEEL_LOG_ERROR + 1);
    for (long n = 0; needed < 0 && n < 100000; n += n < 400 ? 1 : 7) {
        struct store *store = unit_store_fresh();
        struct pipeline *pl = scholar(store);
        struct keel_error err;
        json_t *r = NULL, *l, *convs = NULL;
        int rc;

        keel_alloc_fail_after(n, 0);
        rc = turn(pl, ask, &r, &err);
        keel_alloc_fail_after(-1, 0);
        ck_assert_int_eq(store_list_conversations(store, NULL, 10, 0, &convs, &err), KEEL_OK);
        if (json_array_size(convs) == 1) {
            /* the turn was stored: with its artifact (the gate chose one) */
            l = list(store, json_string_value(json_object_get(json_array_get(convs, 0), "id")),
                     NULL, 0);
            ck_assert_msg(json_array_size(l) == 1, "at %ld: a stored turn without its artifact", n);
            json_decref(l);
            l = facts(store, (struct store_fact_query){0});
            ck_assert_int_ge(json_array_size(l), 2);
            json_decref(l);
            if (rc == KEEL_OK)
                needed = n;
        } else {
            ck_assert_int_ne(rc, KEEL_OK);
            l = facts(store, (struct store_fact_query){0});
            ck_assert_uint_eq(json_array_size(l), 0);
            json_decref(l);
        }
        json_decref(convs);
        json_decref(r);
        pipeline_free(pl);
        store_close(store);
    }
    ck_assert_int_ge(needed, 0);
}
END_TEST

static void add_store_tests(TCase *tc)
{
    unit_leak_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_store_round_trip);
    tcase_add_test(tc, test_store_fact_filters);
    tcase_add_test(tc, test_store_all_or_nothing);
    tcase_add_test(tc, test_store_delete_conversation);
    tcase_add_test(tc, test_store_allocation_failures);
}

Suite *suite_artifact_store(void)
{
    Suite *s = suite_create("artifact_store");
    TCase *mem = tcase_create("artifact_store_mem");
    TCase *sqlite = tcase_create("artifact_store_sqlite");
    TCase *turns = tcase_create("artifact_turn");

    tcase_add_unchecked_fixture(mem, unit_backend_mem, NULL);
    add_store_tests(mem);
    suite_add_tcase(s, mem);
    tcase_add_unchecked_fixture(sqlite, backend_sqlite, unit_backend_sqlite_remove);
    add_store_tests(sqlite);
    suite_add_tcase(s, sqlite);

    tcase_add_unchecked_fixture(turns, unit_backend_mem, NULL);
    unit_leak_fixture(turns);
    tcase_set_timeout(turns, 300);
    tcase_add_test(turns, test_turn_builds_and_stores);
    tcase_add_test(turns, test_turn_export);
    tcase_add_test(turns, test_turn_allocation_failures);
    suite_add_tcase(s, turns);
    return s;
}
