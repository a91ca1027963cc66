/*
 * routes_admin.c — conversations as a collection (list, create, delete),
 * the quality metrics of seed 000 (Phase G), and /metrics for Prometheus.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/id.h"
#include "core/json.h"
#include "artifact/artifact.h"
#include "server/server_int.h"

/* ---- conversations -------------------------------------------------------- */

static long query_long(struct evhttp_request *req, const char *name, long fallback, long min,
                       long max, int *bad)
{
    char buf[32], *end;
    const char *v = http_query(req, name, buf, sizeof(buf));
    long n;

    if (!v)
        return fallback;
    n = strtol(v, &end, 10);
    if (*end || end == v || n < min || n > max) {
        http_error(req, 400, "bad_request", name, "must be a number from %ld to %ld", min, max);
        *bad = 1;
    }
    return n;
}

void route_conversations_list(struct server *srv, struct evhttp_request *req,
                              const struct principal *who)
{
    struct keel_error err;
    json_t *list = NULL;
    int bad = 0;
    long limit = query_long(req, "limit", 20, 1, STORE_LIMIT_MAX, &bad);
    long offset = bad ? 0 : query_long(req, "offset", 0, 0, 1000000000L, &bad);

    if (bad)
        return;
    keel_error_clear(&err);
    if (store_list_conversations(srv->store, who->open ? NULL : who->user, (int)limit,
                                 (int)offset, &list, &err)) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200, json_pack("{s:o, s:i, s:i}", "data", list, "limit", (int)limit, "offset",
                                  (int)offset));
}

/* POST /v1/conversations {pack?}: names a new conversation for the
 * caller; it is stored with its first turn. */
void route_conversations_create(struct server *srv, struct evhttp_request *req,
                                const struct principal *who)
{
    static const char *const keys[] = {"pack", NULL};
    struct keel_error err;
    json_t *body = NULL, *pack;
    char id[KEEL_ID_MAX];
    const char *name;

    if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) && http_body_json(req, &body))
        return;
    keel_error_clear(&err);
    if (body && keel_json_check_keys(body, keys, "", &err)) {
        http_keel_error(req, &err);
        goto out;
    }
    pack = json_object_get(body, "pack");
    name = json_is_string(pack) ? json_string_value(pack) : srv->packs[0];
    if ((pack && !json_is_string(pack)) || !server_pack_served(srv, name)) {
        http_error(req, 400, "bad_request", "pack", "is not a pack this server serves");
        goto out;
    }
    keel_id_new("conv", id, sizeof(id));
    server_pending_add(id, name, who->open ? "" : who->user, 1);
    http_json(req, 201, json_pack("{s:s, s:s, s:i, s:n}", "id", id, "pack", name, "turns", 0,
                                  "active_scenario"));
out:
    json_decref(body);
}

void route_conversations_delete(struct server *srv, struct evhttp_request *req, const char *id,
                                const struct principal *who)
{
    struct keel_error err;

    keel_error_clear(&err);
    if (!conversation_check(srv, req, id, who, "delete"))
        return;
    if (store_delete_conversation(srv->store, id, &err)) {
        http_keel_error(req, &err);
        return;
    }
    /* Nothing of it is served any more: not from the bus, not as a name. */
    bus_forget_conversation(srv->bus, id);
    server_pending_forget(id);
    artifact_export_remove(srv->opt.artifacts_dir, id);   /* its JSONL export too */
    http_log(req, 204, NULL);
    evhttp_send_reply(req, 204, "No Content", NULL);
}

/* ---- quality metrics -------------------------------------------------------- */

static double ratio(const json_t *counters, const char *num, const char *den)
{
    json_int_t d = json_integer_value(json_object_get(counters, den));

    return d ? (double)json_integer_value(json_object_get(counters, num)) / (double)d : 0.0;
}

/* Seed 000's Phase G rates of `counters`. */
static json_t *rates(const json_t *counters)
{
    return json_pack(
        "{s:f, s:f, s:f, s:f}",
        "direct_search_tool_call_rate",
        ratio(counters, "direct_search_tool_called", "direct_search_turns"),
        "direct_search_clarification_first_rate",
        ratio(counters, "direct_search_clarified_first", "direct_search_turns"),
        "recency_filter_compliance",
        ratio(counters, "recency_filter_compliant", "recency_filtered_turns"),
        "stage_transition_success",
        ratio(counters, "stage_transitions_done", "stage_transitions_expected"));
}

/* {counters, rates} of seed 000's Phase G. */
static json_t *quality(struct server *srv, struct keel_error *err)
{
    json_t *counters = NULL;

    if (store_metrics(srv->store, &counters, err))
        return NULL;
    return json_pack("{s:o, s:o}", "counters", counters, "rates", rates(counters));
}

/* GET /v1/metrics/quality/history?aggregate_minutes=N&limit=M: the
 * counters and rates per period, oldest first. */
void route_quality_history(struct server *srv, struct evhttp_request *req)
{
    struct keel_error err;
    json_t *periods = NULL, *p;
    size_t i;
    int bad = 0;
    long minutes = query_long(req, "aggregate_minutes", 60, 1, 10080, &bad);
    long limit = bad ? 0 : query_long(req, "limit", 24, 1, STORE_LIMIT_MAX, &bad);

    if (bad)
        return;
    keel_error_clear(&err);
    if (store_metrics_history(srv->store, (int)minutes, (int)limit, &periods, &err)) {
        http_keel_error(req, &err);
        return;
    }
    json_array_foreach(periods, i, p)
        json_object_set_new(p, "rates", rates(json_object_get(p, "counters")));
    http_json(req, 200, json_pack("{s:i, s:o}", "aggregate_minutes", (int)minutes, "periods",
                                  periods));
}

void route_quality(struct server *srv, struct evhttp_request *req, int reset,
                   const struct principal *who)
{
    struct keel_error err;
    json_t *q;

    keel_error_clear(&err);
    if (reset) {
        if (!who->open && strcmp(who->role, "owner")) {
            http_error(req, 403, "forbidden", "role", "only an owner key may reset the metrics");
            return;
        }
        if (store_metrics_reset(srv->store, &err)) {
            http_keel_error(req, &err);
            return;
        }
    }
    if (!(q = quality(srv, &err))) {
        http_keel_error(req, &err);
        return;
    }
    http_json(req, 200, q);
}

/* ---- Prometheus ---------------------------------------------------------------- */

void route_prometheus(struct server *srv, struct evhttp_request *req)
{
    struct evbuffer *out = evbuffer_new();
    struct keel_error err;
    json_t *q;
    const char *name;
    json_t *value;

    if (!out) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    keel_error_clear(&err);
    q = quality(srv, &err);
    evbuffer_add_printf(out, "# HELP keel_queue_depth Turns waiting for a worker.\n"
                             "# TYPE keel_queue_depth gauge\nkeel_queue_depth %zu\n",
                        queue_depth(srv->queue));
    evbuffer_add_printf(out, "# HELP keel_running_turns Turns queued or running.\n"
                             "# TYPE keel_running_turns gauge\nkeel_running_turns %zu\n",
                        bus_open_turns(srv->bus));
    evbuffer_add_printf(out, "# HELP keel_open_streams Open SSE streams.\n"
                             "# TYPE keel_open_streams gauge\nkeel_open_streams %zu\n",
                        srv->n_streams);
    server_metrics_write(srv, out);
    json_object_foreach(json_object_get(q, "counters"), name, value)
        evbuffer_add_printf(out, "# TYPE keel_quality_%s_total counter\nkeel_quality_%s_total %lld\n",
                            name, name, (long long)json_integer_value(value));
    json_object_foreach(json_object_get(q, "rates"), name, value)
        evbuffer_add_printf(out, "# TYPE keel_quality_%s gauge\nkeel_quality_%s %.6f\n", name,
                            name, json_real_value(value));
    json_decref(q);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4");
    http_log(req, 200, NULL);
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}
