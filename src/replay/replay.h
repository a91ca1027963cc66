/*
 * replay.h — the replay harness: JSON fixtures of conversations with the
 * decisions each turn must produce, run against the real policy.
 *
 * A fixture file holds one case, an array of cases, or JSON lines. A case:
 *   {"name", "pack", "now"?, "role"?, "context"?: {"topic_hint", "tools"},
 *    "pipeline"?, "notes"?, "turns": [{"user", "context"?, "expect": {…}}]}
 * Only keys present in `expect` are checked; null means "must be null";
 * an unknown key anywhere is a fixture error, never ignored. The expect
 * keys are tables in expect.c: adding one is adding a row.
 *
 * A case with "pipeline": true runs its turns as one conversation through
 * pipeline_turn() over a fresh in-memory store holding the pack's sample
 * data, and may also check the turn result (stage, answer, state, events,
 * …). It takes no `context`: the topic comes from the conversation.
 */
#ifndef KEEL_REPLAY_REPLAY_H
#define KEEL_REPLAY_REPLAY_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

#define REPLAY_FILE_MAX (16u << 20)

struct replay_stats {
    int passed;   /* cases whose every turn met every expectation */
    int failed;   /* cases with a mismatch or a fixture error */
};

struct replay;

/* Creates a runner that loads packs from `packs_dir` (NULL: the default)
 * and prints failures to `out`. NULL when out of memory. */
struct replay *replay_new(const char *packs_dir, FILE *out);

/* Frees the runner and the packs it loaded. NULL is a no-op. */
void replay_free(struct replay *replay);

/* Runs a fixture file, or every *.json / *.jsonl under a directory (in
 * name order). Case results go into `stats`; a file or directory that
 * cannot be read is printed, counts as one failed case and is returned as
 * an error with err set. A path holding no cases adds nothing to `stats`:
 * callers treat a run of zero cases as a failure. */
int replay_run_path(struct replay *replay, const char *path, struct replay_stats *stats,
                    struct keel_error *err);

/* Runs the fixtures in `n` bytes of text; `origin` names them in output. */
void replay_run_text(struct replay *replay, const char *text, size_t n, const char *origin,
                     struct replay_stats *stats);

#endif
