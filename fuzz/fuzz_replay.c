/*
 * fuzz_replay.c — the replay fixture reader and expectation checker on
 * arbitrary bytes (JSON values, arrays, JSON lines), output discarded.
 */
#include <stdint.h>

#include "fuzz_common.h"
#include "replay/replay.h"

static struct replay *replay;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    replay = replay_new(fuzz_packs_dir(), fopen("/dev/null", "w"));
    if (!replay)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct replay_stats stats = {0, 0};

    replay_run_text(replay, (const char *)data, size, "fuzz", &stats);
    return 0;
}
