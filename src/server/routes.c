/*
 * routes.c — the request dispatcher and the small read-only routes:
 * the page, health, the packs as models, a conversation, a turn's
 * decision log.
 */
#include <event2/buffer.h>
#include <string.h>

#include "server/server_int.h"

static void route_page(struct evhttp_request *req)
{
    struct evbuffer *out = evbuffer_new();

    if (!out) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/html; charset=utf-8");
    evbuffer_add(out, server_page, strlen(server_page));
    http_log(req, 200, NULL);
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}

static void route_health(struct server *srv, struct evhttp_request *req)
{
    http_json(req, srv->draining ? 503 : 200,
              json_pack("{s:s, s:I, s:I, s:I, s:i}", "status", srv->draining ? "draining" : "ok",
                        "queue_depth", (json_int_t)queue_depth(srv->queue), "running_turns",
                        (json_int_t)bus_open_turns(srv->bus), "open_streams",
                        (json_int_t)srv->n_streams, "workers", srv->n_workers));
}

/* OpenAI's model list: one model per served pack. */
static void route_models(struct server *srv, struct evhttp_request *req)
{
    json_t *data = json_array();

    for (int i = 0; data && i < srv->n_packs; i++)
        json_array_append_new(data, json_pack("{s:s, s:s, s:i, s:s}", "id", srv->packs[i],
                                              "object", "model", "created", 0, "owned_by",
                                              "keel"));
    http_json(req, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

void route_conversation(struct server *srv, struct evhttp_request *req, const char *id)
{
    struct store_conversation conv;
    struct keel_error err;
    json_t *turns = NULL, *state = NULL;

    keel_error_clear(&err);
    if (store_load_conversation(srv->store, id, &conv, &err)) {
        http_keel_error(req, &err);
        return;
    }
    if (store_list_turns(srv->store, id, &turns, &err)) {
        store_conversation_release(&conv);
        http_keel_error(req, &err);
        return;
    }
    state = json_loads(conv.state_json ? conv.state_json : "null", JSON_DECODE_ANY, NULL);
    http_json(req, 200,
              json_pack("{s:s, s:s, s:i, s:I, s:I, s:o, s:o, s:n}", "id", conv.id, "pack",
                        conv.pack, "turns", conv.turns, "created_ms", (json_int_t)conv.created_ms,
                        "updated_ms", (json_int_t)conv.updated_ms, "state",
                        state ? state : json_null(), "messages", turns, "active_scenario"));
    store_conversation_release(&conv);
}

void route_decision(struct server *srv, struct evhttp_request *req, const char *cid)
{
    struct keel_error err;
    json_t *turn = NULL;

    keel_error_clear(&err);
    if (store_get_turn(srv->store, cid, &turn, &err)) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200,
              json_pack("{s:O, s:O, s:O, s:O}", "correlation_id",
                        json_object_get(turn, "correlation_id"), "conversation_id",
                        json_object_get(turn, "conversation_id"), "turn",
                        json_object_get(turn, "turn"), "decision",
                        json_object_get(turn, "decision")));
    json_decref(turn);
}

/* "/v1/stream/ID" with prefix "/v1/stream/" → ID when it is one path
 * segment of sane length. */
static const char *tail_id(const char *path, const char *prefix, char *out, size_t n)
{
    size_t len = strlen(prefix);
    const char *id = path + len;

    if (strncmp(path, prefix, len) || !*id || strchr(id, '/') || strlen(id) >= n)
        return NULL;
    snprintf(out, n, "%s", id);
    return out;
}

void route_request(struct evhttp_request *req, void *arg)
{
    struct server *srv = arg;
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    char path[512], id[160];
    int get = method == EVHTTP_REQ_GET, post = method == EVHTTP_REQ_POST;

    http_path(req, path, sizeof(path));
    if (!strcmp(path, "/") || !strcmp(path, "/index.html")) {
        if (get)
            route_page(req);
        else
            http_error(req, 405, "method_not_allowed", NULL, "use GET");
        return;
    }
    if (!strcmp(path, "/healthz")) {
        route_health(srv, req);
        return;
    }
    if (!strcmp(path, "/v1/models") && get) {
        route_models(srv, req);
        return;
    }
    if (!strcmp(path, "/v1/chat")) {
        if (post)
            route_chat(srv, req);
        else
            http_error(req, 405, "method_not_allowed", NULL, "use POST");
        return;
    }
    if (tail_id(path, "/v1/responses/", id, sizeof(id)) && get) {
        route_response(srv, req, id);
        return;
    }
    if (tail_id(path, "/v1/stream/", id, sizeof(id)) && get) {
        route_stream(srv, req, id);
        return;
    }
    if (tail_id(path, "/v1/conversations/", id, sizeof(id)) && get) {
        route_conversation(srv, req, id);
        return;
    }
    if (!strncmp(path, "/v1/turns/", 10) && strlen(path) > 19 &&
        !strcmp(path + strlen(path) - 9, "/decision") && get) {
        snprintf(id, sizeof(id), "%.*s", (int)(strlen(path) - 19), path + 10);
        route_decision(srv, req, id);
        return;
    }
    http_error(req, 404, "not_found", "path", "no route %s %s",
               method == EVHTTP_REQ_GET ? "GET" : post ? "POST" : "for this method", path);
}
