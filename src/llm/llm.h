/*
 * llm.h — the model port: a client for any OpenAI-compatible
 * `/v1/chat/completions` server (llama.cpp, Ollama, vLLM, OpenAI,
 * OpenRouter), on libcurl.
 *
 * keel's code decides everything a turn does; a model only phrases text
 * and may propose tool calls, which the pipeline vets (see
 * src/pipeline/model.c). This module knows nothing of turns: it sends a
 * request body, reads the reply — whole or as Server-Sent Events — and
 * hands back the text and the tool calls, with
 *
 *   - a per-call timeout and a cap on every byte it reads (an SSE line,
 *     one event's data, the reply text, each tool call's arguments);
 *   - bounded retries on 429 (Retry-After, capped) and 5xx (backoff
 *     250 ms, 500 ms, …), only before the first token was passed on;
 *   - a circuit breaker per upstream URL, shared by the whole process:
 *     after `breaker_failures` failed calls in a row, calls fail at once
 *     for `breaker_cooldown_ms`, then one call tries again.
 *
 * Settings (llm_conf_load): the pack's `llm:` section, then the
 * environment (KEEL_LLM_URL, KEEL_LLM_MODEL, KEEL_LLM_KEY_ENV), then the
 * caller's options (`--llm-url`, `--llm-model`, `--llm-key-env`). The key
 * itself is never in a pack: key_env names the variable that holds it.
 */
#ifndef KEEL_LLM_LLM_H
#define KEEL_LLM_LLM_H

#include <jansson.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/error.h"

#define LLM_TOOL_CALLS_MAX 8            /* tool calls kept from one reply */
#define LLM_ARGS_MAX (16u << 10)        /* bytes of one tool call's arguments */
#define LLM_TEXT_MAX (64u << 10)        /* bytes of a reply's text */
#define LLM_SSE_LINE_MAX (64u << 10)    /* bytes of one SSE line */
#define LLM_SSE_DATA_MAX (256u << 10)   /* bytes of one SSE event's data */

struct llm_conf {
    char *url;                  /* base URL ending in /v1; NULL: no model */
    char *model;
    char *key_env;              /* the variable holding the API key; NULL: none */
    char *system_prompt;        /* the pack's static system prompt; NULL: a default */
    long timeout_ms;            /* one call, connect to last byte: 30000 */
    int retries;                /* on 429/5xx: 2 */
    long max_backoff_ms;        /* a wait between attempts: at most 4000 */
    int breaker_failures;       /* failed calls in a row that open the circuit: 3 */
    long breaker_cooldown_ms;   /* how long it stays open: 30000 */
    int stream;                 /* ask for SSE (1) or whole replies (0): 1 */
    size_t max_response_bytes;  /* a whole reply's body: 1 MiB */
    int history_tokens;         /* earlier turns in the prompt, ~4 bytes a token: 1500 */
    int planner;                /* the model proposes the blueprint (validated, with the
                                 * deterministic plan as fallback): 0 */
};

/* Options that win over the pack and the environment; NULL: not given.
 * url "none" turns the model off. */
struct llm_options {
    const char *url;
    const char *model;
    const char *key_env;
};

/* Fills *conf from the pack's `llm` section (may be NULL), the
 * environment and `opt` (may be NULL). A URL without a model, a bad URL
 * or a bad value is KEEL_EINVAL naming the setting ("llm.timeout_ms",
 * "llm_model"); *conf is then released. With no URL anywhere, conf->url
 * is NULL: no model. */
int llm_conf_load(const json_t *section, const struct llm_options *opt, struct llm_conf *conf,
                  struct keel_error *err);

/* llm_conf_load for another model of the same protocol: the section's
 * errors name `path` ("memory.embedder"), the environment is `env`_URL,
 * `env`_MODEL and `env`_KEY_ENV ("KEEL_EMBED"), the options' errors
 * "embed_url"…. */
int llm_conf_load_as(const json_t *section, const char *path, const char *env,
                     const struct llm_options *opt, struct llm_conf *conf, struct keel_error *err);

/* Frees the strings of a conf. */
void llm_conf_release(struct llm_conf *conf);

/* ---- Server-Sent Events ------------------------------------------------------ */

/* Called for each complete event: its `event` field ("" when absent)
 * and its data lines joined by "\n". Returns KEEL_OK to go on, or an
 * error (set in `err`) that stops the parser. */
typedef int (*sse_event_fn)(void *ctx, const char *event, const char *data, size_t n,
                            struct keel_error *err);

struct sse_parser {
    struct keel_buf line;       /* the line being read (capped) */
    struct keel_buf data;       /* the event's data so far (capped) */
    char event[64];
    int after_cr;               /* the last byte was CR: a following LF ends nothing */
    sse_event_fn on_event;
    void *ctx;
};

/* Starts a parser with the caps LLM_SSE_LINE_MAX and LLM_SSE_DATA_MAX. */
void sse_init(struct sse_parser *p, sse_event_fn on_event, void *ctx);

/* Feeds bytes in any pieces: lines end with CRLF, LF or CR, a blank line
 * ends an event, lines starting with ':' are comments, "field: value"
 * loses one space after the colon. A line or an event over its cap is
 * KEEL_ETOOBIG; a callback's error is returned as is. */
int sse_feed(struct sse_parser *p, const char *bytes, size_t n, struct keel_error *err);

/* Frees the parser's buffers (an unfinished event is dropped, as the
 * SSE standard says). */
void sse_release(struct sse_parser *p);

/* ---- JSON in a model's text ------------------------------------------------- */

/* The JSON object a model wrote in `text`: the whole text, else inside a
 * ``` fence (```json or plain), else from the first '{' to its matching
 * '}' (strings and escapes respected). *out is a new object. A text with
 * no object, or one that does not parse, is KEEL_EPARSE with the reason;
 * over `max` bytes is KEEL_ETOOBIG. */
int llm_extract_json(const char *text, size_t n, size_t max, json_t **out,
                     struct keel_error *err);

/* ---- calls ------------------------------------------------------------------- */

/* Called with each piece of reply text as it arrives (streaming). */
typedef void (*llm_token_fn)(void *ctx, const char *text, size_t n);

struct llm_reply {
    struct keel_buf text;       /* the reply's text (may be empty) */
    json_t *tool_calls;         /* [{id, name, arguments (the model's text)}] */
    char finish_reason[32];
    int attempts;               /* HTTP attempts made */
    long http_status;           /* of the last attempt; 0: none answered */
    int streamed;               /* some text was passed to on_token */
    long elapsed_ms;
};

struct llm;

/* A client for `conf` (copied). Fails with KEEL_EINVAL when conf has no
 * URL, KEEL_EIO when libcurl cannot start. */
int llm_new(const struct llm_conf *conf, struct llm **out, struct keel_error *err);

void llm_free(struct llm *llm);

/* The settings the client was made with. */
const struct llm_conf *llm_get_conf(const struct llm *llm);

/* Sends `body` (a chat/completions request without "model" and
 * "stream", which are added) and reads the reply into *reply (initialise
 * with llm_reply_init, release with llm_reply_release). With streaming
 * on, each piece of text goes to on_token (may be NULL) as it arrives.
 * Any failure — the circuit open, no connection, a timeout, an HTTP
 * error after the retries, a body that is not the API's JSON, a stream
 * cut short, a reply with neither text nor tool calls — is KEEL_EIO (or
 * KEEL_ETOOBIG for a cap) with a reason a user could act on; *reply then
 * holds what had arrived. Thread-safe. */
int llm_chat(struct llm *llm, const json_t *body, llm_token_fn on_token, void *ctx,
             struct llm_reply *reply, struct keel_error *err);

/* The embedding of `input` from the server's /v1/embeddings (the
 * model of the client's settings), L2-normalised: *out is a new array
 * of *dim floats (free with keel_free). Failures as for llm_chat, and
 * KEEL_EIO when the reply holds no data[0].embedding of numbers. */
#define LLM_EMBED_DIM_MAX 4096
int llm_embed(struct llm *llm, const char *input, float **out, int *dim, struct keel_error *err);

void llm_reply_init(struct llm_reply *reply);
void llm_reply_release(struct llm_reply *reply);

/* The circuit breaker of an upstream (breaker.c). `llm_breaker_allow`
 * returns 1 when a call may go out, else 0 with the seconds until one
 * may in *wait_s; once the cooldown is over, one call (the probe) goes
 * out and the others wait for its outcome. `llm_breaker_record` counts a
 * call's outcome: `threshold` failures in a row open the circuit for
 * `cooldown_ms`, a success closes it. Thread-safe; at most 16 upstreams
 * are tracked (more are never broken). */
int llm_breaker_allow(const char *url, long *wait_s);
void llm_breaker_record(const char *url, int ok, int threshold, long cooldown_ms);

/* Forgets every upstream's failures (tests). */
void llm_breaker_reset(void);

#endif
