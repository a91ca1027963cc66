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
    decision = json_pack("{s:I, s:s, s:s, s:s?, s:s, s:o, s:s, s:s, s:I}", "seq",
                         (json_int_t)json_array_size(m->decisions) + 1, "run_id", r->id,
                         "decision", c->decision, "target_run_id", c->target_id, "reason",
                         c->reason, "similarity",
                         c->similarity >= 0 ? json_real(c->similarity) : json_null(), "judge",
                         c->judge, "task", r->task, "ts", (json_int_t)c->ts_ms);
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
        added->run = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s?, s:I, s:s, s:n, s:b, s:i}",
                               "id", r->id, "task", r->task, "summary", r->summary, "outcome",
                               r->outcome, "references", parse_array(r->refs_json), "artifacts",
                               parse_array(r->artifacts_json), "conversation_id",
                               r->conversation_id, "created_at", (json_int_t)r->created_ms,
                               "status", "active", "superseded_by", "canonical", 1, "uses", 1);
        added->embedder = keel_strdup(r->embedder);
        added->dim = r->dim;
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

        if (strcmp(decision, "NOT") &&
            ((rc = fn(ctx, json_string_value(json_object_get(d, "run_id")), r->embedder, r->dim,
                      r->vector)) ||
             (!strcmp(decision, "REPLACE") &&
              (rc = fn(ctx, json_string_value(json_object_get(d, "target_run_id")), NULL, 0,
                       NULL)))))
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

int mem_memory_decisions(const struct mem_memory *m, int limit, int offset, json_t **out,
                         struct keel_error *err)
{
    size_t n = m ? json_array_size(m->decisions) : 0;
    json_t *list = json_array();

    for (size_t k = (size_t)offset; list && k < n && k < (size_t)offset + (size_t)limit; k++)
        if (json_array_append_new(list, json_deep_copy(json_array_get(m->decisions, n - 1 - k)))) {
            json_decref(list);
            list = NULL;
        }
    if (!list)
        return keel_error_set(err, KEEL_ENOMEM, "memory", "out of memory");
    *out = list;
    return KEEL_OK;
}
