/*
 * stage_decide.c — decide: the policy decision (intent, route, forced
 * tool, search filters, stage transition, reasons) on the effective
 * message, with the conversation's research topic as the topic hint so
 * "papers on this topic" resolves to it. A new question that only
 * narrows the conversation's last search ("only open access ones", "just
 * the ones from 2023") is that search again with the stated settings
 * (policy_refine, the pack's `refine` phrases); each search the policy
 * forces is recorded in the state as the last search. Smalltalk,
 * commands and a user's veto ("don't search") mark the turn as one that
 * runs no tool.
 */
#include <string.h>

#include "pipeline/turn.h"
#include "core/utf8.h"

_Static_assert(STATE_TEXT_MAX <= POLICY_QUERY_MAX, "a stored query fits the policy's");

/* The state's last search as the policy's base for a refinement. */
static void base_search(const struct state_search *last, struct policy_search *base)
{
    size_t n = strlen(last->query);

    memcpy(base->query, last->query, n + 1);
    base->query_len = n;
    base->count = last->count;
    base->year_from = last->year_from;
    base->year_to = last->year_to;
    base->open_access_only = last->open_access_only;
}

/* Records the search the policy forced as the state's last search. */
static int record_search(struct turn *t, struct keel_error *err)
{
    const struct policy_decision *d = &t->decision;
    struct state_search last;

    if (!d->has_search || d->force_tool < 0 || !d->search.query_len ||
        d->search.query_len >= sizeof(last.query))
        return KEEL_OK;
    memset(&last, 0, sizeof(last));
    last.set = 1;
    memcpy(last.query, d->search.query, d->search.query_len + 1);
    last.count = d->search.count;
    last.year_from = d->search.year_from;
    last.year_to = d->search.year_to;
    last.open_access_only = d->search.open_access_only;
    if (t->state.last_search.set && !strcmp(last.query, t->state.last_search.query) &&
        last.count == t->state.last_search.count &&
        last.year_from == t->state.last_search.year_from &&
        last.year_to == t->state.last_search.year_to &&
        last.open_access_only == t->state.last_search.open_access_only)
        return KEEL_OK;   /* the same search again: no delta */
    struct state_delta delta = {.kind = DELTA_LAST_SEARCH, .search = &last};
    return turn_apply(t, &delta, err);
}

int stage_decide(struct turn *t, struct keel_error *err)
{
    const struct thread_state *st = &t->state;
    const char *hint = st->research_topic[0] ? st->research_topic
                       : st->research_question[0] ? st->research_question : NULL;
    char cut[POLICY_QUERY_MAX / 2 + 1];
    int rc, refined = 0;

    if (hint && strlen(hint) > POLICY_QUERY_MAX / 2) {   /* the policy's cap on a hint */
        size_t n = utf8_valid_prefix(hint, POLICY_QUERY_MAX / 2);
        memcpy(cut, hint, n);
        cut[n] = '\0';
        hint = cut;
    }
    rc = policy_context_init(&t->pctx, t->pl->policy, t->pl->pack->roles[t->role].name, NULL, 0,
                             hint, t->now, err);
    if (rc)
        return rc;
    if (t->kind == TURN_NEW_QUESTION && st->last_search.set) {
        struct policy_search base;
        base_search(&st->last_search, &base);
        refined = policy_refine(t->pl->policy, &t->pctx, t->effective, t->effective_len, &base,
                                &t->decision);
    }
    if (!refined)
        policy_decide(t->pl->policy, &t->pctx, t->effective, t->effective_len, &t->decision);
    route_redecide(t);
    if ((rc = record_search(t, err)))
        return rc;
    /* Smalltalk, a command and "don't search" run no tool (seed 001's
     * tool_veto); compose answers them from the pack's messages. */
    t->no_tools = t->decision.tool_veto || t->decision.route == POLICY_ROUTE_COMMAND ||
                  t->decision.reason == R_SMALLTALK;
    /* The pack's route handlers answer commands, personal facts and
     * conversions themselves (assistant_routes.c). */
    if ((t->routed = route_wanted(t)))
        t->no_tools = 1;
    t->decision_json = policy_decision_json(t->pl->policy, &t->decision);
    if (!t->decision_json ||
        turn_emit(t, "info", "decide.decision", json_incref(t->decision_json),
                  "intent %s, route %s, tool %s",
                               policy_intent_name(t->decision.intent),
                               policy_route_name(t->decision.route),
                               t->decision.force_tool >= 0
                                   ? t->pl->pack->tools[t->decision.force_tool].name
                                   : "none"))
        return keel_error_set(err, KEEL_ENOMEM, "decide", "out of memory");
    return KEEL_OK;
}
