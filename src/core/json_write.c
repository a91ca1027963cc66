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
 * tie); strings with `"` `\` and control characters escaped (\b \f \n \r
 * \t, else \u00XX in upper-case hex), everything else as is (UTF-8, `/`);
 * integers in decimal; reals as "%.17g" with ".0" added when there is
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

#include "core/alloc.h"

#define JSON_WRITE_DEPTH 256
#define JSON_WRITE_KEYS 4096

struct key {
    const char *text;
    size_t len;
    json_t *value;
};

static int write_value(struct keel_buf *buf, const json_t *value, int depth);

static int put(struct keel_buf *buf, const char *s, size_t n)
{
    return keel_buf_add(buf, s, n);
}

/* Whether `s` is UTF-8 as jansson checks it (NUL allowed; no overlong
 * forms, surrogates or code points past U+10FFFF). */
static int utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
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
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static int write_string(struct keel_buf *buf, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t start = 0;
    int rc;

    if (!utf8_ok((const unsigned char *)s, n))
        return KEEL_EINVAL;   /* jansson refuses to write it */
    if ((rc = keel_buf_grow(buf, n + 2)) || (rc = keel_buf_addc(buf, '"')))
        return rc;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6];
        size_t len = 2;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if ((rc = put(buf, s + start, i - start)))
            return rc;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            len = 6;
        }
        if ((rc = put(buf, esc, len)))
            return rc;
        start = i + 1;
    }
    if ((rc = put(buf, s + start, n - start)))
        return rc;
    return keel_buf_addc(buf, '"');
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

/* jansson's jsonp_dtostr() at precision 17. */
static int write_real(struct keel_buf *buf, double v)
{
    char text[64];
    int len = snprintf(text, sizeof(text), "%.17g", v);
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

static int write_object(struct keel_buf *buf, const json_t *obj, int depth)
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
        for (; j > 0 && key_before(&k, &keys[j - 1]); j--)
            keys[j] = keys[j - 1];
        keys[j] = k;
    }
    n = i;
    if ((rc = keel_buf_addc(buf, '{')))
        goto out;
    for (i = 0; i < n && !rc; i++) {
        if ((i && (rc = keel_buf_addc(buf, ','))) ||
            (rc = write_string(buf, keys[i].text, keys[i].len)) ||
            (rc = keel_buf_addc(buf, ':')))
            break;
        rc = write_value(buf, keys[i].value, depth + 1);
    }
    if (!rc)
        rc = keel_buf_addc(buf, '}');
out:
    if (keys != stack_keys)
        keel_free(keys);
    return rc;
}

static int write_value(struct keel_buf *buf, const json_t *value, int depth)
{
    int rc;

    if (depth > JSON_WRITE_DEPTH)
        return KEEL_EINVAL;
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        return write_object(buf, value, depth);
    case JSON_ARRAY:
        if ((rc = keel_buf_addc(buf, '[')))
            return rc;
        for (size_t i = 0; i < json_array_size(value); i++)
            if ((i && (rc = keel_buf_addc(buf, ','))) ||
                (rc = write_value(buf, json_array_get(value, i), depth + 1)))
                return rc;
        return keel_buf_addc(buf, ']');
    case JSON_STRING:
        return write_string(buf, json_string_value(value), json_string_length(value));
    case JSON_INTEGER:
        return write_integer(buf, json_integer_value(value));
    case JSON_REAL:
        return write_real(buf, json_real_value(value));
    case JSON_TRUE:
        return put(buf, "true", 4);
    case JSON_FALSE:
        return put(buf, "false", 5);
    case JSON_NULL:
        return put(buf, "null", 4);
    }
    return KEEL_EINVAL;
}

int keel_json_write_compact(struct keel_buf *buf, const json_t *value)
{
    size_t before = buf->len;
    int rc = value ? write_value(buf, value, 0) : KEEL_EINVAL;

    if (rc)
        keel_buf_truncate(buf, before);
    return rc;
}
