/*
 * bench_http.c — `make bench BENCH=http`: the real `keel serve` on
 * loopback, driven by a bounded load generator (libcurl's multi_socket
 * interface on epoll, a fixed number of requests in flight on keep-alive
 * connections). The generator shares the machine's cores with the server,
 * so it is kept lean: only a ready connection is looked at, and handles
 * keep their options between requests.
 *
 *   http.healthz     GET /healthz
 *   http.chat_wait   POST /v1/chat?wait=1, one turn per request, each in a
 *                    new conversation of the scholar pack (mixed messages)
 *   http.sse_streams 5,000 open SSE streams held by one server process:
 *                    the server's resident memory per stream. The turn the
 *                    streams follow is kept running by a paper provider
 *                    that never answers (a socket of this benchmark that
 *                    accepts and stays silent), so the streams stay open
 *                    until its timeout (8 s). Measured twice: held (once
 *                    /healthz counts every stream open, the turn still
 *                    running; else the bench fails rather than measure the
 *                    turn's end) and at the peak (VmHWM, reset before the
 *                    streams open) after the turn's last events went out to
 *                    every stream and the streams ended.
 *
 * Each prints {"bench", "req_per_s", "p50_ms", "p99_ms", "n", …} or
 * {"bench", "streams", "rss_kb_per_stream", …}. The server is
 * build/keel beside this binary, on a fresh SQLite file, --auth none.
 * BENCH_VARIANT=healthz, chat_wait or sse_streams runs one of them;
 * BENCH_WORKERS=N runs the first two with `--workers N` (default 2).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define INFLIGHT      16
#define BUDGET_NS     (8ull * 1000000000ull)
#define MAX_REQUESTS  400000
#define STREAMS       5000

struct server_proc {
    pid_t pid;
    int port;
    char dir[64];
};

static char keel_path[4096];

/* build/keel beside build/keel-bench. */
static int find_keel(void)
{
    ssize_t n = readlink("/proc/self/exe", keel_path, sizeof(keel_path) - 8);
    char *slash;

    if (n <= 0)
        return -1;
    keel_path[n] = '\0';
    if (!(slash = strrchr(keel_path, '/')))
        return -1;
    strcpy(slash + 1, "keel");
    return access(keel_path, X_OK);
}

static int start_server(struct server_proc *s, const char *const *extra, const char *openalex)
{
    char db[128], portfile[128], packs[4096];
    const char *argv[32];
    int argc = 0;

    snprintf(s->dir, sizeof(s->dir), "/tmp/keel-bench-http-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    snprintf(db, sizeof(db), "%s/http.db", s->dir);
    snprintf(portfile, sizeof(portfile), "%s/port", s->dir);
    snprintf(packs, sizeof(packs), "%s/packs", bench_root());
    argv[argc++] = keel_path;
    argv[argc++] = "serve";
    argv[argc++] = "--auth";
    argv[argc++] = "none";
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--db";
    argv[argc++] = db;
    argv[argc++] = "--port-file";
    argv[argc++] = portfile;
    for (; extra && *extra && argc < 28; extra++)
        argv[argc++] = *extra;
    argv[argc] = NULL;
    if ((s->pid = fork()) < 0)
        return -1;
    if (s->pid == 0) {
        int null = open("/dev/null", 1);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        setenv("KEEL_PACKS", packs, 1);
        setenv("KEEL_LOG_LEVEL", "error", 1);
        if (openalex)
            setenv("KEEL_OPENALEX_URL", openalex, 1);
        execv(keel_path, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 600; i++) {
        FILE *f = fopen(portfile, "r");
        if (f) {
            int ok = fscanf(f, "%d", &s->port) == 1;
            fclose(f);
            if (ok)
                return 0;
        }
        usleep(20000);
    }
    return -1;
}

static void stop_server(struct server_proc *s)
{
    char cmd[160];
    int status;

    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, &status, 0);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
    if (system(cmd)) {
        /* a leftover temp folder is not worth failing the benchmark */
    }
}

/* ---- the load generator ------------------------------------------------------ */

static const char *const messages[] = {
    "find recent papers on sleep and memory",
    "papers on graph neural networks between 2018 and 2022",
    "Show me 12 open access papers on federated learning from the last 3 years",
    "hello",
    "What are the newest papers on CRISPR gene editing?",
    "Find 2020-2023 studies of remote work productivity",
};

struct slot {
    CURL *easy;
    uint64_t started;
    char body[512];
};

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* Configures a slot's handle once; slot_next starts each request. */
static void slot_setup(struct slot *s, const char *url, int chat, struct curl_slist *headers)
{
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    if (chat)
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, headers);
}

/* The i-th request on slot s: its body (a chat message) and start time.
 * The handle keeps its options between requests (no reset): the load
 * generator shares the server's two cores, so its cost per request is
 * kept low. */
static void slot_next(struct slot *s, int chat, size_t i)
{
    if (chat) {
        snprintf(s->body, sizeof(s->body), "{\"message\": \"%s\"}",
                 messages[i % (sizeof(messages) / sizeof(messages[0]))]);
        curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body);
    }
    s->started = bench_now_ns();
}

/* libcurl's multi_socket interface on epoll: curl says which sockets to
 * watch (on_socket) and when to call back (on_timer), and only the
 * socket that is ready is looked at, where curl_multi_poll would poll
 * every connection on each wake. */
struct driver {
    CURLM *multi;
    int epfd;
    long timeout_ms;   /* -1: none */
};

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *arg, void *sock_arg)
{
    struct driver *d = arg;
    struct epoll_event ev = {0};

    (void)easy;
    ev.data.fd = fd;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL);
        curl_multi_assign(d->multi, fd, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (!sock_arg) {   /* a socket curl has not shown us before */
        epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
        curl_multi_assign(d->multi, fd, d);
    } else {
        epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &ev);
    }
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *arg)
{
    (void)multi;
    ((struct driver *)arg)->timeout_ms = timeout_ms;
    return 0;
}

/* Runs `path` with INFLIGHT requests in flight for BUDGET_NS; prints the line. */
static int load(const char *name, int port, const char *path, int chat)
{
    char url[256];
    struct slot slots[INFLIGHT];
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    uint64_t *samples = malloc(MAX_REQUESTS * sizeof(*samples)), start;
    struct driver d = {curl_multi_init(), epoll_create1(EPOLL_CLOEXEC), -1};
    size_t n = 0, sent = 0, errors = 0;
    int still = 1;

    if (!samples || !d.multi || d.epfd < 0 || !headers)
        return 1;
    curl_multi_setopt(d.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(d.multi, CURLMOPT_SOCKETDATA, &d);
    curl_multi_setopt(d.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(d.multi, CURLMOPT_TIMERDATA, &d);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    start = bench_now_ns();
    for (int i = 0; i < INFLIGHT; i++) {
        slots[i].easy = curl_easy_init();
        slot_setup(&slots[i], url, chat, headers);
        slot_next(&slots[i], chat, sent++);
        curl_multi_add_handle(d.multi, slots[i].easy);
    }
    while (still || bench_now_ns() - start < BUDGET_NS) {
        struct epoll_event ready[INFLIGHT];
        CURLMsg *msg;
        int left, k = epoll_wait(d.epfd, ready, INFLIGHT,
                                 d.timeout_ms < 0 || d.timeout_ms > 100 ? 100 : (int)d.timeout_ms);

        for (int i = 0; i < k; i++)
            curl_multi_socket_action(d.multi, ready[i].data.fd,
                                     (ready[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                                         (ready[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                                         (ready[i].events & (EPOLLERR | EPOLLHUP)
                                              ? CURL_CSELECT_ERR
                                              : 0),
                                     &still);
        if (k <= 0 || d.timeout_ms == 0) {   /* curl's timer is due (an added handle starts so) */
            d.timeout_ms = -1;   /* on_timer sets the next one, if any */
            curl_multi_socket_action(d.multi, CURL_SOCKET_TIMEOUT, 0, &still);
        }
        while ((msg = curl_multi_info_read(d.multi, &left))) {
            struct slot *s = NULL;
            long code = 0;
            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result != CURLE_OK || code != 200)
                errors++;
            else if (n < MAX_REQUESTS)
                samples[n++] = bench_now_ns() - s->started;
            curl_multi_remove_handle(d.multi, s->easy);
            if (bench_now_ns() - start < BUDGET_NS && n < MAX_REQUESTS) {
                slot_next(s, chat, sent++);
                curl_multi_add_handle(d.multi, s->easy);
                still = 1;
            }
        }
        if (!still && bench_now_ns() - start < BUDGET_NS)
            break;   /* nothing in flight and nothing added: the budget ran into MAX_REQUESTS */
    }
    {
        double wall = (double)(bench_now_ns() - start) / 1e9;
        bench_sort(samples, n);
        printf("{\"bench\": \"%s\", \"req_per_s\": %.0f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, "
               "\"n\": %zu, \"errors\": %zu, \"in_flight\": %d, \"note\": \"loopback, keel serve "
               "with %s workers, SQLite, keep-alive connections\"}\n",
               name, (double)n / wall, n ? (double)samples[n / 2] / 1e6 : 0.0,
               n ? (double)samples[n * 99 / 100] / 1e6 : 0.0, n, errors, INFLIGHT,
               getenv("BENCH_WORKERS") ? getenv("BENCH_WORKERS") : "2");
        fflush(stdout);
    }
    for (int i = 0; i < INFLIGHT; i++) {
        curl_multi_remove_handle(d.multi, slots[i].easy);
        curl_easy_cleanup(slots[i].easy);
    }
    curl_multi_cleanup(d.multi);
    close(d.epfd);
    curl_slist_free_all(headers);
    free(samples);
    return errors > n / 100;
}

/* ---- open streams ------------------------------------------------------------- */

/* A field ("VmRSS:", "VmHWM:") of /proc/PID/status in KB, or -1. */
static long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t n = strlen(field);
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "r")))
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n))
            kb = strtol(line + n, NULL, 10);
    fclose(f);
    return kb;
}

/* Starts the process's peak resident size (VmHWM) afresh at its current
 * size (Linux 4.0+); -1 when the kernel refuses. */
static int reset_peak(pid_t pid)
{
    char path[64];
    FILE *f;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
    if (!(f = fopen(path, "w")))
        return -1;
    rc = fputs("5", f) < 0;
    return fclose(f) || rc ? -1 : 0;
}

static int tcp_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* A listening socket that accepts nothing: a provider that never answers. */
static int silent_listener(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64) ||
        getsockname(fd, (struct sockaddr *)&a, &len))
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* The server's open streams and running turns, from GET /healthz. */
static int health(int port, long *open_streams, long *running)
{
    const char *request = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char reply[2048];
    size_t got = 0;
    ssize_t n;
    const char *at;
    int fd = tcp_connect(port);

    if (fd < 0)
        return -1;
    if (write(fd, request, strlen(request)) < 0) {
        close(fd);
        return -1;
    }
    while (got < sizeof(reply) - 1 && (n = read(fd, reply + got, sizeof(reply) - 1 - got)) > 0)
        got += (size_t)n;
    close(fd);
    reply[got] = '\0';
    if (!(at = strstr(reply, "\"open_streams\":")))
        return -1;
    *open_streams = strtol(at + 15, NULL, 10);
    if (!(at = strstr(reply, "\"running_turns\":")))
        return -1;
    *running = strtol(at + 16, NULL, 10);
    return 0;
}

static int streams(void)
{
    static int fds[STREAMS];
    const char *extra[] = {"--workers", "1", "--providers", "openalex", NULL};
    struct server_proc s = {0};
    char provider[64], request[512], reply[1024], cid[64] = "";
    int silent_port = 0, silent = silent_listener(&silent_port), fd, opened = 0, rc = 1;
    int peak_known;
    long before, held, peak, after, open_streams = -1, running = -1;
    uint64_t started;
    double open_s;

    snprintf(provider, sizeof(provider), "http://127.0.0.1:%d", silent_port);
    if (silent < 0 || start_server(&s, extra, provider))
        goto out;
    /* One turn that searches papers: its provider never answers, so the
     * turn (and every stream of it) stays open for the provider timeout. */
    if ((fd = tcp_connect(s.port)) < 0)
        goto out;
    {
        const char *body = "{\"message\": \"find recent papers on sleep now\"}";
        snprintf(request, sizeof(request),
                 "POST /v1/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                 strlen(body), body);
    }
    if (write(fd, request, strlen(request)) < 0)
        goto out;
    {
        ssize_t got = read(fd, reply, sizeof(reply) - 1);
        char *at;
        reply[got > 0 ? got : 0] = '\0';
        if ((at = strstr(reply, "\"correlation_id\":\"")))
            sscanf(at + 18, "%63[^\"]", cid);
    }
    close(fd);
    if (!cid[0])
        goto out;
    usleep(300000);
    before = status_kb(s.pid, "VmRSS:");
    peak_known = !reset_peak(s.pid);
    started = bench_now_ns();
    snprintf(request, sizeof(request), "GET /v1/stream/%s HTTP/1.1\r\nHost: x\r\n\r\n", cid);
    for (int i = 0; i < STREAMS; i++) {
        if ((fds[i] = tcp_connect(s.port)) < 0 || write(fds[i], request, strlen(request)) < 0)
            break;
        opened++;
    }
    open_s = (double)(bench_now_ns() - started) / 1e9;
    /* Held: every stream started (the server counts it) while the turn
     * still runs. A turn that ended first would measure its end instead. */
    for (int i = 0; i < 400 && (health(s.port, &open_streams, &running) || open_streams < opened);
         i++)
        usleep(50000);
    held = status_kb(s.pid, "VmRSS:");
    if (open_streams != opened || running != 1) {
        fprintf(stderr, "keel-bench: http.sse_streams: %ld of %d streams open, %ld turns running "
                        "after %.1f s of opening: the turn ended before the streams were held\n",
                open_streams, opened, running, open_s);
        goto close;
    }
    /* The end: the provider times out, the turn answers, and every stream
     * gets the last events (stages, the answer's pieces, done) at once. */
    for (int i = 0; i < 600 && (health(s.port, &open_streams, &running) || open_streams); i++)
        usleep(50000);
    peak = status_kb(s.pid, "VmHWM:");
    after = status_kb(s.pid, "VmRSS:");
    printf("{\"bench\": \"http.sse_streams\", \"streams\": %d, \"rss_kb_per_stream\": %.2f, "
           "\"peak_kb_per_stream\": %.2f, \"rss_kb_before\": %ld, \"rss_kb_held\": %ld, "
           "\"rss_kb_peak\": %ld, \"rss_kb_after_end\": %ld, \"open_s\": %.2f, \"note\": \"one "
           "keel serve process; each stream a TCP connection following one running turn, held "
           "(all open, turn running) and at the peak when the turn's last events reach them all\"}\n",
           opened, (double)(held - before) / opened,
           peak_known && !open_streams ? (double)(peak - before) / opened : -1.0, before, held,
           peak_known ? peak : -1, after, open_s);
    fflush(stdout);
    rc = opened == STREAMS && !open_streams ? 0 : 1;
close:
    for (int i = 0; i < opened; i++)
        close(fds[i]);
out:
    stop_server(&s);
    if (silent >= 0)
        close(silent);
    if (rc)
        fprintf(stderr, "keel-bench: http.sse_streams: could not hold %d streams (%s)\n", STREAMS,
                strerror(errno));
    return rc;
}

/* Nonzero when BENCH_VARIANT is unset or names `bench` (without "http."). */
static int wanted(const char *bench)
{
    const char *only = getenv("BENCH_VARIANT");

    return !only || !*only || !strcmp(bench + strlen("http."), only);
}

int bench_http(void)
{
    struct rlimit lim;
    struct server_proc s = {0};
    int rc = 0;

    if (find_keel()) {
        fprintf(stderr, "keel-bench: http: no keel binary beside keel-bench (make first)\n");
        return 1;
    }
    /* 5,000 streams need file descriptors on both sides. */
    if (!getrlimit(RLIMIT_NOFILE, &lim) && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (wanted("http.healthz") || wanted("http.chat_wait")) {
        const char *workers = getenv("BENCH_WORKERS");
        const char *extra[] = {"--workers", workers, NULL};
        if (start_server(&s, workers ? extra : NULL, NULL)) {
            fprintf(stderr, "keel-bench: http: keel serve did not start\n");
            stop_server(&s);
            return 1;
        }
        if (wanted("http.healthz"))
            rc |= load("http.healthz", s.port, "/healthz", 0);
        if (wanted("http.chat_wait"))
            rc |= load("http.chat_wait", s.port, "/v1/chat?wait=1", 1);
        stop_server(&s);
    }
    if (wanted("http.sse_streams"))
        rc |= streams();
    curl_global_cleanup();
    return rc;
}
