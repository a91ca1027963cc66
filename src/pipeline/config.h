/*
 * config.h — a pack's `pipeline` section compiled for the turn pipeline:
 * the research stage machine, state phrases (research question, topic),
 * jurisdiction slots with their aliases, the path capability registry,
 * retrieval thresholds and the user-facing event texts.
 *
 * Every phrase list becomes one category of a single lexicon, so the
 * pipeline matches all of them against a message in one pass
 * (config_match). See docs/packs.md, "pipeline".
 */
#ifndef KEEL_PIPELINE_CONFIG_H
#define KEEL_PIPELINE_CONFIG_H

#include <jansson.h>

#include "core/error.h"
#include "pack/pack.h"
#include "text/lexicon.h"

#define CONFIG_MAX_SLOTS 8
#define CONFIG_MAX_VALUES 48      /* values of one slot */
#define CONFIG_MAX_PATHS 8
#define CONFIG_STAGE_MAX 32       /* bytes of a stage name */

/* Lexicon categories. Slot s is CCAT_SLOT + s (value = value index);
 * path p is CCAT_PATH + p. */
enum config_category {
    CCAT_RQ_LEAD,       /* "my research question is" */
    CCAT_TOPIC_LEAD,    /* "i'm focusing on" */
    CCAT_AFFIRM,        /* "yes", "that one" */
    CCAT_QSTART,        /* how, what, can … : a real question starts so */
    CCAT_STOPWORD,      /* words that carry no content for retrieval */
    CCAT_SPLIT,         /* "and also", "also": joints between subquestions */
    CCAT_SWITCH,        /* "what about", "how about": the same question, another value */
    CCAT_THANKS,        /* "thanks", "thank you": smalltalk answered with messages.thanks */
    CCAT_SLOT,
    CCAT_PATH = CCAT_SLOT + CONFIG_MAX_SLOTS,
    CCAT_COUNT = CCAT_PATH + CONFIG_MAX_PATHS
};

struct config_slot {
    const char *name;                       /* borrowed from the pack */
    const char *question;                   /* asked when the slot is missing */
    const char *refine;                     /* "for {value}": how a filled value joins a query */
    int depends_on;                         /* slot index, or -1 */
    const char *values[CONFIG_MAX_VALUES];  /* canonical values */
    int n_values;
};

struct config_path {
    const char *name;
    const char *tool;          /* tool the path runs, or NULL */
    const char *unavailable;   /* honest answer when the path cannot run, or NULL */
    json_t *capabilities;      /* borrowed list of strings */
    uint32_t needs;            /* bit s: slot s must be known */
};

struct pipeline_config {
    const struct pack *pack;
    char initial_stage[CONFIG_STAGE_MAX];
    int history_max;
    struct config_slot slots[CONFIG_MAX_SLOTS];
    int n_slots;
    struct config_path paths[CONFIG_MAX_PATHS];
    int n_paths;
    int default_path;
    uint32_t needed_slots;        /* bit s: some path needs slot s (derived) */
    const char *retrieval_tool;   /* may be NULL */
    int top_k;
    double abstain_below;
    double confident_at;
    json_t *events;               /* borrowed: key -> user text */
    json_t *messages;             /* borrowed: key -> answer text, or NULL */
    const char *sample_corpus;    /* folder below the pack, or NULL */
    const char *sample_papers;    /* file below the pack, or NULL */
    struct lexicon lex;
};

/* Compiles `pack`'s `pipeline` section into *cfg (which the caller owns
 * and releases with config_release). A pack without the section gets
 * defaults: stage "exploring", no slots, one default path "conversation".
 * Errors are KEEL_EINVAL naming "file:line: pipeline.…: what", or
 * KEEL_ENOMEM; *cfg is then released. */
int config_load(const struct pack *pack, struct pipeline_config *cfg, struct keel_error *err);

/* Frees what config_load built. */
void config_release(struct pipeline_config *cfg);

/* Tokenizes and matches `text` against every phrase of the config. */
void config_match(const struct pipeline_config *cfg, const char *text, size_t n,
                  struct lex_result *out);

/* Index of slot / path `name`, or -1. */
int config_slot_index(const struct pipeline_config *cfg, const char *name);
int config_path_index(const struct pipeline_config *cfg, const char *name);

/* The pack's answer text `key` (pipeline.messages), else `fallback`. */
const char *config_message(const struct pipeline_config *cfg, const char *key,
                           const char *fallback);

/* The user-facing text for technical event `key` ("resolve.search"), or
 * NULL when users do not see it. */
const char *config_event_text(const struct pipeline_config *cfg, const char *key);

#endif
