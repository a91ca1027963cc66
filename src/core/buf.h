/*
 * buf.h — keel's growable byte buffer (after git's strbuf and curl's dynbuf).
 *
 * Invariants:
 *  - `data` is never NULL and always NUL-terminated: data[len] == '\0'. An
 *    empty buffer points at a shared static "" until the first append.
 *  - The buffer is binary safe: `len` counts bytes, embedded NULs allowed.
 *  - `max` caps `len`; an append that would exceed it fails with
 *    KEEL_ETOOBIG and leaves the buffer unchanged. Every buffer fed by input
 *    is created with a finite cap.
 *  - On any failure the contents are unchanged.
 */
#ifndef KEEL_CORE_BUF_H
#define KEEL_CORE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

struct keel_buf {
    char *data;
    size_t len;
    size_t cap;  /* bytes allocated, 0 while data is the static "" */
    size_t max;  /* largest allowed len */
};

/* Initialises `buf` as empty with cap `max` (0 means SIZE_MAX/2). Never fails. */
void keel_buf_init(struct keel_buf *buf, size_t max);

/* Frees the contents and leaves `buf` empty and reusable. */
void keel_buf_release(struct keel_buf *buf);

/* Empties `buf` but keeps its memory. */
void keel_buf_reset(struct keel_buf *buf);

/* Makes room for `extra` more bytes. KEEL_ETOOBIG over max, KEEL_ENOMEM. */
int keel_buf_grow(struct keel_buf *buf, size_t extra);

/* keel_buf_add when the bytes need more room (or pass max). */
int keel_buf_add_grow(struct keel_buf *buf, const void *data, size_t n);

/* Appends `n` bytes / a C string / one byte / formatted text. Return
 * KEEL_OK, KEEL_ETOOBIG (over max) or KEEL_ENOMEM; unchanged on failure.
 * The first three are inline: JSON writing appends a few bytes at a time,
 * and a call per append was a tenth of the writing. */
static inline int keel_buf_add(struct keel_buf *buf, const void *data, size_t n)
{
    if (n >= buf->cap - buf->len || n > buf->max - buf->len)
        return keel_buf_add_grow(buf, data, n);   /* (cap 0: always) */
    if (n)   /* data may be NULL when n is 0 */
        memcpy(buf->data + buf->len, data, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return 0;
}

static inline int keel_buf_adds(struct keel_buf *buf, const char *s)
{
    return keel_buf_add(buf, s, strlen(s));
}

static inline int keel_buf_addc(struct keel_buf *buf, char c)
{
    if (buf->cap - buf->len < 2 || buf->len >= buf->max)
        return keel_buf_add_grow(buf, &c, 1);
    buf->data[buf->len++] = c;
    buf->data[buf->len] = '\0';
    return 0;
}

int keel_buf_addf(struct keel_buf *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int keel_buf_vaddf(struct keel_buf *buf, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Shortens the buffer to `len` bytes (no-op when already shorter). */
void keel_buf_truncate(struct keel_buf *buf, size_t len);

/* Hands the data to the caller (free with keel_free) and leaves `buf` empty.
 * Returns NULL only when allocating a copy of an empty buffer fails. When
 * `len` is non-NULL it receives the length. */
char *keel_buf_detach(struct keel_buf *buf, size_t *len);

#endif
