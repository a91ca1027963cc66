/*
 * stage_resolve.c — resolve: run each pending subquestion on its path.
 *
 * A path without a tool answers from its `unavailable` text (patient:
 * "I can't access your records") or, for the conversation path, leaves
 * the answer to compose. A path with a tool runs it when the tool is in
 * the registry, in the pack, and allowed for the turn's role; arguments
 * are proposed from the refined subquestion and then overridden by the
 * policy's (query, count, years, open access), so nothing proposed can
 * widen a search the policy narrowed. A successful forced search (one
 * or more papers) applies the policy's stage transition, with a history
 * entry. Passages about another plan than the conversation's are
 * dropped (jurisdiction_filter). With a model configured, it first
 * proposes tool calls, which model.c vets; the policy's runs here do not
 * depend on what it proposed.
 */
#include <stdio.h>
#include <string.h>

#include "pipeline/turn.h"

/* Whether `tool`'s schema has the argument `name`: a passage search takes
 * "top_k" where the other searches take "count". */
static int takes(const struct tool_def *tool, const char *name)
{
    for (const struct tool_arg *a = tool->args; a && a->name; a++)
        if (!strcmp(a->name, name))
            return 1;
    return 0;
}

static json_t *proposed_args(const struct turn *t, const struct tool_def *tool, const char *text)
{
    char refined[STATE_TEXT_MAX];
    json_t *args;

    turn_refine(t, text, refined, sizeof(refined));
    args = json_pack("{s:s}", "query", refined);
    if (args && takes(tool, "top_k")) {
        char focus[STATE_TEXT_MAX];
        turn_focus(t, text, focus, sizeof(focus));
        json_object_set_new(args, "top_k", json_integer(t->pl->cfg.top_k));
        if (tools_content_words(&t->pl->cfg, focus) > 0)
            json_object_set_new(args, "focus", json_string(focus));
    }
    return args;
}

/* Policy arguments override proposed ones (seed 000 Phase C). */
static void policy_override(const struct turn *t, const struct tool_def *tool, json_t *args)
{
    const struct policy_decision *d = &t->decision;

    if (!d->has_search || d->force_tool < 0 ||
        strcmp(t->pl->pack->tools[d->force_tool].name, tool->name))
        return;
    if (d->search.query_len)
        json_object_set_new(args, "query", json_stringn(d->search.query, d->search.query_len));
    if (!strcmp(tool->name, "search_papers")) {
        json_object_set_new(args, "count", json_integer(d->search.count));
        json_object_set_new(args, "open_access_only", json_boolean(d->search.open_access_only));
        if (d->search.year_from)
            json_object_set_new(args, "year_from", json_integer(d->search.year_from));
        if (d->search.year_to)
            json_object_set_new(args, "year_to", json_integer(d->search.year_to));
    } else {
        json_object_set_new(args, takes(tool, "top_k") ? "top_k" : "count",
                            json_integer(d->search.count));
    }
}

static int mark(struct turn *t, int i, enum sub_status status, struct keel_error *err)
{
    struct state_delta d = {.kind = DELTA_SUB_STATUS, .index = i, .mask = status};

    return turn_apply(t, &d, err);
}

static int unavailable(struct turn *t, int i, const char *why, struct keel_error *err)
{
    t->results[i].unavailable = 1;
    if (turn_emit(t, "info", "resolve.unavailable", json_pack("{s:i}", "subquestion", i), "%s",
                  why))
        return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
    return mark(t, i, SUB_UNAVAILABLE, err);
}

/* Whether any of `fields` contains `value`, case-insensitively. */
static int names(const char *const fields[3], const char *value)
{
    for (int f = 0; f < 3; f++)
        if (fields[f] && strcasestr(fields[f], value))
            return 1;
    return 0;
}

/* Seed 002's jurisdiction filter: with a needed slot known (the payer),
 * a passage that names another value of that slot and not this one is
 * about another plan and is dropped. Values compare case-insensitively
 * by their canonical names. A passage that names this plan stays
 * whatever else it names, so that is looked for first, and the other
 * values only until one is found. */
static void jurisdiction_filter(const struct turn *t, json_t *passages)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    uint32_t needed = cfg->needed_slots;

    for (size_t i = json_array_size(passages); i-- > 0;) {
        json_t *p = json_array_get(passages, i);
        const char *fields[3] = {json_string_value(json_object_get(p, "title")),
                                 json_string_value(json_object_get(p, "section")),
                                 json_string_value(json_object_get(p, "text"))};
        int other = 0, mine = 0;

        for (int s = 0; s < cfg->n_slots && !mine; s++) {
            if (!(needed >> s & 1) || !t->state.slots[s][0])
                continue;
            for (int v = 0; v < cfg->slots[s].n_values && !mine; v++)
                if (!strcmp(cfg->slots[s].values[v], t->state.slots[s]))
                    mine = names(fields, cfg->slots[s].values[v]);
            for (int v = 0; v < cfg->slots[s].n_values && !mine && !other; v++)
                if (strcmp(cfg->slots[s].values[v], t->state.slots[s]))
                    other = names(fields, cfg->slots[s].values[v]);
        }
        if (other && !mine)
            json_array_remove(passages, i);
    }
}

/* "resolve.confident", "resolve.none": the event key of an outcome. */
static const char *outcome_key(const struct sub_result *r, char *out, size_t n)
{
    snprintf(out, n, "resolve.%s", r->band);
    return out;
}

/* Tells what each remote paper provider did: a user-level event when one
 * failed (the others' papers stand) or could not apply the filters (they
 * were applied here), and the reports for the decision log. */
static int provider_events(struct turn *t, json_t *reports)
{
    json_t *r;
    size_t i;

    if (!reports)
        return KEEL_OK;
    if (!t->provider_reports && !(t->provider_reports = json_array()))
        return KEEL_ENOMEM;
    json_array_foreach(reports, i, r) {
        const char *status = json_string_value(json_object_get(r, "status"));
        const char *name = json_string_value(json_object_get(r, "provider"));
        const char *reason = json_string_value(json_object_get(r, "reason"));
        json_t *extra = json_pack("{s:s?, s:s?, s:O?}", "provider", name, "reason", reason,
                                  "http_status", json_object_get(r, "http_status"));
        int rc = KEEL_OK;

        if (json_array_append(t->provider_reports, r)) {
            json_decref(extra);
            return KEEL_ENOMEM;
        }
        if (status && !strcmp(status, "failed"))
            rc = turn_emit(t, "info", "resolve.provider_failed", extra, "%s failed: %s", name,
                           reason);
        else if (status && !strcmp(status, "ok_without_filters"))
            rc = turn_emit(t, "info", "resolve.provider_unfiltered", extra, "%s: %s", name,
                           reason);
        else
            json_decref(extra);
        if (rc)
            return rc;
    }
    return KEEL_OK;
}

static int after_search(struct turn *t, int i, const struct tool_def *tool, json_t *out,
                        struct keel_error *err)
{
    struct sub_result *r = &t->results[i];
    char key[48];
    int n;

    r->ran = 1;
    r->tool = tool->name;
    if (json_is_string(json_object_get(out, "text"))) {
        /* a calculator (uk_income_tax): its text is the answer */
        r->items = json_incref(out);
        r->band = "computed";
        if (turn_emit(t, "info", "resolve.computed", json_pack("{s:s}", "tool", tool->name),
                      "%s computed", tool->name))
            return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
        return mark(t, i, SUB_ANSWERED, err);
    }
    if (!strcmp(tool->name, "web_search")) {
        r->items = json_incref(json_object_get(out, "results"));
        r->outcome = json_copy(out);
        if (r->outcome)
            json_object_del(r->outcome, "results");
        n = (int)json_array_size(r->items);
        r->band = n ? "found" : "none";
        if (json_is_true(json_object_get(out, "failed")) &&
            turn_emit(t, "info", "resolve.websearch_failed",
                      json_pack("{s:O?}", "reason", json_object_get(out, "reason")),
                      "web search failed: %s",
                      json_string_value(json_object_get(out, "reason"))))
            return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
    } else if (!strcmp(tool->name, "search_papers")) {
        if (provider_events(t, json_object_get(out, "providers")))
            return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
        r->items = json_incref(json_object_get(out, "papers"));
        n = (int)json_array_size(r->items);
        r->band = n ? "found" : "none";
    } else {
        r->items = json_incref(json_object_get(out, "passages"));
        jurisdiction_filter(t, r->items);
        r->confidence = 0;
        for (size_t k = 0; k < json_array_size(r->items); k++) {
            double c = json_number_value(json_object_get(json_array_get(r->items, k), "confidence"));
            r->confidence = c > r->confidence ? c : r->confidence;
        }
        r->band = tools_band(&t->pl->cfg, r->confidence);   /* static: `out` is freed after */
        n = (int)json_array_size(r->items);
        if (json_object_get(out, "web")) {
            json_t *web = json_object_get(out, "web");
            for (size_t k = 0; k < json_array_size(web); k++)
                json_array_append(r->items, json_array_get(web, k));
            if (turn_emit(t, "info", "resolve.fallback", NULL, "web fallback %s: %d results",
                          json_string_value(json_object_get(out, "web_fallback")),
                          (int)json_array_size(web)))
                return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
        } else if (json_object_get(out, "web_fallback") &&
                   turn_emit(t, "info", NULL, NULL,
                             "corpus confidence %.2f is low and no web fallback is configured",
                             r->confidence)) {
            return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
        }
    }
    if (turn_emit(t, "info", outcome_key(r, key, sizeof(key)),
                  json_pack("{s:s,s:i,s:f}", "tool", tool->name, "results", n, "confidence",
                            r->confidence),
                  "%s: %d results (%s)", tool->name, n, r->band))
        return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
    return mark(t, i, SUB_ANSWERED, err);
}

static int stage_transition(struct turn *t, const struct tool_def *tool, struct keel_error *err)
{
    const struct policy_decision *d = &t->decision;

    if (d->force_tool < 0 || strcmp(t->pl->pack->tools[d->force_tool].name, tool->name) ||
        !d->stage_transition)
        return KEEL_OK;
    struct state_delta delta = {.kind = DELTA_STAGE, .text = d->stage_transition,
                                .reason = "search_succeeded", .number = 1.0};
    return turn_apply(t, &delta, err);
}

static int run_sub(struct turn *t, int i, struct keel_error *err)
{
    const struct blueprint_sub *sub = &t->state.blueprint.subs[i];
    const struct config_path *path = &t->pl->cfg.paths[sub->path];
    const struct tool_def *tool;
    struct tool_env env;
    json_t *args, *out = NULL;
    int index, rc;

    turn_tool_env(t, &env);
    if (!path->tool) {
        if (path->unavailable)
            return unavailable(t, i, "path has no capability for this", err);
        return mark(t, i, SUB_ANSWERED, err);   /* conversation: compose answers */
    }
    tool = tools_find(path->tool);
    index = pack_tool_index(t->pl->pack, path->tool, strlen(path->tool));
    if (!tool)
        return unavailable(t, i, "tool is not in the registry", err);
    if (!pack_role_may_call(t->pl->pack, t->role, index))
        return unavailable(t, i, "the role may not call this tool", err);
    if (!(args = proposed_args(t, tool, sub->text)))
        return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
    policy_override(t, tool, args);
    t->results[i].args = args;
    if (turn_emit(t, "info", "resolve.search", json_pack("{s:s,s:O}", "tool", tool->name, "args",
                                                        args),
                  "calling %s", tool->name) ||
        json_array_append_new(t->tools_called, json_string(tool->name)) ||
        json_object_set(t->tool_args, tool->name, args))
        return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
    if ((rc = tools_run(tool, &env, args, &out, err)))
        return rc;   /* bad arguments or a store failure: the turn fails, nothing is stored */
    rc = after_search(t, i, tool, out, err);
    json_decref(out);
    if (t->decision.force_tool == index)
        t->forced_tool_ran = 1;
    if (!rc && (json_array_size(t->results[i].items) > 0 || strcmp(tool->name, "search_papers")))
        rc = stage_transition(t, tool, err);
    return rc;
}

int stage_resolve(struct turn *t, struct keel_error *err)
{
    int rc;

    if ((rc = model_propose(t, err)))
        return rc;
    if (t->routed)
        return route_resolve(t, err);
    if (t->no_tools)
        return turn_emit(t, "info", NULL, NULL, "no tool runs: %s",
                         policy_reason_name(t->decision.reason))
                   ? keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory")
                   : KEEL_OK;
    for (int i = 0; i < t->state.blueprint.n_subs; i++)
        if (t->state.blueprint.subs[i].status == SUB_PENDING && (rc = run_sub(t, i, err)))
            return rc;
    return model_settle(t, err);
}
