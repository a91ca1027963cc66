/*
 * fake_http.h — a scripted HTTP server for tests (libevent's evhttp on a
 * thread of its own), never linked into keel itself.
 *
 * A test adds routes: a path prefix and a list of replies; the k-th
 * request to a route gets reply k (the last one repeats). A reply has a
 * status, extra header lines, a body, an optional delay before answering
 * and an optional cut: a Content-Length longer than the body, half the
 * body, then the connection closes. Every request's URI (path and query) and its headers
 * are recorded, so a test can assert exactly what keel asked for.
 * Recorded cassettes (VCR YAML of the shared data) give real bodies:
 * fake_http_cassette_body() reads one interaction's response.
 */
#ifndef KEEL_TESTS_FAKE_HTTP_H
#define KEEL_TESTS_FAKE_HTTP_H

#include <stddef.h>
#include <stdio.h>

struct fake_reply {
    int status;
    const char *headers;     /* "Retry-After: 1\n…", may be NULL */
    const char *body;        /* may be NULL: empty */
    size_t body_len;         /* 0: strlen(body) */
    int delay_ms;
    int cut;                 /* send part of the body, then drop the connection */
};

struct fake_http;

/* Starts on 127.0.0.1 with a free port (*port). 0, or -1 on failure. */
int fake_http_start(struct fake_http **out, int *port);

/* Adds a route for URIs whose path starts with `prefix`; the replies are
 * copied. Routes added later win over earlier ones with the same prefix. */
void fake_http_route(struct fake_http *f, const char *prefix, const struct fake_reply *replies,
                     size_t n);

/* How many requests arrived, and the URI and the value of header `name`
 * (NULL when absent) of request `i`. Strings live until reset or stop. */
size_t fake_http_count(struct fake_http *f);
const char *fake_http_uri(struct fake_http *f, size_t i);
const char *fake_http_header(struct fake_http *f, size_t i, const char *name);

/* Appends each request's URI to `log` (flushed) as it arrives; NULL stops. */
void fake_http_log_to(struct fake_http *f, FILE *log);

/* Forgets recorded requests and routes. */
void fake_http_reset(struct fake_http *f);

void fake_http_stop(struct fake_http *f);

/* The response body and status of interaction `index` of the cassette
 * at `path` (VCR: interactions[], vcr R: http_interactions[]; the body in
 * response.body.string or response.content). Returns a
 * malloc'd body, or NULL (file missing or not a cassette). */
char *fake_http_cassette_body(const char *path, size_t index, int *status);

#endif
