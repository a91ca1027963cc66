/*
 * stage_decide.c — decide: the policy decision (intent, route, forced
 * tool, search filters, stage transition, reasons) on the effective
 * message, with the conversation's research topic as the topic hint so
 * "papers on this topic" resolves to it. Smalltalk, commands and a user's
 * veto ("don't search") mark the turn as one that runs no tool.
 */
#include <string.h>

#include "pipeline/turn.h"
#include "core/utf8.h"

int stage_decide(struct turn *t, struct keel_error *err)
{
    const struct thread_state *st = &t->state;
    const char *hint = st->research_topic[0] ? st->research_topic
                       : st->research_question[0] ? st->research_question : NULL;
    char cut[POLICY_QUERY_MAX / 2 + 1];
    int rc;

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
    policy_decide(t->pl->policy, &t->pctx, t->effective, t->effective_len, &t->decision);
    route_redecide(t);
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
