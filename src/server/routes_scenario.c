/*
 * routes_scenario.c — the active scenario over HTTP (seed 004):
 *
 *   GET    /v1/conversations/{id}/scenario   {conversation_id, active_scenario,
 *                                            scenario_summary}
 *   PATCH  /v1/conversations/{id}/scenario   the body is a patch (a JSON object),
 *                                            merged as update_scenario merges
 *   DELETE /v1/conversations/{id}/scenario   no scenario any more
 *
 * Changes happen outside a turn through scenario_store_change(): one
 * store transaction that replaces the scenario only if its version is
 * still the one read (a turn that wrote in between makes the change read
 * again, up to three times, then 409). Owner and editor keys may change it; viewers get
 * 403, other users 404 (as if it did not exist).
 *
 *   GET    /v1/shared/{token}/scenario       the same, read only, for a share link The loop thread needs each served pack's
 * scenario rules (deep keys, cap, summary), loaded at start.
 */
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "server/server_int.h"

int server_scenarios_load(struct server *srv, struct keel_error *err)
{
    int rc;

    for (int i = 0; i < srv->n_packs; i++)
        if ((rc = pack_load(srv->opt.packs_dir, srv->packs[i], &srv->scenario_packs[i], err)) ||
            (rc = scenario_conf_load(srv->scenario_packs[i], &srv->scenarios[i], err)))
            return rc;
    return KEEL_OK;
}

void server_scenarios_release(struct server *srv)
{
    for (int i = 0; i < SERVER_PACKS_MAX; i++) {
        scenario_conf_release(&srv->scenarios[i]);
        pack_free(srv->scenario_packs[i]);
        srv->scenario_packs[i] = NULL;
    }
}

const struct scenario_conf *server_scenario_conf(const struct server *srv, const char *pack)
{
    static const struct scenario_conf defaults = {.max_bytes = SCENARIO_BYTES_DEFAULT};
    int i = pack ? server_pack_index(srv, pack) : -1;

    return i >= 0 && srv->scenario_packs[i] ? &srv->scenarios[i] : &defaults;
}

int server_scenario_json(const struct server *srv, const struct store_conversation *conv,
                         json_t **scenario, json_t **summary)
{
    struct keel_error err;

    *summary = NULL;
    keel_error_clear(&err);
    if (scenario_parse(conv->scenario_json, scenario, &err))
        return -1;
    if (!*scenario && !(*scenario = json_null()))
        return -1;
    if (!(*summary = scenario_summary_json(server_scenario_conf(srv, conv->pack), *scenario))) {
        json_decref(*scenario);
        *scenario = NULL;
        return -1;
    }
    return 0;
}

json_t *server_scenario_summary(struct server *srv, const char *conversation_id,
                                const json_t *scenario)
{
    struct store_conversation conv;
    struct keel_error err;
    json_t *out;

    keel_error_clear(&err);
    if (!json_is_object(scenario) || !conversation_id ||
        store_load_conversation(srv->store, conversation_id, &conv, &err))
        return json_null();
    out = scenario_summary_json(server_scenario_conf(srv, conv.pack), scenario);
    store_conversation_release(&conv);
    return out;
}

static void reply(struct server *srv, struct evhttp_request *req,
                  const struct store_conversation *conv)
{
    json_t *scenario = NULL, *summary = NULL;

    if (server_scenario_json(srv, conv, &scenario, &summary)) {
        http_error(req, 500, "internal", "active_scenario", "the stored scenario is unreadable");
        return;
    }
    http_json(req, 200, json_pack("{s:s, s:o, s:o}", "conversation_id", conv->id,
                                  "active_scenario", scenario, "scenario_summary", summary));
}

/* The PATCH body: any JSON value (the merge refuses what is not an
 * object, naming "patch"), within the body cap. NULL: the error was sent. */
static json_t *patch_body(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *type = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    struct keel_error err;
    json_t *patch = NULL;
    int rc;

    if (len > SERVER_BODY_MAX) {
        http_error(req, 413, "too_large", "patch", "the body is larger than %d bytes",
                   SERVER_BODY_MAX);
        return NULL;
    }
    if (type && strncmp(type, "application/json", 16) &&
        strncmp(type, "application/merge-patch+json", 28)) {
        http_error(req, 415, "unsupported_media_type", "Content-Type",
                   "the patch must be application/json");
        return NULL;
    }
    keel_error_clear(&err);
    rc = keel_json_parse_any(len ? (const char *)evbuffer_pullup(in, (ev_ssize_t)len) : "", len,
                             SERVER_BODY_MAX, "patch", &patch, &err);
    if (rc) {
        http_error(req, rc == KEEL_ENOMEM ? 503 : 400, rc == KEEL_ENOMEM ? "no_memory" : "bad_json",
                   "patch", "%s", err.message);
        return NULL;
    }
    return patch;
}

void route_scenario(struct server *srv, struct evhttp_request *req, const char *id,
                    const struct principal *who)
{
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    struct store_conversation conv;
    struct keel_error err;
    json_t *patch = NULL, *now = NULL;

    keel_error_clear(&err);
    if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_PATCH && method != EVHTTP_REQ_DELETE) {
        http_error(req, 405, "method_not_allowed", NULL, "use GET, PATCH or DELETE");
        return;
    }
    if (!conversation_check(srv, req, id, who,
                            method == EVHTTP_REQ_GET ? NULL : "change the scenario of"))
        return;
    if (method == EVHTTP_REQ_GET) {
        if (store_load_conversation(srv->store, id, &conv, &err)) {
            http_keel_error(req, &err);
            return;
        }
        reply(srv, req, &conv);
        store_conversation_release(&conv);
        return;
    }
    if (method == EVHTTP_REQ_PATCH && !(patch = patch_body(req)))
        return;
    if (store_load_conversation(srv->store, id, &conv, &err) ||
        scenario_store_change(srv->store, server_scenario_conf(srv, conv.pack), id, conv.pack,
                              patch, &now, &err)) {
        http_keel_error(req, &err);
    } else {
        http_json(req, 200,
                  json_pack("{s:s, s:o, s:o}", "conversation_id", id, "active_scenario",
                            now ? json_incref(now) : json_null(), "scenario_summary",
                            scenario_summary_json(server_scenario_conf(srv, conv.pack), now)));
    }
    store_conversation_release(&conv);
    json_decref(now);
    json_decref(patch);
}

int route_scenario_shared(struct server *srv, struct evhttp_request *req, const char *path,
                          int get)
{
    char *id;
    const char *rest;
    struct store_conversation conv;
    struct keel_error err;

    if (strncmp(path, "/v1/shared/", 11) || !(rest = strchr(path + 11, '/')) ||
        strcmp(rest, "/scenario"))
        return 0;
    if (!get) {
        http_error(req, 405, "method_not_allowed", NULL,
                   "a share link's scenario is read only: use GET");
        return 1;
    }
    if (!share_conversation(srv, req, path + 11, (size_t)(rest - (path + 11)), &id))
        return 1;
    keel_error_clear(&err);
    if (store_load_conversation(srv->store, id, &conv, &err)) {
        http_error(req, 404, "not_found", "token", "no such share link");
    } else {
        reply(srv, req, &conv);
        store_conversation_release(&conv);
    }
    keel_free(id);
    return 1;
}
