/*
 * state.c — the thread state and its deltas (see state.h).
 */
#include "pipeline/state.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/json.h"

static const char *const sub_status_names[] = {"pending", "answered", "unavailable"};

const char *state_sub_status_name(enum sub_status status)
{
    return (unsigned)status < 3 ? sub_status_names[status] : "pending";
}

int state_init(struct thread_state *state, const struct pipeline_config *cfg)
{
    memset(state, 0, sizeof(*state));
    state->history = keel_calloc((size_t)cfg->history_max, sizeof(*state->history));
    if (!state->history)
        return KEEL_ENOMEM;
    snprintf(state->stage, sizeof(state->stage), "%s", cfg->initial_stage);
    state->stage_confidence = 1.0;
    return KEEL_OK;
}

void state_release(struct thread_state *state)
{
    keel_free(state->history);
    state->history = NULL;
}

void state_copy(struct thread_state *dst, const struct thread_state *src,
                const struct pipeline_config *cfg)
{
    struct stage_change *history = dst->history;

    *dst = *src;
    dst->history = history;
    memcpy(history, src->history, (size_t)cfg->history_max * sizeof(*history));
}

/* Copies `text` into a field of `cap` bytes, or fails naming `field`. */
static int set_text(char *dst, size_t cap, const char *text, const char *field,
                    struct keel_error *err)
{
    size_t n = text ? strlen(text) : 0;

    if (n >= cap)
        return keel_error_set(err, KEEL_ETOOBIG, field, "is longer than %zu bytes", cap - 1);
    memcpy(dst, text ? text : "", n + 1);
    return KEEL_OK;
}

static void clear_dependents(struct thread_state *state, const struct pipeline_config *cfg,
                             int slot, json_t *log)
{
    for (int s = 0; s < cfg->n_slots; s++) {
        if (cfg->slots[s].depends_on != slot || (!state->slots[s][0] && !(state->open_slots >> s & 1)))
            continue;
        if (state->slots[s][0])
            memcpy(state->suggested[s], state->slots[s], STATE_VALUE_MAX);
        state->slots[s][0] = '\0';
        state->open_slots &= ~(1u << s);
        if (log)
            json_array_append_new(log, json_pack("{s:s,s:s,s:s}", "delta", "slot_reset",
                                                 "slot", cfg->slots[s].name, "because",
                                                 cfg->slots[slot].name));
        clear_dependents(state, cfg, s, log);
    }
}

static int apply_stage(struct thread_state *state, const struct pipeline_config *cfg,
                       const struct state_delta *d, int64_t now_ms, struct keel_error *err)
{
    struct stage_change change;

    if (!d->text || !*d->text || strlen(d->text) >= CONFIG_STAGE_MAX)
        return keel_error_set(err, KEEL_EINVAL, "stage", "must be 1 to %d bytes",
                              CONFIG_STAGE_MAX - 1);
    state->stage_confidence = d->number;
    if (!strcmp(state->stage, d->text))
        return KEEL_OK;
    memset(&change, 0, sizeof(change));
    snprintf(change.from, sizeof(change.from), "%s", state->stage);
    snprintf(change.to, sizeof(change.to), "%s", d->text);
    snprintf(change.reason, sizeof(change.reason), "%s", d->reason ? d->reason : "");
    change.ts_ms = now_ms;
    if (state->n_history == cfg->history_max) {
        memmove(state->history, state->history + 1,
                (size_t)(cfg->history_max - 1) * sizeof(*state->history));
        state->n_history--;
    }
    state->history[state->n_history++] = change;
    snprintf(state->stage, sizeof(state->stage), "%s", d->text);
    return KEEL_OK;
}

static int apply_slot(struct thread_state *state, const struct pipeline_config *cfg,
                      const struct state_delta *d, json_t *log, struct keel_error *err)
{
    char before[STATE_VALUE_MAX];
    int rc;

    if (d->index < 0 || d->index >= cfg->n_slots)
        return keel_error_set(err, KEEL_EINVAL, "slot", "no slot %d in this pack", d->index);
    snprintf(before, sizeof(before), "%s", state->slots[d->index]);
    if ((rc = set_text(state->slots[d->index], STATE_VALUE_MAX, d->text,
                       cfg->slots[d->index].name, err)))
        return rc;
    if (state->slots[d->index][0]) {
        state->open_slots &= ~(1u << d->index);
        state->suggested[d->index][0] = '\0';
    }
    if (strcmp(before, state->slots[d->index]))
        clear_dependents(state, cfg, d->index, log);
    return KEEL_OK;
}

static json_t *delta_json(const struct state_delta *d, const struct pipeline_config *cfg)
{
    static const char *const names[] = {"stage", "research_question", "research_topic", "slot",
                                        "open_slots", "refined_query", "blueprint",
                                        "subquestion_status", "turns", "last_search"};
    json_t *j = json_pack("{s:s}", "delta", names[d->kind]);

    if (!j)
        return NULL;
    switch (d->kind) {
    case DELTA_STAGE:
        json_object_set_new(j, "to", json_string(d->text));
        json_object_set_new(j, "reason", json_string(d->reason ? d->reason : ""));
        break;
    case DELTA_SLOT:
        json_object_set_new(j, "slot", json_string(cfg->slots[d->index].name));
        json_object_set_new(j, "value", d->text && *d->text ? json_string(d->text) : json_null());
        break;
    case DELTA_OPEN_SLOTS: {
        json_t *open = json_array();
        for (int s = 0; s < cfg->n_slots; s++)
            if (d->mask >> s & 1)
                json_array_append_new(open, json_string(cfg->slots[s].name));
        json_object_set_new(j, "open", open);
        break;
    }
    case DELTA_BLUEPRINT:
        json_object_set_new(j, "subquestions",
                            json_integer(d->blueprint ? d->blueprint->n_subs : 0));
        break;
    case DELTA_SUB_STATUS:
        json_object_set_new(j, "index", json_integer(d->index));
        json_object_set_new(j, "status", json_string(state_sub_status_name(d->mask)));
        break;
    case DELTA_TURNS:
        json_object_set_new(j, "turns", json_integer(d->index));
        break;
    case DELTA_LAST_SEARCH:
        json_object_set_new(j, "value", state_search_json(d->search));
        break;
    default:
        json_object_set_new(j, "value", json_string(d->text ? d->text : ""));
        break;
    }
    return j;
}

int state_apply(struct thread_state *state, const struct pipeline_config *cfg,
                const struct state_delta *d, int64_t now_ms, json_t *log,
                struct keel_error *err)
{
    int rc = KEEL_OK;

    switch (d->kind) {
    case DELTA_STAGE:
        rc = apply_stage(state, cfg, d, now_ms, err);
        break;
    case DELTA_RESEARCH_QUESTION:
        rc = set_text(state->research_question, STATE_TEXT_MAX, d->text, "research_question", err);
        break;
    case DELTA_TOPIC:
        rc = set_text(state->research_topic, STATE_TEXT_MAX, d->text, "research_topic", err);
        break;
    case DELTA_SLOT:
        rc = apply_slot(state, cfg, d, log, err);
        break;
    case DELTA_OPEN_SLOTS:
        state->open_slots = d->mask & ((1u << cfg->n_slots) - 1);
        break;
    case DELTA_REFINED_QUERY:
        rc = set_text(state->refined_query, STATE_TEXT_MAX, d->text, "refined_query", err);
        break;
    case DELTA_BLUEPRINT:
        if (d->blueprint)
            state->blueprint = *d->blueprint;
        else
            memset(&state->blueprint, 0, sizeof(state->blueprint));
        break;
    case DELTA_SUB_STATUS:
        if (d->index < 0 || d->index >= state->blueprint.n_subs || d->mask > SUB_UNAVAILABLE)
            return keel_error_set(err, KEEL_EINVAL, "blueprint.subquestions",
                                  "no subquestion %d", d->index);
        state->blueprint.subs[d->index].status = (enum sub_status)d->mask;
        break;
    case DELTA_TURNS:
        state->turns = d->index;
        break;
    case DELTA_LAST_SEARCH:
        if (!d->search || !d->search->set)
            memset(&state->last_search, 0, sizeof(state->last_search));
        else if (!(rc = state_search_check(d->search, err)))
            state->last_search = *d->search;
        break;
    default:
        return keel_error_set(err, KEEL_EINVAL, "delta", "unknown delta kind %d", (int)d->kind);
    }
    if (!rc && log && json_array_append_new(log, delta_json(d, cfg)))
        rc = keel_error_set(err, KEEL_ENOMEM, "deltas", "out of memory");
    return rc;
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *text_or_null(const char *s)
{
    return *s ? json_string(s) : json_null();
}

/* Appends / sets, counting failures in *bad (jansson frees `value` on
 * failure), so a document built under memory pressure is dropped whole
 * rather than stored with parts missing. */
static void append(json_t *array, json_t *value, int *bad)
{
    if (!array)
        json_decref(value);
    *bad |= !array || !value || json_array_append_new(array, value);
}

static void set(json_t *object, const char *key, json_t *value, int *bad)
{
    if (!object)
        json_decref(value);
    *bad |= !object || !value || json_object_set_new(object, key, value);
}

json_t *state_blueprint_json(const struct blueprint *bp, const struct pipeline_config *cfg)
{
    json_t *subs, *j;
    int bad = 0;

    if (!bp->active)
        return json_null();
    subs = json_array();
    for (int i = 0; i < bp->n_subs; i++)
        append(subs, json_pack("{s:s,s:s,s:s}", "text", bp->subs[i].text, "path",
                               cfg->paths[bp->subs[i].path].name, "status",
                               state_sub_status_name(bp->subs[i].status)), &bad);
    if (bad) {
        json_decref(subs);
        return NULL;
    }
    j = json_object();
    set(j, "question", json_string(bp->question), &bad);
    set(j, "subquestions", subs, &bad);
    set(j, "created_turn", json_integer(bp->created_turn), &bad);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *state_to_json(const struct thread_state *state, const struct pipeline_config *cfg)
{
    json_t *history = json_array(), *jur = json_object(), *open = json_array(), *sug = json_object();
    json_t *j;
    char ts[KEEL_RFC3339_MAX];
    int bad = 0;

    for (int i = 0; i < state->n_history && !bad; i++) {
        const struct stage_change *c = &state->history[i];
        append(history, json_pack("{s:s,s:s,s:s,s:s}", "from", c->from, "to", c->to, "timestamp",
                                  keel_time_format(c->ts_ms, ts, sizeof(ts)), "reason", c->reason),
               &bad);
    }
    for (int s = 0; s < cfg->n_slots && !bad; s++) {
        set(jur, cfg->slots[s].name, text_or_null(state->slots[s]), &bad);
        if (state->open_slots >> s & 1)
            append(open, json_string(cfg->slots[s].name), &bad);
        if (state->suggested[s][0])
            set(sug, cfg->slots[s].name, json_string(state->suggested[s]), &bad);
    }
    j = json_object();
    set(j, "stage", json_string(state->stage), &bad);
    set(j, "stage_confidence", json_real(state->stage_confidence), &bad);
    set(j, "stage_history", history, &bad);
    set(j, "research_question", text_or_null(state->research_question), &bad);
    set(j, "research_topic", text_or_null(state->research_topic), &bad);
    set(j, "jurisdiction", jur, &bad);
    set(j, "open_slots", open, &bad);
    set(j, "suggested", sug, &bad);
    set(j, "refined_query", text_or_null(state->refined_query), &bad);
    set(j, "blueprint", state_blueprint_json(&state->blueprint, cfg), &bad);
    set(j, "last_search", state_search_json(&state->last_search), &bad);
    set(j, "turns", json_integer(state->turns), &bad);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static int read_text(const json_t *obj, const char *key, char *dst, size_t cap, const char *path,
                     struct keel_error *err)
{
    json_t *v = json_object_get(obj, key);
    char field[KEEL_JSON_PATH_MAX];

    keel_json_path_key(field, sizeof(field), path, key);
    if (!v || json_is_null(v)) {
        dst[0] = '\0';
        return KEEL_OK;
    }
    if (!json_is_string(v))
        return keel_error_set(err, KEEL_EINVAL, field, "must be a string or null");
    return set_text(dst, cap, json_string_value(v), field, err);
}

static int read_history(struct thread_state *state, const struct pipeline_config *cfg,
                        const json_t *history, struct keel_error *err)
{
    size_t i, skip;
    json_t *e;

    if (!json_is_array(history))
        return keel_error_set(err, KEEL_EINVAL, "stage_history", "must be a list");
    skip = json_array_size(history) > (size_t)cfg->history_max
               ? json_array_size(history) - (size_t)cfg->history_max : 0;
    json_array_foreach(history, i, e) {
        struct stage_change *c;
        const char *ts;
        char path[KEEL_JSON_PATH_MAX];
        int rc;

        if (i < skip)
            continue;
        c = &state->history[state->n_history];
        keel_json_path_index(path, sizeof(path), "stage_history", i);
        if (!json_is_object(e) || !(ts = json_string_value(json_object_get(e, "timestamp"))))
            return keel_error_set(err, KEEL_EINVAL, path, "must be {from, to, timestamp, reason}");
        if ((rc = read_text(e, "from", c->from, sizeof(c->from), path, err)) ||
            (rc = read_text(e, "to", c->to, sizeof(c->to), path, err)) ||
            (rc = read_text(e, "reason", c->reason, sizeof(c->reason), path, err)) ||
            (rc = keel_time_parse(ts, strlen(ts), &c->ts_ms, path, err)))
            return rc;
        state->n_history++;
    }
    return KEEL_OK;
}

static int read_blueprint(struct thread_state *state, const struct pipeline_config *cfg,
                          const json_t *bp, struct keel_error *err)
{
    json_t *subs, *e;
    long long created = 0;
    size_t i;
    int rc;

    memset(&state->blueprint, 0, sizeof(state->blueprint));
    if (!bp || json_is_null(bp))
        return KEEL_OK;
    subs = json_object_get(bp, "subquestions");
    if (!json_is_object(bp) || !json_is_array(subs) || json_array_size(subs) > BLUEPRINT_MAX_SUBS)
        return keel_error_set(err, KEEL_EINVAL, "blueprint",
                              "must be {question, subquestions (at most %d), created_turn}",
                              BLUEPRINT_MAX_SUBS);
    if ((rc = read_text(bp, "question", state->blueprint.question, STATE_TEXT_MAX, "blueprint",
                        err)) ||
        (rc = keel_json_get_int(bp, "created_turn", 0, 0, 1 << 30, "blueprint", &created, err)))
        return rc;
    json_array_foreach(subs, i, e) {
        struct blueprint_sub *s = &state->blueprint.subs[i];
        const char *path = json_string_value(json_object_get(e, "path"));
        const char *status = json_string_value(json_object_get(e, "status"));
        char field[KEEL_JSON_PATH_MAX];

        keel_json_path_index(field, sizeof(field), "blueprint.subquestions", i);
        if ((rc = read_text(e, "text", s->text, sizeof(s->text), field, err)))
            return rc;
        if (!path || (s->path = config_path_index(cfg, path)) < 0)
            return keel_error_set(err, KEEL_EINVAL, field, "path is not a path of this pack");
        s->status = SUB_PENDING;
        for (int k = 0; k < 3; k++)
            if (status && !strcmp(status, sub_status_names[k]))
                s->status = (enum sub_status)k;
    }
    state->blueprint.n_subs = (int)json_array_size(subs);
    state->blueprint.created_turn = (int)created;
    state->blueprint.active = 1;
    return KEEL_OK;
}

static int read_jurisdiction(struct thread_state *state, const struct pipeline_config *cfg,
                             const json_t *jur, const json_t *open, struct keel_error *err)
{
    const char *key;
    json_t *v;
    size_t i;

    if (jur && !json_is_object(jur))
        return keel_error_set(err, KEEL_EINVAL, "jurisdiction", "must be an object");
    json_object_foreach((json_t *)jur, key, v) {
        char field[KEEL_JSON_PATH_MAX];
        int s = config_slot_index(cfg, key), rc;

        keel_json_path_key(field, sizeof(field), "jurisdiction", key);
        if (s < 0)
            return keel_error_set(err, KEEL_EINVAL, field, "is not a slot of this pack");
        if ((rc = read_text(jur, key, state->slots[s], STATE_VALUE_MAX, "jurisdiction", err)))
            return rc;
        (void)v;
    }
    if (open && !json_is_array(open))
        return keel_error_set(err, KEEL_EINVAL, "open_slots", "must be a list of slot names");
    json_array_foreach((json_t *)open, i, v) {
        int s = json_is_string(v) ? config_slot_index(cfg, json_string_value(v)) : -1;

        if (s < 0)
            return keel_error_set(err, KEEL_EINVAL, "open_slots", "[%zu] is not a slot", i);
        state->open_slots |= 1u << s;
    }
    return KEEL_OK;
}

static int read_suggested(struct thread_state *state, const struct pipeline_config *cfg,
                          const json_t *sug, struct keel_error *err)
{
    const char *key;
    json_t *v;

    if (sug && !json_is_object(sug))
        return keel_error_set(err, KEEL_EINVAL, "suggested", "must be an object");
    json_object_foreach((json_t *)sug, key, v) {
        int s = config_slot_index(cfg, key), rc;

        if (s < 0)
            return keel_error_set(err, KEEL_EINVAL, "suggested", "\"%s\" is not a slot", key);
        if ((rc = read_text(sug, key, state->suggested[s], STATE_VALUE_MAX, "suggested", err)))
            return rc;
        (void)v;
    }
    return KEEL_OK;
}

int state_from_json(struct thread_state *state, const struct pipeline_config *cfg,
                    const json_t *json, struct keel_error *err)
{
    static const char *const keys[] = {"stage", "stage_confidence", "stage_history",
                                       "research_question", "research_topic", "jurisdiction",
                                       "open_slots", "suggested", "refined_query", "blueprint",
                                       "last_search", "turns", NULL};
    json_t *history;
    long long turns = 0;
    int rc;

    if (!json_is_object(json))
        return keel_error_set(err, KEEL_EINVAL, "state", "must be an object");
    if ((rc = keel_json_check_keys(json, keys, "state", err)) ||
        (rc = read_text(json, "stage", state->stage, sizeof(state->stage), "", err)) ||
        (rc = read_text(json, "research_question", state->research_question, STATE_TEXT_MAX, "",
                        err)) ||
        (rc = read_text(json, "research_topic", state->research_topic, STATE_TEXT_MAX, "", err)) ||
        (rc = read_text(json, "refined_query", state->refined_query, STATE_TEXT_MAX, "", err)) ||
        (rc = keel_json_get_int(json, "turns", 0, 0, 1 << 30, "", &turns, err)) ||
        (rc = read_jurisdiction(state, cfg, json_object_get(json, "jurisdiction"),
                                json_object_get(json, "open_slots"), err)) ||
        (rc = read_suggested(state, cfg, json_object_get(json, "suggested"), err)) ||
        (rc = read_blueprint(state, cfg, json_object_get(json, "blueprint"), err)) ||
        (rc = state_search_from_json(&state->last_search, json_object_get(json, "last_search"),
                                     err)))
        return rc;
    if (!state->stage[0])
        snprintf(state->stage, sizeof(state->stage), "%s", cfg->initial_stage);
    state->turns = (int)turns;
    if (json_object_get(json, "stage_confidence")) {
        json_t *c = json_object_get(json, "stage_confidence");
        if (!json_is_number(c) || json_number_value(c) < 0 || json_number_value(c) > 1)
            return keel_error_set(err, KEEL_EINVAL, "stage_confidence",
                                  "must be a number from 0 to 1");
        state->stage_confidence = json_number_value(c);
    }
    history = json_object_get(json, "stage_history");
    state->n_history = 0;
    return history ? read_history(state, cfg, history, err) : KEEL_OK;
}
