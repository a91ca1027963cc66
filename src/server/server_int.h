/*
 * server_int.h — what the files of src/server/ share: the server, its
 * streams and waiting requests, and the HTTP helpers.
 */
#ifndef KEEL_SERVER_INT_H
#define KEEL_SERVER_INT_H

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "pipeline/scenario.h"
#include "server/bus.h"
#include "server/queue.h"
#include "server/server.h"
#include "store/store.h"

#define SERVER_BODY_MAX     (64 * 1024)    /* a request body */
#define SERVER_EVHTTP_BODY_MAX    (1024 * 1024)   /* evhttp's own cap on a body (errpage.c) */
#define SERVER_HEADERS_MAX  (16 * 1024)    /* the request line and headers */
#define SERVER_PACKS_MAX    16
#define SERVER_STREAMS_MAX  10000          /* open SSE streams in all */
#define SERVER_QUEUE_MAX    1024           /* turns waiting for a worker */
#define SERVER_QUEUE_PARTITIONS 256        /* conversations hashed for one-at-a-time */
#define SERVER_HEARTBEAT_S  15
#define SERVER_PUMP_BATCH   128            /* streams sent to per loop pass */
#define SERVER_BATCH_TURNS  8              /* turns committed together, at most … */
#define SERVER_BATCH_NS     2000000ull     /* … and begun within this long (workers.c) */

/* Who is asking: with --auth none everyone is `open` (no owner checks);
 * else the user and API role of a valid key. */
struct principal {
    int open;
    char user[129];
    char role[16];
    char key_id[48];
};

#define SERVER_RATE_PER_S       20      /* requests a key may make per second, on average
                                         * (--rate), and twice that at once */
#define SERVER_STREAMS_PER_KEY  64      /* open SSE streams of one key */

/* How a stream or a waiting request speaks: keel's own events, or
 * OpenAI's chat-completion (chunk) objects. */
enum reply_format { FORMAT_KEEL, FORMAT_OPENAI };

/* An open SSE stream of one turn. */
struct stream {
    struct server *srv;
    struct evhttp_request *req;
    char correlation_id[KEEL_ID_MAX];
    char key_id[48];           /* "" with --auth none */
    long sent;                 /* the number of the last event sent */
    enum reply_format format;
    int started;               /* OpenAI: the role chunk was sent */
    char model[64];
    int beat;                  /* a keep-alive comment is due */
    struct stream *prev, *next;
    struct stream *pump_prev, *pump_next;   /* in the pump queue (streams.c) */
    int queued;                /* in the pump queue */
};

/* A request waiting for its turn to end (POST /v1/chat?wait=1, a
 * non-streaming chat completion). */
struct waiter {
    struct server *srv;
    struct evhttp_request *req;
    char correlation_id[KEEL_ID_MAX];
    enum reply_format format;
    char model[64];
    struct waiter *prev, *next;
};

struct worker;

#define METRICS_BUCKETS 13
#define METRICS_STAGES  10

struct histogram {
    atomic_long buckets[METRICS_BUCKETS + 1];   /* the last: above every bound */
    atomic_long count, sum_us;
};

struct server_metrics {
    atomic_long turns, errors;
    struct histogram turn;
    struct histogram stages[METRICS_STAGES];
};

struct server {
    struct server_options opt;
    char packs[SERVER_PACKS_MAX][64];
    int n_packs;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *socket;
    struct event *wake, *heartbeat, *sigterm, *sigint, *drain;
    struct store *store;             /* the loop thread's own connection (reads) */
    struct store *worker_store;      /* the workers' one connection, shared (workers.c) */
    struct queue *queue;
    struct bus *bus;
    struct worker *workers;
    int n_workers;
    atomic_int resuming;             /* workers back from the network, waiting for the store */
    struct stream *streams;
    size_t n_streams;
    atomic_size_t streams_open;      /* n_streams, for other threads: notify skips waking
                                      * the loop for a turn's events no stream follows */
    atomic_int loop_asleep;          /* 1: the loop may be waiting for events, so a turn's
                                      * end must wake it; 0: it is running and looks at the
                                      * bus before it waits again (server.c) */
    struct stream *pump_head, *pump_tail;   /* streams with something to send */
    struct event *pump;              /* sends for the next few of them (streams.c) */
    struct waiter *waiters;
    long waiters_finished;           /* bus_finished() when the waiters were last looked at */
    int waiters_new;                 /* a waiter came since: look at them all the same */
    int draining;
    struct server_metrics metrics;   /* counted by the workers */
    json_t *buckets;                 /* key id -> {tokens, at}: request rate (loop thread) */
    json_t *key_streams;             /* key id -> open streams */
    struct memory *memory;           /* long-term memory over `store`, made on first use */
    struct llm *embedder;            /* its /v1/embeddings model, or NULL (hashed) */
    struct pack *scenario_packs[SERVER_PACKS_MAX];        /* each served pack, for: */
    struct scenario_conf scenarios[SERVER_PACKS_MAX];     /* its scenario rules (seed 004) */
};

/* ---- http.c ------------------------------------------------------------ */

/* Sends `body` (stolen) as JSON with `status`, and logs the request. */
void http_json(struct evhttp_request *req, int status, json_t *body);

/* As http_json, with the body already JSON text: `len` bytes of `text`
 * (stolen; keel_malloc'd with a byte of room after its NUL for the
 * newline added; NULL answers 500). `correlation_id` (or NULL) goes in
 * the log line. */
void http_json_text(struct evhttp_request *req, int status, char *text, size_t len,
                    const char *correlation_id);

/* Sends {"error": {code, message, field}} with `status`; code is a short
 * name ("bad_request", "not_found", …). */
void http_error(struct evhttp_request *req, int status, const char *code, const char *field,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The error of a keel result code: its HTTP status and code name. */
void http_keel_error(struct evhttp_request *req, const struct keel_error *err);

/* The request body parsed as a JSON object into *out; on failure the
 * error reply is sent and -1 returned. */
int http_body_json(struct evhttp_request *req, json_t **out);

/* The request path without its query, into `out`. */
void http_path(struct evhttp_request *req, char *out, size_t n);

/* The value of query parameter `name`, or NULL; `buf` holds it. */
const char *http_query(struct evhttp_request *req, const char *name, char *buf, size_t n);

/* Logs one request line (method, path, status, ms, correlation id). */
void http_log(struct evhttp_request *req, int status, const char *correlation_id);

/* ---- errpage.c --------------------------------------------------------- */

/* Sets the caps the errors name (evhttp's, as set on the server) and
 * forgets earlier state; errpage_release frees it. */
void errpage_init(size_t headers_max, size_t body_max);
void errpage_release(void);

/* evhttp's bufferevent callback (evhttp_set_bevcb): a socket bufferevent
 * whose buffers are watched so that evhttp's own HTML error pages go out
 * as keel's JSON errors; NULL lets evhttp make a plain one. */
struct bufferevent *errpage_bufferevent(struct event_base *base, void *arg);

#define ERRPAGE_HEAD_MAX 512   /* evhttp's page: a status line and four short headers */

/* Reads the first n bytes of a response (n < ERRPAGE_HEAD_MAX; more may
 * follow): 1 when they open evhttp's own error page (its status line,
 * then "Content-Type: text/html" and "Connection: close"), with its HTTP
 * version ("HTTP/1.1"), status, head length (through the blank line) and
 * Content-Length; 0 while a longer prefix could still be one; -1 when no
 * longer prefix can be. */
int errpage_parse(const char *head, size_t n, char version[9], int *status, size_t *head_len,
                  size_t *body_len);

/* ---- routes ------------------------------------------------------------ */

void route_request(struct evhttp_request *req, void *arg);   /* the dispatcher (routes.c) */
void route_chat(struct server *srv, struct evhttp_request *req, const struct principal *who);
void route_response(struct server *srv, struct evhttp_request *req, const char *cid,
                    const struct principal *who);
void route_stream(struct server *srv, struct evhttp_request *req, const char *cid,
                  const struct principal *who);
void route_conversation(struct server *srv, struct evhttp_request *req, const char *id,
                        const struct principal *who);
void route_decision(struct server *srv, struct evhttp_request *req, const char *cid,
                    const struct principal *who);
/* Long-term memory (routes_memory.c). */
void route_memory_add(struct server *srv, struct evhttp_request *req,
                      const struct principal *who);
void route_memory_search(struct server *srv, struct evhttp_request *req,
                         const struct principal *who);
void route_memory_decisions(struct server *srv, struct evhttp_request *req,
                            const struct principal *who);

/* Artifacts and facts (routes_artifacts.c): each returns 1 when `path`
 * is one of its routes (answered, 405 included), else 0. The shared one
 * runs before authentication: a share token is its own key. */
int route_artifacts(struct server *srv, struct evhttp_request *req, const char *path, int get,
                    const struct principal *who);
int route_artifacts_shared(struct server *srv, struct evhttp_request *req, const char *path,
                           int get);

void route_share(struct server *srv, struct evhttp_request *req, const char *id,
                 const struct principal *who);
void route_shared(struct server *srv, struct evhttp_request *req, const char *token);

/* The conversation a share token (`len` bytes at `token`, not
 * NUL-terminated) opens: 1 with its id in *id (free with keel_free), or 0
 * with 404 "no such share link" sent. */
int share_conversation(struct server *srv, struct evhttp_request *req, const char *token,
                       size_t len, char **id);

/* Nonzero when `who` may read a conversation owned by `owner` (NULL:
 * made without keys). */
int principal_may_read(const struct principal *who, const char *owner);

/* Nonzero when conversation `id` exists and `who` may read it (and, when
 * `forbidden_for_viewer` names an action, is not a viewer); else the
 * error (404 for another user's, 403 for a viewer) is sent. */
int conversation_check(struct server *srv, struct evhttp_request *req, const char *id,
                       const struct principal *who, const char *forbidden_for_viewer);

/* The owner of the conversation of turn `cid` into `owner` ("" when it
 * has none); KEEL_ENOTFOUND when no turn has that id. */
int turn_owner(struct server *srv, const char *cid, char *owner, size_t n, struct keel_error *err);

/* Shared by the chat routes (routes_chat.c). chat_job: a job for
 * `message` in conversation `conversation_id` (NULL: a new one; with
 * `name_new` a missing id names the new conversation) of `pack` (NULL:
 * the conversation's or the default) for `who`. chat_enqueue: queues it
 * (the queue owns it from then on) and copies its ids to cid/conv.
 * Both send the error reply and return NULL / -1 on failure. */
struct job *chat_job(struct server *srv, struct evhttp_request *req, const struct principal *who,
                     const char *message, size_t len, const char *conversation_id,
                     const char *pack, int name_new);
int chat_enqueue(struct server *srv, struct evhttp_request *req, const struct principal *who,
                 struct job *job, char cid[KEEL_ID_MAX], char *conv, size_t conv_n);

/* The summary of a stored turn in the shape of a live `done`, or NULL
 * (out of memory); new reference. */
json_t *chat_summary_from_store(struct server *srv, const json_t *turn);

/* The HTTP status of a failed turn's error object (its keel code). */
int chat_error_status(const json_t *error);

/* Returns 1 when `who` may read turn `cid`; else sends 404 (or the
 * store's error) and returns 0. */
int chat_may_read_turn(struct server *srv, struct evhttp_request *req, const char *cid,
                       const struct principal *who);

/* waiters.c: holds `req` until turn `cid` ends, then answers it in
 * `format`. */
void chat_wait(struct server *srv, struct evhttp_request *req, const char *cid,
               enum reply_format format, const char *model);

/* Answers the waiters whose turn ended; looks at them only when a turn
 * has ended (bus_finished) or a waiter came since the last call. */
void waiters_pump(struct server *srv);

/* Answers every waiter 503 shutting_down (shutdown). */
void waiters_close_all(struct server *srv);

/* streams.c: the SSE streams of turns. */

/* Opens an SSE stream of turn `cid` after event `after` in `format` for
 * key `key_id` ("" with --auth none; at most SERVER_STREAMS_PER_KEY open). */
void stream_open(struct server *srv, struct evhttp_request *req, const char *cid, long after,
                 enum reply_format format, const char *model, const char *key_id);

/* POST /v1/chat/completions (routes_openai.c). */
void route_completions(struct server *srv, struct evhttp_request *req,
                       const struct principal *who);

/* OpenAI shapes of a finished turn (routes_openai.c): the completion, a
 * chunk of `content` (NULL: the role chunk; finish non-NULL: the last). */
json_t *openai_completion(const char *model, const json_t *result);
json_t *openai_chunk(const char *cid, const char *model, const char *content, int role,
                     const char *finish);

/* Called on the loop thread after the bus changed: queues every stream
 * for its new events (sent SERVER_PUMP_BATCH streams per loop pass, see
 * streams.c) and answers the waiters whose turn ended. */
void streams_pump(struct server *srv);

/* The timer callback of srv->pump (an event made with `srv` as its
 * argument): sends to the next SERVER_PUMP_BATCH queued streams and runs
 * again on the next loop pass while streams are queued. */
void streams_pump_cb(evutil_socket_t fd, short what, void *arg);

/* Nonzero while streams wait for the pump. */
int streams_pending(const struct server *srv);

/* Queues a comment line for every stream (keeps proxies from closing). */
void streams_heartbeat(struct server *srv);

/* Sends what every stream still has, then ends every stream and waiter
 * (shutdown). */
void streams_close_all(struct server *srv);

/* The page served at / (page.c). */
extern const char server_page[];

/* ---- routes_admin.c, metrics.c ---------------------------------------- */

void route_conversations_list(struct server *srv, struct evhttp_request *req,
                              const struct principal *who);
void route_conversations_create(struct server *srv, struct evhttp_request *req,
                                const struct principal *who);
void route_conversations_delete(struct server *srv, struct evhttp_request *req, const char *id,
                                const struct principal *who);
void route_quality(struct server *srv, struct evhttp_request *req, int reset,
                   const struct principal *who);
void route_prometheus(struct server *srv, struct evhttp_request *req);
void route_quality_history(struct server *srv, struct evhttp_request *req);

/* The index of a pipeline stage by name, or -1. */
int metrics_stage_index(const char *stage);

/* Counts one observation of `ms` milliseconds (any thread). */
void histogram_observe(struct histogram *h, double ms);

/* Appends the turn and stage histograms in Prometheus' text format. */
struct evbuffer;
void server_metrics_write(struct server *srv, struct evbuffer *out);

/* The index of `pack` among the served packs (-1: not served), and
 * whether it is served. */
int server_pack_index(const struct server *srv, const char *pack);
int server_pack_served(const struct server *srv, const char *pack);

/* Remembers a conversation named before its first turn is stored:
 * `reserved` (POST /v1/conversations) until a turn is queued for it,
 * then created by that turn. */
void server_pending_add(const char *id, const char *pack, const char *owner, int reserved);

/* Forgets a named or pending conversation (it was deleted). */
void server_pending_forget(const char *id);

/* Forgets every named or pending conversation (shutdown). */
void server_pending_release(void);

/* ---- routes_scenario.c (seed 004) --------------------------------------- */

/* Loads each served pack's scenario rules (merge keys, cap, household
 * summary) for the loop thread; release frees them. */
int server_scenarios_load(struct server *srv, struct keel_error *err);
void server_scenarios_release(struct server *srv);

/* The scenario rules of `pack`, or defaults when it is not served. */
const struct scenario_conf *server_scenario_conf(const struct server *srv, const char *pack);

/* A stored conversation's scenario and its summary line as JSON values
 * (null when none); nonzero when out of memory or the stored text is
 * not a scenario (both then NULL). */
int server_scenario_json(const struct server *srv, const struct store_conversation *conv,
                         json_t **scenario, json_t **summary);

/* The summary line of `scenario` under conversation `id`'s pack, as a
 * JSON string or null (a new reference; NULL when out of memory). */
json_t *server_scenario_summary(struct server *srv, const char *conversation_id,
                                const json_t *scenario);

/* GET, PATCH, DELETE /v1/conversations/{id}/scenario. */
void route_scenario(struct server *srv, struct evhttp_request *req, const char *id,
                    const struct principal *who);

/* GET /v1/shared/{token}/scenario: the shared conversation's scenario,
 * read only (any other method 405; an unknown link 404; the token never
 * appears in an answer). Returns 1 when `path` is that route (an answer
 * was sent), else 0. */
int route_scenario_shared(struct server *srv, struct evhttp_request *req, const char *path,
                          int get);

/* ---- workers.c --------------------------------------------------------- */

int workers_start(struct server *srv, struct keel_error *err);
void workers_join(struct server *srv);

#define SERVER_TOKEN_BYTES 48   /* an answer piece (`token` event): a few words */

/* The end of the answer piece that starts at `at`: about
 * SERVER_TOKEN_BYTES, cut after a space or newline, never inside a UTF-8
 * sequence. Live streams and replays cut alike. */
size_t server_answer_piece(const char *answer, size_t len, size_t at);

/* The turn result as the API shows it: {correlation_id, conversation_id,
 * turn, answer, sources, decision: {intent, route, tool, reasons},
 * stage, clarification, tools_called, providers?, active_scenario,
 * scenario_summary}. */
json_t *server_result_summary(const json_t *result);

#endif
