/*
 * fuzz_sse.c — the SSE parser of the model client (src/llm/sse.c) on
 * arbitrary bytes, as an upstream server could send them. The first three
 * bytes choose where the rest is cut into four feeds; each event's data
 * is then read the way client.c reads a chat.completion.chunk (JSON with
 * a cap, choices[0].delta's content and tool calls, an error object).
 * Each event's data also goes through llm_extract_json (the JSON object
 * in a model's free text). Events whose data starts with '!' make the
 * callback fail, so the
 * parser's stop-on-error path runs too.
 *
 * Checks that the events, and the parser's result, are the same as when
 * the same bytes arrive in one feed; that every event's data is
 * NUL-terminated and holds no CR (a CR always ends a line); that the
 * event name fits its field; and that nothing leaks or overflows.
 */
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "fuzz_common.h"
#include "llm/llm.h"

/* What one parser delivered: a count and a running hash of the events. */
struct seen {
    size_t events;
    uint64_t hash;
    size_t text_bytes;      /* content and arguments found, as client.c would add */
};

static uint64_t mix(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;   /* a separator: "ab"+"c" is not "a"+"bc" */
}

/* client.c's reading of one chunk, minus the reply it builds. */
static void read_chunk(struct seen *s, const json_t *chunk)
{
    const json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
    const json_t *delta = json_object_get(choice, "delta");
    const json_t *calls = json_object_get(delta, "tool_calls"), *call;
    size_t i;

    if (json_object_get(chunk, "error"))
        (void)json_string_value(json_object_get(json_object_get(chunk, "error"), "message"));
    if (json_is_string(json_object_get(delta, "content")))
        s->text_bytes += json_string_length(json_object_get(delta, "content"));
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        const json_t *args = json_object_get(fn, "arguments");
        (void)json_integer_value(json_object_get(call, "index"));
        (void)json_string_value(json_object_get(call, "id"));
        (void)json_string_value(json_object_get(fn, "name"));
        if (json_is_string(args)) {
            s->text_bytes += json_string_length(args);
        } else if (args && !json_is_null(args)) {
            char *text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
            s->text_bytes += text ? strlen(text) : 0;
            keel_free(text);
        }
    }
    (void)json_string_value(json_object_get(choice, "finish_reason"));
}

static int on_event(void *ctx, const char *event, const char *data, size_t n,
                    struct keel_error *err)
{
    struct seen *s = ctx;
    json_t *chunk = NULL;
    struct keel_error perr;

    if (data[n] != '\0' || memchr(data, '\r', n) || strlen(event) >= 64)
        __builtin_trap();
    s->events++;
    s->hash = mix(mix(s->hash, event, strlen(event)), data, n);
    if (n && data[0] == '!')
        return keel_error_set(err, KEEL_EFAIL, "fuzz", "the callback stops here");
    if (n == 6 && !memcmp(data, "[DONE]", 6))
        return KEEL_OK;
    /* Not JSON ends client.c's reading; here the parser goes on, to
     * reach the bytes after it. */
    if (keel_json_parse(data, n, LLM_SSE_DATA_MAX, "stream", &chunk, &perr) == KEEL_OK) {
        read_chunk(s, chunk);
        json_decref(chunk);
    }
    /* The same bytes as a model's free text holding JSON (a plan, a
     * judge's verdict): llm_extract_json finds an object or says why. */
    chunk = NULL;
    keel_error_clear(&perr);
    if (llm_extract_json(data, n, 16u << 10, &chunk, &perr) == KEEL_OK) {
        if (!json_is_object(chunk))
            __builtin_trap();
        json_decref(chunk);
    } else if (!perr.message[0]) {
        __builtin_trap();   /* a failure always says why */
    }
    return KEEL_OK;
}

/* Feeds `data` cut at `cuts` (ascending, n_cuts of them); stops at the
 * first error, which it returns. */
static int run(const char *data, size_t size, const size_t *cuts, size_t n_cuts,
               struct seen *s)
{
    struct sse_parser p;
    struct keel_error err;
    size_t from = 0;
    int rc = KEEL_OK;

    memset(s, 0, sizeof(*s));
    keel_error_clear(&err);
    sse_init(&p, on_event, s);
    for (size_t i = 0; i <= n_cuts && rc == KEEL_OK; i++) {
        size_t to = i < n_cuts ? cuts[i] : size;
        rc = sse_feed(&p, data + from, to - from, &err);
        from = to;
    }
    sse_release(&p);
    if (rc != KEEL_OK && err.code != rc)
        __builtin_trap();   /* an error is always explained */
    return rc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data + 3;
    size_t len, cuts[3];
    struct seen whole, pieces;
    int rc_whole, rc_pieces;

    if (size < 3)
        return 0;
    len = size - 3;
    for (int i = 0; i < 3; i++)
        cuts[i] = len * data[i] / 255;
    /* ascending, as feeds come one after another */
    for (int i = 1; i < 3; i++)
        for (int k = i; k > 0 && cuts[k - 1] > cuts[k]; k--) {
            size_t t = cuts[k];
            cuts[k] = cuts[k - 1];
            cuts[k - 1] = t;
        }
    rc_whole = run(text, len, NULL, 0, &whole);
    rc_pieces = run(text, len, cuts, 3, &pieces);
    if (rc_whole != rc_pieces || whole.events != pieces.events || whole.hash != pieces.hash ||
        whole.text_bytes != pieces.text_bytes)
        __builtin_trap();
    return 0;
}
