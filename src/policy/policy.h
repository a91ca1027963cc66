/*
 * policy.h — the deterministic policy decision (seed 000 Phases A–C) and
 * the route decision (seed 001 §2), as one pure function.
 *
 *   message + context {pack, role, topic hint, tools available, now}
 *     → decision {intent, route, tool_veto, reason, signals, force_tool,
 *                 search {query, count, year_from, year_to, open_access_only},
 *                 stage_transition, reasons[]}
 *
 * The phrase tables come from the pack's `policy` section (see
 * docs/policy.md); this module holds only the mechanism. policy_decide()
 * allocates nothing and is linear in the (capped) message length.
 */
#ifndef KEEL_POLICY_POLICY_H
#define KEEL_POLICY_POLICY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "pack/pack.h"

#define POLICY_MESSAGE_MAX 4096   /* bytes of a message the policy reads */
#define POLICY_QUERY_MAX 512      /* bytes of the search query it builds */
#define POLICY_MAX_REASONS 24
#define POLICY_YEAR_MIN 1900

enum policy_intent {
    POLICY_INTENT_DIRECT_SEARCH,
    POLICY_INTENT_ANALYSIS,
    POLICY_INTENT_CLARIFY,
    POLICY_INTENT_GENERAL,
};

enum policy_route {
    POLICY_ROUTE_COMMAND,
    POLICY_ROUTE_LOCAL_MEMORY,
    POLICY_ROUTE_CONVERSION,
    POLICY_ROUTE_WEBSEARCH,
    POLICY_ROUTE_LLM_ONLY,
    POLICY_ROUTE_COUNT
};

/* Every rule that can fire, named in the decision's reasons[]. */
enum policy_reason {
    R_HARD_COMMAND,
    R_USER_TOOL_VETO,
    R_LIBRARY_REQUEST,
    R_PERSONAL_MEMORY,
    R_CONVERSION,
    R_QUESTION_NOT_SEARCH,
    R_PAPER_SEARCH,
    R_WEB_EXPLICIT,
    R_VOLATILE_TOPIC,
    R_FIND_WITHOUT_PAPER_NOUN,
    R_ANALYSIS,
    R_SMALLTALK,
    R_DEFAULT_LLM,
    R_SEARCH_REFINED,
    R_REQUEST_PHRASING_STRIPPED,
    R_DEICTIC_TOPIC,
    R_TOPIC_FROM_HINT,
    R_TOPIC_MISSING,
    R_COUNT_EXPLICIT,
    R_COUNT_DEFAULT,
    R_COUNT_CLAMPED,
    R_RECENCY_WINDOW,
    R_YEAR_WINDOW,
    R_YEAR_WINDOW_ZERO,
    R_YEAR_SINCE,
    R_YEAR_UNTIL,
    R_YEAR_RANGE,
    R_YEAR_RANGE_REVERSED,
    R_YEAR_EXACT,
    R_YEAR_CLAMPED,
    R_EXPLICIT_YEARS_OVER_RECENCY,
    R_OPEN_ACCESS,
    R_TOOL_FORCED,
    R_TOOL_UNAVAILABLE,
    R_ROLE_FORBIDS_TOOL,
    R_STAGE_TRANSITION,
    R_INPUT_TRUNCATED,
    R_REASON_COUNT
};

struct policy;  /* compiled tables of one pack; see policy_int.h */

struct policy_context {
    int role;                  /* index into pack->roles */
    uint64_t tools;            /* bit i set: pack tool i is available */
    const char *topic_hint;    /* may be NULL */
    size_t topic_hint_len;
    int64_t now_ms;
    int now_year;
};

struct policy_search {
    char query[POLICY_QUERY_MAX];
    size_t query_len;
    int count;
    int year_from;             /* 0: no lower bound */
    int year_to;               /* 0: no upper bound */
    int open_access_only;
};

struct policy_signals {
    int explicit_request;      /* the user asked to search in so many words */
    int is_volatile;           /* time-sensitive: recency words, news, prices… */
    int topic_class;           /* index into the pack's topic classes, or -1 */
};

struct policy_decision {
    enum policy_intent intent;
    enum policy_route route;
    int tool_veto;
    enum policy_reason reason;     /* the route's reason */
    struct policy_signals signals;
    int force_tool;                /* pack tool index, or -1 */
    int has_search;                /* search is filled in */
    struct policy_search search;
    const char *stage_transition;  /* borrowed from the pack, or NULL */
    uint8_t reasons[POLICY_MAX_REASONS];
    size_t n_reasons;
};

/* Compiles the `policy` section of `pack` into *out. `pack` must outlive
 * the policy. Returns KEEL_EINVAL with "file:line: path: what" for a bad
 * table, KEEL_ENOMEM; nothing is returned on failure. */
int policy_new(const struct pack *pack, struct policy **out, struct keel_error *err);

/* Loads pack `name` from `dir` (NULL: pack_default_dir()) and compiles its
 * policy: pack_load() then policy_new(). On success the caller frees both,
 * the policy first; on failure nothing is returned and err says
 * file:line and what. Logs "pack.loaded" at debug level. */
int policy_load(const char *dir, const char *name, struct pack **pack, struct policy **policy,
                struct keel_error *err);

/* Frees a compiled policy. NULL is a no-op. */
void policy_free(struct policy *policy);

/* Returns the pack a policy was compiled from. */
const struct pack *policy_pack(const struct policy *policy);

/* Fills a context. `role` NULL means the pack's default role; `tools` NULL
 * means every tool of the pack; `topic_hint` may be NULL. Unknown role or
 * tool names fail with KEEL_EINVAL naming "role" or "tools[i]"; a topic
 * hint over 256 bytes or not UTF-8 names "topic_hint"; a clock before
 * 1900 names "now". The context is then unusable. */
int policy_context_init(struct policy_context *ctx, const struct policy *policy,
                        const char *role, const char *const *tools, size_t n_tools,
                        const char *topic_hint, int64_t now_ms, struct keel_error *err);

/* Decides. Reads at most POLICY_MESSAGE_MAX bytes of `message`, and only
 * up to the first byte that is not well-formed UTF-8 (or NUL); either cut
 * adds the reason input_truncated. Callers at the edge of the system
 * should reject invalid UTF-8 with a clear error instead. The topic hint
 * must be valid UTF-8 (policy_context_init checks). Never fails, never
 * allocates; same inputs give the same decision. */
void policy_decide(const struct policy *policy, const struct policy_context *ctx,
                   const char *message, size_t n, struct policy_decision *out);

/* A follow-up that only narrows `base`, the conversation's previous
 * search ("only open access ones", "just the ones from 2023"): every word
 * of `message` is a search setting, a phrase of the pack's `refine`
 * table, filler, request phrasing, a paper or count noun, a reference to
 * the papers found or a deictic, at least one setting is stated, and no
 * topic clause opens. Returns 1 and sets *out to base's search with the
 * stated settings in place (years replace years, open access stays on
 * once asked for, a count replaces the count), route websearch, reason
 * search_refined, the search tool forced as for any search. Returns 0 and
 * leaves *out unchanged otherwise, also for a pack without a `refine`
 * table, an empty base query, or a message over POLICY_MESSAGE_MAX or
 * not UTF-8. Allocates nothing. */
int policy_refine(const struct policy *policy, const struct policy_context *ctx,
                  const char *message, size_t n, const struct policy_search *base,
                  struct policy_decision *out);

/* Static names of enum values, as they appear in JSON. */
const char *policy_intent_name(enum policy_intent intent);
const char *policy_route_name(enum policy_route route);
const char *policy_reason_name(enum policy_reason reason);

/* Name of the decision's topic class ("science", "news"), or NULL. */
const char *policy_topic_class_name(const struct policy *policy,
                                    const struct policy_decision *decision);

/* Returns the decision as a new JSON object (NULL when out of memory):
 * {intent, route, tool_veto, reason, signals{explicit, volatile,
 * topic_class}, force_tool, search{query, count, year_from, year_to,
 * open_access_only}|null, stage_transition, reasons[]}. */
json_t *policy_decision_json(const struct policy *policy,
                             const struct policy_decision *decision);

#endif
