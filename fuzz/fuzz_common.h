/*
 * fuzz_common.h — what the libFuzzer targets share: the packs directory
 * (KEEL_ROOT/packs, as `make fuzz` sets it) and loading a pack's policy.
 */
#ifndef KEEL_FUZZ_COMMON_H
#define KEEL_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "pack/pack.h"
#include "policy/policy.h"

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points, defined by each target. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Process set-up every target needs: jansson on keel's allocator. */
static inline void fuzz_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    keel_json_init();
}

static inline const char *fuzz_packs_dir(void)
{
    static char dir[4096];
    const char *root = getenv("KEEL_ROOT");

    snprintf(dir, sizeof(dir), "%s/packs", root && *root ? root : ".");
    return dir;
}

/* Loads a pack and its policy or aborts: a fuzz run without packs is void. */
static inline struct policy *fuzz_load_policy(const char *name)
{
    struct pack *pack = NULL;
    struct policy *policy = NULL;
    struct keel_error err;

    if (policy_load(fuzz_packs_dir(), name, &pack, &policy, &err)) {
        fprintf(stderr, "fuzz: cannot load pack %s: %s: %s\n", name, err.field, err.message);
        abort();
    }
    return policy;  /* the pack stays alive for the whole run */
}

#endif
