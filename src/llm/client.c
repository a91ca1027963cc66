/*
 * client.c — one chat/completions call: POST, then the reply read either
 * as Server-Sent Events (OpenAI's chat.completion.chunk lines, ending
 * with "data: [DONE]") or as one chat.completion object, into text and
 * tool calls. Retries, caps and the breaker are described in llm.h.
 *
 * A stream's tool calls arrive in pieces: the first delta of call k
 * carries its id and name, later ones more of its arguments text; they
 * are joined here by their index.
 */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/alloc.h"
#include "core/blocking.h"
#include "core/json.h"
#include "llm/llm.h"

#define BACKOFF_FIRST_MS 250
#define ERROR_BODY_MAX 4096
#define CALL_TIMEOUTS 10          /* a whole call: at most this many timeout_ms */

struct llm {
    struct llm_conf conf;
    char endpoint[512];             /* …/chat/completions */
    char embeddings[512];           /* …/embeddings */
};

struct call_tool {
    char id[96];
    char name[96];
    struct keel_buf args;
};

/* One attempt's reading state. */
struct attempt {
    const char *endpoint;
    int stream;                     /* ask for an event stream */
    json_t *raw;                    /* a whole reply kept as it is (embeddings), or NULL */
    int keep_raw;
    CURL *easy;
    struct llm_reply *reply;
    llm_token_fn on_token;
    void *ctx;
    long status;
    int sse;                        /* the body is an event stream */
    int decided;                    /* status and content type looked at */
    int done;                       /* [DONE] or a finish_reason seen */
    long retry_after_s;
    long last_byte_ms;              /* monotonic: when the server last sent anything */
    struct sse_parser parser;
    struct keel_buf body;           /* a whole reply, or an error body */
    struct call_tool tools[LLM_TOOL_CALLS_MAX];
    int n_tools;
    struct keel_error err;          /* why reading stopped */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_start(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    keel_blocking_begin();
    while (ms > 0 && nanosleep(&ts, &ts))
        ;
    keel_blocking_end();
}

void llm_reply_init(struct llm_reply *reply)
{
    memset(reply, 0, sizeof(*reply));
    keel_buf_init(&reply->text, LLM_TEXT_MAX);
}

void llm_reply_release(struct llm_reply *reply)
{
    keel_buf_release(&reply->text);
    json_decref(reply->tool_calls);
    reply->tool_calls = NULL;
}

static char *dup_or_null(const char *s)
{
    return s ? keel_strdup(s) : NULL;
}

int llm_new(const struct llm_conf *conf, struct llm **out, struct keel_error *err)
{
    struct llm *llm;

    if (!conf->url || !conf->model)
        return keel_error_set(err, KEEL_EINVAL, conf->url ? "llm.model" : "llm.url",
                              "is required for a model client");
    pthread_once(&curl_once, curl_start);
    if (!curl_ready)
        return keel_error_set(err, KEEL_EIO, "llm", "libcurl could not start");
    if (!(llm = keel_calloc(1, sizeof(*llm))))
        return keel_error_set(err, KEEL_ENOMEM, "llm", "out of memory");
    llm->conf = *conf;
    llm->conf.url = dup_or_null(conf->url);
    llm->conf.model = dup_or_null(conf->model);
    llm->conf.key_env = dup_or_null(conf->key_env);
    llm->conf.system_prompt = dup_or_null(conf->system_prompt);
    if (!llm->conf.url || !llm->conf.model || (conf->key_env && !llm->conf.key_env) ||
        (conf->system_prompt && !llm->conf.system_prompt)) {
        llm_free(llm);
        return keel_error_set(err, KEEL_ENOMEM, "llm", "out of memory");
    }
    snprintf(llm->endpoint, sizeof(llm->endpoint), "%s/chat/completions", llm->conf.url);
    snprintf(llm->embeddings, sizeof(llm->embeddings), "%s/embeddings", llm->conf.url);
    *out = llm;
    return KEEL_OK;
}

void llm_free(struct llm *llm)
{
    if (!llm)
        return;
    llm_conf_release(&llm->conf);
    keel_free(llm);
}

const struct llm_conf *llm_get_conf(const struct llm *llm)
{
    return &llm->conf;
}

/* ---- reading a reply ----------------------------------------------------------- */

static int add_text(struct attempt *a, const char *text, size_t n)
{
    if (!n)
        return KEEL_OK;
    if (keel_buf_add(&a->reply->text, text, n))
        return keel_error_set(&a->err, KEEL_ETOOBIG, "llm",
                              "the model's reply is longer than %u bytes", LLM_TEXT_MAX);
    if (a->on_token) {
        a->reply->streamed = 1;
        a->on_token(a->ctx, text, n);
    }
    return KEEL_OK;
}

/* Copies `src` into `dst` of `cap` bytes, cut before a character that
 * does not fit (a model's names are UTF-8 of any length). */
static void copy_utf8(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);

    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Adds a piece of tool call `index` (a stream's delta or a whole call). */
static int add_tool(struct attempt *a, int index, const json_t *call)
{
    const json_t *fn = json_object_get(call, "function");
    const char *id = json_string_value(json_object_get(call, "id"));
    const char *name = json_string_value(json_object_get(fn, "name"));
    const json_t *args = json_object_get(fn, "arguments");
    struct call_tool *t;

    if (index < 0 || index >= LLM_TOOL_CALLS_MAX)
        return KEEL_OK;   /* more calls than keel takes from one reply: the rest are dropped */
    while (a->n_tools <= index)
        keel_buf_init(&a->tools[a->n_tools++].args, LLM_ARGS_MAX);
    t = &a->tools[index];
    if (id)
        copy_utf8(t->id, sizeof(t->id), id);
    if (name)   /* sent once, in the call's first delta; a repeat replaces it */
        copy_utf8(t->name, sizeof(t->name), name);
    if (json_is_string(args)) {
        if (keel_buf_add(&t->args, json_string_value(args), json_string_length(args)))
            return keel_error_set(&a->err, KEEL_ETOOBIG, "llm",
                                  "a tool call's arguments are longer than %u bytes", LLM_ARGS_MAX);
    } else if (args && !json_is_null(args)) {
        /* Some servers send the arguments as an object, not as text. */
        if (keel_json_append(&t->args, args, JSON_COMPACT))
            return keel_error_set(&a->err, KEEL_ETOOBIG, "llm",
                                  "a tool call's arguments are longer than %u bytes", LLM_ARGS_MAX);
    }
    return KEEL_OK;
}

static int api_error(struct attempt *a, const json_t *error)
{
    const char *message = json_string_value(json_object_get(error, "message"));

    return keel_error_set(&a->err, KEEL_EIO, "llm", "the model server reported an error: %.200s",
                          message ? message : "(no message)");
}

static void set_finish(struct attempt *a, const json_t *choice)
{
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));

    if (finish) {
        snprintf(a->reply->finish_reason, sizeof(a->reply->finish_reason), "%s", finish);
        a->done = 1;
    }
}

/* The text and tool calls of a stream's delta or of a whole reply's
 * message (whose calls come in order, without an index). */
static int read_message(struct attempt *a, const json_t *msg, int stream)
{
    const json_t *content = json_object_get(msg, "content"), *call;
    int rc = json_is_string(content)
                 ? add_text(a, json_string_value(content), json_string_length(content))
                 : KEEL_OK;
    size_t i;

    json_array_foreach(json_object_get(msg, "tool_calls"), i, call) {
        const json_t *index = json_object_get(call, "index");
        const char *id = json_string_value(json_object_get(call, "id"));
        int k = (int)i;
        if (rc)
            break;
        if (json_is_integer(index)) {
            k = (int)json_integer_value(index);
        } else if (stream) {
            /* No index (some servers send one call per chunk): a new id
             * starts a new call, pieces without one continue the last. */
            k = a->n_tools ? a->n_tools - 1 : 0;
            if (id && a->n_tools && strcmp(id, a->tools[k].id))
                k = a->n_tools;
        }
        rc = add_tool(a, k, call);
    }
    return rc;
}

/* One chat.completion.chunk. */
static int on_event(void *ctx, const char *event, const char *data, size_t n,
                    struct keel_error *err)
{
    struct attempt *a = ctx;
    const json_t *choice;
    json_t *chunk = NULL;
    int rc;

    (void)event;
    if (n == 6 && !memcmp(data, "[DONE]", 6)) {
        a->done = 1;
        return KEEL_OK;
    }
    if (keel_json_parse(data, n, LLM_SSE_DATA_MAX, "stream", &chunk, err)) {
        snprintf(err->message, sizeof(err->message), "a stream event is not JSON");
        err->code = KEEL_EIO;
        return KEEL_EIO;
    }
    if (json_object_get(chunk, "error")) {
        rc = api_error(a, json_object_get(chunk, "error"));
        *err = a->err;
        json_decref(chunk);
        return rc;
    }
    choice = json_array_get(json_object_get(chunk, "choices"), 0);
    rc = read_message(a, json_object_get(choice, "delta"), 1);
    set_finish(a, choice);
    json_decref(chunk);
    if (rc)
        *err = a->err;
    return rc;
}

/* A whole chat.completion. */
static int read_whole(struct attempt *a)
{
    const json_t *choice, *msg;
    json_t *doc = NULL;
    struct keel_error perr;
    int rc;

    keel_error_clear(&perr);
    if (keel_json_parse(a->body.data, a->body.len, a->body.max, "reply", &doc, &perr))
        return keel_error_set(&a->err, KEEL_EIO, "llm", "the reply is not JSON: %.200s",
                              perr.message);
    if (json_object_get(doc, "error")) {
        rc = api_error(a, json_object_get(doc, "error"));
        json_decref(doc);
        return rc;
    }
    if (a->keep_raw) {
        a->raw = doc;
        a->done = 1;
        return KEEL_OK;
    }
    choice = json_array_get(json_object_get(doc, "choices"), 0);
    msg = json_object_get(choice, "message");
    if (!json_is_object(msg)) {
        json_decref(doc);
        return keel_error_set(&a->err, KEEL_EIO, "llm",
                              "the reply has no choices[0].message: not a chat completion");
    }
    rc = read_message(a, msg, 0);
    set_finish(a, choice);
    a->done = 1;
    json_decref(doc);
    return rc;
}

/* Looks at the status and content type once, at the first body byte. */
static void decide(struct attempt *a)
{
    char *type = NULL;

    curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &a->status);
    curl_easy_getinfo(a->easy, CURLINFO_CONTENT_TYPE, &type);
    a->sse = a->status == 200 && type && !strncasecmp(type, "text/event-stream", 17);
    if (a->status != 200)
        a->body.max = ERROR_BODY_MAX;
    a->decided = 1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct attempt *a = arg;
    size_t n = size * nmemb;

    a->last_byte_ms = mono_ms();
    if (!a->decided)
        decide(a);
    if (a->sse)
        return sse_feed(&a->parser, data, n, &a->err) ? 0 : n;
    if (keel_buf_add(&a->body, data, n)) {
        if (a->status != 200)
            return n;   /* an error page: its start is enough */
        keel_error_set(&a->err, KEEL_ETOOBIG, "llm", "the reply is larger than %zu bytes",
                       a->body.max);
        return 0;
    }
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct attempt *a = arg;
    size_t n = size * nmemb;

    a->last_byte_ms = mono_ms();
    if (n > 12 && !strncasecmp(data, "Retry-After:", 12)) {
        char value[32];
        size_t k = n - 12 < sizeof(value) - 1 ? n - 12 : sizeof(value) - 1;
        memcpy(value, data + 12, k);
        value[k] = '\0';
        long s = strtol(value, NULL, 10);
        a->retry_after_s = s > 0 && s < 3600 ? s : 0;
    }
    return n;
}

/* The reply's tool calls as [{id, name, arguments}]. */
static int collect_tools(struct attempt *a)
{
    if (!a->n_tools)
        return KEEL_OK;
    if (!(a->reply->tool_calls = json_array()))
        return KEEL_ENOMEM;
    for (int i = 0; i < a->n_tools; i++) {
        struct call_tool *t = &a->tools[i];
        char id[32];
        if (!t->name[0])
            continue;   /* an index the model never named */
        snprintf(id, sizeof(id), "call%05d", i + 1);   /* 9 letters and digits */
        if (json_array_append_new(a->reply->tool_calls,
                                  json_pack("{s:s, s:s, s:s#}", "id", t->id[0] ? t->id : id,
                                            "name", t->name, "arguments", t->args.data,
                                            (int)t->args.len)))
            return KEEL_ENOMEM;
    }
    return KEEL_OK;
}

static void attempt_release(struct attempt *a)
{
    json_decref(a->raw);
    a->raw = NULL;
    sse_release(&a->parser);
    keel_buf_release(&a->body);
    for (int i = 0; i < a->n_tools; i++)
        keel_buf_release(&a->tools[i].args);
    a->n_tools = 0;
}

enum outcome { DONE, RETRY, FAIL };

/* Runs the transfer, ending it when the server stays silent — before its
 * first byte or between two — for longer than `silence_ms` (*silent set);
 * a long answer that keeps coming is not cut. */
static CURLcode perform(struct attempt *a, long silence_ms, int *silent)
{
    CURLM *m = curl_multi_init();
    CURLcode code = CURLE_OK;
    CURLMsg *msg;
    int running = 1, left;

    if (!m || curl_multi_add_handle(m, a->easy) != CURLM_OK) {
        if (m)
            curl_multi_cleanup(m);
        return CURLE_OUT_OF_MEMORY;
    }
    a->last_byte_ms = mono_ms();
    keel_blocking_begin();   /* the model answers in its own time */
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK) {
            code = CURLE_RECV_ERROR;
            break;
        }
        if (!running)
            break;
        if (mono_ms() - a->last_byte_ms > silence_ms) {
            *silent = 1;
            code = CURLE_OPERATION_TIMEDOUT;
            break;
        }
        curl_multi_poll(m, NULL, 0, 50, NULL);
    }
    keel_blocking_end();
    while (!*silent && (msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE)
            code = msg->data.result;
    curl_multi_remove_handle(m, a->easy);
    curl_multi_cleanup(m);
    return code;
}

/* One HTTP attempt. */
static enum outcome attempt_once(struct llm *llm, const char *body, struct curl_slist *headers,
                                 struct attempt *a, struct keel_error *err)
{
    const struct llm_conf *c = &llm->conf;
    CURLcode code;
    int silent = 0;
    char curl_msg[CURL_ERROR_SIZE] = "";

    if (!(a->easy = curl_easy_init())) {
        keel_error_set(err, KEEL_ENOMEM, "llm", "libcurl could not make a handle");
        return FAIL;
    }
    sse_init(&a->parser, on_event, a);
    keel_buf_init(&a->body, c->max_response_bytes);
    curl_easy_setopt(a->easy, CURLOPT_URL, a->endpoint);
    curl_easy_setopt(a->easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(a->easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(a->easy, CURLOPT_NOSIGNAL, 1L);
    /* timeout_ms bounds each silence (perform); a whole call, ten times it. */
    curl_easy_setopt(a->easy, CURLOPT_TIMEOUT_MS, c->timeout_ms * CALL_TIMEOUTS);
    curl_easy_setopt(a->easy, CURLOPT_CONNECTTIMEOUT_MS,
                     c->timeout_ms < 10000 ? c->timeout_ms : 10000L);
    curl_easy_setopt(a->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(a->easy, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(a->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(a->easy, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(a->easy, CURLOPT_ERRORBUFFER, curl_msg);
    curl_easy_setopt(a->easy, CURLOPT_USERAGENT, "keel");
    code = perform(a, c->timeout_ms, &silent);
    if (!a->decided && code == CURLE_OK)
        decide(a);   /* an empty body */
    curl_easy_cleanup(a->easy);
    a->easy = NULL;
    a->reply->attempts++;
    a->reply->http_status = a->status;
    if (a->err.code) {   /* a cap, a chunk that is not JSON, an error event */
        *err = a->err;
        return FAIL;
    }
    if (code != CURLE_OK) {
        if (silent && !a->decided)
            keel_error_set(err, KEEL_EIO, "llm", "the model did not answer within %ld ms",
                           c->timeout_ms);
        else if (silent)
            keel_error_set(err, KEEL_EIO, "llm", "the model's stream stalled for %ld ms",
                           c->timeout_ms);
        else if (code == CURLE_OPERATION_TIMEDOUT)
            keel_error_set(err, KEEL_EIO, "llm", "the model did not finish within %ld ms",
                           c->timeout_ms * CALL_TIMEOUTS);
        else if (a->reply->streamed || a->sse)
            keel_error_set(err, KEEL_EIO, "llm", "the model's stream broke off: %s",
                           curl_msg[0] ? curl_msg : curl_easy_strerror(code));
        else
            keel_error_set(err, KEEL_EIO, "llm", "cannot reach the model at %s: %s", c->url,
                           curl_msg[0] ? curl_msg : curl_easy_strerror(code));
        return FAIL;
    }
    if (a->status == 429 || a->status >= 500) {
        keel_error_set(err, KEEL_EIO, "llm", "the model server answered HTTP %ld%s%.160s",
                       a->status, a->body.len ? ": " : "", a->body.data);
        return RETRY;   /* nothing was passed on: a non-200 body is never text */
    }
    if (a->status != 200) {
        keel_error_set(err, KEEL_EIO, "llm", "the model server answered HTTP %ld%s%.200s",
                       a->status, a->body.len ? ": " : "", a->body.data);
        return FAIL;
    }
    if (!a->sse && read_whole(a)) {
        *err = a->err;
        return FAIL;
    }
    if (!a->done) {
        keel_error_set(err, KEEL_EIO, "llm",
                       "the model's stream ended before the reply was complete");
        return FAIL;
    }
    if (collect_tools(a))
        return keel_error_set(err, KEEL_ENOMEM, "llm", "out of memory"), FAIL;
    if (!a->keep_raw && !a->reply->text.len && !json_array_size(a->reply->tool_calls)) {
        keel_error_set(err, KEEL_EIO, "llm", "the reply had neither text nor tool calls");
        return FAIL;
    }
    return DONE;
}

static char *request_body(const struct llm *llm, const json_t *body)
{
    json_t *copy = json_copy((json_t *)body);
    char *text = NULL;

    if (copy && !json_object_set_new(copy, "model", json_string(llm->conf.model)) &&
        !json_object_set_new(copy, "stream", json_boolean(llm->conf.stream)))
        text = keel_json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    return text;
}

/* Sends `text` to `endpoint` with the retries and the breaker; a
 * whole reply's JSON goes to *raw when `raw` is given. Frees `text`. */
static int exchange(struct llm *llm, const char *endpoint, char *text, int stream,
                    llm_token_fn on_token, void *ctx, struct llm_reply *reply, json_t **raw,
                    struct keel_error *err)
{
    const struct llm_conf *c = &llm->conf;
    struct curl_slist *headers = NULL;
    long start = mono_ms(), wait_s = 0, backoff = BACKOFF_FIRST_MS;
    char auth[600];
    int rc = KEEL_OK;

    if (!llm_breaker_allow(c->url, &wait_s)) {
        keel_free(text);
        return keel_error_set(err, KEEL_EIO, "llm",
                              "the model server failed %d times in a row; not asking it for "
                              "another %ld s", c->breaker_failures, wait_s);
    }
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, stream ? "Accept: text/event-stream"
                                                : "Accept: application/json");
    if (c->key_env && getenv(c->key_env) && *getenv(c->key_env)) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", getenv(c->key_env));
        headers = curl_slist_append(headers, auth);
    }
    keel_blocking_begin();   /* every attempt and the waits between: one wait */
    for (int retries = c->retries;; retries--) {
        struct attempt a;
        enum outcome o;

        memset(&a, 0, sizeof(a));
        a.endpoint = endpoint;
        a.stream = stream;
        a.keep_raw = raw != NULL;
        a.reply = reply;
        a.on_token = on_token;
        a.ctx = ctx;
        keel_error_clear(&a.err);
        keel_error_clear(err);
        o = attempt_once(llm, text, headers, &a, err);
        if (o == DONE && raw) {
            *raw = a.raw;
            a.raw = NULL;
        }
        attempt_release(&a);
        if (o == DONE)
            break;
        if (o == FAIL || retries <= 0) {
            rc = err->code ? err->code : KEEL_EIO;
            break;
        }
        long wait = a.retry_after_s ? a.retry_after_s * 1000 : backoff;
        sleep_ms(wait < c->max_backoff_ms ? wait : c->max_backoff_ms);
        backoff *= 2;
        keel_buf_reset(&reply->text);
    }
    keel_blocking_end();
    reply->elapsed_ms = mono_ms() - start;
    /* A server that refuses one request (4xx but 429) is up: that does
     * not count against it for every other user. */
    llm_breaker_record(c->url,
                       rc == KEEL_OK || (reply->http_status >= 400 && reply->http_status < 500 &&
                                         reply->http_status != 429),
                       c->breaker_failures, c->breaker_cooldown_ms);
    curl_slist_free_all(headers);
    keel_free(text);
    return rc;
}

int llm_chat(struct llm *llm, const json_t *body, llm_token_fn on_token, void *ctx,
             struct llm_reply *reply, struct keel_error *err)
{
    char *text;

    if (!json_is_object(body))
        return keel_error_set(err, KEEL_EINVAL, "body", "must be a JSON object");
    /* Made before the breaker is asked: a probe it lets out must end
     * in llm_breaker_record. */
    if (!(text = request_body(llm, body)))
        return keel_error_set(err, KEEL_ENOMEM, "llm", "out of memory");
    return exchange(llm, llm->endpoint, text, llm->conf.stream, on_token, ctx, reply, NULL, err);
}

int llm_embed(struct llm *llm, const char *input, float **out, int *dim, struct keel_error *err)
{
    struct llm_reply reply;
    json_t *body = json_pack("{s:s, s:s}", "model", llm->conf.model, "input", input), *doc = NULL;
    const json_t *vec, *x;
    char *text = body ? keel_json_dumps(body, JSON_COMPACT) : NULL;
    double norm = 0;
    size_t i, n;
    int rc;

    json_decref(body);
    if (!text)
        return keel_error_set(err, KEEL_ENOMEM, "llm", "out of memory");
    llm_reply_init(&reply);
    rc = exchange(llm, llm->embeddings, text, 0, NULL, NULL, &reply, &doc, err);
    llm_reply_release(&reply);
    if (rc)
        return rc;
    vec = json_object_get(json_array_get(json_object_get(doc, "data"), 0), "embedding");
    n = json_array_size(vec);
    if (!json_is_array(vec) || n < 1 || n > LLM_EMBED_DIM_MAX) {
        json_decref(doc);
        return keel_error_set(err, KEEL_EIO, "llm",
                              "the reply has no data[0].embedding of 1 to %d numbers",
                              LLM_EMBED_DIM_MAX);
    }
    if (!(*out = keel_malloc(n * sizeof(float)))) {
        json_decref(doc);
        return keel_error_set(err, KEEL_ENOMEM, "llm", "out of memory");
    }
    json_array_foreach(vec, i, x) {
        if (!json_is_number(x)) {
            keel_free(*out);
            *out = NULL;
            json_decref(doc);
            return keel_error_set(err, KEEL_EIO, "llm", "embedding[%zu] is not a number", i);
        }
        (*out)[i] = (float)json_number_value(x);
        norm += json_number_value(x) * json_number_value(x);
    }
    for (i = 0; norm > 0 && i < n; i++)   /* L2-normalised: a dot product is a cosine */
        (*out)[i] = (float)((*out)[i] / sqrt(norm));
    *dim = (int)n;
    json_decref(doc);
    return KEEL_OK;
}
