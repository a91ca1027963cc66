/*
 * store_mem_artifacts.c — artifacts and facts in the in-memory backend:
 * the same behaviour as store_sqlite_artifacts.c over two JSON arrays
 * (tests). A save prepares the new arrays completely (mem_artifacts_prepare)
 * before the turn is written and swaps them in afterwards
 * (mem_artifacts_commit, which cannot fail), so a refused turn leaves no
 * artifact behind and a refused artifact no turn.
 */
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "store/store_mem_int.h"

void mem_artifacts_free(struct mem_artifacts *a)
{
    if (!a)
        return;
    json_decref(a->artifacts);
    json_decref(a->facts);
    keel_free(a);
}

static int exists(const json_t *list, const char *id)
{
    const json_t *item;
    size_t i;

    json_array_foreach(list, i, item)
        if (!strcmp(json_string_value(json_object_get(item, "id")), id))
            return 1;
    return 0;
}

static int oom(struct keel_error *err)
{
    return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
}

int mem_artifacts_prepare(struct mem_artifacts **ap, const struct store_turn_record *rec,
                          struct mem_artifacts *next, struct keel_error *err)
{
    const struct store_artifact *art = rec->artifact;
    long failures = keel_alloc_failures();
    struct mem_artifacts *a = *ap;

    memset(next, 0, sizeof(*next));
    if (!art)
        return KEEL_OK;
    if (!a) {   /* an empty holder changes nothing anyone can see */
        if (!(a = keel_calloc(1, sizeof(*a))) || !(a->artifacts = json_array()) ||
            !(a->facts = json_array())) {
            mem_artifacts_free(a);
            return oom(err);
        }
        *ap = a;
    }
    if (exists(a->artifacts, art->id))
        return keel_error_set(err, KEEL_EFAIL, "artifact.id", "an artifact \"%s\" exists",
                              art->id);
    for (size_t i = 0; i < art->n_facts; i++)
        if (exists(a->facts, art->facts[i].id))
            return keel_error_set(err, KEEL_EFAIL, "artifact.facts.id", "a fact \"%s\" exists",
                                  art->facts[i].id);
    /* JSON texts are kept as text and parsed on reading, as SQLite does:
     * no parse runs while a turn is being saved. */
    next->artifacts = json_copy(a->artifacts);   /* shallow: the items are shared */
    next->facts = json_copy(a->facts);
    if (!next->artifacts || !next->facts ||
        json_array_append_new(next->artifacts,
                              json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:s}", "id", art->id,
                                        "type", art->type, "title", art->title,
                                        "conversation_id", rec->conversation_id, "turn",
                                        rec->seq, "created_ms", (json_int_t)rec->ts_ms,
                                        "artifact", art->body_json)))
        goto fail;
    for (size_t i = 0; i < art->n_facts; i++) {
        const struct store_fact *f = &art->facts[i];
        if (json_array_append_new(
                next->facts,
                json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:s, s:s, s:s, s:I}", "id", f->id,
                          "artifact_id", art->id, "conversation_id", rec->conversation_id,
                          "store", f->store, "topic", f->topic, "fact", f->fact, "source",
                          f->source, "confidence", f->confidence, "domain", f->domain,
                          "tags", f->tags_json,
                          "evidence_snippet", f->evidence_snippet, "created_ms",
                          (json_int_t)rec->ts_ms)))
            goto fail;
    }
    if (keel_alloc_failures() == failures)   /* jansson's copies skip what they cannot add */
        return KEEL_OK;
fail:
    json_decref(next->artifacts);
    json_decref(next->facts);
    memset(next, 0, sizeof(*next));
    return oom(err);
}

void mem_artifacts_commit(struct mem_artifacts *a, struct mem_artifacts *next)
{
    if (!next->artifacts)
        return;   /* the turn had no artifact; prepare made the holder otherwise */
    json_decref(a->artifacts);
    json_decref(a->facts);
    a->artifacts = next->artifacts;
    a->facts = next->facts;
    memset(next, 0, sizeof(*next));
}

void mem_artifacts_discard(struct mem_artifacts *next)
{
    json_decref(next->artifacts);
    json_decref(next->facts);
    memset(next, 0, sizeof(*next));
}

void mem_artifacts_delete(struct mem_artifacts *a, const char *conversation_id)
{
    json_t *lists[2] = {a ? a->artifacts : NULL, a ? a->facts : NULL};

    for (int l = 0; l < 2; l++)
        for (size_t i = json_array_size(lists[l]); i-- > 0;)
            if (!strcmp(json_string_value(json_object_get(json_array_get(lists[l], i),
                                                          "conversation_id")),
                        conversation_id))
                json_array_remove(lists[l], i);
}

/* The stored JSON text row[key] parsed, or NULL (out of memory). */
static json_t *parsed(const json_t *row, const char *key)
{
    return json_loads(json_string_value(json_object_get(row, key)), 0, NULL);
}

static json_t *public_row(const json_t *row)
{
    json_t *body = parsed(row, "artifact");

    return body ? json_pack("{s:O, s:O, s:O, s:O, s:O, s:o}", "id", json_object_get(row, "id"),
                            "type", json_object_get(row, "type"), "title",
                            json_object_get(row, "title"), "turn", json_object_get(row, "turn"),
                            "created_ms", json_object_get(row, "created_ms"), "artifact", body)
                : NULL;
}

static json_t *public_fact(const json_t *row)
{
    json_t *out = json_deep_copy(row), *tags = parsed(row, "tags");

    if (!out || !tags || json_object_set_new(out, "tags", tags)) {
        json_decref(out);
        if (!out)
            json_decref(tags);
        return NULL;
    }
    return out;
}

int mem_artifacts_list(const struct mem_artifacts *a, const char *conversation_id,
                       const char *type, int last, json_t **out, struct keel_error *err)
{
    json_t *list = json_array();
    const json_t *row;

    if (!list)
        return oom(err);
    for (size_t i = a ? json_array_size(a->artifacts) : 0; i-- > 0 && (int)json_array_size(list) < last;) {
        row = json_array_get(a->artifacts, i);
        if (strcmp(json_string_value(json_object_get(row, "conversation_id")), conversation_id) ||
            (type && strcmp(json_string_value(json_object_get(row, "type")), type)))
            continue;
        if (json_array_insert_new(list, 0, public_row(row))) {
            json_decref(list);
            return oom(err);
        }
    }
    *out = list;
    return KEEL_OK;
}

static int fact_matches(const struct mem_conversations *conv, const json_t *f,
                        const struct store_fact_query *q)
{
    const char *cid = json_string_value(json_object_get(f, "conversation_id"));

    if (q->store && strcmp(q->store, json_string_value(json_object_get(f, "store"))))
        return 0;
    if (q->conversation_id && strcmp(q->conversation_id, cid))
        return 0;
    if (q->artifact_id && strcmp(q->artifact_id, json_string_value(json_object_get(f, "artifact_id"))))
        return 0;
    if (q->text && !strcasestr(json_string_value(json_object_get(f, "topic")), q->text) &&
        !strcasestr(json_string_value(json_object_get(f, "fact")), q->text))
        return 0;
    if (q->owner) {
        struct store_conversation c;
        struct keel_error ignored;
        int mine;
        if (mem_conv_load(conv, cid, &c, &ignored))
            return 0;
        mine = c.owner && !strcmp(c.owner, q->owner);
        store_conversation_release(&c);
        return mine;
    }
    return 1;
}

int mem_facts_list(const struct mem_artifacts *a, const struct mem_conversations *conv,
                   const struct store_fact_query *q, json_t **out, struct keel_error *err)
{
    json_t *list = json_array();
    int skipped = 0;

    if (!list)
        return oom(err);
    for (size_t i = a ? json_array_size(a->facts) : 0; i-- > 0 && (int)json_array_size(list) < q->limit;) {
        json_t *f = json_array_get(a->facts, i);
        if (!fact_matches(conv, f, q) || skipped++ < q->offset)
            continue;
        if (json_array_append_new(list, public_fact(f))) {
            json_decref(list);
            return oom(err);
        }
    }
    *out = list;
    return KEEL_OK;
}

int mem_artifact_get(const struct mem_artifacts *a, const char *id, json_t **out,
                     struct keel_error *err)
{
    struct store_fact_query q = {.artifact_id = id, .limit = STORE_LIMIT_MAX};
    const json_t *row;
    json_t *result, *facts = NULL;
    size_t i;

    json_array_foreach(a ? a->artifacts : NULL, i, row) {
        if (strcmp(json_string_value(json_object_get(row, "id")), id))
            continue;
        if (mem_facts_list(a, NULL, &q, &facts, err))
            return err->code;
        result = public_row(row);
        if (!result || json_object_set(result, "conversation_id",
                                       json_object_get(row, "conversation_id")) ||
            json_object_set_new(result, "facts", facts)) {
            json_decref(result);
            return oom(err);
        }
        *out = result;
        return KEEL_OK;
    }
    return keel_error_set(err, KEEL_ENOTFOUND, "artifact_id", "no artifact \"%s\"", id);
}
