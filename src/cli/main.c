/*
 * main.c — the keel binary: process-wide set-up, then one subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/id.h"
#include "core/json.h"
#include "core/log.h"

#define KEEL_VERSION "0.1.0"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"policy", cmd_policy, "policy explain \"MESSAGE\" | shell: show the policy decision and its reasons"},
    {"replay", cmd_replay, "replay PATH…: run replay fixtures and report failures"},
    {"ingest", cmd_ingest, "ingest papers FILE… | docs DIR…: fill the store"},
    {"chat", cmd_chat, "chat [--pack NAME] [--db FILE] [--conversation ID] [--json]: talk to keel"},
    {"serve", cmd_serve, "serve [--listen HOST:PORT] [--db FILE] [--auth keys|none] [--workers N]: the HTTP API and web page"},
    {"keys", cmd_keys, "keys create --user U --role R | list | revoke ID: API keys for keel serve"},
    {"search", cmd_search, "search QUERY [--from Y --to Y --oa --limit N]: ask scholarly providers"},
    {"memory", cmd_memory, "memory add --task T --outcome O | search QUERY | decisions: long-term memory"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: keel <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-8s %s\n", "version", "print the version");
    fprintf(out, "\nRun 'keel <command> --help' for a command's options.\n"
                 "Environment: KEEL_DB names the store (default keel.db; --db overrides it),\n"
                 "KEEL_NOW pins the clock (RFC 3339), KEEL_PACKS names the packs directory,\n"
                 "KEEL_LOG_LEVEL sets the log threshold.\n");
}

int main(int argc, char **argv)
{
    struct keel_error err;

    keel_json_init();
    keel_log_init();
    keel_id_init();
    keel_error_clear(&err);
    if (keel_clock_init(&err)) {
        cli_report(&err);
        return 2;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        printf("keel %s\n", KEEL_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "keel: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
