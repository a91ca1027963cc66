/*
 * turn.h — what the stages of one turn share: the pipeline (pack,
 * policy, config, store, tools) and the turn context they fill in order.
 * Internal to src/pipeline/.
 */
#ifndef KEEL_PIPELINE_TURN_H
#define KEEL_PIPELINE_TURN_H

#include <jansson.h>

#include "artifact/artifact.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/id.h"
#include "pipeline/config.h"
#include "pipeline/handlers.h"
#include "pipeline/scenario.h"
#include "pipeline/pipeline.h"
#include "pipeline/state.h"
#include "pipeline/state_cache.h"
#include "pipeline/tools.h"
#include "llm/llm.h"
#include "memory/memory.h"
#include "providers/providers.h"
#include "policy/policy.h"

struct pipeline {
    struct pack *pack;
    struct policy *policy;
    struct pipeline_config cfg;
    struct store *store;
    const struct web_fallback *web;
    struct providers *providers;       /* remote paper providers (owned) */
    struct llm *llm;                   /* the model, or NULL: extractive answers (owned) */
    struct memory *memory;             /* long-term memory of runs (pack memory.remember), or NULL */
    struct llm *embedder;              /* memory's /v1/embeddings model, or NULL: hashed (owned) */
    struct handlers *handlers;         /* the pack's route handlers (handlers.h), or NULL (owned) */
    struct websearch *websearch;       /* the web-search provider, or NULL (owned) */
    struct artifact_conf artifacts;    /* the pack's artifacts section (seed 001) */
    char *artifacts_dir;               /* the JSONL export, or NULL (owned) */
    struct scenario_conf scenario;     /* the pack's scenario section (seed 004) */
    int trace;                         /* KEEL_DEBUG_TRACE=1, read once */
    int local;                         /* no port can call out: a turn reads from one snapshot */
    struct state_cache *states;        /* recent conversations' parsed states, or NULL (owned) */
    char pack_dir[4200];
};

enum turn_kind { TURN_NEW_QUESTION, TURN_SLOT_FILL };

/* What resolve found for one subquestion. */
struct sub_result {
    int ran;                  /* a tool ran */
    int unavailable;          /* the path cannot answer */
    const char *tool;         /* tool that ran */
    json_t *args;             /* its final arguments */
    json_t *items;            /* papers or passages (owned) */
    const char *band;         /* confident | caution | abstain | none */
    double confidence;
    json_t *outcome;          /* web_search: {configured, provider, failed, reason} (owned) */
};

struct turn {
    struct pipeline *pl;
    const struct turn_request *req;
    int64_t now;
    long alloc_failures;               /* keel_alloc_failures() when the turn began */
    char conversation_id[KEEL_ID_MAX + 80];
    char correlation_id[KEEL_ID_MAX];
    int seq;                           /* this turn's number, from 1 */
    int role;

    struct thread_state state;         /* changed only through turn_apply */
    char stage_before[CONFIG_STAGE_MAX];
    json_t *deltas;
    json_t *events;
    int event_seq;
    const char *stage_name;            /* the stage running */
    json_t *no_extra;                  /* the empty extra events without one share */
    /* The events as publish stores them: "[" and each event's text as
     * the events' dump would write it, added by turn_emit, so publish
     * writes no event twice. events_text_failed: use the dump instead. */
    struct keel_buf events_text;
    int events_text_failed;
    int events_compacted;              /* events_text leaves out each event's correlation_id */
    struct {   /* the parts of an event's text the turn's events share */
        char head[KEEL_ID_MAX + 48];       /* {"correlation_id":"…","extra": */
        char tail[KEEL_RFC3339_MAX + 48];  /* ,"ts":"…","user_message": */
    } event_parts;

    /* classify */
    enum turn_kind kind;
    int unrecognised;                  /* a slot answer that named no known value */
    int no_tools;                      /* smalltalk, a command or a veto: nothing is searched */
    char effective[STATE_TEXT_MAX];    /* the message the later stages read */
    size_t effective_len;

    /* decide */
    struct policy_context pctx;
    struct policy_decision decision;
    json_t *decision_json;             /* the decision as JSON, made once by decide */
    json_t *provider_reports;          /* resolve: each paper provider's story, or NULL */

    /* plan */
    json_t *blueprint;                 /* the blueprint this turn planned or resumed, or NULL */

    /* resolve */
    struct sub_result results[BLUEPRINT_MAX_SUBS];
    json_t *tools_called;              /* [name…] */
    json_t *tool_args;                 /* {name: args} of the last call of each */
    int forced_tool_ran;               /* the policy's forced tool ran and succeeded */

    /* the model (model.c); all NULL/0 without one */
    json_t *model_log;                 /* {model, proposal, tool_calls[], answer}: the decision log */
    json_t *model_runs;                /* [{id, name, arguments, result}] of the model's calls that ran */
    int model_failed;                  /* a call failed: the answer is extractive, with a notice */
    int forced_prefix;                 /* the policy ran its tool though the model did not call it */
    char *proposal_text;               /* owned: the text of the model's proposal reply */
    int streamed;                      /* the answer went out through on_token as it was written */

    /* artifact (stage_artifact.c) */
    json_t *artifact_gate;             /* the gate's decision (decision log), or NULL */
    json_t *artifact;                  /* the artifact built, or NULL */
    json_t *facts;                     /* its facts, or NULL */
    int artifact_exported;             /* the export line was written after the commit */

    /* remember */
    struct memory_decision *memory_decision;   /* stored by publish with the turn; or NULL */

    /* the route handlers (assistant_routes.c) */
    char user[STORE_PERSONAL_USER_MAX + 1];    /* whose personal facts: req user, owner, "local" */
    int routed;                        /* a handler answers this turn (command, memory, convert) */
    int closing;                       /* a close command: the client may end the conversation */
    int reset;                         /* a reset command: the client may start a new one */
    const char *route_tool;            /* the tool the handler ran, or NULL */
    json_t *route_result;              /* its result, or the doctor's report (owned) */
    struct personal_pending pending;   /* a personal-fact change publish stores */

    /* compose / clarify */
    struct keel_buf answer;
    const char *answer_key;            /* pipeline.messages key of a no-model reply, or NULL */
    json_t *sources;
    char *clarification;               /* owned; NULL when none */
    int ended;                         /* a stage ended the turn early */
    json_t *state_json;                /* the state as publish stored it */

    /* the active scenario (scenario_turn.c) */
    struct scenario_turn scenario;
    char *scenario_text;               /* owned: as publish stored it */
    char *scenario_delta_text;         /* owned */
};

/* A stage: returns KEEL_OK (possibly setting t->ended) or an error that
 * fails the turn without storing anything. */
typedef int (*stage_fn)(struct turn *t, struct keel_error *err);

int stage_load(struct turn *t, struct keel_error *err);
int stage_classify(struct turn *t, struct keel_error *err);
int stage_decide(struct turn *t, struct keel_error *err);
int stage_plan(struct turn *t, struct keel_error *err);
int stage_clarify(struct turn *t, struct keel_error *err);
int stage_resolve(struct turn *t, struct keel_error *err);
int stage_compose(struct turn *t, struct keel_error *err);
int stage_artifact(struct turn *t, struct keel_error *err);
int stage_remember(struct turn *t, struct keel_error *err);
int stage_publish(struct turn *t, struct keel_error *err);

/* The artifact's part of publish (stage_artifact.c). artifact_note_skipped
 * records the gate's "clarification" decision for a turn that ended before
 * the artifact stage. artifact_record fills `w` with the artifact and its
 * facts for the turn's store record (w->art NULL-free: w->has is 0 when
 * the turn has none); KEEL_ENOMEM when out of memory. artifact_export
 * appends the artifact to the conversation's JSONL file after the turn
 * committed; a failure is logged, never returned: the store is the
 * source of truth. */
struct artifact_write {
    int has;
    struct store_artifact art;
    struct store_fact facts[ARTIFACT_FACTS_MAX];
    char *body;
    char *tags[ARTIFACT_FACTS_MAX];
};
int artifact_note_skipped(struct turn *t);
int artifact_record(struct turn *t, struct artifact_write *w);
void artifact_write_release(struct artifact_write *w);
void artifact_export(struct turn *t);

/* The model's part of a turn (model.c). Each does nothing without a
 * model. model_propose (resolve, before the policy's tools run) offers
 * the model the tools its role may call and vets every call it proposes:
 * refused (not the role's, not the pack's), invalid (arguments against
 * the schema), governed (a tool the policy runs itself, with its own
 * arguments) or run. model_settle (resolve, after) records the governed
 * calls' final arguments and whether the reply must open with the
 * pack's forced_tool line. model_compose (compose, after the extractive
 * answer) lets the model phrase the answer from the tool results,
 * streaming tokens; any failure keeps the extractive answer and adds a
 * notice. Errors returned are out of memory only: a model's failure
 * never fails the turn. */
int model_propose(struct turn *t, struct keel_error *err);
int model_settle(struct turn *t, struct keel_error *err);
int model_compose(struct turn *t, struct keel_error *err);

/* The turn's model log, made on first use (NULL when out of memory). */
json_t *model_log(struct turn *t);

/* The model as planner (model_plan.c), when the pack's llm.planner is
 * on: fills bp's subquestions from the model's validated plan and sets
 * *used, or leaves bp without subquestions and *used 0 (no model, no
 * planner, or any failure — logged — so the deterministic plan runs).
 * Errors returned are out of memory only. */
int model_plan(struct turn *t, struct blueprint *bp, int *used, struct keel_error *err);

/* The number under which the answer cites `item` — a paper (by id), a
 * corpus passage (by its document) or a web result — adding it to the
 * turn's sources when new. -1 when out of memory (stage_compose.c). */
int compose_cite(struct turn *t, const json_t *item);

/* A sentence of a passage: text[start, start + len), and how much of the
 * query it covers (tools_coverage_of). */
struct compose_sentence {
    size_t start, len;
    double score;
};

#define COMPOSE_SENTENCES 2   /* of a passage in an answer */

/* Picks up to COMPOSE_SENTENCES sentences of `text` that share the most
 * content words with the query (a sentence ends at a newline, at the
 * "| |" between table rows, and at . ? ! before a space or the end — a
 * full stop not before a lower-case word), in text order; a table's rule
 * row ("|---|") and pieces of 20 bytes or less (or 1 KiB or more) are
 * not sentences. Returns how many (0: none covers any of the query);
 * the rest of best[] is zero (stage_compose.c). */
int compose_pick_sentences(const struct tool_words *query, const char *text,
                           struct compose_sentence best[COMPOSE_SENTENCES]);

/* Appends `prefix` and `n` bytes of `text` as plain text: without
 * markdown emphasis marks ("**Mail:**" reads "Mail:"), and a table row's
 * cells joined by commas ("| Member Services | 1-866-… |" reads "Member
 * Services, 1-866-…"). KEEL_ENOMEM or KEEL_ETOOBIG when `b` cannot grow,
 * with part of it appended (stage_compose.c). */
int compose_add_plain(struct keel_buf *b, const char *prefix, const char *text, size_t n);

/* Appends the first sentence of `text` (up to . ? ! before a space or
 * the end), at most 300 bytes cut at a word and ended by "…". KEEL_ENOMEM
 * or KEEL_ETOOBIG when `b` cannot grow, with nothing appended
 * (stage_compose.c). */
int compose_first_sentence(struct keel_buf *b, const char *text);

/* Appends the closing note of an answer when remote paper providers
 * failed ("Note: Semantic Scholar did not answer, …"); nothing when none
 * did (stage_compose.c). */
int compose_providers_note(struct turn *t, struct keel_buf *out);

/* The request messages of the turn (prompt.c): the pack's static system
 * prompt, a system block with the live state, earlier turns within the
 * token budget, the user's message and, with `results`, the tool calls
 * that ran and their results. A new array, or NULL (out of memory, or a
 * store failure reading the history, in err). */
json_t *prompt_messages(struct turn *t, int results, struct keel_error *err);

/* The tools the turn's role may call, as OpenAI function tools: in the
 * registry, in the pack, allowed for the role. A new array (may be
 * empty), or NULL when out of memory. */
json_t *prompt_tools(const struct turn *t);

/* The route handlers (assistant_routes.c; answers in assistant_answers.c). route_wanted (decide): whether a
 * handler answers this turn — the pack has handlers and the policy chose
 * command, local_memory_intent or conversion_tool. route_resolve
 * (resolve) runs the handler's tool under the registry, pack and role
 * checks; route_compose (compose) writes the answer. Errors are out of
 * memory and store failures only. */
int route_wanted(const struct turn *t);

/* With route handlers: when redaction hid an amount ("1000000 yen to
 * usd" reads "[redacted] yen to usd"), the policy's decision on the
 * message as written is taken if it is a conversion — a conversion keeps
 * nothing of the message in the state or the decision. */
void route_redecide(struct turn *t);
int route_resolve(struct turn *t, struct keel_error *err);
int route_compose(struct turn *t, struct keel_buf *b);

/* The answer of a web_search subquestion (assistant_answers.c): the results as
 * numbered sources, or why there are none. */
int route_compose_web(struct turn *t, const struct sub_result *r, struct keel_buf *b);

/* What the turn's tools may reach: the store, the web port, the config,
 * providers, the handlers, the user and the pending personal change. */
void turn_tool_env(struct turn *t, struct tool_env *env);

/* Appends template `tmpl` to `b` with each {name} replaced by the value of
 * that index in names/values (n pairs; a NULL value writes nothing); other
 * text, and a brace that names none of them, is copied as is (stage_compose.c).
 * Returns KEEL_ENOMEM when `b` cannot grow, with part of the text appended. */
int turn_template(struct keel_buf *b, const char *tmpl, const char *const *names,
                  const char *const *values, int n);

/* Emits an event of the running stage (events.c). `kind` is start|end|info|token|
 * error; `key` ("resolve.search", or NULL for the stage itself) picks the
 * user text from the pack's event mapping: mapped events have level
 * "both", the rest "technical". `extra` (stolen, may be NULL) carries
 * structured data. Returns KEEL_ENOMEM when the event cannot be built. */
int turn_emit(struct turn *t, const char *kind, const char *key, json_t *extra,
              const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Frees the turn's events, their stored text and the values they share
 * (events.c). */
void turn_events_release(struct turn *t);

/* The active scenario's part of a turn (scenario_turn.c).
 * load: the stored scenario of an existing conversation (stage_load).
 * begin: the pack's rules for the turn's role, then the request's copy
 * of the scenario (client-owns-state: it wins) — KEEL_EINVAL naming
 * "active_scenario" for a copy that is not an object, too large, or
 * from a role that may not change it. classify: the household facts the
 * message states, as a patch (a role that may not change the scenario
 * changes nothing). prompt: the snapshot for the model's per-turn
 * block. record: the scenario, its changes and version for publish's
 * record (KEEL_ENOMEM). result: active_scenario, scenario_summary and
 * scenario_changes into the turn's result (nonzero when out of memory). */
int scenario_turn_load(struct turn *t, const struct store_conversation *conv,
                       struct keel_error *err);
int scenario_turn_begin(struct turn *t, struct keel_error *err);
int scenario_turn_classify(struct turn *t, struct keel_error *err);
int scenario_turn_prompt(const struct turn *t, struct keel_buf *b);
int scenario_turn_record(struct turn *t, struct store_turn_record *rec, struct keel_error *err);
int scenario_turn_result(const struct turn *t, json_t *result);

/* Applies a delta to the turn's state and records it. */
int turn_apply(struct turn *t, const struct state_delta *delta, struct keel_error *err);

/* Extraction helpers (extract.c). */

/* Text following the first phrase of `category` in `msg`, up to the end
 * of its sentence, trimmed and with patient identifiers redacted; "" when
 * no such phrase. */
void extract_after_lead(const struct pipeline_config *cfg, const char *msg, size_t n,
                        int category, char *out, size_t cap);

/* Where a message names a slot's value: the value index (-1: not
 * named), the alias's bytes and its tokens. */
struct slot_span {
    int value;
    size_t start, len;
    uint16_t tokens;
};

/* Slot values named in a message already matched into `res`, with their
 * spans; the longest alias of a slot wins. Returns how many slots were
 * named. */
int extract_slot_spans_in(const struct pipeline_config *cfg, const struct lex_result *res,
                          struct slot_span spans[CONFIG_MAX_SLOTS]);

/* extract_slot_spans_in() on `msg`, matched here. */
int extract_slot_spans(const struct pipeline_config *cfg, const char *msg, size_t n,
                       struct slot_span spans[CONFIG_MAX_SLOTS]);

/* Slot values named in `msg`: values[s] is the value index of slot s or
 * -1. Returns how many slots were named. */
int extract_slots(const struct pipeline_config *cfg, const char *msg, size_t n,
                  int values[CONFIG_MAX_SLOTS]);

/* Writes `text` into `out` with every alias of a known, needed
 * jurisdiction slot replaced by the state's value ("with UHC" → "with
 * United Healthcare"; after a payer change the old payer's name becomes
 * the new one), then the refine phrase ("for {value}") of each known
 * needed slot the text does not name: "how do I file an appeal" +
 * Sunshine Health → "how do I file an appeal for Sunshine Health",
 * never twice. */
void turn_refine(const struct turn *t, const char *text, char *out, size_t cap);

/* Writes `text` without the slot values it names ("how do I file an
 * appeal with UHC" → "how do I file an appeal with"): what a passage must
 * cover to answer the question, the plan's name aside. */
void turn_focus(const struct turn *t, const char *text, char *out, size_t cap);

/* Copies `msg` into `out` with patient identifiers (dates, member ids,
 * MRNs, names after "patient"/"member"/"name is") replaced by
 * "[redacted]". */
void extract_redact(const char *msg, size_t n, char *out, size_t cap);

#endif
