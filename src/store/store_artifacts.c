/*
 * store_artifacts.c — the port's artifact and fact operations (seed 001,
 * migration 9): argument checks shared by every backend, then the
 * backend's op. The backends are store_sqlite_artifacts.c and
 * store_mem_artifacts.c.
 */
#include <string.h>

#include "store/store.h"

#define ID_MAX 128

static int check_string(const char *s, size_t max, const char *field, struct keel_error *err)
{
    if (!s || !*s)
        return keel_error_set(err, KEEL_EINVAL, field, "is required");
    if (strlen(s) > max)
        return keel_error_set(err, KEEL_ETOOBIG, field, "is longer than %zu bytes", max);
    return KEEL_OK;
}

/* A JSON text of the right kind: its first character opens an object
 * or an array. (Nothing is parsed while a turn is saved: the texts come
 * from the artifact stage's own serialisation.) */
static int check_json(const char *text, int array, const char *field, struct keel_error *err)
{
    if (check_string(text, STORE_TEXT_MAX, field, err))
        return err->code;
    text += strspn(text, " \t\r\n");
    return *text == (array ? '[' : '{')
               ? KEEL_OK
               : keel_error_set(err, KEEL_EINVAL, field, "must be a JSON %s",
                                array ? "array" : "object");
}

int store_artifact_check(const struct store_artifact *a, struct keel_error *err)
{
    static const char *const types[] = {"research_brief", "doc_extract", "plan", NULL};
    int rc, known = 0;

    if ((rc = check_string(a->id, ID_MAX, "artifact.id", err)) ||
        (rc = check_string(a->type, 32, "artifact.type", err)) ||
        (rc = check_string(a->title, 1024, "artifact.title", err)) ||
        (rc = check_json(a->body_json, 0, "artifact.body", err)))
        return rc;
    for (const char *const *t = types; *t; t++)
        known |= !strcmp(*t, a->type);
    if (!known)
        return keel_error_set(err, KEEL_EINVAL, "artifact.type",
                              "must be research_brief, doc_extract or plan");
    for (size_t i = 0; i < a->n_facts; i++) {
        const struct store_fact *f = &a->facts[i];
        if ((rc = check_string(f->id, ID_MAX, "artifact.facts.id", err)) ||
            (rc = check_string(f->topic, 4096, "artifact.facts.topic", err)) ||
            (rc = check_string(f->fact, 8192, "artifact.facts.fact", err)) ||
            (rc = check_string(f->source, 4096, "artifact.facts.source", err)) ||
            (rc = check_string(f->domain, 128, "artifact.facts.domain", err)) ||
            (rc = check_string(f->evidence_snippet, 4096, "artifact.facts.evidence_snippet",
                               err)) ||
            (rc = check_json(f->tags_json, 1, "artifact.facts.tags", err)))
            return rc;
        if (!f->store || (strcmp(f->store, "verified") && strcmp(f->store, "researched")))
            return keel_error_set(err, KEEL_EINVAL, "artifact.facts.store",
                                  "must be verified or researched");
        if (!(f->confidence >= 0 && f->confidence <= 1))
            return keel_error_set(err, KEEL_EINVAL, "artifact.facts.confidence",
                                  "must be from 0 to 1");
    }
    return KEEL_OK;
}

int store_artifacts_list(struct store *store, const char *conversation_id, const char *type,
                         int last, json_t **out, struct keel_error *err)
{
    int rc = check_string(conversation_id, ID_MAX, "conversation_id", err);

    if (rc)
        return rc;
    if (last < 0 || last > STORE_LIMIT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "last", "must be from 1 to %d", STORE_LIMIT_MAX);
    if (type && (rc = check_string(type, 32, "type", err)))
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->artifacts_list(store, conversation_id, type,
                                                         last ? last : STORE_LIMIT_MAX, out, err));
}

int store_artifact_get(struct store *store, const char *id, json_t **out, struct keel_error *err)
{
    int rc = check_string(id, ID_MAX, "artifact_id", err);
    json_t *facts;
    size_t n;

    if (rc)
        return rc;
    store_enter(store);
    if ((rc = store_leave(store, store->ops->artifact_get(store, id, out, err))))
        return rc;
    /* The backends list facts newest first; an artifact shows them in
     * the order they were distilled. Moving items allocates nothing. */
    facts = json_object_get(*out, "facts");
    n = json_array_size(facts);
    for (size_t i = 0; i < n / 2; i++) {
        json_t *a = json_incref(json_array_get(facts, i));
        json_t *b = json_incref(json_array_get(facts, n - 1 - i));
        json_array_set_new(facts, i, b);
        json_array_set_new(facts, n - 1 - i, a);
    }
    return KEEL_OK;
}

int store_facts_list(struct store *store, const struct store_fact_query *q, json_t **out,
                     struct keel_error *err)
{
    if (q->limit < 1 || q->limit > STORE_LIMIT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "limit", "must be between 1 and %d",
                              STORE_LIMIT_MAX);
    if (q->offset < 0)
        return keel_error_set(err, KEEL_EINVAL, "offset", "must not be negative");
    if (q->store && strcmp(q->store, "verified") && strcmp(q->store, "researched"))
        return keel_error_set(err, KEEL_EINVAL, "store", "must be verified or researched");
    store_enter(store);
    return store_leave(store, store->ops->facts_list(store, q, out, err));
}
