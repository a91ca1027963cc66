/*
 * fuzz_turn.c — the turn pipeline on arbitrary input. The first byte
 * picks the target:
 *   even  the stored thread state: the rest is read as JSON and, when it
 *         parses, by state_from_json; a state that reads is written back
 *         and must read again (the round trip is stable).
 *   odd   a conversation: the rest, split at newlines, is up to four
 *         messages of one payer conversation on an in-memory store; each
 *         turn either fails with an error or returns a result, and the
 *         store then holds exactly the turns that succeeded.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "pipeline/pipeline.h"
#include "pipeline/state.h"

static struct pack *pack;
static struct pipeline_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct keel_error err;

    fuzz_init(argc, argv);
    if (pack_load(fuzz_packs_dir(), "payer", &pack, &err) || config_load(pack, &cfg, &err)) {
        fprintf(stderr, "fuzz: cannot load pack payer: %s: %s\n", err.field, err.message);
        abort();
    }
    return 0;
}

static void fuzz_state(const char *text, size_t n)
{
    struct thread_state a, b;
    struct keel_error err;
    json_t *json = NULL, *again = NULL;

    if (keel_json_parse(text, n, 1u << 20, "state", &json, &err))
        return;
    if (state_init(&a, &cfg) == KEEL_OK && state_init(&b, &cfg) == KEEL_OK &&
        state_from_json(&a, &cfg, json, &err) == KEEL_OK) {
        again = state_to_json(&a, &cfg);
        if (again && state_from_json(&b, &cfg, again, &err) != KEEL_OK)
            abort();   /* what keel writes, keel must read */
    }
    json_decref(again);
    json_decref(json);
    state_release(&a);
    state_release(&b);
}

static void fuzz_conversation(const char *text, size_t n)
{
    struct pipeline_options options = {.packs_dir = fuzz_packs_dir(), .pack = "payer",
                                       .llm = {"none", NULL, NULL}, .websearch_url = "none"};
    struct pipeline *pl = NULL;
    struct store *store = NULL;
    struct keel_error err;
    char conversation[160] = "";
    int ok = 0;

    if (store_open("mem:", &store, &err) || (options.store = store, 0) ||
        pipeline_new(&options, &pl, &err)) {
        store_close(store);
        return;
    }
    for (int turn = 0; turn < 4 && n > 0; turn++) {
        const char *nl = memchr(text, '\n', n);
        size_t len = nl ? (size_t)(nl - text) : n;
        struct turn_request req = {.conversation_id = conversation[0] ? conversation : NULL,
                                   .message = text, .message_len = len,
                                   .now_ms = 1770465600000};
        json_t *result = NULL;

        if (pipeline_turn(pl, &req, &result, &err) == KEEL_OK) {
            snprintf(conversation, sizeof(conversation), "%s",
                     json_string_value(json_object_get(result, "conversation_id")));
            ok++;
            json_decref(result);
        }
        text += len + (nl != NULL);
        n -= len + (nl != NULL);
    }
    if (conversation[0]) {
        json_t *turns = NULL;
        if (store_list_turns(store, conversation, &turns, &err) ||
            json_array_size(turns) != (size_t)ok)
            abort();   /* every successful turn is stored, no other */
        json_decref(turns);
    }
    pipeline_free(pl);
    store_close(store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_conversation((const char *)data + 1, size - 1);
    else
        fuzz_state((const char *)data + 1, size - 1);
    return 0;
}
