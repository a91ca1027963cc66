/*
 * convert_int.h — what the converter's files share (see convert.h): the
 * tokens the parser (convert.c) and the tables' alias normalisation
 * (convert_tables.c) read text as, made by convert_tokens.c. Not for use
 * outside convert*.c.
 */
#ifndef KEEL_PIPELINE_CONVERT_INT_H
#define KEEL_PIPELINE_CONVERT_INT_H

#include <stddef.h>

#include "pipeline/convert.h"

enum tok_kind { TOK_NUM, TOK_WORD, TOK_SYM };

struct tok {
    enum tok_kind kind;
    size_t start, len;
    double value;
    char low[CONVERT_ALIAS_MAX];   /* lower-case text (cut at the cap) */
};

struct toks {
    struct tok t[CONVERT_TOKENS_MAX];
    int n;
    const char *text;
};

/* Splits s[0..n) (at most CONVERT_INPUT_MAX bytes) into at most
 * CONVERT_TOKENS_MAX tokens: numbers, words and currency signs. */
void convert_tokenize(const char *s, size_t n, struct toks *ts);

#endif
