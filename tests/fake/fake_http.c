/*
 * fake_http.c — the scripted test server of fake_http.h.
 */
#include "fake_http.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/file.h"
#include "pack/yaml_json.h"

#define ROUTES_MAX   32
#define REPLIES_MAX  8
#define REQUESTS_MAX 256

struct route {
    char *prefix;
    struct fake_reply replies[REPLIES_MAX];
    size_t n, served;
};

struct request {
    char *uri;
    char *headers;   /* "name: value\n" lines, names lowercased */
};

struct fake_http {
    struct event_base *base;
    struct evhttp *http;
    struct event *tick, *stop;
    pthread_t thread;
    pthread_mutex_t lock;
    struct route routes[ROUTES_MAX];
    size_t n_routes;
    struct request requests[REQUESTS_MAX];
    size_t n_requests;
    FILE *log;
    struct pending *delayed[REQUESTS_MAX];   /* replies waiting for their delay */
};

struct pending {
    struct evhttp_request *req;
    struct fake_reply reply;   /* body and headers: copies owned here */
    struct fake_http *f;
};

static void pending_free(struct pending *p)
{
    if (!p)
        return;
    free((char *)p->reply.body);
    free((char *)p->reply.headers);
    free(p);
}

static char *dup_or_null(const char *s, size_t n)
{
    char *copy;

    if (!s)
        return NULL;
    copy = malloc(n + 1);
    if (copy) {
        memcpy(copy, s, n);
        copy[n] = '\0';
    }
    return copy;
}

/* Forgets a delayed reply that is being sent (loop thread only). */
static void undelay(struct fake_http *f, struct pending *p)
{
    for (size_t i = 0; i < REQUESTS_MAX; i++)
        if (f->delayed[i] == p)
            f->delayed[i] = NULL;
}

static void send_reply(evutil_socket_t fd, short what, void *arg)
{
    struct pending *p = arg;
    struct evkeyvalq *out = evhttp_request_get_output_headers(p->req);
    struct evbuffer *body = evbuffer_new();
    const char *h = p->reply.headers;
    size_t len = p->reply.body ? p->reply.body_len : 0;

    (void)fd;
    (void)what;
    undelay(p->f, p);
    while (h && *h) {
        const char *end = strchr(h, '\n'), *colon = strchr(h, ':');
        size_t n = end ? (size_t)(end - h) : strlen(h);
        if (colon && colon < h + n) {
            char name[128], value[512];
            const char *v = colon + 1;
            snprintf(name, sizeof(name), "%.*s", (int)(colon - h), h);
            while (*v == ' ')
                v++;
            snprintf(value, sizeof(value), "%.*s", (int)(h + n - v), v);
            evhttp_add_header(out, name, value);
        }
        h += n + (end != NULL);
    }
    if (!evhttp_find_header(out, "Content-Type"))
        evhttp_add_header(out, "Content-Type", "application/json");
    if (p->reply.cut) {
        /* Announce more than is sent, then end: the connection closes
         * (Connection: close) with the body short. */
        char announced[32];
        snprintf(announced, sizeof(announced), "%zu", len + 1000);
        evhttp_add_header(out, "Content-Length", announced);
        evhttp_add_header(out, "Connection", "close");
        evhttp_send_reply_start(p->req, p->reply.status, "Cut");
        evbuffer_add(body, p->reply.body, len / 2);
        evhttp_send_reply_chunk(p->req, body);
        evhttp_send_reply_end(p->req);
    } else {
        evbuffer_add(body, p->reply.body ? p->reply.body : "", len);
        evhttp_send_reply(p->req, p->reply.status, "Scripted", body);
    }
    evbuffer_free(body);
    pending_free(p);
}

static void record(struct fake_http *f, struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyval *kv;
    size_t cap = 1;
    char *all, *at;

    if (f->log) {
        fprintf(f->log, "%s\n", evhttp_request_get_uri(req));
        fflush(f->log);
    }
    if (f->n_requests == REQUESTS_MAX)
        return;
    for (kv = in->tqh_first; kv; kv = kv->next.tqe_next)
        cap += strlen(kv->key) + strlen(kv->value) + 3;
    all = at = calloc(1, cap);
    if (all)
        for (kv = in->tqh_first; kv; kv = kv->next.tqe_next) {
            for (const char *k = kv->key; *k; k++)
                *at++ = (char)(*k >= 'A' && *k <= 'Z' ? *k + 32 : *k);
            at += sprintf(at, ": %s\n", kv->value);
        }
    f->requests[f->n_requests].uri = strdup(evhttp_request_get_uri(req));
    f->requests[f->n_requests++].headers = all;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct fake_http *f = arg;
    const char *uri = evhttp_request_get_uri(req);
    struct route *best = NULL;
    struct pending *p = calloc(1, sizeof(*p));

    pthread_mutex_lock(&f->lock);
    record(f, req);
    for (size_t i = 0; i < f->n_routes; i++)
        if (!strncmp(uri, f->routes[i].prefix, strlen(f->routes[i].prefix)))
            best = &f->routes[i];   /* the later route wins */
    if (p && best) {
        size_t k = best->served < best->n ? best->served : best->n - 1;
        p->reply = best->replies[k];
        p->reply.body = dup_or_null(p->reply.body, p->reply.body_len);
        p->reply.headers = dup_or_null(p->reply.headers,
                                       p->reply.headers ? strlen(p->reply.headers) : 0);
        best->served++;
    } else if (p) {
        static const char none[] = "{\"error\": \"no route in the fake server\"}";
        p->reply.status = 404;
        p->reply.body = dup_or_null(none, strlen(none));
        p->reply.body_len = strlen(none);
    }
    pthread_mutex_unlock(&f->lock);
    if (!p) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    p->req = req;
    p->f = f;
    if (p->reply.delay_ms > 0) {
        struct timeval tv = {p->reply.delay_ms / 1000, (p->reply.delay_ms % 1000) * 1000};
        for (size_t i = 0; i < REQUESTS_MAX; i++)
            if (!f->delayed[i]) {
                f->delayed[i] = p;   /* freed at stop if its time never comes */
                break;
            }
        event_base_once(f->base, -1, EV_TIMEOUT, send_reply, p, &tv);
    } else {
        send_reply(-1, 0, p);
    }
}

static void *serve(void *arg)
{
    struct fake_http *f = arg;

    event_base_dispatch(f->base);
    return NULL;
}

static void keep_alive(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* Runs inside the loop: a loopbreak() from another thread before the loop
 * has started would be forgotten, an activated event is not. */
static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

int fake_http_start(struct fake_http **out, int *port)
{
    struct fake_http *f = calloc(1, sizeof(*f));
    struct evhttp_bound_socket *sock;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    struct timeval forever = {3600, 0};

    if (!f || evthread_use_pthreads())
        return -1;
    pthread_mutex_init(&f->lock, NULL);
    if (!(f->base = event_base_new()) || !(f->http = evhttp_new(f->base)))
        return -1;
    evhttp_set_gencb(f->http, on_request, f);
    evhttp_set_timeout(f->http, 30);
    if (!(sock = evhttp_bind_socket_with_handle(f->http, "127.0.0.1", 0)))
        return -1;
    if (getsockname(evhttp_bound_socket_get_fd(sock), (struct sockaddr *)&ss, &len))
        return -1;
    *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    /* A persistent timer keeps the loop alive while no request is open. */
    f->tick = event_new(f->base, -1, EV_PERSIST, keep_alive, NULL);
    f->stop = event_new(f->base, -1, 0, on_stop, f->base);
    if (!f->tick || !f->stop || event_add(f->tick, &forever))
        return -1;
    if (pthread_create(&f->thread, NULL, serve, f))
        return -1;
    *out = f;
    return 0;
}

void fake_http_route(struct fake_http *f, const char *prefix, const struct fake_reply *replies,
                     size_t n)
{
    struct route *r;

    pthread_mutex_lock(&f->lock);
    if (f->n_routes < ROUTES_MAX && n) {
        r = &f->routes[f->n_routes++];
        memset(r, 0, sizeof(*r));
        r->prefix = strdup(prefix);
        r->n = n < REPLIES_MAX ? n : REPLIES_MAX;
        for (size_t i = 0; i < r->n; i++) {
            r->replies[i] = replies[i];
            r->replies[i].body_len = replies[i].body && !replies[i].body_len
                                         ? strlen(replies[i].body) : replies[i].body_len;
            r->replies[i].body = dup_or_null(replies[i].body, r->replies[i].body_len);
            r->replies[i].headers = dup_or_null(replies[i].headers,
                                                replies[i].headers ? strlen(replies[i].headers) : 0);
        }
    }
    pthread_mutex_unlock(&f->lock);
}

void fake_http_log_to(struct fake_http *f, FILE *log)
{
    pthread_mutex_lock(&f->lock);
    f->log = log;
    pthread_mutex_unlock(&f->lock);
}

size_t fake_http_count(struct fake_http *f)
{
    size_t n;

    pthread_mutex_lock(&f->lock);
    n = f->n_requests;
    pthread_mutex_unlock(&f->lock);
    return n;
}

const char *fake_http_uri(struct fake_http *f, size_t i)
{
    const char *uri;

    pthread_mutex_lock(&f->lock);
    uri = i < f->n_requests ? f->requests[i].uri : NULL;
    pthread_mutex_unlock(&f->lock);
    return uri;
}

const char *fake_http_header(struct fake_http *f, size_t i, const char *name)
{
    static __thread char value[512];
    const char *found = NULL;
    size_t n = strlen(name);

    pthread_mutex_lock(&f->lock);
    if (i < f->n_requests && f->requests[i].headers)
        for (const char *line = f->requests[i].headers; *line && !found;) {
            const char *end = strchr(line, '\n');
            if (!strncasecmp(line, name, n) && line[n] == ':') {
                snprintf(value, sizeof(value), "%.*s", (int)(end - line - n - 2), line + n + 2);
                found = value;
            }
            line = end ? end + 1 : line + strlen(line);
        }
    pthread_mutex_unlock(&f->lock);
    return found;
}

static void clear(struct fake_http *f)
{
    for (size_t i = 0; i < f->n_routes; i++) {
        free(f->routes[i].prefix);
        for (size_t k = 0; k < f->routes[i].n; k++) {
            free((char *)f->routes[i].replies[k].body);
            free((char *)f->routes[i].replies[k].headers);
        }
    }
    for (size_t i = 0; i < f->n_requests; i++) {
        free(f->requests[i].uri);
        free(f->requests[i].headers);
    }
    f->n_routes = f->n_requests = 0;
}

void fake_http_reset(struct fake_http *f)
{
    pthread_mutex_lock(&f->lock);
    clear(f);
    pthread_mutex_unlock(&f->lock);
}

void fake_http_stop(struct fake_http *f)
{
    if (!f)
        return;
    event_active(f->stop, EV_TIMEOUT, 0);
    pthread_join(f->thread, NULL);
    for (size_t i = 0; i < REQUESTS_MAX; i++)
        pending_free(f->delayed[i]);
    event_free(f->tick);
    event_free(f->stop);
    evhttp_free(f->http);
    event_base_free(f->base);
    clear(f);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

char *fake_http_cassette_body(const char *path, size_t index, int *status)
{
    struct yaml_limits limits = yaml_default_limits;
    struct keel_error err;
    struct keel_buf text;
    char *body = NULL;
    json_t *doc = NULL, *list, *response, *code;

    limits.max_bytes = 64u << 20;
    limits.max_nodes = 5000000;
    keel_buf_init(&text, limits.max_bytes);
    if (keel_file_read(path, limits.max_bytes, &text, &err) ||
        yaml_json_load(text.data, text.len, path, &limits, &doc, NULL, &err))
        goto out;
    list = json_object_get(doc, "interactions");
    if (!list)
        list = json_object_get(doc, "http_interactions");
    response = json_object_get(json_array_get(list, index), "response");
    code = json_object_get(response, "status");   /* vcr (R): status: 200 */
    if (!json_is_integer(code))
        code = json_object_get(json_object_get(response, "status"), "code");
    if (!code)
        code = json_object_get(response, "status_code");
    if (status)
        *status = (int)json_integer_value(code);
    if (json_is_string(json_object_get(json_object_get(response, "body"), "string")))
        body = strdup(json_string_value(json_object_get(json_object_get(response, "body"), "string")));
    else if (json_is_string(json_object_get(response, "content")))   /* newer httpx cassettes */
        body = strdup(json_string_value(json_object_get(response, "content")));
out:
    json_decref(doc);
    keel_buf_release(&text);
    return body;
}
