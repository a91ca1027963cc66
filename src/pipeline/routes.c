/*
 * routes.c — the assistant pack's route handlers in a turn (see
 * handlers.h): which turns a handler answers, the tool it runs and the
 * answer it writes. Everything here is deterministic and runs without a
 * model; each answer is a fixed text of the pack (pipeline.messages,
 * English defaults here) filled with what the tool returned.
 *
 *   command              close (stop/end/quit/exit: a closing line and
 *                        result.closing), reset (result.reset: the
 *                        client starts a new conversation), doctor (counts of the personal
 *                        facts and the run memory, duplicates, the last
 *                        decisions), help, unknown commands
 *   local_memory_intent  personal_parse → recall_memory | remember_fact |
 *                        forget_fact, each under the registry, pack and
 *                        role checks; a refusal names its reason
 *   conversion_tool      convert_units on the message
 *
 * websearch runs on the pack's `web` path like any path's tool;
 * route_compose_web writes its answer.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/utf8.h"
#include "pipeline/turn.h"

int route_wanted(const struct turn *t)
{
    enum policy_route r = t->decision.route;

    return t->pl->handlers && (r == POLICY_ROUTE_COMMAND || r == POLICY_ROUTE_LOCAL_MEMORY ||
                               r == POLICY_ROUTE_CONVERSION);
}

void route_redecide(struct turn *t)
{
    struct policy_decision raw;

    if (!t->pl->handlers || t->kind != TURN_NEW_QUESTION ||
        t->decision.route == POLICY_ROUTE_CONVERSION ||
        (t->effective_len == t->req->message_len &&
         !memcmp(t->effective, t->req->message, t->effective_len)))
        return;
    policy_decide(t->pl->policy, &t->pctx, t->req->message, t->req->message_len, &raw);
    if (raw.route == POLICY_ROUTE_CONVERSION)
        t->decision = raw;
}

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
}

static int oom(struct keel_error *err)
{
    return keel_error_set(err, KEEL_ENOMEM, "resolve", "out of memory");
}

/* ---- resolve ------------------------------------------------------------------ */

/* Runs registry tool `name` with `args` (stolen) when the pack lists it
 * and the role may call it; else route_result says why. A tool's refusal
 * of its arguments is reported the same way; store failures fail the
 * turn. */
static int run_tool(struct turn *t, const char *name, json_t *args, struct keel_error *err)
{
    const struct tool_def *tool = tools_find(name);
    int index = pack_tool_index(t->pl->pack, name, strlen(name));
    struct tool_env env;
    struct keel_error terr;
    json_t *out = NULL;
    int rc;

    if (!args)
        return oom(err);
    if (!tool || index < 0 || !pack_role_may_call(t->pl->pack, t->role, index)) {
        const char *why = !tool || index < 0 ? "unavailable" : "forbidden";
        t->route_result = json_pack("{s:s, s:s, s:s, s:s}", "status", why, "tool", name, "role",
                                    t->pl->pack->roles[t->role].name, "access",
                                    tool && tool->access & PACK_WRITE ? "write" : "read");
        json_decref(args);
        if (!t->route_result ||
            turn_emit(t, "info", "resolve.unavailable", json_pack("{s:s, s:s}", "tool", name,
                                                                  "status", why),
                      "%s: %s for role %s", name, why, t->pl->pack->roles[t->role].name))
            return oom(err);
        return KEEL_OK;
    }
    if (turn_emit(t, "info", "resolve.search", json_pack("{s:s, s:O}", "tool", name, "args", args),
                  "calling %s", name) ||
        json_array_append_new(t->tools_called, json_string(name)) ||
        json_object_set(t->tool_args, name, args)) {
        json_decref(args);
        return oom(err);
    }
    turn_tool_env(t, &env);
    keel_error_clear(&terr);
    rc = tools_run(tool, &env, args, &out, &terr);
    json_decref(args);
    if (rc == KEEL_EINVAL) {   /* the tool refused what it was given: say so */
        t->route_result = json_pack("{s:s, s:s, s:s}", "status", "invalid", "tool", name,
                                    "reason", terr.message);
        return t->route_result ? KEEL_OK : oom(err);
    }
    if (rc) {
        *err = terr;
        return rc;
    }
    t->route_tool = tool->name;
    t->route_result = out;
    if (t->decision.force_tool == index)
        t->forced_tool_ran = 1;
    if (turn_emit(t, "info", "resolve.done",
                  json_pack("{s:s, s:O?}", "tool", name, "status",
                            json_object_get(out, "status")),
                  "%s: %s", name,
                  json_string_value(json_object_get(out, "status")) ?: "done"))
        return oom(err);
    return KEEL_OK;
}

/* The report of "memory doctor": the user's facts and duplicates, all
 * users' counts, the run memory's decisions. */
static int doctor(struct turn *t, struct keel_error *err)
{
    json_t *facts = NULL, *stats = NULL, *decisions = NULL, *dups, *counts, *last;
    size_t i, k;
    json_t *f, *g, *d;
    int rc;

    if ((rc = store_personal_list(t->pl->store, t->user, &facts, err)) ||
        (rc = store_personal_stats(t->pl->store, &stats, err)) ||
        (rc = store_memory_decisions(t->pl->store, STORE_LIMIT_MAX, 0, &decisions, err))) {
        json_decref(facts);
        json_decref(stats);
        return rc;
    }
    dups = json_array();
    counts = json_pack("{s:i, s:i, s:i, s:i}", "ADD", 0, "NOT", 0, "REPLACE", 0, "MERGE", 0);
    last = json_array();
    /* The same value under two keys (case aside) is a duplicate. */
    json_array_foreach(facts, i, f)
        for (k = i + 1; dups && k < json_array_size(facts); k++) {
            g = json_array_get(facts, k);
            if (!strcasecmp(json_string_value(json_object_get(f, "value")),
                            json_string_value(json_object_get(g, "value"))))
                json_array_append_new(dups, json_pack("{s:O, s:[O, O]}", "value",
                                                      json_object_get(f, "value"), "keys",
                                                      json_object_get(f, "key"),
                                                      json_object_get(g, "key")));
        }
    json_array_foreach(decisions, i, d) {
        const char *what = json_string_value(json_object_get(d, "decision"));
        json_t *c = counts ? json_object_get(counts, what ? what : "") : NULL;
        if (c)
            json_integer_set(c, json_integer_value(c) + 1);
        if (i < 3 && last)
            json_array_append(last, d);
    }
    t->route_result = json_pack("{s:s, s:s, s:o, s:o, s:o, s:{s:b, s:I, s:o, s:o}}", "command",
                                "doctor", "user", t->user, "facts", facts, "duplicates",
                                dups ? dups : json_null(), "all", stats, "memory", "on",
                                t->pl->memory != NULL, "decisions",
                                (json_int_t)json_array_size(decisions), "counts",
                                counts ? counts : json_null(), "last", last ? last : json_null());
    json_decref(decisions);
    return t->route_result ? KEEL_OK : oom(err);
}

static int command(struct turn *t, struct keel_error *err)
{
    int which = handlers_command(t->pl->handlers, t->req->message, t->req->message_len);
    char name[64];
    size_t i = 0, k = 0;

    if (which == 'd')
        return doctor(t, err);
    if (which == 'c')
        t->closing = 1;
    if (which == 'r')
        t->reset = 1;
    /* The command's first word, for the answer to an unknown one. */
    while (i < t->req->message_len && (isspace((unsigned char)t->req->message[i]) ||
                                       t->req->message[i] == '/'))
        i++;
    while (i < t->req->message_len && k + 1 < sizeof(name) &&
           !isspace((unsigned char)t->req->message[i]))
        name[k++] = t->req->message[i++];
    name[utf8_valid_prefix(name, k)] = '\0';
    t->route_result = json_pack("{s:s, s:s}", "command",
                                which == 'c'   ? "close"
                                : which == 'h' ? "help"
                                : which == 'r' ? "reset"
                                               : "unknown",
                                "name", name);
    if (!t->route_result ||
        turn_emit(t, "info", "resolve.command", json_incref(t->route_result), "command %s",
                  json_string_value(json_object_get(t->route_result, "command"))))
        return oom(err);
    return KEEL_OK;
}

static int personal(struct turn *t, struct keel_error *err)
{
    struct personal_request req;

    personal_parse(&t->pl->handlers->personal, t->req->message, t->req->message_len, &req);
    switch (req.op) {
    case PERSONAL_GET:
        return run_tool(t, "recall_memory", json_pack("{s:s}", "key", req.key), err);
    case PERSONAL_LIST:
        return run_tool(t, "recall_memory", json_object(), err);
    case PERSONAL_SET:
        return run_tool(t, "remember_fact", json_pack("{s:s, s:s}", "key", req.key, "value",
                                                      req.value), err);
    case PERSONAL_NOTE:
        return run_tool(t, "remember_fact", json_pack("{s:s, s:s, s:s}", "key", req.key,
                                                      "value", req.value, "kind", "note"), err);
    case PERSONAL_FORGET:
        return run_tool(t, "forget_fact", json_pack("{s:s}", "key", req.key), err);
    case PERSONAL_REFUSE:
        t->route_result = json_pack("{s:s, s:s}", "status", "refused", "reason", req.reason);
        break;
    case PERSONAL_NONE:
        t->route_result = json_pack("{s:s}", "status", "not_understood");
        break;
    }
    if (!t->route_result ||
        turn_emit(t, "info", "resolve.personal", json_incref(t->route_result), "personal: %s",
                  json_string_value(json_object_get(t->route_result, "status"))))
        return oom(err);
    return KEEL_OK;
}

int route_resolve(struct turn *t, struct keel_error *err)
{
    size_t n;

    switch (t->decision.route) {
    case POLICY_ROUTE_COMMAND:
        return command(t, err);
    case POLICY_ROUTE_LOCAL_MEMORY:
        return personal(t, err);
    case POLICY_ROUTE_CONVERSION:
        n = utf8_valid_prefix(t->req->message, t->req->message_len < TOOL_QUERY_MAX
                                                   ? t->req->message_len : TOOL_QUERY_MAX);
        return run_tool(t, "convert_units", json_pack("{s:s#}", "query", t->req->message, (int)n),
                        err);
    default:
        return KEEL_OK;
    }
}

/* ---- compose ------------------------------------------------------------------ */

/* Appends template `tmpl` with {name} replaced from names/values. */
static int fill(struct keel_buf *b, const char *tmpl, const char *const *names,
                const char *const *values, int n)
{
    int rc = KEEL_OK;

    for (const char *p = tmpl; *p && !rc;) {
        int done = 0;
        for (int i = 0; *p == '{' && i < n && !done; i++) {
            size_t len = strlen(names[i]);
            if (!strncmp(p + 1, names[i], len) && p[len + 1] == '}') {
                rc = keel_buf_adds(b, values[i] ? values[i] : "");
                p += len + 2;
                done = 1;
            }
        }
        if (!done)
            rc = keel_buf_addc(b, *p++);
    }
    return rc;
}

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
    return fill(b, msg(t, "command_unknown", "I don't know the command \u201c{name}\u201d."),
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

static int compose_personal(struct turn *t, const json_t *r, struct keel_buf *b)
{
    const char *status = str(r, "status");
    const char *names[] = {"key", "value", "previous", "reason", "role", "max", "tool"};
    char max[16];
    const char *values[] = {str(r, "key"), str(r, "value"), str(r, "previous"), str(r, "reason"),
                            str(r, "role"), max, str(r, "tool")};
    const char *tool = t->route_tool ? t->route_tool : "";
    const char *key, *fallback;

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
    } else if (!strcmp(status, "stored")) {
        key = "personal_stored";
        fallback = "Got it: your {key} is {value}. I'll remember that.";
    } else if (!strcmp(status, "replaced")) {
        key = "personal_replaced";
        fallback = "Updated: your {key} is now {value} (it was {previous}).";
    } else if (!strcmp(status, "unchanged")) {
        key = "personal_unchanged";
        fallback = "I already had that: your {key} is {value}.";
    } else if (!strcmp(status, "removed") && !strncmp(str(r, "key"), "note: ", 6)) {
        key = "personal_removed_note";
        fallback = "Done: I've forgotten \u201c{previous}\u201d.";
    } else if (!strcmp(status, "removed")) {
        key = "personal_removed";
        fallback = "Done: I've forgotten your {key} (it was {previous}).";
    } else if (!strcmp(status, "not_found")) {
        key = "personal_not_found";
        fallback = "I had nothing stored as your {key}.";
    } else if (!strcmp(status, "refused")) {
        key = "personal_refused";
        fallback = "I won't store that: {reason}.";
    } else if (!strcmp(status, "full")) {
        key = "personal_full";
        fallback = "I can't remember more than {max} things for you; ask me to forget one first.";
    } else if (!strcmp(status, "forbidden")) {
        key = "personal_forbidden";
        fallback = "Your role ({role}) may not do that ({tool} needs write access).";
    } else if (!strcmp(status, "invalid") || !strcmp(status, "unavailable")) {
        key = "personal_unavailable";
        fallback = "I can't do that here: {reason}.";
    } else {
        key = "personal_help";
        fallback = "I can remember things you tell me, like \u201cmy favourite drink is "
                   "tea\u201d, and answer \u201cwhat's my favourite drink?\u201d.";
    }
    return fill(b, msg(t, key, fallback), names, values, 7);
}

/* "5 kilometres", "5 feet 10 inches", "100 USD". */
static int amount_text(const json_t *r, struct keel_buf *b)
{
    const json_t *from = json_object_get(r, "from"), *parts = json_object_get(r, "parts"), *p;
    int currency = !strcmp(str(from, "category"), "currency");
    char num[64];
    size_t i;
    int rc = KEEL_OK;

    if (json_array_size(parts) <= 1) {
        double a = json_number_value(json_object_get(r, "amount"));
        convert_format(a, 0, num, sizeof(num));
        return keel_buf_addf(b, "%s %s", num, currency ? str(from, "name")
                                              : a == 1 ? str(from, "one") : str(from, "other"));
    }
    json_array_foreach(parts, i, p) {
        double a = json_number_value(json_object_get(p, "amount"));
        convert_format(a, 0, num, sizeof(num));
        if (!rc)
            rc = keel_buf_addf(b, "%s%s %s", i ? " " : "", num, str(p, "unit"));
    }
    return rc;
}

static int compose_convert(struct turn *t, const json_t *r, struct keel_buf *b)
{
    const char *status = str(r, "status");
    const json_t *from = json_object_get(r, "from"), *to = json_object_get(r, "to");
    const json_t *rates = json_object_get(r, "rates");
    const char *names[] = {"unknown", "from", "to", "from_kind", "to_kind", "reason"};
    const char *values[] = {str(r, "unknown"), str(from, "name"), str(to, "name"),
                            str(from, "category"), str(to, "category"), str(r, "reason")};
    char num[64];
    int currency = !strcmp(str(to, "category"), "currency"), rc;
    double v = json_number_value(json_object_get(r, "value"));

    if (!strcmp(status, "ok")) {
        convert_format(v, currency, num, sizeof(num));
        if ((rc = amount_text(r, b)) ||
            (rc = keel_buf_addf(b, " = %s %s.", num,
                                currency ? str(to, "name")
                                         : !strcmp(num, "1") ? str(to, "one") : str(to, "other"))))
            return rc;
        if (rates) {
            const char *rn[] = {"date", "base", "note"};
            const char *rv[] = {str(rates, "date"), str(rates, "base"), str(rates, "note")};
            if ((rc = keel_buf_adds(b, "\n")))
                return rc;
            return fill(b, msg(t, "convert_rates", "Rates as of {date} (base {base}): {note}."),
                        rn, rv, 3);
        }
        return KEEL_OK;
    }
    if (!strcmp(status, "unknown_unit"))
        return fill(b, msg(t, "convert_unknown_unit", "I don't know the unit \u201c{unknown}\u201d."),
                    names, values, 6);
    if (!strcmp(status, "unknown_currency"))
        return fill(b, msg(t, "convert_unknown_currency",
                           "I don't have a rate for the currency \u201c{unknown}\u201d."),
                    names, values, 6);
    if (!strcmp(status, "incompatible"))
        return fill(b, msg(t, "convert_incompatible",
                           "I can't convert {from_kind} ({from}) to {to_kind} ({to})."),
                    names, values, 6);
    if (!strcmp(status, "mixed"))
        return fill(b, msg(t, "convert_mixed", "The amount mixes units of different kinds."),
                    names, values, 6);
    if (!strcmp(status, "forbidden") || !strcmp(status, "unavailable") ||
        !strcmp(status, "invalid"))
        return fill(b, msg(t, "convert_unavailable", "I can't convert here."), names, values, 6);
    return fill(b, msg(t, "convert_none", "I couldn't read a conversion there. Try \u201c5 km to "
                                          "miles\u201d or \u201c100 usd in eur\u201d."),
                names, values, 6);
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
        return fill(b, msg(t, "websearch_unconfigured",
                           "Web search is not configured, so I can't look up \u201c{query}\u201d."),
                    names, values, 2);
    if (json_is_true(json_object_get(r->outcome, "failed")))
        return fill(b, msg(t, "websearch_failed",
                           "The web search failed ({reason}), so I have no answer for "
                           "\u201c{query}\u201d."),
                    names, values, 2);
    if (!json_array_size(r->items))
        return fill(b, msg(t, "websearch_none", "The web search found nothing for \u201c{query}\u201d."),
                    names, values, 2);
    if ((rc = fill(b, msg(t, "websearch_found", "From the web, on \u201c{query}\u201d:"), names,
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
