/*
 * tools.h — the tool registry: every tool keel can run, with its name,
 * JSON schema, access (read|write) and implementation. A pack enables
 * tools by listing them; the pipeline runs only tools that are both in
 * the registry and in the pack, for roles the pack allows, with
 * arguments checked against the schema. Policy arguments override any
 * proposed arguments before the check (see stage_resolve.c).
 *
 *   search_papers   the local paper library, native year and
 *                   open-access filters (store_search_papers); with
 *                   remote providers on, their papers too, merged and
 *                   de-duplicated, and a report per provider
 *                   (result.providers)
 *   rag_search      the document corpus, BM25, each passage with a
 *                   confidence and a band (abstain | caution | confident)
 *                   measured on `focus` (the question without the plan's
 *                   name) when given, else on the query;
 *                   the web fallback runs when the best passage is below
 *                   the abstain threshold and a fallback is configured
 *   add_to_library  (write) saves a paper {title, year, venue, doi, url,
 *                   abstract} to the local library at once
 *
 * The assistant pack's tools (tool_assistant.c):
 *
 *   convert_units   a conversion asked in words ("5 km to miles"), over the
 *                   pack's unit and rate tables
 *   web_search      the web-search port (SearxNG-compatible); not
 *                   configured or failing: a result that says so
 *   recall_memory   the user's personal facts, one by key or all
 *   remember_fact   (write) stages a fact for the turn's publish
 *   forget_fact     (write) stages a fact's removal
 *   update_scenario (write) merges a patch into the turn's active
 *                   scenario (scenario.h); get_scenario reads it
 *   uk_income_tax   income tax, net income and marginal rate of the
 *                   scenario's earners and of a question's income
 *                   (household.h)
 */
#ifndef KEEL_PIPELINE_TOOLS_H
#define KEEL_PIPELINE_TOOLS_H

#include <jansson.h>

#include "core/error.h"
#include "pipeline/config.h"
#include "pipeline/pipeline.h"
#include "providers/providers.h"
#include "store/store.h"

#define TOOL_QUERY_MAX 512

struct handlers;
struct personal_pending;

/* What a tool may reach. */
struct tool_env {
    struct store *store;
    const struct web_fallback *web;     /* may be NULL */
    const struct pipeline_config *cfg;  /* thresholds, stopwords */
    struct providers *providers;        /* remote paper providers; may be NULL */
    const struct handlers *handlers;    /* the pack's route handlers; may be NULL */
    const char *user;                   /* whose personal facts; may be NULL */
    struct personal_pending *pending;   /* where a personal-fact change waits for
                                         * publish; NULL: writes are refused */
    struct scenario_turn *scenario;     /* the turn's active scenario; NULL outside a turn */
};

enum tool_arg_type { ARG_STRING, ARG_INTEGER, ARG_BOOLEAN, ARG_OBJECT };

/* One argument: strings have lengths min..max bytes, integers values
 * min..max; objects are any JSON object (their owner checks them). */
struct tool_arg {
    const char *name;       /* NULL ends a list */
    enum tool_arg_type type;
    int required;
    long long min, max;
    const char *description;
};

struct tool_def {
    const char *name;
    const char *description;
    const struct tool_arg *args;   /* the schema, as data */
    int access;                    /* PACK_READ or PACK_WRITE */
    int (*run)(const struct tool_env *env, const json_t *args, json_t **result,
               struct keel_error *err);
};

/* The assistant pack's tools (tool_assistant.c): `*n` entries. */
const struct tool_def *tools_assistant(size_t *n);
/* The scenario's tools (scenario_tools.c), entries of the registry. */
int tool_update_scenario(const struct tool_env *env, const json_t *args, json_t **result,
                         struct keel_error *err);
int tool_get_scenario(const struct tool_env *env, const json_t *args, json_t **result,
                      struct keel_error *err);
int tool_uk_income_tax(const struct tool_env *env, const json_t *args, json_t **result,
                       struct keel_error *err);

/* The registry entry named `name`, or NULL. */
const struct tool_def *tools_find(const char *name);

/* Checks `args` against the tool's schema: an object, only known
 * properties, required ones present, types, integer bounds and string
 * lengths. KEEL_EINVAL names the argument ("args.count"). */
int tools_check_args(const struct tool_def *tool, const json_t *args, struct keel_error *err);

/* The tool as an OpenAI function tool: {type: "function", function:
 * {name, description, parameters (JSON Schema of its arguments)}}; a new
 * object, or NULL when out of memory. */
json_t *tools_schema_json(const struct tool_def *tool);

/* Checks and runs. On success *result is a new JSON object. */
int tools_run(const struct tool_def *tool, const struct tool_env *env, const json_t *args,
              json_t **result, struct keel_error *err);

/* A text's content words (the config's stopwords left out): `n`
 * distinct ones in word[]/len[] (pointing into buf), `total` with
 * repeats. Made once, measured against many texts. */
struct tool_words {
    char buf[STORE_QUERY_WORDS * 65 + 1];
    const char *word[STORE_QUERY_WORDS];
    size_t len[STORE_QUERY_WORDS];
    size_t n, total;
};

void tools_words_init(struct tool_words *q, const struct pipeline_config *cfg, const char *text);

/* tools_coverage() with the query's words made once. */
double tools_coverage_of(const struct tool_words *q, const char *text);

/* The share of `query`'s content words (stopwords of the config left
 * out) that occur in `text`, from 0 to 1; words match on a common prefix
 * so plurals and inflections count. A query with no content word scores
 * 0. */
double tools_coverage(const struct pipeline_config *cfg, const char *query, const char *text);

/* How many content words (not stopwords) `text` has, up to
 * STORE_QUERY_WORDS. */
int tools_content_words(const struct pipeline_config *cfg, const char *text);

/* The band of a confidence under the config's thresholds. */
const char *tools_band(const struct pipeline_config *cfg, double confidence);

#endif
