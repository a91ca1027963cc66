/*
 * errpage.c — keel's JSON error in place of evhttp's HTML error page.
 *
 * libevent 2.1 refuses some requests itself, before keel sees them: a
 * body over evhttp_set_max_body_size (413), a request line and headers
 * over evhttp_set_max_headers_size or malformed (400). It answers with a
 * fixed HTML page from inside its reader (evhttp_send_error), and 2.1 has
 * no hook for that page (2.2 adds evhttp_set_errorcb); the incoming
 * request is made inside evhttp too, so no header or chunk callback can
 * be set on it early enough either. What keel does own is each
 * connection's bufferevent (evhttp_set_bevcb). evhttp writes a whole
 * response into its output buffer in one call and the socket gets it on a
 * later pass of the loop, so a callback on that buffer sees the page
 * complete before a byte of it is sent. A response whose first two
 * headers are evhttp_send_page_'s own ("Content-Type: text/html",
 * "Connection: close"; keel always names a charset with text/html) is
 * replaced there by {"error": {"code", "message", "field"}}, still with
 * Connection: close — evhttp closes the connection once it is written.
 *
 * evhttp says 400 alike for a header section over its cap and for a
 * malformed one. To tell them apart, each connection counts the bytes
 * evhttp took from its input since its last response began (a table by
 * descriptor, reset when a connection's first bytes arrive and when each
 * response begins): with the bytes still waiting, more than the cap is
 * 431, else 400.
 *
 * The state is the process's (one server per process) and is touched on
 * the loop thread only. Cost per connection: two buffer callbacks and one
 * table slot; per response, a look at its first bytes.
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "server/server_int.h"

static const char page_headers[] = "Content-Type: text/html\r\nConnection: close\r\n";

static struct {
    size_t *taken;             /* per descriptor: input bytes consumed since the last response */
    int n_taken;
    size_t headers_max, body_max;
    struct evbuffer *page;     /* an output buffer whose response began: evhttp's page? */
    size_t page_taken, page_waiting;   /* that request's bytes consumed and still unread */
    int rewriting;
} ep;

void errpage_init(size_t headers_max, size_t body_max)
{
    errpage_release();
    ep.headers_max = headers_max;
    ep.body_max = body_max;
}

void errpage_release(void)
{
    keel_free(ep.taken);
    memset(&ep, 0, sizeof(ep));
}

/* A slot for descriptor fd; 0, or -1 when the table cannot grow. */
static int slot_reserve(int fd)
{
    size_t *grown;
    int n;

    if (fd < 0)
        return -1;
    if (fd < ep.n_taken)
        return 0;
    n = ep.n_taken ? ep.n_taken : 1024;
    while (n <= fd) {
        if (n > INT_MAX / 2)
            return -1;
        n *= 2;
    }
    if (!(grown = keel_realloc(ep.taken, (size_t)n * sizeof(*grown))))
        return -1;
    memset(grown + ep.n_taken, 0, (size_t)(n - ep.n_taken) * sizeof(*grown));
    ep.taken = grown;
    ep.n_taken = n;
    return 0;
}

static void on_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
    intptr_t fd = (intptr_t)arg;

    (void)in;
    if (fd < ep.n_taken)
        ep.taken[fd] += info->n_deleted;
}

int errpage_parse(const char *head, size_t n, char version[9], int *status, size_t *head_len,
                  size_t *body_len)
{
    const char *eol = memmem(head, n, "\r\n", 2), *end, *cl;
    size_t after, want = sizeof(page_headers) - 1;
    char *stop;
    long value;

    if (!eol)
        return n >= ERRPAGE_HEAD_MAX - 1 ? -1 : 0;
    after = n - (size_t)(eol + 2 - head);
    if (memcmp(eol + 2, page_headers, after < want ? after : want))
        return -1;
    if (!(end = memmem(head, n, "\r\n\r\n", 4)))
        return n >= ERRPAGE_HEAD_MAX - 1 ? -1 : 0;
    if (eol - head < 12 || memcmp(head, "HTTP/1.", 7) || head[8] != ' ')
        return -1;
    value = strtol(head + 9, &stop, 10);
    if (stop != head + 12 || value < 100 || value > 599)
        return -1;
    if (!(cl = memmem(head, (size_t)(end - head), "\r\nContent-Length: ", 18)))
        return -1;
    *body_len = (size_t)strtoul(cl + 18, &stop, 10);
    if (stop == cl + 18 || (*stop != '\r'))
        return -1;
    memcpy(version, head, 8);
    version[8] = '\0';
    *status = (int)value;
    *head_len = (size_t)(end + 4 - head);
    return 1;
}

/* The header line `name` of head[0..len) (with its CRLF), or an empty string. */
static void head_line(const char *head, size_t len, const char *name, char *out, size_t n)
{
    size_t nlen = strlen(name);
    const char *p = memmem(head, len, name, nlen), *eol;

    out[0] = '\0';
    if (p && p > head && p[-1] == '\n' && (eol = memmem(p, len - (size_t)(p - head), "\r\n", 2)))
        snprintf(out, n, "%.*s", (int)(eol + 2 - p), p);
}

/* Replaces evhttp's page (the whole of `out`, head_len + its body) by
 * keel's error for the same refusal. */
static void page_replace(struct evbuffer *out, const char *head, size_t head_len,
                         const char *version, int status)
{
    char message[160], date[96], reason[64] = "";
    const char *code, *field = NULL, *eol = memmem(head, head_len, "\r\n", 2);
    json_t *body;
    char *text;

    if (eol - head > 13)
        snprintf(reason, sizeof(reason), "%.*s", (int)(eol - head - 13), head + 13);
    if (status == 413) {
        code = "too_large";
        field = "body";
        snprintf(message, sizeof(message),
                 "the body is larger than %zu bytes, or its chunked encoding is malformed",
                 ep.body_max);
    } else if (status == 400 && ep.page_taken + ep.page_waiting > ep.headers_max) {
        status = 431;
        snprintf(reason, sizeof(reason), "Request Header Fields Too Large");
        code = "too_large";
        field = "headers";
        snprintf(message, sizeof(message),
                 "the request line and headers are larger than %zu bytes", ep.headers_max);
    } else if (status == 400) {
        code = "bad_request";
        field = "headers";
        snprintf(message, sizeof(message),
                 "the request line or a header (Content-Length included) is malformed");
    } else {   /* 417, 501, or evhttp_send_error called by keel itself */
        code = status >= 500 ? "internal" : "bad_request";
        snprintf(message, sizeof(message), "%s", *reason ? reason : "the request was refused");
    }
    body = json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", code, "message", message, "field",
                     field);
    text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return;   /* no memory: evhttp's own page goes out */
    head_line(head, head_len, "Date: ", date, sizeof(date));
    ep.rewriting = 1;
    if (evbuffer_drain(out, evbuffer_get_length(out))) {
        /* a socket bufferevent keeps its output's start frozen between
         * writes and thaws it only to write, as here */
        evbuffer_unfreeze(out, 1);
        evbuffer_drain(out, evbuffer_get_length(out));
        evbuffer_freeze(out, 1);
    }
    evbuffer_add_printf(out,
                        "%s %d %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        "%sContent-Length: %zu\r\n\r\n%s\n",
                        version, status, reason, date, strlen(text) + 1, text);
    ep.rewriting = 0;
    keel_log(KEEL_LOG_INFO, "http.refused",
             json_pack("{s:i, s:s, s:s?}", "status", status, "code", code, "field", field));
    keel_free(text);
}

/* Up to n of the first bytes of `out`. Not evbuffer_copyout: a socket
 * bufferevent keeps its output's start frozen between writes. */
static size_t head_copy(struct evbuffer *out, char *head, size_t n)
{
    struct evbuffer_iovec vec[8];
    int k = evbuffer_peek(out, (ev_ssize_t)n, NULL, vec, 8);
    size_t got = 0;

    for (int i = 0; i < k && i < 8 && got < n; i++) {
        size_t take = vec[i].iov_len < n - got ? vec[i].iov_len : n - got;
        memcpy(head + got, vec[i].iov_base, take);
        got += take;
    }
    return got;
}

static void on_output(struct evbuffer *out, const struct evbuffer_cb_info *info, void *arg)
{
    struct bufferevent *bev = arg;
    char head[ERRPAGE_HEAD_MAX], version[9];
    size_t n, head_len = 0, body_len = 0;
    int status = 0, rc;

    if (ep.rewriting || !info->n_added)
        return;
    if (info->orig_size == 0 && head_copy(out, head, 7) == 7 &&
        !memcmp(head, "HTTP/1.", 7)) {   /* a response begins */
        evutil_socket_t fd = bufferevent_getfd(bev);
        int known = fd >= 0 && fd < ep.n_taken;
        ep.page = out;
        ep.page_taken = known ? ep.taken[fd] : 0;
        ep.page_waiting = evbuffer_get_length(bufferevent_get_input(bev));
        if (known)
            ep.taken[fd] = 0;
    }
    if (ep.page != out)
        return;
    n = head_copy(out, head, sizeof(head) - 1);
    rc = errpage_parse(head, n, version, &status, &head_len, &body_len);
    if (rc < 0)
        ep.page = NULL;
    if (rc <= 0 || evbuffer_get_length(out) < head_len + body_len)
        return;
    ep.page = NULL;
    page_replace(out, head, head_len, version, status);
}

/* A connection's first bytes: its slot starts from zero, and both of its
 * buffers are watched from now on. */
static void on_first_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
    struct bufferevent *bev = arg;
    evutil_socket_t fd = bufferevent_getfd(bev);

    evbuffer_remove_cb(in, on_first_input, bev);   /* safe from inside: the next is kept */
    if (slot_reserve(fd))
        return;   /* unwatched: evhttp's own page would go out */
    ep.taken[fd] = info->n_deleted;
    if (evbuffer_add_cb(in, on_input, (void *)(intptr_t)fd))
        evbuffer_add_cb(bufferevent_get_output(bev), on_output, bev);
}

struct bufferevent *errpage_bufferevent(struct event_base *base, void *arg)
{
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);   /* as evhttp makes it */

    (void)arg;
    if (bev && !evbuffer_add_cb(bufferevent_get_input(bev), on_first_input, bev)) {
        bufferevent_free(bev);
        return NULL;   /* evhttp makes its own */
    }
    return bev;
}
