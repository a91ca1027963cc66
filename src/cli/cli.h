/*
 * cli.h — what the subcommands of the keel binary share: option parsing
 * helpers, the clock option, and loading a pack with its policy.
 */
#ifndef KEEL_CLI_CLI_H
#define KEEL_CLI_CLI_H

#include <stdint.h>

#include "core/error.h"
#include "pack/pack.h"
#include "policy/policy.h"

/* Subcommands: each returns the process exit code (0 ok, 1 failure,
 * 2 usage error). */
int cmd_policy(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_keys(int argc, char **argv);
int cmd_memory(int argc, char **argv);

/* The store location: the --db option when given, else $KEEL_DB, else
 * "keel.db" in the current directory. */
const char *cli_db_location(const char *option);

/* Prints "keel: field: message" for err on stderr. */
void cli_report(const struct keel_error *err);

/* Resolves the time for a command: `now_text` (from --now) when given,
 * else the pinned clock (KEEL_NOW) or the system clock. Returns KEEL_OK or
 * KEEL_EPARSE with err naming --now. */
int cli_now(const char *now_text, int64_t *out, struct keel_error *err);


#endif
