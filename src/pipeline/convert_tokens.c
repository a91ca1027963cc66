/*
 * convert_tokens.c — the converter's tokenizer (see convert_int.h): numbers
 * ("1,000.5", "-40", the "5" of "5km"), words (letters, digits after a
 * letter, "/" and "'": "km/h") and the currency signs $ £ € ¥; "°" is
 * ignored. The parser (convert.c) and the tables' alias normalisation
 * (convert_tables.c) both read text through it.
 */
#include "pipeline/convert_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The length of a currency sign at `s` (UTF-8), or 0. */
static size_t sign_len(const unsigned char *s, size_t left)
{
    if (s[0] == '$')
        return 1;
    if (left >= 2 && s[0] == 0xc2 && (s[1] == 0xa3 || s[1] == 0xa5))
        return 2;   /* £ ¥ */
    if (left >= 3 && s[0] == 0xe2 && s[1] == 0x82 && s[2] == 0xac)
        return 3;   /* € */
    return 0;
}

static int is_degree(const unsigned char *s, size_t left)
{
    return left >= 2 && s[0] == 0xc2 && s[1] == 0xb0;
}

static int word_byte(unsigned char c)
{
    return isalpha(c) || c == '/' || c == '\'' || c >= 0x80;
}

static void push(struct toks *ts, enum tok_kind kind, size_t start, size_t len, double value)
{
    struct tok *t;
    size_t k;

    if (ts->n == CONVERT_TOKENS_MAX)
        return;
    t = &ts->t[ts->n++];
    t->kind = kind;
    t->start = start;
    t->len = len;
    t->value = value;
    for (k = 0; k < len && k + 1 < sizeof(t->low); k++)
        t->low[k] = (char)tolower((unsigned char)ts->text[start + k]);
    t->low[k] = '\0';
}

/* A number at s[i]: digits, ","-groups of exactly three digits, one "."
 * with digits after it. Returns its length (0: none) and its value. */
static size_t read_number(const char *s, size_t i, size_t n, double *value)
{
    char digits[48];
    size_t k = i, d = 0;
    int dot = 0;

    if (k < n && s[k] == '-')
        digits[d++] = s[k++];
    if (k >= n || !isdigit((unsigned char)s[k]))
        return 0;
    while (k < n && d + 1 < sizeof(digits)) {
        if (isdigit((unsigned char)s[k])) {
            digits[d++] = s[k++];
        } else if (s[k] == ',' && !dot && k + 3 < n &&
                   isdigit((unsigned char)s[k + 1]) && isdigit((unsigned char)s[k + 2]) &&
                   isdigit((unsigned char)s[k + 3]) &&
                   (k + 4 >= n || !isdigit((unsigned char)s[k + 4]))) {
            k++;   /* a thousands separator */
        } else if (s[k] == '.' && !dot && k + 1 < n && isdigit((unsigned char)s[k + 1])) {
            dot = 1;
            digits[d++] = s[k++];
        } else {
            break;
        }
    }
    while (k < n && isdigit((unsigned char)s[k]))
        k++;   /* digits past the buffer: part of this (absurd) number */
    digits[d] = '\0';
    *value = strtod(digits, NULL);
    return k - i;
}

void convert_tokenize(const char *s, size_t n, struct toks *ts)
{
    size_t i = 0;

    ts->n = 0;
    ts->text = s;
    if (n > CONVERT_INPUT_MAX)
        n = CONVERT_INPUT_MAX;
    while (i < n && ts->n < CONVERT_TOKENS_MAX) {
        const unsigned char *u = (const unsigned char *)s + i;
        size_t len;
        double v;

        if ((len = sign_len(u, n - i))) {
            push(ts, TOK_SYM, i, len, 0);
            i += len;
        } else if (is_degree(u, n - i)) {
            i += 2;
        } else if ((s[i] != '-' || i == 0 || !word_byte((unsigned char)s[i - 1])) &&
                   (len = read_number(s, i, n, &v))) {
            push(ts, TOK_NUM, i, len, v);
            i += len;
        } else if (isalpha(*u) || *u >= 0x80) {
            size_t start = i;
            while (i < n && (word_byte((unsigned char)s[i]) || isdigit((unsigned char)s[i])) &&
                   !sign_len((const unsigned char *)s + i, n - i) &&
                   !is_degree((const unsigned char *)s + i, n - i))
                i++;
            /* A word's trailing apostrophe ("dollars'") is not part of it. */
            len = i - start;
            while (len > 1 && s[start + len - 1] == '\'')
                len--;
            push(ts, TOK_WORD, start, len, 0);
        } else {
            i++;
        }
    }
}
