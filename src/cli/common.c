/*
 * common.c — helpers every keel subcommand uses: reporting errors, the
 * clock option, and loading a pack with its policy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/log.h"

void cli_report(const struct keel_error *err)
{
    char text[KEEL_ERROR_FIELD_MAX + KEEL_ERROR_MESSAGE_MAX + 4];

    fprintf(stderr, "keel: %s\n", keel_error_format(err, text, sizeof(text)));
}

int cli_now(const char *now_text, int64_t *out, struct keel_error *err)
{
    if (now_text)
        return keel_time_parse(now_text, strlen(now_text), out, "--now", err);
    *out = keel_clock_now();
    return KEEL_OK;
}

int cli_load_policy(const char *dir, const char *name, struct pack **pack,
                    struct policy **policy, struct keel_error *err)
{
    int rc = pack_load(dir, name, pack, err);

    if (rc)
        return rc;
    rc = policy_new(*pack, policy, err);
    if (rc) {
        pack_free(*pack);
        *pack = NULL;
        return rc;
    }
    keel_log(KEEL_LOG_DEBUG, "pack.loaded",
             json_pack("{s:s,s:s,s:i,s:i}", "pack", (*pack)->name, "file", (*pack)->origin,
                       "tools", (int)(*pack)->n_tools, "roles", (int)(*pack)->n_roles));
    return KEEL_OK;
}

const char *cli_db_location(const char *option)
{
    const char *env = getenv("KEEL_DB");

    if (option)
        return option;
    return env && *env ? env : "keel.db";
}
