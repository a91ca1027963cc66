/*
 * decide.c — the route and intent rules, in the order they apply:
 *
 *   1. command          whole-message command or command prefix
 *   2. user veto        "don't search", "from memory"
 *   3. local memory     the user's own library or remembered facts
 *   4. conversion       "convert 5 km to miles"
 *   5. search           paper noun + request (scholar) or explicit web
 *                       search / volatile topic (assistant), unless the
 *                       message asks about a consensus
 *   6. analysis         summarize/compare, or references to known papers
 *   7. smalltalk, then the default: llm_only / general
 *
 * Rules 2–6 look only outside the topic clause ("find papers about the
 * library of Alexandria" is a search; see policy_mark_topic_clause). A search
 * fills the search policy (search.c) and forces the pack's search tool
 * when it is available and the role may call it. docs/policy.md has the
 * full table.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "policy/policy_int.h"
#include "core/utf8.h"

static const char *const intent_names[] = {
    [POLICY_INTENT_DIRECT_SEARCH] = "direct_search",
    [POLICY_INTENT_ANALYSIS] = "analysis",
    [POLICY_INTENT_CLARIFY] = "clarify",
    [POLICY_INTENT_GENERAL] = "general",
};

static const char *const route_names[] = {
    [POLICY_ROUTE_COMMAND] = "command",
    [POLICY_ROUTE_LOCAL_MEMORY] = "local_memory_intent",
    [POLICY_ROUTE_CONVERSION] = "conversion_tool",
    [POLICY_ROUTE_WEBSEARCH] = "websearch",
    [POLICY_ROUTE_LLM_ONLY] = "llm_only",
};

static const char *const reason_names[R_REASON_COUNT] = {
    [R_HARD_COMMAND] = "hard_command",
    [R_USER_TOOL_VETO] = "user_tool_veto",
    [R_LIBRARY_REQUEST] = "library_request",
    [R_PERSONAL_MEMORY] = "personal_memory_intent",
    [R_CONVERSION] = "parser_confirmed_conversion",
    [R_QUESTION_NOT_SEARCH] = "question_not_search",
    [R_PAPER_SEARCH] = "paper_search_request",
    [R_WEB_EXPLICIT] = "explicit_websearch",
    [R_VOLATILE_TOPIC] = "volatile_topic",
    [R_FIND_WITHOUT_PAPER_NOUN] = "find_without_paper_noun",
    [R_ANALYSIS] = "analysis_request",
    [R_SMALLTALK] = "smalltalk",
    [R_DEFAULT_LLM] = "default_llm",
    [R_SEARCH_REFINED] = "search_refined",
    [R_REQUEST_PHRASING_STRIPPED] = "request_phrasing_stripped",
    [R_DEICTIC_TOPIC] = "deictic_resolved_to_topic_hint",
    [R_TOPIC_FROM_HINT] = "topic_from_hint",
    [R_TOPIC_MISSING] = "topic_missing",
    [R_COUNT_EXPLICIT] = "count_explicit",
    [R_COUNT_DEFAULT] = "count_default",
    [R_COUNT_CLAMPED] = "count_clamped",
    [R_RECENCY_WINDOW] = "recency_default_window",
    [R_YEAR_WINDOW] = "year_window",
    [R_YEAR_WINDOW_ZERO] = "year_window_zero_ignored",
    [R_YEAR_SINCE] = "year_since",
    [R_YEAR_UNTIL] = "year_until",
    [R_YEAR_RANGE] = "year_range",
    [R_YEAR_RANGE_REVERSED] = "year_range_reversed",
    [R_YEAR_EXACT] = "year_exact",
    [R_YEAR_CLAMPED] = "year_clamped",
    [R_EXPLICIT_YEARS_OVER_RECENCY] = "explicit_years_override_recency",
    [R_OPEN_ACCESS] = "open_access_requested",
    [R_TOOL_FORCED] = "tool_forced",
    [R_TOOL_UNAVAILABLE] = "tool_unavailable",
    [R_ROLE_FORBIDS_TOOL] = "role_forbids_tool",
    [R_STAGE_TRANSITION] = "stage_transition_on_success",
    [R_INPUT_TRUNCATED] = "input_truncated",
};

const char *policy_intent_name(enum policy_intent intent)
{
    return (unsigned)intent < sizeof(intent_names) / sizeof(intent_names[0]) ? intent_names[intent]
                                                                              : "unknown";
}

const char *policy_route_name(enum policy_route route)
{
    return (unsigned)route < POLICY_ROUTE_COUNT ? route_names[route] : "unknown";
}

const char *policy_reason_name(enum policy_reason reason)
{
    return reason < R_REASON_COUNT ? reason_names[reason] : "unknown";
}

void policy_add_reason(struct policy_decision *d, enum policy_reason reason)
{
    for (size_t i = 0; i < d->n_reasons; i++)
        if (d->reasons[i] == reason)
            return;
    if (d->n_reasons < POLICY_MAX_REASONS)
        d->reasons[d->n_reasons++] = (uint8_t)reason;
}

int policy_context_init(struct policy_context *ctx, const struct policy *policy,
                        const char *role, const char *const *tools, size_t n_tools,
                        const char *topic_hint, int64_t now_ms, struct keel_error *err)
{
    const struct pack *pack = policy->pack;

    memset(ctx, 0, sizeof(*ctx));
    ctx->role = role ? pack_role_index(pack, role) : pack->default_role;
    if (ctx->role < 0)
        return keel_error_set(err, KEEL_EINVAL, "role", "\"%.64s\" is not a role of pack %s",
                              role, pack->name);
    if (!tools) {
        ctx->tools = pack->n_tools >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << pack->n_tools) - 1;
    } else {
        for (size_t i = 0; i < n_tools; i++) {
            int t = pack_tool_index(pack, tools[i], strlen(tools[i]));
            if (t < 0) {
                char field[32];
                snprintf(field, sizeof(field), "tools[%zu]", i);
                return keel_error_set(err, KEEL_EINVAL, field,
                                      "\"%.64s\" is not a tool of pack %s", tools[i], pack->name);
            }
            ctx->tools |= (uint64_t)1 << t;
        }
    }
    ctx->topic_hint = topic_hint;
    ctx->topic_hint_len = topic_hint ? strlen(topic_hint) : 0;
    if (ctx->topic_hint_len > POLICY_QUERY_MAX / 2)
        return keel_error_set(err, KEEL_ETOOBIG, "topic_hint", "is longer than %d bytes",
                              POLICY_QUERY_MAX / 2);
    if (utf8_valid_prefix(topic_hint ? topic_hint : "", ctx->topic_hint_len) != ctx->topic_hint_len)
        return keel_error_set(err, KEEL_EINVAL, "topic_hint", "is not valid UTF-8");
    ctx->now_ms = now_ms;
    ctx->now_year = keel_time_year(now_ms);
    if (ctx->now_year < POLICY_YEAR_MIN || ctx->now_year > 9999)
        return keel_error_set(err, KEEL_EINVAL, "now", "year %d is outside %d..9999",
                              ctx->now_year, POLICY_YEAR_MIN);
    return KEEL_OK;
}

static inline int has(const struct policy_scan *scan, enum policy_category c)
{
    return (scan->lex.categories & CAT_BIT(c)) != 0;
}

/* A command: the message starts with a prefix ("/"), or one command
 * phrase covers every token ("stop", "memory doctor"). */
static int is_command(const struct policy *policy, const struct policy_scan *scan)
{
    size_t i = 0;

    while (i < scan->n && (scan->text[i] == ' ' || scan->text[i] == '\t' || scan->text[i] == '\n'))
        i++;
    for (size_t p = 0; p < policy->n_command_prefixes; p++) {
        size_t len = strlen(policy->command_prefixes[p]);
        if (scan->n - i >= len && !memcmp(scan->text + i, policy->command_prefixes[p], len))
            return 1;
    }
    if (!has(scan, CAT_COMMAND))
        return 0;
    for (uint32_t m = 0; m < scan->lex.n_matches; m++) {
        const struct lex_match *match = &scan->lex.matches[m];
        if (match->category == CAT_COMMAND && match->start == 0 && match->n == scan->lex.n_tokens)
            return 1;
    }
    return 0;
}

/* Categories that may stand before a paper noun without making the words
 * before it a topic of their own ("Any recent open access papers on …"),
 * and that may trail a topic as instructions ("… with PDF since 2020"). */
static const uint64_t preamble_cats =
    CAT_BIT(CAT_REQUEST) | CAT_BIT(CAT_SEARCH_VERB) | CAT_BIT(CAT_RECENCY) |
    CAT_BIT(CAT_OPEN_ACCESS) | CAT_BIT(CAT_COUNT_LEAD) | CAT_BIT(CAT_NUMBER) |
    CAT_BIT(CAT_SMALLTALK);
static const uint64_t trailer_cats =
    CAT_BIT(CAT_REQUEST) | CAT_BIT(CAT_RECENCY) | CAT_BIT(CAT_OPEN_ACCESS) |
    CAT_BIT(CAT_YEAR_RULE) | CAT_BIT(CAT_COUNT_LEAD) |
    CAT_BIT(CAT_NUMBER) | CAT_BIT(CAT_COUNT_NOUN);

/* Nonzero when token i is a filler word, a number or a dash. */
static int is_minor_token(const struct policy *policy, const struct policy_scan *scan, uint32_t i)
{
    return lex_token_is(&policy->lex, &scan->lex, i, CAT_FILLER) ||
           (scan->lex.tokens[i].flags & LEX_NUMERIC) || policy_is_dash(scan, i);
}

/* Finds the clause that names what to search for: it starts after a
 * paper noun directly followed by a topic lead ("papers on …") when a
 * request or search verb comes before the noun, or only preamble does
 * ("Any recent papers on …"); it ends at the next comma or sentence end.
 * Phrases inside it are part of the topic, not instructions: "find papers
 * about the library of Alexandria" is no library request. Trailing
 * instructions ("… with PDF since 2020") are cut off by content_end.
 * Without such a clause all three are UINT32_MAX. */
void policy_mark_topic_clause(const struct policy *policy, struct policy_scan *scan)
{
    const struct lex_result *lex = &scan->lex;
    uint64_t pre[LEX_MAX_TOKENS / 64] = {0}, trail[LEX_MAX_TOKENS / 64] = {0};
    uint32_t first_request = UINT32_MAX, t;

    memset(scan->lead_len, 0, lex->n_tokens);
    memset(scan->noun_at, 0, sizeof(scan->noun_at));
    scan->topic_start = scan->topic_end = scan->content_end = UINT32_MAX;
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == CAT_TOPIC_LEAD && match->n > scan->lead_len[match->start])
            scan->lead_len[match->start] = (uint8_t)match->n;
        else if (match->category == CAT_PAPER_NOUN)
            BIT_SET(scan->noun_at, match->start);
        if ((match->category == CAT_SEARCH_VERB || match->category == CAT_REQUEST) &&
            match->start < first_request)
            first_request = match->start;
        for (t = match->start; t < (uint32_t)match->start + match->n; t++) {
            if (CAT_BIT(match->category) & preamble_cats)
                BIT_SET(pre, t);
            if (CAT_BIT(match->category) & trailer_cats)
                BIT_SET(trail, t);
        }
    }
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *noun = &lex->matches[m];
        uint32_t end = (uint32_t)noun->start + noun->n;
        int opened = first_request < noun->start;
        if (noun->category != CAT_PAPER_NOUN || end >= lex->n_tokens || !scan->lead_len[end] ||
            (lex->tokens[end].flags & (LEX_SENTENCE | LEX_BREAK)))
            continue;
        /* No request before the noun: open only when nothing but
         * preamble stands before it ("Any recent papers on …"). */
        for (t = 0; !opened && t < noun->start; t++)
            if (!BIT_GET(pre, t) && !is_minor_token(policy, scan, t))
                break;
        if (!opened && t < noun->start)
            continue;
        scan->topic_start = end + scan->lead_len[end];
        scan->topic_end = scan->topic_start;
        while (scan->topic_end < lex->n_tokens &&
               (scan->topic_end == scan->topic_start ||
                !(lex->tokens[scan->topic_end].flags & (LEX_SENTENCE | LEX_BREAK))))
            scan->topic_end++;
        for (t = scan->topic_end; t > scan->topic_start; t--)
            if (!BIT_GET(trail, t - 1) && !is_minor_token(policy, scan, t - 1))
                break;
        scan->content_end = t;
        return;
    }
}

/* Nonzero when a search verb occurs outside every question about results
 * and reference to known papers: "find" in "how many papers did you
 * find?" asks about results, it does not request a search. */
static int search_verb_outside_questions(const struct policy_scan *scan)
{
    const struct lex_result *lex = &scan->lex;
    uint64_t in_question[LEX_MAX_TOKENS / 64] = {0};

    if (!(lex->categories & CAT_BIT(CAT_SEARCH_VERB)))
        return 0;
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == CAT_NOT_SEARCH || match->category == CAT_PAPER_REF)
            for (uint32_t t = match->start; t < (uint32_t)match->start + match->n; t++)
                BIT_SET(in_question, t);
    }
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == CAT_SEARCH_VERB && !BIT_GET(in_question, match->start))
            return 1;
    }
    return 0;
}

/* Nonzero when a phrase of `category` occurs outside the topic clause. */
static int has_outside_topic(const struct policy_scan *scan, enum policy_category category)
{
    const struct lex_result *lex = &scan->lex;

    if (!(lex->categories & CAT_BIT(category)))
        return 0;
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == category &&
            (match->start < scan->topic_start || match->start >= scan->topic_end))
            return 1;
    }
    return 0;
}

/* A paper noun that is not part of a reference to known papers ("these
 * papers", "the study") — or is, but opens the topic clause ("find the
 * papers on CRISPR"). */
static int has_paper_noun(const struct policy_scan *scan)
{
    const struct lex_result *lex = &scan->lex;
    uint64_t in_ref[LEX_MAX_TOKENS / 64] = {0};

    if (!(lex->categories & CAT_BIT(CAT_PAPER_NOUN)))
        return 0;
    if (scan->topic_start != UINT32_MAX)
        return 1;
    /* "Find the paper 'Attention Is All You Need'": a reference right
     * after a request names a paper to look up, not one already found. */
    uint64_t request_end[LEX_MAX_TOKENS / 64 + 1] = {0};
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == CAT_SEARCH_VERB || match->category == CAT_REQUEST)
            BIT_SET(request_end, (uint32_t)match->start + match->n);
    }
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *ref = &lex->matches[m];
        if (ref->category == CAT_PAPER_REF && !BIT_GET(request_end, ref->start))
            for (uint32_t t = ref->start; t < (uint32_t)ref->start + ref->n; t++)
                BIT_SET(in_ref, t);
    }
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *noun = &lex->matches[m];
        if (noun->category != CAT_PAPER_NOUN)
            continue;
        for (uint32_t t = noun->start; t < (uint32_t)noun->start + noun->n; t++)
            if (!BIT_GET(in_ref, t))
                return 1;
    }
    return 0;
}

/* Nonzero when one of `starts` is set within `window` tokens after token
 * `from` (exclusive), with no sentence break in between. */
static int followed_by(const struct policy_scan *scan, const uint64_t *starts, uint32_t from,
                       uint32_t window)
{
    const struct lex_result *lex = &scan->lex;

    for (uint32_t k = from + 1; k < lex->n_tokens && k <= from + window; k++) {
        if (lex->tokens[k].flags & LEX_SENTENCE)
            return 0;
        if (BIT_GET(starts, k))
            return 1;
    }
    return 0;
}

/* The cues that, beside a paper noun, make a message a search request:
 * a request or search verb, recency, open access, a year rule; a number
 * a few words before a paper noun ("ten recent papers"); a count lead
 * right before one ("top papers"); or a paper noun directly followed by a
 * topic lead ("papers on X"). When the message also asks for analysis
 * ("summarize the latest papers you found", "compare the two studies"),
 * only a search verb, an explicit web search or "papers on X" count. */
static int search_requested(const struct policy *policy, const struct policy_scan *scan)
{
    const struct lex_result *lex = &scan->lex;
    uint64_t strong = CAT_BIT(CAT_WEB_EXPLICIT);
    int analysis = has_outside_topic(scan, CAT_ANALYSIS);

    if (search_verb_outside_questions(scan))
        return 1;
    if (!analysis)
        strong |= CAT_BIT(CAT_REQUEST) | CAT_BIT(CAT_RECENCY) | CAT_BIT(CAT_OPEN_ACCESS) |
                  CAT_BIT(CAT_YEAR_RULE);
    if (lex->categories & strong)
        return 1;
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        uint32_t end = (uint32_t)match->start + match->n;
        if (match->category == CAT_PAPER_NOUN && end < lex->n_tokens && scan->lead_len[end] &&
            !(lex->tokens[end].flags & LEX_SENTENCE))
            return 1;
        if (analysis)
            continue;
        if (match->category == CAT_NUMBER &&
            followed_by(scan, scan->noun_at, end - 1, (uint32_t)policy->count_window + 1))
            return 1;
        if (match->category == CAT_COUNT_LEAD && followed_by(scan, scan->noun_at, end - 1, 1))
            return 1;
    }
    for (uint32_t i = 0; i < lex->n_tokens && !analysis; i++)
        if ((lex->tokens[i].flags & LEX_NUMERIC) && lex->tokens[i].number >= 0 &&
            followed_by(scan, scan->noun_at, i, (uint32_t)policy->count_window + 1))
            return 1;
    return 0;
}

static void set_route(struct policy_decision *d, enum policy_route route, int veto,
                      enum policy_reason reason)
{
    d->route = route;
    d->tool_veto = veto;
    d->reason = reason;
    policy_add_reason(d, reason);
}

/* Forces `tool` when it is available and the role may call it, naming why
 * not otherwise. Returns nonzero when forced. */
static int force(const struct policy *policy, const struct policy_context *ctx,
                 struct policy_decision *d, int tool)
{
    if (tool < 0)
        return 0;
    if (!(ctx->tools >> tool & 1)) {
        policy_add_reason(d, R_TOOL_UNAVAILABLE);
        return 0;
    }
    if (!pack_role_may_call(policy->pack, ctx->role, tool)) {
        policy_add_reason(d, R_ROLE_FORBIDS_TOOL);
        return 0;
    }
    d->force_tool = tool;
    policy_add_reason(d, R_TOOL_FORCED);
    return 1;
}

/* The first topic class named in the message, or -1. */
static int topic_class(const struct policy_scan *scan)
{
    for (uint32_t m = 0; m < scan->lex.n_matches; m++)
        if (scan->lex.matches[m].category == CAT_TOPIC_CLASS)
            return scan->lex.matches[m].value;
    return -1;
}

static void decide_search(const struct policy *policy, const struct policy_context *ctx,
                          struct policy_scan *scan, struct policy_decision *d)
{
    d->intent = POLICY_INTENT_DIRECT_SEARCH;
    policy_fill_search(policy, ctx, scan, d);
    if (d->search.query_len == 0) {
        d->intent = POLICY_INTENT_CLARIFY;
        policy_add_reason(d, R_TOPIC_MISSING);
        return;
    }
    policy_force_search(policy, ctx, d);
}

void policy_force_search(const struct policy *policy, const struct policy_context *ctx,
                         struct policy_decision *d)
{
    if (force(policy, ctx, d, policy->search_tool) && policy->stage_transition) {
        d->stage_transition = policy->stage_transition;
        policy_add_reason(d, R_STAGE_TRANSITION);
    }
}

/* Applies the route rules in order (see the table at the top of this
 * file) and, for a search, fills the search policy. */
static void choose_route(const struct policy *policy, const struct policy_context *ctx,
                         struct policy_scan *scan, struct policy_decision *d)
{
    int web_explicit = has(scan, CAT_WEB_EXPLICIT), paper_search;
    int volatile_class = d->signals.topic_class >= 0 &&
                         policy->class_volatile[d->signals.topic_class];
    int volatile_words = has(scan, CAT_VOLATILE) || has(scan, CAT_RECENCY);

    if (is_command(policy, scan)) {
        set_route(d, POLICY_ROUTE_COMMAND, 1, R_HARD_COMMAND);
    } else if (has_outside_topic(scan, CAT_VETO)) {
        set_route(d, POLICY_ROUTE_LLM_ONLY, 1, R_USER_TOOL_VETO);
        if (has(scan, CAT_ANALYSIS))
            d->intent = POLICY_INTENT_ANALYSIS;
    } else if (has_outside_topic(scan, CAT_LIBRARY)) {
        set_route(d, POLICY_ROUTE_LOCAL_MEMORY, 1, R_LIBRARY_REQUEST);
    } else if (has_outside_topic(scan, CAT_MEMORY)) {
        set_route(d, POLICY_ROUTE_LOCAL_MEMORY, 1, R_PERSONAL_MEMORY);
    } else if (has_outside_topic(scan, CAT_CONVERSION)) {
        set_route(d, POLICY_ROUTE_CONVERSION, 1, R_CONVERSION);
    } else {
        paper_search = has_paper_noun(scan) && search_requested(policy, scan);
        /* "What is the latest consensus on X?" asks for an answer; with an
         * explicit "find"/"search" it is a search after all. */
        if (has_outside_topic(scan, CAT_NOT_SEARCH) && !search_verb_outside_questions(scan) &&
            !has(scan, CAT_WEB_EXPLICIT)) {
            set_route(d, POLICY_ROUTE_LLM_ONLY, 0, R_QUESTION_NOT_SEARCH);
        } else if (paper_search) {
            set_route(d, POLICY_ROUTE_WEBSEARCH, 0, R_PAPER_SEARCH);
            decide_search(policy, ctx, scan, d);
        } else if (web_explicit || volatile_class ||
                   (volatile_words && d->signals.topic_class >= 0 &&
                    !has_outside_topic(scan, CAT_ANALYSIS))) {
            set_route(d, POLICY_ROUTE_WEBSEARCH, 0,
                      web_explicit ? R_WEB_EXPLICIT : R_VOLATILE_TOPIC);
            decide_search(policy, ctx, scan, d);
        } else if (has(scan, CAT_ANALYSIS) || has(scan, CAT_PAPER_REF)) {
            set_route(d, POLICY_ROUTE_LLM_ONLY, 0, R_ANALYSIS);
            d->intent = POLICY_INTENT_ANALYSIS;
        } else if (search_verb_outside_questions(scan)) {
            set_route(d, POLICY_ROUTE_LLM_ONLY, 0, R_FIND_WITHOUT_PAPER_NOUN);
        } else if (has(scan, CAT_SMALLTALK)) {
            set_route(d, POLICY_ROUTE_LLM_ONLY, 0, R_SMALLTALK);
        } else {
            set_route(d, POLICY_ROUTE_LLM_ONLY, 0, R_DEFAULT_LLM);
        }
    }
}

void policy_decide(const struct policy *policy, const struct policy_context *ctx,
                   const char *message, size_t n, struct policy_decision *d)
{
    struct policy_scan scan;
    int web_explicit, volatile_class, volatile_words, cut = 0;

    memset(d, 0, offsetof(struct policy_decision, search));
    d->force_tool = -1;
    d->signals.topic_class = -1;
    d->search.query[0] = '\0';
    d->search.query_len = 0;
    d->stage_transition = NULL;
    d->n_reasons = 0;
    d->intent = POLICY_INTENT_GENERAL;
    if (n > POLICY_MESSAGE_MAX) {
        cut = 1;
        n = POLICY_MESSAGE_MAX;
    }
    /* Read only well-formed UTF-8: the query is copied from the message and
     * must stay valid text. Also drops a character split by the cap. */
    {
        size_t valid = utf8_valid_prefix(message, n);
        if (valid < n) {
            n = valid;
            cut = 1;
        }
    }
    scan.text = message;
    scan.n = n;
    lexicon_match(&policy->lex, message, n, &scan.lex);

    d->signals.topic_class = topic_class(&scan);
    volatile_class = d->signals.topic_class >= 0 &&
                     policy->class_volatile[d->signals.topic_class];
    volatile_words = has(&scan, CAT_VOLATILE) || has(&scan, CAT_RECENCY);
    web_explicit = has(&scan, CAT_WEB_EXPLICIT);
    d->signals.is_volatile = volatile_class || volatile_words;
    /* "Don't look it up" names a search only to forbid it. */
    d->signals.explicit_request = (web_explicit || search_verb_outside_questions(&scan)) &&
                                  !has(&scan, CAT_VETO);
    policy_mark_topic_clause(policy, &scan);

    choose_route(policy, ctx, &scan, d);
    /* A route the pack binds to a tool (conversion_tool: convert_units)
     * forces it, unless the search rules already forced one. */
    if (d->force_tool < 0 && d->intent != POLICY_INTENT_CLARIFY &&
        policy->route_tool[d->route] >= 0)
        force(policy, ctx, d, policy->route_tool[d->route]);
    if (scan.lex.truncated || cut)
        policy_add_reason(d, R_INPUT_TRUNCATED);
}
