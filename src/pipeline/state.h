/*
 * state.h — a conversation's thread state: one typed struct, changed
 * only by applying explicit deltas (seed 002 §3.2). There is no merge of
 * arbitrary JSON: each delta kind names the one field it changes, and
 * state_apply() is the single place a field changes, so rules like "a
 * payer change resets the slots that depend on it" and "the stage
 * history is capped" hold everywhere.
 *
 * The state serialises to JSON (state_to_json) for the store and reads
 * back strictly (state_from_json): an unknown key or a wrong type is an
 * error naming the field. Jurisdiction slots are named by the pack.
 */
#ifndef KEEL_PIPELINE_STATE_H
#define KEEL_PIPELINE_STATE_H

#include <jansson.h>
#include <stdint.h>

#include "core/error.h"
#include "pipeline/config.h"

#define STATE_TEXT_MAX 512       /* research question, topic, queries */
#define STATE_VALUE_MAX 64       /* a slot value */
#define STATE_REASON_MAX 64
#define STATE_HISTORY_CAP 256    /* hard cap; the pack's history_max is below it */
#define BLUEPRINT_MAX_SUBS 6

struct stage_change {
    char from[CONFIG_STAGE_MAX];
    char to[CONFIG_STAGE_MAX];
    int64_t ts_ms;
    char reason[STATE_REASON_MAX];
};

enum sub_status { SUB_PENDING, SUB_ANSWERED, SUB_UNAVAILABLE };

struct blueprint_sub {
    char text[STATE_TEXT_MAX];
    int path;                 /* index into the config's paths */
    enum sub_status status;
};

/* The plan of one user question: its subquestions, each on a path. It is
 * kept across clarification turns and after it is answered (so "what
 * about UHC?" can ask it again), until a new question replaces it. */
struct blueprint {
    int active;
    char question[STATE_TEXT_MAX];
    struct blueprint_sub subs[BLUEPRINT_MAX_SUBS];
    int n_subs;
    int created_turn;
};

/* The conversation's last search the policy forced, as it ran: what a
 * follow-up that only narrows it ("only open access ones") starts from
 * (policy_refine). Serialised as "last_search": null or {query, count,
 * year_from, year_to, open_access_only} (a year null when open). */
struct state_search {
    int set;
    char query[STATE_TEXT_MAX];
    int count;                       /* 1..STATE_SEARCH_COUNT_MAX */
    int year_from, year_to;          /* 0: open; else 1900..9999 */
    int open_access_only;
};

#define STATE_SEARCH_COUNT_MAX 1000

struct thread_state {
    char stage[CONFIG_STAGE_MAX];
    double stage_confidence;
    struct stage_change *history;    /* ring of at most history_max, oldest first */
    int n_history;
    char research_question[STATE_TEXT_MAX];
    char research_topic[STATE_TEXT_MAX];
    char slots[CONFIG_MAX_SLOTS][STATE_VALUE_MAX];  /* jurisdiction; "" = unknown */
    uint32_t open_slots;             /* bit s: slot s was asked for */
    char suggested[CONFIG_MAX_SLOTS][STATE_VALUE_MAX];  /* value a reset cleared: offered back */
    char refined_query[STATE_TEXT_MAX];
    struct blueprint blueprint;
    struct state_search last_search;
    int turns;                       /* turns completed */
};

enum delta_kind {
    DELTA_STAGE,              /* text: new stage, reason, number: confidence */
    DELTA_RESEARCH_QUESTION,  /* text */
    DELTA_TOPIC,              /* text */
    DELTA_SLOT,               /* index: slot, text: value ("" clears) */
    DELTA_OPEN_SLOTS,         /* mask */
    DELTA_REFINED_QUERY,      /* text */
    DELTA_BLUEPRINT,          /* blueprint: the new plan (NULL clears) */
    DELTA_SUB_STATUS,         /* index: subquestion, mask: enum sub_status */
    DELTA_TURNS,              /* index: turns completed */
    DELTA_LAST_SEARCH,        /* search: the search that ran (set 0 clears) */
};

struct state_delta {
    enum delta_kind kind;
    int index;
    const char *text;
    const char *reason;
    double number;
    uint32_t mask;
    const struct blueprint *blueprint;
    const struct state_search *search;
};

/* Sets `state` to the start of a conversation under `cfg` (stage =
 * initial stage, confidence 1). Allocates the history ring; returns
 * KEEL_ENOMEM on failure. Release with state_release. */
int state_init(struct thread_state *state, const struct pipeline_config *cfg);

/* Frees the history ring. */
void state_release(struct thread_state *state);

/* Copies `src` into `dst` (both initialised with the same cfg). */
void state_copy(struct thread_state *dst, const struct thread_state *src,
                const struct pipeline_config *cfg);

/* Applies one delta at time `now_ms`. A text over its field's cap is
 * KEEL_ETOOBIG and a bad index KEEL_EINVAL (err names the field); the
 * state is then unchanged. Setting a slot to a value different from its
 * current one clears every slot that depends on it (and their open
 * bits). A stage change appends {from, to, ts, reason} to the history,
 * dropping the oldest past history_max; setting the current stage again
 * changes nothing. When `log` is non-NULL the applied delta is appended
 * to it as JSON. */
int state_apply(struct thread_state *state, const struct pipeline_config *cfg,
                const struct state_delta *delta, int64_t now_ms, json_t *log,
                struct keel_error *err);

/* The state as a new JSON object (NULL when out of memory). */
json_t *state_to_json(const struct thread_state *state, const struct pipeline_config *cfg);

/* Reads a state written by state_to_json into an initialised `state`.
 * Unknown keys, wrong types and unknown slots or paths fail with
 * KEEL_EINVAL, texts over their caps with KEEL_ETOOBIG, naming the
 * field. */
int state_from_json(struct thread_state *state, const struct pipeline_config *cfg,
                    const json_t *json, struct keel_error *err);

/* A blueprint as JSON {question, subquestions[{text, path, status}],
 * created_turn}, or JSON null when it is not active. */
json_t *state_blueprint_json(const struct blueprint *bp, const struct pipeline_config *cfg);

/* Checks a last search: query under STATE_TEXT_MAX, count 1..
 * STATE_SEARCH_COUNT_MAX, years 0 or 1900..9999 and ordered. Returns
 * KEEL_EINVAL (KEEL_ETOOBIG for the query) naming "last_search.FIELD". */
int state_search_check(const struct state_search *search, struct keel_error *err);

/* The last search as JSON: null when not set, else {query, count,
 * year_from, year_to, open_access_only}. NULL when out of memory. */
json_t *state_search_json(const struct state_search *search);

/* Reads "last_search" as written by state_search_json (absent or null:
 * not set). Unknown keys and wrong types fail with KEEL_EINVAL naming the
 * field; `search` is then cleared. */
int state_search_from_json(struct state_search *search, const json_t *json,
                           struct keel_error *err);

/* Static names of sub_status values. */
const char *state_sub_status_name(enum sub_status status);

#endif
