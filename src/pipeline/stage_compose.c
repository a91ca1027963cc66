/*
 * stage_compose.c — compose: the built-in extractive responder. It
 * answers only from what resolve found — paper records, corpus passages,
 * a path's honest "I can't" — cites each source by number, and says
 * plainly when nothing was found. It invents nothing: every sentence of
 * an answer is a sentence of a source or a fixed text of the pack
 * (pipeline.messages, with English defaults here). With a model
 * configured, the extractive answer is built all the same and then
 * handed to model_compose (model.c), which lets the model phrase it and
 * keeps it when the model fails.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/turn.h"

#define PASSAGES_PER_ANSWER 3
#define ABSTRACT_SENTENCE_MAX 300

/* Byte classes, read per byte of every passage and abstract (a table,
 * not strchr per byte): where a sentence may end, and what
 * compose_add_plain does not copy as it is. */
enum {
    B_STOP = 1,    /* . ? ! */
    B_BREAK = 2,   /* a newline, or the | of a table row */
    B_MARK = 4,    /* | _ * : compose_add_plain looks at these */
    B_END = 8,     /* the terminating NUL */
};
static const unsigned char byte_class[256] = {
    ['\0'] = B_END, ['.'] = B_STOP, ['?'] = B_STOP, ['!'] = B_STOP, ['\n'] = B_BREAK,
    ['|'] = B_BREAK | B_MARK, ['_'] = B_MARK, ['*'] = B_MARK,
};

int turn_template(struct keel_buf *b, const char *tmpl, const char *const *names,
                  const char *const *values, int n)
{
    int rc = KEEL_OK;

    for (const char *p = tmpl; *p && !rc;) {
        int done = 0;
        if (*p == '{')
            for (int i = 0; i < n && !done; i++) {
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

static const char *message(const struct turn *t, const char *key, const char *fallback)
{
    return config_message(&t->pl->cfg, key, fallback);
}

/* " (2022–2026, open access only)" from the tool's final arguments. */
static void filters_text(const json_t *args, char *out, size_t n)
{
    int from = (int)json_integer_value(json_object_get(args, "year_from"));
    int to = (int)json_integer_value(json_object_get(args, "year_to"));
    int oa = json_is_true(json_object_get(args, "open_access_only"));
    char years[32] = "";

    if (from && to)
        snprintf(years, sizeof(years), from == to ? "%d" : "%d\u2013%d", from, to);
    else if (from)
        snprintf(years, sizeof(years), "%d on", from);
    else if (to)
        snprintf(years, sizeof(years), "up to %d", to);
    if (years[0] || oa)
        snprintf(out, n, " (%s%s%s)", years, years[0] && oa ? ", " : "", oa ? "open access only" : "");
    else
        out[0] = '\0';
}

int compose_first_sentence(struct keel_buf *b, const char *text)
{
    size_t n = 0, len = strlen(text);

    while (n < len && !((byte_class[(unsigned char)text[n]] & B_STOP) &&
                        (text[n + 1] == ' ' || !text[n + 1])))
        n++;
    if (n < len)
        n++;
    if (n > ABSTRACT_SENTENCE_MAX) {
        int rc;
        n = ABSTRACT_SENTENCE_MAX;
        while (n > 0 && text[n] != ' ')
            n--;
        /* room for both first: all of it or nothing is added */
        if ((rc = keel_buf_grow(b, n + strlen("\u2026"))))
            return rc;
        keel_buf_add(b, text, n);
        return keel_buf_adds(b, "\u2026");
    }
    return keel_buf_add(b, text, n);
}

static int compose_papers(struct turn *t, const struct sub_result *r, struct keel_buf *b)
{
    const char *query = json_string_value(json_object_get(r->args, "query"));
    size_t n = json_array_size(r->items), i;
    char filters[96], count[16];
    const char *names[] = {"n", "query", "filters"};
    const char *values[] = {count, query ? query : "", filters};
    json_t *paper;
    int rc;

    filters_text(r->args, filters, sizeof(filters));
    snprintf(count, sizeof(count), "%zu", n);
    if (!n)
        return turn_template(b, message(t, "papers_none",
                                        "I found no papers on \u201c{query}\u201d{filters} in the library."),
                             names, values, 3);
    if ((rc = turn_template(b, n == 1 ? message(t, "paper_found",
                                                "I found 1 paper on \u201c{query}\u201d{filters}:")
                                      : message(t, "papers_found",
                                                "I found {n} papers on \u201c{query}\u201d{filters}:"),
                            names, values, 3)))
        return rc;
    json_array_foreach(r->items, i, paper) {
        int number = compose_cite(t, paper);
        json_t *year = json_object_get(paper, "year");
        const char *venue = json_string_value(json_object_get(paper, "venue"));
        const char *abstract = json_string_value(json_object_get(paper, "abstract"));

        if (number < 0)
            return KEEL_ENOMEM;
        rc = keel_buf_addf(b, "\n%zu. %s (", i + 1,
                           json_string_value(json_object_get(paper, "title")));
        if (!rc && json_is_integer(year))
            rc = keel_buf_addf(b, "%d%s", (int)json_integer_value(year), venue ? ", " : "");
        if (!rc && venue)
            rc = keel_buf_adds(b, venue);
        if (!rc)
            rc = keel_buf_addf(b, ") [%d]", number);
        if (!rc && abstract && *abstract) {
            rc = keel_buf_adds(b, "\n   ");
            if (!rc)
                rc = compose_first_sentence(b, abstract);
        }
        if (rc)
            return rc;
    }
    return KEEL_OK;
}

/* Sets `key` (ASCII) of `obj` to `value`, taking it (NULL: fails);
 * nonzero on failure. */
static int set_new(json_t *obj, const char *key, json_t *value)
{
    return json_object_set_new_nocheck(obj, key, value);
}

/* Sets `key` (ASCII) of `obj` to a new reference to `value`, null for
 * NULL; nonzero on failure. */
static int set(json_t *obj, const char *key, const json_t *value)
{
    return set_new(obj, key, value ? json_incref((json_t *)value) : json_null());
}

int compose_cite(struct turn *t, const json_t *item)
{
    const json_t *doc = json_object_get(item, "document_id"), *id = json_object_get(item, "id");
    int paper = !doc && !json_object_get(item, "text") && !json_object_get(item, "snippet");
    const char *url = json_string_value(json_object_get(item, paper ? "pdf_url" : "url"));
    json_t *s, *entry;
    size_t i;
    int n;

    json_array_foreach(t->sources, i, s)
        if ((doc && json_equal(doc, json_object_get(s, "document_id"))) ||
            (paper && id && json_equal(id, json_object_get(s, "id"))))
            return (int)json_integer_value(json_object_get(s, "n"));
    n = (int)json_array_size(t->sources) + 1;
    if (!url && paper)
        url = json_string_value(json_object_get(item, "url"));
    /* as json_pack("{s:i, s:s, s:O?, …}") would make it, without reading
     * a format: a NULL value is null */
    entry = json_object();
    if (!entry || set_new(entry, "n", json_integer(n)) ||
        set_new(entry, "kind", json_string(paper ? "paper" : doc ? "passage" : "web")))
        goto fail;
    if (paper ? set(entry, "id", id) || set(entry, "title", json_object_get(item, "title")) ||
                    set(entry, "year", json_object_get(item, "year")) ||
                    set_new(entry, "url", url ? json_string(url) : json_null()) ||
                    set(entry, "venue", json_object_get(item, "venue")) ||
                    set(entry, "is_open_access", json_object_get(item, "is_open_access"))
              : set(entry, "document_id", doc) ||
                    set(entry, "title", json_object_get(item, "title")) ||
                    set(entry, "section", json_object_get(item, "section")) ||
                    set(entry, "source", json_object_get(item, doc ? "source" : "url")) ||
                    set(entry, "confidence", json_object_get(item, "confidence")) ||
                    set(entry, "band", json_object_get(item, "band")))
        goto fail;
    return json_array_append_new(t->sources, entry) ? -1 : n;
fail:
    json_decref(entry);
    return -1;
}

int compose_add_plain(struct keel_buf *b, const char *prefix, const char *text, size_t n)
{
    int rc = keel_buf_adds(b, prefix);

    while (n && (text[n - 1] == '|' || text[n - 1] == ' '))
        n--;
    for (size_t i = 0; i < n && !rc; i++) {
        if (text[i] == '|') {
            while (b->len && b->data[b->len - 1] == ' ')
                keel_buf_truncate(b, b->len - 1);
            rc = keel_buf_adds(b, ", ");
            while (i + 1 < n && text[i + 1] == ' ')
                i++;
        } else if (text[i] == '_' && i + 1 < n && text[i + 1] == '_') {
            i++;
        } else if (text[i] != '*') {
            size_t end = i + 1;   /* the run of bytes copied as they are */
            while (end < n && !(byte_class[(unsigned char)text[end]] & B_MARK))
                end++;
            rc = keel_buf_add(b, text + i, end - i);
            i = end - 1;
        }
    }
    return rc;
}

/* A table row ends where "| |" joins it to the next one (the chunker
 * keeps a table's rows on one line). */
static int row_end(const char *text, size_t i, size_t len)
{
    size_t k = i + 1;

    if (text[i] != '|')
        return 0;
    while (k < len && text[k] == ' ')
        k++;
    return k > i + 1 && k < len && text[k] == '|';
}

int compose_pick_sentences(const struct tool_words *query, const char *text,
                           struct compose_sentence best[COMPOSE_SENTENCES])
{
    size_t len = strlen(text), start = 0;
    char piece[1024];
    int n_best = 0;

    memset(best, 0, COMPOSE_SENTENCES * sizeof(*best));
    for (size_t i = 0; i <= len; i++) {
        /* no sentence ends before the next of these (the NUL at len is one) */
        while (!(byte_class[(unsigned char)text[i]] & (B_STOP | B_BREAK | B_END)))
            i++;
        /* "8 a.m. to 7 p.m." does not end at "a.m.": a full stop ends a
         * sentence only before a capital, a digit or the end. */
        int end = i == len || text[i] == '\n' || row_end(text, i, len) ||
                  ((byte_class[(unsigned char)text[i]] & B_STOP) &&
                   (i + 1 == len || text[i + 1] == ' ') &&
                   !(text[i] == '.' && i + 2 < len && islower((unsigned char)text[i + 2])));
        if (!end)
            continue;
        size_t n = i - start + (i < len && text[i] != '\n');
        while (n && strchr(" #>-*|", text[start])) {
            start++;
            n--;
        }
        if (n > 20 && n < sizeof(piece)) {
            memcpy(piece, text + start, n);
            piece[n] = '\0';
            if (memchr(piece, '|', n) && (strstr(piece, "|-") || strstr(piece, "-|"))) {
                start = i + 1;
                continue;   /* a table's rule row says nothing */
            }
            double score = tools_coverage_of(query, piece);
            for (int k = 0; k < COMPOSE_SENTENCES; k++)
                if (score > best[k].score) {
                    memmove(best + k + 1, best + k, (COMPOSE_SENTENCES - 1 - k) * sizeof(*best));
                    best[k] = (struct compose_sentence){start, n, score};
                    break;
                }
        }
        start = i + 1;
    }
    for (int k = 0; k < COMPOSE_SENTENCES; k++)
        n_best += best[k].len > 0;
    if (n_best == 2 && best[1].start < best[0].start) {
        struct compose_sentence tmp = best[0];
        best[0] = best[1];
        best[1] = tmp;
    }
    return n_best;
}

static int compose_passages(struct turn *t, const struct sub_result *r, struct keel_buf *b)
{
    const char *query = json_string_value(json_object_get(r->args, "query"));
    const char *names[] = {"query"};
    const char *values[] = {query ? query : ""};
    struct compose_sentence best[COMPOSE_SENTENCES];
    struct tool_words words;
    size_t i;
    json_t *p;
    int used = 0, rc = KEEL_OK;

    tools_words_init(&words, &t->pl->cfg, query ? query : "");
    if (!strcmp(r->band, "caution") &&
        (rc = keel_buf_addf(b, "%s\n", message(t, "rag_caution",
                                               "Our materials only partly cover this, so please "
                                               "check the details with your plan."))))
        return rc;
    json_array_foreach(r->items, i, p) {
        const char *band = json_string_value(json_object_get(p, "band"));
        const char *text = json_string_value(json_object_get(p, band ? "text" : "snippet"));
        int number, n;

        if (used == PASSAGES_PER_ANSWER || (band && !strcmp(band, "abstain")) || !text)
            continue;
        if (!(n = compose_pick_sentences(&words, text, best)))
            continue;   /* nothing of it answers: not a source */
        if ((number = compose_cite(t, p)) < 0)
            return KEEL_ENOMEM;
        for (int k = 0; k < n && !rc; k++) {
            /* A sentence ends itself; a table row needs a separator. */
            const char *sep = !k ? (used ? "\n" : "")
                              : strchr(".?!:", text[best[k - 1].start + best[k - 1].len - 1])
                                  ? " " : "; ";
            rc = compose_add_plain(b, sep, text + best[k].start, best[k].len);
        }
        if (rc || (rc = keel_buf_addf(b, " [%d]", number)))
            return rc;
        used++;
    }
    if (!used)
        return turn_template(b, message(t, "rag_none",
                                        "I couldn't find an answer to \u201c{query}\u201d in our "
                                        "materials."),
                             names, values, 1);
    return KEEL_OK;
}

static int compose_conversation(struct turn *t, struct keel_buf *b)
{
    const struct thread_state *st = &t->state;
    const char *names[] = {"topic", "question"};
    const char *values[] = {st->research_topic, st->research_question};

    if (st->research_topic[0] || st->research_question[0])
        return turn_template(b, message(t, st->research_topic[0] ? "conversation_topic"
                                                                 : "conversation_question",
                                        st->research_topic[0]
                                            ? "Your research topic is \u201c{topic}\u201d. Ask me to "
                                              "find papers on it, for example \u201cfind recent "
                                              "papers on this topic\u201d."
                                            : "Your research question is \u201c{question}\u201d. "
                                              "Ask me to find papers on it."),
                             names, values, 2);
    t->answer_key = "conversation";
    return keel_buf_adds(b, message(t, "conversation",
                                    "I answer from the sources I can search. Ask me to find "
                                    "something, for example \u201cfind recent papers on graph "
                                    "neural networks\u201d."));
}

/* Nonzero when the message thanks (a phrase of pipeline.thanks_phrases). */
static int is_thanks(const struct turn *t)
{
    struct lex_result res;

    config_match(&t->pl->cfg, t->req->message, t->req->message_len, &res);
    return (res.categories >> CCAT_THANKS) & 1;
}

static int compose_sub(struct turn *t, int i, struct keel_buf *b)
{
    const struct sub_result *r = &t->results[i];
    const struct config_path *path = &t->pl->cfg.paths[t->state.blueprint.subs[i].path];

    if (r->unavailable)
        return keel_buf_adds(b, path->unavailable ? path->unavailable
                                                  : message(t, "unavailable",
                                                            "I can't answer that here."));
    if (!r->ran)
        return compose_conversation(t, b);
    if (!strcmp(r->band, "computed"))   /* a calculator's answer (uk_income_tax) */
        return keel_buf_adds(b, json_string_value(json_object_get(r->items, "text")));
    if (!strcmp(r->tool, "search_papers"))
        return compose_papers(t, r, b);
    if (!strcmp(r->tool, "web_search"))
        return route_compose_web(t, r, b);
    return compose_passages(t, r, b);
}

/* The answer of a turn that ran no tool, by the policy's reason. */
static int compose_no_tools(struct turn *t, struct keel_buf *b)
{
    if (t->decision.route == POLICY_ROUTE_COMMAND)
        return keel_buf_adds(b, message(t, "command",
                                        "Commands are not available here. Ask me a question."));
    if (t->decision.tool_veto) {
        t->answer_key = "veto";
        return keel_buf_adds(b, message(t, "veto",
                                        "You asked me not to search, and I answer only from "
                                        "what I find, so I have nothing to add. Ask again "
                                        "without that and I will look it up."));
    }
    if (t->decision.reason == R_SMALLTALK && is_thanks(t)) {
        /* "thanks" is no greeting: its own reply, then where the research stands. */
        int rc = keel_buf_adds(b, message(t, "thanks", "You're welcome."));
        if (rc || !(t->state.research_topic[0] || t->state.research_question[0])) {
            t->answer_key = "thanks";
            return rc;
        }
        return keel_buf_adds(b, "\n\n") ? KEEL_ENOMEM : compose_conversation(t, b);
    }
    if (t->state.research_topic[0] || t->state.research_question[0])
        return compose_conversation(t, b);   /* a reminder of where the research stands */
    t->answer_key = "smalltalk";
    return keel_buf_adds(b, message(t, "smalltalk",
                                    "Hello! Ask me a question and I will look it up."));
}

/* A closing note when remote paper providers failed: the answer says the
 * results may be incomplete and which sources did not answer, so the user
 * sees it wherever the answer goes (terminal, API, stream). */
int compose_providers_note(struct turn *t, struct keel_buf *out)
{
    char names[256] = "";
    size_t len = 0;
    json_t *r;
    size_t i;

    json_array_foreach(t->provider_reports, i, r) {
        const char *name = json_string_value(json_object_get(r, "provider"));
        int id = provider_find(name);
        if (strcmp(json_string_value(json_object_get(r, "status")), "failed") || id < 0)
            continue;
        len += (size_t)snprintf(names + len, len < sizeof(names) ? sizeof(names) - len : 0,
                                "%s%s", len ? ", " : "", provider_label((enum provider_id)id));
    }
    if (!len)
        return KEEL_OK;
    {
        const char *names_v[] = {"sources"};
        const char *values[] = {names};
        int rc = keel_buf_adds(out, "\n\n");
        return rc ? rc
                  : turn_template(out, message(t, "providers_failed",
                                               "Note: {sources} did not answer, so these results "
                                               "may be incomplete."),
                                  names_v, values, 1);
    }
}

int stage_compose(struct turn *t, struct keel_error *err)
{
    const struct blueprint *bp = &t->state.blueprint;
    int rc = t->routed ? route_compose(t, &t->answer)
             : t->no_tools ? compose_no_tools(t, &t->answer) : KEEL_OK;

    for (int i = 0; i < bp->n_subs && !rc && !t->no_tools; i++) {
        if (bp->n_subs > 1)
            rc = keel_buf_addf(&t->answer, "%s%d. %s\n", i ? "\n\n" : "", i + 1, bp->subs[i].text);
        if (!rc)
            rc = compose_sub(t, i, &t->answer);
    }
    if (!rc && t->provider_reports)
        rc = compose_providers_note(t, &t->answer);
    if (rc)
        return keel_error_set(err, rc == KEEL_ETOOBIG ? KEEL_ETOOBIG : KEEL_ENOMEM, "answer",
                              "the answer could not be built");
    if ((rc = model_compose(t, err)))
        return rc;
    if (turn_emit(t, "info", "compose.done",
                  json_pack("{s:i,s:i,s:b}", "bytes", (int)t->answer.len, "sources",
                            (int)json_array_size(t->sources), "model",
                            t->model_log && !t->model_failed),
                  "%s answer, %d sources",
                  t->model_log && !t->model_failed ? "model" : "extractive",
                  (int)json_array_size(t->sources)))
        return keel_error_set(err, KEEL_ENOMEM, "compose", "out of memory");
    return KEEL_OK;
}
