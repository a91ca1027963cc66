/*
 * stage_plan.c — plan: the blueprint of subquestions, each on a path of
 * the pack's capability registry (seed 002 §3.0).
 *
 * A new question is split at sentence ends, at the pack's split phrases
 * ("and also") and at "and" before a question word ("how do I file an
 * appeal and what is the deadline"); pieces of fewer than two words stay
 * with their neighbour, and of several pieces those with fewer than two
 * content words are dropped as context. A piece goes to the first path whose phrases it
 * holds ("my prior auth" → patient), else to the default path (rag). When
 * the policy forced a tool (a paper search), the whole message is one
 * subquestion on the path that runs that tool. A slot_fill turn resumes
 * the stored blueprint instead of planning anew. A turn that runs no tool
 * (smalltalk, a command, a veto) leaves the blueprint as it was. With
 * the pack's llm.planner on, the model may propose the split instead
 * (model_plan.c), validated, with this split as the fallback.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/utf8.h"
#include "pipeline/turn.h"

static int token_is(const char *msg, const struct lex_token *tok, const char *word)
{
    return tok->len == strlen(word) && !strncasecmp(msg + tok->start, word, tok->len);
}

static int path_of(const struct pipeline_config *cfg, const struct lex_result *res,
                   uint32_t from, uint32_t to)
{
    for (uint32_t i = 0; i < res->n_matches; i++) {
        const struct lex_match *m = &res->matches[i];
        int p = (int)m->category - CCAT_PATH;

        if (p >= 0 && p < cfg->n_paths && m->start >= from && m->start < to)
            return p;
    }
    return cfg->default_path;
}

static void add_sub(struct blueprint *bp, const char *msg, const struct lex_result *res,
                    uint32_t from, uint32_t to, int path)
{
    struct blueprint_sub *sub;
    size_t a, b;

    while (to > from && token_is(msg, &res->tokens[to - 1], "and"))
        to--;
    if (to <= from)
        return;
    if (to - from < 2 && bp->n_subs > 0)
        return;   /* a one-word piece ("Thanks.") adds no question */
    if (bp->n_subs == BLUEPRINT_MAX_SUBS)
        return;
    a = res->tokens[from].start;
    b = res->tokens[to - 1].start + res->tokens[to - 1].len;
    while (b < strlen(msg) && strchr("?.!", msg[b]))
        b++;
    sub = &bp->subs[bp->n_subs++];
    snprintf(sub->text, sizeof(sub->text), "%.*s", (int)(b - a), msg + a);
    sub->path = path;
    sub->status = SUB_PENDING;
}

static void split(const struct pipeline_config *cfg, const char *msg, size_t n,
                  struct blueprint *bp)
{
    struct lex_result res;
    uint8_t split_at[LEX_MAX_TOKENS] = {0}, skip[LEX_MAX_TOKENS] = {0};
    uint32_t from = 0;

    config_match(cfg, msg, n, &res);
    for (uint32_t i = 0; i < res.n_matches; i++) {
        const struct lex_match *m = &res.matches[i];

        if (m->category == CCAT_SPLIT && m->start > 0) {
            split_at[m->start] = 1;
            memset(skip + m->start, 1, m->n);
        }
        if (m->category == CCAT_QSTART && m->start > 0 &&
            token_is(msg, &res.tokens[m->start - 1], "and"))
            split_at[m->start] = 1;
    }
    for (uint32_t i = 1; i < res.n_tokens; i++)
        if (res.tokens[i].flags & LEX_SENTENCE)
            split_at[i] = 1;
    for (uint32_t i = 1; i <= res.n_tokens; i++) {
        if (i < res.n_tokens && !split_at[i])
            continue;
        while (from < i && skip[from])
            from++;
        if (from < i) {
            /* A piece too short to stand alone joins the next one. */
            if (i - from < 2 && i < res.n_tokens && bp->n_subs == 0)
                continue;
            add_sub(bp, msg, &res, from, i, path_of(cfg, &res, from, i));
        }
        from = i;
    }
    /* Of several pieces, those with fewer than two content words ("my
     * name is [redacted]", "Thanks") are context, not questions. */
    if (bp->n_subs > 1) {
        int kept = 0;
        for (int i = 0; i < bp->n_subs; i++)
            if (tools_content_words(cfg, bp->subs[i].text) >= 2)
                bp->subs[kept++] = bp->subs[i];
        if (kept)
            bp->n_subs = kept;
    }
    if (bp->n_subs == 0 && n > 0) {   /* no words at all: the message as is */
        snprintf(bp->subs[0].text, sizeof(bp->subs[0].text), "%.*s", (int)n, msg);
        bp->subs[0].path = cfg->default_path;
        bp->n_subs = 1;
    }
}

/* A model's plan answers to the phrases as any plan does: a subquestion
 * that holds a path's phrases ("my prior auth") goes to that path, and
 * every path the phrase-based plan found (a patient or clinical
 * question) must still have a subquestion — the model cannot route a
 * question away from the path that says "I can't". Otherwise the
 * phrase-based plan stands (*used 0), and the log says why. */
static int guard_plan(struct turn *t, struct blueprint *bp, const struct blueprint *det,
                      int *used, struct keel_error *err)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    struct lex_result res;
    char why[160] = "";

    for (int i = 0; i < bp->n_subs; i++) {
        size_t n = strlen(bp->subs[i].text);
        int p;
        config_match(cfg, bp->subs[i].text, n, &res);
        if ((p = path_of(cfg, &res, 0, res.n_tokens)) != cfg->default_path)
            bp->subs[i].path = p;
    }
    for (int k = 0; k < det->n_subs && !why[0]; k++) {
        int found = det->subs[k].path == cfg->default_path;
        for (int i = 0; i < bp->n_subs && !found; i++)
            found = bp->subs[i].path == det->subs[k].path;
        if (!found)
            snprintf(why, sizeof(why), "the plan has no subquestion on path %s, which \"%.60s\" "
                     "needs", cfg->paths[det->subs[k].path].name, det->subs[k].text);
    }
    if (!why[0])
        return KEEL_OK;
    utf8_clean(why);
    *used = 0;
    if (json_object_set_new(model_log(t), "planner",
                            json_pack("{s:s, s:s}", "status", "overruled", "reason", why)))
        return keel_error_set(err, KEEL_ENOMEM, "plan", "out of memory");
    return KEEL_OK;
}

/* The state's refined query: the question under the known jurisdiction. */
static int refine(struct turn *t, struct keel_error *err)
{
    char refined[STATE_TEXT_MAX];

    turn_refine(t, t->effective, refined, sizeof(refined));
    if (!strcmp(refined, t->state.refined_query))
        return KEEL_OK;
    struct state_delta d = {.kind = DELTA_REFINED_QUERY, .text = refined};
    return turn_apply(t, &d, err);
}

static int forced_path(const struct turn *t)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    const char *tool;

    if (t->decision.force_tool < 0)
        return -1;
    tool = t->pl->pack->tools[t->decision.force_tool].name;
    for (int p = 0; p < cfg->n_paths; p++)
        if (cfg->paths[p].tool && !strcmp(cfg->paths[p].tool, tool))
            return p;
    return -1;
}

int stage_plan(struct turn *t, struct keel_error *err)
{
    struct blueprint bp;
    int forced = forced_path(t), rc;

    memset(&bp, 0, sizeof(bp));
    if (t->no_tools)   /* "thanks" keeps the question it follows; nothing is planned */
        return turn_emit(t, "info", NULL, NULL, "no plan: the turn runs no tool")
                   ? keel_error_set(err, KEEL_ENOMEM, "plan", "out of memory")
                   : KEEL_OK;
    if (t->kind == TURN_SLOT_FILL && t->state.blueprint.active) {
        bp = t->state.blueprint;   /* resumed: the same subquestions, asked again */
        for (int i = 0; i < bp.n_subs; i++)
            bp.subs[i].status = SUB_PENDING;
    } else {
        bp.active = 1;
        bp.created_turn = t->seq;
        snprintf(bp.question, sizeof(bp.question), "%s", t->effective);
        if (forced >= 0) {
            snprintf(bp.subs[0].text, sizeof(bp.subs[0].text), "%s", t->effective);
            bp.subs[0].path = forced;
            bp.n_subs = 1;
        } else {
            struct blueprint det = bp;
            int used;
            split(&t->pl->cfg, t->effective, t->effective_len, &det);
            if ((rc = model_plan(t, &bp, &used, err)) ||
                (used && (rc = guard_plan(t, &bp, &det, &used, err))))
                return rc;
            if (!used)
                bp = det;
        }
    }
    struct state_delta d = {.kind = DELTA_BLUEPRINT, .blueprint = &bp};
    if ((rc = turn_apply(t, &d, err)) || (rc = refine(t, err)))
        return rc;
    json_decref(t->blueprint);
    t->blueprint = state_blueprint_json(&t->state.blueprint, &t->pl->cfg);
    if (!t->blueprint ||
        turn_emit(t, "info", "plan.blueprint", json_incref(t->blueprint), "%d subquestion%s%s",
                  bp.n_subs, bp.n_subs == 1 ? "" : "s",
                  t->kind == TURN_SLOT_FILL ? " (resumed)" : ""))
        return keel_error_set(err, KEEL_ENOMEM, "plan", "out of memory");
    return KEEL_OK;
}
