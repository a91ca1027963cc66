/*
 * sse.c — a Server-Sent Events parser (the WHATWG "event stream"
 * format) fed in arbitrary pieces, with a cap on each line and on each
 * event's data. Only `event` and `data` fields matter to keel; `id`,
 * `retry` and unknown fields are ignored.
 */
#include <string.h>

#include "llm/llm.h"

void sse_init(struct sse_parser *p, sse_event_fn on_event, void *ctx)
{
    memset(p, 0, sizeof(*p));
    keel_buf_init(&p->line, LLM_SSE_LINE_MAX);
    keel_buf_init(&p->data, LLM_SSE_DATA_MAX);
    p->on_event = on_event;
    p->ctx = ctx;
}

void sse_release(struct sse_parser *p)
{
    keel_buf_release(&p->line);
    keel_buf_release(&p->data);
}

/* A blank line: hands over the event when it has data. */
static int dispatch(struct sse_parser *p, struct keel_error *err)
{
    int rc = KEEL_OK;

    if (p->data.len) {
        keel_buf_truncate(&p->data, p->data.len - 1);   /* the last "\n" */
        rc = p->on_event(p->ctx, p->event, p->data.data, p->data.len, err);
    }
    keel_buf_reset(&p->data);
    p->event[0] = '\0';
    return rc;
}

static int field(struct sse_parser *p, const char *line, size_t n, struct keel_error *err)
{
    const char *colon = memchr(line, ':', n);
    size_t name_len = colon ? (size_t)(colon - line) : n;
    const char *value = colon ? colon + 1 : line + n;
    size_t value_len = colon ? n - name_len - 1 : 0;

    if (value_len && *value == ' ') {
        value++;
        value_len--;
    }
    if (name_len == 4 && !memcmp(line, "data", 4)) {
        if (keel_buf_add(&p->data, value, value_len) || keel_buf_addc(&p->data, '\n'))
            return keel_error_set(err, KEEL_ETOOBIG, "stream",
                                  "an event's data is longer than %u bytes", LLM_SSE_DATA_MAX);
    } else if (name_len == 5 && !memcmp(line, "event", 5)) {
        size_t k = value_len < sizeof(p->event) - 1 ? value_len : sizeof(p->event) - 1;
        memcpy(p->event, value, k);
        p->event[k] = '\0';
    }
    return KEEL_OK;
}

static int end_line(struct sse_parser *p, struct keel_error *err)
{
    int rc;

    if (!p->line.len)
        rc = dispatch(p, err);
    else if (p->line.data[0] == ':')
        rc = KEEL_OK;   /* a comment: heartbeats */
    else
        rc = field(p, p->line.data, p->line.len, err);
    keel_buf_reset(&p->line);
    return rc;
}

int sse_feed(struct sse_parser *p, const char *bytes, size_t n, struct keel_error *err)
{
    int rc;

    for (size_t i = 0; i < n; i++) {
        char c = bytes[i];
        if (c == '\n' && p->after_cr) {
            p->after_cr = 0;
            continue;   /* the LF of a CRLF */
        }
        p->after_cr = c == '\r';
        if (c == '\r' || c == '\n') {
            if ((rc = end_line(p, err)))
                return rc;
            continue;
        }
        /* Runs of plain bytes go in at once. */
        size_t k = i;
        while (k < n && bytes[k] != '\r' && bytes[k] != '\n')
            k++;
        if (keel_buf_add(&p->line, bytes + i, k - i))
            return keel_error_set(err, KEEL_ETOOBIG, "stream", "a line is longer than %u bytes",
                                  LLM_SSE_LINE_MAX);
        i = k - 1;
    }
    return KEEL_OK;
}
