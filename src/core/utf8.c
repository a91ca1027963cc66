/*
 * utf8.c — a strict, table-free UTF-8 validator; where the CPU has SSE2
 * it passes plain ASCII sixteen bytes at a time.
 */
#include "core/utf8.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/buf.h"
#include "core/error.h"

size_t utf8_valid_prefix(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;

    while (i < n) {
        unsigned char c;
        size_t len;
        unsigned char lo = 0x80, hi = 0xbf;  /* bounds for the second byte */

#ifdef __SSE2__
        /* Sixteen ASCII bytes without a NUL at a time: most text. */
        while (n - i >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            if (_mm_movemask_epi8(_mm_or_si128(v, _mm_cmpeq_epi8(v, _mm_setzero_si128()))))
                break;
            i += 16;
        }
        if (i == n)
            break;
#endif
        c = s[i];

        if (c == 0)
            return i;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0)
                lo = 0xa0;       /* no overlongs */
            else if (c == 0xed)
                hi = 0x9f;       /* no surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;       /* at most U+10FFFF */
        } else {
            return i;
        }
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xbf)
                return i;
        i += len;
    }
    return n;
}

int utf8_repair(const char *s, size_t n, struct keel_buf *out)
{
    size_t before = out->len, i = 0;
    int rc = KEEL_OK;

    while (i < n && !rc) {
        size_t valid = utf8_valid_prefix(s + i, n - i);
        rc = keel_buf_add(out, s + i, valid);
        i += valid;
        if (i < n && !rc) {
            rc = keel_buf_add(out, "\xef\xbf\xbd", 3);  /* U+FFFD for the bad byte */
            i++;
        }
    }
    if (rc)
        keel_buf_truncate(out, before);
    return rc;
}

void utf8_clean(char *s)
{
    size_t n = strlen(s), at = 0;

    while (at < n) {
        at += utf8_valid_prefix(s + at, n - at);
        if (at == n)
            break;
        /* An incomplete sequence at the very end: a cut, not garbage. */
        size_t rest = n - at, need = (unsigned char)s[at] >= 0xf0 ? 4
                                   : (unsigned char)s[at] >= 0xe0 ? 3
                                   : (unsigned char)s[at] >= 0xc2 ? 2 : 0;
        int cut = need && rest < need;
        for (size_t k = 1; cut && k < rest; k++)
            cut = ((unsigned char)s[at + k] & 0xc0) == 0x80;
        if (cut) {
            s[at] = '\0';
            return;
        }
        s[at++] = '?';
    }
}
