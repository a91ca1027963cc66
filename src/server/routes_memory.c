/*
 * routes_memory.c — long-term memory over HTTP (seed 003):
 *
 *   POST /v1/memory/runs        {task, outcome, summary?, references?,
 *                               artifacts?, id?, conversation_id?} → the
 *                               decision (201 when a run was stored, 200
 *                               for NOT); owner and editor keys only
 *   GET  /v1/memory/search      ?q=TEXT&limit=N → {runs: [...]}, never
 *                               superseded runs
 *   GET  /v1/memory/decisions   ?limit=N&offset=M → {decisions: [...]},
 *                               newest first
 *
 * Memory belongs to users: a run posted here is the key's user's, one
 * made from a turn the conversation's owner's; search, decisions and
 * admission see only the caller's runs (with --auth none: the runs
 * without an owner, as the CLI).
 *
 * Admission runs on the loop thread with the rules judge (a decision
 * takes well under a millisecond); a model judge is `keel memory add
 * --llm-url` (docs/memory.md).
 */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/json.h"
#include "llm/llm.h"
#include "memory/memory.h"
#include "server/server_int.h"

/* Memory over the loop thread's store, made on first use; its embedder
 * is KEEL_EMBED_URL/_MODEL/_KEY_ENV when set (as for keel memory), else
 * the hashed one. */
static int memory_ready(struct server *srv, struct evhttp_request *req)
{
    struct memory_conf conf;
    struct llm_conf ec;
    struct keel_error err;
    int rc;

    if (srv->memory)
        return 1;
    keel_error_clear(&err);
    memory_conf_default(&conf);
    if (!(rc = llm_conf_load_as(NULL, "memory.embedder", "KEEL_EMBED", NULL, &ec, &err))) {
        if (ec.url)
            rc = llm_new(&ec, &srv->embedder, &err);
        llm_conf_release(&ec);
    }
    conf.embedder = srv->embedder;
    if (rc || memory_open(srv->store, &conf, NULL, &srv->memory, &err)) {
        http_keel_error(req, &err);
        return 0;
    }
    return 1;
}

/* Whose memory `who` reads and writes: its user; with --auth none, no
 * owner (the local user, as the CLI). */
static const char *memory_owner(const struct principal *who)
{
    return who->open ? NULL : who->user;
}

static const char *string_field(struct evhttp_request *req, const json_t *body, const char *key,
                                int *bad)
{
    const json_t *v = json_object_get(body, key);

    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v)) {
        http_error(req, 400, "bad_request", key, "must be a string");
        *bad = 1;
        return NULL;
    }
    return json_string_value(v);
}

void route_memory_add(struct server *srv, struct evhttp_request *req, const struct principal *who)
{
    static const char *const keys[] = {"task", "outcome", "summary", "references", "artifacts",
                                       "id", "conversation_id", NULL};
    struct memory_input in = {0};
    struct keel_error err;
    json_t *body = NULL, *out = NULL;
    int bad = 0;

    if (!who->open && !strcmp(who->role, "viewer")) {
        http_error(req, 403, "forbidden", "role", "a viewer key may not write to memory");
        return;
    }
    if (http_body_json(req, &body) || !memory_ready(srv, req))
        goto out;
    keel_error_clear(&err);
    if (keel_json_check_keys(body, keys, "body", &err)) {
        http_keel_error(req, &err);
        goto out;
    }
    in.task = string_field(req, body, "task", &bad);
    in.outcome = bad ? NULL : string_field(req, body, "outcome", &bad);
    in.summary = bad ? NULL : string_field(req, body, "summary", &bad);
    in.id = bad ? NULL : string_field(req, body, "id", &bad);
    in.conversation_id = bad ? NULL : string_field(req, body, "conversation_id", &bad);
    if (bad)
        goto out;
    if (in.conversation_id && !who->open &&
        !conversation_check(srv, req, in.conversation_id, who, NULL))
        goto out;   /* another user's conversation: 404, as if absent */
    in.owner = memory_owner(who);   /* the posting key's user */
    in.references = json_object_get(body, "references");
    in.artifacts = json_object_get(body, "artifacts");
    in.now_ms = keel_clock_now();
    if (memory_admit(srv->memory, &in, &out, &err)) {
        http_keel_error(req, &err);
        goto out;
    }
    http_json(req, strcmp(json_string_value(json_object_get(out, "decision")), "NOT") ? 201 : 200,
              out);
out:
    json_decref(body);
}

void route_memory_search(struct server *srv, struct evhttp_request *req,
                         const struct principal *who)
{
    char q[4096], limit_text[16], *end;
    const char *query = http_query(req, "q", q, sizeof(q));
    const char *limit_s = http_query(req, "limit", limit_text, sizeof(limit_text));
    long limit = limit_s ? strtol(limit_s, &end, 10) : 10;
    struct keel_error err;
    json_t *runs = NULL;

    if (!query || !*query) {
        http_error(req, 400, "bad_request", "q", "is required: what to look for");
        return;
    }
    if (limit_s && (*end || limit < 1 || limit > MEMORY_SEARCH_MAX)) {
        http_error(req, 400, "bad_request", "limit", "must be a number from 1 to %d",
                   MEMORY_SEARCH_MAX);
        return;
    }
    if (!memory_ready(srv, req))
        return;
    keel_error_clear(&err);
    if (memory_search(srv->memory, memory_owner(who), query, (int)limit, &runs, &err)) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200, json_pack("{s:o}", "runs", runs));
}

void route_memory_decisions(struct server *srv, struct evhttp_request *req,
                            const struct principal *who)
{
    char a[16], b[16], *end;
    const char *limit_s = http_query(req, "limit", a, sizeof(a));
    const char *offset_s = http_query(req, "offset", b, sizeof(b));
    long limit = limit_s ? strtol(limit_s, &end, 10) : 50, offset = 0;
    struct keel_error err;
    json_t *list = NULL;

    if (limit_s && (*end || limit < 1 || limit > STORE_LIMIT_MAX)) {
        http_error(req, 400, "bad_request", "limit", "must be a number from 1 to %d",
                   STORE_LIMIT_MAX);
        return;
    }
    if (offset_s && ((offset = strtol(offset_s, &end, 10)) < 0 || *end || offset > 1000000000L)) {
        http_error(req, 400, "bad_request", "offset", "must be a number from 0 on");
        return;
    }
    keel_error_clear(&err);
    if (store_memory_decisions(srv->store, memory_owner(who), (int)limit, (int)offset, &list,
                               &err)) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200, json_pack("{s:o}", "decisions", list));
}
