/*
 * admit.c — memory admission (seed 003): candidates, the judge, and the
 * execution of its decision.
 *
 *   no active run with similarity ≥ min_similarity   ADD (deterministic)
 *   else the model judge, when configured: its JSON {decision,
 *     target_run_id, reason}, validated; anything unusable → ADD with
 *     the reason
 *   else the rules, over the candidates best first:
 *     same task, same outcome, same summary, no new reference   NOT
 *     same task, a success after a failure                      REPLACE
 *     same task, two successes, other references or approach   MERGE
 *     otherwise                                                 ADD
 *
 * "Same task": the tasks are equal once case, spacing and trailing
 * punctuation are set aside, or the runs' similarity is at least
 * same_task_similarity. The index follows the store through
 * store_memory_sync before every decision and search, so other
 * processes' decisions count too.
 */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/id.h"
#include "core/json.h"
#include "core/utf8.h"
#include "llm/llm.h"
#include "memory/memory.h"
#include "store/store.h"

#define JUDGE_REPLY_MAX (16u << 10)

struct memory {
    struct store *store;
    struct memory_conf conf;
    struct llm *judge;
    struct memory_index *index;  /* NULL until the dimension is known (a model embedder) */
    int dim;                     /* of the embedder's vectors; 0: not known yet */
    char embedder[200];          /* MEMORY_EMBEDDER, or "openai:" and the model's name */
    int64_t seq;                 /* the last store decision the index has seen */
    int opened;                  /* the store was replayed once */
};

void memory_conf_default(struct memory_conf *conf)
{
    conf->min_similarity = 0.7;
    conf->same_task_similarity = 0.95;
    conf->embedder = NULL;
    memory_index_conf_default(&conf->index);
}

/* The index of `dim`-dimensional vectors, made with the first one.
 * Until memory_open has replayed the store it builds no graph (then
 * the builders start with every run at once). */
static int index_for(struct memory *m, int dim)
{
    if (!m->index) {
        struct memory_index_conf c = m->conf.index;
        if (!m->opened)
            c.approximate_from = 0;
        if (!(m->index = memory_index_new(dim)))
            return KEEL_ENOMEM;
        if (memory_index_configure(m->index, &c)) {
            memory_index_free(m->index);
            m->index = NULL;
            return KEEL_EINVAL;
        }
        m->dim = dim;
    }
    return dim == m->dim ? KEEL_OK : KEEL_EINVAL;
}

static int follow(void *ctx, const char *id, const char *owner, const char *embedder, int dim,
                  const float *v)
{
    struct memory *m = ctx;

    if (!v) {
        if (m->index)
            memory_index_remove(m->index, id);
        return KEEL_OK;
    }
    /* Another embedder's vectors, or another dimension, are never
     * compared: those runs are skipped. */
    if (strcmp(embedder, m->embedder) || (m->index && dim != m->dim))
        return KEEL_OK;
    if (index_for(m, dim))
        return KEEL_ENOMEM;
    return memory_index_put_owned(m->index, id, memory_owner_tag(owner), v);
}

/* NULL for none ("" too), as the store keeps it. */
static const char *owner_or_null(const char *owner)
{
    return owner && *owner ? owner : NULL;
}

/* Removes from `runs` those not of `owner` (a tag collision) and, with
 * `active_only`, those no longer active (another process may have
 * superseded or erased one since the sync). */
static void keep_own(json_t *runs, const char *owner, int active_only)
{
    for (size_t i = json_array_size(runs); i-- > 0;) {
        const json_t *r = json_array_get(runs, i);
        const char *o = json_string_value(json_object_get(r, "owner"));
        const char *status = json_string_value(json_object_get(r, "status"));
        if (!(o == owner || (o && owner && !strcmp(o, owner))) ||
            (active_only && strcmp(status ? status : "", "active")))
            json_array_remove(runs, i);
    }
}

/* The run's vector: hashed, or from the model embedder. *out is new
 * (keel_free). */
static int embed(struct memory *m, const char *task, const char *summary, float **out, int *dim,
                 struct keel_error *err)
{
    char *text;
    int rc;

    if (!m->conf.embedder) {
        if (!(*out = keel_malloc(MEMORY_DIM * sizeof(float))))
            return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        memory_embed(task, summary, *out);
        *dim = MEMORY_DIM;
    } else {
        size_t n = strlen(task) + (summary ? strlen(summary) : 0) + 3;
        if (!(text = keel_malloc(n)))
            return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        snprintf(text, n, "%s\n\n%s", task, summary ? summary : "");
        rc = llm_embed(m->conf.embedder, text, out, dim, err);
        keel_free(text);
        if (rc)
            return rc;
    }
    if ((rc = index_for(m, *dim))) {
        keel_free(*out);
        *out = NULL;
        return rc == KEEL_ENOMEM
                   ? keel_error_set(err, rc, "memory", "out of memory")
                   : keel_error_set(err, KEEL_EIO, "embedding",
                                    "the embedder gave %d dimensions where memory holds %d", *dim,
                                    m->dim);
    }
    return KEEL_OK;
}

/* Replays the store's new decisions into the index. A replay that
 * fails part way starts again from the same point next time: puts and
 * removes by id may be repeated. */
static int sync_index(struct memory *m, struct keel_error *err)
{
    int64_t before = m->seq;
    int rc = store_memory_sync(m->store, &m->seq, follow, m, err);

    if (rc)
        m->seq = before;
    return rc;
}

int memory_open(struct store *store, const struct memory_conf *conf, struct llm *judge,
                struct memory **out, struct keel_error *err)
{
    struct memory *m;
    int rc;

    if (conf && memory_index_conf_check(&conf->index))
        return keel_error_set(err, KEEL_EINVAL, "memory.index",
                              "m must be 2..100, ef_construction and ef_search 1..4096, "
                              "threads 1..4");
    if (!(m = keel_calloc(1, sizeof(*m))))
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    m->store = store;
    m->judge = judge;
    if (conf)
        m->conf = *conf;
    else
        memory_conf_default(&m->conf);
    if (m->conf.embedder)
        snprintf(m->embedder, sizeof(m->embedder), "openai:%.180s",
                 llm_get_conf(m->conf.embedder)->model);
    else
        snprintf(m->embedder, sizeof(m->embedder), "%s", MEMORY_EMBEDDER);
    if (!m->conf.embedder && index_for(m, MEMORY_DIM)) {
        keel_free(m);
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    }
    if ((rc = sync_index(m, err))) {
        memory_free(m);
        return rc;
    }
    m->opened = 1;
    if (m->index)   /* checked above: cannot fail */
        memory_index_configure(m->index, &m->conf.index);
    *out = m;
    return KEEL_OK;
}

void memory_free(struct memory *m)
{
    if (!m)
        return;
    memory_index_free(m->index);
    keel_free(m);
}

/* ---- checks ---------------------------------------------------------------------- */

static int check_text(const char *s, const char *field, int required, struct keel_error *err)
{
    size_t n = s ? strlen(s) : 0;

    if (!n && required)
        return keel_error_set(err, KEEL_EINVAL, field, "is required");
    if (n > MEMORY_TEXT_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, field, "is longer than %u bytes",
                              MEMORY_TEXT_MAX);
    if (utf8_valid_prefix(s ? s : "", n) != n)
        return keel_error_set(err, KEEL_EINVAL, field, "must be UTF-8 text");
    return KEEL_OK;
}

static int check_strings(const json_t *a, const char *field, struct keel_error *err)
{
    const json_t *v;
    size_t i;

    if (!a)
        return KEEL_OK;
    if (!json_is_array(a) || json_array_size(a) > 100)
        return keel_error_set(err, KEEL_EINVAL, field, "must be an array of at most 100 items");
    json_array_foreach(a, i, v)
        if (!json_is_string(v) || json_string_length(v) > 2000)
            return keel_error_set(err, KEEL_EINVAL, field,
                                  "must hold strings of at most 2000 bytes");
    return KEEL_OK;
}

static int check_input(const struct memory_input *in, struct keel_error *err)
{
    int rc;

    if ((rc = check_text(in->task, "task", 1, err)) ||
        (rc = check_text(in->summary, "summary", 0, err)) ||
        (rc = check_strings(in->references, "references", err)) ||
        (rc = check_strings(in->artifacts, "artifacts", err)))
        return rc;
    if (!in->outcome || (strcmp(in->outcome, "success") && strcmp(in->outcome, "failure") &&
                         strcmp(in->outcome, "partial")))
        return keel_error_set(err, KEEL_EINVAL, "outcome", "must be success, failure or partial");
    if (in->id && (!*in->id || strlen(in->id) > 63 ||
                   strspn(in->id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789_-.:") != strlen(in->id)))
        return keel_error_set(err, KEEL_EINVAL, "id",
                              "must be 1 to 63 letters, digits and _ - . :");
    return KEEL_OK;
}

/* ---- the rules -------------------------------------------------------------------- */

/* Where `s`'s trailing punctuation and spacing (".!? \t\r\n") begin. */
static const char *tail_of(const char *s)
{
    const char *end = s + strlen(s);

    while (end > s && strchr(".!? \t\r\n", end[-1]))
        end--;
    return end;
}

/* Equal once case, spacing and trailing punctuation are set aside:
 * spaces are passed over anywhere, and the texts are the same when both
 * reach their trailing punctuation together (or an end). Linear: where
 * each text's tail begins is found once. */
static int same_text(const char *a, const char *b)
{
    const char *a_tail, *b_tail;

    if (!strcmp(a, b))
        return 1;
    a_tail = tail_of(a);
    b_tail = tail_of(b);
    for (;; a++, b++) {
        while (*a && isspace((unsigned char)*a))
            a++;
        while (*b && isspace((unsigned char)*b))
            b++;
        if (!*a || !*b || (a >= a_tail && b >= b_tail))
            return a >= a_tail && b >= b_tail;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    }
}

/* Every string of `a` is in `b`. */
static int contains(const json_t *a, const json_t *x);

static int subset(const json_t *a, const json_t *b)
{
    const json_t *x;
    size_t i;

    json_array_foreach(a, i, x)
        if (!contains(b, x))
            return 0;
    return 1;
}

struct verdict {
    const char *decision;
    const json_t *target;        /* the candidate run, or NULL */
    char reason[400];
};

static void rules(const struct memory *m, const struct memory_input *in, const json_t *refs,
                  const json_t *candidates, const double *sims, struct verdict *v)
{
    int same_task[MEMORY_TOP_K], same_summaries[MEMORY_TOP_K];
    const json_t *c;
    size_t i;

    /* compared once per candidate, not once per pass */
    json_array_foreach(candidates, i, c) {
        const char *task = json_string_value(json_object_get(c, "task"));
        const char *summary = json_string_value(json_object_get(c, "summary"));
        same_task[i] = same_text(task, in->task) || sims[i] >= m->conf.same_task_similarity;
        same_summaries[i] = same_text(summary, in->summary ? in->summary : "");
    }
    for (int pass = 0; pass < 3; pass++)
        json_array_foreach(candidates, i, c) {
            const char *outcome = json_string_value(json_object_get(c, "outcome"));
            const json_t *crefs = json_object_get(c, "references");
            int same = same_task[i], same_summary = same_summaries[i];

            if (!same)
                continue;
            if (pass == 0 && !strcmp(outcome, in->outcome) && same_summary &&
                subset(refs, crefs)) {
                *v = (struct verdict){"NOT", c, ""};
                snprintf(v->reason, sizeof(v->reason),
                         "same task, same outcome and nothing new: %s has it", 
                         json_string_value(json_object_get(c, "id")));
                return;
            }
            if (pass == 1 && !strcmp(in->outcome, "success") && !strcmp(outcome, "failure")) {
                *v = (struct verdict){"REPLACE", c, ""};
                snprintf(v->reason, sizeof(v->reason),
                         "a success after the failure of %s on the same task",
                         json_string_value(json_object_get(c, "id")));
                return;
            }
            if (pass == 2 && !strcmp(in->outcome, "success") && !strcmp(outcome, "success") &&
                (!same_summary || !subset(refs, crefs) || !subset(crefs, refs))) {
                *v = (struct verdict){"MERGE", c, ""};
                snprintf(v->reason, sizeof(v->reason),
                         "two successes on the same task with %s: both are kept",
                         !same_summary ? "different approaches" : "different references");
                return;
            }
        }
    *v = (struct verdict){"ADD", NULL, ""};
    snprintf(v->reason, sizeof(v->reason),
             "similar runs, but none the same task with this outcome to skip, replace or merge");
}

/* ---- the model judge ------------------------------------------------------------- */

static json_t *judge_body(const struct memory_input *in, const json_t *refs,
                          const json_t *candidates, const double *sims)
{
    json_t *cands = json_array(), *c;
    char *text;
    size_t i;

    json_array_foreach(candidates, i, c)
        json_array_append_new(cands, json_pack("{s:O, s:f, s:O, s:O, s:O, s:i, s:i}", "id",
                                               json_object_get(c, "id"), "similarity", sims[i],
                                               "task", json_object_get(c, "task"), "summary",
                                               json_object_get(c, "summary"), "outcome",
                                               json_object_get(c, "outcome"), "references",
                                               (int)json_array_size(json_object_get(c, "references")),
                                               "artifacts",
                                               (int)json_array_size(json_object_get(c, "artifacts"))));
    json_t *doc = json_pack("{s:{s:s, s:s, s:s, s:i, s:i}, s:o}", "run", "task", in->task,
                            "summary", in->summary ? in->summary : "", "outcome", in->outcome,
                            "references", (int)json_array_size(refs), "artifacts",
                            (int)json_array_size(in->artifacts), "similar_runs", cands);
    if (!doc || !(text = keel_json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS))) {
        json_decref(doc);
        return NULL;
    }
    json_decref(doc);
    json_t *body = json_pack(
        "{s:[{s:s, s:s}, {s:s, s:s}], s:i}", "messages", "role", "system", "content",
        "You decide whether a finished run enters a memory of past runs. ADD: it adds new "
        "information. NOT: it is redundant with a similar run. REPLACE: it is a better version "
        "of a similar run (for example a success where that run failed). MERGE: it complements "
        "a similar run (both succeeded, with different approaches or references). Answer with "
        "JSON only: {\"decision\": \"ADD|NOT|REPLACE|MERGE\", \"target_run_id\": \"the similar "
        "run's id, for REPLACE or MERGE\", \"reason\": \"one sentence\"}.",
        "role", "user", "content", text, "temperature", 0);
    keel_free(text);
    return body;
}

/* Asks the model; on any failure *v is ADD with the reason. */
static void model_judge(struct memory *m, const struct memory_input *in, const json_t *refs,
                        const json_t *candidates, const double *sims, struct verdict *v)
{
    static const char *const decisions[] = {"ADD", "NOT", "REPLACE", "MERGE"};
    json_t *body = judge_body(in, refs, candidates, sims), *doc = NULL, *c;
    struct llm_reply reply;
    struct keel_error lerr;
    const char *decision, *target, *reason;
    size_t i;

    *v = (struct verdict){"ADD", NULL, ""};
    llm_reply_init(&reply);
    keel_error_clear(&lerr);
    if (!body || llm_chat(m->judge, body, NULL, NULL, &reply, &lerr)) {
        snprintf(v->reason, sizeof(v->reason), "ADD, as the model judge failed: %s",
                 body ? lerr.message : "out of memory");
        goto out;
    }
    if (llm_extract_json(reply.text.data, reply.text.len, JUDGE_REPLY_MAX, &doc, &lerr)) {
        snprintf(v->reason, sizeof(v->reason), "ADD, as the model judge's answer is not JSON: %s",
                 lerr.message);
        goto out;
    }
    decision = json_string_value(json_object_get(doc, "decision"));
    target = json_string_value(json_object_get(doc, "target_run_id"));
    reason = json_string_value(json_object_get(doc, "reason"));
    for (i = 0; i < 4 && !(decision && !strcmp(decision, decisions[i])); i++)
        ;
    if (i == 4) {
        snprintf(v->reason, sizeof(v->reason),
                 "ADD, as the model judge's decision is not ADD, NOT, REPLACE or MERGE");
        goto out;
    }
    v->decision = decisions[i];
    if (target && *target) {
        json_array_foreach(candidates, i, c)
            if (!strcmp(json_string_value(json_object_get(c, "id")), target))
                v->target = c;
        if (!v->target) {
            *v = (struct verdict){"ADD", NULL, ""};
            snprintf(v->reason, sizeof(v->reason),
                     "ADD, as the model judge named a run that is not a candidate");
            goto out;
        }
    }
    if (!v->target && (i == 2 || i == 3))
        v->target = json_array_get(candidates, 0);   /* REPLACE/MERGE without one: the best */
    snprintf(v->reason, sizeof(v->reason), "%.380s",
             reason && *reason ? reason : "(the model gave no reason)");
out:
    utf8_clean(v->reason);
    json_decref(doc);
    json_decref(body);
    llm_reply_release(&reply);
}

/* ---- execution ------------------------------------------------------------------- */

static int contains(const json_t *a, const json_t *x)
{
    const json_t *y;
    size_t i;

    json_array_foreach(a, i, y)
        if (json_equal(x, y))
            return 1;
    return 0;
}

static json_t *union_refs(const json_t *a, const json_t *b)
{
    json_t *out = json_is_array(a) ? json_copy((json_t *)a) : json_array(), *x;
    size_t i;

    json_array_foreach(b, i, x)
        if (out && !contains(out, x))
            json_array_append(out, x);
    return out;
}

struct memory_decision {
    char id[64];                 /* a run id is 1..63 bytes */
    char *task, *summary, *outcome, *conversation_id, *target, *owner;
    char *refs_text, *artifacts_text, *merged_text;
    struct verdict v;
    float *vector;
    int dim;
    struct store_memory_run run;
    struct store_memory_change change;
    json_t *json;
};

void memory_decision_free(struct memory_decision *d)
{
    if (!d)
        return;
    keel_free(d->task);
    keel_free(d->summary);
    keel_free(d->outcome);
    keel_free(d->conversation_id);
    keel_free(d->owner);
    keel_free(d->target);
    keel_free(d->refs_text);
    keel_free(d->artifacts_text);
    keel_free(d->merged_text);
    keel_free(d->vector);
    json_decref(d->json);
    keel_free(d);
}

const struct store_memory_change *memory_decision_change(const struct memory_decision *d)
{
    return &d->change;
}

const json_t *memory_decision_json(const struct memory_decision *d)
{
    return d->json;
}

static char *dup_text(const char *s)
{
    return keel_strdup(s ? s : "");
}

/* Sets `key` (ASCII) of `obj` to `value`, taking it; nonzero when that
 * fails or `value` is NULL (out of memory, or a string not UTF-8). */
static int set_new(json_t *obj, const char *key, json_t *value)
{
    return json_object_set_new_nocheck(obj, key, value);
}

/* {id, similarity} of a candidate, the similarity to 4 decimals, as
 * json_pack("{s:s, s:f}") made it; NULL when out of memory. */
static json_t *candidate_json(const char *id, float similarity)
{
    json_t *c = json_object();

    if (c && (set_new(c, "id", json_string(id)) ||
              set_new(c, "similarity", json_real(round(similarity * 1e4) / 1e4)))) {
        json_decref(c);
        return NULL;
    }
    return c;
}

int memory_decide(struct memory *m, const struct memory_input *in, struct memory_decision **out,
                  struct keel_error *err)
{
    struct memory_hit hits[MEMORY_TOP_K];
    const char *ids[MEMORY_TOP_K];
    double sims[MEMORY_TOP_K], similarity = -1;
    json_t *refs = in->references ? json_incref((json_t *)in->references) : json_array();
    json_t *candidates = NULL, *cand_out = json_array(), *merged = NULL;
    struct memory_decision *d = keel_calloc(1, sizeof(*d));
    const char *judge = "rules", *owner = owner_or_null(in->owner);
    uint64_t tag = memory_owner_tag(owner);
    long failures = keel_alloc_failures();
    size_t n;
    int rc;

    if (!d || !refs || !cand_out) {
        rc = keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        goto out;
    }
    if ((rc = check_input(in, err)) || (rc = sync_index(m, err)))
        goto out;
    if (in->id)
        snprintf(d->id, sizeof(d->id), "%s", in->id);
    else
        keel_id_new("run", d->id, sizeof(d->id));
    if ((rc = embed(m, in->task, in->summary, &d->vector, &d->dim, err)))
        goto out;
    /* only the same owner's runs: one user's run never decides about
     * another's, and a decision never shows another user's run */
    n = memory_index_search_owned(m->index, d->vector, MEMORY_TOP_K,
                                  (float)m->conf.min_similarity, &tag, hits);
    for (size_t i = 0; i < n; i++)
        ids[i] = hits[i].id;
    if ((rc = store_memory_get(m->store, ids, n, &candidates, err)))
        goto out;
    if (json_array_size(candidates) != n) {
        rc = keel_error_set(err, KEEL_EIO, "memory", "the index names runs the store lacks");
        goto out;
    }
    keep_own(candidates, owner, 0);
    if (json_array_size(candidates) != n) {   /* a tag collision: the hits of the owner */
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < json_array_size(candidates); j++)
                if (!strcmp(json_string_value(json_object_get(json_array_get(candidates, j),
                                                              "id")),
                            hits[i].id))
                    hits[kept++] = hits[i];
        n = kept;
    }
    for (size_t i = 0; i < n; i++) {
        ids[i] = hits[i].id;
        sims[i] = hits[i].similarity;
        json_array_append_new(cand_out, candidate_json(hits[i].id, hits[i].similarity));
    }
    if (!n) {
        d->v = (struct verdict){"ADD", NULL, ""};
        snprintf(d->v.reason, sizeof(d->v.reason), "no active run is similar (%.2f or more)",
                 m->conf.min_similarity);
    } else if (m->judge) {
        judge = "model";
        model_judge(m, in, refs, candidates, sims, &d->v);
    } else {
        rules(m, in, refs, candidates, sims, &d->v);
    }
    if (d->v.target && !(d->target = keel_strdup(json_string_value(
                              json_object_get(d->v.target, "id"))))) {
        rc = keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (d->target && !strcmp(ids[i], d->target))
            similarity = round(sims[i] * 1e4) / 1e4;
    if (n && similarity < 0)
        similarity = round(sims[0] * 1e4) / 1e4;
    d->change.new_canonical = 1;
    if (!strcmp(d->v.decision, "MERGE")) {
        /* success over failure, newer over older: the new run unless it
         * did not succeed where the other did */
        d->change.new_canonical =
            !(strcmp(in->outcome, "success") &&
              !strcmp(json_string_value(json_object_get(d->v.target, "outcome")), "success"));
        merged = union_refs(json_object_get(d->v.target, "references"), refs);
        d->merged_text = merged ? keel_json_dumps(merged, JSON_COMPACT) : NULL;
    }
    d->task = keel_strdup(in->task);   /* at most MEMORY_TEXT_MAX bytes: checked */
    d->summary = dup_text(in->summary);
    d->outcome = dup_text(in->outcome);
    d->conversation_id = in->conversation_id ? keel_strdup(in->conversation_id) : NULL;
    d->owner = owner ? keel_strdup(owner) : NULL;
    d->refs_text = keel_json_dumps(refs, JSON_COMPACT);
    d->artifacts_text = in->artifacts ? keel_json_dumps(in->artifacts, JSON_COMPACT)
                                      : keel_strdup("[]");
    /* as json_pack("{s:s, s:s, s:s?, s:s, s:o, s:s, s:O}") made it */
    if ((d->json = json_object()) &&
        (set_new(d->json, "run_id", json_string(d->id)) ||
         set_new(d->json, "decision", json_string(d->v.decision)) ||
         set_new(d->json, "target_run_id", d->target ? json_string(d->target) : json_null()) ||
         set_new(d->json, "reason", json_string(d->v.reason)) ||
         set_new(d->json, "similarity", similarity >= 0 ? json_real(similarity) : json_null()) ||
         set_new(d->json, "judge", json_string(judge)) ||
         set_new(d->json, "candidates", json_incref(cand_out)))) {
        json_decref(d->json);
        d->json = NULL;
    }
    if (!d->task || !d->summary || !d->outcome || (in->conversation_id && !d->conversation_id) ||
        (owner && !d->owner) ||
        !d->refs_text || !d->artifacts_text || !d->json ||
        (!strcmp(d->v.decision, "MERGE") && !d->merged_text)) {
        rc = keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        goto out;
    }
    d->run = (struct store_memory_run){d->id, d->task, d->summary, d->outcome, d->refs_text,
                                       d->artifacts_text, d->conversation_id, in->now_ms,
                                       m->embedder, d->dim, d->vector, d->owner};
    d->change.decision = d->v.decision;
    d->change.run = &d->run;
    d->change.target_id = d->target;
    d->change.reason = d->v.reason;
    d->change.similarity = similarity;
    d->change.judge = judge;
    d->change.ts_ms = in->now_ms;
    d->change.merged_refs_json = d->merged_text;
    d->v.target = NULL;   /* it points into `candidates`, freed below */
    /* jansson swallows some allocation failures (an append, a copy): a
     * decision made while one happened is not trusted. */
    if (keel_alloc_failures() != failures) {
        rc = keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        goto out;
    }
    *out = d;
    d = NULL;
out:
    memory_decision_free(d);
    json_decref(merged);
    json_decref(refs);
    json_decref(candidates);
    json_decref(cand_out);
    return rc;
}

void memory_commit(struct memory *m, const struct memory_decision *d)
{
    if (strcmp(d->change.decision, "NOT"))
        memory_index_put_owned(m->index, d->id, memory_owner_tag(d->owner), d->vector);
    if (!strcmp(d->change.decision, "REPLACE"))
        memory_index_remove(m->index, d->target);
}

int memory_reload(struct memory *m, struct keel_error *err)
{
    int dim = m->dim, rc;

    memory_index_free(m->index);
    m->index = NULL;
    m->dim = 0;
    m->seq = 0;
    m->opened = 0;
    if (dim && index_for(m, dim))
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    rc = sync_index(m, err);
    m->opened = 1;
    if (m->index)
        memory_index_configure(m->index, &m->conf.index);
    return rc;
}

int memory_admit(struct memory *m, const struct memory_input *in, json_t **out,
                 struct keel_error *err)
{
    struct memory_decision *d = NULL;
    int rc = memory_decide(m, in, &d, err);

    if (!rc && !(rc = store_memory_apply(m->store, &d->change, err))) {
        memory_commit(m, d);
        *out = json_incref(d->json);
    }
    memory_decision_free(d);
    return rc;
}

int memory_search(struct memory *m, const char *owner, const char *query, int limit,
                  json_t **out, struct keel_error *err)
{
    struct memory_hit hits[MEMORY_SEARCH_MAX];
    const char *ids[MEMORY_SEARCH_MAX];
    float *vector = NULL;
    json_t *runs = NULL, *r;
    size_t n, i;
    uint64_t tag;
    int dim, rc;

    if ((rc = check_text(query, "query", 1, err)))
        return rc;
    if (limit < 1 || limit > MEMORY_SEARCH_MAX)
        return keel_error_set(err, KEEL_EINVAL, "limit", "must be 1 to %d", MEMORY_SEARCH_MAX);
    if ((rc = sync_index(m, err)))
        return rc;
    if ((rc = embed(m, query, NULL, &vector, &dim, err)))
        return rc;
    owner = owner_or_null(owner);
    tag = memory_owner_tag(owner);
    n = memory_index_search_owned(m->index, vector, (size_t)limit, 1e-6f, &tag, hits);
    keel_free(vector);
    for (i = 0; i < n; i++)
        ids[i] = hits[i].id;
    if ((rc = store_memory_get(m->store, ids, n, &runs, err)))
        return rc;
    /* Another process may have superseded or erased a run since the
     * sync: never returned all the same; nor another owner's. */
    keep_own(runs, owner, 1);
    json_array_foreach(runs, i, r) {
        /* the store's runs may be shared (store_memory_get): a copy
         * takes the similarity */
        if (json_array_set_new(runs, i, r = json_copy(r))) {
            json_decref(runs);
            return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        }
        for (size_t k = 0; k < n; k++)
            if (!strcmp(json_string_value(json_object_get(r, "id")), hits[k].id))
                json_object_set_new(r, "similarity",
                                    json_real(round(hits[k].similarity * 1e4) / 1e4));
    }
    *out = runs;
    return KEEL_OK;
}
