/*
 * artifact.h — seed 001's artifact contracts and facts-only distillation.
 *
 * An artifact is a structured, validated document a turn may produce on
 * top of its answer: a `research_brief` (cited claims over search results),
 * a `doc_extract` (items of documents, each with its section or page) or
 * a `plan` (steps). The room holds the mechanism; the phrase tables and
 * thresholds are the pack's `artifacts:` section (docs/packs.md):
 *
 *   conf.c      the pack section compiled (weights, rules, one lexicon)
 *   gate.c      the intent gate: hard rules, then scored contracts; at
 *               most one artifact per turn, only at or above the threshold
 *   build.c     the three pipelines (research triage, doc intel,
 *               planning) from the turn's envelopes; fail closed
 *   contract.c  the contracts as data: every field, its type and caps
 *   validate.c  the strict validator over those tables
 *   render.c    the markdown rendering
 *   distill.c   facts from cited claims and referenced items only
 *   export.c    the per-conversation JSONL export (sanitised file names)
 *
 * The pipeline's artifact stage (src/pipeline/stage_artifact.c) runs the
 * gate, builds, validates and distils; publish stores the artifact, its
 * facts and the gate's decision in the turn's one transaction and appends
 * the export line after the commit. See docs/artifacts.md.
 */
#ifndef KEEL_ARTIFACT_ARTIFACT_H
#define KEEL_ARTIFACT_ARTIFACT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "pack/pack.h"
#include "text/lexicon.h"

#define ARTIFACT_TYPES 3
#define ARTIFACT_GROUPS_MAX 8        /* phrase groups of one contract */
#define ARTIFACT_ROUTES_MAX 8        /* route names the gate knows (policy routes) */
#define ARTIFACT_JSON_MAX (256u << 10)   /* bytes of one artifact as JSON */
#define ARTIFACT_SNIPPET_MAX 300     /* bytes of a fact's evidence snippet */
#define ARTIFACT_DETAIL_MAX 200
#define ARTIFACT_FACTS_MAX 20        /* facts of one artifact (its claims or items) */

enum artifact_type { ARTIFACT_NONE = -1, ARTIFACT_RESEARCH_BRIEF, ARTIFACT_DOC_EXTRACT, ARTIFACT_PLAN };

/* The static name of a type ("research_brief"), or NULL. */
const char *artifact_type_name(int type);

/* The type of `name`, or ARTIFACT_NONE. */
int artifact_type_from_name(const char *name);

/* ---- the pack's artifacts section (conf.c) -------------------------------- */

struct artifact_group {
    const char *name;          /* borrowed from the pack */
    double weight;             /* added once when any of its phrases occurs */
    int required;              /* a hard rule: no phrase of it, no artifact of this type */
};

struct artifact_contract_conf {
    int enabled;
    int needs_document;        /* hard rule: document chunks in context */
    int needs_sources;         /* hard rule: search results with sources in context */
    double route_weight[ARTIFACT_ROUTES_MAX];   /* added when the turn's route is it */
    struct artifact_group groups[ARTIFACT_GROUPS_MAX];
    int n_groups;
    int min_sources;           /* research_brief: fewer sources fail closed */
    int min_steps;             /* plan: fewer steps fail closed */
    int max_items;             /* claims, items or steps kept */
    const char *fact_store;    /* "verified" | "researched"; NULL: no facts */
    double fact_confidence;
};

struct artifact_conf {
    const struct pack *pack;
    int enabled;               /* the pack has an enabled artifacts section */
    double threshold;          /* a contract needs this confidence (0.75) */
    int min_words;             /* shorter messages get no artifact */
    uint32_t blocked_routes;   /* bit r: route r never gets an artifact */
    const char *route_names[ARTIFACT_ROUTES_MAX];   /* bit/index -> name (static) */
    int n_routes;
    struct artifact_contract_conf contracts[ARTIFACT_TYPES];
    struct lexicon lex;        /* category = type * ARTIFACT_GROUPS_MAX + group */
};

/* Compiles `pack`'s `artifacts:` section into *conf. `routes` names the
 * policy's routes by index (n of them, at most ARTIFACT_ROUTES_MAX; the
 * strings must outlive conf). A pack without the section gets
 * conf->enabled 0 and no artifacts. Errors are KEEL_EINVAL naming
 * "file:line: artifacts.…: what", or KEEL_ENOMEM; *conf is then released. */
int artifact_conf_load(const struct pack *pack, const char *const *routes, int n,
                       struct artifact_conf *conf, struct keel_error *err);

/* Frees what artifact_conf_load built. */
void artifact_conf_release(struct artifact_conf *conf);

/* ---- the intent gate (gate.c) ---------------------------------------------- */

struct artifact_gate_input {
    const char *text;          /* the message as the turn understood it */
    size_t len;
    int route;                 /* index into conf->route_names */
    int smalltalk;             /* the policy saw smalltalk */
    int clarification;         /* the turn asked a question instead of answering */
    int has_document;          /* document chunks are in context */
    int has_sources;           /* search results with sources are in context */
};

struct artifact_gate_candidate {
    double confidence;
    const char *blocked;       /* the hard rule that ruled it out, or NULL */
    uint32_t matched;          /* bit g: group g matched */
    int route_bonus;           /* the route added its weight */
};

struct artifact_gate_result {
    int type;                  /* the contract chosen, or ARTIFACT_NONE */
    double confidence;         /* its confidence, or the best one seen */
    const char *reason;        /* a static code: selected, artifacts_off,
                                * clarification, route_blocked, too_short,
                                * smalltalk, no_candidate, below_threshold */
    char detail[ARTIFACT_DETAIL_MAX];   /* the same for people */
    struct artifact_gate_candidate candidates[ARTIFACT_TYPES];
};

/* Decides whether this turn gets an artifact, and which: the hard rules
 * first (off, clarification, blocked route, too short, smalltalk), then
 * every enabled contract is scored — its route weight plus the weights of
 * its phrase groups that occur — and ruled out by its own hard rules
 * (needs a document, needs sources, a required group missing); the best
 * contract at or above the threshold wins, ties in contract order. Never
 * allocates; the same input gives the same result. */
void artifact_gate(const struct artifact_conf *conf, const struct artifact_gate_input *in,
                   struct artifact_gate_result *out);

/* The gate's result as a new JSON object {intent, confidence, threshold,
 * reason, detail, candidates: [{type, confidence, matched[], blocked}]},
 * or NULL when out of memory. */
json_t *artifact_gate_json(const struct artifact_conf *conf, const struct artifact_gate_result *r);

/* ---- envelopes and the pipelines (build.c) ---------------------------------- */

/* What a turn hands the builders, normalised (seed 001 "envelopes"):
 * SearchEnvelope = answer + sources, DocEnvelope = answer + chunks,
 * LLMEnvelope = answer. Everything is borrowed. */
struct artifact_envelope {
    const char *id;              /* the artifact's id ("art_…") */
    const char *conversation_id;
    const char *correlation_id;
    int turn;
    int64_t now_ms;
    const char *question;        /* redacted: never a patient identifier */
    const char *answer;          /* the plain answer */
    const json_t *sources;       /* [{n, title, url?, year?, venue?, snippet?}] or NULL */
    const json_t *chunks;        /* [{n, document_id, title?, source?, section?, page?,
                                  *   text}] or NULL */
    const char *method;          /* what ran ("search_papers “sleep” 2022–2026"), or NULL */
    int grounded;                /* the answer comes from sources or a model, not only from
                                  * the pack's fixed texts */
    int cited_only;              /* an extractive answer: only its lines citing a source [n]
                                  * are content (the rest are the pack's fixed texts) */
};

/* Builds an artifact of `type` from `env` into *out (a new object of
 * the contract's shape, validated). Fails closed: too few sources, an
 * empty document, an answer with nothing to plan from, too few steps or
 * a result the validator refuses are KEEL_EINVAL with err->field the
 * reason code ("too_few_sources", "empty_document", "no_content",
 * "too_few_steps", "no_claims", "no_question", "invalid") and a message
 * for people; KEEL_ENOMEM when out of memory. Nothing is returned on
 * failure. */
int artifact_build(const struct artifact_conf *conf, int type, const struct artifact_envelope *env,
                   json_t **out, struct keel_error *err);

/* ---- contracts, validation, rendering ---------------------------------------- */

/* Checks `artifact` against its contract, strictly: no unknown key at
 * any level, every required field present with its type, every string
 * non-empty (where required) and within its cap, every list within its
 * bounds, citations and references pointing at sources and documents
 * the artifact has, steps numbered from 1. Returns KEEL_OK, or KEEL_EINVAL
 * with err->field the path of the first bad value
 * ("content.claims[1].citations[0]"). Never changes the artifact. */
int artifact_validate(const json_t *artifact, struct keel_error *err);

/* Appends the markdown rendering of a valid artifact to `out`. Returns
 * KEEL_OK, KEEL_ETOOBIG at the buffer's cap or KEEL_ENOMEM (`out` may
 * then hold part of it). */
int artifact_render(const json_t *artifact, struct keel_buf *out);

/* ---- facts (distill.c) ----------------------------------------------------- */

/* The facts of a valid artifact, as a new array of {id, store, topic,
 * fact, source, confidence, domain, tags[], evidence_snippet}: each cited
 * claim of a research brief, each item of a doc extract that has a
 * section or a page — never anything of a plan or of extra_sections,
 * never an uncited claim. `domain` is the turn's topic class ("science")
 * or NULL (then the pack's name); the tags are the pack and the contract.
 * Empty when the contract writes no facts. NULL when out of memory. */
json_t *artifact_distill(const struct artifact_conf *conf, const json_t *artifact,
                         const char *domain);

/* ---- the JSONL export (export.c) ------------------------------------------- */

#define ARTIFACT_FILE_MAX 160   /* bytes of a sanitised file name */

/* Writes the export file name of `conversation_id` into `out` (at least
 * ARTIFACT_FILE_MAX bytes): only letters, digits, '_' and '-' survive,
 * every other byte becomes '_', and a name that had to change (or was
 * long) ends with a hash of the original so two ids never share a file;
 * then ".jsonl". No name can leave the directory ("..", "/", NUL). */
void artifact_export_name(const char *conversation_id, char *out, size_t n);

/* The default export directory beside a store location: "keel.db" →
 * "keel.artifacts", "sqlite:data/k.db" → "data/k.artifacts", any other
 * file name F → "F.artifacts"; "" (none) for "mem:" or an over-long
 * location. `out` holds at least n bytes. */
void artifact_export_default_dir(const char *db_location, char *out, size_t n);

/* Appends `artifact` as one JSON line to DIR/NAME.jsonl, creating DIR
 * (mode 0700) and the file (0600) when needed; never follows a symbolic
 * link at the file. One write() per line. Returns KEEL_OK, or KEEL_EIO /
 * KEEL_ENOMEM with err naming "artifacts_dir"; a failure leaves at most
 * a partial last line, which readers skip. */
int artifact_export_append(const char *dir, const char *conversation_id, const json_t *artifact,
                           struct keel_error *err);

/* Removes the export file of `conversation_id` under `dir` (a deleted
 * conversation's); nothing when `dir` is NULL or "" or there is no file.
 * Returns KEEL_OK, or KEEL_EIO when the file stays. */
int artifact_export_remove(const char *dir, const char *conversation_id);

#endif
