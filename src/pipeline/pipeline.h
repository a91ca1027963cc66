/*
 * pipeline.h — the turn pipeline: one user message in, one reply out.
 *
 *   load → classify → decide → plan → clarify → resolve → compose →
 *   artifact → remember → publish
 *
 * Each stage is a file of src/pipeline/ (stage_*.c) working on one turn
 * context (turn.h). A stage may end the turn early (clarify); publish
 * then still runs and writes the whole turn — both messages, the state
 * after its deltas, every event and the decision log — in ONE store
 * transaction, so a turn is either fully stored or not at all.
 *
 * A pipeline serves one pack over one store. It is not shared between
 * threads at the same time (the store connection is not).
 */
#ifndef KEEL_PIPELINE_PIPELINE_H
#define KEEL_PIPELINE_PIPELINE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "llm/llm.h"
#include "store/store.h"

#define PIPELINE_MESSAGE_MAX 8192   /* bytes of a user message */

/* A web search used by rag when the corpus is not confident enough
 * (seed 002's fallback). None is configured by default. `search` returns
 * a JSON array of {title, url, snippet} in *out. */
struct web_fallback {
    const char *name;
    int (*search)(void *ctx, const char *query, int limit, json_t **out, struct keel_error *err);
    void *ctx;
};

/* A turn's event as it is emitted: the fields of one element of the
 * result's events[] (and of the stored events), borrowed for the
 * callback's duration. */
struct pipeline_event {
    const char *correlation_id;
    int seq;                           /* 1, 2, … within the turn */
    const char *stage;                 /* the stage that emitted it */
    const char *kind;                  /* start|end|info|token|error */
    const char *level;                 /* "both" when user_message is set, else "technical" */
    const char *message;               /* the technical line */
    const char *user_message;          /* the pack's user-facing text; NULL: none */
    const char *ts;                    /* the turn's time, RFC 3339 */
    const json_t *extra;               /* an object, maybe empty; never NULL */
};

/* Called for every event as it is emitted (before publish), e.g. to show
 * progress. The event is borrowed. */
typedef void (*pipeline_event_fn)(void *ctx, const struct pipeline_event *event);

/* The event as the JSON object the result's events[] holds (keys
 * correlation_id, seq, stage, kind, level, message, user_message (null
 * when none), ts, extra); a new reference, NULL when out of memory. */
json_t *pipeline_event_json(const struct pipeline_event *event);

/* Called with each piece of the answer as the model writes it (`n`
 * bytes of UTF-8, not NUL-terminated). text NULL: what was passed so far
 * is void (the model failed mid-answer); the turn's result then holds
 * the answer to show, and "streamed" is false. */
typedef void (*pipeline_token_fn)(void *ctx, const char *text, size_t n);

struct pipeline_options {
    const char *packs_dir;             /* NULL: pack_default_dir() */
    const char *pack;                  /* pack name, required */
    struct store *store;               /* required; borrowed */
    const struct web_fallback *web;    /* NULL: none */
    const char *providers;             /* remote paper providers on ("openalex,semanticscholar",
                                        * "none"); NULL: the pack's and KEEL_PROVIDERS */
    struct llm_options llm;            /* the model (--llm-url, --llm-model, --llm-key-env);
                                        * unset fields: the pack's llm section and KEEL_LLM_* */
    const char *websearch_url;         /* a SearxNG-compatible endpoint (--websearch-url; "none":
                                        * off); NULL: handlers.websearch.url, KEEL_WEBSEARCH_URL */
    int no_state_cache;                /* parse every conversation's state from the store
                                        * (state_cache.h); 0: keep the recent ones parsed */
};

struct turn_request {
    const char *conversation_id;       /* NULL or "": a new conversation */
    const char *message;               /* valid UTF-8, 1..PIPELINE_MESSAGE_MAX bytes */
    size_t message_len;
    const char *role;                  /* NULL: the pack's default role */
    int64_t now_ms;                    /* 0: keel_clock_now() */
    pipeline_event_fn on_event;        /* may be NULL */
    void *event_ctx;
    int no_events_list;                /* 1: the result has no events[] (the events still
                                        * reach on_event and the store); for callers that
                                        * never read it: a JSON object per event is a
                                        * sixth of a turn's work */
    const char *new_conversation_id;   /* a new conversation's id, named by the caller before
                                        * the turn runs (1..128 letters, digits, _ - . :);
                                        * NULL: a fresh one */
    const char *correlation_id;        /* the turn's id, named by the caller (keel_id_new("turn"));
                                        * NULL: a fresh one */
    const char *owner;                 /* the API user a new conversation belongs to; NULL: none */
    const char *traceparent;           /* the caller's W3C traceparent, kept in the load event;
                                        * NULL: none */
    pipeline_token_fn on_token;        /* the model's answer as it is written; may be NULL */
    void *token_ctx;
    const char *user;                  /* whose personal facts the turn reads and writes
                                        * (1..128 bytes); NULL: owner, else "local" */
    const json_t *active_scenario;     /* the client's copy of the scenario (seed 004): it
                                        * wins over the stored one and is saved; NULL: none */
};

struct pipeline;

/* Loads the pack (policy and pipeline sections) and binds the store.
 * Errors name the pack file and line; nothing is returned on failure. */
int pipeline_new(const struct pipeline_options *options, struct pipeline **out,
                 struct keel_error *err);

/* Sets the directory where each conversation's artifacts are appended
 * as JSON lines after their turn commits (docs/artifacts.md); NULL or
 * "": no export (the default). KEEL_ENOMEM leaves the old setting. */
int pipeline_set_artifacts_dir(struct pipeline *pl, const char *dir, struct keel_error *err);

/* After a batch of turns on the pipeline's store failed to commit
 * (store_batch_end): forgets what those turns' publish left in memory
 * (the long-term memory index; docs/store.md), so that only stored turns
 * count. KEEL_OK, or the store's error (the index catches up later). */
int pipeline_batch_failed(struct pipeline *pl, struct keel_error *err);

/* Frees a pipeline (not its store). NULL is a no-op. */
void pipeline_free(struct pipeline *pl);

/* Checks `role` (NULL: the default) against the pack: KEEL_EINVAL naming
 * "role" and listing the pack's roles when it has no such role. */
int pipeline_check_role(const struct pipeline *pl, const char *role, struct keel_error *err);

/* The pack role an API role (owner, editor, viewer) acts as: the pack's
 * role of that name when it has one; else viewer is the pack's first
 * role without write access and owner/editor its default role. NULL when
 * a viewer finds no read-only role (the turn must not run). */
const char *pipeline_role_for(const struct pipeline *pl, const char *api_role);

/* The model's name and URL when the pipeline has one; NULL else. */
const struct llm_conf *pipeline_llm(const struct pipeline *pl);

/* The pack's name. */
const char *pipeline_pack_name(const struct pipeline *pl);

/* Ingests the pack's sample data (pipeline.sample) into the store when
 * the store has no papers (for `papers`) or no documents (for `corpus`).
 * Returns KEEL_OK with *ingested set to the records added (0 when the
 * store had data or the pack has no sample). */
int pipeline_ingest_sample(struct pipeline *pl, long *ingested, struct keel_error *err);

/* scenario_store_change() on this pipeline's store and pack (PATCH of
 * the HTTP API, a replay's scenario_patch step): *scenario is the
 * scenario now (an object or JSON null), *summary its summary line (a
 * string or JSON null), both new references. */
int pipeline_scenario_change(struct pipeline *pl, const char *conversation_id,
                             const json_t *patch, json_t **scenario, json_t **summary,
                             struct keel_error *err);

/* Runs one turn. On success *result is a new JSON object:
 *   {conversation_id, turn, correlation_id, answer, sources[], decision,
 *    stage, clarification (text or null), tools_called[], tool_args{},
 *    state, events[] (absent with no_events_list), deltas[], model
 *    (what the model did, or absent without one), streamed (the answer
 *    went out through on_token), closing (true when a close command
 *    answered: the client may end the conversation), reset (true when a
 *    reset command answered: the client may start a new conversation),
 *    artifact ({id, type, title, facts, exported} or null), artifact_gate
 *    (the intent gate's decision, or absent when the pack has none),
 *    active_scenario (object or null), scenario_summary (text or null),
 *    scenario_changes (this turn's [{source, patch|set}] or null)}
 * and the turn is stored. Bad input (empty, too long or invalid UTF-8
 * message, unknown role, unknown conversation id or one of another pack)
 * is KEEL_EINVAL / KEEL_ENOTFOUND naming the field, and changes nothing.
 * A store failure is returned as is and nothing of the turn is stored. */
int pipeline_turn(struct pipeline *pl, const struct turn_request *req, json_t **result,
                  struct keel_error *err);

#endif
