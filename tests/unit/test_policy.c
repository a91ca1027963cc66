/*
 * test_policy.c — unit tests of the policy decision (src/policy/policy.h)
 * on the real scholar and assistant packs: representative messages checked
 * field by field through struct policy_decision, determinism, the promise
 * that policy_decide allocates nothing (counted, and with every allocation
 * failing), the message cap, context errors, and policy_new refusing bad
 * `policy` sections with "file:line" — including under an allocation
 * failure at every step, which must give KEEL_ENOMEM and leak nothing. The
 * clock is pinned: "now" is 2026-02-07T12:00:00Z throughout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "pack/pack.h"
#include "policy/policy.h"
#include "core/utf8.h"
#include "unit.h"

#define NOW_MS INT64_C(1770465600000)  /* 2026-02-07T12:00:00Z */

struct loaded {
    struct pack *pack;
    struct policy *policy;
};

static void load(struct loaded *l, const char *name)
{
    char dir[1024];
    struct keel_error err;
    int rc;

    snprintf(dir, sizeof(dir), "%s/packs", unit_root());
    rc = pack_load(dir, name, &l->pack, &err);
    ck_assert_msg(rc == KEEL_OK, "pack %s: %s: %s", name, err.field, err.message);
    rc = policy_new(l->pack, &l->policy, &err);
    ck_assert_msg(rc == KEEL_OK, "policy %s: %s: %s", name, err.field, err.message);
    ck_assert_ptr_eq(policy_pack(l->policy), l->pack);
}

static void unload(struct loaded *l)
{
    policy_free(l->policy);
    pack_free(l->pack);
}

static int tool(const struct loaded *l, const char *name)
{
    int index = pack_tool_index(l->pack, name, strlen(name));

    ck_assert_msg(index >= 0, "no tool %s", name);
    return index;
}

/* Index of topic class `name`: classes are numbered in pack order. */
static int topic_class(const struct loaded *l, const char *name)
{
    json_t *classes = json_object_get(json_object_get(l->pack->doc, "policy"), "topic_classes");
    const char *key;
    json_t *value;
    int i = 0;

    json_object_foreach(classes, key, value) {
        if (!strcmp(key, name))
            return i;
        i++;
    }
    ck_abort_msg("no topic class %s", name);
    return -1;
}

static void decide(const struct loaded *l, const char *role, const char *const *tools,
                   size_t n_tools, const char *hint, const char *message,
                   struct policy_decision *d)
{
    struct policy_context ctx;
    struct keel_error err;
    int rc = policy_context_init(&ctx, l->policy, role, tools, n_tools, hint, NOW_MS, &err);

    ck_assert_msg(rc == KEEL_OK, "context: %s: %s", err.field, err.message);
    memset(d, 0x5a, sizeof(*d));
    policy_decide(l->policy, &ctx, message, strlen(message), d);
}

static int has_reason(const struct policy_decision *d, enum policy_reason reason)
{
    for (size_t i = 0; i < d->n_reasons; i++)
        if (d->reasons[i] == reason)
            return 1;
    return 0;
}

#define ck_assert_reason(d, r) \
    ck_assert_msg(has_reason((d), (r)), "reason %s missing", policy_reason_name(r))
#define ck_assert_no_reason(d, r) \
    ck_assert_msg(!has_reason((d), (r)), "reason %s present", policy_reason_name(r))

static void assert_search(const struct policy_decision *d, const char *query, int count,
                          int year_from, int year_to, int open_access_only)
{
    ck_assert_int_eq(d->has_search, 1);
    ck_assert_str_eq(d->search.query, query);
    ck_assert_uint_eq(d->search.query_len, strlen(query));
    ck_assert_int_eq(d->search.count, count);
    ck_assert_int_eq(d->search.year_from, year_from);
    ck_assert_int_eq(d->search.year_to, year_to);
    ck_assert_int_eq(d->search.open_access_only, open_access_only);
}

static void assert_no_search(const struct policy_decision *d)
{
    ck_assert_int_eq(d->has_search, 0);
    ck_assert_int_eq(d->force_tool, -1);
    ck_assert_ptr_null(d->stage_transition);
}

/* ---- scholar ----------------------------------------------------------- */

START_TEST(test_scholar_search_request)
{
    struct loaded l;
    struct policy_decision d;

    load(&l, "scholar");
    decide(&l, NULL, NULL, 0, NULL, "Can you find me 10 recent papers on transformer models?", &d);
    ck_assert_int_eq(d.intent, POLICY_INTENT_DIRECT_SEARCH);
    ck_assert_int_eq(d.route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d.tool_veto, 0);
    ck_assert_int_eq(d.reason, R_PAPER_SEARCH);
    ck_assert_int_eq(d.signals.explicit_request, 1);
    ck_assert_int_eq(d.signals.is_volatile, 1);
    ck_assert_int_eq(d.signals.topic_class, topic_class(&l, "science"));
    ck_assert_int_eq(d.force_tool, tool(&l, "search_papers"));
    assert_search(&d, "transformer models", 10, 2022, 2026, 0);
    ck_assert_str_eq(d.stage_transition, "finding_papers");
    ck_assert_int_eq(d.reasons[0], R_PAPER_SEARCH);
    ck_assert_reason(&d, R_RECENCY_WINDOW);
    ck_assert_reason(&d, R_COUNT_EXPLICIT);
    ck_assert_reason(&d, R_REQUEST_PHRASING_STRIPPED);
    ck_assert_reason(&d, R_TOOL_FORCED);
    ck_assert_reason(&d, R_STAGE_TRANSITION);
    ck_assert_no_reason(&d, R_COUNT_DEFAULT);
    ck_assert_no_reason(&d, R_INPUT_TRUNCATED);
    unload(&l);
}
END_TEST

START_TEST(test_scholar_years_and_open_access)
{
    struct loaded l;
    struct policy_decision d;

    load(&l, "scholar");
    decide(&l, NULL, NULL, 0, NULL, "Find open-access papers on CRISPR from 2018-2022", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d.signals.is_volatile, 0);
    assert_search(&d, "CRISPR", 5, 2018, 2022, 1);
    ck_assert_reason(&d, R_YEAR_RANGE);
    ck_assert_reason(&d, R_OPEN_ACCESS);
    ck_assert_reason(&d, R_COUNT_DEFAULT);

    /* A reversed range is put right; an en dash works like a hyphen. */
    decide(&l, NULL, NULL, 0, NULL, "papers on CRISPR 2022\xe2\x80\x93" "2018", &d);
    assert_search(&d, "CRISPR", 5, 2018, 2022, 0);
    ck_assert_reason(&d, R_YEAR_RANGE_REVERSED);

    /* Counts and years outside what the pack allows are clamped. */
    decide(&l, NULL, NULL, 0, NULL, "Show me the top 100 studies on sleep since 1850", &d);
    assert_search(&d, "sleep", 50, 1900, 0, 0);
    ck_assert_reason(&d, R_COUNT_CLAMPED);
    ck_assert_reason(&d, R_YEAR_CLAMPED);
    ck_assert_reason(&d, R_YEAR_SINCE);

    decide(&l, NULL, NULL, 0, NULL, "find 3 studies on sleep from the last 5 years", &d);
    assert_search(&d, "sleep", 3, 2022, 2026, 0);
    ck_assert_reason(&d, R_YEAR_WINDOW);
    unload(&l);
}
END_TEST

START_TEST(test_scholar_deictic_and_clarify)
{
    struct loaded l;
    struct policy_decision d;

    load(&l, "scholar");
    decide(&l, NULL, NULL, 0, "graph neural networks", "Find papers on this topic", &d);
    ck_assert_int_eq(d.intent, POLICY_INTENT_DIRECT_SEARCH);
    assert_search(&d, "graph neural networks", 5, 0, 0, 0);
    ck_assert_reason(&d, R_DEICTIC_TOPIC);

    /* No topic and no hint: ask, do not search. */
    decide(&l, NULL, NULL, 0, NULL, "Find papers on this topic", &d);
    ck_assert_int_eq(d.intent, POLICY_INTENT_CLARIFY);
    ck_assert_int_eq(d.route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d.force_tool, -1);
    ck_assert_ptr_null(d.stage_transition);
    ck_assert_reason(&d, R_TOPIC_MISSING);
    ck_assert_no_reason(&d, R_TOOL_FORCED);
    unload(&l);
}
END_TEST

START_TEST(test_scholar_no_search)
{
    struct loaded l;
    struct policy_decision d;

    load(&l, "scholar");
    decide(&l, NULL, NULL, 0, NULL, "Summarize these papers", &d);
    ck_assert_int_eq(d.intent, POLICY_INTENT_ANALYSIS);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    ck_assert_int_eq(d.tool_veto, 0);
    ck_assert_int_eq(d.reason, R_ANALYSIS);
    assert_no_search(&d);
    ck_assert_uint_eq(d.n_reasons, 1);

    decide(&l, NULL, NULL, 0, NULL, "/reset", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_COMMAND);
    ck_assert_int_eq(d.tool_veto, 1);
    ck_assert_int_eq(d.reason, R_HARD_COMMAND);
    ck_assert_int_eq(d.intent, POLICY_INTENT_GENERAL);
    assert_no_search(&d);

    decide(&l, NULL, NULL, 0, NULL, "hello", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    ck_assert_int_eq(d.reason, R_SMALLTALK);
    ck_assert_int_eq(d.signals.topic_class, -1);
    assert_no_search(&d);

    decide(&l, NULL, NULL, 0, NULL, "What's the latest consensus on coffee and health?", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    ck_assert_int_eq(d.reason, R_QUESTION_NOT_SEARCH);
    assert_no_search(&d);

    decide(&l, NULL, NULL, 0, NULL, "Show me my library", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LOCAL_MEMORY);
    ck_assert_int_eq(d.tool_veto, 1);
    ck_assert_int_eq(d.reason, R_LIBRARY_REQUEST);

    decide(&l, NULL, NULL, 0, NULL, "", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    ck_assert_int_eq(d.reason, R_DEFAULT_LLM);
    ck_assert_uint_eq(d.n_reasons, 1);
    unload(&l);
}
END_TEST

START_TEST(test_scholar_tools_and_roles)
{
    static const char *const no_search[] = {"get_paper", "add_to_library"};
    struct loaded l;
    struct policy_decision d;

    load(&l, "scholar");
    /* The search tool is not available this turn: still a search, not forced. */
    decide(&l, NULL, no_search, 2, NULL, "Find papers on bees", &d);
    ck_assert_int_eq(d.intent, POLICY_INTENT_DIRECT_SEARCH);
    ck_assert_int_eq(d.route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d.force_tool, -1);
    ck_assert_ptr_null(d.stage_transition);
    assert_search(&d, "bees", 5, 0, 0, 0);
    ck_assert_reason(&d, R_TOOL_UNAVAILABLE);
    ck_assert_no_reason(&d, R_TOOL_FORCED);
    /* A viewer may call the read-only search tool. */
    decide(&l, "viewer", NULL, 0, NULL, "Find papers on bees", &d);
    ck_assert_int_eq(d.force_tool, tool(&l, "search_papers"));
    unload(&l);
}
END_TEST

/* A pack whose search tool writes, so a read-only role may not call it. */
static const char mini_pack[] =
    "name: mini\n"                                            /* 1 */
    "tools:\n"                                                /* 2 */
    "  - {name: read_doc, access: read}\n"                    /* 3 */
    "  - {name: find_docs, access: write}\n"                  /* 4 */
    "roles:\n"                                                /* 5 */
    "  viewer: [read]\n"                                      /* 6 */
    "  editor: [read, write]\n"                               /* 7 */
    "default_role: viewer\n"                                  /* 8 */
    "policy:\n"                                               /* 9 */
    "  search: {tool: find_docs, stage_transition: hunting}\n"  /* 10 */
    "  routes:\n"                                             /* 11 */
    "    tools: {llm_only: read_doc}\n"                       /* 12 */
    "  phrases:\n"                                            /* 13 */
    "    search_verb: [find]\n"                               /* 14 */
    "    paper_noun: [docs]\n"                                /* 15 */
    "    topic_lead: [on]\n";                                 /* 16 */

START_TEST(test_role_forbids_tool)
{
    struct loaded l;
    struct keel_error err;
    struct policy_decision d;

    ck_assert_int_eq(pack_parse(mini_pack, strlen(mini_pack), "mini.yaml", &l.pack, &err), KEEL_OK);
    ck_assert_int_eq(policy_new(l.pack, &l.policy, &err), KEEL_OK);
    decide(&l, NULL, NULL, 0, NULL, "find docs on rust", &d);
    ck_assert_int_eq(d.intent, POLICY_INTENT_DIRECT_SEARCH);
    ck_assert_int_eq(d.force_tool, -1);
    ck_assert_ptr_null(d.stage_transition);
    assert_search(&d, "rust", 5, 0, 0, 0);
    ck_assert_reason(&d, R_ROLE_FORBIDS_TOOL);
    decide(&l, "editor", NULL, 0, NULL, "find docs on rust", &d);
    ck_assert_int_eq(d.force_tool, 1);
    ck_assert_str_eq(d.stage_transition, "hunting");
    /* A route bound to a tool forces it. */
    decide(&l, NULL, NULL, 0, NULL, "tell me a joke", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    ck_assert_int_eq(d.force_tool, 0);
    ck_assert_reason(&d, R_TOOL_FORCED);
    unload(&l);
}
END_TEST

/* ---- assistant --------------------------------------------------------- */

START_TEST(test_assistant_routes)
{
    struct loaded l;
    struct policy_decision d;

    load(&l, "assistant");
    decide(&l, NULL, NULL, 0, NULL, "convert 5 km to miles", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_CONVERSION);
    ck_assert_int_eq(d.tool_veto, 1);
    ck_assert_int_eq(d.reason, R_CONVERSION);
    ck_assert_int_eq(d.force_tool, tool(&l, "convert_units"));
    ck_assert_int_eq(d.has_search, 0);
    ck_assert_reason(&d, R_TOOL_FORCED);

    decide(&l, NULL, NULL, 0, NULL, "What's the weather in Paris today?", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d.intent, POLICY_INTENT_DIRECT_SEARCH);
    ck_assert_int_eq(d.reason, R_VOLATILE_TOPIC);
    ck_assert_int_eq(d.signals.is_volatile, 1);
    ck_assert_int_eq(d.signals.explicit_request, 0);
    ck_assert_int_eq(d.signals.topic_class, topic_class(&l, "weather"));
    ck_assert_int_eq(d.force_tool, tool(&l, "web_search"));
    ck_assert_int_eq(d.has_search, 1);
    ck_assert_ptr_nonnull(strstr(d.search.query, "Paris"));
    ck_assert_ptr_null(d.stage_transition);  /* the assistant pack has none */

    decide(&l, NULL, NULL, 0, NULL, "remember that my dog is called Rex", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LOCAL_MEMORY);
    ck_assert_int_eq(d.tool_veto, 1);
    ck_assert_int_eq(d.reason, R_PERSONAL_MEMORY);
    assert_no_search(&d);

    decide(&l, NULL, NULL, 0, NULL, "don't search, just tell me about Rome", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    ck_assert_int_eq(d.tool_veto, 1);
    ck_assert_int_eq(d.reason, R_USER_TOOL_VETO);
    ck_assert_int_eq(d.signals.explicit_request, 0);
    assert_no_search(&d);

    decide(&l, NULL, NULL, 0, NULL, "search the web for rust release notes", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d.reason, R_WEB_EXPLICIT);
    ck_assert_int_eq(d.signals.explicit_request, 1);
    ck_assert_str_eq(d.search.query, "rust release notes");

    decide(&l, NULL, NULL, 0, NULL, "what is the capital of France", &d);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    ck_assert_int_eq(d.reason, R_DEFAULT_LLM);
    ck_assert_int_eq(d.tool_veto, 0);
    assert_no_search(&d);
    unload(&l);
}
END_TEST

/* ---- properties -------------------------------------------------------- */

static const char *const sample_messages[] = {
    "Can you find me 10 recent papers on transformer models?",
    "Find open-access papers on CRISPR from 2018-2022",
    "find a few studies on COVID-19 vaccines published in 2021, with pdf",
    "Show me the top 100 studies on sleep since 1850",
    "Find papers on this topic",
    "Summarize these papers",
    "convert 5 km to miles",
    "What's the weather in Paris today?",
    "don\xe2\x80\x99t search, from memory: who wrote Hamlet?",
    "/reset",
    "",
};

/* Compares the fields a decision defines (search only when has_search,
 * reasons only up to n_reasons). */
static void assert_same_decision(const struct policy_decision *a, const struct policy_decision *b,
                                 const char *message)
{
    ck_assert_msg(a->intent == b->intent && a->route == b->route && a->tool_veto == b->tool_veto &&
                  a->reason == b->reason && a->force_tool == b->force_tool &&
                  a->has_search == b->has_search && a->stage_transition == b->stage_transition &&
                  a->n_reasons == b->n_reasons,
                  "decisions differ for \"%s\"", message);
    ck_assert_msg(!memcmp(&a->signals, &b->signals, sizeof(a->signals)), "signals differ: %s",
                  message);
    ck_assert_msg(!memcmp(a->reasons, b->reasons, a->n_reasons), "reasons differ: %s", message);
    if (a->has_search) {
        ck_assert_uint_eq(a->search.query_len, b->search.query_len);
        ck_assert_msg(!memcmp(a->search.query, b->search.query, a->search.query_len + 1),
                      "queries differ: %s", message);
        ck_assert_int_eq(a->search.count, b->search.count);
        ck_assert_int_eq(a->search.year_from, b->search.year_from);
        ck_assert_int_eq(a->search.year_to, b->search.year_to);
        ck_assert_int_eq(a->search.open_access_only, b->search.open_access_only);
    }
}

START_TEST(test_deterministic)
{
    const char *const packs[] = {"scholar", "assistant"};
    const size_t n_samples = sizeof(sample_messages) / sizeof(sample_messages[0]);

    for (size_t p = 0; p < 2; p++) {
        struct loaded l;
        load(&l, packs[p]);
        for (size_t i = 0; i < sizeof(sample_messages) / sizeof(sample_messages[0]); i++) {
            struct policy_decision a, b;
            struct policy_context ctx;
            struct keel_error err;
            ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, NULL, 0, "bees", NOW_MS,
                                                 &err), KEEL_OK);
            memset(&a, 0x00, sizeof(a));
            memset(&b, 0xff, sizeof(b));
            policy_decide(l.policy, &ctx, sample_messages[i], strlen(sample_messages[i]), &a);
            policy_decide(l.policy, &ctx, sample_messages[i], strlen(sample_messages[i]), &b);
            assert_same_decision(&a, &b, sample_messages[i]);
            /* Deciding again into a used struct changes nothing either. */
            const char *other = sample_messages[(i + 1) % n_samples];
            policy_decide(l.policy, &ctx, other, strlen(other), &b);
            policy_decide(l.policy, &ctx, sample_messages[i], strlen(sample_messages[i]), &b);
            assert_same_decision(&a, &b, sample_messages[i]);
        }
        unload(&l);
    }
}
END_TEST

START_TEST(test_decide_allocates_nothing)
{
    const char *const packs[] = {"scholar", "assistant"};

    for (size_t p = 0; p < 2; p++) {
        struct loaded l;
        load(&l, packs[p]);
        for (size_t i = 0; i < sizeof(sample_messages) / sizeof(sample_messages[0]); i++) {
            struct policy_decision free_run, starved;
            struct policy_context ctx;
            struct keel_error err;
            long live;
            ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, NULL, 0, NULL, NOW_MS,
                                                 &err), KEEL_OK);
            live = keel_alloc_live();
            policy_decide(l.policy, &ctx, sample_messages[i], strlen(sample_messages[i]),
                          &free_run);
            ck_assert_int_eq(keel_alloc_live(), live);
            keel_alloc_fail_after(0, 1);
            policy_decide(l.policy, &ctx, sample_messages[i], strlen(sample_messages[i]),
                          &starved);
            keel_alloc_fail_after(-1, 0);
            ck_assert_int_eq(keel_alloc_live(), live);
            assert_same_decision(&free_run, &starved, sample_messages[i]);
        }
        unload(&l);
    }
}
END_TEST

START_TEST(test_long_message)
{
    struct loaded l;
    struct policy_context ctx;
    struct policy_decision d;
    struct keel_error err;
    const char head[] = "find papers on bees ";
    size_t n = POLICY_MESSAGE_MAX + 1000;
    char *message = malloc(n);  /* exactly n bytes, no terminator: overreads show */

    ck_assert_ptr_nonnull(message);
    load(&l, "scholar");
    ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, NULL, 0, NULL, NOW_MS, &err),
                     KEEL_OK);
    memcpy(message, head, sizeof(head) - 1);
    for (size_t i = sizeof(head) - 1; i < n; i++)
        message[i] = (i % 16 == 15) ? ' ' : 'a';  /* few enough tokens for the lexicon */
    policy_decide(l.policy, &ctx, message, n, &d);
    ck_assert_reason(&d, R_INPUT_TRUNCATED);
    ck_assert_int_eq(d.route, POLICY_ROUTE_WEBSEARCH);
    ck_assert_int_eq(d.has_search, 1);
    ck_assert_uint_lt(d.search.query_len, POLICY_QUERY_MAX);
    ck_assert_uint_eq(strlen(d.search.query), d.search.query_len);

    /* Exactly at the cap: nothing is cut. */
    policy_decide(l.policy, &ctx, message, POLICY_MESSAGE_MAX, &d);
    ck_assert_no_reason(&d, R_INPUT_TRUNCATED);

    /* A two-byte character across the cap is dropped whole. */
    message[POLICY_MESSAGE_MAX - 1] = (char)0xc3;
    message[POLICY_MESSAGE_MAX] = (char)0xa9;
    policy_decide(l.policy, &ctx, message, POLICY_MESSAGE_MAX + 1, &d);
    ck_assert_reason(&d, R_INPUT_TRUNCATED);
    ck_assert_uint_eq(utf8_valid_prefix(d.search.query, d.search.query_len), d.search.query_len);

    /* One huge word. */
    memset(message, 'z', n);
    policy_decide(l.policy, &ctx, message, n, &d);
    ck_assert_reason(&d, R_INPUT_TRUNCATED);
    ck_assert_int_eq(d.route, POLICY_ROUTE_LLM_ONLY);
    free(message);
    unload(&l);
}
END_TEST

START_TEST(test_invalid_utf8_cuts)
{
    struct loaded l;
    struct policy_decision d;

    load(&l, "scholar");
    decide(&l, NULL, NULL, 0, NULL, "find papers on bees \xff and wasps", &d);
    ck_assert_reason(&d, R_INPUT_TRUNCATED);
    assert_search(&d, "bees", 5, 0, 0, 0);
    /* A NUL ends what is read, too. */
    {
        struct policy_context ctx;
        struct keel_error err;
        const char text[] = "find papers on bees\0 and wasps";
        ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, NULL, 0, NULL, NOW_MS, &err),
                         KEEL_OK);
        policy_decide(l.policy, &ctx, text, sizeof(text) - 1, &d);
        ck_assert_str_eq(d.search.query, "bees");
        ck_assert_reason(&d, R_INPUT_TRUNCATED);
    }
    unload(&l);
}
END_TEST

START_TEST(test_context_init)
{
    static const char *const tools_ok[] = {"get_paper", "search_papers"};
    static const char *const tools_bad[] = {"get_paper", "delete_everything"};
    struct loaded l;
    struct policy_context ctx;
    struct keel_error err;
    char long_hint[POLICY_QUERY_MAX];

    load(&l, "scholar");
    ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, NULL, 0, NULL, NOW_MS, &err),
                     KEEL_OK);
    ck_assert_int_eq(ctx.role, pack_role_index(l.pack, "editor"));
    ck_assert_uint_eq(ctx.tools, (UINT64_C(1) << l.pack->n_tools) - 1);
    ck_assert_int_eq(ctx.now_year, 2026);
    ck_assert_int_eq(ctx.now_ms, NOW_MS);
    ck_assert_ptr_null(ctx.topic_hint);

    ck_assert_int_eq(policy_context_init(&ctx, l.policy, "viewer", tools_ok, 2, "bees", NOW_MS,
                                         &err), KEEL_OK);
    ck_assert_int_eq(ctx.role, pack_role_index(l.pack, "viewer"));
    ck_assert_uint_eq(ctx.tools, (UINT64_C(1) << tool(&l, "get_paper")) |
                                 (UINT64_C(1) << tool(&l, "search_papers")));
    ck_assert_uint_eq(ctx.topic_hint_len, 4);
    /* An empty list means no tools at all. */
    ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, tools_ok, 0, NULL, NOW_MS, &err),
                     KEEL_OK);
    ck_assert_uint_eq(ctx.tools, 0);

    ck_assert_int_eq(policy_context_init(&ctx, l.policy, "admin", NULL, 0, NULL, NOW_MS, &err),
                     KEEL_EINVAL);
    ck_assert_str_eq(err.field, "role");
    ck_assert_ptr_nonnull(strstr(err.message, "\"admin\""));
    ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, tools_bad, 2, NULL, NOW_MS, &err),
                     KEEL_EINVAL);
    ck_assert_str_eq(err.field, "tools[1]");
    ck_assert_ptr_nonnull(strstr(err.message, "\"delete_everything\""));

    memset(long_hint, 'h', sizeof(long_hint) - 1);
    long_hint[sizeof(long_hint) - 1] = '\0';
    ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, NULL, 0, long_hint, NOW_MS, &err),
                     KEEL_ETOOBIG);
    ck_assert_str_eq(err.field, "topic_hint");
    ck_assert_int_eq(policy_context_init(&ctx, l.policy, NULL, NULL, 0, "caf\xc3", NOW_MS, &err),
                     KEEL_EINVAL);
    ck_assert_str_eq(err.field, "topic_hint");
    unload(&l);
}
END_TEST

START_TEST(test_names)
{
    ck_assert_str_eq(policy_intent_name(POLICY_INTENT_DIRECT_SEARCH), "direct_search");
    ck_assert_str_eq(policy_intent_name(POLICY_INTENT_CLARIFY), "clarify");
    ck_assert_str_eq(policy_route_name(POLICY_ROUTE_LOCAL_MEMORY), "local_memory_intent");
    ck_assert_str_eq(policy_route_name(POLICY_ROUTE_CONVERSION), "conversion_tool");
    ck_assert_str_eq(policy_reason_name(R_INPUT_TRUNCATED), "input_truncated");
    ck_assert_str_eq(policy_reason_name(R_PAPER_SEARCH), "paper_search_request");
    ck_assert_str_eq(policy_reason_name(R_REASON_COUNT), "unknown");
    for (int r = 0; r < R_REASON_COUNT; r++) {
        ck_assert_ptr_nonnull(policy_reason_name((enum policy_reason)r));
        for (int other = 0; other < r; other++)
            ck_assert_str_ne(policy_reason_name((enum policy_reason)r),
                             policy_reason_name((enum policy_reason)other));
    }
}
END_TEST

/* ---- bad policy sections ----------------------------------------------- */

/* A pack with `policy_text` as its policy section (from line 5 on). */
static void policy_bad(const char *policy_text, int line, const char *needle)
{
    char text[2048], field[64];
    struct keel_error err;
    struct pack *pack = NULL;
    struct policy *policy = (struct policy *)&err;
    int rc;

    snprintf(text, sizeof(text),
             "name: bad\n"                                    /* 1 */
             "tools: [{name: search, access: read}]\n"        /* 2 */
             "roles: {viewer: [read]}\n"                      /* 3 */
             "policy:\n"                                      /* 4 */
             "%s",
             policy_text);
    ck_assert_int_eq(pack_parse(text, strlen(text), "bad.yaml", &pack, &err), KEEL_OK);
    rc = policy_new(pack, &policy, &err);
    pack_free(pack);
    ck_assert_msg(rc == KEEL_EINVAL, "rc %d for:\n%s", rc, policy_text);
    ck_assert_ptr_eq(policy, (struct policy *)&err);  /* nothing returned */
    snprintf(field, sizeof(field), "bad.yaml:%d", line);
    ck_assert_msg(!strcmp(err.field, field), "field \"%s\", expected \"%s\" (%s)", err.field,
                  field, err.message);
    ck_assert_msg(strstr(err.message, needle) != NULL, "message \"%s\" lacks \"%s\"",
                  err.message, needle);
}

START_TEST(test_bad_phrase_table)
{
    policy_bad("  phrases:\n"                  /* 5 */
               "    request: [find me]\n"      /* 6 */
               "    requests:\n"               /* 7 */
               "      - find\n",               /* 8 */
               7, "policy.phrases.requests: unknown phrase table \"requests\"");
    policy_bad("  phrases:\n"
               "    request: find me\n",
               6, "must be a list of phrases");
    policy_bad("  phrases:\n"
               "    request:\n"
               "      - find me\n"
               "      - 42\n",
               8, "policy.phrases.request[1]: must be a string");
}
END_TEST

START_TEST(test_bad_year_action)
{
    policy_bad("  years:\n"                                        /* 5 */
               "    - {phrase: \"since {year}\", action: since}\n"  /* 6 */
               "    - {phrase: \"in {year}\", action: sometime}\n", /* 7 */
               7, "action \"sometime\" is not one of");
    policy_bad("  years:\n"
               "    - {phrase: \"since {year}\", action: since, n: 0}\n",
               6, "policy.years[0].n");
    policy_bad("  years:\n"
               "    - {action: since}\n",
               6, "policy.years[0].phrase: is required");
    policy_bad("  years:\n"
               "    - {phrase: \"since {year}\", action: since, when: now}\n",
               6, "unknown key \"when\"");
}
END_TEST

START_TEST(test_bad_slot)
{
    policy_bad("  phrases:\n"                     /* 5 */
               "    unit: [km]\n"                 /* 6 */
               "    conversion:\n"                /* 7 */
               "      - \"{n} {unit} to {unit}\"\n" /* 8 */
               "      - \"{n} {foo} in {unit}\"\n", /* 9 */
               9, "unknown slot {foo}");
    policy_bad("  phrases:\n"
               "    request: [\"find {n\"]\n",
               6, "unclosed {");
    policy_bad("  phrases:\n"
               "    request: [\"\"]\n",
               6, "empty phrase");
}
END_TEST

START_TEST(test_bad_search)
{
    policy_bad("  search:\n"                 /* 5 */
               "    max_count: 5\n"          /* 6 */
               "    default_count: 10\n",    /* 7 */
               7, "10 is more than max_count 5");
    /* The default of 5 is over a max_count of 3, too. */
    policy_bad("  search:\n"
               "    max_count: 3\n",
               5, "policy.search.default_count");
    policy_bad("  search:\n"
               "    tool: serch\n",
               6, "\"serch\" is not one of the pack's tools");
    policy_bad("  search:\n"
               "    max_count: 0\n",
               6, "between 1 and 1000");
    policy_bad("  search: {count: 5}\n", 5, "unknown key \"count\"");
    policy_bad("  routes:\n"
               "    tools: {websearch: nope}\n",
               6, "\"nope\" is not one of the pack's tools");
    policy_bad("  routes:\n"
               "    tools: {teleport: search}\n",
               6, "\"teleport\" is not a route");
}
END_TEST

START_TEST(test_bad_section)
{
    policy_bad("  searches: {}\n", 5, "unknown key \"searches\"");
    policy_bad("  []\n", 4, "policy: must be a mapping");
    policy_bad("  numbers: {ten: 10, lots: many}\n", 5, "policy.numbers.lots");
    policy_bad("  topic_classes:\n"
               "    news: {volatile: maybe, phrases: [news]}\n",
               6, "must be true or false");
    policy_bad("  topic_classes:\n"
               "    news: {volatile: true}\n",
               6, "policy.topic_classes.news.phrases: is required");
    {
        /* No policy section at all. */
        const char *text = "name: bare\nroles: {viewer: [read]}\n";
        struct keel_error err;
        struct pack *pack = NULL;
        struct policy *policy = NULL;
        int rc;
        ck_assert_int_eq(pack_parse(text, strlen(text), "bare.yaml", &pack, &err), KEEL_OK);
        rc = policy_new(pack, &policy, &err);
        pack_free(pack);
        ck_assert_int_eq(rc, KEEL_EINVAL);
        ck_assert_ptr_null(policy);
        ck_assert_str_eq(err.field, "bare.yaml:1");
        ck_assert_str_eq(err.message, "policy: is required");
    }
}
END_TEST

/* ---- allocation failures ----------------------------------------------- */

static void sweep(const char *name)
{
    static const char *const probes[] = {
        "Can you find me 10 recent papers on transformer models?",
        "find 3 studies on sleep from the last 5 years",
        "convert 5 km to miles",
        "What's the weather in Paris today?",
        "usd to eur rate",
    };
    struct loaded ref;
    struct keel_error err;
    struct policy *policy = NULL;
    long before, n;
    int rc = KEEL_ENOMEM;

    load(&ref, name);
    before = keel_alloc_live();
    for (n = 0; rc != KEEL_OK; n++) {
        keel_alloc_fail_after(n, 0);
        rc = policy_new(ref.pack, &policy, &err);
        keel_alloc_fail_after(-1, 0);
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "%s, allocation %ld: rc %d: %s: %s",
                      name, n, rc, err.field, err.message);
        if (rc != KEEL_OK) {
            ck_assert_int_eq(err.code, KEEL_ENOMEM);
            ck_assert_int_eq(keel_alloc_live(), before);
        }
    }
    ck_assert_int_gt(n, 100);
    /* The policy that finally compiled is the real one. */
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        struct policy_context ctx;
        struct policy_decision a, b;
        ck_assert_int_eq(policy_context_init(&ctx, ref.policy, NULL, NULL, 0, NULL, NOW_MS, &err),
                         KEEL_OK);
        policy_decide(ref.policy, &ctx, probes[i], strlen(probes[i]), &a);
        policy_decide(policy, &ctx, probes[i], strlen(probes[i]), &b);
        assert_same_decision(&a, &b, probes[i]);
    }
    policy_free(policy);
    unload(&ref);
}

START_TEST(test_enomem_sweep_scholar)
{
    sweep("scholar");
}
END_TEST

START_TEST(test_enomem_sweep_assistant)
{
    sweep("assistant");
}
END_TEST

Suite *suite_policy(void)
{
    Suite *s = suite_create("policy");
    TCase *decisions = tcase_create("decisions"), *props = tcase_create("properties");
    TCase *bad = tcase_create("bad"), *oom = tcase_create("oom");

    unit_leak_fixture(decisions);
    tcase_add_test(decisions, test_scholar_search_request);
    tcase_add_test(decisions, test_scholar_years_and_open_access);
    tcase_add_test(decisions, test_scholar_deictic_and_clarify);
    tcase_add_test(decisions, test_scholar_no_search);
    tcase_add_test(decisions, test_scholar_tools_and_roles);
    tcase_add_test(decisions, test_role_forbids_tool);
    tcase_add_test(decisions, test_assistant_routes);
    suite_add_tcase(s, decisions);

    unit_leak_fixture(props);
    tcase_add_test(props, test_deterministic);
    tcase_add_test(props, test_decide_allocates_nothing);
    tcase_add_test(props, test_long_message);
    tcase_add_test(props, test_invalid_utf8_cuts);
    tcase_add_test(props, test_context_init);
    tcase_add_test(props, test_names);
    suite_add_tcase(s, props);

    unit_leak_fixture(bad);
    tcase_add_test(bad, test_bad_phrase_table);
    tcase_add_test(bad, test_bad_year_action);
    tcase_add_test(bad, test_bad_slot);
    tcase_add_test(bad, test_bad_search);
    tcase_add_test(bad, test_bad_section);
    suite_add_tcase(s, bad);

    unit_leak_fixture(oom);
    tcase_set_timeout(oom, 120);
    tcase_add_test(oom, test_enomem_sweep_scholar);
    tcase_add_test(oom, test_enomem_sweep_assistant);
    suite_add_tcase(s, oom);
    return s;
}
