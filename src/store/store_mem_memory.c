/*
 * store_mem_memory.c — long-term memory in the in-memory backend: the
 * same behaviour as store_sqlite_memory.c over plain arrays (tests).
 */
#include <string.h>

#include "core/alloc.h"
#include "store/store_mem_int.h"

struct mem_run {
    json_t *run;            /* the run as store_memory_get shows it */
    char *embedder;
    int dim;
    float *vector;
    int erased;             /* with its conversation: texts and vector gone */
};

struct mem_memory {
    struct mem_run *runs;
    size_t n, cap;
    json_t *decisions;      /* oldest first, each with its seq */
};

void mem_memory_free(struct mem_memory *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        json_decref(m->runs[i].run);
        keel_free(m->runs[i].embedder);
        keel_free(m->runs[i].vector);
    }
    keel_free(m->runs);
    json_decref(m->decisions);
    keel_free(m);
}

static struct mem_run *find(const struct mem_memory *m, const char *id)
{
    for (size_t i = 0; m && id && i < m->n; i++)
        if (!strcmp(json_string_value(json_object_get(m->runs[i].run, "id")), id))
            return &m->runs[i];
    return NULL;
}

static int active(const struct mem_run *r)
{
    return r && !strcmp(json_string_value(json_object_get(r->run, "status")), "active");
}

/* The array `text` holds (store.c checked it is JSON); NULL when out
 * of memory, which fails the json_pack it is given to. */
static json_t *parse_array(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);

    if (json_is_array(v) || !v)
        return v;
    json_decref(v);
    return json_array();
}

int mem_memory_apply(struct mem_memory **mp, const struct store_memory_change *c,
                     struct keel_error *err)
{
    const struct store_memory_run *r = c->run;
    struct mem_memory *m = *mp;
    struct mem_run *target = NULL, *added = NULL;
    json_t *decision, *status = NULL, *by = NULL, *merged = NULL, *uses = NULL;
    long failures = keel_alloc_failures();
    int adds = strcmp(c->decision, "NOT") != 0;

    if (!m) {
        if (!(m = keel_calloc(1, sizeof(*m))) || !(m->decisions = json_array())) {
            keel_free(m);
            return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        }
        *mp = m;
    }
    if (adds && find(m, r->id))
        return keel_error_set(err, KEEL_EFAIL, "id", "a run with id \"%s\" exists", r->id);
    if ((!strcmp(c->decision, "REPLACE") || !strcmp(c->decision, "MERGE")) &&
        !active(target = find(m, c->target_id)))
        return keel_error_set(err, KEEL_ENOTFOUND, "target_run_id",
                              "\"%s\" is not an active run", c->target_id);
    decision = json_pack("{s:I, s:s, s:s, s:s?, s:s, s:o, s:s, s:s, s:I, s:s?, s:s?}", "seq",
                         (json_int_t)json_array_size(m->decisions) + 1, "run_id", r->id,
                         "decision", c->decision, "target_run_id", c->target_id, "reason",
                         c->reason, "similarity",
                         c->similarity >= 0 ? json_real(c->similarity) : json_null(), "judge",
                         c->judge, "task", r->task, "ts", (json_int_t)c->ts_ms, "owner", r->owner,
                         "conversation_id", r->conversation_id);
    /* Everything the change needs is made before anything changes: a
     * failure then leaves the memory as it was. Replacing a key's value
     * allocates nothing; an integer is made in place below. */
    if (!strcmp(c->decision, "REPLACE")) {
        status = json_string("superseded");
        by = json_string(r->id);
    }
    if (!strcmp(c->decision, "MERGE")) {
        merged = parse_array(c->merged_refs_json);
        uses = json_integer(0);
    }
    /* jansson swallows some allocation failures (a parse may lose a
     * byte): a change made while one happened is not applied. */
    if (!decision || (!strcmp(c->decision, "REPLACE") && (!status || !by)) ||
        (!strcmp(c->decision, "MERGE") && (!merged || !uses)) ||
        keel_alloc_failures() != failures) {
        json_decref(decision);
        json_decref(status);
        json_decref(by);
        json_decref(merged);
        json_decref(uses);
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    }
    if (adds) {
        if (m->n == m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 16;
            struct mem_run *runs = keel_realloc(m->runs, cap * sizeof(*runs));
            if (!runs) {
                json_decref(decision);
                json_decref(status);
                json_decref(by);
                json_decref(merged);
                json_decref(uses);
                return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
            }
            m->runs = runs;
            m->cap = cap;
            target = target ? find(m, c->target_id) : NULL;   /* the array moved */
        }
        added = &m->runs[m->n];
        added->run = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s?, s:I, s:s, s:n, s:b, s:i, s:s*}",
                               "id", r->id, "task", r->task, "summary", r->summary, "outcome",
                               r->outcome, "references", parse_array(r->refs_json), "artifacts",
                               parse_array(r->artifacts_json), "conversation_id",
                               r->conversation_id, "created_at", (json_int_t)r->created_ms,
                               "status", "active", "superseded_by", "canonical", 1, "uses", 1, "owner",
                               r->owner);
        added->embedder = keel_strdup(r->embedder);
        added->dim = r->dim;
        added->erased = 0;
        added->vector = keel_malloc((size_t)r->dim * sizeof(float));
        if (!added->run || !added->embedder || !added->vector) {
            json_decref(added->run);
            keel_free(added->embedder);
            keel_free(added->vector);
            json_decref(decision);
            json_decref(status);
            json_decref(by);
            json_decref(merged);
            json_decref(uses);
            return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        }
        memcpy(added->vector, r->vector, (size_t)r->dim * sizeof(float));
        m->n++;
    }
    if (!strcmp(c->decision, "REPLACE")) {
        json_object_set_new(target->run, "status", status);
        json_object_set_new(target->run, "superseded_by", by);
        json_object_set_new(target->run, "canonical", json_false());
        status = by = NULL;
    } else if (!strcmp(c->decision, "MERGE")) {
        struct mem_run *canon = c->new_canonical ? added : target;
        struct mem_run *other = c->new_canonical ? target : added;
        json_object_set_new(canon->run, "canonical", json_true());
        json_object_set_new(other->run, "canonical", json_false());
        json_integer_set(uses, json_integer_value(json_object_get(canon->run, "uses")) +
                                   json_integer_value(json_object_get(other->run, "uses")));
        json_object_set_new(canon->run, "references", merged);
        json_object_set_new(canon->run, "uses", uses);
        merged = uses = NULL;
    }
    json_array_append_new(m->decisions, decision);
    return KEEL_OK;
}

int mem_memory_sync(const struct mem_memory *m, int64_t *seq, store_memory_fn fn, void *ctx,
                    struct keel_error *err)
{
    size_t n = m ? json_array_size(m->decisions) : 0;
    int rc;

    for (size_t i = (size_t)*seq; i < n; i++) {
        const json_t *d = json_array_get(m->decisions, i);
        const char *decision = json_string_value(json_object_get(d, "decision"));
        const struct mem_run *r = find(m, json_string_value(json_object_get(d, "run_id")));

        const char *id = json_string_value(json_object_get(d, "run_id"));

        if (!strcmp(decision, "ERASE"))
            rc = fn(ctx, id, NULL, NULL, 0, NULL);
        else if (!strcmp(decision, "NOT") || r->erased)   /* never put back once erased */
            rc = KEEL_OK;
        else
            rc = fn(ctx, id, json_string_value(json_object_get(r->run, "owner")), r->embedder,
                    r->dim, r->vector);
        if (!rc && !strcmp(decision, "REPLACE"))
            rc = fn(ctx, json_string_value(json_object_get(d, "target_run_id")), NULL, NULL, 0,
                    NULL);
        if (rc)
            return err->code ? rc : keel_error_set(err, rc, "memory",
                                                   "the index could not follow the store");
        *seq = (int64_t)i + 1;   /* only once its changes were followed */
    }
    return KEEL_OK;
}

int mem_memory_get(const struct mem_memory *m, const char *const *ids, size_t n, json_t **out,
                   struct keel_error *err)
{
    json_t *list = json_array();

    for (size_t i = 0; list && i < n; i++) {
        const struct mem_run *r = find(m, ids[i]);
        if (r && json_array_append_new(list, json_deep_copy(r->run))) {
            json_decref(list);
            list = NULL;
        }
    }
    if (!list)
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    *out = list;
    return KEEL_OK;
}

/* Both NULL, or equal. */
static int same_owner(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static const char *owner_of(const json_t *o)
{
    return json_string_value(json_object_get(o, "owner"));
}

int mem_memory_decisions(const struct mem_memory *m, const char *owner, int limit, int offset,
                         json_t **out, struct keel_error *err)
{
    size_t n = m ? json_array_size(m->decisions) : 0, skipped = 0;
    json_t *list = json_array(), *d;

    for (size_t k = 0; list && k < n && json_array_size(list) < (size_t)limit; k++) {
        const json_t *src = json_array_get(m->decisions, n - 1 - k);
        if (!same_owner(owner_of(src), owner) || skipped++ < (size_t)offset)
            continue;
        d = json_deep_copy(src);
        if (d) {   /* kept for filtering, not shown (as the SQLite store) */
            json_object_del(d, "owner");
            json_object_del(d, "conversation_id");
        }
        if (json_array_append_new(list, d)) {
            json_decref(list);
            list = NULL;
        }
    }
    if (!list)
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    *out = list;
    return KEEL_OK;
}

int mem_memory_erase_conversation(struct mem_memory *m, const char *conversation_id,
                                  const char *owner, int64_t now_ms, struct keel_error *err)
{
    json_t *erasures = json_array(), *d;
    size_t i, k, base = m ? json_array_size(m->decisions) : 0;

    if (!erasures)
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    /* 1. an ERASE decision per run (made first: out of memory changes nothing) */
    for (i = 0; m && i < m->n; i++) {
        const json_t *run = m->runs[i].run;
        const char *conv = json_string_value(json_object_get(run, "conversation_id"));
        if (m->runs[i].erased || !conv || strcmp(conv, conversation_id) ||
            !same_owner(owner_of(run), owner))
            continue;
        d = json_pack("{s:I, s:s, s:s, s:n, s:s, s:n, s:s, s:s, s:I, s:s?, s:s}", "seq",
                      (json_int_t)(base + json_array_size(erasures) + 1), "run_id",
                      json_string_value(json_object_get(run, "id")), "decision", "ERASE",
                      "target_run_id", "reason", "its conversation was deleted", "similarity",
                      "judge", "delete", "task", "", "ts", (json_int_t)now_ms, "owner", owner,
                      "conversation_id", conversation_id);
        if (json_array_append_new(erasures, d)) {
            json_decref(erasures);
            return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
        }
    }
    /* 2. decisions made in the conversation, or about its runs, stop
     * showing their task; a model's reason about them is replaced */
    for (k = 0; k < base; k++) {
        json_t *dec = json_array_get(m->decisions, k);
        const char *conv = json_string_value(json_object_get(dec, "conversation_id"));
        int mine = conv && !strcmp(conv, conversation_id) && same_owner(owner_of(dec), owner);
        int about = mine;
        json_array_foreach(erasures, i, d) {
            const char *id = json_string_value(json_object_get(d, "run_id"));
            const char *target = json_string_value(json_object_get(dec, "target_run_id"));
            if (!strcmp(id, json_string_value(json_object_get(dec, "run_id"))))
                mine = about = 1;
            if (target && !strcmp(id, target))
                about = 1;
        }
        if (mine)
            json_object_set_new(dec, "task", json_string(""));
        if (about && !strcmp(json_string_value(json_object_get(dec, "judge")), "model"))
            json_object_set_new(dec, "reason", json_string("(erased with its conversation)"));
    }
    /* 3. the runs keep their id, outcome, owner and times */
    json_array_foreach(erasures, i, d) {
        struct mem_run *r = find(m, json_string_value(json_object_get(d, "run_id")));
        r->erased = 1;
        json_object_set_new(r->run, "status", json_string("erased"));
        json_object_set_new(r->run, "task", json_string(""));
        json_object_set_new(r->run, "summary", json_string(""));
        json_object_set_new(r->run, "references", json_array());
        json_object_set_new(r->run, "artifacts", json_array());
        json_object_set_new(r->run, "canonical", json_false());
        memset(r->vector, 0, (size_t)r->dim * sizeof(float));
        json_array_append(m->decisions, d);
    }
    json_decref(erasures);
    return KEEL_OK;
}
