/*
 * pipeline.c — the orchestrator: checks the request, runs the stages in
 * order over one turn context, emits start/end events around each
 * (events.c), and hands the caller the turn as JSON. Publish (stage_publish.c) is the
 * only stage that writes; a turn that fails before it leaves the store
 * untouched.
 */
#include "pipeline/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "ingest/ingest.h"
#include "pipeline/turn.h"
#include "core/utf8.h"

#define ANSWER_MAX (64u << 10)

struct stage {
    const char *name;
    stage_fn run;
    const char *started, *done;   /* its start and end event lines */
};

/* In order. Publish always runs, also after a stage ended the turn. */
#define STAGE(name) {#name, stage_##name, #name " started", #name " done"}
static const struct stage stages[] = {
    STAGE(load),    STAGE(classify), STAGE(decide),   STAGE(plan),     STAGE(clarify),
    STAGE(resolve), STAGE(compose),  STAGE(artifact), STAGE(remember), STAGE(publish),
};
#undef STAGE

#define N_STAGES (sizeof(stages) / sizeof(stages[0]))

/* The pack's `providers:` section, the environment, then the caller's
 * list of providers to turn on. */
static int open_providers(struct pipeline *pl, const struct pipeline_options *options,
                          struct keel_error *err)
{
    struct providers_conf conf;
    int rc = providers_conf_load(json_object_get(pl->pack->doc, "providers"), &conf, err);

    if (!rc && options->providers) {
        rc = providers_conf_enable(&conf, options->providers, err);
        if (rc)
            snprintf(err->field, sizeof(err->field), "providers");
    }
    if (!rc)
        rc = providers_new(&conf, &pl->providers, err);
    providers_conf_release(&conf);
    return rc;
}

/* The model: the pack's `llm:` section, KEEL_LLM_*, then the caller's
 * options. No URL anywhere: no model. */
static int open_llm(struct pipeline *pl, const struct pipeline_options *options,
                    struct keel_error *err)
{
    struct llm_conf conf;
    int rc = llm_conf_load(json_object_get(pl->pack->doc, "llm"), &options->llm, &conf, err);

    if (rc)
        return rc;   /* the conf is released */
    if (conf.url)
        rc = llm_new(&conf, &pl->llm, err);
    llm_conf_release(&conf);
    return rc;
}

/* The pack's `memory:` section: {remember: true, min_similarity: 0.7,
 * same_task_similarity: 0.95, judge: rules|model, embedder: {url, model,
 * key_env}, approximate_from: 200000}. With remember on, every turn that
 * ran a tool is offered to memory admission. */
static int open_memory(struct pipeline *pl, struct keel_error *err)
{
    static const char *const keys[] = {"remember", "min_similarity", "same_task_similarity",
                                       "judge", "embedder", "approximate_from", NULL};
    const json_t *s = json_object_get(pl->pack->doc, "memory");
    struct memory_conf conf;
    const char *judge = "rules";
    long long approximate_from;
    int remember = 0, rc;

    memory_conf_default(&conf);
    if (!s)
        return KEEL_OK;
    if (!json_is_object(s))
        return pack_fail(pl->pack, "memory", err, "must be a mapping");
    if ((rc = keel_json_check_keys(s, keys, "memory", err)) ||
        (rc = keel_json_get_bool(s, "remember", 0, "memory", &remember, err)) ||
        (rc = keel_json_get_string(s, "judge", 0, "memory", &judge, err)))
        return rc;
    /* runs from which the HNSW graph answers; 0: the exact scan always */
    approximate_from = (long long)conf.index.approximate_from;
    if ((rc = keel_json_get_int(s, "approximate_from", 0, 0, 1000000000, "memory",
                                &approximate_from, err)))
        return rc;
    conf.index.approximate_from = (size_t)approximate_from;
    for (int i = 0; i < 2; i++) {
        const char *key = i ? "same_task_similarity" : "min_similarity";
        const json_t *v = json_object_get(s, key);
        if (v && (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 1))
            return keel_error_set(err, KEEL_EINVAL, i ? "memory.same_task_similarity"
                                                      : "memory.min_similarity",
                                  "must be a number above 0 and at most 1");
        if (v)
            *(i ? &conf.same_task_similarity : &conf.min_similarity) = json_number_value(v);
    }
    if (strcmp(judge, "rules") && strcmp(judge, "model"))
        return keel_error_set(err, KEEL_EINVAL, "memory.judge", "must be rules or model");
    if (!remember)
        return KEEL_OK;
    if (!strcmp(judge, "model") && !pl->llm)
        return keel_error_set(err, KEEL_EINVAL, "memory.judge",
                              "is model, but the pack has no model (llm.url, --llm-url)");
    /* The embedder: the pack's memory.embedder, then KEEL_EMBED_*; none:
     * the hashed one. */
    {
        struct llm_conf ec;
        if ((rc = llm_conf_load_as(json_object_get(s, "embedder"), "memory.embedder",
                                   "KEEL_EMBED", NULL, &ec, err)))
            return rc;
        if (ec.url)
            rc = llm_new(&ec, &pl->embedder, err);
        llm_conf_release(&ec);
        if (rc)
            return rc;
    }
    conf.embedder = pl->embedder;
    return memory_open(pl->store, &conf, !strcmp(judge, "model") ? pl->llm : NULL, &pl->memory,
                       err);
}

/* The pack's `artifacts:` section (seed 001). */
static int open_artifacts(struct pipeline *pl, struct keel_error *err)
{
    const char *routes[POLICY_ROUTE_COUNT];

    for (int i = 0; i < POLICY_ROUTE_COUNT; i++)
        routes[i] = policy_route_name((enum policy_route)i);
    return artifact_conf_load(pl->pack, routes, POLICY_ROUTE_COUNT, &pl->artifacts, err);
}

int pipeline_set_artifacts_dir(struct pipeline *pl, const char *dir, struct keel_error *err)
{
    char *copy = NULL;

    if (dir && *dir && !(copy = keel_strdup(dir)))
        return keel_error_set(err, KEEL_ENOMEM, "artifacts_dir", "out of memory");
    keel_free(pl->artifacts_dir);
    pl->artifacts_dir = copy;
    return KEEL_OK;
}

int pipeline_new(const struct pipeline_options *options, struct pipeline **out,
                 struct keel_error *err)
{
    struct pipeline *pl;
    const char *dir = options->packs_dir ? options->packs_dir : pack_default_dir();
    int rc;

    if (!options->pack || !options->store)
        return keel_error_set(err, KEEL_EINVAL, options->pack ? "store" : "pack", "is required");
    if (!(pl = keel_calloc(1, sizeof(*pl))))
        return keel_error_set(err, KEEL_ENOMEM, "pipeline", "out of memory");
    if (!options->no_state_cache)
        pl->states = state_cache_new();   /* NULL: every state is parsed, as without it */
    if ((rc = policy_load(dir, options->pack, &pl->pack, &pl->policy, err))) {
        keel_free(pl);
        return rc;
    }
    if ((rc = config_load(pl->pack, &pl->cfg, err))) {
        policy_free(pl->policy);
        pack_free(pl->pack);
        keel_free(pl);
        return rc;
    }
    if ((rc = scenario_conf_load(pl->pack, &pl->scenario, err)) ||
        (rc = open_providers(pl, options, err)) || (rc = open_llm(pl, options, err))) {
        pipeline_free(pl);
        return rc;
    }
    pl->store = options->store;
    if ((rc = open_memory(pl, err)) || (rc = open_artifacts(pl, err))) {
        pipeline_free(pl);
        return rc;
    }
    pl->trace = getenv("KEEL_DEBUG_TRACE") && !strcmp(getenv("KEEL_DEBUG_TRACE"), "1");
    pl->web = options->web;
    if ((rc = handlers_load(json_object_get(pl->pack->doc, "handlers"), options->websearch_url,
                            &pl->handlers, err))) {
        pipeline_free(pl);
        return rc;
    }
    /* The web-search provider serves the web_search tool and, when no
     * other port was given, the corpus's web fallback. */
    if (pl->handlers && pl->handlers->websearch.url[0]) {
        if ((rc = websearch_new(&pl->handlers->websearch, &pl->websearch, err))) {
            pipeline_free(pl);
            return rc;
        }
        if (!pl->web)
            pl->web = websearch_port(pl->websearch);
    }
    /* A turn that cannot leave the process (no model, embedder, web
     * search, web fallback or remote paper provider) reads the store from
     * one snapshot: one read transaction instead of one per statement.
     * One that can call out does not: a snapshot held through a slow call
     * would keep SQLite's WAL from starting over. */
    pl->local = !pl->llm && !pl->embedder && !pl->websearch && !pl->web &&
                !(pl->providers && providers_any(pl->providers));
    snprintf(pl->pack_dir, sizeof(pl->pack_dir), "%s/%s", dir, options->pack);
    *out = pl;
    return KEEL_OK;
}

int pipeline_batch_failed(struct pipeline *pl, struct keel_error *err)
{
    return pl->memory ? memory_reload(pl->memory, err) : KEEL_OK;
}

void pipeline_free(struct pipeline *pl)
{
    if (!pl)
        return;
    providers_free(pl->providers);
    handlers_free(pl->handlers);
    websearch_free(pl->websearch);
    memory_free(pl->memory);
    artifact_conf_release(&pl->artifacts);
    keel_free(pl->artifacts_dir);
    llm_free(pl->embedder);
    llm_free(pl->llm);
    state_cache_free(pl->states);
    config_release(&pl->cfg);
    scenario_conf_release(&pl->scenario);
    policy_free(pl->policy);
    pack_free(pl->pack);
    keel_free(pl);
}

int pipeline_check_role(const struct pipeline *pl, const char *role, struct keel_error *err)
{
    char names[512] = "";
    size_t len = 0;

    if (!role || pack_role_index(pl->pack, role) >= 0)
        return KEEL_OK;
    for (size_t i = 0; i < pl->pack->n_roles; i++)
        len += (size_t)snprintf(names + len, len < sizeof(names) ? sizeof(names) - len : 0, "%s%s",
                                i ? ", " : "", pl->pack->roles[i].name);
    return keel_error_set(err, KEEL_EINVAL, "role", "\"%s\" is not a role of pack %s (%s)", role,
                          pl->pack->name, names);
}

const char *pipeline_role_for(const struct pipeline *pl, const char *api_role)
{
    const struct pack *pack = pl->pack;

    if (pack_role_index(pack, api_role) >= 0)
        return api_role;
    if (!strcmp(api_role, "viewer")) {
        for (size_t i = 0; i < pack->n_roles; i++)
            if (!(pack->roles[i].access & PACK_WRITE))
                return pack->roles[i].name;
        return NULL;
    }
    return pack->roles[pack->default_role].name;
}

const struct llm_conf *pipeline_llm(const struct pipeline *pl)
{
    return pl->llm ? llm_get_conf(pl->llm) : NULL;
}

const char *pipeline_pack_name(const struct pipeline *pl)
{
    return pl->pack->name;
}

int pipeline_ingest_sample(struct pipeline *pl, long *ingested, struct keel_error *err)
{
    struct store_counts counts;
    struct ingest_output out = {NULL, NULL};
    struct ingest_stats stats = {0};
    char path[4400];
    int rc;

    *ingested = 0;
    if ((rc = store_counts(pl->store, &counts, err)))
        return rc;
    if (pl->cfg.sample_papers && counts.papers == 0) {
        snprintf(path, sizeof(path), "%s/%s", pl->pack_dir, pl->cfg.sample_papers);
        rc = ingest_papers_file(pl->store, path, &out, &stats, err);
    }
    if (!rc && pl->cfg.sample_corpus && counts.documents == 0) {
        snprintf(path, sizeof(path), "%s/%s", pl->pack_dir, pl->cfg.sample_corpus);
        rc = ingest_docs_dir(pl->store, path, &out, &stats, err);
    }
    *ingested = stats.added;
    ingest_stats_release(&stats);
    return rc;
}

/* ---- a turn's tools -------------------------------------------------------- */

void turn_tool_env(struct turn *t, struct tool_env *env)
{
    memset(env, 0, sizeof(*env));
    env->store = t->pl->store;
    env->web = t->pl->web;
    env->cfg = &t->pl->cfg;
    env->providers = t->pl->providers;
    env->handlers = t->pl->handlers;
    env->user = t->user;
    env->pending = &t->pending;
    env->scenario = &t->scenario;
}

int turn_apply(struct turn *t, const struct state_delta *delta, struct keel_error *err)
{
    return state_apply(&t->state, &t->pl->cfg, delta, t->now, t->deltas, err);
}

/* ---- the request ------------------------------------------------------------ */

static int check_request(const struct pipeline *pl, const struct turn_request *req, int *role,
                         struct keel_error *err)
{
    const char *id = req->conversation_id;
    size_t n;

    if (!req->message || req->message_len == 0)
        return keel_error_set(err, KEEL_EINVAL, "message", "must not be empty");
    if (req->message_len > PIPELINE_MESSAGE_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, "message", "is longer than %d bytes",
                              PIPELINE_MESSAGE_MAX);
    if (utf8_valid_prefix(req->message, req->message_len) != req->message_len ||
        memchr(req->message, '\0', req->message_len))
        return keel_error_set(err, KEEL_EINVAL, "message", "must be UTF-8 text without NUL");
    for (n = 0; n < req->message_len && strchr(" \t\r\n\f\v", req->message[n]); n++)
        ;
    if (n == req->message_len)
        return keel_error_set(err, KEEL_EINVAL, "message", "must not be blank");
    *role = req->role ? pack_role_index(pl->pack, req->role) : pl->pack->default_role;
    if (*role < 0)
        return pipeline_check_role(pl, req->role, err);
    if (req->user && (!*req->user || strlen(req->user) > STORE_PERSONAL_USER_MAX ||
                      utf8_valid_prefix(req->user, strlen(req->user)) != strlen(req->user)))
        return keel_error_set(err, KEEL_EINVAL, "user", "must be 1 to %d bytes of UTF-8",
                              STORE_PERSONAL_USER_MAX);
    if (req->correlation_id && *req->correlation_id &&
        !keel_id_valid(req->correlation_id, "turn"))
        return keel_error_set(err, KEEL_EINVAL, "correlation_id", "is not a turn id");
    if (req->new_conversation_id && *req->new_conversation_id)
        id = req->new_conversation_id;   /* the same rules as an existing id */
    if (id && *id) {
        n = strlen(id);
        if (n > 128)
            return keel_error_set(err, KEEL_EINVAL, "conversation_id", "is longer than 128 bytes");
        for (size_t i = 0; i < n; i++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:",
                        id[i]) || !id[i])
                return keel_error_set(err, KEEL_EINVAL, "conversation_id",
                                      "may hold only letters, digits and _ - . :");
    }
    return KEEL_OK;
}

static void turn_release(struct turn *t)
{
    state_release(&t->state);
    json_decref(t->deltas);
    turn_events_release(t);
    json_decref(t->tools_called);
    json_decref(t->tool_args);
    json_decref(t->sources);
    for (int i = 0; i < BLUEPRINT_MAX_SUBS; i++) {
        json_decref(t->results[i].args);
        json_decref(t->results[i].items);
        json_decref(t->results[i].outcome);
    }
    json_decref(t->route_result);
    keel_buf_release(&t->answer);
    keel_free(t->clarification);
    json_decref(t->blueprint);
    json_decref(t->decision_json);
    json_decref(t->provider_reports);
    json_decref(t->state_json);
    json_decref(t->model_log);
    json_decref(t->model_runs);
    memory_decision_free(t->memory_decision);
    json_decref(t->artifact_gate);
    json_decref(t->artifact);
    json_decref(t->facts);
    keel_free(t->proposal_text);
    scenario_turn_release(&t->scenario);
    keel_free(t->scenario_text);
    keel_free(t->scenario_delta_text);
}

static json_t *result_json(struct turn *t)
{
    json_t *decision = json_incref(t->decision_json), *state = json_incref(t->state_json);
    /* The blueprint as it ended the turn (statuses after resolve), when
     * this turn planned or resumed one. */
    json_t *bp = t->blueprint ? state_blueprint_json(&t->state.blueprint, &t->pl->cfg)
                              : json_null();

    if (!decision || !state || !bp) {   /* the whole result or none of it */
        json_decref(decision);
        json_decref(state);
        json_decref(bp);
        return NULL;
    }
    json_t *artifact = t->artifact
        ? json_pack("{s:O, s:O, s:O, s:I, s:b}", "id", json_object_get(t->artifact, "id"), "type",
                    json_object_get(t->artifact, "type"), "title",
                    json_object_get(t->artifact, "title"), "facts",
                    (json_int_t)json_array_size(t->facts), "exported", t->artifact_exported)
        : json_null();

    if (!artifact) {
        json_decref(decision);
        json_decref(state);
        json_decref(bp);
        return NULL;
    }
    /* Set one by one, not by json_pack: its format walk and the answer's
     * byte-by-byte UTF-8 check cost a turn ~35k instructions. Members in
     * json_pack's order; a NULL optional one is left out (O*), a NULL
     * required one fails the result (a failed allocation). */
    struct { const char *key; json_t *value; int optional; } m[] = {
        {"conversation_id", json_string(t->conversation_id), 0},
        {"turn", json_integer(t->seq), 0},
        {"correlation_id", json_string(t->correlation_id), 0},
        {"answer", keel_json_text(t->answer.data), 0},
        {"sources", json_incref(t->sources), 0},
        {"decision", decision, 0},
        {"stage", json_string(t->state.stage), 0},
        {"stage_before", json_string(t->stage_before), 0},
        {"clarification", t->clarification ? json_string(t->clarification) : json_null(), 0},
        {"kind", json_string(t->kind == TURN_SLOT_FILL ? "slot_fill" : "new_question"), 0},
        {"refined_query", json_string(t->state.refined_query), 0},
        {"tools_called", json_incref(t->tools_called), 0},
        {"tool_args", json_incref(t->tool_args), 0},
        {"state", state, 0},
        {"events", json_incref(t->events), 1},
        {"deltas", json_incref(t->deltas), 0},
        {"blueprint", bp, 0},
        {"providers", json_incref(t->provider_reports), 1},
        {"model", json_incref(t->model_log), 1},
        {"streamed", json_boolean(t->streamed), 0},
        {"memory",
         t->memory_decision ? json_incref((json_t *)memory_decision_json(t->memory_decision))
                            : NULL,
         1},
        {"artifact", artifact, 0},
        {"artifact_gate", json_incref(t->artifact_gate), 1},
    };
    json_t *out = json_object();
    int failed = !out;

    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        if (!m[i].value && m[i].optional) {
            continue;
        } else if (failed || !m[i].value) {
            json_decref(m[i].value);
            failed = 1;
        } else if (json_object_set_new_nocheck(out, m[i].key, m[i].value)) {
            failed = 1;   /* (set_new took the value) */
        }
    }
    if (failed) {
        json_decref(out);
        return NULL;
    }
    return out;
}

int pipeline_turn(struct pipeline *pl, const struct turn_request *req, json_t **result,
                  struct keel_error *err)
{
    struct turn t;
    long failures;
    int rc;
    size_t i;

    memset(&t, 0, sizeof(t));
    keel_buf_init(&t.answer, ANSWER_MAX);
    keel_buf_init(&t.events_text, STORE_TEXT_MAX * 4);   /* publish's cap on a text */
    t.pl = pl;
    t.req = req;
    if ((rc = check_request(pl, req, &t.role, err)))
        return rc;
    t.now = req->now_ms ? req->now_ms : keel_clock_now();
    t.alloc_failures = keel_alloc_failures();
    snprintf(t.user, sizeof(t.user), "%s",
             req->user ? req->user : req->owner && *req->owner ? req->owner : "local");
    if (req->correlation_id && *req->correlation_id)
        snprintf(t.correlation_id, sizeof(t.correlation_id), "%s", req->correlation_id);
    else
        keel_id_new("turn", t.correlation_id, sizeof(t.correlation_id));
    if (state_init(&t.state, &pl->cfg) || !(t.deltas = json_array()) ||
        (!req->no_events_list && !(t.events = json_array())) ||
        !(t.tools_called = json_array()) ||
        !(t.tool_args = json_object()) || !(t.sources = json_array())) {
        rc = keel_error_set(err, KEEL_ENOMEM, "turn", "out of memory");
        goto out;
    }
    /* publish's write ends the snapshot; a turn that stops before it
     * ends it below */
    if (pl->local && (rc = store_read_begin(pl->store, err)))
        goto out;
    for (i = 0; i < N_STAGES; i++) {
        if (t.ended && stages[i].run != stage_publish)
            continue;
        t.stage_name = stages[i].name;
        if (turn_emit(&t, "start", NULL, NULL, "%s", stages[i].started)) {
            rc = keel_error_set(err, KEEL_ENOMEM, stages[i].name, "out of memory");
            goto out;
        }
        if ((rc = stages[i].run(&t, err)))
            goto out;
        /* publish emits its own end before it writes, so the stored
         * events are complete. */
        if (stages[i].run != stage_publish &&
            turn_emit(&t, "end", NULL, NULL, "%s", stages[i].done)) {
            rc = keel_error_set(err, KEEL_ENOMEM, stages[i].name, "out of memory");
            goto out;
        }
    }
    failures = keel_alloc_failures();
    if (!(*result = result_json(&t)) || scenario_turn_result(&t, *result) ||
        json_object_set_new(*result, "closing", json_boolean(t.closing)) ||
        json_object_set_new(*result, "reset", json_boolean(t.reset)) ||
        keel_alloc_failures() != failures) {
        json_decref(*result);
        *result = NULL;
        rc = keel_error_set(err, KEEL_ENOMEM, "turn", "out of memory (the turn was stored)");
    }
out:
    if (pl->local)
        store_read_end(pl->store);
    if (rc)
        keel_log(KEEL_LOG_WARN, "turn.failed",
                 json_pack("{s:s,s:s,s:s,s:s}", "correlation_id", t.correlation_id, "stage",
                           t.stage_name ? t.stage_name : "request", "field", err->field,
                           "error", err->message));
    turn_release(&t);
    return rc;
}
