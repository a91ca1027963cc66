/*
 * scenario.h — a conversation's active scenario (seed 004): one JSON
 * object per conversation, changed by patches.
 *
 * A patch is a JSON object merged into the scenario at the top level;
 * the pack's deep keys (`scenario.deep_keys`, e.g. household) are
 * merged one level deeper, so {"household": {"marital_status":
 * "married"}} changes one field and keeps the rest; a null value
 * removes its key ({"reform": null}). Anything but an object is refused
 * naming "patch", and the whole scenario is capped (`scenario.max_bytes`,
 * 8 KiB by default): a patch that would pass the cap changes nothing.
 *
 * The pack's `scenario.household` section adds the household mechanism
 * (household.h): facts read from messages, a one-line summary and the
 * income-tax calculator. Turn integration is scenario_turn.c.
 */
#ifndef KEEL_PIPELINE_SCENARIO_H
#define KEEL_PIPELINE_SCENARIO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "pack/pack.h"

#define SCENARIO_BYTES_DEFAULT 8192          /* the cap when the pack names none */
#define SCENARIO_BYTES_LIMIT (64u << 10)     /* the most a pack may allow */
#define SCENARIO_DEEP_MAX 8                  /* deep keys of one pack */
#define SCENARIO_SUMMARY_MAX 256             /* bytes of a summary line */

struct household;

struct scenario_conf {
    const char *deep_keys[SCENARIO_DEEP_MAX];   /* borrowed from the pack */
    int n_deep;
    size_t max_bytes;
    struct household *household;                /* owned; NULL: no household tables */
};

/* Compiles `pack`'s `scenario` section (absent: defaults, no household)
 * into *conf. Errors are KEEL_EINVAL naming "file:line: scenario.…", or
 * KEEL_ENOMEM; *conf is then released. The pack must outlive conf. */
int scenario_conf_load(const struct pack *pack, struct scenario_conf *conf,
                       struct keel_error *err);

/* Frees what scenario_conf_load built; safe on a zeroed conf. */
void scenario_conf_release(struct scenario_conf *conf);

/* Merges `patch` into `current` (an object, or NULL: no scenario yet)
 * and returns the result in *out (a new object). The patch must be an
 * object (KEEL_EINVAL "patch"); a deep key's value must be an object or
 * null (KEEL_EINVAL "patch.KEY"); the result must fit max_bytes
 * serialised (KEEL_ETOOBIG "patch"). Nothing is changed on failure;
 * `current` is never modified. */
int scenario_apply(const struct scenario_conf *conf, const json_t *current, const json_t *patch,
                   json_t **out, struct keel_error *err);

/* Checks a whole scenario handed in by a client as a patch is checked:
 * an object within max_bytes whose deep keys hold objects (or null), and
 * with household tables, the household's values (household_check).
 * Errors are KEEL_EINVAL / KEEL_ETOOBIG naming `field` or the value
 * ("active_scenario.household.country"). */
int scenario_check(const struct scenario_conf *conf, const json_t *scenario, const char *field,
                   struct keel_error *err);

/* Parses stored scenario text: NULL text gives *out NULL (no scenario);
 * text that is not a JSON object is KEEL_EIO naming "active_scenario". */
int scenario_parse(const char *text, json_t **out, struct keel_error *err);

/* The scenario as compact JSON text with sorted keys (a new string), or
 * NULL when `scenario` is NULL or memory ran out (*oom set then). */
char *scenario_dump(const json_t *scenario, int *oom);

/* The one-line summary of `scenario` ("Single earner, £45k, Scotland")
 * into `out`; "" when the pack has no household tables or the scenario
 * says nothing they describe. */
void scenario_summary(const struct scenario_conf *conf, const json_t *scenario, char *out,
                      size_t cap);

/* The summary as a JSON string, or JSON null when it is empty (a new
 * reference; NULL when out of memory). */
json_t *scenario_summary_json(const struct scenario_conf *conf, const json_t *scenario);

struct store;

/* Changes conversation `id`'s stored scenario outside a turn: merges
 * `patch` (scenario_apply), or clears it when `patch` is NULL, and
 * writes it in one transaction guarded by the version read, reading
 * again up to three times when a turn wrote in between. `pack` (may be
 * NULL) must be the conversation's. On success *out is the scenario now
 * (a new object, or NULL: none). Errors: those of scenario_apply,
 * KEEL_ENOTFOUND, KEEL_EFAIL (still changing), store errors; nothing is
 * changed then. */
int scenario_store_change(struct store *store, const struct scenario_conf *conf, const char *id,
                          const char *pack, const json_t *patch, json_t **out,
                          struct keel_error *err);

/* A turn's view of the scenario: what it read, what it changed. The
 * tools update_scenario and get_scenario work on it (tool_env), and
 * publish stores it with the turn. */
struct scenario_turn {
    const struct scenario_conf *conf;   /* the pack's */
    json_t *current;                    /* the scenario now (owned), or NULL: none */
    json_t *changes;                    /* this turn's changes [{source, patch|set}] (owned), or NULL */
    int64_t version;                    /* the stored version the turn read */
    int may_write;                      /* the turn's role may change it */
    int changed;                        /* current differs from what was read */
    int facts_ignored;                  /* the message stated facts this role may not apply */
};

/* Applies `patch` (scenario_apply) to st->current and records it as a
 * change from `source` ("message", "tool", …). Errors as
 * scenario_apply, or KEEL_EINVAL ("patch") when st->may_write is 0;
 * st is unchanged on failure. */
int scenario_turn_patch(struct scenario_turn *st, const char *source, const json_t *patch,
                        struct keel_error *err);

/* Replaces st->current by `scenario` (a whole object, checked with
 * scenario_check naming `field`) and records it as a change from
 * `source`; nothing is recorded when it equals the current one. */
int scenario_turn_set(struct scenario_turn *st, const char *source, const json_t *scenario,
                      const char *field, struct keel_error *err);

/* Frees what st owns. */
void scenario_turn_release(struct scenario_turn *st);

#endif
