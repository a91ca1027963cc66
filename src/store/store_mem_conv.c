/*
 * store_mem_conv.c — conversations in the in-memory backend. Each
 * conversation is a JSON object {pack, state, turns, created, updated,
 * list: [turn…]}. A save builds the new conversation object and the new
 * counters completely before swapping them in, so a failure (out of
 * memory, a conflict) leaves everything as it was: the same
 * all-or-nothing rule as the SQLite transaction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "store/store_events_text.h"
#include "store/store_mem_int.h"

struct mem_conversations {
    json_t *by_id;     /* id -> conversation */
    json_t *metrics;   /* name -> integer */
    json_t *minutes;   /* "minute" -> {name -> integer}: the metrics' history */
};

void mem_conv_free(struct mem_conversations *conv)
{
    if (!conv)
        return;
    json_decref(conv->by_id);
    json_decref(conv->metrics);
    json_decref(conv->minutes);
    keel_free(conv);
}

static int not_found(const char *id, struct keel_error *err)
{
    return keel_error_set(err, KEEL_ENOTFOUND, "conversation_id", "no conversation \"%s\"", id);
}

int mem_conv_load(const struct mem_conversations *conv, const char *id,
                  struct store_conversation *out, struct keel_error *err)
{
    json_t *c = conv ? json_object_get(conv->by_id, id) : NULL;

    memset(out, 0, sizeof(*out));
    if (!c)
        return not_found(id, err);
    out->turns = (int)json_integer_value(json_object_get(c, "turns"));
    out->created_ms = json_integer_value(json_object_get(c, "created"));
    out->updated_ms = json_integer_value(json_object_get(c, "updated"));
    out->scenario_version = json_integer_value(json_object_get(c, "scenario_version"));
    if (json_is_string(json_object_get(c, "scenario")) &&
        !(out->scenario_json = keel_strdup(json_string_value(json_object_get(c, "scenario"))))) {
        store_conversation_release(out);
        return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
    }
    if (json_is_string(json_object_get(c, "owner")) &&
        !(out->owner = keel_strdup(json_string_value(json_object_get(c, "owner"))))) {
        store_conversation_release(out);
        return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
    }
    if (!(out->id = keel_strdup(id)) ||
        !(out->pack = keel_strdup(json_string_value(json_object_get(c, "pack")))) ||
        !(out->state_json = keel_strdup(json_string_value(json_object_get(c, "state"))))) {
        store_conversation_release(out);
        return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
    }
    return KEEL_OK;
}

/* The stored turn; `events`: the record's events whole. */
static json_t *turn_json(const struct store_turn_record *rec, const char *events)
{
    return json_pack("{s:i,s:I,s:s,s:s,s:s,s:b,s:s,s:s,s:s,s:s,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,"
                     "s:s,s:s,s:s?,s:s?}",
                     "turn", rec->seq, "ts", (json_int_t)rec->ts_ms, "correlation_id",
                     rec->correlation_id, "user", rec->user_text, "assistant",
                     rec->assistant_text, "clarification", rec->clarification != 0, "state",
                     rec->state_json, "deltas", rec->deltas_json, "events", events,
                     "sources", rec->sources_json, "intent", rec->intent, "route", rec->route,
                     "tool", rec->tool, "arguments", rec->arguments_json, "stage_from",
                     rec->stage_from, "stage_to", rec->stage_to, "reasons", rec->reasons_json,
                     "decision", rec->decision_json, "active_scenario", rec->scenario_json,
                     "scenario_delta", rec->scenario_delta_json);
}

/* Sets the scenario of conversation object `c` (NULL: none) when its
 * version is `version`, counting one more. KEEL_EFAIL or KEEL_ENOMEM
 * leave `c` as it was. */
static int set_scenario(json_t *c, const char *id, int64_t version, const char *json,
                        struct keel_error *err)
{
    json_int_t now = json_integer_value(json_object_get(c, "scenario_version"));
    json_t *text = json ? json_string(json) : NULL;

    if (now != version) {
        json_decref(text);
        return keel_error_set(err, KEEL_EFAIL, "active_scenario",
                              "the scenario of conversation \"%s\" changed since it was read", id);
    }
    if ((json && !text) || json_object_set_new(c, "scenario_version", json_integer(now + 1))) {
        json_decref(text);
        return keel_error_set(err, KEEL_ENOMEM, "active_scenario", "out of memory");
    }
    if (text && json_object_set_new(c, "scenario", text))
        return keel_error_set(err, KEEL_ENOMEM, "active_scenario", "out of memory");
    if (!text)
        json_object_del(c, "scenario");
    return KEEL_OK;
}

/* Builds the conversation as it is after `rec`, or fails leaving all as
 * it was. */
static int next_conversation(const struct mem_conversations *conv,
                             const struct store_turn_record *rec, json_t **out,
                             struct keel_error *err)
{
    json_t *old = json_object_get(conv->by_id, rec->conversation_id), *c, *turn;
    char *events = NULL;
    int rc;

    if (rec->seq == 1 && old)
        return keel_error_set(err, KEEL_EFAIL, "conversation_id",
                              "conversation \"%s\" already exists", rec->conversation_id);
    if (rec->seq != 1 &&
        (!old || json_integer_value(json_object_get(old, "turns")) != rec->seq - 1 ||
         strcmp(json_string_value(json_object_get(old, "pack")), rec->pack)))
        return keel_error_set(err, KEEL_EFAIL, "conversation_id",
                              "conversation \"%s\" changed since it was read (turn %d of %s)",
                              rec->conversation_id, rec->seq, rec->pack);
    /* this backend keeps the events whole */
    if (rec->events_compacted &&
        (rc = store_events_expand(rec->events_json, strlen(rec->events_json), rec->correlation_id,
                                  4 * STORE_TEXT_MAX, &events, NULL)))
        return rc == KEEL_ENOMEM ? keel_error_set(err, rc, "events", "out of memory")
                                 : keel_error_set(err, rc, "events", "not compacted events");
    c = old ? json_copy(old) : json_pack("{s:s,s:I,s:[],s:s?}", "pack", rec->pack, "created",
                                         (json_int_t)rec->ts_ms, "list", "owner", rec->owner);
    if (!c)
        keel_free(events);
    if (c) {   /* a shallow copy: the list is new, its turns shared */
        json_t *list = json_copy(json_object_get(c, "list"));
        turn = turn_json(rec, events ? events : rec->events_json);
        keel_free(events);   /* copied into turn */
        if (!list || !turn || json_array_append_new(list, turn)) {
            json_decref(list);   /* append_new consumed turn, also on failure */
            if (!list)
                json_decref(turn);
            json_decref(c);
            return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
        }
        if (json_object_set_new(c, "list", list) ||
            json_object_set_new(c, "state", json_string(rec->state_json)) ||
            json_object_set_new(c, "turns", json_integer(rec->seq)) ||
            json_object_set_new(c, "updated", json_integer(rec->ts_ms))) {
            json_decref(c);
            c = NULL;
        }
    }
    if (!c)
        return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
    if (rec->scenario_changed) {
        rc = set_scenario(c, rec->conversation_id, rec->scenario_version, rec->scenario_json, err);
        if (rc) {
            json_decref(c);
            return rc;
        }
    }
    *out = c;
    return KEEL_OK;
}

/* `counters` with the record's deltas added: a new object or NULL. */
static json_t *added(const json_t *counters, const struct store_turn_record *rec)
{
    json_t *m = counters ? json_copy((json_t *)counters) : json_object();

    for (size_t i = 0; m && i < rec->n_metrics; i++) {
        json_t *v = json_object_get(m, rec->metrics[i].name);
        if (json_object_set_new(m, rec->metrics[i].name,
                                json_integer(json_integer_value(v) + rec->metrics[i].delta))) {
            json_decref(m);
            m = NULL;
        }
    }
    return m;
}

/* The totals and the per-minute history after `rec`, or a failure
 * leaving both as they were. */
static int next_metrics(const struct mem_conversations *conv,
                        const struct store_turn_record *rec, json_t **out, json_t **minutes,
                        struct keel_error *err)
{
    char minute[32];
    json_t *m = added(conv->metrics, rec), *h = json_copy(conv->minutes), *bucket;

    snprintf(minute, sizeof(minute), "%lld", (long long)(rec->ts_ms / 60000));
    bucket = added(json_object_get(conv->minutes, minute), rec);
    if (!m || !h || !bucket) {
        json_decref(m);
        json_decref(h);
        json_decref(bucket);
        return keel_error_set(err, KEEL_ENOMEM, "metrics", "out of memory");
    }
    if (json_object_set_new(h, minute, bucket)) {   /* consumes bucket, also on failure */
        json_decref(m);
        json_decref(h);
        return keel_error_set(err, KEEL_ENOMEM, "metrics", "out of memory");
    }
    *out = m;
    *minutes = h;
    return KEEL_OK;
}

int mem_conv_save(struct mem_conversations **convp, const struct store_turn_record *rec,
                  struct keel_error *err)
{
    struct mem_conversations *conv = *convp;
    json_t *c = NULL, *m = NULL, *h = NULL;
    long failures;
    int rc;

    if (!conv) {
        conv = keel_calloc(1, sizeof(*conv));
        if (!conv || !(conv->by_id = json_object()) || !(conv->metrics = json_object()) ||
            !(conv->minutes = json_object())) {
            mem_conv_free(conv);
            return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
        }
        *convp = conv;
    }
    failures = keel_alloc_failures();
    if ((rc = next_conversation(conv, rec, &c, err)) ||
        (rc = next_metrics(conv, rec, &m, &h, err))) {
        json_decref(c);
        /* a copy that lost a key to a failed allocation is no conflict */
        return keel_alloc_failures() != failures
                   ? keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory")
                   : rc;
    }
    if (keel_alloc_failures() != failures) {   /* jansson's copies skip keys they cannot add */
        json_decref(c);
        json_decref(m);
        json_decref(h);
        return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
    }
    /* Reserve the key first so the swap below cannot fail half-way. */
    if (!json_object_get(conv->by_id, rec->conversation_id) &&
        json_object_set_new(conv->by_id, rec->conversation_id, json_null())) {
        json_decref(c);
        json_decref(m);
        json_decref(h);
        return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
    }
    /* Replaced through an iterator: json_object_set_new may grow the
     * table (and fail) even for a key it has. */
    json_object_iter_set_new(conv->by_id, json_object_iter_at(conv->by_id, rec->conversation_id),
                             c);
    json_decref(conv->metrics);
    conv->metrics = m;
    json_decref(conv->minutes);
    conv->minutes = h;
    return KEEL_OK;
}

int mem_conv_metrics(const struct mem_conversations *conv, json_t **out, struct keel_error *err)
{
    *out = conv ? json_deep_copy(conv->metrics) : json_object();
    return *out ? KEEL_OK : keel_error_set(err, KEEL_ENOMEM, "metrics", "out of memory");
}

/* Sets obj[key] to the JSON value of the stored text obj_in[key]. */
static int parsed_into(json_t *obj, const char *key, const json_t *stored, struct keel_error *err)
{
    const char *text = json_string_value(json_object_get(stored, key));
    json_t *value = NULL;

    if (text && keel_json_parse(text, strlen(text), strlen(text) + 1, key, &value, err))
        return err->code;
    if (json_object_set_new(obj, key, value ? value : json_null()))
        return keel_error_set(err, KEEL_ENOMEM, "correlation_id", "out of memory");
    return KEEL_OK;
}

int mem_conv_list(const struct mem_conversations *conv, const char *id, json_t **out,
                  struct keel_error *err)
{
    json_t *c = conv ? json_object_get(conv->by_id, id) : NULL, *list, *turn;
    size_t i;

    if (!c)
        return not_found(id, err);
    if (!(list = json_array()))
        return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
    json_array_foreach(json_object_get(c, "list"), i, turn) {
        json_t *t = json_pack("{s:O,s:O,s:O,s:O,s:O}", "turn", json_object_get(turn, "turn"),
                              "ts", json_object_get(turn, "ts"), "user",
                              json_object_get(turn, "user"), "assistant",
                              json_object_get(turn, "assistant"), "clarification",
                              json_object_get(turn, "clarification"));
        int rc = t ? parsed_into(t, "sources", turn, err) : KEEL_OK;

        if (!t || rc || json_array_append_new(list, t)) {
            json_decref(list);
            if (rc) {
                json_decref(t);
                return rc;
            }
            return keel_error_set(err, KEEL_ENOMEM, "conversation_id", "out of memory");
        }
    }
    *out = list;
    return KEEL_OK;
}

int mem_conv_get_turn(const struct mem_conversations *conv, const char *correlation_id,
                      json_t **out, struct keel_error *err)
{
    const char *id;
    json_t *c, *turn;
    size_t i;

    if (conv)
        json_object_foreach(conv->by_id, id, c)
            json_array_foreach(json_object_get(c, "list"), i, turn) {
                json_t *t;
                int rc;
                if (strcmp(json_string_value(json_object_get(turn, "correlation_id")),
                           correlation_id))
                    continue;
                t = json_pack("{s:s,s:O,s:O,s:O,s:O,s:O,s:O}", "conversation_id", id, "turn",
                              json_object_get(turn, "turn"), "ts", json_object_get(turn, "ts"),
                              "clarification", json_object_get(turn, "clarification"), "user",
                              json_object_get(turn, "user"), "assistant",
                              json_object_get(turn, "assistant"), "correlation_id",
                              json_object_get(turn, "correlation_id"));
                if (!t)
                    return keel_error_set(err, KEEL_ENOMEM, "correlation_id", "out of memory");
                if ((rc = parsed_into(t, "state", turn, err)) ||
                    (rc = parsed_into(t, "events", turn, err)) ||
                    (rc = parsed_into(t, "sources", turn, err)) ||
                    (rc = parsed_into(t, "decision", turn, err)) ||
                    (rc = parsed_into(t, "active_scenario", turn, err)) ||
                    (rc = parsed_into(t, "scenario_delta", turn, err))) {
                    json_decref(t);
                    return rc;
                }
                *out = t;
                return KEEL_OK;
            }
    return keel_error_set(err, KEEL_ENOTFOUND, "correlation_id", "no turn \"%s\"",
                          correlation_id);
}

static int by_update(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t ux = json_integer_value(json_object_get(x, "updated_ms"));
    json_int_t uy = json_integer_value(json_object_get(y, "updated_ms"));

    if (ux != uy)
        return ux > uy ? -1 : 1;
    return -strcmp(json_string_value(json_object_get(x, "id")),
                   json_string_value(json_object_get(y, "id")));
}

int mem_conv_list_all(const struct mem_conversations *conv, const char *owner, int limit,
                      int offset, json_t **out, struct keel_error *err)
{
    size_t n = conv ? json_object_size(conv->by_id) : 0, k = 0;
    json_t **all = keel_calloc(n + 1, sizeof(*all)), *list = json_array(), *c;
    const char *id;

    if (!all || !list)
        goto nomem;
    if (conv)
        json_object_foreach(conv->by_id, id, c) {
            const char *o = json_string_value(json_object_get(c, "owner"));
            if (owner && (!o || strcmp(o, owner)))
                continue;
            if (!(all[k] = json_pack("{s:s,s:O,s:O,s:O,s:O}", "id", id, "pack",
                                     json_object_get(c, "pack"), "turns",
                                     json_object_get(c, "turns"), "created_ms",
                                     json_object_get(c, "created"), "updated_ms",
                                     json_object_get(c, "updated"))))
                goto nomem;
            k++;
        }
    qsort(all, k, sizeof(*all), by_update);
    for (size_t i = (size_t)offset; i < k && json_array_size(list) < (size_t)limit; i++)
        if (json_array_append(list, all[i]))
            goto nomem;
    for (size_t i = 0; i < k; i++)
        json_decref(all[i]);
    keel_free(all);
    *out = list;
    return KEEL_OK;
nomem:
    for (size_t i = 0; all && i < k; i++)
        json_decref(all[i]);
    keel_free(all);
    json_decref(list);
    return keel_error_set(err, KEEL_ENOMEM, "conversations", "out of memory");
}

int mem_conv_delete(struct mem_conversations *conv, const char *id, struct keel_error *err)
{
    if (!conv || !json_object_get(conv->by_id, id))
        return not_found(id, err);
    json_object_del(conv->by_id, id);
    return KEEL_OK;
}

int mem_conv_scenario_set(struct mem_conversations *conv, const char *id, int64_t version,
                          const char *scenario_json, struct keel_error *err)
{
    json_t *c = conv ? json_object_get(conv->by_id, id) : NULL, *next;
    long failures = keel_alloc_failures();
    int rc;

    if (!c)
        return not_found(id, err);
    if (!(next = json_copy(c)))   /* shallow: the swap below cannot fail half-way */
        return keel_error_set(err, KEEL_ENOMEM, "active_scenario", "out of memory");
    if ((rc = set_scenario(next, id, version, scenario_json, err)) ||
        keel_alloc_failures() != failures) {
        json_decref(next);
        return rc ? rc : keel_error_set(err, KEEL_ENOMEM, "active_scenario", "out of memory");
    }
    json_object_set_new(conv->by_id, id, next);   /* replaces an existing key: cannot fail */
    return KEEL_OK;
}

int mem_conv_metrics_reset(struct mem_conversations *conv, struct keel_error *err)
{
    const char *name;
    json_t *value;

    (void)err;
    if (conv)
        json_object_foreach(conv->metrics, name, value)
            json_integer_set(value, 0);
    return KEEL_OK;
}

static int by_number(const void *a, const void *b)
{
    long long x = atoll(*(const char *const *)a), y = atoll(*(const char *const *)b);

    return x < y ? -1 : x > y;
}

int mem_conv_metrics_history(const struct mem_conversations *conv, int aggregate_minutes,
                             int limit, json_t **out, struct keel_error *err)
{
    size_t n = conv ? json_object_size(conv->minutes) : 0, k = 0;
    const char **keys = keel_calloc(n + 1, sizeof(*keys)), *key;
    json_t *list = json_array(), *bucket, *period = NULL;
    long long newest = 0, current = -1;

    if (!keys || !list)
        goto nomem;
    if (conv)
        json_object_foreach(conv->minutes, key, bucket)
            keys[k++] = key;
    qsort(keys, k, sizeof(*keys), by_number);
    if (k)
        newest = atoll(keys[k - 1]) / aggregate_minutes * aggregate_minutes;
    for (size_t i = 0; i < k; i++) {
        long long start = atoll(keys[i]) / aggregate_minutes * aggregate_minutes;
        const char *name;
        json_t *value;
        if (start < newest - (long long)(limit - 1) * aggregate_minutes)
            continue;
        if (start != current) {
            period = json_pack("{s:I, s:i, s:{}}", "start_ms", (json_int_t)(start * 60000),
                               "minutes", aggregate_minutes, "counters");
            if (!period || json_array_append_new(list, period))
                goto nomem;
            current = start;
        }
        json_object_foreach(json_object_get(conv->minutes, keys[i]), name, value) {
            json_t *counters = json_object_get(period, "counters");
            json_t *sum = json_object_get(counters, name);
            if (json_object_set_new(counters, name,
                                    json_integer(json_integer_value(sum) +
                                                 json_integer_value(value))))
                goto nomem;
        }
    }
    keel_free(keys);
    *out = list;
    return KEEL_OK;
nomem:
    keel_free(keys);
    json_decref(list);
    return keel_error_set(err, KEEL_ENOMEM, "metrics", "out of memory");
}
