/*
 * routes_openai.c — POST /v1/chat/completions, OpenAI's chat API over
 * keel turns, so existing clients (the openai packages, tools that speak
 * /v1/chat/completions) can talk to keel.
 *
 *   model       the pack ("scholar"); GET /v1/models lists them
 *   messages    the last user message is the turn (roles: system,
 *               developer, user, assistant); keel keeps the
 *               conversation itself, so earlier messages are not replayed
 *   user        the conversation: an existing id continues it, a new id
 *               names a new one (also the X-Keel-Conversation header);
 *               absent: a new conversation each time
 *   stream      true: chat.completion.chunk lines ending with [DONE]
 *
 * The answer is keel's, decided by code; sampling options (temperature,
 * max_tokens, …) are accepted and have no effect. The response carries
 * the conversation in the X-Keel-Conversation header and a `keel`
 * object (conversation_id, correlation_id, sources, decision).
 */
#include <event2/keyvalq_struct.h>
#include <string.h>

#include "core/clock.h"
#include "core/id.h"
#include "core/utf8.h"
#include "pipeline/pipeline.h"
#include "server/server_int.h"

json_t *openai_chunk(const char *cid, const char *model, const char *content, int role,
                     const char *finish)
{
    char id[KEEL_ID_MAX + 16];
    json_t *delta = json_object();

    snprintf(id, sizeof(id), "chatcmpl-%s", cid);
    if (delta && role)
        json_object_set_new(delta, "role", json_string("assistant"));
    if (delta && content)
        json_object_set_new(delta, "content", json_string(content));
    return json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:o, s:s?}]}", "id", id, "object",
                     "chat.completion.chunk", "created",
                     (json_int_t)(keel_clock_now() / 1000), "model", model, "choices", "index", 0,
                     "delta", delta ? delta : json_object(), "finish_reason", finish);
}

json_t *openai_completion(const char *model, const json_t *result)
{
    const char *cid = json_string_value(json_object_get(result, "correlation_id"));
    char id[KEEL_ID_MAX + 16];

    snprintf(id, sizeof(id), "chatcmpl-%s", cid ? cid : "");
    return json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{s:s, s:O}, s:s}],"
                     " s:{s:i, s:i, s:i}, s:{s:O, s:O, s:O, s:O}}",
                     "id", id, "object", "chat.completion", "created",
                     (json_int_t)(keel_clock_now() / 1000), "model", model, "choices", "index", 0,
                     "message", "role", "assistant", "content",
                     json_object_get(result, "answer"), "finish_reason", "stop", "usage",
                     "prompt_tokens", 0, "completion_tokens", 0, "total_tokens", 0, "keel",
                     "conversation_id", json_object_get(result, "conversation_id"),
                     "correlation_id", json_object_get(result, "correlation_id"), "sources",
                     json_object_get(result, "sources"), "decision",
                     json_object_get(result, "decision"));
}

/* The roles keel takes: the turn is the last user message; system,
 * developer and assistant messages are read as valid and left alone
 * (keel keeps the conversation itself). "tool" and "function" messages
 * answer tool calls, which keel never asks a client for. */
static const char *const message_roles[] = {"system", "developer", "user", "assistant"};

/* Checks that every message is an object with one of message_roles.
 * Sends the error naming the message (messages[i], messages[i].role)
 * and returns -1; 0 when all are fine. */
static int check_messages(struct evhttp_request *req, const json_t *messages)
{
    const json_t *m;
    size_t i;

    json_array_foreach(messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        char field[48];
        size_t r = 0, n;
        if (!json_is_object(m)) {
            snprintf(field, sizeof(field), "messages[%zu]", i);
            http_error(req, 400, "bad_request", field, "each message must be an object");
            return -1;
        }
        while (role && r < sizeof(message_roles) / sizeof(message_roles[0]) &&
               strcmp(role, message_roles[r]))
            r++;
        if (role && r < sizeof(message_roles) / sizeof(message_roles[0]))
            continue;
        snprintf(field, sizeof(field), "messages[%zu].role", i);
        if (!role) {
            http_error(req, 400, "bad_request", field,
                       "is required: one of system, developer, user, assistant");
            return -1;
        }
        n = utf8_valid_prefix(role, strnlen(role, 40));
        http_error(req, 400, "bad_request", field,
                   "\"%.*s\" is not a role keel takes: one of system, developer, user, "
                   "assistant", (int)n, role);
        return -1;
    }
    return 0;
}

/* The content of the last message with role "user": a string, or the
 * text parts of a content array. Sends the error and returns NULL. */
static const char *last_user_message(struct evhttp_request *req, const json_t *messages,
                                     char *buf, size_t n)
{
    const json_t *msg = NULL, *content;

    if (!json_is_array(messages) || !json_array_size(messages)) {
        http_error(req, 400, "bad_request", "messages", "must be a non-empty array");
        return NULL;
    }
    if (check_messages(req, messages))
        return NULL;
    for (size_t i = json_array_size(messages); i-- > 0;) {
        const json_t *m = json_array_get(messages, i);
        if (!strcmp(json_string_value(json_object_get(m, "role")), "user")) {
            msg = m;
            break;
        }
    }
    if (!msg) {
        http_error(req, 400, "bad_request", "messages", "holds no user message");
        return NULL;
    }
    content = json_object_get(msg, "content");
    if (json_is_string(content))
        return json_string_value(content);
    if (json_is_array(content)) {   /* [{"type": "text", "text": "…"}] */
        size_t len = 0;
        const json_t *part;
        size_t i;
        buf[0] = '\0';
        json_array_foreach(content, i, part) {
            const char *text = json_string_value(json_object_get(part, "text"));
            if (text && len < n)
                len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "\n" : "", text);
        }
        if (len)
            return buf;
    }
    http_error(req, 400, "bad_request", "messages",
               "the last user message has no text content");
    return NULL;
}

void route_completions(struct server *srv, struct evhttp_request *req,
                       const struct principal *who)
{
    char text[2 * PIPELINE_MESSAGE_MAX];
    const char *header = evhttp_find_header(evhttp_request_get_input_headers(req),
                                            "X-Keel-Conversation");
    json_t *body = NULL, *model, *user;
    const char *message, *conversation;
    char cid[KEEL_ID_MAX], conv[KEEL_ID_MAX + 96];
    struct job *job;
    int stream;

    if (http_body_json(req, &body))
        return;
    model = json_object_get(body, "model");
    user = json_object_get(body, "user");
    if (!json_is_string(model) || !server_pack_served(srv, json_string_value(model))) {
        http_error(req, 400, "bad_request", "model",
                   model ? "is not a pack this server serves (GET /v1/models)"
                         : "is required: a pack name (GET /v1/models)");
        goto out;
    }
    if (!(message = last_user_message(req, json_object_get(body, "messages"), text,
                                      sizeof(text))))
        goto out;
    if (!*message || strlen(message) > PIPELINE_MESSAGE_MAX) {
        http_error(req, strlen(message) ? 413 : 400, strlen(message) ? "too_large" : "bad_request",
                   "messages",
                   "the last user message must be 1 to %d bytes", PIPELINE_MESSAGE_MAX);
        goto out;
    }
    if (user && !json_is_string(user)) {
        http_error(req, 400, "bad_request", "user", "must be a string");
        goto out;
    }
    conversation = header && *header ? header : json_string_value(user);
    stream = json_is_true(json_object_get(body, "stream"));
    job = chat_job(srv, req, who, message, strlen(message), conversation,
                   json_string_value(model), 1);
    if (!job)
        goto out;
    job->quiet = !stream;   /* the completion's id is first told in the answer */
    if (chat_enqueue(srv, req, who, job, cid, conv, sizeof(conv))) {
        job_free(job);
        goto out;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Keel-Conversation", conv);
    if (stream)
        stream_open(srv, req, cid, 0, FORMAT_OPENAI, json_string_value(model), who->key_id);
    else
        chat_wait(srv, req, cid, FORMAT_OPENAI, json_string_value(model));
out:
    json_decref(body);
}
