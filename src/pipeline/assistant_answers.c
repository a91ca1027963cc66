/*
 * assistant_answers.c — the answers of the assistant pack's route
 * handlers (see assistant_routes.c): each a fixed text of the pack (pipeline.messages,
 * English defaults here) filled with what the handler's tool returned,
 * and the answer of a web_search subquestion. Nothing here invents: a
 * value comes from the store, the converter or a search result.
 */
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "pipeline/turn.h"

/* ---- compose ------------------------------------------------------------------ */

static const char *msg(const struct turn *t, const char *key, const char *fallback)
{
    return config_message(&t->pl->cfg, key, fallback);
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static int compose_doctor(struct turn *t, const json_t *r, struct keel_buf *b)
{
    const json_t *all = json_object_get(r, "all"), *mem = json_object_get(r, "memory");
    const json_t *counts = json_object_get(mem, "counts"), *f, *d;
    int facts = 0, notes = 0, rc;
    size_t i;

    json_array_foreach(json_object_get(r, "facts"), i, f)
        *(strcmp(str(f, "kind"), "note") ? &facts : &notes) += 1;
    rc = keel_buf_addf(b, "Memory doctor (user %s):\n- Your personal facts: %d fact%s and %d "
                       "note%s.", t->user, facts, facts == 1 ? "" : "s", notes,
                       notes == 1 ? "" : "s");
    if (!rc && !json_array_size(json_object_get(r, "duplicates")))
        rc = keel_buf_adds(b, " No duplicates.");
    json_array_foreach(json_object_get(r, "duplicates"), i, d)
        if (!rc)
            rc = keel_buf_addf(b, " Duplicate: \u201c%s\u201d is stored as both %s and %s.",
                               str(d, "value"),
                               json_string_value(json_array_get(json_object_get(d, "keys"), 0)),
                               json_string_value(json_array_get(json_object_get(d, "keys"), 1)));
    if (!rc)
        rc = keel_buf_addf(b, "\n- All users: %lld user%s, %lld fact%s, %lld note%s.",
                           (long long)json_integer_value(json_object_get(all, "users")),
                           json_integer_value(json_object_get(all, "users")) == 1 ? "" : "s",
                           (long long)json_integer_value(json_object_get(all, "facts")),
                           json_integer_value(json_object_get(all, "facts")) == 1 ? "" : "s",
                           (long long)json_integer_value(json_object_get(all, "notes")),
                           json_integer_value(json_object_get(all, "notes")) == 1 ? "" : "s");
    if (!rc)
        rc = keel_buf_addf(b, "\n- Run memory: %s for this pack; %lld decision%s stored (ADD %lld, "
                           "NOT %lld, REPLACE %lld, MERGE %lld).",
                           json_is_true(json_object_get(mem, "on")) ? "on" : "off",
                           (long long)json_integer_value(json_object_get(mem, "decisions")),
                           json_integer_value(json_object_get(mem, "decisions")) == 1 ? "" : "s",
                           (long long)json_integer_value(json_object_get(counts, "ADD")),
                           (long long)json_integer_value(json_object_get(counts, "NOT")),
                           (long long)json_integer_value(json_object_get(counts, "REPLACE")),
                           (long long)json_integer_value(json_object_get(counts, "MERGE")));
    json_array_foreach(json_object_get(mem, "last"), i, d)
        if (!rc)
            rc = keel_buf_addf(b, "\n  %s \u201c%.80s\u201d: %s", str(d, "decision"),
                               str(d, "task"), str(d, "reason"));
    return rc;
}

static int compose_command(struct turn *t, const json_t *r, struct keel_buf *b)
{
    const char *which = str(r, "command");
    const char *names[] = {"name"};
    const char *values[] = {str(r, "name")};

    if (!strcmp(which, "doctor"))
        return compose_doctor(t, r, b);
    if (!strcmp(which, "close"))
        return keel_buf_adds(b, msg(t, "closing", "Goodbye! What you asked me to remember "
                                                  "stays remembered."));
    if (!strcmp(which, "reset"))
        return keel_buf_adds(b, msg(t, "reset", "Let's start over. What you asked me to remember "
                                                "stays remembered."));
    if (!strcmp(which, "help"))
        return keel_buf_adds(b, msg(t, "help", "I can remember facts about you, convert units "
                                               "and currencies, and search the web."));
    return turn_template(b, msg(t, "command_unknown",
                                "I don't know the command \u201c{name}\u201d."),
                         names, values, 1);
}

/* "your favourite drink: tea" lines of every fact. */
static int list_facts(struct turn *t, const json_t *facts, struct keel_buf *b)
{
    const json_t *f;
    size_t i;
    int rc;

    if (!json_array_size(facts))
        return keel_buf_adds(b, msg(t, "personal_empty",
                                    "You haven't asked me to remember anything yet."));
    rc = keel_buf_adds(b, msg(t, "personal_list", "Here is what I remember about you:"));
    json_array_foreach(facts, i, f)
        if (!rc)
            rc = !strcmp(str(f, "kind"), "note")
                     ? keel_buf_addf(b, "\n- \u201c%s\u201d", str(f, "value"))
                     : keel_buf_addf(b, "\n- your %s: %s", str(f, "key"), str(f, "value"));
    return rc;
}

/* A personal tool's status -> the pack's message key and the text used when
 * the pack has none; the cases that also look at the fact come first in
 * compose_personal. */
static const struct {
    const char *status, *key, *fallback;
} personal_says[] = {
    {"stored", "personal_stored", "Got it: your {key} is {value}. I'll remember that."},
    {"replaced", "personal_replaced", "Updated: your {key} is now {value} (it was {previous})."},
    {"unchanged", "personal_unchanged", "I already had that: your {key} is {value}."},
    {"removed", "personal_removed", "Done: I've forgotten your {key} (it was {previous})."},
    {"not_found", "personal_not_found", "I had nothing stored as your {key}."},
    {"refused", "personal_refused", "I won't store that: {reason}."},
    {"full", "personal_full",
     "I can't remember more than {max} things for you; ask me to forget one first."},
    {"forbidden", "personal_forbidden",
     "Your role ({role}) may not do that ({tool} needs write access)."},
    {"invalid", "personal_unavailable", "I can't do that here: {reason}."},
    {"unavailable", "personal_unavailable", "I can't do that here: {reason}."},
    {NULL, "personal_help",
     "I can remember things you tell me, like \u201cmy favourite drink is tea\u201d, and answer "
     "\u201cwhat's my favourite drink?\u201d."},
};

static int compose_personal(struct turn *t, const json_t *r, struct keel_buf *b)
{
    const char *status = str(r, "status");
    const char *names[] = {"key", "value", "previous", "reason", "role", "max", "tool"};
    char max[16];
    const char *values[] = {str(r, "key"), str(r, "value"), str(r, "previous"), str(r, "reason"),
                            str(r, "role"), max, str(r, "tool")};
    const char *tool = t->route_tool ? t->route_tool : "";
    const char *key, *fallback;
    size_t i;

    snprintf(max, sizeof(max), "%lld", (long long)json_integer_value(json_object_get(r, "max")));
    if (!strcmp(tool, "recall_memory") && json_object_get(r, "facts"))
        return list_facts(t, json_object_get(r, "facts"), b);
    if (!strcmp(tool, "recall_memory")) {
        if (json_is_true(json_object_get(r, "found"))) {
            key = "personal_found";
            fallback = "Your {key} is {value}.";
        } else {
            key = "personal_unknown";
            fallback = "I don't know your {key}: you haven't told me. Say \u201cmy {key} is "
                       "\u2026\u201d and I'll remember it.";
        }
    } else if (!strcmp(status, "stored") && !strcmp(str(json_object_get(t->tool_args,
                                                                         "remember_fact"),
                                                           "kind"), "note")) {
        key = "personal_noted";
        fallback = "Noted: \u201c{value}\u201d.";
    } else if (!strcmp(status, "removed") && !strncmp(str(r, "key"), "note: ", 6)) {
        key = "personal_removed_note";
        fallback = "Done: I've forgotten \u201c{previous}\u201d.";
    } else {
        for (i = 0; personal_says[i].status && strcmp(status, personal_says[i].status); i++)
            ;
        key = personal_says[i].key;
        fallback = personal_says[i].fallback;
    }
    return turn_template(b, msg(t, key, fallback), names, values, 7);
}

/* "5 kilometres", "5 feet 10 inches", "100 USD". */
static int amount_text(const json_t *r, struct keel_buf *b)
{
    const json_t *from = json_object_get(r, "from"), *parts = json_object_get(r, "parts"), *p;
    int currency = !strcmp(str(from, "category"), "currency");
    char num[64], shown[96];
    size_t i;
    int rc = KEEL_OK;

    if (json_array_size(parts) <= 1) {
        double a = json_number_value(json_object_get(r, "amount"));
        convert_format(a, 0, num, sizeof(num));
        convert_group(num, shown, sizeof(shown));
        return keel_buf_addf(b, "%s %s", shown, currency ? str(from, "name")
                                              : a == 1 ? str(from, "one") : str(from, "other"));
    }
    json_array_foreach(parts, i, p) {
        double a = json_number_value(json_object_get(p, "amount"));
        convert_format(a, 0, num, sizeof(num));
        convert_group(num, shown, sizeof(shown));
        if (!rc)
            rc = keel_buf_addf(b, "%s%s %s", i ? " " : "", shown, str(p, "unit"));
    }
    return rc;
}

/* What a conversion that did not come out "ok" says, by its status: the
 * message key and its default text; the last row answers any other status. */
static const struct {
    const char *status, *key, *text;
} convert_replies[] = {
    {"unknown_unit", "convert_unknown_unit", "I don't know the unit \u201c{unknown}\u201d."},
    {"unknown_currency", "convert_unknown_currency",
     "I don't have a rate for the currency \u201c{unknown}\u201d."},
    {"incompatible", "convert_incompatible",
     "I can't convert {from_kind} ({from}) to {to_kind} ({to})."},
    {"mixed", "convert_mixed", "The amount mixes units of different kinds."},
    {"forbidden", "convert_unavailable", "I can't convert here."},
    {"unavailable", "convert_unavailable", "I can't convert here."},
    {"invalid", "convert_unavailable", "I can't convert here."},
    {NULL, "convert_none",
     "I couldn't read a conversion there. Try \u201c5 km to miles\u201d or \u201c100 usd in "
     "eur\u201d."},
};

static int compose_convert(struct turn *t, const json_t *r, struct keel_buf *b)
{
    const char *status = str(r, "status");
    const json_t *from = json_object_get(r, "from"), *to = json_object_get(r, "to");
    const json_t *rates = json_object_get(r, "rates");
    const char *names[] = {"unknown", "from", "to", "from_kind", "to_kind", "reason"};
    const char *values[] = {str(r, "unknown"), str(from, "name"), str(to, "name"),
                            str(from, "category"), str(to, "category"), str(r, "reason")};
    char num[64], shown[96];
    int currency = !strcmp(str(to, "category"), "currency"), rc;
    double v = json_number_value(json_object_get(r, "value"));
    size_t i;

    if (!strcmp(status, "ok")) {
        /* Deterministic digits, grouped by three: "1,000,000 JPY = 6,646.15 USD." */
        convert_format(v, currency, num, sizeof(num));
        convert_group(num, shown, sizeof(shown));
        if ((rc = amount_text(r, b)) ||
            (rc = keel_buf_addf(b, " = %s %s.", shown,
                                currency ? str(to, "name")
                                         : !strcmp(num, "1") ? str(to, "one") : str(to, "other"))))
            return rc;
        if (rates) {
            const char *rn[] = {"date", "base", "note"};
            const char *rv[] = {str(rates, "date"), str(rates, "base"), str(rates, "note")};
            if ((rc = keel_buf_adds(b, "\n")))
                return rc;
            return turn_template(b, msg(t, "convert_rates",
                                        "Rates as of {date} (base {base}): {note}."),
                                 rn, rv, 3);
        }
        return KEEL_OK;
    }
    for (i = 0; convert_replies[i].status && strcmp(convert_replies[i].status, status); i++)
        ;
    return turn_template(b, msg(t, convert_replies[i].key, convert_replies[i].text), names,
                         values, 6);
}

int route_compose(struct turn *t, struct keel_buf *b)
{
    const json_t *r = t->route_result;

    switch (t->decision.route) {
    case POLICY_ROUTE_COMMAND:
        return compose_command(t, r, b);
    case POLICY_ROUTE_LOCAL_MEMORY:
        return compose_personal(t, r, b);
    case POLICY_ROUTE_CONVERSION:
        return compose_convert(t, r, b);
    default:
        return KEEL_OK;
    }
}

/* The first sentence of a snippet, at most 240 bytes cut at a word. */
static int add_snippet(struct keel_buf *b, const char *text)
{
    size_t n = 0, len = strlen(text);

    while (n < len && !(strchr(".?!", text[n]) && (text[n + 1] == ' ' || !text[n + 1])))
        n++;
    if (n < len)
        n++;
    if (n > 240) {
        n = 240;
        while (n > 0 && text[n] != ' ')
            n--;
        n = utf8_valid_prefix(text, n);
        return keel_buf_addf(b, ": %.*s\u2026", (int)n, text);
    }
    return n ? keel_buf_addf(b, ": %.*s", (int)n, text) : KEEL_OK;
}

int route_compose_web(struct turn *t, const struct sub_result *r, struct keel_buf *b)
{
    const char *query = json_string_value(json_object_get(r->args, "query"));
    const char *names[] = {"query", "reason"};
    const char *values[] = {query ? query : "", str(r->outcome, "reason")};
    const json_t *item;
    size_t i;
    int rc;

    if (!json_is_true(json_object_get(r->outcome, "configured")))
        return turn_template(b, msg(t, "websearch_unconfigured",
                                    "Web search is not configured, so I can't look up "
                                    "\u201c{query}\u201d."),
                             names, values, 2);
    if (json_is_true(json_object_get(r->outcome, "failed")))
        return turn_template(b, msg(t, "websearch_failed",
                                    "The web search failed ({reason}), so I have no answer for "
                                    "\u201c{query}\u201d."),
                             names, values, 2);
    if (!json_array_size(r->items))
        return turn_template(b, msg(t, "websearch_none",
                                    "The web search found nothing for \u201c{query}\u201d."),
                             names, values, 2);
    if ((rc = turn_template(b, msg(t, "websearch_found",
                                   "From the web, on \u201c{query}\u201d:"), names,
                            values, 2)))
        return rc;
    json_array_foreach(r->items, i, item) {
        int n = compose_cite(t, item);
        if (n < 0)
            return KEEL_ENOMEM;
        if ((rc = keel_buf_addf(b, "\n%zu. %s", i + 1, str(item, "title"))) ||
            (rc = add_snippet(b, str(item, "snippet"))) || (rc = keel_buf_addf(b, " [%d]", n)))
            return rc;
    }
    return KEEL_OK;
}
