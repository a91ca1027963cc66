/*
 * json_write.c — compact JSON text of a jansson value, byte for byte what
 * jansson 2.14's json_dump_callback() writes with JSON_COMPACT |
 * JSON_SORT_KEYS | JSON_ENCODE_ANY, several times faster.
 *
 * Why: a turn stores about 10 KB of JSON (its state, events, sources and
 * decision), and jansson's dumper spends ~100 instructions a byte on it —
 * for every object it prints each child's address into a string to look
 * for cycles, copies and sorts its keys and then looks each one up again,
 * and calls the writer once per token. This writer walks the value once,
 * sorts each object's keys in place (insertion sort: objects are small)
 * and appends straight into the buffer.
 *
 * The same text as jansson: keys sorted by bytes (shorter first on a
 * tie) with JSON_SORT_KEYS, else in insertion order; strings with `"` `\` and control characters escaped (\b \f \n \r
 * \t, else \u00XX in upper-case hex), everything else as is (UTF-8, `/`);
 * integers in decimal; reals as "%.17g" (or the precision asked) with ".0" added when there is
 * neither a point nor an exponent, and the exponent without "+" or
 * leading zeros. What it cannot write exactly it leaves to jansson
 * (KEEL_EINVAL): a string that is not valid UTF-8 (jansson refuses it),
 * nesting deeper than JSON_WRITE_DEPTH (jansson checks for cycles), an
 * object of more than JSON_WRITE_KEYS keys.
 */
#include "core/json_write.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/alloc.h"

#define JSON_WRITE_DEPTH 256
#define JSON_WRITE_KEYS 4096

struct key {
    const char *text;
    size_t len;
    json_t *value;
};

/* What the flags ask for. */
struct how {
    int sort;        /* JSON_SORT_KEYS */
    int precision;   /* of reals: JSON_REAL_PRECISION(n), 17 when 0 */
};

static int write_value(struct keel_buf *buf, const json_t *value, const struct how *how,
                       int depth);

static int put(struct keel_buf *buf, const char *s, size_t n)
{
    return keel_buf_add(buf, s, n);
}

/* Appends one byte: the common case without a call. */
static int put_char(struct keel_buf *buf, char c)
{
    if (buf->len + 1 < buf->cap && buf->len < buf->max) {
        buf->data[buf->len++] = c;
        buf->data[buf->len] = '\0';
        return KEEL_OK;
    }
    return keel_buf_addc(buf, c);
}

/* The length of the UTF-8 sequence at s[0..n) as jansson accepts it (no
 * overlong forms, surrogates or code points past U+10FFFF), or 0. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;

    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* One pass checks the text (NUL is allowed) and counts the bytes its
 * escapes add, skipping plain ASCII sixteen bytes at a time where the
 * CPU has SSE2; a second copies it, escaping, into room made once. */
static int write_string(struct keel_buf *buf, const char *str, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *s = (const unsigned char *)str;
    size_t extra = 0, i = 0, start = 0;
    char *out;
    int rc;

    while (i < n) {
        unsigned char c;
        size_t len;
#ifdef __SSE2__
        /* Sixteen bytes at a time up to the next one that needs a look:
         * a control character or non-ASCII (both below 0x20 as signed
         * bytes), '"' or '\\'. Text is mostly plain ASCII. */
        if (n - i >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            int special = _mm_movemask_epi8(
                _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                             _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                          _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')))));
            if (!special) {
                i += 16;
                continue;
            }
            i += (size_t)__builtin_ctz((unsigned)special);
        }
#endif
        c = s[i];
        if (c >= 0x80) {
            if (!(len = utf8_sequence(s + i, n - i)))
                return KEEL_EINVAL;   /* jansson refuses to write it */
            i += len;
            continue;
        }
        if (c < 0x20)
            extra += strchr("\b\f\n\r\t", c) && c ? 1 : 5;
        else if (c == '"' || c == '\\')
            extra += 1;
        i++;
    }
    if (n > SIZE_MAX / 2 - extra || (rc = keel_buf_grow(buf, n + extra + 2)))
        return n > SIZE_MAX / 2 - extra ? KEEL_ETOOBIG : rc;
    out = buf->data + buf->len;
    *out++ = '"';
    if (!extra) {
        memcpy(out, s, n);
        out += n;
    } else {
        for (i = 0; i < n; i++) {
            unsigned char c = s[i];
            if (c >= 0x20 && c != '"' && c != '\\')
                continue;
            memcpy(out, s + start, i - start);
            out += i - start;
            *out++ = '\\';
            switch (c) {
            case '"': *out++ = '"'; break;
            case '\\': *out++ = '\\'; break;
            case '\b': *out++ = 'b'; break;
            case '\f': *out++ = 'f'; break;
            case '\n': *out++ = 'n'; break;
            case '\r': *out++ = 'r'; break;
            case '\t': *out++ = 't'; break;
            default:
                memcpy(out, "u00", 3);
                out[3] = hex[c >> 4];
                out[4] = hex[c & 15];
                out += 5;
            }
            start = i + 1;
        }
        memcpy(out, s + start, n - start);
        out += n - start;
    }
    *out++ = '"';
    *out = '\0';
    buf->len = (size_t)(out - buf->data);
    return KEEL_OK;
}

static int write_integer(struct keel_buf *buf, json_int_t v)
{
    char digits[24];
    size_t n = sizeof(digits);
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;

    do {
        digits[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        digits[--n] = '-';
    return put(buf, digits + n, sizeof(digits) - n);
}

/* jansson's jsonp_dtostr(). */
static int write_real(struct keel_buf *buf, double v, int precision)
{
    char text[64];
    int len = snprintf(text, sizeof(text), "%.*g", precision, v);
    char *e;

    if (len < 0 || (size_t)len >= sizeof(text) - 3)
        return KEEL_EINVAL;
    for (char *p = text; *p; p++)
        if (*p == ',')
            *p = '.';   /* a locale's decimal comma, as jansson's from_locale() */
    if (!strchr(text, '.') && !strchr(text, 'e')) {
        memcpy(text + len, ".0", 3);
        len += 2;
    }
    if ((e = strchr(text, 'e'))) {
        char *start = e + 1, *end = e + 2;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, (size_t)(text + len + 1 - end));
            len -= (int)(end - start);
        }
    }
    return put(buf, text, (size_t)len);
}

static int key_before(const struct key *a, const struct key *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int order = memcmp(a->text, b->text, n);

    return order ? order < 0 : a->len < b->len;
}

static int write_object(struct keel_buf *buf, const json_t *obj, const struct how *how,
                        int depth)
{
    struct key stack_keys[32], *keys = stack_keys;
    size_t n = json_object_size(obj), i = 0;
    void *iter;
    int rc = KEEL_OK;

    if (n > JSON_WRITE_KEYS)
        return KEEL_EINVAL;
    if (n > sizeof(stack_keys) / sizeof(stack_keys[0]) &&
        !(keys = keel_malloc(n * sizeof(*keys))))
        return KEEL_ENOMEM;
    for (iter = json_object_iter((json_t *)obj); iter && i < n;
         iter = json_object_iter_next((json_t *)obj, iter), i++) {
        struct key k = {json_object_iter_key(iter), json_object_iter_key_len(iter),
                        json_object_iter_value(iter)};
        size_t j = i;
        for (; how->sort && j > 0 && key_before(&k, &keys[j - 1]); j--)
            keys[j] = keys[j - 1];
        keys[j] = k;
    }
    n = i;
    if ((rc = put_char(buf, '{')))
        goto out;
    for (i = 0; i < n && !rc; i++) {
        if ((i && (rc = put_char(buf, ','))) ||
            (rc = write_string(buf, keys[i].text, keys[i].len)) ||
            (rc = put_char(buf, ':')))
            break;
        rc = write_value(buf, keys[i].value, how, depth + 1);
    }
    if (!rc)
        rc = put_char(buf, '}');
out:
    if (keys != stack_keys)
        keel_free(keys);
    return rc;
}

static int write_value(struct keel_buf *buf, const json_t *value, const struct how *how,
                       int depth)
{
    int rc;

    if (depth > JSON_WRITE_DEPTH)
        return KEEL_EINVAL;
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        return write_object(buf, value, how, depth);
    case JSON_ARRAY:
        if ((rc = put_char(buf, '[')))
            return rc;
        for (size_t i = 0; i < json_array_size(value); i++)
            if ((i && (rc = put_char(buf, ','))) ||
                (rc = write_value(buf, json_array_get(value, i), how, depth + 1)))
                return rc;
        return put_char(buf, ']');
    case JSON_STRING:
        return write_string(buf, json_string_value(value), json_string_length(value));
    case JSON_INTEGER:
        return write_integer(buf, json_integer_value(value));
    case JSON_REAL:
        return write_real(buf, json_real_value(value), how->precision);
    case JSON_TRUE:
        return put(buf, "true", 4);
    case JSON_FALSE:
        return put(buf, "false", 5);
    case JSON_NULL:
        return put(buf, "null", 4);
    }
    return KEEL_EINVAL;
}

int keel_json_write(struct keel_buf *buf, const json_t *value, size_t flags)
{
    const size_t known = JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(31) |
                         JSON_ENCODE_ANY | JSON_PRESERVE_ORDER;
    struct how how = {(flags & JSON_SORT_KEYS) != 0, (int)(flags >> 11 & 0x1f)};
    size_t before = buf->len;
    int rc;

    if (!(flags & JSON_COMPACT) || (flags & ~known) || !value)
        return KEEL_EINVAL;   /* indentation, ASCII or slash escapes: jansson's */
    if (!how.precision)
        how.precision = 17;
    if ((rc = write_value(buf, value, &how, 0)))
        keel_buf_truncate(buf, before);
    return rc;
}

int keel_json_write_compact(struct keel_buf *buf, const json_t *value)
{
    return keel_json_write(buf, value, JSON_COMPACT | JSON_SORT_KEYS);
}

int keel_json_write_string(struct keel_buf *buf, const char *s, size_t n)
{
    return write_string(buf, s, n);   /* it writes nothing when it fails */
}
