/*
 * phrases.c — reading a pack's phrase list into fixed lower-case rows (see
 * phrases.h). One reader for the handlers' command words, the converter's
 * word lists and the personal-fact phrases.
 */
#include "pipeline/phrases.h"

#include <ctype.h>
#include <string.h>

int phrase_list_load(const json_t *list, char *rows, size_t width, int max, int *n,
                     const char *field, const char *noun, const char *item_noun,
                     struct keel_error *err)
{
    const json_t *w;
    size_t i;

    *n = 0;
    if (!list)
        return KEEL_OK;
    if (!json_is_array(list) || json_array_size(list) > (size_t)max)
        return keel_error_set(err, KEEL_EINVAL, field, "must be a list of at most %d %s", max,
                              noun);
    json_array_foreach(list, i, w) {
        const char *s = json_string_value(w);
        char *row = rows + (size_t)*n * width;
        size_t k;

        if (!s || !*s || strlen(s) >= width)
            return keel_error_set(err, KEEL_EINVAL, field, "item %zu must be %s1 to %d bytes", i,
                                  item_noun, (int)width - 1);
        for (k = 0; s[k]; k++)
            row[k] = (char)tolower((unsigned char)s[k]);
        row[k] = '\0';
        (*n)++;
    }
    return KEEL_OK;
}
