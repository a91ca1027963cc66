/*
 * handlers.h — the route handlers of the assistant pack (seed 001 §2):
 * the pack's `handlers:` section compiled once per pipeline, and what a
 * turn runs when the policy routes it to one of them.
 *
 *   command               stop/end/quit close the conversation, "memory
 *                         doctor" reports on the stores, help lists what
 *                         the assistant does — no model, no tool
 *   local_memory_intent   recall_memory / remember_fact / forget_fact on
 *                         the user's personal facts (personal.h)
 *   conversion_tool       convert_units over the pack's tables (convert.h)
 *   websearch             web_search, on the pack's `web` path (resolve)
 *   llm_only              the model, or an honest extractive reply
 *
 * A pack without `handlers:` keeps the pipeline as it was: commands,
 * vetoes and smalltalk answered from pipeline.messages.
 */
#ifndef KEEL_PIPELINE_HANDLERS_H
#define KEEL_PIPELINE_HANDLERS_H

#include <jansson.h>

#include "core/error.h"
#include "pipeline/convert.h"
#include "pipeline/personal.h"
#include "pipeline/websearch.h"
#include "store/store.h"

#define HANDLERS_COMMAND_WORDS 16

struct handlers {
    struct convert_tables convert;
    struct personal_conf personal;
    struct websearch_conf websearch;
    /* command words (lower-case, without a leading "/") */
    char close[HANDLERS_COMMAND_WORDS][32];   /* stop, end, quit, exit */
    int n_close;
    char doctor[HANDLERS_COMMAND_WORDS][32];  /* memory doctor */
    int n_doctor;
    char help[HANDLERS_COMMAND_WORDS][32];    /* help */
    int n_help;
    char reset[HANDLERS_COMMAND_WORDS][32];   /* reset: the client starts a new conversation */
    int n_reset;
};

/* Compiles the pack's `handlers:` section (`section` must outlive *out)
 * with the caller's web-search URL (NULL: the pack's and
 * KEEL_WEBSEARCH_URL). *out is NULL when the pack has no section. */
int handlers_load(const json_t *section, const char *websearch_url, struct handlers **out,
                  struct keel_error *err);

/* Frees what handlers_load made; NULL is a no-op. */
void handlers_free(struct handlers *h);

/* The command a message names: 'c' close, 'd' memory doctor, 'h' help,
 * 'r' reset, 0 another. */
int handlers_command(const struct handlers *h, const char *text, size_t n);

/* One personal-fact change a turn stages for publish (one per turn). */
struct personal_pending {
    int active;
    int remove;
    char user[STORE_PERSONAL_USER_MAX + 1];
    char key[STORE_PERSONAL_KEY_MAX + 1];
    char value[STORE_PERSONAL_VALUE_MAX + 1];
    char kind[8];
};

#endif
