/*
 * handlers.c — the pack's `handlers:` section (see handlers.h):
 *
 *   handlers:
 *     commands: {close: [stop, end, quit, exit], doctor: [memory doctor], help: [help],
 *                reset: [reset]}
 *     convert:  {connectors, how_many, number_words, units, currencies, rates}
 *     personal: {remember, recall, forget, list, same_words, refuse, max_facts}
 *     websearch: {url, timeout_ms, max_bytes, max_results}
 */
#include "pipeline/handlers.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "pipeline/phrases.h"

static int words(const json_t *s, const char *key, char out[][32], int *n,
                 struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];

    keel_json_path_key(field, sizeof(field), "handlers.commands", key);
    return phrase_list_load(json_object_get(s, key), (char *)out, sizeof(out[0]),
                            HANDLERS_COMMAND_WORDS, n, field, "commands", "", err);
}

int handlers_load(const json_t *s, const char *websearch_url, struct handlers **out,
                  struct keel_error *err)
{
    static const char *const keys[] = {"commands", "convert", "personal", "websearch", NULL};
    static const char *const command_keys[] = {"close", "doctor", "help", "reset", NULL};
    const json_t *commands = json_object_get(s, "commands");
    struct handlers *h;
    int rc;

    *out = NULL;
    if (!s)
        return KEEL_OK;
    if (!json_is_object(s))
        return keel_error_set(err, KEEL_EINVAL, "handlers", "must be a mapping");
    if ((rc = keel_json_check_keys(s, keys, "handlers", err)))
        return rc;
    if (commands && (!json_is_object(commands) ||
                     keel_json_check_keys(commands, command_keys, "handlers.commands", err)))
        return err->code ? err->code
                         : keel_error_set(err, KEEL_EINVAL, "handlers.commands",
                                          "must be a mapping");
    if (!(h = keel_calloc(1, sizeof(*h))))
        return keel_error_set(err, KEEL_ENOMEM, "handlers", "out of memory");
    if ((rc = words(commands, "close", h->close, &h->n_close, err)) ||
        (rc = words(commands, "doctor", h->doctor, &h->n_doctor, err)) ||
        (rc = words(commands, "help", h->help, &h->n_help, err)) ||
        (rc = words(commands, "reset", h->reset, &h->n_reset, err)) ||
        (rc = convert_load(json_object_get(s, "convert"), &h->convert, err)) ||
        (rc = personal_load(json_object_get(s, "personal"), &h->personal, err)) ||
        (rc = websearch_conf_load(json_object_get(s, "websearch"), websearch_url, &h->websearch,
                                  err))) {
        keel_free(h);
        return rc;
    }
    *out = h;
    return KEEL_OK;
}

void handlers_free(struct handlers *h)
{
    keel_free(h);
}

static int listed(char list[][32], int n, const char *text)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], text))
            return 1;
    return 0;
}

int handlers_command(const struct handlers *h, const char *text, size_t n)
{
    char word[64];
    size_t k = 0, i = 0;

    while (i < n && (isspace((unsigned char)text[i]) || text[i] == '/'))
        i++;
    for (; i < n && k + 1 < sizeof(word); i++) {
        unsigned char c = (unsigned char)text[i];
        if (isspace(c)) {
            if (k && word[k - 1] != ' ')
                word[k++] = ' ';
        } else if (!strchr(".!?", c)) {
            word[k++] = (char)tolower(c);
        }
    }
    while (k && word[k - 1] == ' ')
        k--;
    word[k] = '\0';
    if (listed((char (*)[32])h->close, h->n_close, word))
        return 'c';
    if (listed((char (*)[32])h->doctor, h->n_doctor, word))
        return 'd';
    if (listed((char (*)[32])h->help, h->n_help, word))
        return 'h';
    if (listed((char (*)[32])h->reset, h->n_reset, word))
        return 'r';
    return 0;
}
