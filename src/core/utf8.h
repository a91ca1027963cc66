/*
 * utf8.h — UTF-8 validation for text that enters keel from outside.
 */
#ifndef KEEL_CORE_UTF8_H
#define KEEL_CORE_UTF8_H

#include <stddef.h>

/* Returns the length of the longest prefix of `s` (`n` bytes) that is
 * well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF) and contains no NUL byte. Equal to `n` when all of it is. */
size_t utf8_valid_prefix(const char *s, size_t n);

/* Appends `s` (`n` bytes) to `out` with every byte that does not start a
 * well-formed UTF-8 sequence, and every NUL, replaced by U+FFFD. Returns
 * KEEL_OK, KEEL_ENOMEM or KEEL_ETOOBIG (the buffer's cap); on failure
 * `out` is as it was. */
struct keel_buf;
int utf8_repair(const char *s, size_t n, struct keel_buf *out);

/* Makes the NUL-terminated `s` well-formed UTF-8 in place: a sequence
 * cut short at the end (a message truncated mid-character) is dropped,
 * any other byte that starts no well-formed sequence becomes '?'. For
 * texts that hold bytes from outside (an upstream's error page) and go
 * into JSON. */
void utf8_clean(char *s);

#endif
