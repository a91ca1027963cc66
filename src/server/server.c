/*
 * server.c — `keel serve`: options, the event loop, wake-ups from the
 * workers, heartbeats, and a graceful stop on SIGTERM/SIGINT (stop
 * accepting, let the accepted turns finish and their streams end, then
 * return).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "core/alloc.h"
#include "llm/llm.h"
#include "memory/memory.h"
#include "core/clock.h"
#include "core/log.h"
#include "pack/pack.h"
#include "pipeline/pipeline.h"
#include "server/server_int.h"

#define BUS_KEEP_MS (10 * 60 * 1000)

/* Wakes the loop from any thread (evthread makes event_active safe).
 * A turn's events concern only streams; its end also ?wait=1 waiters.
 * A wake-up is a write to an eventfd that makes the kernel wake the
 * loop's thread on the other core, ~9% of a worker's time per turn over
 * HTTP; a loop that is running needs none, as it looks at the bus before
 * it waits again (serve_loop). So while no stream is open a turn's end
 * wakes the loop only when the loop may be asleep, and only one worker
 * wakes it for several turns that end meanwhile. */
static void notify(void *arg, int ended)
{
    struct server *srv = arg;

    if (atomic_load(&srv->streams_open) || (ended && atomic_exchange(&srv->loop_asleep, 0)))
        event_active(srv->wake, EV_READ, 0);
}

/* The event loop, one pass of libevent's at a time: before each pass
 * may wait, loop_asleep says so to the workers, and the waiters hear of
 * every turn that ended while the loop was running (its end woke no
 * one). The order matters: a worker ends its turn on the bus and then
 * looks at loop_asleep; the loop sets loop_asleep and then looks at the
 * bus, so one of the two sees the other. route_request clears the flag
 * while the loop handles a request. */
static void serve_loop(struct server *srv)
{
    for (;;) {
        atomic_store(&srv->loop_asleep, 1);
        waiters_pump(srv);
        if (event_base_loop(srv->base, EVLOOP_ONCE) || event_base_got_exit(srv->base) ||
            event_base_got_break(srv->base))
            break;
    }
}

/* The loop's event base. With epoll, changes to a socket's events
 * (evhttp turns reading and writing on and off several times per request)
 * are collected and made once per loop pass, not a syscall each: ~4
 * epoll_ctl per request fewer, a few percent of a turn over HTTP.
 * libevent's caveat for the changelist (descriptors shared by dup()) does
 * not apply: the server dups none. */
static struct event_base *loop_base_new(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base;

    if (!cfg)
        return NULL;
    event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    streams_pump(arg);
}

static void on_heartbeat(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;

    (void)fd;
    (void)what;
    streams_heartbeat(srv);
    bus_expire(srv->bus, keel_clock_now());
}

/* While draining: done once no turn is queued or running. */
static void on_drain(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;

    /* Every turn ended before the pump, so the pump answers each waiter: a
     * turn that ends after a pump may wake no one (loop_asleep). */
    int ended = !queue_depth(srv->queue) && !bus_open_turns(srv->bus);

    (void)fd;
    (void)what;
    streams_pump(srv);
    if (ended && !streams_pending(srv))
        event_base_loopexit(srv->base, NULL);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct server *srv = arg;
    struct timeval tick = {0, 100000};

    (void)what;
    if (srv->draining)
        return;
    keel_log(KEEL_LOG_INFO, "server.stopping",
             json_pack("{s:i, s:I}", "signal", (int)sig, "queued",
                       (json_int_t)queue_depth(srv->queue)));
    srv->draining = 1;
    if (srv->socket) {
        evhttp_del_accept_socket(srv->http, srv->socket);
        srv->socket = NULL;
    }
    queue_close(srv->queue);   /* workers finish what was accepted */
    srv->drain = event_new(srv->base, -1, EV_PERSIST, on_drain, srv);
    if (srv->drain)
        event_add(srv->drain, &tick);
    else
        event_base_loopexit(srv->base, NULL);
}

/* "HOST:PORT" into its parts; the host must be an IPv4 address. */
static int parse_listen(const char *listen, char *host, size_t n, int *port,
                        struct keel_error *err)
{
    const char *colon = strrchr(listen, ':');
    struct in_addr addr;
    char *end;
    long p;

    if (!colon || (size_t)(colon - listen) >= n)
        return keel_error_set(err, KEEL_EINVAL, "listen", "must be HOST:PORT, got \"%s\"", listen);
    snprintf(host, n, "%.*s", (int)(colon - listen), listen);
    p = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || p < 0 || p > 65535)
        return keel_error_set(err, KEEL_EINVAL, "listen", "the port must be 0..65535");
    if (inet_pton(AF_INET, host, &addr) != 1)
        return keel_error_set(err, KEEL_EINVAL, "listen", "\"%s\" is not an IPv4 address", host);
    *port = (int)p;
    return KEEL_OK;
}

static int is_loopback(const char *host)
{
    struct in_addr addr;

    return inet_pton(AF_INET, host, &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
}

static int parse_packs(struct server *srv, const char *list, struct keel_error *err)
{
    const char *p = list;

    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (srv->n_packs == SERVER_PACKS_MAX)
            return keel_error_set(err, KEEL_EINVAL, "packs", "at most %d packs", SERVER_PACKS_MAX);
        if (!len || len >= sizeof(srv->packs[0]))
            return keel_error_set(err, KEEL_EINVAL, "packs", "\"%s\" is not a list of pack names",
                                  list);
        snprintf(srv->packs[srv->n_packs++], sizeof(srv->packs[0]), "%.*s", (int)len, p);
        p += len + (end != NULL);
    }
    return srv->n_packs ? KEEL_OK : keel_error_set(err, KEEL_EINVAL, "packs", "is empty");
}

/* Ingests each pack's sample data into an empty store, as keel chat does. */
static int ingest_samples(struct server *srv, struct keel_error *err)
{
    for (int i = 0; i < srv->n_packs; i++) {
        struct pipeline_options o = {.packs_dir = srv->opt.packs_dir, .pack = srv->packs[i],
                                     .store = srv->store, .providers = "none",
                                     .llm = {"none", NULL, NULL}, .websearch_url = "none"};
        struct pipeline *pl = NULL;
        long n = 0;
        int rc = pipeline_new(&o, &pl, err);
        if (!rc)
            rc = pipeline_ingest_sample(pl, &n, err);
        pipeline_free(pl);
        if (rc)
            return rc;
        if (n)
            fprintf(stderr, "keel: ingested %ld sample records of pack %s\n", n, srv->packs[i]);
    }
    return KEEL_OK;
}

static void server_release(struct server *srv)
{
    if (srv->queue)
        queue_close(srv->queue);
    workers_join(srv);
    if (srv->base) {
        streams_close_all(srv);
        event_base_loop(srv->base, EVLOOP_NONBLOCK);   /* flush the last replies */
    }
    if (srv->http)
        evhttp_free(srv->http);
    if (srv->wake)
        event_free(srv->wake);
    if (srv->heartbeat)
        event_free(srv->heartbeat);
    if (srv->pump)
        event_free(srv->pump);
    if (srv->sigterm)
        event_free(srv->sigterm);
    if (srv->sigint)
        event_free(srv->sigint);
    if (srv->drain)
        event_free(srv->drain);
    if (srv->base)
        event_base_free(srv->base);
    errpage_release();   /* after the connections and their callbacks are gone */
    queue_free(srv->queue);
    bus_free(srv->bus);
    json_decref(srv->buckets);
    json_decref(srv->key_streams);
    memory_free(srv->memory);
    llm_free(srv->embedder);
    server_scenarios_release(srv);
    store_close(srv->store);
}

static int write_port_file(const char *path, int port, struct keel_error *err)
{
    char tmp[4200];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(f = fopen(tmp, "w")) || fprintf(f, "%d\n", port) < 0 || fclose(f) || rename(tmp, path))
        return keel_error_set(err, KEEL_EIO, "port-file", "cannot write %s", path);
    return KEEL_OK;
}

int server_run(const struct server_options *options, struct keel_error *err)
{
    struct server srv;
    char host[64];
    int port = 0, rc;
    struct timeval beat = {SERVER_HEARTBEAT_S, 0};
    struct sockaddr_in bound;
    socklen_t len = sizeof(bound);

    memset(&srv, 0, sizeof(srv));
    srv.opt = *options;
    if (!srv.opt.listen)
        srv.opt.listen = "127.0.0.1:8080";
    if (!srv.opt.packs_dir)
        srv.opt.packs_dir = pack_default_dir();
    srv.n_workers = srv.opt.workers > 0 ? srv.opt.workers : 2;
    if (srv.n_workers > 64)
        return keel_error_set(err, KEEL_EINVAL, "workers", "at most 64");
    if ((rc = parse_listen(srv.opt.listen, host, sizeof(host), &port, err)) ||
        (rc = parse_packs(&srv, srv.opt.packs ? srv.opt.packs : SERVER_DEFAULT_PACKS, err)))
        return rc;
    if (srv.opt.auth_none && !is_loopback(host))
        return keel_error_set(err, KEEL_EINVAL, "auth",
                              "--auth none is refused on %s: it serves anyone who can connect; "
                              "listen on 127.0.0.1", host);
    if (!srv.opt.db || !strncmp(srv.opt.db, "mem:", 4))
        return keel_error_set(err, KEEL_EINVAL, "db",
                              "keel serve needs a SQLite file (each worker opens its own "
                              "connection; mem: cannot be shared)");
    /* A client that leaves mid-write must not kill the server: writes to
     * its socket fail with EPIPE instead, and libevent drops it. */
    signal(SIGPIPE, SIG_IGN);
    {   /* every stream is a connection: as many descriptors as allowed */
        struct rlimit lim;
        if (!getrlimit(RLIMIT_NOFILE, &lim) && lim.rlim_cur < lim.rlim_max) {
            lim.rlim_cur = lim.rlim_max;
            setrlimit(RLIMIT_NOFILE, &lim);
        }
    }
    if (evthread_use_pthreads())
        return keel_error_set(err, KEEL_EIO, "server", "libevent has no thread support");
    rc = KEEL_ENOMEM;
    if ((rc = store_open(srv.opt.db, &srv.store, err)) || (rc = ingest_samples(&srv, err)) ||
        (rc = server_scenarios_load(&srv, err)))
        goto out;
    rc = KEEL_ENOMEM;
    if (!(srv.base = loop_base_new()) || !(srv.http = evhttp_new(srv.base)) ||
        !(srv.queue = queue_new(SERVER_QUEUE_PARTITIONS, SERVER_QUEUE_MAX)) ||
        !(srv.bus = bus_new(SERVER_QUEUE_MAX * 4, BUS_KEEP_MS, notify, &srv)) ||
        !(srv.wake = event_new(srv.base, -1, EV_PERSIST, on_wake, &srv)) ||
        !(srv.heartbeat = event_new(srv.base, -1, EV_PERSIST, on_heartbeat, &srv)) ||
        !(srv.pump = evtimer_new(srv.base, streams_pump_cb, &srv)) ||
        !(srv.sigterm = evsignal_new(srv.base, SIGTERM, on_signal, &srv)) ||
        !(srv.sigint = evsignal_new(srv.base, SIGINT, on_signal, &srv))) {
        keel_error_set(err, KEEL_ENOMEM, "server", "out of memory");
        goto out;
    }
    /* evhttp's own caps; what it refuses goes out as keel's JSON error (errpage.c) */
    evhttp_set_max_body_size(srv.http, SERVER_EVHTTP_BODY_MAX);
    evhttp_set_max_headers_size(srv.http, SERVER_HEADERS_MAX);
    errpage_init(SERVER_HEADERS_MAX, SERVER_EVHTTP_BODY_MAX);
    evhttp_set_bevcb(srv.http, errpage_bufferevent, NULL);
    evhttp_set_timeout(srv.http, 60);
    /* Every method reaches the dispatcher, which answers 405 in JSON. */
    evhttp_set_allowed_methods(srv.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE |
                                             EVHTTP_REQ_PATCH | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                             EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                             EVHTTP_REQ_CONNECT);
    evhttp_set_gencb(srv.http, route_request, &srv);
    if (!(srv.socket = evhttp_bind_socket_with_handle(srv.http, host, (ev_uint16_t)port))) {
        rc = keel_error_set(err, KEEL_EIO, "listen", "cannot listen on %s", srv.opt.listen);
        goto out;
    }
    /* evhttp listens with a backlog of 128: a burst of new streams beyond
     * it has its SYNs dropped and retried after 1, 3, 7 s. The kernel
     * takes a second listen() as a new backlog (capped at somaxconn). */
    if (listen(evhttp_bound_socket_get_fd(srv.socket), SOMAXCONN))
        keel_log(KEEL_LOG_WARN, "server.backlog", json_pack("{s:s}", "error", strerror(errno)));
    if (getsockname(evhttp_bound_socket_get_fd(srv.socket), (struct sockaddr *)&bound, &len) == 0)
        port = ntohs(bound.sin_port);
    if ((rc = workers_start(&srv, err)))
        goto out;
    event_add(srv.heartbeat, &beat);
    event_add(srv.sigterm, NULL);
    event_add(srv.sigint, NULL);
    if (srv.opt.port_file && (rc = write_port_file(srv.opt.port_file, port, err)))
        goto out;
    fprintf(stderr, "keel: serving %s on http://%s:%d/ with %d workers (store %s)\n",
            srv.opt.packs ? srv.opt.packs : SERVER_DEFAULT_PACKS, host, port, srv.n_workers,
            srv.opt.db);
    keel_log(KEEL_LOG_INFO, "server.listening",
             json_pack("{s:s, s:i, s:i}", "host", host, "port", port, "workers", srv.n_workers));
    serve_loop(&srv);
    keel_log(KEEL_LOG_INFO, "server.stopped", NULL);
    rc = KEEL_OK;
out:
    server_release(&srv);
    return rc;
}
