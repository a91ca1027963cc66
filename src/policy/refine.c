/*
 * refine.c — a follow-up that narrows the search before it: "only open
 * access ones", "just the ones from 2023", "and since 2024?", "top 3".
 * Such a message names no topic and would be routed llm_only on its own
 * (or ask for a topic); with the previous search known it is that search
 * again with the settings the message states in place of the old ones.
 *
 * A message refines when every word is a search setting (open access,
 * recency, a year rule, a count), a `refine` phrase of the pack ("what
 * about", "the ones", "those"), filler, request phrasing, a paper or
 * count noun, a reference to the papers found, or a deictic ("them") —
 * and at least one setting is there, and no topic clause ("papers on X")
 * opens. Which words are which is the pack's (policy.phrases); a pack
 * without a `refine` table takes no refinements.
 *
 * The merge, setting by setting: years the message states (a year rule,
 * or recency's window) replace the previous years, else they stay; open
 * access once asked for stays on; a count the message states replaces
 * the previous count. The query is the previous search's.
 */
#include <string.h>

#include "core/utf8.h"
#include "policy/policy_int.h"

/* The categories of words a refinement may hold. */
static const uint64_t refine_words =
    CAT_BIT(CAT_REFINE) | CAT_BIT(CAT_FILLER) | CAT_BIT(CAT_REQUEST) | CAT_BIT(CAT_PAPER_NOUN) |
    CAT_BIT(CAT_PAPER_REF) | CAT_BIT(CAT_DEICTIC) | CAT_BIT(CAT_COUNT_NOUN) |
    CAT_BIT(CAT_COUNT_LEAD) | CAT_BIT(CAT_NUMBER) | CAT_BIT(CAT_RECENCY) |
    CAT_BIT(CAT_OPEN_ACCESS) | CAT_BIT(CAT_YEAR_RULE) | CAT_BIT(CAT_TIME_UNIT);

/* Nonzero when every token is covered by a phrase of refine_words, or is
 * a number or a free-standing dash. */
static int only_refine_words(const struct policy_scan *scan)
{
    const struct lex_result *lex = &scan->lex;
    uint64_t covered[LEX_MAX_TOKENS / 64] = {0};

    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (CAT_BIT(match->category) & refine_words)
            for (uint32_t t = match->start; t < (uint32_t)match->start + match->n; t++)
                BIT_SET(covered, t);
    }
    for (uint32_t t = 0; t < lex->n_tokens; t++)
        if (!BIT_GET(covered, t) && !(lex->tokens[t].flags & LEX_NUMERIC) &&
            !policy_is_dash(scan, t))
            return 0;
    return lex->n_tokens > 0;
}

static int has_reason(const struct policy_decision *d, enum policy_reason reason)
{
    for (size_t i = 0; i < d->n_reasons; i++)
        if (d->reasons[i] == reason)
            return 1;
    return 0;
}

static void drop_reason(struct policy_decision *d, enum policy_reason reason)
{
    size_t kept = 0;

    for (size_t i = 0; i < d->n_reasons; i++)
        if (d->reasons[i] != reason)
            d->reasons[kept++] = d->reasons[i];
    d->n_reasons = kept;
}

int policy_refine(const struct policy *policy, const struct policy_context *ctx,
                  const char *message, size_t n, const struct policy_search *base,
                  struct policy_decision *out)
{
    struct policy_scan scan;
    struct policy_decision d;
    int years, count;

    if (!policy->n_refine || !base || !base->query_len || base->query_len >= POLICY_QUERY_MAX)
        return 0;
    if (n > POLICY_MESSAGE_MAX || utf8_valid_prefix(message, n) != n)
        return 0;   /* a cut message may have lost its topic: decide it whole */
    scan.text = message;
    scan.n = n;
    lexicon_match(&policy->lex, message, n, &scan.lex);
    if (scan.lex.truncated || !only_refine_words(&scan))
        return 0;
    policy_mark_topic_clause(policy, &scan);
    if (scan.topic_start != UINT32_MAX)
        return 0;   /* "only papers on open access": a new search */

    memset(&d, 0, sizeof(d));
    d.force_tool = -1;
    d.signals.topic_class = -1;
    policy_add_reason(&d, R_SEARCH_REFINED);   /* the route's reason comes first */
    policy_fill_settings(policy, ctx, &scan, &d);
    years = d.search.year_from || d.search.year_to;
    count = has_reason(&d, R_COUNT_EXPLICIT);
    if (!years && !count && !d.search.open_access_only)
        return 0;   /* nothing to narrow by ("just those") */
    if (!years) {
        d.search.year_from = base->year_from;
        d.search.year_to = base->year_to;
    }
    if (!count && base->count >= 1 && base->count <= policy->max_count) {
        d.search.count = base->count;
        drop_reason(&d, R_COUNT_DEFAULT);
    }
    d.search.open_access_only = d.search.open_access_only || base->open_access_only;
    memcpy(d.search.query, base->query, base->query_len + 1);
    d.search.query_len = base->query_len;
    d.intent = POLICY_INTENT_DIRECT_SEARCH;
    d.route = POLICY_ROUTE_WEBSEARCH;
    d.reason = R_SEARCH_REFINED;
    d.signals.is_volatile = (scan.lex.categories & CAT_BIT(CAT_RECENCY)) != 0;
    policy_force_search(policy, ctx, &d);
    *out = d;
    return 1;
}
