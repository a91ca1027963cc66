/*
 * extract.c — the JSON object in a model's text. Models asked for JSON
 * often wrap it in a ``` fence or a sentence ("Here is the plan: {…}");
 * this finds the object without guessing at anything else.
 */
#include <string.h>

#include "core/json.h"
#include "llm/llm.h"

/* The end (one past the closing '}') of the object starting at text[0],
 * or 0 when it does not close. */
static size_t object_end(const char *text, size_t n)
{
    int depth = 0, in_string = 0;

    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{') {
            depth++;
        } else if (c == '}' && --depth == 0) {
            return i + 1;
        }
    }
    return 0;
}

static int parse(const char *text, size_t n, size_t max, json_t **out, struct keel_error *err)
{
    json_t *doc = NULL;
    int rc = keel_json_parse(text, n, max, "reply", &doc, err);

    if (rc)
        return rc;
    if (!json_is_object(doc)) {
        json_decref(doc);
        return keel_error_set(err, KEEL_EPARSE, "reply", "the text is JSON but not an object");
    }
    *out = doc;
    return KEEL_OK;
}

int llm_extract_json(const char *text, size_t n, size_t max, json_t **out,
                     struct keel_error *err)
{
    const char *fence = memmem(text, n, "```", 3), *start;
    size_t end;

    if (n > max)
        return keel_error_set(err, KEEL_ETOOBIG, "reply", "is longer than %zu bytes", max);
    while (n && strchr(" \t\r\n", *text))
        text++, n--;
    if (n && *text == '{' && object_end(text, n) == n)
        return parse(text, n, max, out, err);   /* the whole text */
    if (fence) {
        const char *body = fence + 3, *close;
        size_t left = n - (size_t)(body - text);
        const char *nl = memchr(body, '\n', left);
        if (nl)   /* "```json\n" */
            body = nl + 1;
        left = n - (size_t)(body - text);
        if ((close = memmem(body, left, "```", 3)))
            return llm_extract_json(body, (size_t)(close - body), max, out, err);
    }
    if (!(start = memchr(text, '{', n)))
        return keel_error_set(err, KEEL_EPARSE, "reply", "the text holds no JSON object");
    if (!(end = object_end(start, n - (size_t)(start - text))))
        return keel_error_set(err, KEEL_EPARSE, "reply", "the text's JSON object never closes");
    return parse(start, end, max, out, err);
}
