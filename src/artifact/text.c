/*
 * text.c — the text helpers of the builders and the distiller: an answer
 * cut into lines and sentences, citation markers ("[2]") collected and
 * removed, list marks and emphasis dropped, and texts cut to a cap at a
 * word, never inside a UTF-8 sequence.
 */
#include <ctype.h>
#include <string.h>

#include "artifact/artifact_text.h"

void artifact_cut(const char *s, size_t n, size_t max, char *out, size_t cap)
{
    size_t len = n, o = 0;

    if (max + 4 > cap)
        max = cap > 4 ? cap - 4 : 0;
    if (len > max) {
        len = max;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;   /* not inside a character */
        size_t word = len;
        while (word > max / 2 && s[word] != ' ')
            word--;
        if (word > max / 2)
            len = word;
    }
    memcpy(out, s, len);
    o = len;
    if (len < n && o + 3 < cap) {
        memcpy(out + o, "\u2026", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* A marker "[12]" at `p` (< end): its number, and its length in *len; 0
 * when there is none. */
static int marker(const char *p, const char *end, size_t *len)
{
    int n = 0;
    const char *q = p + 1;

    if (*p != '[')
        return 0;
    while (q < end && isdigit((unsigned char)*q) && n < 1000)
        n = n * 10 + (*q++ - '0');
    if (q == p + 1 || q >= end || *q != ']' || n < 1)
        return 0;
    *len = (size_t)(q - p) + 1;
    return n;
}

size_t artifact_clean(const char *s, size_t n, struct artifact_piece *piece)
{
    const char *p = s, *end = s + n;
    size_t o = 0, mlen;
    int space = 0, m;

    piece->n_cites = 0;
    /* list marks: "12. ", "- ", "* ", "# ", "> " */
    while (p < end && strchr(" \t#>-*", *p))
        p++;
    if (p < end && isdigit((unsigned char)*p)) {
        const char *q = p;
        while (q < end && isdigit((unsigned char)*q))
            q++;
        if (q + 1 < end && (*q == '.' || *q == ')') && q[1] == ' ')
            p = q + 2;
    }
    for (; p < end; p++) {
        if ((m = marker(p, end, &mlen))) {
            int seen = 0;
            for (int i = 0; i < piece->n_cites; i++)
                seen |= piece->cites[i] == m;
            if (!seen && piece->n_cites < ARTIFACT_CITES_MAX)
                piece->cites[piece->n_cites++] = m;
            p += mlen - 1;
            continue;
        }
        if (*p == '*' || *p == '\r')
            continue;   /* emphasis marks */
        if (*p == ' ' || *p == '\t' || *p == '\n') {
            space = o > 0;
            continue;
        }
        if (o + 2 >= sizeof(piece->text))
            break;
        if (space && !(*p == '.' || *p == ',' || *p == ';' || *p == ':'))
            piece->text[o++] = ' ';
        space = 0;
        piece->text[o++] = *p;
    }
    while (o && piece->text[o - 1] == ' ')
        o--;
    piece->text[o] = '\0';
    return o;
}

size_t artifact_words(const char *s)
{
    size_t n = 0;
    int in = 0;

    for (; *s; s++) {
        int w = !isspace((unsigned char)*s);
        n += w && !in;
        in = w;
    }
    return n;
}

const char *artifact_next_line(const char *s, size_t *len)
{
    const char *nl;

    if (!s || !*s)
        return NULL;
    nl = strchr(s, '\n');
    *len = nl ? (size_t)(nl - s) : strlen(s);
    return s;
}

size_t artifact_sentence(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strchr(".?!", s[i]) && i + 2 < n && s[i + 1] == ' ' &&
            (isupper((unsigned char)s[i + 2]) || isdigit((unsigned char)s[i + 2]) ||
             s[i + 2] == '[' || s[i + 2] == '"'))
            return i + 1;
    return n;
}
