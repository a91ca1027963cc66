/*
 * bus_frame.c — an event's SSE text, as the bus keeps it and as streams
 * send it ("id: N\nevent: NAME\ndata: JSON\n\n"), and splitting it back
 * into its parts (bus.h).
 */
#include <limits.h>
#include <string.h>

#include "core/buf.h"
#include "server/bus.h"

char *bus_frame(long id, const char *name, const char *data, size_t data_len, size_t *len)
{
    struct keel_buf b;

    keel_buf_init(&b, 0);
    if (keel_buf_grow(&b, data_len + 64) ||
        keel_buf_addf(&b, "id: %ld\nevent: %s\ndata: ", id, name) ||
        keel_buf_add(&b, data, data_len) || keel_buf_add(&b, "\n\n", 2)) {
        keel_buf_release(&b);
        return NULL;
    }
    return keel_buf_detach(&b, len);
}

int bus_frame_parse(const char *frame, size_t len, long *id, char *name, size_t name_n,
                    const char **data, size_t *data_len)
{
    const char *end = frame + len, *p, *nl;
    long v = 0;

    if (len < 5 || strncmp(frame, "id: ", 4))
        return -1;
    /* the number's digits, within `len` (the text need not end in a NUL) */
    for (p = frame + 4; p < end && *p >= '0' && *p <= '9'; p++) {
        if (v > (LONG_MAX - (*p - '0')) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (p == frame + 4 || end - p < 8 || strncmp(p, "\nevent: ", 8))
        return -1;
    *id = v;
    p += 8;
    if (!(nl = memchr(p, '\n', (size_t)(end - p))) || (size_t)(nl - p) >= name_n)
        return -1;
    memcpy(name, p, (size_t)(nl - p));
    name[nl - p] = '\0';
    p = nl + 1;
    if (end - p < 8 || strncmp(p, "data: ", 6) || strncmp(end - 2, "\n\n", 2))
        return -1;
    *data = p + 6;
    *data_len = (size_t)(end - 2 - *data);
    return 0;
}
