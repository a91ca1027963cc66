/*
 * buf.c — growable, capped, always-terminated byte buffer.
 */
#include "core/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

static char empty_data[1];

void keel_buf_init(struct keel_buf *buf, size_t max)
{
    buf->data = empty_data;
    buf->len = 0;
    buf->cap = 0;
    buf->max = max ? max : SIZE_MAX / 2;
}

void keel_buf_release(struct keel_buf *buf)
{
    if (buf->cap)
        keel_free(buf->data);
    buf->data = empty_data;
    buf->len = 0;
    buf->cap = 0;
}

void keel_buf_reset(struct keel_buf *buf)
{
    buf->len = 0;
    buf->data[0] = '\0';
}

int keel_buf_grow(struct keel_buf *buf, size_t extra)
{
    size_t need, cap;
    char *data;

    if (extra > buf->max || buf->len > buf->max - extra)
        return KEEL_ETOOBIG;
    need = buf->len + extra + 1;
    if (need <= buf->cap)
        return KEEL_OK;
    cap = buf->cap ? buf->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    data = buf->cap ? keel_realloc(buf->data, cap) : keel_malloc(cap);
    if (!data)
        return KEEL_ENOMEM;
    if (!buf->cap)
        data[0] = '\0';
    buf->data = data;
    buf->cap = cap;
    return KEEL_OK;
}

int keel_buf_add_grow(struct keel_buf *buf, const void *data, size_t n)
{
    int rc = keel_buf_grow(buf, n);

    if (rc)
        return rc;
    if (n)
        memcpy(buf->data + buf->len, data, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return KEEL_OK;
}

int keel_buf_vaddf(struct keel_buf *buf, const char *fmt, va_list ap)
{
    va_list copy;
    int n, rc;

    va_copy(copy, ap);
    n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return KEEL_EINVAL;
    rc = keel_buf_grow(buf, (size_t)n);
    if (rc)
        return rc;
    vsnprintf(buf->data + buf->len, (size_t)n + 1, fmt, ap);
    buf->len += (size_t)n;
    return KEEL_OK;
}

int keel_buf_addf(struct keel_buf *buf, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = keel_buf_vaddf(buf, fmt, ap);
    va_end(ap);
    return rc;
}

void keel_buf_truncate(struct keel_buf *buf, size_t len)
{
    if (len >= buf->len)
        return;
    buf->len = len;
    buf->data[len] = '\0';
}

char *keel_buf_detach(struct keel_buf *buf, size_t *len)
{
    char *data;

    if (len)
        *len = buf->len;
    if (!buf->cap) {
        data = keel_malloc(1);
        if (data)
            data[0] = '\0';
        return data;
    }
    data = buf->data;
    buf->data = empty_data;
    buf->len = 0;
    buf->cap = 0;
    return data;
}
