/*
 * common.c — helpers every keel subcommand uses: reporting errors, the
 * clock option, and the store location.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"

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

const char *cli_db_location(const char *option)
{
    const char *env = getenv("KEEL_DB");

    if (option)
        return option;
    return env && *env ? env : "keel.db";
}
