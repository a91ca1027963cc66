/*
 * stage_classify.c — classify: slot_fill vs new_question, the effective
 * message, and the state deltas a message states outright (jurisdiction
 * values, research question, topic). Plan refines the query.
 *
 *   first message                         → new_question
 *   slots open, the message fills one     → slot_fill: the blueprint's
 *     ("Florida", "UHC", "as a provider",   question, refined with the
 *      "yes"/"that one" for a suggestion)   new values, is resumed
 *   slots open, a short answer that fills → slot_fill, nothing filled:
 *     none ("Blue Cross")                   the question is asked again
 *   no slot open, a message of values and → slot_fill: the last question
 *     switch phrases ("what about UHC?")    again under the new value
 *   anything else ("how do I check        → new_question (starts over)
 *     eligibility")
 *
 * With a slot open, a message that fills it is still a new question when
 * it has three or more other words and starts with a question word or
 * holds a '?' ("UHC — how do I check eligibility?"); one that fills
 * nothing is a new question from three other words on.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/turn.h"

struct reading {
    int values[CONFIG_MAX_SLOTS];   /* slot value named, or -1 */
    int named;                      /* slots named */
    int affirmation;                /* the message is (mostly) "yes", "that one" */
    int only_values;                /* nothing but values and switch phrases ("what about UHC?") */
    uint32_t uncovered;             /* words that are not values or affirmations */
    int asks;                       /* starts with a question word or holds a '?' */
};

static void read_message(const struct pipeline_config *cfg, const char *msg, size_t n,
                         struct reading *r)
{
    struct lex_result res;
    uint8_t covered[LEX_MAX_TOKENS] = {0}, switched[LEX_MAX_TOKENS] = {0};
    uint32_t uncovered = 0, unswitched = 0;
    int qstart = 0;

    struct slot_span spans[CONFIG_MAX_SLOTS];

    config_match(cfg, msg, n, &res);
    r->named = extract_slot_spans_in(cfg, &res, spans);
    for (int s = 0; s < CONFIG_MAX_SLOTS; s++)
        r->values[s] = spans[s].value;
    r->affirmation = 0;
    for (uint32_t i = 0; i < res.n_matches; i++) {
        const struct lex_match *m = &res.matches[i];
        int slot = (int)m->category - CCAT_SLOT;

        if (m->category == CCAT_AFFIRM)
            r->affirmation = 1;
        if (m->category == CCAT_AFFIRM || (slot >= 0 && slot < cfg->n_slots))
            memset(covered + m->start, 1, m->n);
        if (m->category == CCAT_SWITCH)
            memset(switched + m->start, 1, m->n);
        if (m->category == CCAT_QSTART && m->start == 0)
            qstart = 1;
    }
    for (uint32_t i = 0; i < res.n_tokens; i++) {
        uncovered += !covered[i];
        unswitched += !covered[i] && !switched[i];
    }
    r->only_values = r->named && unswitched == 0;
    if (uncovered > 2)
        r->affirmation = 0;   /* "yes, and how do I …" is more than a yes */
    r->uncovered = uncovered;
    r->asks = qstart || memchr(msg, '?', n) != NULL;
}

/* The first open slot a "yes" can fill: open, with a suggestion. */
static int suggestion_slot(const struct thread_state *state, const struct pipeline_config *cfg)
{
    for (int s = 0; s < cfg->n_slots; s++)
        if ((state->open_slots >> s & 1) && state->suggested[s][0])
            return s;
    return -1;
}

static int fills_open_slot(const struct thread_state *state, const struct reading *r,
                           const struct pipeline_config *cfg)
{
    for (int s = 0; s < cfg->n_slots; s++)
        if ((state->open_slots >> s & 1) && r->values[s] >= 0)
            return 1;
    return 0;
}

static int classify(struct turn *t, const struct reading *r)
{
    const struct thread_state *st = &t->state;
    const struct pipeline_config *cfg = &t->pl->cfg;

    if (t->seq == 1 || !st->blueprint.active)
        return TURN_NEW_QUESTION;
    if (st->open_slots) {
        if (fills_open_slot(st, r, cfg) || (r->affirmation && suggestion_slot(st, cfg) >= 0))
            return r->uncovered >= 3 && r->asks ? TURN_NEW_QUESTION : TURN_SLOT_FILL;
        if (r->uncovered >= 3)
            return TURN_NEW_QUESTION;
        t->unrecognised = 1;   /* "Blue Cross": ask again */
        return TURN_SLOT_FILL;
    }
    return r->only_values ? TURN_SLOT_FILL : TURN_NEW_QUESTION;
}

static int apply_slots(struct turn *t, const struct reading *r, struct keel_error *err)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    int rc;

    for (int s = 0; s < cfg->n_slots; s++) {
        struct state_delta d = {.kind = DELTA_SLOT, .index = s};

        if (r->values[s] >= 0)
            d.text = cfg->slots[s].values[r->values[s]];
        else if (t->kind == TURN_SLOT_FILL && r->affirmation && suggestion_slot(&t->state, cfg) == s)
            d.text = t->state.suggested[s];
        else
            continue;
        if (!strcmp(t->state.slots[s], d.text))
            continue;
        char value[STATE_VALUE_MAX];
        snprintf(value, sizeof(value), "%s", d.text);   /* suggested[] changes under apply */
        d.text = value;
        if ((rc = turn_apply(t, &d, err)))
            return rc;
    }
    return KEEL_OK;
}

/* The research question and topic, when the message states them. */
static int apply_research(struct turn *t, struct keel_error *err)
{
    static const struct {
        int lead;
        enum delta_kind kind;
        size_t field;
    } rows[] = {
        {CCAT_RQ_LEAD, DELTA_RESEARCH_QUESTION, offsetof(struct thread_state, research_question)},
        {CCAT_TOPIC_LEAD, DELTA_TOPIC, offsetof(struct thread_state, research_topic)},
    };
    char text[STATE_TEXT_MAX];
    int rc;

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *current = (const char *)&t->state + rows[i].field;

        extract_after_lead(&t->pl->cfg, t->req->message, t->req->message_len, rows[i].lead, text,
                           sizeof(text));
        if (text[0] && strcmp(text, current)) {
            struct state_delta d = {.kind = rows[i].kind, .text = text};
            if ((rc = turn_apply(t, &d, err)))
                return rc;
        }
    }
    return KEEL_OK;
}

int stage_classify(struct turn *t, struct keel_error *err)
{
    struct reading r;
    int rc;

    read_message(&t->pl->cfg, t->req->message, t->req->message_len, &r);
    t->kind = classify(t, &r);
    if ((rc = apply_slots(t, &r, err)) || (rc = apply_research(t, err)) ||
        (rc = scenario_turn_classify(t, err)))
        return rc;
    if (t->kind == TURN_SLOT_FILL)
        snprintf(t->effective, sizeof(t->effective), "%s", t->state.blueprint.question);
    else
        extract_redact(t->req->message, t->req->message_len, t->effective, sizeof(t->effective));
    t->effective_len = strlen(t->effective);
    if (turn_emit(t, "info", "classify.kind",
                  json_pack("{s:s,s:s,s:b}", "kind",
                            t->kind == TURN_SLOT_FILL ? "slot_fill" : "new_question",
                            "effective", t->effective, "unrecognised",
                            t->unrecognised),
                  "%s: %s", t->kind == TURN_SLOT_FILL ? "slot_fill" : "new_question",
                  t->effective))
        return keel_error_set(err, KEEL_ENOMEM, "classify", "out of memory");
    return KEEL_OK;
}
