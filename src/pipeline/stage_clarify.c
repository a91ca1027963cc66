/*
 * stage_clarify.c — clarify: when a pending subquestion's path needs a
 * jurisdiction slot the state lacks (the rag path needs the payer), ask
 * for the first such slot, mark it open, and end the turn. Publish then
 * stores the state and the blueprint, and the next turn resumes the same
 * blueprint (classify: slot_fill). A slot whose value a payer change
 * cleared is offered back ("Is it still Medicaid?"), so "yes" fills it.
 * An answer that named no known value gets the question again. When the
 * policy's search has no topic (intent clarify), the topic is asked for.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "pipeline/turn.h"

static int missing_slot(const struct turn *t)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    const struct blueprint *bp = &t->state.blueprint;

    for (int i = 0; i < bp->n_subs; i++) {
        const struct config_path *p = &cfg->paths[bp->subs[i].path];

        if (bp->subs[i].status != SUB_PENDING || !p->tool)
            continue;
        for (int s = 0; s < cfg->n_slots; s++)
            if ((p->needs >> s & 1) && !t->state.slots[s][0])
                return s;
    }
    return -1;
}

static char *question_text(const struct turn *t, int s)
{
    const struct config_slot *slot = &t->pl->cfg.slots[s];
    const char *suggested = t->state.suggested[s];
    struct keel_buf q;

    keel_buf_init(&q, 2048);
    if (t->unrecognised)
        keel_buf_addf(&q, "%s ", config_message(&t->pl->cfg, "unrecognised",
                                                "I don't know that one."));
    if (slot->question)
        keel_buf_adds(&q, slot->question);
    else
        keel_buf_addf(&q, "Which %s is this about?", slot->name);
    if (suggested[0]) {
        const char *tmpl = config_message(&t->pl->cfg, "suggest", "Is it still {value}?");
        const char *at = strstr(tmpl, "{value}");
        if (at)
            keel_buf_addf(&q, " %.*s%s%s", (int)(at - tmpl), tmpl, suggested, at + 7);
    }
    return keel_buf_detach(&q, NULL);
}

/* The policy found a search without a topic ("papers on this topic"
 * with none known): ask for the topic; no slot opens. */
static int ask_topic(struct turn *t, struct keel_error *err)
{
    const char *q = config_message(&t->pl->cfg, "topic_question",
                                   "Which topic should I search for?");

    if (!(t->clarification = keel_strdup(q)) || keel_buf_adds(&t->answer, q) ||
        turn_emit(t, "info", "clarify.ask", json_pack("{s:s}", "question", q),
                  "the policy needs a topic: asking"))
        return keel_error_set(err, KEEL_ENOMEM, "clarify", "out of memory");
    t->ended = 1;
    return KEEL_OK;
}

int stage_clarify(struct turn *t, struct keel_error *err)
{
    int s = t->no_tools ? -1 : missing_slot(t), rc;

    if (t->decision.intent == POLICY_INTENT_CLARIFY && !t->no_tools)
        return ask_topic(t, err);
    if (s < 0)
        return turn_emit(t, "info", NULL, NULL, "nothing to ask: the blueprint can be resolved")
                   ? keel_error_set(err, KEEL_ENOMEM, "clarify", "out of memory")
                   : KEEL_OK;
    struct state_delta d = {.kind = DELTA_OPEN_SLOTS, .mask = 1u << s};
    if ((rc = turn_apply(t, &d, err)))
        return rc;
    if (!(t->clarification = question_text(t, s)) ||
        keel_buf_adds(&t->answer, t->clarification))
        return keel_error_set(err, KEEL_ENOMEM, "clarify", "out of memory");
    t->ended = 1;
    if (turn_emit(t, "info", "clarify.ask",
                  json_pack("{s:s,s:s}", "slot", t->pl->cfg.slots[s].name, "question",
                            t->clarification),
                  "missing slot %s: asking", t->pl->cfg.slots[s].name))
        return keel_error_set(err, KEEL_ENOMEM, "clarify", "out of memory");
    return KEEL_OK;
}
