/*
 * cmd_replay.c — `keel replay PATH…`: run replay fixtures, print each
 * failure and end with "N passed, N failed"; exit 1 on any failure.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "replay/replay.h"

static void replay_usage(FILE *out)
{
    fprintf(out,
            "usage: keel replay [--packs DIR] PATH…\n\n"
            "Runs replay fixtures (files, or folders of *.json / *.jsonl) and prints every\n"
            "failure as case, field, expected, actual. Ends with \"N passed, N failed\" and\n"
            "exits 1 when any case failed or no case was found. A case without \"now\"\n"
            "uses KEEL_NOW.\n");
}

int cmd_replay(int argc, char **argv)
{
    static const struct option options[] = {
        {"packs", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *packs_dir = NULL;
    struct replay_stats stats = {0, 0};
    struct replay *replay;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'P': packs_dir = optarg; break;
        case 'h': replay_usage(stdout); return 0;
        default: replay_usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        replay_usage(stderr);
        return 2;
    }
    replay = replay_new(packs_dir, stdout);
    if (!replay) {
        fprintf(stderr, "keel: out of memory\n");
        return 1;
    }
    for (int i = optind; i < argc; i++) {
        struct keel_error err;
        keel_error_clear(&err);
        replay_run_path(replay, argv[i], &stats, &err);
    }
    replay_free(replay);
    if (stats.passed + stats.failed == 0) {
        /* A renamed or emptied fixture folder must not pass silently. */
        printf("ERROR no replay cases found\n");
        stats.failed = 1;
    }
    printf("%d passed, %d failed\n", stats.passed, stats.failed);
    return stats.failed ? 1 : 0;
}
