/*
 * policy_int.h — the compiled form of a pack's `policy` section, shared by
 * policy_pack.c (which builds it), decide.c and search.c (which read it).
 */
#ifndef KEEL_POLICY_POLICY_INT_H
#define KEEL_POLICY_POLICY_INT_H

#include "policy/policy.h"
#include "text/lexicon.h"

/* Phrase categories: one per table under policy.phrases (plus numbers,
 * years and topic classes). The table names are in policy_pack.c. */
enum policy_category {
    CAT_REQUEST,        /* request phrasing stripped from the query */
    CAT_SEARCH_VERB,    /* find, search for, look up … */
    CAT_PAPER_NOUN,     /* papers, studies, literature … */
    CAT_PAPER_REF,      /* this paper, these papers: existing papers, not a search */
    CAT_COUNT_NOUN,     /* results, hits: nouns a count may precede */
    CAT_COUNT_LEAD,     /* top, first: words a count may follow */
    CAT_RECENCY,        /* recent, latest, newest, up to date */
    CAT_OPEN_ACCESS,    /* open access, with pdf, full text */
    CAT_DEICTIC,        /* this topic, that area, this field */
    CAT_TOPIC_LEAD,     /* on, about, regarding: the topic follows */
    CAT_FILLER,         /* words trimmed from the ends of a query */
    CAT_TIME_UNIT,      /* years, months: a number before one is no count */
    CAT_LIBRARY,        /* my library, my saved papers */
    CAT_NOT_SEARCH,     /* latest consensus: a question, not a search */
    CAT_ANALYSIS,       /* summarize, compare, critique */
    CAT_SMALLTALK,      /* hi, thanks */
    CAT_COMMAND,        /* whole-message commands: stop, quit */
    CAT_MEMORY,         /* remember that, what's my */
    CAT_CONVERSION,     /* convert, {n} {unit} to {unit} */
    CAT_UNIT,           /* km, miles, usd */
    CAT_WEB_EXPLICIT,   /* search the web, google it */
    CAT_VOLATILE,       /* today, right now, current */
    CAT_VETO,           /* don't search, from memory */
    CAT_NUMBER,         /* number words: value = the number */
    CAT_YEAR_RULE,      /* value = action * 1000 + fixed n */
    CAT_TOPIC_CLASS,    /* value = class index */
    CAT_REFINE,         /* only, just the ones, what about: a follow-up narrows the search */
    CAT_COUNT
};

/* Year rule actions (the `action` of a policy.years entry). */
enum year_action {
    YEAR_WINDOW,   /* last N calendar years including this one */
    YEAR_SINCE,    /* from Y on */
    YEAR_AFTER,    /* from Y+1 on */
    YEAR_BEFORE,   /* up to Y-1 */
    YEAR_UNTIL,    /* up to Y */
    YEAR_EXACT,    /* only Y */
    YEAR_RANGE,    /* Y1..Y2, swapped when reversed */
    YEAR_AGO,      /* only the year N years ago */
    YEAR_ACTION_COUNT
};

#define POLICY_MAX_CLASSES 16
#define POLICY_MAX_PREFIXES 8

struct policy {
    const struct pack *pack;
    struct lexicon lex;
    int search_tool;                     /* pack tool index, or -1 */
    const char *stage_transition;        /* or NULL */
    int default_count, max_count;
    int count_window;                    /* tokens between a count and its noun */
    int recent_window_years;
    const char *command_prefixes[POLICY_MAX_PREFIXES];
    size_t n_command_prefixes;
    int route_tool[POLICY_ROUTE_COUNT];  /* pack tool index, or -1 */
    const char *class_name[POLICY_MAX_CLASSES];
    int class_volatile[POLICY_MAX_CLASSES];
    size_t n_classes;
    size_t n_refine;                     /* refine phrases: 0, the pack takes no refinements */
};

/* Work space of one decision, on the stack of policy_decide(). */
struct policy_scan {
    struct lex_result lex;
    uint8_t consumed[LEX_MAX_TOKENS];    /* token is not part of the topic */
    uint8_t deictic_len[LEX_MAX_TOKENS]; /* longest deictic phrase starting here */
    uint8_t lead_len[LEX_MAX_TOKENS];    /* longest topic lead starting here */
    uint64_t noun_at[LEX_MAX_TOKENS / 64]; /* a paper noun starts here */
    uint32_t topic_start, topic_end;     /* the searched-for topic's clause, see decide.c */
    uint32_t content_end;                /* end of its words; what follows (with PDF,
                                            since 2020) are instructions */
    const char *text;
    size_t n;
};

#define CAT_BIT(c) ((uint64_t)1 << (c))

#define BIT_SET(bits, i) ((bits)[(i) / 64] |= (uint64_t)1 << ((i) % 64))
#define BIT_GET(bits, i) ((bits)[(i) / 64] >> ((i) % 64) & 1)

/* Nonzero when token `i` is a free-standing dash: "-", "–" or "—". */
static inline int policy_is_dash(const struct policy_scan *scan, uint32_t i)
{
    const struct lex_token *tok = &scan->lex.tokens[i];
    const unsigned char *t = (const unsigned char *)scan->text + tok->start;

    if (tok->len == 1)
        return t[0] == '-';
    return tok->len == 3 && t[0] == 0xe2 && t[1] == 0x80 && (t[2] == 0x93 || t[2] == 0x94);
}

/* Nonzero when token `i` is inside the topic clause's own words: phrases
 * there are part of the topic ("papers on open access publishing"). */
static inline int policy_in_topic(const struct policy_scan *scan, uint32_t i)
{
    return i >= scan->topic_start && i < scan->content_end;
}

/* Finds the clause that names what to search for (decide.c): sets
 * scan->topic_start, topic_end and content_end, all UINT32_MAX when the
 * message has none. */
void policy_mark_topic_clause(const struct policy *policy, struct policy_scan *scan);

/* Forces the pack's search tool for the search in `d` when it is
 * available and the role may call it (reasons tool_forced, or why not),
 * and then sets the pack's stage transition. */
void policy_force_search(const struct policy *policy, const struct policy_context *ctx,
                         struct policy_decision *d);

/* Appends a reason (ignored when the list is full or it is already there). */
void policy_add_reason(struct policy_decision *d, enum policy_reason reason);

/* Fills the settings of d->search from the scanned message: years,
 * count and open access, with their reasons; marks the tokens they used
 * (and request phrasing, paper nouns) as consumed. The query is left as
 * it was. */
void policy_fill_settings(const struct policy *policy, const struct policy_context *ctx,
                          struct policy_scan *scan, struct policy_decision *d);

/* Fills d->search from the scanned message: policy_fill_settings, then
 * the query (request phrasing stripped, deictic resolved). */
void policy_fill_search(const struct policy *policy, const struct policy_context *ctx,
                        struct policy_scan *scan, struct policy_decision *d);


#endif
