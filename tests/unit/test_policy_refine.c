/*
 * test_policy_refine.c — policy_refine (src/policy/refine.c) on the real
 * scholar pack: follow-ups that only narrow the previous search become
 * that search with the stated settings merged in; anything else is left to
 * policy_decide, with the output untouched; a pack without a `refine`
 * table takes no refinements; the state's last search reads back
 * strictly. The clock is pinned: "now" is 2026-02-07T12:00:00Z.
 */
#include <stdio.h>
#include <string.h>

#include "pack/pack.h"
#include "pipeline/state.h"
#include "policy/policy.h"
#include "unit.h"

#define NOW_MS INT64_C(1770465600000)  /* 2026-02-07T12:00:00Z */

struct loaded {
    struct pack *pack;
    struct policy *policy;
    struct policy_context ctx;
};

static void load(struct loaded *l, const char *name)
{
    char dir[1024];
    struct keel_error err;

    snprintf(dir, sizeof(dir), "%s/packs", unit_root());
    ck_assert_int_eq(pack_load(dir, name, &l->pack, &err), KEEL_OK);
    ck_assert_int_eq(policy_new(l->pack, &l->policy, &err), KEEL_OK);
    ck_assert_int_eq(policy_context_init(&l->ctx, l->policy, NULL, NULL, 0, NULL, NOW_MS, &err),
                     KEEL_OK);
}

static void unload(struct loaded *l)
{
    policy_free(l->policy);
    pack_free(l->pack);
}

/* "find recent papers on sleep and memory": 5 papers, 2022–2026. */
static void base_search(struct policy_search *base, int open_access_only)
{
    memset(base, 0, sizeof(*base));
    snprintf(base->query, sizeof(base->query), "sleep and memory");
    base->query_len = strlen(base->query);
    base->count = 5;
    base->year_from = 2022;
    base->year_to = 2026;
    base->open_access_only = open_access_only;
}

static int refine(const struct loaded *l, const struct policy_search *base, const char *message,
                  struct policy_decision *d)
{
    memset(d, 0x5a, sizeof(*d));
    return policy_refine(l->policy, &l->ctx, message, strlen(message), base, d);
}

static int has_reason(const struct policy_decision *d, enum policy_reason reason)
{
    for (size_t i = 0; i < d->n_reasons; i++)
        if (d->reasons[i] == reason)
            return 1;
    return 0;
}

static void assert_refined(const struct policy_decision *d, int count, int year_from,
                           int year_to, int open_access_only)
{
    ck_assert_int_eq(d->intent, POLICY_INTENT_DIRECT_SEARCH);
    ck_assert_int_eq(d->route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d->reason, R_SEARCH_REFINED);
    ck_assert_int_eq(d->reasons[0], R_SEARCH_REFINED);
    ck_assert_int_eq(d->tool_veto, 0);
    ck_assert_int_eq(d->has_search, 1);
    ck_assert_str_eq(d->search.query, "sleep and memory");
    ck_assert_uint_eq(d->search.query_len, strlen("sleep and memory"));
    ck_assert_int_eq(d->search.count, count);
    ck_assert_int_eq(d->search.year_from, year_from);
    ck_assert_int_eq(d->search.year_to, year_to);
    ck_assert_int_eq(d->search.open_access_only, open_access_only);
    ck_assert_int_ge(d->force_tool, 0);
    ck_assert_str_eq(d->stage_transition, "finding_papers");
    ck_assert(has_reason(d, R_TOOL_FORCED));
}

START_TEST(test_refinements_merge_into_the_last_search)
{
    struct loaded l;
    struct policy_search base, open;
    struct policy_decision d;

    load(&l, "scholar");
    base_search(&base, 0);
    base_search(&open, 1);
    ck_assert_int_eq(refine(&l, &base, "only open access ones", &d), 1);
    assert_refined(&d, 5, 2022, 2026, 1);
    ck_assert(has_reason(&d, R_OPEN_ACCESS));
    ck_assert(!has_reason(&d, R_COUNT_DEFAULT));   /* the count is the last search's */
    /* years stated replace the last search's; open access stays on */
    ck_assert_int_eq(refine(&l, &open, "just the ones from 2023", &d), 1);
    assert_refined(&d, 5, 2023, 2023, 1);
    ck_assert(has_reason(&d, R_YEAR_EXACT));
    ck_assert_int_eq(refine(&l, &base, "and since 2024?", &d), 1);
    assert_refined(&d, 5, 2024, 0, 0);
    ck_assert_int_eq(refine(&l, &base, "What about open access papers before 2024?", &d), 1);
    assert_refined(&d, 5, 0, 2023, 1);   /* stated years replace the window whole */
    ck_assert_int_eq(refine(&l, &base, "top 3 please", &d), 1);
    assert_refined(&d, 3, 2022, 2026, 0);
    ck_assert(has_reason(&d, R_COUNT_EXPLICIT));
    ck_assert_int_eq(refine(&l, &base, "only those with pdf", &d), 1);
    assert_refined(&d, 5, 2022, 2026, 1);
    ck_assert_int_eq(refine(&l, &base, "only the latest ones", &d), 1);
    assert_refined(&d, 5, 2022, 2026, 0);
    unload(&l);
}
END_TEST

/* Not a refinement: *out is left as it was. */
static void assert_not_refined(const struct loaded *l, const struct policy_search *base,
                               const char *message)
{
    struct policy_decision d, untouched;

    memset(&untouched, 0x5a, sizeof(untouched));
    ck_assert_msg(refine(l, base, message, &d) == 0, "\"%s\" was taken as a refinement", message);
    ck_assert_msg(!memcmp(&d, &untouched, sizeof(d)), "\"%s\" changed the output", message);
}

START_TEST(test_other_messages_are_no_refinement)
{
    struct loaded l;
    struct policy_search base, empty;

    load(&l, "scholar");
    base_search(&base, 0);
    assert_not_refined(&l, &base, "only papers on open access publishing");  /* a topic */
    assert_not_refined(&l, &base, "find recent papers on coral bleaching");
    assert_not_refined(&l, &base, "only open access ones about coral");       /* other words */
    assert_not_refined(&l, &base, "just those");                              /* no setting */
    assert_not_refined(&l, &base, "thanks");
    assert_not_refined(&l, &base, "summarize the open access ones");          /* analysis */
    assert_not_refined(&l, &base, "don't search, only open access ones");     /* a veto */
    assert_not_refined(&l, &base, "");
    assert_not_refined(&l, &base, "only open access ones \xff");              /* not UTF-8 */
    assert_not_refined(&l, NULL, "only open access ones");
    memset(&empty, 0, sizeof(empty));
    assert_not_refined(&l, &empty, "only open access ones");                 /* no query */
    unload(&l);
    /* The assistant pack has no refine table: it takes none. */
    load(&l, "assistant");
    assert_not_refined(&l, &base, "only open access ones");
    unload(&l);
}
END_TEST

START_TEST(test_last_search_json)
{
    struct state_search s, back;
    struct keel_error err;
    json_t *j;
    static const struct {
        const char *json;
        int rc;
        const char *field;
    } bad[] = {
        {"[]", KEEL_EINVAL, "last_search"},
        {"{\"query\": \"x\", \"count\": 5, \"open_access_only\": false, \"extra\": 1}", KEEL_EINVAL,
         "last_search.extra"},
        {"{\"count\": 5, \"open_access_only\": false}", KEEL_EINVAL, "last_search.query"},
        {"{\"query\": \"\", \"count\": 5, \"open_access_only\": false}", KEEL_EINVAL,
         "last_search.query"},
        {"{\"query\": \"x\", \"count\": 0, \"open_access_only\": false}", KEEL_EINVAL,
         "last_search.count"},
        {"{\"query\": \"x\", \"count\": 5, \"year_from\": 1800, \"open_access_only\": false}",
         KEEL_EINVAL, "last_search.year_from"},
        {"{\"query\": \"x\", \"count\": 5, \"year_from\": 2024, \"year_to\": 2020, "
         "\"open_access_only\": false}", KEEL_EINVAL, "last_search.year_from"},
        {"{\"query\": \"x\", \"count\": 5, \"open_access_only\": 1}", KEEL_EINVAL,
         "last_search.open_access_only"},
    };

    memset(&s, 0, sizeof(s));
    j = state_search_json(&s);
    ck_assert(json_is_null(j));
    json_decref(j);
    s.set = 1;
    snprintf(s.query, sizeof(s.query), "sleep and memory");
    s.count = 5;
    s.year_from = 2024;
    s.open_access_only = 1;
    j = state_search_json(&s);
    ck_assert(json_is_null(json_object_get(j, "year_to")));
    ck_assert_int_eq(state_search_from_json(&back, j, &err), KEEL_OK);
    ck_assert_int_eq(back.set, 1);
    ck_assert_str_eq(back.query, "sleep and memory");
    ck_assert_int_eq(back.count, 5);
    ck_assert_int_eq(back.year_from, 2024);
    ck_assert_int_eq(back.year_to, 0);
    ck_assert_int_eq(back.open_access_only, 1);
    json_decref(j);
    ck_assert_int_eq(state_search_from_json(&back, NULL, &err), KEEL_OK);   /* older states */
    ck_assert_int_eq(back.set, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = json_loads(bad[i].json, 0, NULL);
        ck_assert_ptr_nonnull(j);
        ck_assert_msg(state_search_from_json(&back, j, &err) == bad[i].rc, "%s", bad[i].json);
        ck_assert_msg(!strcmp(err.field, bad[i].field), "%s: field %s", bad[i].json, err.field);
        ck_assert_int_eq(back.set, 0);
        json_decref(j);
    }
}
END_TEST

Suite *suite_policy_refine(void)
{
    Suite *s = suite_create("policy_refine");
    TCase *refine_case = tcase_create("refine");

    unit_leak_fixture(refine_case);
    tcase_add_test(refine_case, test_refinements_merge_into_the_last_search);
    tcase_add_test(refine_case, test_other_messages_are_no_refinement);
    tcase_add_test(refine_case, test_last_search_json);
    suite_add_tcase(s, refine_case);
    return s;
}
