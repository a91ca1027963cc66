/*
 * fuzz_assistant.c — the assistant pack's parsers on any bytes: the
 * converter (parse, convert, format), the personal-fact reader and the
 * SearxNG body parser. The first byte picks the parser; the rest is the
 * input. Any crash, leak or undefined behaviour is a finding; so is a
 * reading that breaks the reader's own promises (a key or value over its
 * cap, a unit index out of range, a result that is not UTF-8).
 */
#include <stdint.h>
#include <string.h>

#include "core/utf8.h"
#include "fuzz_common.h"
#include "pipeline/handlers.h"

static struct pack *pack;           /* kept for the whole run: the tables borrow its strings */
static struct handlers *handlers;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct keel_error err;

    fuzz_init(argc, argv);
    if (pack_load(fuzz_packs_dir(), "assistant", &pack, &err) ||
        handlers_load(json_object_get(pack->doc, "handlers"), "none", &handlers, &err) ||
        !handlers) {
        fprintf(stderr, "fuzz: cannot load pack assistant: %s: %s\n", err.field, err.message);
        abort();
    }
    return 0;
}

static void fuzz_convert(const char *text, size_t n)
{
    const struct convert_tables *t = &handlers->convert;
    struct convert_request req;
    char out[64];
    double v;

    convert_parse(t, text, n, &req);
    if (req.to >= t->n_units || req.from >= t->n_units || req.n_parts > CONVERT_QUANTITIES_MAX)
        abort();
    for (int i = 0; i < req.n_parts; i++)
        if (req.part_unit[i] < 0 || req.part_unit[i] >= t->n_units)
            abort();
    if (req.status == CONVERT_OK) {
        if (req.from < 0 || req.to < 0)
            abort();
        convert_value(t, &req, &v);
        convert_format(v, t->units[req.to].currency, out, sizeof(out));
        if (!*out)
            abort();
        {
            char grouped[96], small[12];
            convert_group(out, grouped, sizeof(grouped));
            convert_group(out, small, sizeof(small));
            if (strlen(grouped) < strlen(out) || strlen(small) >= sizeof(small))
                abort();   /* grouping only adds commas, and never overruns */
        }
    }
    if (utf8_valid_prefix(req.unknown, strlen(req.unknown)) != strlen(req.unknown) &&
        utf8_valid_prefix(text, n) == n && n < CONVERT_INPUT_MAX)
        abort();   /* a word cut from valid text stays valid */
}

static void fuzz_personal(const char *text, size_t n)
{
    struct personal_request req;
    char copy[PERSONAL_INPUT_MAX + 1], key[STORE_PERSONAL_KEY_MAX + 1];

    /* a key a model names (personal_key) */
    snprintf(copy, sizeof(copy), "%.*s", (int)(n < PERSONAL_INPUT_MAX ? n : PERSONAL_INPUT_MAX),
             text);
    if (personal_key(&handlers->personal, copy, key, sizeof(key)) == 0 &&
        (!key[0] || strlen(key) > STORE_PERSONAL_KEY_MAX))
        abort();
    personal_parse(&handlers->personal, text, n, &req);
    if (strlen(req.key) > STORE_PERSONAL_KEY_MAX || strlen(req.value) > STORE_PERSONAL_VALUE_MAX)
        abort();
    if ((req.op == PERSONAL_SET || req.op == PERSONAL_NOTE || req.op == PERSONAL_GET ||
         req.op == PERSONAL_FORGET) && !req.key[0])
        abort();
    if ((req.op == PERSONAL_SET || req.op == PERSONAL_NOTE) &&
        (!req.value[0] || personal_has_card_number(req.value)))
        abort();
    if (utf8_valid_prefix(text, n) == n &&
        (utf8_valid_prefix(req.key, strlen(req.key)) != strlen(req.key) ||
         utf8_valid_prefix(req.value, strlen(req.value)) != strlen(req.value)))
        abort();   /* valid text in, valid keys and values out */
}

static void fuzz_searx(const char *text, size_t n)
{
    json_t *out = NULL;
    struct keel_error err;

    if (websearch_parse(text, n, 5, &out, &err) == KEEL_OK) {
        json_t *r;
        size_t i;
        if (json_array_size(out) > 5)
            abort();
        json_array_foreach(out, i, r)
            if (strlen(json_string_value(json_object_get(r, "title"))) > WEBSEARCH_TITLE_MAX ||
                strlen(json_string_value(json_object_get(r, "snippet"))) > WEBSEARCH_SNIPPET_MAX)
                abort();
    }
    json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data + 1;

    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: fuzz_convert(text, size - 1); break;
    case 1: fuzz_personal(text, size - 1); break;
    default: fuzz_searx(text, size - 1); break;
    }
    return 0;
}
