/*
 * tools.c — the tool registry and its schema check (see tools.h).
 */
#include "pipeline/tools.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"
#include "pack/pack.h"

#define REGISTRY_SIZE 2

/* ---- schema check ---------------------------------------------------------- */

static int check_value(const json_t *schema, const json_t *v, const char *field,
                       struct keel_error *err)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    json_t *min = json_object_get(schema, "minimum"), *max = json_object_get(schema, "maximum");
    json_t *max_len = json_object_get(schema, "maxLength");

    if (type && !strcmp(type, "string")) {
        if (!json_is_string(v))
            return keel_error_set(err, KEEL_EINVAL, field, "must be a string, not %s",
                                  keel_json_type_name(v));
        if (max_len && json_string_length(v) > (size_t)json_integer_value(max_len))
            return keel_error_set(err, KEEL_EINVAL, field, "must be at most %lld bytes",
                                  (long long)json_integer_value(max_len));
        if (json_integer_value(json_object_get(schema, "minLength")) > 0 &&
            json_string_length(v) == 0)
            return keel_error_set(err, KEEL_EINVAL, field, "must not be empty");
    } else if (type && !strcmp(type, "integer")) {
        if (!json_is_integer(v))
            return keel_error_set(err, KEEL_EINVAL, field, "must be an integer, not %s",
                                  keel_json_type_name(v));
        if ((min && json_integer_value(v) < json_integer_value(min)) ||
            (max && json_integer_value(v) > json_integer_value(max)))
            return keel_error_set(err, KEEL_EINVAL, field, "must be from %lld to %lld",
                                  (long long)json_integer_value(min),
                                  (long long)json_integer_value(max));
    } else if (type && !strcmp(type, "boolean")) {
        if (!json_is_boolean(v))
            return keel_error_set(err, KEEL_EINVAL, field, "must be true or false, not %s",
                                  keel_json_type_name(v));
    }
    return KEEL_OK;
}

static const struct tool_def registry[REGISTRY_SIZE];
static json_t *schemas[REGISTRY_SIZE];
static pthread_once_t schemas_once = PTHREAD_ONCE_INIT;

/* Schemas are static text, parsed once per process (they are plain data
 * in the registry); a schema that fails to parse (out of memory) stays
 * NULL and its tool reports so. */
static void parse_schemas(void)
{
    for (size_t i = 0; i < REGISTRY_SIZE; i++)
        schemas[i] = json_loads(registry[i].schema, 0, NULL);
}

int tools_check_args(const struct tool_def *tool, const json_t *args, struct keel_error *err)
{
    json_t *schema, *props, *required, *v;
    const char *key;
    size_t i;
    int rc = KEEL_OK;

    pthread_once(&schemas_once, parse_schemas);
    schema = schemas[tool - registry];
    if (!schema)
        return keel_error_set(err, KEEL_ENOMEM, tool->name, "cannot read the tool's schema");
    props = json_object_get(schema, "properties");
    required = json_object_get(schema, "required");
    if (!json_is_object(args)) {
        rc = keel_error_set(err, KEEL_EINVAL, "args", "must be an object, not %s",
                            keel_json_type_name(args));
        goto out;
    }
    json_object_foreach((json_t *)args, key, v) {
        char field[KEEL_JSON_PATH_MAX];
        json_t *prop = json_object_get(props, key);

        keel_json_path_key(field, sizeof(field), "args", key);
        if (!prop) {
            rc = keel_error_set(err, KEEL_EINVAL, field, "is not an argument of %s", tool->name);
            goto out;
        }
        if ((rc = check_value(prop, v, field, err)))
            goto out;
    }
    json_array_foreach(required, i, v) {
        char field[KEEL_JSON_PATH_MAX];

        keel_json_path_key(field, sizeof(field), "args", json_string_value(v));
        if (!json_object_get(args, json_string_value(v))) {
            rc = keel_error_set(err, KEEL_EINVAL, field, "is required");
            goto out;
        }
    }
out:
    return rc;
}

int tools_run(const struct tool_def *tool, const struct tool_env *env, const json_t *args,
              json_t **result, struct keel_error *err)
{
    int rc = tools_check_args(tool, args, err);

    return rc ? rc : tool->run(env, args, result, err);
}

/* ---- coverage and bands ---------------------------------------------------- */

/* Lower-cased ASCII word runs; other bytes separate words (UTF-8 words
 * still match exactly through store_query_words on the query side). */
static size_t next_word(const char **p, char *out, size_t cap)
{
    const unsigned char *s = (const unsigned char *)*p;
    size_t n = 0;

    while (*s && !((*s | 32) >= 'a' && (*s | 32) <= 'z') && !(*s >= '0' && *s <= '9') && *s < 0x80)
        s++;
    while (*s && (((*s | 32) >= 'a' && (*s | 32) <= 'z') || (*s >= '0' && *s <= '9') || *s >= 0x80)) {
        if (n + 1 < cap)
            out[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
        s++;
    }
    out[n] = '\0';
    *p = (const char *)s;
    return n;
}

static int words_match(const char *q, size_t lq, const char *w, size_t lw)
{
    size_t common = 0, shorter = lq < lw ? lq : lw, need;

    if (lq == lw && !memcmp(q, w, lq))
        return 1;
    if (shorter < 4)
        return 0;
    while (common < shorter && q[common] == w[common])
        common++;
    need = shorter > 6 ? shorter - 2 : 4;
    return common >= need;
}

static int is_stopword(const struct pipeline_config *cfg, const char *w, size_t n)
{
    uint32_t id = cfg ? lexicon_word(&cfg->lex, w, n) : 0;

    return id && (cfg->lex.word_classes[id] >> CCAT_STOPWORD & 1);
}

double tools_coverage(const struct pipeline_config *cfg, const char *query, const char *text)
{
    char buf[STORE_QUERY_WORDS * 65 + 1], word[65];
    const char *words[STORE_QUERY_WORDS], *content[STORE_QUERY_WORDS];
    size_t n = store_query_words(query, buf, sizeof(buf), words, STORE_QUERY_WORDS), n_content = 0;
    int found[STORE_QUERY_WORDS] = {0};
    size_t n_found = 0, len;

    for (size_t i = 0; i < n; i++) {
        int dup = 0;
        if (is_stopword(cfg, words[i], strlen(words[i])))
            continue;
        for (size_t k = 0; k < n_content; k++)
            dup |= !strcmp(content[k], words[i]);
        if (!dup)
            content[n_content++] = words[i];
    }
    if (!n_content)
        return 0.0;
    for (const char *p = text; (len = next_word(&p, word, sizeof(word))) > 0 && n_found < n_content;)
        for (size_t k = 0; k < n_content; k++)
            if (!found[k] && words_match(content[k], strlen(content[k]), word, len)) {
                found[k] = 1;
                n_found++;
            }
    return (double)n_found / (double)n_content;
}

/* The query's content words, space-separated (the whole query when it
 * has none), so a store's OR search is not flooded by "and" or "how". */
static void content_query(const struct pipeline_config *cfg, const char *query, char *out,
                          size_t cap)
{
    char buf[STORE_QUERY_WORDS * 65 + 1];
    const char *words[STORE_QUERY_WORDS];
    size_t n = store_query_words(query, buf, sizeof(buf), words, STORE_QUERY_WORDS), len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!is_stopword(cfg, words[i], strlen(words[i])) && len + strlen(words[i]) + 2 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", words[i]);
    if (!len)
        snprintf(out, cap, "%s", query);
}

int tools_content_words(const struct pipeline_config *cfg, const char *text)
{
    char buf[STORE_QUERY_WORDS * 65 + 1];
    const char *words[STORE_QUERY_WORDS];
    size_t n = store_query_words(text, buf, sizeof(buf), words, STORE_QUERY_WORDS);
    int count = 0;

    for (size_t i = 0; i < n; i++)
        count += !is_stopword(cfg, words[i], strlen(words[i]));
    return count;
}

const char *tools_band(const struct pipeline_config *cfg, double confidence)
{
    if (confidence >= cfg->confident_at)
        return "confident";
    if (confidence >= cfg->abstain_below)
        return "caution";
    return "abstain";
}

/* ---- search_papers ------------------------------------------------------- */

static json_t *paper_json(const struct store_paper *p, double score)
{
    return json_pack("{s:s,s:s,s:s?,s:o,s:s?,s:O?,s:s?,s:s?,s:s?,s:b,s:f}", "id", p->id, "title",
                     p->title, "abstract", p->abstract, "year",
                     p->year ? json_integer(p->year) : json_null(), "venue", p->venue, "authors",
                     p->authors, "doi", p->doi, "url", p->url, "pdf_url", p->pdf_url,
                     "is_open_access", p->is_open_access, "score", score);
}

/* Papers that match fewer than this share of the query's content words
 * in title and abstract are not results: an OR search finds them, but
 * they are not about the query. */
static int relevant(const struct tool_env *env, const char *query, const struct store_paper *p)
{
    char text[4096];

    snprintf(text, sizeof(text), "%s %s", p->title, p->abstract ? p->abstract : "");
    return tools_coverage(env->cfg, query, text) >= env->cfg->abstain_below;
}

/* Adds the relevant papers of `hits` not already in `papers`, up to
 * `count`. Returns nonzero when out of memory. */
static int add_papers(const struct tool_env *env, const char *query, const struct paper_hits *hits,
                      int count, json_t *papers)
{
    for (size_t i = 0; i < hits->n && (int)json_array_size(papers) < count; i++) {
        const struct store_paper *p = &hits->items[i].paper;
        int seen = 0;

        for (size_t k = 0; k < json_array_size(papers) && !seen; k++)
            seen = !strcmp(json_string_value(json_object_get(json_array_get(papers, k), "id")),
                           p->id);
        if (!seen && relevant(env, query, p) &&
            json_array_append_new(papers, paper_json(p, hits->items[i].score)))
            return KEEL_ENOMEM;
    }
    return KEEL_OK;
}

/* Papers holding every content word first (an AND search ranks a few
 * hundred rows, not every row with a common word), then, when fewer than
 * `count` pass the relevance floor, papers holding any of them. */
static int run_search_papers(const struct tool_env *env, const json_t *args, json_t **result,
                             struct keel_error *err)
{
    const char *query = json_string_value(json_object_get(args, "query"));
    char words[TOOL_QUERY_MAX * 2];
    struct paper_query q = {
        .text = words,
        .match = STORE_MATCH_ALL,
        .year_from = (int)json_integer_value(json_object_get(args, "year_from")),
        .year_to = (int)json_integer_value(json_object_get(args, "year_to")),
        .open_access_only = json_is_true(json_object_get(args, "open_access_only")),
        .limit = json_object_get(args, "count")
                     ? (int)json_integer_value(json_object_get(args, "count")) : 5,
    };
    json_t *papers = json_array();
    int rc = KEEL_OK, count = q.limit;

    if (q.year_from && q.year_to && q.year_from > q.year_to)
        rc = keel_error_set(err, KEEL_EINVAL, "args.year_from", "must not be after year_to");
    content_query(env->cfg, query, words, sizeof(words));
    q.limit = count * 3 < STORE_LIMIT_MAX ? count * 3 : STORE_LIMIT_MAX;   /* room for the floor */
    for (int pass = 0; !rc && pass < 2 && papers && (int)json_array_size(papers) < count; pass++) {
        struct paper_hits hits = {0};

        q.match = pass ? STORE_MATCH_ANY : STORE_MATCH_ALL;
        if (!(rc = store_search_papers(env->store, &q, &hits, err)) &&
            add_papers(env, query, &hits, count, papers))
            rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
        paper_hits_release(&hits);
    }
    if (!rc && (!papers || !(*result = json_pack("{s:O,s:i}", "papers", papers, "count",
                                                 (int)json_array_size(papers)))))
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
    json_decref(papers);
    return rc;
}

/* ---- rag_search ---------------------------------------------------------- */

/* A passage's confidence is the query's coverage by its title, section
 * and text together: a heading names what the text is about. */
static json_t *passage_json(const struct pipeline_config *cfg, const char *query,
                            const struct chunk_hit *h)
{
    struct keel_buf all;
    double confidence = 0;

    keel_buf_init(&all, 3 * (size_t)STORE_TEXT_MAX + 4);
    if (!keel_buf_adds(&all, h->title ? h->title : "") && !keel_buf_addc(&all, ' ') &&
        !keel_buf_adds(&all, h->section ? h->section : "") && !keel_buf_addc(&all, ' ') &&
        !keel_buf_adds(&all, h->text))
        confidence = tools_coverage(cfg, query, all.data);
    keel_buf_release(&all);
    return json_pack("{s:s,s:s?,s:s?,s:s?,s:s,s:i,s:f,s:f,s:s}", "document_id", h->document_id,
                     "title", h->title, "source", h->source, "section", h->section, "text",
                     h->text, "ordinal", h->ordinal, "score", h->score, "confidence", confidence,
                     "band", tools_band(cfg, confidence));
}

static int web_fallback(const struct tool_env *env, const char *query, int limit, json_t *out,
                        struct keel_error *err)
{
    json_t *results = NULL;
    int rc;

    json_object_set_new(out, "web_fallback", json_string(env->web ? env->web->name : "none"));
    if (!env->web)
        return KEEL_OK;
    if ((rc = env->web->search(env->web->ctx, query, limit, &results, err)))
        return rc;
    json_object_set_new(out, "web", json_is_array(results) ? results : json_array());
    if (!json_is_array(results))
        json_decref(results);
    return KEEL_OK;
}

static int run_rag_search(const struct tool_env *env, const json_t *args, json_t **result,
                          struct keel_error *err)
{
    const char *query = json_string_value(json_object_get(args, "query"));
    const char *focus = json_string_value(json_object_get(args, "focus"));
    json_t *k = json_object_get(args, "top_k"), *passages, *out;
    int top_k = k ? (int)json_integer_value(k) : (env->cfg ? env->cfg->top_k : 5);
    struct chunk_hits hits = {0};
    char words[TOOL_QUERY_MAX * 2];
    double best = 0;
    int rc;

    /* Chunks holding every content word; only when none does, any word
     * (ranking every chunk that says "health" costs milliseconds). */
    content_query(env->cfg, query, words, sizeof(words));
    if ((rc = store_search_chunks_all(env->store, words, top_k, &hits, err)))
        return rc;
    if (!hits.n && (rc = store_search_chunks(env->store, words, top_k, &hits, err)))
        return rc;
    passages = json_array();
    for (size_t i = 0; passages && i < hits.n; i++) {
        json_t *p = passage_json(env->cfg, focus ? focus : query, &hits.items[i]);
        double c = json_number_value(json_object_get(p, "confidence"));
        if (!p || json_array_append_new(passages, p)) {
            json_decref(passages);
            passages = NULL;
            break;
        }
        best = c > best ? c : best;
    }
    chunk_hits_release(&hits);
    out = passages ? json_pack("{s:o,s:f,s:s}", "passages", passages, "best_confidence", best,
                               "band", tools_band(env->cfg, best))
                   : NULL;
    if (!out)
        return keel_error_set(err, KEEL_ENOMEM, "rag_search", "out of memory");
    if (best < env->cfg->abstain_below && (rc = web_fallback(env, query, top_k, out, err))) {
        json_decref(out);
        return rc;
    }
    *result = out;
    return KEEL_OK;
}

/* ---- the registry ---------------------------------------------------------- */

static const struct tool_def registry[REGISTRY_SIZE] = {
    {"search_papers", "Search the local paper library with year and open-access filters.",
     "{\"type\":\"object\",\"required\":[\"query\"],\"properties\":{"
     "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":512},"
     "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50},"
     "\"year_from\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9999},"
     "\"year_to\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9999},"
     "\"open_access_only\":{\"type\":\"boolean\"}}}",
     PACK_READ, run_search_papers},
    {"rag_search", "Search the ingested document corpus; passages carry a confidence band.",
     "{\"type\":\"object\",\"required\":[\"query\"],\"properties\":{"
     "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":512},"
     "\"top_k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50},"
     "\"focus\":{\"type\":\"string\",\"maxLength\":512}}}",
     PACK_READ, run_rag_search},
};

const struct tool_def *tools_find(const char *name)
{
    for (size_t i = 0; i < REGISTRY_SIZE; i++)
        if (!strcmp(registry[i].name, name))
            return &registry[i];
    return NULL;
}
