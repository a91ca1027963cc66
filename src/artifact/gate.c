/*
 * gate.c — the intent gate (seed 001): does this turn get an artifact,
 * and which one? Hard rules first, in this order, each with its reason:
 *
 *   artifacts_off    the pack has no enabled artifacts section
 *   clarification    the turn asked a question instead of answering
 *   route_blocked    the route is one of blocked_routes (command, local
 *                    memory, conversion by default)
 *   too_short        fewer than min_words words
 *   smalltalk        the policy saw smalltalk
 *
 * Then each enabled contract is scored: its route weight when the turn's
 * route is listed, plus the weight of every phrase group with a phrase in
 * the message (each group counted once), capped at 1. A contract is
 * ruled out by its own hard rules: needs a document in context
 * (doc_extract), needs sources (research_brief), a required group with no
 * phrase (plan: personal and action wording). The best contract at or
 * above the threshold wins — at most one artifact per turn; ties go to
 * the earlier contract (research_brief, doc_extract, plan). Otherwise
 * no_candidate (every contract ruled out) or below_threshold.
 */
#include <stdio.h>
#include <string.h>

#include "artifact/artifact.h"

static void none(struct artifact_gate_result *out, const char *reason, const char *detail)
{
    out->type = ARTIFACT_NONE;
    out->reason = reason;
    snprintf(out->detail, sizeof(out->detail), "%s", detail);
}

static void score(const struct artifact_conf *conf, int type, const struct artifact_gate_input *in,
                  const struct lex_result *res, struct artifact_gate_candidate *c)
{
    const struct artifact_contract_conf *cc = &conf->contracts[type];
    double total = 0;

    memset(c, 0, sizeof(*c));
    if (!cc->enabled) {
        c->blocked = "contract_off";
        return;
    }
    for (uint32_t i = 0; i < res->n_matches; i++) {
        int cat = res->matches[i].category;
        if (cat / ARTIFACT_GROUPS_MAX == type)
            c->matched |= 1u << (cat % ARTIFACT_GROUPS_MAX);
    }
    for (int g = 0; g < cc->n_groups; g++) {
        if (c->matched >> g & 1)
            total += cc->groups[g].weight;
        else if (cc->groups[g].required && !c->blocked)
            c->blocked = "missing_group";
    }
    if (in->route >= 0 && in->route < ARTIFACT_ROUTES_MAX && cc->route_weight[in->route] > 0) {
        total += cc->route_weight[in->route];
        c->route_bonus = 1;
    }
    c->confidence = total > 1 ? 1 : total;
    /* Rounded to hundredths, so weights like 0.45 + 0.3 meet 0.75 exactly. */
    c->confidence = (double)(long)(c->confidence * 100 + 0.5) / 100;
    if (cc->needs_document && !in->has_document)
        c->blocked = "needs_document";
    else if (cc->needs_sources && !in->has_sources)
        c->blocked = "needs_sources";
}

void artifact_gate(const struct artifact_conf *conf, const struct artifact_gate_input *in,
                   struct artifact_gate_result *out)
{
    struct lex_result res;
    int best = ARTIFACT_NONE, any = 0;
    uint32_t words = 0;

    memset(out, 0, sizeof(*out));
    out->type = ARTIFACT_NONE;
    if (!conf->enabled) {
        none(out, "artifacts_off", "the pack has no artifact contracts");
        return;
    }
    if (in->clarification) {
        none(out, "clarification", "the turn asked a question instead of answering");
        return;
    }
    if (in->route >= 0 && in->route < conf->n_routes && (conf->blocked_routes >> in->route & 1)) {
        char text[96];
        snprintf(text, sizeof(text), "route %s never gets an artifact",
                 conf->route_names[in->route]);
        none(out, "route_blocked", text);
        return;
    }
    lexicon_match(&conf->lex, in->text ? in->text : "", in->text ? in->len : 0, &res);
    for (uint32_t i = 0; i < res.n_tokens; i++)
        words += !(res.tokens[i].flags & LEX_JOINED);
    if (words < (uint32_t)conf->min_words) {
        char text[64];
        snprintf(text, sizeof(text), "%u word(s), fewer than %d", words, conf->min_words);
        none(out, "too_short", text);
        return;
    }
    if (in->smalltalk) {
        none(out, "smalltalk", "smalltalk gets no artifact");
        return;
    }
    for (int t = 0; t < ARTIFACT_TYPES; t++) {
        struct artifact_gate_candidate *c = &out->candidates[t];
        score(conf, t, in, &res, c);
        if (c->blocked)
            continue;
        any = 1;
        if (best == ARTIFACT_NONE || c->confidence > out->candidates[best].confidence)
            best = t;
    }
    if (!any) {
        none(out, "no_candidate", "every contract was ruled out by its hard rules");
        return;
    }
    out->confidence = out->candidates[best].confidence;
    if (out->confidence < conf->threshold) {
        char text[96];
        snprintf(text, sizeof(text), "the best contract, %s, scored %.2f < %.2f",
                 artifact_type_name(best), out->confidence, conf->threshold);
        none(out, "below_threshold", text);
        return;
    }
    out->type = best;
    out->reason = "selected";
    snprintf(out->detail, sizeof(out->detail), "%s at %.2f (threshold %.2f)",
             artifact_type_name(best), out->confidence, conf->threshold);
}

json_t *artifact_gate_json(const struct artifact_conf *conf, const struct artifact_gate_result *r)
{
    json_t *out, *list = json_array();
    int bad = !list;
    /* Contracts are scored only once the hard rules passed. */
    int scored = r->reason && (!strcmp(r->reason, "selected") ||
                               !strcmp(r->reason, "no_candidate") ||
                               !strcmp(r->reason, "below_threshold"));

    for (int t = 0; t < ARTIFACT_TYPES && !bad && scored; t++) {
        const struct artifact_gate_candidate *c = &r->candidates[t];
        const struct artifact_contract_conf *cc = &conf->contracts[t];
        json_t *matched;

        if (!cc->enabled)
            continue;
        matched = json_array();
        for (int g = 0; matched && g < cc->n_groups; g++)
            if (c->matched >> g & 1)
                bad |= json_array_append_new(matched, json_string(cc->groups[g].name));
        if (c->route_bonus && matched)
            bad |= json_array_append_new(matched, json_string("route"));
        bad |= json_array_append_new(list, json_pack("{s:s, s:f, s:o, s:s?}", "type",
                                                     artifact_type_name(t), "confidence",
                                                     c->confidence, "matched",
                                                     matched ? matched : json_null(), "blocked",
                                                     c->blocked));
    }
    if (bad) {
        json_decref(list);
        return NULL;
    }
    out = json_pack("{s:s?, s:f, s:f, s:s, s:s, s:o}", "intent", artifact_type_name(r->type),
                    "confidence", r->confidence, "threshold", conf->threshold, "reason",
                    r->reason ? r->reason : "artifacts_off", "detail", r->detail, "candidates",
                    list);
    return out;
}
