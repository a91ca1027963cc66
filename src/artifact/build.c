/*
 * build.c — seed 001's three pipelines, from the turn's envelopes to a
 * validated artifact. They are extractive: every claim, item and step is
 * text of a source or of the turn's answer, never invented.
 *
 *   research triage  (research_brief) the search results are the
 *                    sources; each source's snippet gives a claim citing
 *                    it; the answer's first line is the summary
 *   doc intel        (doc_extract) each answer line citing a document
 *                    chunk is an item with the chunk's document and
 *                    section; without such lines, each chunk's opening
 *                    sentences
 *   planning         (plan) the answer's sentences are the steps — of an
 *                    extractive answer only those of lines citing a
 *                    source; never an answer made of the pack's fixed
 *                    texts alone ("I answer from the sources I can …")
 *
 * They fail closed: fewer sources than min_sources, no document text,
 * fewer steps than min_steps, no claim, or anything the validator
 * refuses is an error with a reason code, and the turn keeps its plain
 * answer.
 */
#include <stdio.h>
#include <string.h>

#include "artifact/artifact_text.h"
#include "core/alloc.h"
#include "core/clock.h"

#define TITLE_MAX 120

/* A new string of `s` cut to `max` bytes. */
static json_t *cut_string(const char *s, size_t max)
{
    char buf[CONTRACT_TEXT_MAX + 8];

    artifact_cut(s, strlen(s), max, buf, sizeof(buf));
    return json_string(buf);
}

static int set(json_t *obj, const char *key, json_t *value)
{
    return json_object_set_new(obj, key, value);   /* consumes value, also on failure */
}

static json_t *extra(const struct artifact_envelope *env)
{
    json_t *list = json_array();

    if (list && env->method && *env->method &&
        json_array_append_new(list, json_pack("{s:s, s:o}", "title", "Method", "body",
                                              cut_string(env->method, 4000)))) {
        json_decref(list);
        return NULL;
    }
    return list;
}

/* The first line of the answer, cleaned, or NULL when it has none. */
static const char *first_line(const char *answer, struct artifact_piece *piece)
{
    size_t len;

    for (const char *l = answer; (l = artifact_next_line(l, &len)); l += len + (l[len] != 0))
        if (artifact_clean(l, len, piece) && artifact_words(piece->text) >= 3)
            return piece->text;
    return NULL;
}

static json_t *find_n(const json_t *list, int n)
{
    const json_t *item;
    size_t i;

    json_array_foreach(list, i, item)
        if (json_integer_value(json_object_get(item, "n")) == n)
            return (json_t *)item;
    return NULL;
}

/* ---- research triage --------------------------------------------------------- */

static int brief_content(const struct artifact_contract_conf *cc,
                         const struct artifact_envelope *env, json_t *content,
                         struct keel_error *err)
{
    json_t *sources = json_array(), *claims = json_array(), *s;
    struct artifact_piece *piece = keel_malloc(sizeof(*piece));
    const char *summary;
    size_t i;
    int bad = !sources || !claims || !piece, n_sources = 0;

    json_array_foreach(env->sources, i, s) {
        const char *title = json_string_value(json_object_get(s, "title"));
        const char *snippet = json_string_value(json_object_get(s, "snippet"));
        json_int_t n = json_integer_value(json_object_get(s, "n"));
        json_t *src;

        if (bad || !title || !*title || n < 1 || n > CONTRACT_SOURCES_MAX)
            continue;
        src = json_pack("{s:I, s:o}", "n", n, "title", cut_string(title, 1000));
        if (json_is_string(json_object_get(s, "url")))
            bad |= set(src, "url", cut_string(json_string_value(json_object_get(s, "url")), 2000));
        if (json_integer_value(json_object_get(s, "year")) > 0 &&
            json_integer_value(json_object_get(s, "year")) <= 9999)
            bad |= set(src, "year", json_integer(json_integer_value(json_object_get(s, "year"))));
        if (json_is_string(json_object_get(s, "venue")))
            bad |= set(src, "venue",
                       cut_string(json_string_value(json_object_get(s, "venue")), 500));
        if (snippet && *snippet)
            bad |= set(src, "snippet", cut_string(snippet, 1000));
        bad |= !src || json_array_append_new(sources, src);
        n_sources++;
        /* The source's opening sentence is a claim it supports. */
        if (!bad && snippet && (int)json_array_size(claims) < cc->max_items &&
            artifact_clean(snippet, artifact_sentence(snippet, strlen(snippet)), piece) &&
            artifact_words(piece->text) >= 3)
            bad |= json_array_append_new(claims, json_pack("{s:o, s:[I]}", "text",
                                                           cut_string(piece->text, 1000),
                                                           "citations", n));
    }
    if (bad) {
        json_decref(sources);
        json_decref(claims);
        keel_free(piece);
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    }
    summary = first_line(env->answer ? env->answer : "", piece);
    /* Each set consumes its value, also on failure: all of them run. */
    bad = set(content, "question", cut_string(env->question, 1000)) |
          set(content, "summary", cut_string(summary ? summary : env->question, 4000)) |
          set(content, "claims", claims) | set(content, "sources", sources);
    keel_free(piece);
    if (bad)
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    if (n_sources < cc->min_sources)
        return keel_error_set(err, KEEL_EINVAL, "too_few_sources",
                              "%d source(s); a research brief needs %d", n_sources, cc->min_sources);
    if (!json_array_size(claims))
        return keel_error_set(err, KEEL_EINVAL, "no_claims",
                              "none of the %d sources has a text to cite", n_sources);
    return KEEL_OK;
}

/* ---- doc intel ---------------------------------------------------------------- */

static json_t *item_of(const json_t *chunk, const char *text)
{
    json_t *ref = json_pack("{s:O}", "document_id", json_object_get(chunk, "document_id"));
    const char *section = json_string_value(json_object_get(chunk, "section"));
    json_int_t page = json_integer_value(json_object_get(chunk, "page"));

    if (ref && section && *section && set(ref, "section", cut_string(section, 1000))) {
        json_decref(ref);
        return NULL;
    }
    if (ref && page > 0 && page <= 100000 && set(ref, "page", json_integer(page))) {
        json_decref(ref);
        return NULL;
    }
    return ref ? json_pack("{s:o, s:o}", "text", cut_string(text, 1000), "ref", ref) : NULL;
}

/* Adds the document of `chunk` to `docs` once. */
static int add_document(json_t *docs, const json_t *chunk)
{
    const json_t *id = json_object_get(chunk, "document_id"), *d;
    json_t *doc;
    size_t i;

    json_array_foreach(docs, i, d)
        if (json_equal(json_object_get(d, "id"), (json_t *)id))
            return 0;
    doc = json_pack("{s:O}", "id", id);
    if (doc && json_is_string(json_object_get(chunk, "title")))
        set(doc, "title", cut_string(json_string_value(json_object_get(chunk, "title")), 1000));
    if (doc && json_is_string(json_object_get(chunk, "source")))
        set(doc, "source", cut_string(json_string_value(json_object_get(chunk, "source")), 2000));
    return !doc || json_array_append_new(docs, doc);
}

static int usable(const json_t *chunk)
{
    const char *id = json_string_value(json_object_get(chunk, "document_id"));
    return id && *id && strlen(id) <= 512;
}

static int extract_content(const struct artifact_contract_conf *cc,
                           const struct artifact_envelope *env, json_t *content,
                           struct keel_error *err)
{
    json_t *items = json_array(), *docs = json_array(), *chunk;
    struct artifact_piece *piece = keel_malloc(sizeof(*piece));
    const char *l = env->answer ? env->answer : "";
    size_t len, i;
    int bad = !items || !docs || !piece;

    /* The answer's lines that cite a chunk: what the turn found relevant. */
    for (; !bad && (l = artifact_next_line(l, &len)); l += len + (l[len] != 0)) {
        if ((int)json_array_size(items) >= cc->max_items)
            break;
        if (!artifact_clean(l, len, piece) || artifact_words(piece->text) < 3)
            continue;
        for (int k = 0; k < piece->n_cites; k++)
            if ((chunk = find_n(env->chunks, piece->cites[k])) && usable(chunk)) {
                bad |= json_array_append_new(items, item_of(chunk, piece->text)) ||
                       add_document(docs, chunk);
                break;
            }
    }
    /* Else each chunk's opening sentences. */
    size_t from_answer = json_array_size(items);
    json_array_foreach(env->chunks, i, chunk) {
        const char *text = json_string_value(json_object_get(chunk, "text"));
        if (bad || from_answer || !text || !usable(chunk))
            continue;
        size_t n = artifact_sentence(text, strlen(text));
        n += artifact_sentence(text + n, strlen(text + n));
        if (artifact_clean(text, n, piece) && artifact_words(piece->text) >= 3 &&
            (int)json_array_size(items) < cc->max_items)
            bad |= json_array_append_new(items, item_of(chunk, piece->text)) ||
                   add_document(docs, chunk);
    }
    keel_free(piece);
    if (bad) {
        json_decref(docs);
        json_decref(items);
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    }
    if (set(content, "question", cut_string(env->question, 1000)) |
        set(content, "documents", docs) | set(content, "items", items))
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    if (!json_array_size(items))
        return keel_error_set(err, KEEL_EINVAL, "empty_document",
                              "no document text in context (%d chunks)",
                              (int)json_array_size(env->chunks));
    return KEEL_OK;
}

/* ---- planning ------------------------------------------------------------------ */

static int plan_content(const struct artifact_contract_conf *cc,
                        const struct artifact_envelope *env, json_t *content,
                        struct keel_error *err)
{
    json_t *steps = json_array();
    struct artifact_piece *piece = keel_malloc(sizeof(*piece));
    const char *l = env->answer ? env->answer : "";
    size_t len;
    int bad = !steps || !piece;

    if (!env->grounded) {
        keel_free(piece);
        json_decref(steps);
        return keel_error_set(err, KEEL_EINVAL, "no_content",
                              "the answer holds no sources and no model's text to plan from");
    }
    for (; !bad && (l = artifact_next_line(l, &len)); l += len + (l[len] != 0)) {
        size_t n = artifact_clean(l, len, piece), at = 0;
        if (env->cited_only && !piece->n_cites)
            continue;   /* a fixed text of the pack, not a source's */
        while (!bad && at < n && (int)json_array_size(steps) < cc->max_items) {
            size_t s = artifact_sentence(piece->text + at, n - at);
            char step[CONTRACT_TEXT_MAX];
            artifact_cut(piece->text + at, s, 1000, step, sizeof(step));
            if (artifact_words(step) >= 3)
                bad |= json_array_append_new(
                    steps, json_pack("{s:I, s:s}", "n", (json_int_t)json_array_size(steps) + 1,
                                     "action", step));
            at += s;
            while (at < n && piece->text[at] == ' ')
                at++;
        }
    }
    keel_free(piece);
    if (bad) {
        json_decref(steps);
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    }
    if (set(content, "goal", cut_string(env->question, 1000)) | set(content, "steps", steps))
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    if ((int)json_array_size(steps) < cc->min_steps)
        return keel_error_set(err, KEEL_EINVAL, "too_few_steps", "%d step(s); a plan needs %d",
                              (int)json_array_size(steps), cc->min_steps);
    return KEEL_OK;
}

int artifact_build(const struct artifact_conf *conf, int type, const struct artifact_envelope *env,
                   json_t **out, struct keel_error *err)
{
    char ts[KEEL_RFC3339_MAX];
    json_t *content = json_object(), *art = NULL, *more;
    int rc;

    if (type < 0 || type >= ARTIFACT_TYPES)
        return keel_error_set(err, KEEL_EINVAL, "type", "is not a contract");
    if (!content)
        return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    if (!env->question || !*env->question) {
        json_decref(content);
        return keel_error_set(err, KEEL_EINVAL, "no_question", "the turn has no question");
    }
    rc = type == ARTIFACT_RESEARCH_BRIEF ? brief_content(&conf->contracts[type], env, content, err)
         : type == ARTIFACT_DOC_EXTRACT  ? extract_content(&conf->contracts[type], env, content, err)
                                         : plan_content(&conf->contracts[type], env, content, err);
    if (!rc && (!(more = extra(env)) ||
                (json_array_size(more) ? set(content, "extra_sections", more)
                                       : (json_decref(more), 0))))
        rc = keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    if (!rc && !(art = json_pack("{s:s, s:s, s:i, s:s, s:i, s:s, s:s, s:o, s:O}", "id", env->id,
                                 "type", artifact_type_name(type), "version", 1,
                                 "conversation_id", env->conversation_id, "turn", env->turn,
                                 "correlation_id", env->correlation_id, "created_at",
                                 keel_time_format(env->now_ms, ts, sizeof(ts)), "title",
                                 cut_string(env->question, TITLE_MAX), "content", content)))
        rc = keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
    json_decref(content);
    if (!rc) {
        struct keel_error inner;
        keel_error_clear(&inner);
        if (artifact_validate(art, &inner)) {
            json_decref(art);
            return keel_error_set(err, KEEL_EINVAL, "invalid", "%s: %s", inner.field,
                                  inner.message);
        }
        *out = art;
    }
    return rc;
}
