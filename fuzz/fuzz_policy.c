/*
 * fuzz_policy.c — the policy decision on arbitrary bytes.
 *
 * The first byte picks the pack, the role and whether a topic hint is
 * given; the rest is the message. Besides ASan/UBSan, it checks the
 * decision's invariants: count within 1..max, years within 1900..now and
 * ordered, the query NUL-terminated and under its cap, and that the
 * decision always has a JSON form (the query is valid UTF-8). The same
 * message is also tried as a refinement of a fixed previous search
 * (policy_refine): when taken, the query must be that search's and the
 * same invariants hold.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "policy/policy_int.h"

static struct policy *policies[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    policies[0] = fuzz_load_policy("scholar");
    policies[1] = fuzz_load_policy("assistant");
    return 0;
}

static void check_refine(const struct policy *policy, const struct policy_context *ctx,
                         const char *message, size_t n)
{
    struct policy_search base = {.query = "sleep and memory", .count = 5, .year_from = 2022,
                                 .year_to = 2026};
    struct policy_decision d;
    json_t *json;

    base.query_len = strlen(base.query);
    if (!policy_refine(policy, ctx, message, n, &base, &d))
        return;
    if (strcmp(d.search.query, base.query) || d.search.count < 1 ||
        d.search.count > policy->max_count || !d.has_search ||
        (d.search.year_from && d.search.year_to && d.search.year_from > d.search.year_to) ||
        (d.search.year_to && d.search.year_to > ctx->now_year))
        __builtin_trap();
    json = policy_decision_json(policy, &d);
    if (!json)
        __builtin_trap();
    json_decref(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct policy *policy;
    const struct pack *pack;
    struct policy_context ctx;
    struct policy_decision d;
    struct keel_error err;
    json_t *json;
    int flags;

    if (size < 1)
        return 0;
    flags = data[0];
    policy = policies[flags & 1];
    pack = policy_pack(policy);
    if (policy_context_init(&ctx, policy, pack->roles[(flags >> 1) % pack->n_roles].name, NULL, 0,
                            (flags & 8) ? "social media and academic performance" : NULL,
                            1770465600000, &err))
        __builtin_trap();
    policy_decide(policy, &ctx, (const char *)data + 1, size - 1, &d);
    if (d.has_search) {
        if (d.search.count < 1 || d.search.count > policy->max_count)
            __builtin_trap();
        if ((d.search.year_from && (d.search.year_from < POLICY_YEAR_MIN || d.search.year_from > ctx.now_year)) ||
            (d.search.year_to && (d.search.year_to < POLICY_YEAR_MIN || d.search.year_to > ctx.now_year)) ||
            (d.search.year_from && d.search.year_to && d.search.year_from > d.search.year_to))
            __builtin_trap();
        if (d.search.query_len >= POLICY_QUERY_MAX || d.search.query[d.search.query_len] != '\0')
            __builtin_trap();
    }
    json = policy_decision_json(policy, &d);
    if (!json)  /* only possible on OOM, or if a copied string were invalid UTF-8 */
        __builtin_trap();
    json_decref(json);
    check_refine(policy, &ctx, (const char *)data + 1, size - 1);
    return 0;
}
