/*
 * fuzz_pack.c — the pack loader (YAML through libyaml into jansson, or
 * JSON) and the policy compiler on arbitrary bytes. The first byte picks
 * the format; a pack that loads has its policy, pipeline and artifacts
 * sections compiled, and everything is freed.
 */
#include <stdint.h>

#include "fuzz_common.h"
#include "artifact/artifact.h"
#include "pipeline/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pack *pack = NULL;
    struct policy *policy = NULL;
    struct keel_error err;

    if (size < 1)
        return 0;
    if (pack_parse((const char *)data + 1, size - 1, (data[0] & 1) ? "fuzz.json" : "fuzz.yaml",
                   &pack, &err) == KEEL_OK) {
        struct pipeline_config cfg;
        if (policy_new(pack, &policy, &err) == KEEL_OK)
            policy_free(policy);
        if (config_load(pack, &cfg, &err) == KEEL_OK)
            config_release(&cfg);
        {
            static const char *const routes[] = {"command", "local_memory_intent",
                                                 "conversion_tool", "websearch", "llm_only"};
            struct artifact_conf conf;
            if (artifact_conf_load(pack, routes, 5, &conf, &err) == KEEL_OK)
                artifact_conf_release(&conf);
        }
        pack_free(pack);
    }
    return 0;
}
