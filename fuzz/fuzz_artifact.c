/*
 * fuzz_artifact.c — the artifact validator on arbitrary JSON. Every
 * input either fails to parse, is refused by artifact_validate with a
 * field named, or is valid; a valid artifact must then render to
 * markdown, distil to at most one fact per claim or item (none for a
 * plan), and its conversation id must give an export file name that
 * cannot leave the export directory.
 */
#include <stdint.h>
#include <string.h>

#include "artifact/artifact.h"
#include "fuzz_common.h"

static struct pack *pack;
static struct artifact_conf conf;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *const routes[] = {"command", "local_memory_intent", "conversion_tool",
                                         "websearch", "llm_only"};
    struct keel_error err;

    fuzz_init(argc, argv);
    if (pack_load(fuzz_packs_dir(), "assistant", &pack, &err) ||
        artifact_conf_load(pack, routes, 5, &conf, &err)) {
        fprintf(stderr, "fuzz: cannot load pack assistant: %s: %s\n", err.field, err.message);
        abort();
    }
    return 0;
}

static size_t parts(const json_t *artifact)
{
    const json_t *content = json_object_get(artifact, "content");

    return json_array_size(json_object_get(content, "claims")) +
           json_array_size(json_object_get(content, "items"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct keel_error err;
    struct keel_buf md;
    json_t *artifact = NULL, *facts;
    char name[ARTIFACT_FILE_MAX];

    keel_error_clear(&err);
    if (keel_json_parse((const char *)data, size, 1u << 20, "artifact", &artifact, &err))
        return 0;
    if (artifact_validate(artifact, &err)) {
        if (err.code != KEEL_EINVAL || !err.field[0])
            abort();   /* a refusal always names the field */
        json_decref(artifact);
        return 0;
    }
    keel_buf_init(&md, 16u << 20);
    if (artifact_render(artifact, &md) != KEEL_OK)
        abort();
    keel_buf_release(&md);
    facts = artifact_distill(&conf, artifact, NULL);
    if (!facts || json_array_size(facts) > parts(artifact) ||
        (!strcmp(json_string_value(json_object_get(artifact, "type")), "plan") &&
         json_array_size(facts)))
        abort();
    json_decref(facts);
    artifact_export_name(json_string_value(json_object_get(artifact, "conversation_id")), name,
                         sizeof(name));
    if (strchr(name, '/') || name[0] == '.' || strstr(name, ".."))
        abort();
    json_decref(artifact);
    return 0;
}
