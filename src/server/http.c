/*
 * http.c — small helpers over evhttp: JSON replies and errors, capped
 * JSON bodies, paths and query parameters, one log line per request.
 */
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/log.h"
#include "server/server_int.h"

static const char *method_name(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_PATCH: return "PATCH";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    default: return "OTHER";
    }
}

void http_path(struct evhttp_request *req, char *out, size_t n)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;

    snprintf(out, n, "%s", path && *path ? path : "/");
}

const char *http_query(struct evhttp_request *req, const char *name, char *buf, size_t n)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    struct evkeyvalq params;
    const char *value;

    if (!query)
        return NULL;
    params.tqh_first = NULL;   /* TAILQ_INIT, without sys/queue.h */
    params.tqh_last = &params.tqh_first;
    if (evhttp_parse_query_str(query, &params))
        return NULL;
    value = evhttp_find_header(&params, name);
    if (value)
        snprintf(buf, n, "%s", value);
    evhttp_clear_headers(&params);
    return value ? buf : NULL;
}

void http_log(struct evhttp_request *req, int status, const char *correlation_id)
{
    char path[256];

    if (!keel_log_enabled(KEEL_LOG_INFO))
        return;
    http_path(req, path, sizeof(path));
    if (!strncmp(path, "/v1/shared/", 11))
        snprintf(path, sizeof(path), "/v1/shared/…");   /* a share token is a credential */
    keel_log(KEEL_LOG_INFO, "http.request",
             json_pack("{s:s, s:s, s:i, s:s?}", "method", method_name(req), "path", path,
                       "status", status, "correlation_id", correlation_id));
}

/* evbuffer_add_reference's cleanup: the body text goes when sent. */
static void free_text(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    keel_free((void *)data);
}

void http_json_text(struct evhttp_request *req, int status, char *text, size_t len,
                    const char *correlation_id)
{
    struct evbuffer *out = evbuffer_new();

    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    if (text)
        text[len++] = '\n';
    if (!out || !text || evbuffer_add_reference(out, text, len, free_text, NULL)) {
        keel_free(text);
        evhttp_send_error(req, 500, "out of memory");
        http_log(req, 500, NULL);
    } else {
        http_log(req, status, correlation_id);
        evhttp_send_reply(req, status, status == 429 ? "Too Many Requests" : NULL, out);
    }
    if (out)
        evbuffer_free(out);
}

/* The body text (a turn's result is tens of KB) is handed to the reply
 * by reference, with its newline in the room keel_json_dumps left after
 * its NUL: no second buffer and copy per response. */
void http_json(struct evhttp_request *req, int status, json_t *body)
{
    size_t len = 0;
    char *text = body ? keel_json_dumps_len(body, JSON_COMPACT | JSON_REAL_PRECISION(10), 1, &len)
                      : NULL;

    http_json_text(req, status, text, len,
                   json_string_value(json_object_get(body, "correlation_id")));
    json_decref(body);
}

void http_error(struct evhttp_request *req, int status, const char *code, const char *field,
                const char *fmt, ...)
{
    char message[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    http_json(req, status,
              json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", code, "message", message,
                        "field", field && *field ? field : NULL));
}

void http_keel_error(struct evhttp_request *req, const struct keel_error *err)
{
    static const struct {
        int code, status;
        const char *name;
    } map[] = {
        {KEEL_EINVAL, 400, "bad_request"}, {KEEL_EPARSE, 400, "bad_request"},
        {KEEL_ENOTFOUND, 404, "not_found"}, {KEEL_ETOOBIG, 413, "too_large"},
        {KEEL_EFAIL, 409, "conflict"},      {KEEL_ENOMEM, 503, "no_memory"},
    };
    int status = 500;
    const char *name = "internal";

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (map[i].code == err->code) {
            status = map[i].status;
            name = map[i].name;
        }
    http_error(req, status, name, err->field, "%s", err->message);
}

int http_body_json(struct evhttp_request *req, json_t **out)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    struct keel_error err;
    const char *type = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    char *text;
    int rc;

    if (len > SERVER_BODY_MAX) {
        http_error(req, 413, "too_large", "body", "the body is larger than %d bytes",
                   SERVER_BODY_MAX);
        return -1;
    }
    if (type && strncmp(type, "application/json", 16)) {
        http_error(req, 415, "unsupported_media_type", "Content-Type",
                   "the body must be application/json");
        return -1;
    }
    text = (char *)evbuffer_pullup(in, (ev_ssize_t)len);
    keel_error_clear(&err);
    if ((rc = keel_json_parse(text ? text : "", len, SERVER_BODY_MAX, "body", out, &err))) {
        http_error(req, rc == KEEL_ENOMEM ? 503 : 400, rc == KEEL_ENOMEM ? "no_memory" : "bad_json",
                   "body", "%s", err.message);
        return -1;
    }
    if (!json_is_object(*out)) {
        http_error(req, 400, "bad_request", "body", "the body must be a JSON object, not %s",
                   keel_json_type_name(*out));
        json_decref(*out);
        return -1;
    }
    return 0;
}
