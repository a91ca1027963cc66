/*
 * routes_artifacts.c — artifacts and facts over HTTP (seed 001):
 *
 *   GET /v1/conversations/{id}/artifacts   ?type=research_brief&last=1 →
 *                                         {conversation_id, data: [{id, type,
 *                                         title, turn, created_ms, artifact}]}
 *                                         in turn order (last=N: the newest N)
 *   GET /v1/artifacts/{id}                 {id, type, title, conversation_id,
 *                                         turn, created_ms, artifact, facts,
 *                                         markdown}
 *   GET /v1/facts                          ?store=verified|researched&q=TEXT&
 *                                         conversation_id=&artifact_id=&limit=&
 *                                         offset= → {data: [...], limit, offset},
 *                                         newest first
 *   GET /v1/shared/{token}/artifacts[/{id}]  the same, read only, for a
 *                                         share link's conversation
 *
 * Who sees what follows the conversations: another user's conversation,
 * artifact or fact is absent (404, or left out of a list); viewers read;
 * nothing here writes. Artifacts are written only by turns.
 */
#include <stdlib.h>
#include <string.h>

#include "artifact/artifact.h"
#include "core/alloc.h"
#include "server/server_int.h"

#define Q_MAX 256

/* ?name=N within 1..max (or `fallback` when absent) into *out; 0 and the
 * error sent when it is not. */
static int query_int(struct evhttp_request *req, const char *name, long min, long max,
                     long fallback, long *out)
{
    char text[24], *end;
    const char *s = http_query(req, name, text, sizeof(text));

    *out = fallback;
    if (!s)
        return 1;
    *out = strtol(s, &end, 10);
    if (!*s || *end || *out < min || *out > max) {
        http_error(req, 400, "bad_request", name, "must be a number from %ld to %ld", min, max);
        return 0;
    }
    return 1;
}

/* ?name=TEXT into buf (NULL when absent); 0 and the error sent when it
 * is empty or too long. */
static int query_text(struct evhttp_request *req, const char *name, char *buf, size_t n,
                      const char **out)
{
    *out = http_query(req, name, buf, n);
    if (*out && (!**out || strlen(*out) >= n - 1)) {
        http_error(req, 400, "bad_request", name, "must be 1 to %zu bytes", n - 2);
        return 0;
    }
    return 1;
}

static void list(struct server *srv, struct evhttp_request *req, const char *id)
{
    char tbuf[40];
    const char *type;
    long last;
    json_t *data = NULL;
    struct keel_error err;

    if (!query_text(req, "type", tbuf, sizeof(tbuf), &type) ||
        !query_int(req, "last", 1, STORE_LIMIT_MAX, 0, &last))
        return;
    if (type && artifact_type_from_name(type) == ARTIFACT_NONE) {
        http_error(req, 400, "bad_request", "type", "must be research_brief, doc_extract or plan");
        return;
    }
    keel_error_clear(&err);
    if (store_artifacts_list(srv->store, id, type, (int)last, &data, &err)) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200, json_pack("{s:s, s:o}", "conversation_id", id, "data", data));
}

/* The artifact `id` when it belongs to `conversation` (NULL: any the
 * caller may read), with its markdown; else 404. */
static void fetch(struct server *srv, struct evhttp_request *req, const char *id,
                const struct principal *who, const char *conversation)
{
    struct store_conversation conv;
    struct keel_buf md;
    struct keel_error err;
    json_t *a = NULL;
    const char *cid;
    int mine = 0;

    keel_error_clear(&err);
    if (store_artifact_get(srv->store, id, &a, &err)) {
        http_keel_error(req, &err);
        return;
    }
    cid = json_string_value(json_object_get(a, "conversation_id"));
    if (conversation) {
        mine = !strcmp(conversation, cid);
    } else if (!store_load_conversation(srv->store, cid, &conv, &err)) {
        mine = principal_may_read(who, conv.owner);
        store_conversation_release(&conv);
    } else if (err.code != KEEL_ENOTFOUND) {
        json_decref(a);
        http_keel_error(req, &err);
        return;
    }
    if (!mine) {   /* another user's: as if absent */
        json_decref(a);
        http_error(req, 404, "not_found", "artifact_id", "no artifact \"%s\"", id);
        return;
    }
    keel_buf_init(&md, 4 * ARTIFACT_JSON_MAX);
    if (artifact_render(json_object_get(a, "artifact"), &md) ||
        json_object_set_new(a, "markdown", json_stringn(md.data, md.len))) {
        keel_buf_release(&md);
        json_decref(a);
        http_error(req, 500, "internal", "artifact_id", "the artifact cannot be rendered");
        return;
    }
    keel_buf_release(&md);
    http_json(req, 200, a);
}

static void facts(struct server *srv, struct evhttp_request *req, const struct principal *who)
{
    char sbuf[16], qbuf[Q_MAX], cbuf[160], abuf[160];
    struct store_fact_query q = {.owner = who->open ? NULL : who->user};
    struct keel_error err;
    long limit, offset;
    json_t *data = NULL;

    if (!query_text(req, "store", sbuf, sizeof(sbuf), &q.store) ||
        !query_text(req, "q", qbuf, sizeof(qbuf), &q.text) ||
        !query_text(req, "conversation_id", cbuf, sizeof(cbuf), &q.conversation_id) ||
        !query_text(req, "artifact_id", abuf, sizeof(abuf), &q.artifact_id) ||
        !query_int(req, "limit", 1, STORE_LIMIT_MAX, 50, &limit) ||
        !query_int(req, "offset", 0, 1000000000L, 0, &offset))
        return;
    if (q.store && strcmp(q.store, "verified") && strcmp(q.store, "researched")) {
        http_error(req, 400, "bad_request", "store", "must be verified or researched");
        return;
    }
    q.limit = (int)limit;
    q.offset = (int)offset;
    keel_error_clear(&err);
    if (store_facts_list(srv->store, &q, &data, &err)) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200, json_pack("{s:o, s:i, s:i}", "data", data, "limit", q.limit, "offset",
                                  q.offset));
}

/* "PREFIX{id}SUFFIX" → id (one path segment) into `out`, or NULL. */
static const char *segment(const char *path, const char *prefix, const char *suffix, char *out,
                           size_t n)
{
    size_t lp = strlen(prefix), ls = strlen(suffix), len = strlen(path);

    if (len <= lp + ls || strncmp(path, prefix, lp) || strcmp(path + len - ls, suffix))
        return NULL;
    len -= lp + ls;
    if (len >= n || memchr(path + lp, '/', len))
        return NULL;
    memcpy(out, path + lp, len);
    out[len] = '\0';
    return out;
}

static int get_only(struct evhttp_request *req, int get)
{
    if (!get)
        http_error(req, 405, "method_not_allowed", NULL, "use GET");
    return get;
}

int route_artifacts(struct server *srv, struct evhttp_request *req, const char *path, int get,
                    const struct principal *who)
{
    char id[160];

    if (segment(path, "/v1/conversations/", "/artifacts", id, sizeof(id))) {
        if (get_only(req, get) && conversation_check(srv, req, id, who, NULL))
            list(srv, req, id);
        return 1;
    }
    if (segment(path, "/v1/artifacts/", "", id, sizeof(id))) {
        if (get_only(req, get))
            fetch(srv, req, id, who, NULL);
        return 1;
    }
    if (!strcmp(path, "/v1/facts")) {
        if (get_only(req, get))
            facts(srv, req, who);
        return 1;
    }
    return 0;
}

int route_artifacts_shared(struct server *srv, struct evhttp_request *req, const char *path,
                           int get)
{
    struct principal anyone = {1, "", "", ""};
    char art[160], *cid;
    const char *rest;

    if (strncmp(path, "/v1/shared/", 11) || !(rest = strchr(path + 11, '/')) ||
        strncmp(rest, "/artifacts", 10) || (rest[10] && rest[10] != '/'))
        return 0;
    if (!get_only(req, get))
        return 1;
    if (!share_conversation(srv, req, path + 11, (size_t)(rest - (path + 11)), &cid))
        return 1;
    if (!rest[10])
        list(srv, req, cid);
    else if (segment(rest, "/artifacts/", "", art, sizeof(art)))
        fetch(srv, req, art, &anyone, cid);
    else
        http_error(req, 404, "not_found", "path", "no route %s", "/v1/shared/…/artifacts/…");
    keel_free(cid);
    return 1;
}
