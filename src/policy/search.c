/*
 * search.c — the search policy of a search turn: year filters, count,
 * open access and the query (the topic with the request phrasing
 * stripped and a deictic "this topic" resolved to the topic hint).
 *
 * Each step marks the tokens it used as consumed, so what is left of the
 * request's sentence is the topic. Nothing here allocates.
 */
#include <ctype.h>
#include <string.h>

#include "policy/policy_int.h"

static void consume(struct policy_scan *scan, uint32_t start, uint32_t n)
{
    for (uint32_t i = start; i < start + n && i < scan->lex.n_tokens; i++)
        scan->consumed[i] = 1;
}

static int any_consumed(const struct policy_scan *scan, uint32_t start, uint32_t n)
{
    for (uint32_t i = start; i < start + n && i < scan->lex.n_tokens; i++)
        if (scan->consumed[i])
            return 1;
    return 0;
}

static int clamp_year(int year, int now_year, struct policy_decision *d)
{
    if (year < POLICY_YEAR_MIN) {
        policy_add_reason(d, R_YEAR_CLAMPED);
        return POLICY_YEAR_MIN;
    }
    if (year > now_year) {
        policy_add_reason(d, R_YEAR_CLAMPED);
        return now_year;
    }
    return year;
}

/* Applies one year rule; returns nonzero when it set an explicit filter. */
static int apply_year_rule(const struct policy_context *ctx, const struct lex_match *m,
                           struct policy_decision *d)
{
    int action = m->value / 1000, fixed = m->value % 1000;
    int n = fixed ? fixed : m->slot[0];
    int y1 = m->slot[0], y2 = m->slot[1];
    struct policy_search *s = &d->search;

    switch (action) {
    case YEAR_WINDOW:
        if (n <= 0) {
            policy_add_reason(d, R_YEAR_WINDOW_ZERO);
            return 0;
        }
        s->year_from = n > ctx->now_year ? POLICY_YEAR_MIN - 1 : ctx->now_year - n + 1;
        s->year_to = ctx->now_year;
        policy_add_reason(d, R_YEAR_WINDOW);
        return 1;
    case YEAR_SINCE:
    case YEAR_AFTER:
        s->year_from = action == YEAR_AFTER ? y1 + 1 : y1;
        policy_add_reason(d, R_YEAR_SINCE);
        return 1;
    case YEAR_BEFORE:
    case YEAR_UNTIL:
        s->year_to = action == YEAR_BEFORE ? y1 - 1 : y1;
        policy_add_reason(d, R_YEAR_UNTIL);
        return 1;
    case YEAR_EXACT:
        /* "in 2019 … and 2021": several single years widen the range. */
        if (s->year_from && s->year_to && s->year_from <= s->year_to) {
            s->year_from = y1 < s->year_from ? y1 : s->year_from;
            s->year_to = y1 > s->year_to ? y1 : s->year_to;
        } else {
            s->year_from = s->year_to = y1;
        }
        policy_add_reason(d, R_YEAR_EXACT);
        return 1;
    case YEAR_RANGE:
        if (y1 > y2) {
            int t = y1;
            y1 = y2;
            y2 = t;
            policy_add_reason(d, R_YEAR_RANGE_REVERSED);
        }
        s->year_from = y1;
        s->year_to = y2;
        policy_add_reason(d, R_YEAR_RANGE);
        return 1;
    case YEAR_AGO:
        s->year_from = s->year_to = ctx->now_year - n;
        policy_add_reason(d, R_YEAR_EXACT);
        return 1;
    default:
        return 0;
    }
}

static void apply_years(const struct policy *policy, const struct policy_context *ctx,
                        struct policy_scan *scan, struct policy_decision *d)
{
    const struct lex_result *lex = &scan->lex;
    struct policy_search *s = &d->search;
    uint32_t covered = 0;
    int explicit_years = 0;

    for (uint32_t i = 0; i < lex->n_matches; i++) {
        const struct lex_match *first = &lex->matches[i], *best = first;
        uint32_t end;
        if (first->category != CAT_YEAR_RULE || first->start < covered)
            continue;
        /* Of the rules overlapping this one, one that captures two years
         * wins ("in 2019-2021" is a range, not "in 2019" and a stray
         * "- 2021"); otherwise the first, which is the longest at the
         * leftmost position ("pre-2000 studies"). Matches come in token
         * order, so one forward scan finds them. */
        end = (uint32_t)first->start + first->n;
        for (uint32_t k = i + 1; k < lex->n_matches && lex->matches[k].start < (uint32_t)first->start + first->n; k++) {
            const struct lex_match *other = &lex->matches[k];
            if (other->category == CAT_YEAR_RULE && other->slot[1] >= 0 && best->slot[1] < 0)
                best = other;
        }
        if ((uint32_t)best->start + best->n > end)
            end = (uint32_t)best->start + best->n;
        covered = end;
        consume(scan, first->start, end - first->start);
        explicit_years |= apply_year_rule(ctx, best, d);
    }
    if (lex->categories & CAT_BIT(CAT_RECENCY)) {
        if (explicit_years) {
            policy_add_reason(d, R_EXPLICIT_YEARS_OVER_RECENCY);
        } else {
            s->year_from = ctx->now_year - policy->recent_window_years + 1;
            s->year_to = ctx->now_year;
            policy_add_reason(d, R_RECENCY_WINDOW);
        }
    }
    if (s->year_from)
        s->year_from = clamp_year(s->year_from, ctx->now_year, d);
    if (s->year_to)
        s->year_to = clamp_year(s->year_to, ctx->now_year, d);
    if (s->year_from && s->year_to && s->year_from > s->year_to) {
        int t = s->year_from;
        s->year_from = s->year_to;
        s->year_to = t;
        policy_add_reason(d, R_YEAR_RANGE_REVERSED);
    }
}

/* A number at tokens [start, start+n) is a count when a paper or count
 * noun follows within the window (no break, no other number between) and
 * no time unit ("years") follows it directly. After a count lead the
 * clause may also end there ("… top 10 please"), but "the top 5 risk
 * factors" is no count. Returns the noun's token (or the number's own
 * when a lead stands in for the noun), or -1. */
static int count_noun_after(const struct policy *policy, const struct policy_scan *scan,
                            const uint64_t *noun_at, uint32_t start, uint32_t n)
{
    const struct lex_result *lex = &scan->lex;
    uint32_t next = start + n;

    if (any_consumed(scan, start, n) || policy_in_topic(scan, start))
        return -1;  /* a year, or part of the topic ("the 3 Rs of animal research") */
    if (next < lex->n_tokens && lex_token_is(&policy->lex, lex, next, CAT_TIME_UNIT))
        return -1;
    for (uint32_t k = next; k < lex->n_tokens && k <= next + (uint32_t)policy->count_window; k++) {
        if (lex->tokens[k].flags & (LEX_SENTENCE | LEX_BREAK))
            break;
        if (BIT_GET(noun_at, k))
            return (int)k;
        if (lex->tokens[k].number >= 0)
            break;
    }
    if (start > 0 && !(lex->tokens[start].flags & (LEX_SENTENCE | LEX_BREAK)) &&
        lex_token_is(&policy->lex, lex, start - 1, CAT_COUNT_LEAD) &&
        (next >= lex->n_tokens || (lex->tokens[next].flags & (LEX_SENTENCE | LEX_BREAK)) ||
         lex_token_is(&policy->lex, lex, next, CAT_FILLER) ||
         lex_token_is(&policy->lex, lex, next, CAT_TOPIC_LEAD)))
        return (int)start;
    return -1;
}

static void apply_count(const struct policy *policy, struct policy_scan *scan,
                        struct policy_decision *d)
{
    const struct lex_result *lex = &scan->lex;
    uint64_t noun_at[LEX_MAX_TOKENS / 64] = {0};
    uint32_t best_start = UINT32_MAX, best_n = 0;
    int best_value = 0, best_anchor = -1;

    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == CAT_PAPER_NOUN || match->category == CAT_COUNT_NOUN)
            BIT_SET(noun_at, match->start);
    }
    /* Multi-word number phrases ("a few", "a couple of"). */
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        int anchor;
        if (match->category != CAT_NUMBER || match->n < 2 || match->start >= best_start)
            continue;
        anchor = count_noun_after(policy, scan, noun_at, match->start, match->n);
        if (anchor >= 0) {
            best_start = match->start;
            best_n = match->n;
            best_value = match->value;
            best_anchor = anchor;
        }
    }
    /* Digits and single number words. */
    for (uint32_t i = 0; i < lex->n_tokens && i < best_start; i++) {
        const struct lex_token *tok = &lex->tokens[i];
        int anchor;
        if (tok->number < 0 || ((tok->flags & LEX_NUMERIC) && tok->len == 4 && tok->number >= 1000))
            continue;
        anchor = count_noun_after(policy, scan, noun_at, i, 1);
        if (anchor >= 0) {
            best_start = i;
            best_n = 1;
            best_value = tok->number;
            best_anchor = anchor;
            break;
        }
    }
    if (best_anchor < 0) {
        d->search.count = policy->default_count;
        policy_add_reason(d, R_COUNT_DEFAULT);
        return;
    }
    consume(scan, best_start, best_n);
    if (best_start > 0 && !(lex->tokens[best_start].flags & (LEX_SENTENCE | LEX_BREAK)) &&
        lex_token_is(&policy->lex, lex, best_start - 1, CAT_COUNT_LEAD))
        consume(scan, best_start - 1, 1);
    if (lex_token_is(&policy->lex, lex, (uint32_t)best_anchor, CAT_COUNT_NOUN))
        consume(scan, (uint32_t)best_anchor, 1);
    policy_add_reason(d, R_COUNT_EXPLICIT);
    if (best_value < 1 || best_value > policy->max_count) {
        best_value = best_value < 1 ? 1 : policy->max_count;
        policy_add_reason(d, R_COUNT_CLAMPED);
    }
    d->search.count = best_value;
}

/* Appends `len` bytes to the query, with a separator, if they fit. */
static int query_add(struct policy_search *s, const char *text, size_t len, char sep)
{
    size_t need = len + (s->query_len && sep ? 1 : 0);

    if (s->query_len + need >= POLICY_QUERY_MAX)
        return 0;
    if (s->query_len && sep)
        s->query[s->query_len++] = sep;
    memcpy(s->query + s->query_len, text, len);
    s->query_len += len;
    s->query[s->query_len] = '\0';
    return 1;
}

/* A token that never starts or ends a query: filler, a topic lead, or a
 * free-standing dash. */
/* Appends token i to the query. Next to the previous token it keeps the
 * original joint when that holds no space ("9/11", "S&P", "R&D",
 * "open-access"); a trailing run of + or # stays on the word ("C++",
 * "C#"). Returns 0 when the query is full. */
static int query_add_token(struct policy_search *s, const struct policy_scan *scan, uint32_t i,
                           int adjacent)
{
    const struct lex_token *tok = &scan->lex.tokens[i];
    size_t start = tok->start, end = tok->start + tok->len;

    while (end < scan->n && (scan->text[end] == '+' || scan->text[end] == '#'))
        end++;
    if (end < scan->n && isalnum((unsigned char)scan->text[end]))
        end = tok->start + tok->len;  /* "C+D": the + is a joint, not a suffix */
    if (adjacent && s->query_len && (tok->flags & LEX_GLUED))
        return query_add(s, scan->text + start, end - start, 0);  /* "5km" stays whole */
    if (adjacent && s->query_len) {
        const struct lex_token *prev = &scan->lex.tokens[i - 1];
        size_t gap = prev->start + prev->len;
        int spaced = 0;
        while (gap < start && (scan->text[gap] == '+' || scan->text[gap] == '#'))
            gap++;  /* already written as the previous token's suffix */
        for (size_t k = gap; k < start; k++)
            spaced |= scan->text[k] == ' ' || scan->text[k] == '\t' || scan->text[k] == '\n';
        if (!spaced && gap < start && start - gap <= 3) {
            if (s->query_len + (start - gap) + (end - start) >= POLICY_QUERY_MAX)
                return 0;
            memcpy(s->query + s->query_len, scan->text + gap, start - gap);
            s->query_len += start - gap;
            return query_add(s, scan->text + start, end - start, 0);
        }
    }
    return query_add(s, scan->text + start, end - start, ' ');
}

static int is_edge_word(const struct policy *policy, const struct policy_scan *scan, uint32_t i)
{
    return lex_token_is(&policy->lex, &scan->lex, i, CAT_FILLER) ||
           lex_token_is(&policy->lex, &scan->lex, i, CAT_TOPIC_LEAD) || policy_is_dash(scan, i);
}

/* Finds the token span that holds the topic: after the first topic lead
 * that follows the request ("papers on …", "published on …"), else the
 * sentence of the request itself. It ends at the sentence end or where a
 * follow-up task starts ("… and summarize them"). */
static void topic_span(const struct policy *policy, const struct policy_scan *scan,
                       uint32_t *from, uint32_t *to)
{
    const struct lex_result *lex = &scan->lex;
    uint32_t start = UINT32_MAX, head = UINT32_MAX;
    const uint64_t head_cats = CAT_BIT(CAT_PAPER_NOUN) | CAT_BIT(CAT_SEARCH_VERB) |
                               CAT_BIT(CAT_REQUEST) | CAT_BIT(CAT_WEB_EXPLICIT) |
                               CAT_BIT(CAT_RECENCY) | CAT_BIT(CAT_TOPIC_CLASS);

    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if ((CAT_BIT(match->category) & head_cats) && match->start < head)
            head = match->start;
        if (match->category == CAT_TOPIC_LEAD && head != UINT32_MAX && match->start > 0 &&
            (scan->consumed[match->start - 1] ||
             lex_token_is(&policy->lex, lex, match->start - 1, CAT_FILLER))) {
            start = match->start + match->n;
            break;
        }
    }
    if (start == UINT32_MAX) {
        if (head == UINT32_MAX)
            head = 0;
        start = head;
        while (start > 0 && !(lex->tokens[start].flags & LEX_SENTENCE))
            start--;
    }
    *from = start;
    *to = start;
    while (*to < lex->n_tokens && (*to == start || !(lex->tokens[*to].flags & LEX_SENTENCE)))
        (*to)++;
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == CAT_ANALYSIS && match->start > start && match->start < *to)
            *to = match->start;
    }
}

/* Records, for every token, the length of the longest deictic phrase
 * that starts there (0: none). One pass over the matches. */
static void index_deictics(struct policy_scan *scan)
{
    const struct lex_result *lex = &scan->lex;

    memset(scan->deictic_len, 0, lex->n_tokens);
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        if (match->category == CAT_DEICTIC && match->n > scan->deictic_len[match->start])
            scan->deictic_len[match->start] = (uint8_t)match->n;
    }
}

static void build_query(const struct policy *policy, const struct policy_context *ctx,
                        struct policy_scan *scan, struct policy_decision *d)
{
    const struct lex_result *lex = &scan->lex;
    struct policy_search *s = &d->search;
    uint32_t from, to, kept = 0, last_emitted = UINT32_MAX;

    topic_span(policy, scan, &from, &to);
    index_deictics(scan);
    /* Trim consumed tokens and filler words off both ends, but never the
     * first word of a deictic phrase ("the same topic", "that area"). */
    while (from < to && (scan->consumed[from] || is_edge_word(policy, scan, from))) {
        uint32_t len = scan->consumed[from] ? 0 : scan->deictic_len[from];
        if (len > 1 && from + len <= to)
            break;
        from++;
    }
    while (to > from && (scan->consumed[to - 1] || is_edge_word(policy, scan, to - 1)))
        to--;
    for (uint32_t i = from; i < to; i++)
        kept += !scan->consumed[i];
    for (uint32_t i = from; i < to; i++) {
        uint32_t deictic = scan->deictic_len[i];
        if (scan->consumed[i])
            continue;
        /* A lone "it"/"this" counts only when it is the whole topic. */
        if (deictic && (deictic > 1 || kept == 1) && i + deictic <= to) {
            policy_add_reason(d, R_DEICTIC_TOPIC);
            if (ctx->topic_hint_len)
                query_add(s, ctx->topic_hint, ctx->topic_hint_len, ' ');
            i += deictic - 1;
            last_emitted = UINT32_MAX;
            continue;
        }
        if (!query_add_token(s, scan, i, last_emitted == i - 1))
            break;
        last_emitted = i;
    }
    if (s->query_len == 0 && ctx->topic_hint_len) {
        query_add(s, ctx->topic_hint, ctx->topic_hint_len, ' ');
        policy_add_reason(d, R_TOPIC_FROM_HINT);
    }
    if (s->query_len && (lex->categories & CAT_BIT(CAT_REQUEST)))
        policy_add_reason(d, R_REQUEST_PHRASING_STRIPPED);
}

void policy_fill_settings(const struct policy *policy, const struct policy_context *ctx,
                          struct policy_scan *scan, struct policy_decision *d)
{
    const struct lex_result *lex = &scan->lex;
    const uint64_t stripped = CAT_BIT(CAT_REQUEST) | CAT_BIT(CAT_SEARCH_VERB) |
                              CAT_BIT(CAT_PAPER_NOUN) | CAT_BIT(CAT_RECENCY) |
                              CAT_BIT(CAT_OPEN_ACCESS) | CAT_BIT(CAT_WEB_EXPLICIT) |
                              CAT_BIT(CAT_ANALYSIS);

    memset(scan->consumed, 0, lex->n_tokens);
    d->has_search = 1;
    d->search.year_from = d->search.year_to = 0;
    d->search.open_access_only = 0;
    apply_years(policy, ctx, scan, d);
    apply_count(policy, scan, d);
    for (uint32_t m = 0; m < lex->n_matches; m++) {
        const struct lex_match *match = &lex->matches[m];
        /* Inside the topic's own words these are topic words: "papers on
         * open access publishing", "on research ethics", "on study habits". */
        if (policy_in_topic(scan, match->start))
            continue;
        if (match->category == CAT_OPEN_ACCESS && !d->search.open_access_only) {
            d->search.open_access_only = 1;
            policy_add_reason(d, R_OPEN_ACCESS);
        }
        if (CAT_BIT(match->category) & stripped)
            consume(scan, match->start, match->n);
    }
}

void policy_fill_search(const struct policy *policy, const struct policy_context *ctx,
                        struct policy_scan *scan, struct policy_decision *d)
{
    policy_fill_settings(policy, ctx, scan, d);
    build_query(policy, ctx, scan, d);
}
