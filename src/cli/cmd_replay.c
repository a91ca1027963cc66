/*
 * cmd_replay.c — placeholder until the replay runner lands (same commit).
 */
#include "cli/cli.h"
int cmd_replay(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return 2;
}
