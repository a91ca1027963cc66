/*
 * artifact_text.h — text helpers shared by build.c and distill.c
 * (text.c): answers into lines and sentences, citation markers, caps.
 */
#ifndef KEEL_ARTIFACT_TEXT_H
#define KEEL_ARTIFACT_TEXT_H

#include <stddef.h>

#include "artifact/artifact_int.h"

#define ARTIFACT_CITES_MAX 10

/* A line or sentence of an answer, cleaned: without list marks,
 * emphasis and citation markers, whitespace folded; `cites` the marker
 * numbers in order of first appearance. */
struct artifact_piece {
    char text[CONTRACT_TEXT_MAX - 16];
    int cites[ARTIFACT_CITES_MAX];
    int n_cites;
};

/* Cleans `n` bytes of `s` into `piece` (see above); returns the length
 * of piece->text (a longer text is cut). */
size_t artifact_clean(const char *s, size_t n, struct artifact_piece *piece);

/* Copies `n` bytes of `s` into `out` (size `cap`), cut to at most `max`
 * bytes at a word and never inside a UTF-8 sequence, "…" marking a cut. */
void artifact_cut(const char *s, size_t n, size_t max, char *out, size_t cap);

/* The words of `s` (runs of non-space). */
size_t artifact_words(const char *s);

/* The line starting at `s` (its length without the newline in *len), or
 * NULL at the end of the text. The next line starts at s + *len + 1 when
 * s[*len] is a newline. */
const char *artifact_next_line(const char *s, size_t *len);

/* The length of the first sentence of `n` bytes of `s`: up to a . ? or !
 * followed by a space and a capital, a digit, "[" or a quote; else n. */
size_t artifact_sentence(const char *s, size_t n);

#endif
