/*
 * routes.c — the request dispatcher and the small read-only routes:
 * the page, health, the packs as models, a conversation, a turn's
 * decision log.
 */
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "server/auth.h"
#include "server/server_int.h"

/* ---- who is asking -------------------------------------------------------- */

int principal_may_read(const struct principal *who, const char *owner)
{
    return who->open || (owner && *owner && !strcmp(owner, who->user));
}

int conversation_check(struct server *srv, struct evhttp_request *req, const char *id,
                       const struct principal *who, const char *forbidden_for_viewer)
{
    struct store_conversation conv;
    struct keel_error err;
    int mine;

    keel_error_clear(&err);
    if (forbidden_for_viewer && !who->open && !strcmp(who->role, "viewer")) {
        http_error(req, 403, "forbidden", "role", "a viewer cannot %s conversations",
                   forbidden_for_viewer);
        return 0;
    }
    if (store_load_conversation(srv->store, id, &conv, &err)) {
        http_keel_error(req, &err);
        return 0;
    }
    mine = principal_may_read(who, conv.owner);
    store_conversation_release(&conv);
    if (!mine)   /* another user's: as if absent */
        http_error(req, 404, "not_found", "conversation_id", "no conversation \"%s\"", id);
    return mine;
}

int turn_owner(struct server *srv, const char *cid, char *owner, size_t n, struct keel_error *err)
{
    struct store_conversation conv;
    json_t *turn = NULL;
    int rc;

    if (bus_owner(srv->bus, cid, owner, n))
        return KEEL_OK;
    if ((rc = store_get_turn(srv->store, cid, &turn, err)))
        return rc;
    rc = store_load_conversation(srv->store,
                                 json_string_value(json_object_get(turn, "conversation_id")),
                                 &conv, err);
    json_decref(turn);
    if (rc)
        return rc;
    snprintf(owner, n, "%s", conv.owner ? conv.owner : "");
    store_conversation_release(&conv);
    return KEEL_OK;
}

/* A token bucket per key: twice the rate at once, refilled at the rate
 * (--rate, default SERVER_RATE_PER_S). Over it: 429 with Retry-After. */
static int rate_ok(struct server *srv, struct evhttp_request *req, const char *key_id)
{
    struct timespec ts;
    int64_t now;
    json_t *b;
    double tokens, rate = srv->opt.rate > 0 ? srv->opt.rate : SERVER_RATE_PER_S, burst = 2 * rate;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (!srv->buckets && !(srv->buckets = json_object()))
        return 1;   /* no memory for accounting: let it through */
    b = json_object_get(srv->buckets, key_id);
    if (!b) {
        if (json_object_size(srv->buckets) > 100000)
            json_object_clear(srv->buckets);   /* a bound on the table; buckets refill anyway */
        b = json_pack("{s:f, s:I}", "tokens", burst, "at", (json_int_t)now);
        if (!b || json_object_set_new(srv->buckets, key_id, b))
            return 1;
    }
    tokens = json_real_value(json_object_get(b, "tokens")) +
             (double)(now - json_integer_value(json_object_get(b, "at"))) * rate / 1000.0;
    if (tokens > burst)
        tokens = burst;
    json_object_set_new(b, "at", json_integer(now));
    if (tokens < 1.0) {
        char after[16];
        json_object_set_new(b, "tokens", json_real(tokens));
        snprintf(after, sizeof(after), "%d", (int)((1.0 - tokens) / rate) + 1);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", after);
        http_error(req, 429, "rate_limited", "Authorization",
                   "more than %.0f requests per second with this key", rate);
        return 0;
    }
    json_object_set_new(b, "tokens", json_real(tokens - 1.0));
    return 1;
}

/* The key of "Authorization: Bearer TOKEN" (or, for EventSource, which
 * cannot send headers, ?access_token= on a stream). 0 and a 401 sent
 * when there is no valid key. */
static int authenticate(struct server *srv, struct evhttp_request *req, int stream,
                        struct principal *who)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    char query[160], hash[AUTH_HASH_MAX];
    const char *token = NULL;
    struct store_key key;
    struct keel_error err;

    memset(who, 0, sizeof(*who));
    if (srv->opt.auth_none) {
        who->open = 1;
        return 1;
    }
    if (h && !strncasecmp(h, "Bearer ", 7))
        token = h + 7;
    else if (stream)
        token = http_query(req, "access_token", query, sizeof(query));
    evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
    if (!token || !*token || strlen(token) >= AUTH_TOKEN_MAX) {
        http_error(req, 401, "unauthorized", "Authorization",
                   "send an API key: Authorization: Bearer TOKEN (keel keys create)");
        return 0;
    }
    auth_token_hash(token, hash);
    keel_error_clear(&err);
    if (store_key_find(srv->store, hash, &key, &err)) {
        if (err.code == KEEL_ENOTFOUND)
            http_error(req, 401, "unauthorized", "Authorization", "the API key is not valid");
        else
            http_keel_error(req, &err);
        return 0;
    }
    if (key.revoked_ms) {
        store_key_release(&key);
        http_error(req, 401, "unauthorized", "Authorization", "the API key was revoked");
        return 0;
    }
    evhttp_remove_header(evhttp_request_get_output_headers(req), "WWW-Authenticate");
    snprintf(who->user, sizeof(who->user), "%s", key.user);
    snprintf(who->role, sizeof(who->role), "%s", key.role);
    snprintf(who->key_id, sizeof(who->key_id), "%s", key.id);
    store_key_release(&key);
    return rate_ok(srv, req, who->key_id);
}

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

void route_conversation(struct server *srv, struct evhttp_request *req, const char *id,
                        const struct principal *who)
{
    struct store_conversation conv;
    struct keel_error err;
    json_t *turns = NULL, *state = NULL, *scenario = NULL, *summary = NULL;

    keel_error_clear(&err);
    if (store_load_conversation(srv->store, id, &conv, &err)) {
        http_keel_error(req, &err);
        return;
    }
    if (!principal_may_read(who, conv.owner)) {   /* another user's: as if absent */
        store_conversation_release(&conv);
        http_error(req, 404, "not_found", "conversation_id", "no conversation \"%s\"", id);
        return;
    }
    if (store_list_turns(srv->store, id, &turns, &err)) {
        store_conversation_release(&conv);
        http_keel_error(req, &err);
        return;
    }
    state = json_loads(conv.state_json ? conv.state_json : "null", JSON_DECODE_ANY, NULL);
    server_scenario_json(srv, &conv, &scenario, &summary);
    http_json(req, 200,
              json_pack("{s:s, s:s, s:i, s:I, s:I, s:o, s:o, s:o, s:o}", "id", conv.id, "pack",
                        conv.pack, "turns", conv.turns, "created_ms", (json_int_t)conv.created_ms,
                        "updated_ms", (json_int_t)conv.updated_ms, "state",
                        state ? state : json_null(), "messages", turns, "active_scenario",
                        scenario ? scenario : json_null(), "scenario_summary",
                        summary ? summary : json_null()));
    store_conversation_release(&conv);
}

void route_decision(struct server *srv, struct evhttp_request *req, const char *cid,
                    const struct principal *who)
{
    struct keel_error err;
    json_t *turn = NULL;
    char owner[160];

    keel_error_clear(&err);
    if (turn_owner(srv, cid, owner, sizeof(owner), &err) ||
        store_get_turn(srv->store, cid, &turn, &err)) {
        http_keel_error(req, &err);
        return;
    }
    if (!principal_may_read(who, owner)) {
        json_decref(turn);
        http_error(req, 404, "not_found", "correlation_id", "no turn \"%s\"", cid);
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

/* POST /v1/conversations/{id}/share → {token, url}: a read-only link.
 * Viewers may read, not share. */
void route_share(struct server *srv, struct evhttp_request *req, const char *id,
                 const struct principal *who)
{
    struct keel_error err;
    char key[AUTH_TOKEN_MAX], token[AUTH_TOKEN_MAX], hash[AUTH_HASH_MAX], url[160];

    keel_error_clear(&err);
    if (!conversation_check(srv, req, id, who, "share"))
        return;
    if (auth_token_new(key, sizeof(key), &err)) {
        http_keel_error(req, &err);
        return;
    }
    snprintf(token, sizeof(token), "shr_%s", key + 5);   /* a share link, not an API key */
    auth_token_hash(token, hash);
    if (store_share_put(srv->store, hash, id, who->open ? NULL : who->user, keel_clock_now(),
                        &err)) {
        http_keel_error(req, &err);
        return;
    }
    snprintf(url, sizeof(url), "/v1/shared/%s", token);
    http_json(req, 201, json_pack("{s:s, s:s, s:s}", "conversation_id", id, "token", token,
                                  "url", url));
}

/* See server_int.h. */
int share_conversation(struct server *srv, struct evhttp_request *req, const char *token,
                       size_t len, char **id)
{
    char copy[AUTH_TOKEN_MAX], hash[AUTH_HASH_MAX];
    struct keel_error err;

    *id = NULL;
    if (len == 0 || len >= sizeof(copy))
        goto absent;
    memcpy(copy, token, len);
    copy[len] = '\0';
    auth_token_hash(copy, hash);
    keel_error_clear(&err);
    if (!store_share_find(srv->store, hash, id, &err))
        return 1;
absent:
    http_error(req, 404, "not_found", "token", "no such share link");
    return 0;
}

/* GET /v1/shared/{token}: the conversation, read only, for whoever holds
 * the link (no API key needed). */
void route_shared(struct server *srv, struct evhttp_request *req, const char *token)
{
    struct principal anyone = {1, "", "", ""};
    char *id;

    if (!share_conversation(srv, req, token, strlen(token), &id))
        return;
    route_conversation(srv, req, id, &anyone);
    keel_free(id);
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

/* Nonzero for a path some route serves (with another method, perhaps). */
static int known_path(const char *path)
{
    static const char *const exact[] = {"/", "/index.html", "/healthz", "/metrics", "/v1/models",
                                        "/v1/chat", "/v1/chat/completions", "/v1/conversations",
                                        "/v1/metrics/quality", "/v1/metrics/quality/history",
                                        "/v1/metrics/quality/reset", "/v1/memory/runs",
                                        "/v1/memory/search", "/v1/memory/decisions", NULL};
    static const char *const prefixes[] = {"/v1/responses/", "/v1/stream/", "/v1/conversations/",
                                           "/v1/turns/", "/v1/shared/", NULL};

    for (const char *const *p = exact; *p; p++)
        if (!strcmp(path, *p))
            return 1;
    for (const char *const *p = prefixes; *p; p++)
        if (!strncmp(path, *p, strlen(*p)))
            return 1;
    return 0;
}

void route_request(struct evhttp_request *req, void *arg)
{
    struct server *srv = arg;
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    char path[512], id[160];
    int get = method == EVHTTP_REQ_GET, post = method == EVHTTP_REQ_POST;
    struct principal who;

    /* the loop is running: a turn that ends meanwhile need not wake it,
     * as serve_loop looks at the bus before the loop waits again */
    atomic_store_explicit(&srv->loop_asleep, 0, memory_order_relaxed);
    http_path(req, path, sizeof(path));
    if (route_artifacts_shared(srv, req, path, get) || route_scenario_shared(srv, req, path, get))
        return;
    if (tail_id(path, "/v1/shared/", id, sizeof(id)) && get) {
        route_shared(srv, req, id);
        return;
    }
    if (!strncmp(path, "/v1/", 4) &&
        !authenticate(srv, req, !strncmp(path, "/v1/stream/", 11), &who))
        return;
    if (route_artifacts(srv, req, path, get, &who))
        return;
    if (!strcmp(path, "/") || !strcmp(path, "/index.html")) {
        if (get)
            route_page(req);
        else
            http_error(req, 405, "method_not_allowed", NULL, "use GET");
        return;
    }
    if (!strcmp(path, "/healthz") && (get || method == EVHTTP_REQ_HEAD)) {
        route_health(srv, req);
        return;
    }
    if (!strcmp(path, "/metrics") && get) {
        route_prometheus(srv, req);
        return;
    }
    if (!strcmp(path, "/v1/models") && get) {
        route_models(srv, req);
        return;
    }
    if (!strcmp(path, "/v1/chat/completions")) {
        if (post)
            route_completions(srv, req, &who);
        else
            http_error(req, 405, "method_not_allowed", NULL, "use POST");
        return;
    }
    if (!strcmp(path, "/v1/chat")) {
        if (post)
            route_chat(srv, req, &who);
        else
            http_error(req, 405, "method_not_allowed", NULL, "use POST");
        return;
    }
    if (tail_id(path, "/v1/responses/", id, sizeof(id)) && get) {
        route_response(srv, req, id, &who);
        return;
    }
    if (tail_id(path, "/v1/stream/", id, sizeof(id)) && get) {
        route_stream(srv, req, id, &who);
        return;
    }
    if (!strcmp(path, "/v1/conversations")) {
        if (get)
            route_conversations_list(srv, req, &who);
        else if (post)
            route_conversations_create(srv, req, &who);
        else
            http_error(req, 405, "method_not_allowed", NULL, "use GET or POST");
        return;
    }
    if (!strncmp(path, "/v1/conversations/", 18) && strlen(path) > 27 &&
        !strcmp(path + strlen(path) - 9, "/scenario")) {
        snprintf(id, sizeof(id), "%.*s", (int)(strlen(path) - 27), path + 18);
        route_scenario(srv, req, id, &who);
        return;
    }
    if (tail_id(path, "/v1/conversations/", id, sizeof(id)) && get) {
        route_conversation(srv, req, id, &who);
        return;
    }
    if (tail_id(path, "/v1/conversations/", id, sizeof(id)) &&
        method == EVHTTP_REQ_DELETE) {
        route_conversations_delete(srv, req, id, &who);
        return;
    }
    if (!strcmp(path, "/v1/metrics/quality") && get) {
        route_quality(srv, req, 0, &who);
        return;
    }
    if (!strcmp(path, "/v1/metrics/quality/history") && get) {
        route_quality_history(srv, req);
        return;
    }
    if (!strcmp(path, "/v1/metrics/quality/reset") && post) {
        route_quality(srv, req, 1, &who);
        return;
    }
    if (!strcmp(path, "/v1/memory/runs") && post) {
        route_memory_add(srv, req, &who);
        return;
    }
    if (!strcmp(path, "/v1/memory/search") && get) {
        route_memory_search(srv, req, &who);
        return;
    }
    if (!strcmp(path, "/v1/memory/decisions") && get) {
        route_memory_decisions(srv, req, &who);
        return;
    }
    if (!strncmp(path, "/v1/conversations/", 18) && strlen(path) > 24 &&
        !strcmp(path + strlen(path) - 6, "/share") && post) {
        snprintf(id, sizeof(id), "%.*s", (int)(strlen(path) - 24), path + 18);
        route_share(srv, req, id, &who);
        return;
    }
    if (!strncmp(path, "/v1/turns/", 10) && strlen(path) > 19 &&
        !strcmp(path + strlen(path) - 9, "/decision") && get) {
        snprintf(id, sizeof(id), "%.*s", (int)(strlen(path) - 19), path + 10);
        route_decision(srv, req, id, &who);
        return;
    }
    if (!strncmp(path, "/v1/shared/", 11))
        snprintf(path, sizeof(path), "/v1/shared/\u2026");   /* never echo a share token */
    if (known_path(path)) {
        http_error(req, 405, "method_not_allowed", NULL, "%s does not take this method", path);
        return;
    }
    http_error(req, 404, "not_found", "path", "no route %s", path);
}
