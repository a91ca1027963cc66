/*
 * fake_openai_main.c — keel-fake-openai: a scripted OpenAI-compatible
 * chat server for the black-box tests (never part of keel).
 *
 *   keel-fake-openai --port-file F
 *
 * It speaks the protocol as OpenAI documents it: POST
 * /v1/chat/completions answers a chat.completion object, or, when the
 * request says "stream": true, chat.completion.chunk events (a role
 * chunk, the text a word at a time, each tool call's name then its
 * arguments in two pieces, a finish chunk) and "data: [DONE]".
 * GET /v1/models lists "fake-model"; POST /v1/embeddings answers a
 * bag-of-words vector of 16 dimensions (the same words, the same vector).
 *
 * Tests steer it over HTTP:
 *   POST /_script     a JSON array of replies, used in order (the last
 *                     one repeats); clears the recorded requests
 *   GET  /_requests   every chat request body received since, in order
 *
 * A reply: {"text": "…", "tool_calls": [{"name", "arguments" (object or
 * text), "id"}], "status": 429, "retry_after": 1, "delay_ms": 2000,
 * "chunk_delay_ms": 50, "malformed": true (a body that is not the API's
 * JSON), "disconnect_after": N (a stream closes after N text chunks,
 * without a finish or [DONE]), "body_bytes": "…" (the body as raw bytes,
 * each character below 256 one byte, with "status")}.
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BODY_MAX (4u << 20)

static json_t *script;       /* the replies */
static size_t served;
static json_t *requests;     /* bodies received */
static struct event_base *base;

struct stream {
    struct evhttp_request *req;
    json_t *chunks;          /* strings: the SSE lines to send, in order */
    size_t next;
    long delay_ms;
    long cut_at;             /* close the connection before chunk k; -1: never */
    struct event *timer;
};

static char *body_of(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    char *text;

    if (n > BODY_MAX || !(text = malloc(n + 1)))
        return NULL;
    evbuffer_copyout(in, text, n);
    text[n] = '\0';
    return text;
}

static void reply_json(struct evhttp_request *req, int status, json_t *doc)
{
    struct evbuffer *out = evbuffer_new();
    char *text = json_dumps(doc, JSON_COMPACT);

    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evbuffer_add(out, text, strlen(text));
    evhttp_send_reply(req, status, status == 200 ? "OK" : "Scripted", out);
    evbuffer_free(out);
    free(text);
    json_decref(doc);
}

static json_t *chunk(const char *model, json_t *delta, const char *finish)
{
    return json_pack("{s:s, s:s, s:i, s:s, s:[{s:i, s:o, s:s?}]}", "id", "chatcmpl-fake",
                     "object", "chat.completion.chunk", "created", 0, "model", model,
                     "choices", "index", 0, "delta", delta, "finish_reason", finish);
}

static void add_line(json_t *chunks, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    char *line = malloc(strlen(text) + 16);

    sprintf(line, "data: %s\n\n", text);
    json_array_append_new(chunks, json_string(line));
    free(text);
    free(line);
    json_decref(doc);
}

/* The arguments of a scripted call as text. */
static char *arguments_text(const json_t *call)
{
    const json_t *a = json_object_get(call, "arguments");

    if (json_is_string(a))
        return strdup(json_string_value(a));
    return json_dumps(a ? a : json_object(), JSON_COMPACT | JSON_SORT_KEYS);
}

static json_t *whole_reply(const json_t *r, const char *model)
{
    const json_t *calls = json_object_get(r, "tool_calls"), *call;
    json_t *out_calls = json_array();
    size_t i;

    json_array_foreach(calls, i, call) {
        char *args = arguments_text(call), id[32];
        snprintf(id, sizeof(id), "call_%zu", i + 1);
        json_array_append_new(
            out_calls,
            json_pack("{s:s, s:s, s:{s:s, s:s}}", "id",
                      json_string_value(json_object_get(call, "id")) ?: id, "type", "function",
                      "function", "name", json_string_value(json_object_get(call, "name")),
                      "arguments", args));
        free(args);
    }
    return json_pack("{s:s, s:s, s:i, s:s, s:[{s:i, s:{s:s, s:O?, s:o*}, s:s}], s:{s:i,s:i}}",
                     "id", "chatcmpl-fake", "object", "chat.completion", "created", 0, "model",
                     model, "choices", "index", 0, "message", "role", "assistant", "content",
                     json_object_get(r, "text"), "tool_calls",
                     json_array_size(out_calls) ? out_calls : NULL, "finish_reason",
                     json_array_size(out_calls) ? "tool_calls" : "stop", "usage",
                     "prompt_tokens", 1, "completion_tokens", 1);
}

static json_t *stream_chunks(const json_t *r, const char *model)
{
    json_t *chunks = json_array(), *call;
    const char *text = json_string_value(json_object_get(r, "text"));
    const json_t *calls = json_object_get(r, "tool_calls");
    size_t i;

    add_line(chunks, chunk(model, json_pack("{s:s, s:s}", "role", "assistant", "content", ""),
                           NULL));
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, ' ');
        size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        add_line(chunks, chunk(model, json_pack("{s:s%}", "content", p, n), NULL));
        p += n;
    }
    json_array_foreach(calls, i, call) {
        char *args = arguments_text(call), id[32];
        size_t half = strlen(args) / 2;
        snprintf(id, sizeof(id), "call_%zu", i + 1);
        add_line(chunks, chunk(model,
                               json_pack("{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls",
                                         "index", (int)i, "id",
                                         json_string_value(json_object_get(call, "id")) ?: id,
                                         "type", "function", "function", "name",
                                         json_string_value(json_object_get(call, "name")),
                                         "arguments", ""),
                               NULL));
        add_line(chunks, chunk(model, json_pack("{s:[{s:i, s:{s:s%}}]}", "tool_calls", "index",
                                                (int)i, "function", "arguments", args, half),
                               NULL));
        add_line(chunks, chunk(model, json_pack("{s:[{s:i, s:{s:s}}]}", "tool_calls", "index",
                                                (int)i, "function", "arguments", args + half),
                               NULL));
        free(args);
    }
    add_line(chunks, chunk(model, json_object(), json_array_size(calls) ? "tool_calls" : "stop"));
    json_array_append_new(chunks, json_string("data: [DONE]\n\n"));
    return chunks;
}

static void stream_free(struct stream *s)
{
    if (s->timer)
        event_free(s->timer);
    json_decref(s->chunks);
    free(s);
}

static void stream_step(evutil_socket_t fd, short what, void *arg)
{
    struct stream *s = arg;
    struct timeval tv = {s->delay_ms / 1000, (s->delay_ms % 1000) * 1000};

    (void)fd;
    (void)what;
    if (s->cut_at >= 0 && (long)s->next == s->cut_at) {
        /* Mid-stream disconnect: the socket closes without an end. */
        struct evhttp_connection *conn = evhttp_request_get_connection(s->req);
        evhttp_connection_free(conn);
        stream_free(s);
        return;
    }
    if (s->next == json_array_size(s->chunks)) {
        evhttp_send_reply_end(s->req);
        stream_free(s);
        return;
    }
    struct evbuffer *out = evbuffer_new();
    const char *line = json_string_value(json_array_get(s->chunks, s->next++));
    evbuffer_add(out, line, strlen(line));
    evhttp_send_reply_chunk(s->req, out);
    evbuffer_free(out);
    evtimer_add(s->timer, &tv);
}

struct delayed {
    struct evhttp_request *req;
    json_t *reply;
    json_t *request;
};

static void answer(struct evhttp_request *req, const json_t *r, const json_t *request);

static void on_delay(evutil_socket_t fd, short what, void *arg)
{
    struct delayed *d = arg;

    (void)fd;
    (void)what;
    answer(d->req, d->reply, d->request);
    json_decref(d->reply);
    json_decref(d->request);
    free(d);
}

static void answer(struct evhttp_request *req, const json_t *r, const json_t *request)
{
    const char *model = json_string_value(json_object_get(request, "model")) ?: "fake-model";
    int status = json_is_integer(json_object_get(r, "status"))
                     ? (int)json_integer_value(json_object_get(r, "status")) : 200;
    int stream = json_is_true(json_object_get(request, "stream"));
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    if (json_is_string(json_object_get(r, "body_bytes"))) {
        /* Raw bytes, each character below 256 one byte: bodies that are
         * not UTF-8 (a proxy's error page in Latin-1). */
        struct evbuffer *out = evbuffer_new();
        const unsigned char *p = (const unsigned char *)json_string_value(
            json_object_get(r, "body_bytes"));
        while (*p) {
            unsigned char c = *p < 0x80 ? *p : (unsigned char)(((p[0] & 0x03) << 6) | (p[1] & 0x3f));
            p += *p < 0x80 ? 1 : 2;
            evbuffer_add(out, &c, 1);
        }
        evhttp_add_header(h, "Content-Type", "text/html");
        evhttp_send_reply(req, status, "Scripted", out);
        evbuffer_free(out);
        return;
    }
    if (status != 200) {
        if (json_object_get(r, "retry_after")) {
            char v[32];
            snprintf(v, sizeof(v), "%lld",
                     (long long)json_integer_value(json_object_get(r, "retry_after")));
            evhttp_add_header(h, "Retry-After", v);
        }
        reply_json(req, status, json_pack("{s:{s:s, s:s}}", "error", "message",
                                          status == 429 ? "Rate limit reached" : "Upstream failed",
                                          "type", status == 429 ? "rate_limit" : "server_error"));
        return;
    }
    if (json_is_true(json_object_get(r, "malformed"))) {
        struct evbuffer *out = evbuffer_new();
        const char *junk = stream ? "data: {\"choices\": [{\"delta\": {\"content\": \"Hel\n\n"
                                  : "<html>502 Bad Gateway</html>";
        evhttp_add_header(h, "Content-Type", stream ? "text/event-stream" : "application/json");
        evbuffer_add(out, junk, strlen(junk));
        evhttp_send_reply(req, 200, "OK", out);
        evbuffer_free(out);
        return;
    }
    if (!stream) {
        reply_json(req, 200, whole_reply(r, model));
        return;
    }
    struct stream *s = calloc(1, sizeof(*s));
    s->req = req;
    s->chunks = stream_chunks(r, model);
    s->delay_ms = (long)json_integer_value(json_object_get(r, "chunk_delay_ms"));
    s->cut_at = json_object_get(r, "disconnect_after")
                    ? 1 + (long)json_integer_value(json_object_get(r, "disconnect_after"))
                    : -1;
    s->timer = evtimer_new(base, stream_step, s);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(req, 200, "OK");
    stream_step(-1, 0, s);
}

static void on_chat(struct evhttp_request *req)
{
    char *text = body_of(req);
    json_t *request = text ? json_loads(text, 0, NULL) : NULL;
    json_t *r;

    free(text);
    if (!json_is_object(request)) {
        json_decref(request);
        reply_json(req, 400, json_pack("{s:{s:s}}", "error", "message", "the body is not JSON"));
        return;
    }
    json_array_append(requests, request);
    r = json_array_get(script, served < json_array_size(script) ? served
                                                                : json_array_size(script) - 1);
    served++;
    if (!r)
        r = json_pack("{s:s}", "text", "The fake model has no script.");
    else
        json_incref(r);
    if (json_integer_value(json_object_get(r, "delay_ms")) > 0) {
        long ms = (long)json_integer_value(json_object_get(r, "delay_ms"));
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        struct delayed *d = calloc(1, sizeof(*d));
        d->req = req;
        d->reply = r;
        d->request = request;
        event_base_once(base, -1, EV_TIMEOUT, on_delay, d, &tv);
        return;
    }
    answer(req, r, request);
    json_decref(r);
    json_decref(request);
}

/* A bag of words hashed into 16 dimensions: the same words, the same
 * vector; shared words, similar vectors. Each request is recorded. */
static void on_embeddings(struct evhttp_request *req)
{
    char *text = body_of(req);
    json_t *request = text ? json_loads(text, 0, NULL) : NULL, *vec;
    const char *input = json_string_value(json_object_get(request, "input"));
    double v[16] = {0};
    char word[64];
    size_t n = 0;

    free(text);
    if (!input) {
        json_decref(request);
        reply_json(req, 400, json_pack("{s:{s:s}}", "error", "message", "input is required"));
        return;
    }
    json_array_append(requests, request);
    for (const char *p = input;; p++) {
        if (*p && ((*p | 32) >= 'a' && (*p | 32) <= 'z')) {
            if (n < sizeof(word) - 1)
                word[n++] = (char)(*p | 32);
            continue;
        }
        if (n) {
            unsigned h = 2166136261u;
            for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char)word[i]) * 16777619u;
            v[h % 16] += 1;
            n = 0;
        }
        if (!*p)
            break;
    }
    vec = json_array();
    for (int i = 0; i < 16; i++)
        json_array_append_new(vec, json_real(v[i]));
    reply_json(req, 200, json_pack("{s:s, s:[{s:s, s:i, s:o}], s:O?}", "object", "list", "data",
                                   "object", "embedding", "index", 0, "embedding", vec, "model",
                                   json_object_get(request, "model")));
    json_decref(request);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

    (void)arg;
    if (cmd == EVHTTP_REQ_POST && !strcmp(path, "/v1/chat/completions")) {
        on_chat(req);
    } else if (cmd == EVHTTP_REQ_POST && !strcmp(path, "/v1/embeddings")) {
        on_embeddings(req);
    } else if (cmd == EVHTTP_REQ_GET && !strcmp(path, "/v1/models")) {
        reply_json(req, 200, json_pack("{s:s, s:[{s:s, s:s, s:s}]}", "object", "list", "data",
                                       "id", "fake-model", "object", "model", "owned_by",
                                       "keel-tests"));
    } else if (cmd == EVHTTP_REQ_POST && !strcmp(path, "/_script")) {
        char *text = body_of(req);
        json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        if (!json_is_array(doc)) {
            json_decref(doc);
            reply_json(req, 400, json_pack("{s:s}", "error", "the script must be a JSON array"));
            return;
        }
        json_decref(script);
        script = doc;
        served = 0;
        json_array_clear(requests);
        reply_json(req, 200, json_pack("{s:I}", "replies", (json_int_t)json_array_size(doc)));
    } else if (cmd == EVHTTP_REQ_GET && !strcmp(path, "/_requests")) {
        reply_json(req, 200, json_incref(requests));
    } else {
        reply_json(req, 404, json_pack("{s:{s:s}}", "error", "message", "not found"));
    }
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

int main(int argc, char **argv)
{
    const char *port_file = NULL;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    FILE *f;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--port-file") && i + 1 < argc)
            port_file = argv[++i];
    if (!port_file) {
        fprintf(stderr, "usage: keel-fake-openai --port-file FILE\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    script = json_array();
    requests = json_array();
    base = event_base_new();
    http = evhttp_new(base);
    evhttp_set_gencb(http, on_request, NULL);
    evhttp_set_max_body_size(http, BODY_MAX);
    if (!(sock = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0)) ||
        getsockname(evhttp_bound_socket_get_fd(sock), (struct sockaddr *)&sin, &len)) {
        fprintf(stderr, "keel-fake-openai: cannot listen\n");
        return 1;
    }
    if (!(f = fopen(port_file, "w"))) {
        fprintf(stderr, "keel-fake-openai: cannot write %s\n", port_file);
        return 1;
    }
    fprintf(f, "%d\n", ntohs(sin.sin_port));
    fclose(f);
    struct event *term = evsignal_new(base, SIGTERM, on_signal, base);
    struct event *intr = evsignal_new(base, SIGINT, on_signal, base);
    event_add(term, NULL);
    event_add(intr, NULL);
    event_base_dispatch(base);
    event_free(term);
    event_free(intr);
    evhttp_free(http);
    event_base_free(base);
    json_decref(script);
    json_decref(requests);
    return 0;
}
