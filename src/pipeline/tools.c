/*
 * tools.c — the tool registry and its schema check (see tools.h).
 */
#include "pipeline/tools.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/json.h"
#include "pack/pack.h"

#define REGISTRY_SIZE 6

/* ---- argument check ---------------------------------------------------------- */

static int check_value(const struct tool_arg *a, const json_t *v, const char *field,
                       struct keel_error *err)
{
    switch (a->type) {
    case ARG_STRING:
        if (!json_is_string(v))
            return keel_error_set(err, KEEL_EINVAL, field, "must be a string, not %s",
                                  keel_json_type_name(v));
        if (json_string_length(v) > (size_t)a->max)
            return keel_error_set(err, KEEL_EINVAL, field, "must be at most %lld bytes", a->max);
        if (json_string_length(v) < (size_t)a->min)
            return keel_error_set(err, KEEL_EINVAL, field, "must not be empty");
        break;
    case ARG_INTEGER:
        if (!json_is_integer(v))
            return keel_error_set(err, KEEL_EINVAL, field, "must be an integer, not %s",
                                  keel_json_type_name(v));
        if (json_integer_value(v) < a->min || json_integer_value(v) > a->max)
            return keel_error_set(err, KEEL_EINVAL, field, "must be from %lld to %lld", a->min,
                                  a->max);
        break;
    case ARG_BOOLEAN:
        if (!json_is_boolean(v))
            return keel_error_set(err, KEEL_EINVAL, field, "must be true or false, not %s",
                                  keel_json_type_name(v));
        break;
    case ARG_OBJECT:
        if (!json_is_object(v))
            return keel_error_set(err, KEEL_EINVAL, field, "must be a JSON object, not %s",
                                  keel_json_type_name(v));
        break;
    }
    return KEEL_OK;
}

static const struct tool_arg *find_arg(const struct tool_def *tool, const char *name)
{
    for (const struct tool_arg *a = tool->args; a->name; a++)
        if (!strcmp(a->name, name))
            return a;
    return NULL;
}

int tools_check_args(const struct tool_def *tool, const json_t *args, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    const char *key;
    json_t *v;
    int rc;

    if (!json_is_object(args))
        return keel_error_set(err, KEEL_EINVAL, "args", "must be an object, not %s",
                              keel_json_type_name(args));
    json_object_foreach((json_t *)args, key, v) {
        const struct tool_arg *a = find_arg(tool, key);

        keel_json_path_key(field, sizeof(field), "args", key);
        if (!a)
            return keel_error_set(err, KEEL_EINVAL, field, "is not an argument of %s", tool->name);
        if ((rc = check_value(a, v, field, err)))
            return rc;
    }
    for (const struct tool_arg *a = tool->args; a->name; a++) {
        keel_json_path_key(field, sizeof(field), "args", a->name);
        if (a->required && !json_object_get(args, a->name))
            return keel_error_set(err, KEEL_EINVAL, field, "is required");
    }
    return KEEL_OK;
}

int tools_run(const struct tool_def *tool, const struct tool_env *env, const json_t *args,
              json_t **result, struct keel_error *err)
{
    int rc = tools_check_args(tool, args, err);

    return rc ? rc : tool->run(env, args, result, err);
}

/* ---- coverage and bands ---------------------------------------------------- */

/* A word's bytes are ASCII letters and digits and every byte of a UTF-8
 * character (>= 0x80); word_fold[c] is the byte as a word holds it
 * (ASCII lower case), 0 for one that separates words (NUL too). A table
 * read per byte: coverage scans every sentence of every passage. */
#define FOLD(c)                                                                   \
    ((c) >= 'A' && (c) <= 'Z' ? (unsigned char)((c) + 32)                         \
     : ((c) >= 'a' && (c) <= 'z') || ((c) >= '0' && (c) <= '9') || (c) >= 0x80 ? (c) \
                                                                               : 0)
#define FOLD4(c) FOLD(c), FOLD((c) + 1), FOLD((c) + 2), FOLD((c) + 3)
#define FOLD16(c) FOLD4(c), FOLD4((c) + 4), FOLD4((c) + 8), FOLD4((c) + 12)
static const unsigned char word_fold[256] = {
    FOLD16(0x00), FOLD16(0x10), FOLD16(0x20), FOLD16(0x30), FOLD16(0x40), FOLD16(0x50),
    FOLD16(0x60), FOLD16(0x70), FOLD16(0x80), FOLD16(0x90), FOLD16(0xa0), FOLD16(0xb0),
    FOLD16(0xc0), FOLD16(0xd0), FOLD16(0xe0), FOLD16(0xf0),
};
#undef FOLD16
#undef FOLD4
#undef FOLD

/* Lower-cased ASCII word runs; other bytes separate words (UTF-8 words
 * still match exactly through store_query_words on the query side). A
 * word longer than cap - 1 bytes is cut there. */
static size_t next_word(const char **p, char *out, size_t cap)
{
    const unsigned char *s = (const unsigned char *)*p;
    size_t n = 0;

    while (*s && !word_fold[*s])
        s++;
    for (; word_fold[*s]; s++)
        if (n + 1 < cap)
            out[n++] = (char)word_fold[*s];
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

void tools_words_init(struct tool_words *q, const struct pipeline_config *cfg, const char *text)
{
    const char *words[STORE_QUERY_WORDS];
    size_t n = store_query_words(text, q->buf, sizeof(q->buf), words, STORE_QUERY_WORDS);

    q->n = 0;
    q->total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(words[i]);
        int dup = 0;

        if (is_stopword(cfg, words[i], len))
            continue;
        q->total++;
        for (size_t k = 0; k < q->n && !dup; k++)
            dup = q->len[k] == len && !memcmp(q->word[k], words[i], len);
        if (!dup) {
            q->word[q->n] = words[i];
            q->len[q->n++] = len;
        }
    }
}

double tools_coverage_of(const struct tool_words *q, const char *text)
{
    int found[STORE_QUERY_WORDS] = {0};
    uint64_t starts[4] = {0};   /* the query words' first bytes, a bit each */
    size_t n_found = 0, len;
    char word[65];

    if (!q->n)
        return 0.0;
    for (size_t k = 0; k < q->n; k++) {
        unsigned char c = (unsigned char)q->word[k][0];
        starts[c >> 6] |= 1ull << (c & 63);
    }
    for (const char *p = text; n_found < q->n;) {
        const unsigned char *s = (const unsigned char *)p;
        while (*s && !word_fold[*s])
            s++;
        /* Words match only with the same first byte (words_match: equal,
         * or a common prefix of 4 bytes or more): a word no query word
         * starts like is passed over unread. */
        if (*s && !(starts[word_fold[*s] >> 6] >> (word_fold[*s] & 63) & 1)) {
            while (word_fold[*s])
                s++;
            p = (const char *)s;
            continue;
        }
        p = (const char *)s;
        if (!(len = next_word(&p, word, sizeof(word))))
            break;
        for (size_t k = 0; k < q->n; k++)
            if (!found[k] && words_match(q->word[k], q->len[k], word, len)) {
                found[k] = 1;
                n_found++;
            }
    }
    return (double)n_found / (double)q->n;
}

double tools_coverage(const struct pipeline_config *cfg, const char *query, const char *text)
{
    struct tool_words q;

    tools_words_init(&q, cfg, query);
    return tools_coverage_of(&q, text);
}

/* The query's content words, space-separated (the whole query when it
 * has none), so a store's search is not flooded by "and" or "how". */
static void content_query(const struct pipeline_config *cfg, const char *query, char *out,
                          size_t cap)
{
    struct tool_words q;
    size_t len = 0;

    tools_words_init(&q, cfg, query);
    out[0] = '\0';
    for (size_t i = 0; i < q.n; i++)
        if (len + q.len[i] + 2 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", q.word[i]);
    if (!len)
        snprintf(out, cap, "%s", query);
}

int tools_content_words(const struct pipeline_config *cfg, const char *text)
{
    struct tool_words q;

    tools_words_init(&q, cfg, text);
    return (int)q.total;
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

/* A paper for the tool result. Its texts are set with keel_json_set_text:
 * jansson's own UTF-8 check of every abstract was ~5% of a turn. */
static json_t *paper_json(const struct store_paper *p, double score)
{
    json_t *o = json_object();

    if (!o || keel_json_set_text(o, "id", p->id) || keel_json_set_text(o, "title", p->title) ||
        keel_json_set_text(o, "abstract", p->abstract) ||
        json_object_set_new_nocheck(o, "year", p->year ? json_integer(p->year) : json_null()) ||
        keel_json_set_text(o, "venue", p->venue) ||
        json_object_set_nocheck(o, "authors", p->authors ? p->authors : json_null()) ||
        keel_json_set_text(o, "doi", p->doi) || keel_json_set_text(o, "url", p->url) ||
        keel_json_set_text(o, "pdf_url", p->pdf_url) ||
        json_object_set_new_nocheck(o, "is_open_access", json_boolean(p->is_open_access)) ||
        json_object_set_new_nocheck(o, "score", json_real(score)) || !p->id || !p->title) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Papers that match fewer than this share of the query's content words
 * in title and abstract are not results: an OR search finds them, but
 * they are not about the query. */
static int relevant(const struct tool_env *env, const struct tool_words *query,
                    const struct store_paper *p)
{
    char text[4096];

    snprintf(text, sizeof(text), "%s %s", p->title, p->abstract ? p->abstract : "");
    return tools_coverage_of(query, text) >= env->cfg->abstain_below;
}

/* What the search's accept callback needs to pick a paper. */
struct paper_pick {
    const struct tool_env *env;
    const struct tool_words *query;
    const json_t *papers;     /* those an earlier pass found */
};

/* The store's accept callback: a relevant paper not found already. */
static int pick_paper(void *ctx, const struct store_paper *p)
{
    const struct paper_pick *pick = ctx;

    for (size_t k = 0; k < json_array_size(pick->papers); k++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(pick->papers, k), "id")),
                    p->id))
            return 0;
    return relevant(pick->env, pick->query, p);
}

/* Adds the papers of `hits` (picked by pick_paper), up to `count`.
 * Returns nonzero when out of memory. */
static int add_papers(const struct paper_hits *hits, int count, json_t *papers)
{
    for (size_t i = 0; i < hits->n && (int)json_array_size(papers) < count; i++)
        if (json_array_append_new(papers, paper_json(&hits->items[i].paper, hits->items[i].score)))
            return KEEL_ENOMEM;
    return KEEL_OK;
}

/* ---- remote providers ------------------------------------------------------ */

static int take_string(char **dst, const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));

    *dst = NULL;
    return !s || (*dst = keel_strdup(s)) ? KEEL_OK : KEEL_ENOMEM;
}

/* The library's papers (JSON, in rank order) as the local provider's list. */
static int local_list(const json_t *papers, struct provider_papers *out)
{
    json_t *paper, *authors;
    size_t i;

    memset(out, 0, sizeof(*out));
    json_array_foreach(papers, i, paper) {
        struct provider_paper *p = provider_papers_push(out);
        if (!p || take_string(&p->title, paper, "title") ||
            take_string(&p->abstract, paper, "abstract") ||
            take_string(&p->venue, paper, "venue") || take_string(&p->doi, paper, "doi") ||
            take_string(&p->url, paper, "url") || take_string(&p->pdf_url, paper, "pdf_url") ||
            take_string(&p->ids[PROVIDER_LOCAL], paper, "id"))
            return KEEL_ENOMEM;
        authors = json_object_get(paper, "authors");
        if (!(p->authors = json_is_array(authors) ? json_deep_copy(authors) : json_array()))
            return KEEL_ENOMEM;
        p->year = (int)json_integer_value(json_object_get(paper, "year"));
        p->is_open_access = json_is_true(json_object_get(paper, "is_open_access"));
        p->providers = 1u << PROVIDER_LOCAL;
    }
    return KEEL_OK;
}

/* A merged paper for the tool result: the record plus an "id" (the
 * library's, else the DOI, else a provider's). */
static json_t *merged_json(const struct provider_paper *p)
{
    json_t *out = provider_paper_json(p);
    const char *id = p->ids[PROVIDER_LOCAL];
    char doi[300];

    if (!id && p->doi) {
        snprintf(doi, sizeof(doi), "doi:%s", p->doi);
        id = doi;
    }
    for (int i = 0; !id && i < PROVIDER_COUNT; i++)
        id = p->ids[i];
    if (out && json_object_set_new(out, "id", json_string(id ? id : p->title))) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Asks the remote providers and merges their papers with the library's
 * (`papers`, replaced by the merged list). Adds the providers' reports to
 * `result`. A provider's failure is in its report, never an error. */
static int with_providers(const struct tool_env *env, const struct paper_query *q, int count,
                          const char *query, json_t **papers, json_t *result,
                          struct keel_error *err)
{
    struct paper_request req = {query, q->year_from, q->year_to, q->open_access_only,
                                count < PROVIDER_LIMIT_MAX ? count : PROVIDER_LIMIT_MAX};
    struct provider_papers local = {0}, merged = {0};
    struct provider_report reports[PROVIDER_COUNT];
    json_t *list = json_array(), *story = json_array();
    int rc;

    if (!list || !story || local_list(*papers, &local)) {
        provider_papers_release(&local);
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
        goto out;
    }
    if ((rc = providers_search(env->providers, &req, &local, &merged, reports, err)))
        goto out;
    for (size_t i = 0; i < merged.n && !rc; i++)
        if (json_array_append_new(list, merged_json(&merged.items[i])))
            rc = KEEL_ENOMEM;
    for (int i = 0; i < PROVIDER_COUNT && !rc; i++)
        if ((i == PROVIDER_LOCAL || reports[i].status != PROVIDER_OFF) &&
            json_array_append_new(story, provider_report_json((enum provider_id)i, &reports[i])))
            rc = KEEL_ENOMEM;
    if (!rc && json_object_set(result, "providers", story))
        rc = KEEL_ENOMEM;
    provider_reports_release(reports);
    provider_papers_release(&merged);
    if (rc) {
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
        goto out;
    }
    json_decref(*papers);
    *papers = list;
    list = NULL;
out:
    json_decref(list);
    json_decref(story);
    return rc;
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
    struct tool_words words_q;
    struct paper_pick pick = {env, &words_q, papers};
    int rc = KEEL_OK, count = q.limit;

    *result = NULL;
    if (q.year_from && q.year_to && q.year_from > q.year_to)
        rc = keel_error_set(err, KEEL_EINVAL, "args.year_from", "must not be after year_to");
    content_query(env->cfg, query, words, sizeof(words));
    tools_words_init(&words_q, env->cfg, query);
    /* Three times `count` ranked, for the ones under the relevance floor;
     * the store reads rows only until `count` are picked. */
    q.limit = count * 3 < STORE_LIMIT_MAX ? count * 3 : STORE_LIMIT_MAX;
    q.accept = pick_paper;
    q.accept_ctx = &pick;
    for (int pass = 0; !rc && pass < 2 && papers && (int)json_array_size(papers) < count; pass++) {
        struct paper_hits hits = {0};

        q.match = pass ? STORE_MATCH_ANY : STORE_MATCH_ALL;
        q.want = count - (int)json_array_size(papers);
        if (!(rc = store_search_papers(env->store, &q, &hits, err)) &&
            add_papers(&hits, count, papers))
            rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
        paper_hits_release(&hits);
    }
    if (!rc && !papers)
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
    if (!rc && !(*result = json_object()))
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
    if (!rc && env->providers && providers_any(env->providers))
        rc = with_providers(env, &q, count, query, &papers, *result, err);
    if (!rc && (json_object_set(*result, "papers", papers) ||
                json_object_set_new(*result, "count", json_integer((json_int_t)json_array_size(papers)))))
        rc = keel_error_set(err, KEEL_ENOMEM, "search_papers", "out of memory");
    if (rc && *result) {
        json_decref(*result);
        *result = NULL;
    }
    json_decref(papers);
    return rc;
}

/* ---- rag_search ---------------------------------------------------------- */

/* A passage's confidence is the query's coverage by its title, section
 * and text together: a heading names what the text is about. */
static json_t *passage_json(const struct pipeline_config *cfg, const struct tool_words *query,
                            const struct chunk_hit *h)
{
    struct keel_buf all;
    double confidence = 0;

    keel_buf_init(&all, 3 * (size_t)STORE_TEXT_MAX + 4);
    if (!keel_buf_adds(&all, h->title ? h->title : "") && !keel_buf_addc(&all, ' ') &&
        !keel_buf_adds(&all, h->section ? h->section : "") && !keel_buf_addc(&all, ' ') &&
        !keel_buf_adds(&all, h->text))
        confidence = tools_coverage_of(query, all.data);
    keel_buf_release(&all);
    json_t *o = json_object();
    if (!o || !h->document_id || !h->text ||
        keel_json_set_text(o, "document_id", h->document_id) ||
        keel_json_set_text(o, "title", h->title) || keel_json_set_text(o, "source", h->source) ||
        keel_json_set_text(o, "section", h->section) || keel_json_set_text(o, "text", h->text) ||
        json_object_set_new_nocheck(o, "ordinal", json_integer(h->ordinal)) ||
        json_object_set_new_nocheck(o, "score", json_real(h->score)) ||
        json_object_set_new_nocheck(o, "confidence", json_real(confidence)) ||
        json_object_set_new_nocheck(o, "band", json_string(tools_band(cfg, confidence)))) {
        json_decref(o);
        return NULL;
    }
    return o;
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
    struct tool_words measure;
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
    tools_words_init(&measure, env->cfg, focus ? focus : query);
    for (size_t i = 0; passages && i < hits.n; i++) {
        json_t *p = passage_json(env->cfg, &measure, &hits.items[i]);
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

/* Saves one paper to the local library (a write: only roles with write
 * access run it). The paper is stored at once, outside the turn's
 * transaction, like any tool with an effect outside the conversation. */
static int run_add_to_library(const struct tool_env *env, const json_t *args, json_t **result,
                              struct keel_error *err)
{
    struct store_paper paper = {
        .title = (char *)json_string_value(json_object_get(args, "title")),
        .abstract = (char *)json_string_value(json_object_get(args, "abstract")),
        .year = (int)json_integer_value(json_object_get(args, "year")),
        .venue = (char *)json_string_value(json_object_get(args, "venue")),
        .doi = (char *)json_string_value(json_object_get(args, "doi")),
        .url = (char *)json_string_value(json_object_get(args, "url")),
        .source = (char *)"add_to_library",
    };
    static const char *const outcomes[] = {"added", "updated", "unchanged"};
    enum store_outcome outcome;
    char id[256];
    int rc;

    store_paper_id(&paper, id, sizeof(id));
    paper.id = id;
    if ((rc = store_put_paper(env->store, &paper, &outcome, err)))
        return rc;
    if (!(*result = json_pack("{s:s, s:s}", "id", id, "outcome", outcomes[outcome])))
        return keel_error_set(err, KEEL_ENOMEM, "add_to_library", "out of memory");
    return KEEL_OK;
}

/* ---- the registry ---------------------------------------------------------- */

static const struct tool_arg search_papers_args[] = {
    {"query", ARG_STRING, 1, 1, TOOL_QUERY_MAX, "what to search for"},
    {"count", ARG_INTEGER, 0, 1, 50, "how many papers"},
    {"year_from", ARG_INTEGER, 0, 0, 9999, "earliest publication year"},
    {"year_to", ARG_INTEGER, 0, 0, 9999, "latest publication year"},
    {"open_access_only", ARG_BOOLEAN, 0, 0, 0, "only open-access papers"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg rag_search_args[] = {
    {"query", ARG_STRING, 1, 1, TOOL_QUERY_MAX, "the question, with the plan's name"},
    {"top_k", ARG_INTEGER, 0, 1, 50, "how many passages"},
    {"focus", ARG_STRING, 0, 0, TOOL_QUERY_MAX, "the words a passage must cover to answer"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg add_to_library_args[] = {
    {"title", ARG_STRING, 1, 1, 1000, "the paper's title"},
    {"year", ARG_INTEGER, 0, 0, 9999, "publication year"},
    {"venue", ARG_STRING, 0, 0, 500, "journal or conference"},
    {"doi", ARG_STRING, 0, 0, 300, "DOI, e.g. 10.1000/xyz"},
    {"url", ARG_STRING, 0, 0, 2000, "a link to the paper"},
    {"abstract", ARG_STRING, 0, 0, 20000, "the abstract"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg update_scenario_args[] = {
    {"patch", ARG_OBJECT, 1, 0, 0,
     "keys to set in the active scenario; null removes a key; the pack's deep keys "
     "(household) are merged one level deeper"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg get_scenario_args[] = {
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_arg uk_income_tax_args[] = {
    {"query", ARG_STRING, 0, 0, TOOL_QUERY_MAX, "the question; an income after \"at\" is taxed too"},
    {"income", ARG_INTEGER, 0, 0, 100000000, "an income in pounds to tax besides the earners'"},
    {"country", ARG_STRING, 0, 1, 32, "scotland or rest_of_uk (default: the scenario's)"},
    {"tax_year", ARG_STRING, 0, 7, 7, "like 2024-25 (default: the scenario's)"},
    {NULL, ARG_STRING, 0, 0, 0, NULL},
};

static const struct tool_def registry[REGISTRY_SIZE] = {
    {"search_papers", "Search the local paper library with year and open-access filters.",
     search_papers_args, PACK_READ, run_search_papers},
    {"rag_search", "Search the ingested document corpus; passages carry a confidence band.",
     rag_search_args, PACK_READ, run_rag_search},
    {"add_to_library", "Save a paper to the project's library.", add_to_library_args, PACK_WRITE,
     run_add_to_library},
    {"update_scenario", "Change the conversation's active scenario with a patch (a JSON object).",
     update_scenario_args, PACK_WRITE, tool_update_scenario},
    {"get_scenario", "Read the conversation's active scenario.", get_scenario_args, PACK_READ,
     tool_get_scenario},
    {"uk_income_tax", "UK income tax, net income and marginal rate for the scenario's earners "
     "(Scottish and rest-of-UK bands, personal allowance taper).",
     uk_income_tax_args, PACK_READ, tool_uk_income_tax},
};

const struct tool_def *tools_find(const char *name)
{
    size_t n;
    const struct tool_def *more = tools_assistant(&n);

    for (size_t i = 0; i < REGISTRY_SIZE; i++)
        if (!strcmp(registry[i].name, name))
            return &registry[i];
    for (size_t i = 0; i < n; i++)
        if (!strcmp(more[i].name, name))
            return &more[i];
    return NULL;
}

json_t *tools_schema_json(const struct tool_def *tool)
{
    static const char *const types[] = {"string", "integer", "boolean", "object"};
    json_t *props = json_object(), *required = json_array();

    for (const struct tool_arg *a = tool->args; props && required && a->name; a++) {
        json_t *p = json_pack("{s:s, s:s}", "type", types[a->type], "description",
                              a->description);
        if (p && a->type == ARG_INTEGER) {
            json_object_set_new(p, "minimum", json_integer(a->min));
            json_object_set_new(p, "maximum", json_integer(a->max));
        } else if (p && a->type == ARG_STRING) {
            json_object_set_new(p, "minLength", json_integer(a->min));
            json_object_set_new(p, "maxLength", json_integer(a->max));
        }
        if (!p || json_object_set_new(props, a->name, p) ||
            (a->required && json_array_append_new(required, json_string(a->name)))) {
            json_decref(props);
            props = NULL;
        }
    }
    if (!props || !required) {
        json_decref(props);
        json_decref(required);
        return NULL;
    }
    return json_pack("{s:s, s:{s:s, s:s, s:{s:s, s:o, s:o, s:b}}}", "type", "function",
                     "function", "name", tool->name, "description", tool->description,
                     "parameters", "type", "object", "properties", props, "required", required,
                     "additionalProperties", 0);
}
