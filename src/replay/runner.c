/*
 * runner.c — reads fixture files, runs each case's turns through the
 * policy of its pack (or, in a pipeline case, through the whole turn
 * pipeline over a fresh in-memory store) and reports every mismatch as
 *   FAIL origin: case "name" turn N: field: expected X, actual Y
 * Packs are loaded once per runner and kept until replay_free(); a
 * pipeline case builds its own store and pipeline and frees them when it
 * ends.
 */
#include "replay/replay.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/json.h"
#include "pack/pack.h"
#include "pipeline/pipeline.h"
#include "policy/policy.h"
#include "replay/expect.h"
#include "store/store.h"

#define REPLAY_MAX_PACKS 16
#define REPLAY_MAX_TOOLS 64

struct loaded_pack {
    char name[PACK_NAME_MAX];
    struct pack *pack;        /* NULL when loading failed */
    struct policy *policy;
};

struct replay {
    char *packs_dir;
    FILE *out;
    struct loaded_pack packs[REPLAY_MAX_PACKS];
    size_t n_packs;
};

struct replay *replay_new(const char *packs_dir, FILE *out)
{
    struct replay *replay = keel_calloc(1, sizeof(*replay));

    if (!replay)
        return NULL;
    replay->out = out ? out : stdout;
    if (packs_dir && !(replay->packs_dir = keel_strdup(packs_dir))) {
        keel_free(replay);
        return NULL;
    }
    return replay;
}

void replay_free(struct replay *replay)
{
    if (!replay)
        return;
    for (size_t i = 0; i < replay->n_packs; i++) {
        policy_free(replay->packs[i].policy);
        pack_free(replay->packs[i].pack);
    }
    keel_free(replay->packs_dir);
    keel_free(replay);
}

static int get_policy(struct replay *replay, const char *name, struct policy **out,
                      const struct pack **pack, struct keel_error *err)
{
    struct loaded_pack *slot;
    int rc = KEEL_OK;

    /* A pack is loaded once per run; one that failed is reported once and
     * then only named, so a broken pack does not repeat its error per case. */
    for (size_t i = 0; i < replay->n_packs; i++)
        if (!strcmp(replay->packs[i].name, name)) {
            if (!replay->packs[i].policy)
                return keel_error_set(err, KEEL_EINVAL, "pack",
                                      "pack \"%.64s\" could not be loaded (reported above)", name);
            *out = replay->packs[i].policy;
            *pack = replay->packs[i].pack;
            return KEEL_OK;
        }
    if (replay->n_packs == REPLAY_MAX_PACKS)
        return keel_error_set(err, KEEL_ETOOBIG, "pack", "more than %d packs in one run",
                              REPLAY_MAX_PACKS);
    slot = &replay->packs[replay->n_packs];
    if (strlen(name) < sizeof(slot->name))
        rc = policy_load(replay->packs_dir, name, &slot->pack, &slot->policy, err);
    if (strlen(name) >= sizeof(slot->name))
        return keel_error_set(err, KEEL_EINVAL, "pack", "\"%.64s…\" is not a pack name", name);
    snprintf(slot->name, sizeof(slot->name), "%s", name);
    replay->n_packs++;
    if (rc)
        return rc;
    *out = slot->policy;
    *pack = slot->pack;
    return KEEL_OK;
}

struct failure_ctx {
    struct replay *replay;
    const char *origin;
    const char *name;
    size_t turn;
};

static void print_value(FILE *out, const json_t *value)
{
    char *text = value ? json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;

    fputs(text ? text : "(missing)", out);
    keel_free(text);
}

static void report_mismatch(void *opaque, const char *field, const json_t *expected,
                            const json_t *actual)
{
    struct failure_ctx *f = opaque;
    FILE *out = f->replay->out;

    fprintf(out, "FAIL %s: case \"%s\" turn %zu: %s: expected ", f->origin, f->name, f->turn, field);
    print_value(out, expected);
    fputs(", actual ", out);
    print_value(out, actual);
    fputc('\n', out);
}

/* Reads {topic_hint, tools} into the out parameters (unchanged when absent). */
static int read_context(const json_t *context, const char *path, const char **topic_hint,
                        const char **tools, size_t *n_tools, int *tools_given,
                        struct keel_error *err)
{
    static const char *const keys[] = {"topic_hint", "tools", NULL};
    char field[KEEL_JSON_PATH_MAX];
    json_t *hint, *list, *item;
    size_t i;
    int rc;

    if (!context)
        return KEEL_OK;
    if (!json_is_object(context))
        return keel_error_set(err, KEEL_EINVAL, path, "must be an object");
    if ((rc = keel_json_check_keys(context, keys, path, err)))
        return rc;
    hint = json_object_get(context, "topic_hint");
    if (hint) {
        keel_json_path_key(field, sizeof(field), path, "topic_hint");
        if (!json_is_string(hint) && !json_is_null(hint))
            return keel_error_set(err, KEEL_EINVAL, field, "must be a string or null");
        *topic_hint = json_is_string(hint) ? json_string_value(hint) : NULL;
    }
    list = json_object_get(context, "tools");
    if (list) {
        keel_json_path_key(field, sizeof(field), path, "tools");
        if (!json_is_array(list) || json_array_size(list) > REPLAY_MAX_TOOLS)
            return keel_error_set(err, KEEL_EINVAL, field, "must be a list of at most %d tool names",
                                  REPLAY_MAX_TOOLS);
        json_array_foreach(list, i, item) {
            if (!json_is_string(item))
                return keel_error_set(err, KEEL_EINVAL, field, "item %zu must be a string", i);
            tools[i] = json_string_value(item);
        }
        *n_tools = json_array_size(list);
        *tools_given = 1;
    }
    return KEEL_OK;
}

/* What a case gives all its turns. */
struct case_setup {
    const char *origin, *name, *role, *hint;
    const char *tools[REPLAY_MAX_TOOLS];
    size_t n_tools;
    int tools_given;
    int64_t now;
    struct policy *policy;
    /* pipeline cases */
    const char *pack_name;
    int pipeline;
    struct pipeline *pl;
    char conversation[160];   /* the id the first turn got */
};

/* Checks a turn's actual JSON against its `expect`. Returns KEEL_OK,
 * KEEL_EFAIL (mismatches printed) or a fixture error naming the field in
 * full (turns[i].expect.…). */
static int check_turn(struct replay *replay, const struct case_setup *setup, const json_t *turn,
                      const char *path, size_t index, const json_t *actual,
                      struct keel_error *err)
{
    struct failure_ctx report = {replay, setup->origin, setup->name, index + 1};
    json_t *expect = json_object_get(turn, "expect");
    char field[KEEL_JSON_PATH_MAX];
    int mismatches = 0, rc;

    keel_json_path_key(field, sizeof(field), path, "expect");
    if (!expect)
        return keel_error_set(err, KEEL_EINVAL, field, "is required");
    rc = expect_check_turn(expect, actual, setup->pipeline, "", report_mismatch, &report,
                           &mismatches, err);
    if (rc) {
        char full[KEEL_JSON_PATH_MAX + KEEL_ERROR_FIELD_MAX + 2];
        char message[KEEL_ERROR_MESSAGE_MAX];
        snprintf(full, sizeof(full), "%s%s%s", field, err->field[0] ? "." : "", err->field);
        snprintf(message, sizeof(message), "%s", err->message);
        return keel_error_set(err, rc, full, "%s", message);
    }
    return mismatches ? KEEL_EFAIL : KEEL_OK;
}

/* The policy's decision for `user` under the turn's context, as JSON. */
static int decide_turn(const struct case_setup *setup, const json_t *turn, const char *path,
                       const char *user, json_t **actual, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    const char *hint = setup->hint, *tools[REPLAY_MAX_TOOLS];
    size_t n_tools = setup->n_tools;
    int tools_given = setup->tools_given, rc;
    struct policy_context ctx;
    struct policy_decision decision;

    memcpy(tools, setup->tools, setup->n_tools * sizeof(tools[0]));
    keel_json_path_key(field, sizeof(field), path, "context");
    if ((rc = read_context(json_object_get(turn, "context"), field, &hint, tools, &n_tools,
                           &tools_given, err)) ||
        (rc = policy_context_init(&ctx, setup->policy, setup->role, tools_given ? tools : NULL,
                                  n_tools, hint, setup->now, err)))
        return rc;
    policy_decide(setup->policy, &ctx, user, strlen(user), &decision);
    if (!(*actual = policy_decision_json(setup->policy, &decision)))
        return keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
    return KEEL_OK;
}

/* Runs `user` as the next turn of the case's conversation. *actual gets
 * the decision's fields and the turn result's (answer, stage, state,
 * events, …) side by side. A turn the pipeline refuses or fails is a
 * fixture error naming the turn. */
static int pipeline_step(struct case_setup *setup, const char *path, const char *user,
                         const json_t *scenario, json_t **actual, struct keel_error *err)
{
    struct turn_request req = {
        .conversation_id = setup->conversation[0] ? setup->conversation : NULL,
        .message = user,
        .message_len = strlen(user),
        .role = setup->role,
        .now_ms = setup->now,
        .active_scenario = scenario,
    };
    json_t *result = NULL, *merged;
    int rc;

    if ((rc = pipeline_turn(setup->pl, &req, &result, err))) {
        char message[KEEL_ERROR_FIELD_MAX + KEEL_ERROR_MESSAGE_MAX + 4];
        keel_error_format(err, message, sizeof(message));
        return keel_error_set(err, rc, path, "the turn failed: %s", message);
    }
    snprintf(setup->conversation, sizeof(setup->conversation), "%s",
             json_string_value(json_object_get(result, "conversation_id")));
    merged = json_object();
    if (!merged || json_object_update(merged, result) ||
        json_object_update(merged, json_object_get(result, "decision")) ||
        json_object_del(merged, "decision")) {
        json_decref(merged);
        json_decref(result);
        return keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
    }
    json_decref(result);
    *actual = merged;
    return KEEL_OK;
}

/* A scenario_patch step (seed 004): `patch` changes the conversation's
 * scenario outside a turn, as PATCH /v1/conversations/{id}/scenario
 * does (null clears it). *actual is {active_scenario, scenario_summary,
 * scenario_error: {code, field, message} or null}: a refused patch is
 * an outcome to check, not a fixture error. */
static int scenario_step(struct case_setup *setup, const char *path, const json_t *patch,
                         json_t **actual, struct keel_error *err)
{
    json_t *scenario = NULL, *summary = NULL;
    struct keel_error perr;
    int rc;

    if (!setup->conversation[0])
        return keel_error_set(err, KEEL_EINVAL, path,
                              "a scenario_patch step needs a conversation: a turn first");
    keel_error_clear(&perr);
    rc = pipeline_scenario_change(setup->pl, setup->conversation,
                                  json_is_null(patch) ? NULL : patch, &scenario, &summary, &perr);
    if (rc == KEEL_ENOMEM)
        return keel_error_set(err, rc, path, "out of memory");
    if (rc)
        *actual = json_pack("{s:n, s:n, s:{s:s, s:s, s:s}}", "active_scenario",
                            "scenario_summary", "scenario_error", "code", keel_result_token(rc),
                            "field", perr.field, "message", perr.message);
    else
        *actual = json_pack("{s:o, s:o, s:n}", "active_scenario", scenario, "scenario_summary",
                            summary, "scenario_error");
    return *actual ? KEEL_OK : keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
}

/* Runs turn `index` of a case — the policy decision under the turn's own
 * context over the case's, or the whole turn through the pipeline — and
 * checks it. Same returns as check_turn. */
static int run_turn(struct replay *replay, struct case_setup *setup, const json_t *turn,
                    size_t index, struct keel_error *err)
{
    static const char *const turn_keys[] = {"user", "context", "expect", "active_scenario",
                                            "scenario_patch", NULL};
    char path[KEEL_JSON_PATH_MAX], field[KEEL_JSON_PATH_MAX];
    const char *user = NULL;
    json_t *actual = NULL;
    int rc;

    keel_json_path_index(path, sizeof(path), "turns", index);
    if (!json_is_object(turn))
        return keel_error_set(err, KEEL_EINVAL, path, "must be an object");
    if ((rc = keel_json_check_keys(turn, turn_keys, path, err)))
        return rc;
    if (json_object_get(turn, "scenario_patch") || json_object_get(turn, "active_scenario")) {
        const char *key = json_object_get(turn, "scenario_patch") ? "scenario_patch"
                                                                  : "active_scenario";
        keel_json_path_key(field, sizeof(field), path, key);
        if (!setup->pipeline)
            return keel_error_set(err, KEEL_EINVAL, field,
                                  "is used only in pipeline cases (\"pipeline\": true)");
        if (json_object_get(turn, "scenario_patch") && json_object_get(turn, "user"))
            return keel_error_set(err, KEEL_EINVAL, field,
                                  "is a step of its own: a turn has either user or "
                                  "scenario_patch");
    }
    if (json_object_get(turn, "scenario_patch")) {
        if ((rc = scenario_step(setup, path, json_object_get(turn, "scenario_patch"), &actual,
                                err)))
            return rc;
        rc = check_turn(replay, setup, turn, path, index, actual, err);
        json_decref(actual);
        return rc;
    }
    if ((rc = keel_json_get_string(turn, "user", 1, path, &user, err)))
        return rc;
    if (setup->pipeline && json_object_get(turn, "context")) {
        keel_json_path_key(field, sizeof(field), path, "context");
        return keel_error_set(err, KEEL_EINVAL, field,
                              "is not used in pipeline cases (the topic comes from the "
                              "conversation, the tools from the pack and the role)");
    }
    rc = setup->pipeline ? pipeline_step(setup, path, user, json_object_get(turn, "active_scenario"),
                                         &actual, err)
                         : decide_turn(setup, turn, path, user, &actual, err);
    if (rc)
        return rc;
    rc = check_turn(replay, setup, turn, path, index, actual, err);
    json_decref(actual);
    return rc;
}

/* A fresh in-memory store holding the pack's sample data and a pipeline
 * over it, for one pipeline case. */
static int open_pipeline(struct replay *replay, struct case_setup *setup, struct store **store,
                         struct keel_error *err)
{
    /* No model and no web search: a replay answers the same anywhere. */
    struct pipeline_options options = {.packs_dir = replay->packs_dir, .pack = setup->pack_name,
                                       .llm = {"none", NULL, NULL}, .websearch_url = "none"};
    long ingested = 0;
    int rc;

    if ((rc = store_open("mem:", store, err)))
        return rc;
    options.store = *store;
    if ((rc = pipeline_new(&options, &setup->pl, err)) ||
        (rc = pipeline_ingest_sample(setup->pl, &ingested, err))) {
        char message[KEEL_ERROR_FIELD_MAX + KEEL_ERROR_MESSAGE_MAX + 4];
        keel_error_format(err, message, sizeof(message));
        return keel_error_set(err, rc, "pipeline", "pack %s: %s", setup->pack_name, message);
    }
    return KEEL_OK;
}

/* Runs one case. Returns KEEL_OK (pass), KEEL_EFAIL (mismatch, already
 * printed) or another code for a fixture error described in err. */
static int run_case(struct replay *replay, const json_t *c, const char *origin,
                    const char *name, struct keel_error *err)
{
    static const char *const case_keys[] = {"name", "pack", "now", "role", "context", "notes",
                                            "pipeline", "turns", NULL};
    struct case_setup setup = {.origin = origin, .name = name};
    const char *now_text = NULL, *notes = NULL;
    const struct pack *pack = NULL;
    struct store *store = NULL;
    int failed = 0, rc;
    json_t *turns, *turn;
    size_t i;

    if ((rc = keel_json_check_keys(c, case_keys, "", err)) ||
        (rc = keel_json_get_string(c, "pack", 1, "", &setup.pack_name, err)) ||
        (rc = keel_json_get_string(c, "now", 0, "", &now_text, err)) ||
        (rc = keel_json_get_string(c, "role", 0, "", &setup.role, err)) ||
        (rc = keel_json_get_string(c, "notes", 0, "", &notes, err)) ||
        (rc = keel_json_get_bool(c, "pipeline", 0, "", &setup.pipeline, err)))
        return rc;
    if (setup.pipeline && json_object_get(c, "context"))
        return keel_error_set(err, KEEL_EINVAL, "context",
                              "is not used in pipeline cases (the topic comes from the "
                              "conversation, the tools from the pack and the role)");
    if ((rc = read_context(json_object_get(c, "context"), "context", &setup.hint, setup.tools,
                           &setup.n_tools, &setup.tools_given, err)))
        return rc;
    if (now_text) {
        if ((rc = keel_time_parse(now_text, strlen(now_text), &setup.now, "now", err)))
            return rc;
    } else if (keel_clock_pinned()) {
        setup.now = keel_clock_now();
    } else {
        return keel_error_set(err, KEEL_EINVAL, "now",
                              "is required (or pin the clock with KEEL_NOW) so the case is reproducible");
    }
    turns = json_object_get(c, "turns");
    if (!json_is_array(turns) || json_array_size(turns) == 0)
        return keel_error_set(err, KEEL_EINVAL, "turns", "must be a non-empty list of turns");
    if ((rc = get_policy(replay, setup.pack_name, &setup.policy, &pack, err)))
        return rc;
    if (setup.pipeline) {
        /* The pipeline takes any role string and refuses it at turn 1;
         * a bad role is the case's mistake, so it is named here. */
        if (setup.role && pack_role_index(pack, setup.role) < 0)
            return keel_error_set(err, KEEL_EINVAL, "role", "\"%.64s\" is not a role of pack %s",
                                  setup.role, pack->name);
        if ((rc = open_pipeline(replay, &setup, &store, err)))
            goto out;
    }
    json_array_foreach(turns, i, turn) {
        rc = run_turn(replay, &setup, turn, i, err);
        if (rc && rc != KEEL_EFAIL)
            goto out;
        failed |= rc == KEEL_EFAIL;
    }
    rc = failed ? KEEL_EFAIL : KEEL_OK;
out:
    pipeline_free(setup.pl);
    store_close(store);
    return rc;
}

static void run_value(struct replay *replay, const json_t *value, const char *origin,
                      size_t *index, struct replay_stats *stats)
{
    struct keel_error err;
    const char *name = NULL;
    char label[96];
    int rc;

    if (json_is_array(value)) {
        json_t *item;
        size_t i;
        json_array_foreach(value, i, item)
            run_value(replay, item, origin, index, stats);
        return;
    }
    keel_error_clear(&err);
    snprintf(label, sizeof(label), "#%zu", *index + 1);
    (*index)++;
    if (!json_is_object(value)) {
        rc = keel_error_set(&err, KEEL_EINVAL, "", "a case must be an object, not %s",
                            keel_json_type_name(value));
    } else {
        json_t *n = json_object_get(value, "name");
        name = json_is_string(n) ? json_string_value(n) : NULL;
        rc = name ? run_case(replay, value, origin, name, &err)
                  : keel_error_set(&err, KEEL_EINVAL, "name", "is required");
    }
    if (rc == KEEL_OK) {
        stats->passed++;
        return;
    }
    stats->failed++;
    if (rc != KEEL_EFAIL) {
        char text[KEEL_ERROR_FIELD_MAX + KEEL_ERROR_MESSAGE_MAX + 4];
        fprintf(replay->out, "ERROR %s: case \"%s\": %s\n", origin, name ? name : label,
                keel_error_format(&err, text, sizeof(text)));
    }
}

void replay_run_text(struct replay *replay, const char *text, size_t n, const char *origin,
                     struct replay_stats *stats)
{
    size_t offset = 0, index = 0;

    for (;;) {
        json_error_t jerr;
        json_t *value;
        while (offset < n && (text[offset] == ' ' || text[offset] == '\n' ||
                              text[offset] == '\r' || text[offset] == '\t'))
            offset++;
        if (offset >= n)
            break;
        value = json_loadb(text + offset, n - offset,
                           JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &jerr);
        if (!value) {
            int line = jerr.line;
            for (size_t i = 0; i < offset; i++)
                line += text[i] == '\n';
            fprintf(replay->out,
                    "ERROR %s: invalid JSON near line %d column %d: %s (cases after this point were not run)\n",
                    origin, line, jerr.column, jerr.text);
            stats->failed++;
            return;
        }
        run_value(replay, value, origin, &index, stats);
        json_decref(value);
        if (jerr.position <= 0)
            break;
        offset += (size_t)jerr.position;
    }
    if (index == 0) {
        fprintf(replay->out, "ERROR %s: no cases\n", origin);
        stats->failed++;
    }
}

static int is_fixture_name(const char *name)
{
    size_t n = strlen(name);

    return name[0] != '.' && ((n > 5 && !strcmp(name + n - 5, ".json")) ||
                              (n > 6 && !strcmp(name + n - 6, ".jsonl")));
}

static int run_dir(struct replay *replay, const char *path, struct replay_stats *stats,
                   struct keel_error *err)
{
    struct dirent **entries;
    int n = scandir(path, &entries, NULL, alphasort), rc = KEEL_OK;

    if (n < 0) {
        keel_error_set(err, KEEL_EIO, path, "cannot read directory: %s", strerror(errno));
        fprintf(replay->out, "ERROR %s: cannot read directory: %s\n", path, strerror(errno));
        stats->failed++;
        return KEEL_EIO;
    }
    for (int i = 0; i < n; i++) {
        char child[4096];
        const char *name = entries[i]->d_name;
        if (name[0] != '.') {
            snprintf(child, sizeof(child), "%s/%s", path, name);
            if (keel_is_dir(child)) {
                int sub = run_dir(replay, child, stats, err);
                rc = rc ? rc : sub;
            } else if (is_fixture_name(name)) {
                int sub = replay_run_path(replay, child, stats, err);
                rc = rc ? rc : sub;
            }
        }
        free(entries[i]);
    }
    free(entries);
    return rc;
}

int replay_run_path(struct replay *replay, const char *path, struct replay_stats *stats,
                    struct keel_error *err)
{
    struct keel_buf text;
    int rc;

    if (keel_is_dir(path))
        return run_dir(replay, path, stats, err);
    keel_buf_init(&text, REPLAY_FILE_MAX + 1);
    rc = keel_file_read(path, REPLAY_FILE_MAX, &text, err);
    if (rc) {
        char message[KEEL_ERROR_FIELD_MAX + KEEL_ERROR_MESSAGE_MAX + 4];
        fprintf(replay->out, "ERROR %s\n", keel_error_format(err, message, sizeof(message)));
        stats->failed++;
    } else {
        replay_run_text(replay, text.data, text.len, path, stats);
    }
    keel_buf_release(&text);
    return rc;
}
