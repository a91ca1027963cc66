/*
 * phrases.h — a pack's list of phrases read into fixed rows: the command
 * words (handlers.commands), the converter's connectors and "how many"
 * phrases (handlers.convert) and the personal-fact phrases
 * (handlers.personal) all share this one reader. A phrase is stored
 * lower-cased (ASCII), NUL-terminated, in a row of `width` bytes.
 */
#ifndef KEEL_PIPELINE_PHRASES_H
#define KEEL_PIPELINE_PHRASES_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"

/* Reads `list` (absent: none) into rows[0..*n) of `width` bytes each, at most
 * `max` of them; each phrase is 1 to width-1 bytes. On error returns
 * KEEL_EINVAL naming `field`: "must be a list of at most <max> <noun>" or
 * "item <i> must be <item_noun>1 to <width-1> bytes". */
int phrase_list_load(const json_t *list, char *rows, size_t width, int max, int *n,
                     const char *field, const char *noun, const char *item_noun,
                     struct keel_error *err);

#endif
