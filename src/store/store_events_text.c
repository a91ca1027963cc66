/*
 * store_events_text.c — a turn's events without the correlation id each
 * event repeats (see store_events_text.h).
 *
 * The scan knows three things of JSON: a string runs to the first
 * unescaped quote, objects and arrays nest, and the top-level array
 * separates its elements with commas. That is enough to find where each
 * top-level object starts and ends; whatever lies inside is copied as it
 * is. Only a text of exactly the expected form is compacted, so expanding
 * a compacted text always gives back the original bytes.
 */
#include "store/store_events_text.h"

#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/error.h"

#define KEY "{\"correlation_id\":\""
#define KEY_LEN (sizeof(KEY) - 1)
#define ID_MAX 256   /* a turn id is ~31 bytes; longer ones are kept as they are */

/* The index just past the object that starts at s[i] == '{', or 0 when it
 * does not end within `len` bytes. */
static size_t object_end(const char *s, size_t len, size_t i)
{
    size_t depth = 0;

    for (; i < len; i++) {
        char c = s[i];
        if (c == '"') {
            /* the closing quote: the next one not escaped by an odd run
             * of backslashes (memchr: strings are most of an event) */
            size_t open = i;
            for (;;) {
                const char *q = memchr(s + i + 1, '"', len - i - 1);
                size_t k;
                if (!q)
                    return 0;
                i = (size_t)(q - s);
                for (k = i; k > open + 1 && s[k - 1] == '\\'; k--)
                    ;
                if ((i - k) % 2 == 0)
                    break;
            }
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                return 0;
            if (--depth == 0)
                return c == '}' ? i + 1 : 0;
        }
    }
    return 0;
}

/* The member text `"correlation_id":"ID",` preceded by '{' into `member`
 * (at least KEY_LEN + ID_MAX + 3 bytes); its length, or 0 when the id is
 * too long or needs escaping in JSON. */
static size_t member_text(const char *id, char *member)
{
    size_t n = strlen(id);

    if (n == 0 || n > ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == '"' || id[i] == '\\' ||
            (unsigned char)id[i] >= 0x80)
            return 0;
    memcpy(member, KEY, KEY_LEN);
    memcpy(member + KEY_LEN, id, n);
    memcpy(member + KEY_LEN + n, "\",", 3);
    return KEY_LEN + n + 2;
}

int store_events_id_plain(const char *correlation_id)
{
    char member[KEY_LEN + ID_MAX + 3];

    return member_text(correlation_id, member) != 0;
}

/* Walks the top-level array `s`: for each object, `strip` 1 checks that
 * it begins with `member` and copies it without (but with its '{'),
 * `strip` 0 copies it with `member` in place of its '{'. */
static int rewrite(const char *s, size_t len, const char *id, int strip, size_t max, char **out,
                   size_t *out_len)
{
    char member[KEY_LEN + ID_MAX + 3];
    size_t mlen = member_text(id, member), i = 1;
    struct keel_buf b;
    int rc = KEEL_OK;

    if (!mlen || len < 2 || s[0] != '[' || s[len - 1] != ']')
        return KEEL_EINVAL;
    if (strip && len > 2 && (len < 1 + mlen || memcmp(s + 1, member, mlen)))
        return KEEL_EINVAL;   /* not even the first event: nothing allocated */
    size_t room = strip ? len : len + len / 4;   /* ~50 bytes put back per ~250 */
    keel_buf_init(&b, max);
    if ((rc = keel_buf_grow(&b, room < max ? room : max)) || (rc = keel_buf_addc(&b, '[')))
        goto out;
    if (len == 2)
        goto close;
    for (;;) {
        size_t end, from;
        if (s[i] != '{' || !(end = object_end(s, len, i))) {
            rc = KEEL_EINVAL;
            goto out;
        }
        if (strip) {
            /* the member and at least one more: '{' + member + '"' … */
            if (end - i < mlen + 2 || memcmp(s + i, member, mlen) || s[i + mlen] != '"') {
                rc = KEEL_EINVAL;
                goto out;
            }
            from = i + mlen;
            rc = keel_buf_addc(&b, '{');
        } else {
            if (end - i < 3 || s[i + 1] != '"') {   /* {} or whitespace: not ours */
                rc = KEEL_EINVAL;
                goto out;
            }
            from = i + 1;
            rc = keel_buf_add(&b, member, mlen);
        }
        if (rc || (rc = keel_buf_add(&b, s + from, end - from)))
            goto out;
        i = end;
        if (i == len - 1)
            break;
        if (s[i] != ',' || (rc = keel_buf_addc(&b, ','))) {
            rc = rc ? rc : KEEL_EINVAL;
            goto out;
        }
        i++;
    }
close:
    if ((rc = keel_buf_addc(&b, ']')))
        goto out;
    if (!(*out = keel_buf_detach(&b, out_len)))
        rc = KEEL_ENOMEM;
out:
    keel_buf_release(&b);
    return rc;
}

int store_events_compact(const char *events, size_t len, const char *correlation_id, char **out,
                         size_t *out_len)
{
    return rewrite(events, len, correlation_id, 1, len, out, out_len);
}

int store_events_expand(const char *compact, size_t len, const char *correlation_id, size_t max,
                        char **out, size_t *out_len)
{
    return rewrite(compact, len, correlation_id, 0, max, out, out_len);
}
