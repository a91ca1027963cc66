/*
 * contract.c — seed 001's three artifact contracts as data. Every
 * artifact is one envelope:
 *
 *   {id: "art_…", type, version: 1, conversation_id, turn, correlation_id,
 *    created_at, title, content}
 *
 * and `content` is the contract's:
 *
 *   research_brief  {question, summary, claims: [{text, citations: [n]}],
 *                    sources: [{n, title, url?, year?, venue?, snippet?}],
 *                    extra_sections?}
 *   doc_extract     {question, summary?, documents: [{id, title?, source?}],
 *                    items: [{text, ref: {document_id, section?, page?}}],
 *                    extra_sections?}
 *   plan            {goal, steps: [{n, action}], extra_sections?}
 *
 * `extra_sections: [{title, body}]` is every contract's escape hatch, so a
 * new heading needs no new schema; nothing in it ever becomes a fact.
 * The tables say each field's type and caps; contract_check_refs holds
 * the rules that span fields.
 */
#include <string.h>

#include "artifact/artifact_int.h"
#include "core/json.h"

#define STR(name, req, max) {name, CF_STRING, req, (req) ? 1 : 0, max, NULL}
#define INT(name, req, lo, hi) {name, CF_INT, req, lo, hi, NULL}
#define END {NULL, CF_STRING, 0, 0, 0, NULL}

static const struct contract_field extra_fields[] = {
    STR("title", 1, CONTRACT_TITLE_MAX), STR("body", 1, 8192), END};
static const struct contract_field extra_item = {"", CF_OBJECT, 1, 0, 0, extra_fields};
#define EXTRA {"extra_sections", CF_LIST, 0, 0, CONTRACT_EXTRA_MAX, &extra_item}

/* research_brief */
static const struct contract_field citation_item = INT("", 1, 1, CONTRACT_SOURCES_MAX);
static const struct contract_field claim_fields[] = {
    STR("text", 1, CONTRACT_TEXT_MAX),
    {"citations", CF_LIST, 1, 0, 10, &citation_item},
    END};
static const struct contract_field claim_item = {"", CF_OBJECT, 1, 0, 0, claim_fields};
static const struct contract_field source_fields[] = {
    INT("n", 1, 1, CONTRACT_SOURCES_MAX), STR("title", 1, 1024), STR("url", 0, 2048),
    INT("year", 0, 0, 9999), STR("venue", 0, 512), STR("snippet", 0, CONTRACT_TEXT_MAX), END};
static const struct contract_field source_item = {"", CF_OBJECT, 1, 0, 0, source_fields};
static const struct contract_field brief_fields[] = {
    STR("question", 1, 1024),
    STR("summary", 1, 4096),
    {"claims", CF_LIST, 1, 1, CONTRACT_ITEMS_MAX, &claim_item},
    {"sources", CF_LIST, 1, 1, CONTRACT_SOURCES_MAX, &source_item},
    EXTRA,
    END};

/* doc_extract */
static const struct contract_field document_fields[] = {
    STR("id", 1, 512), STR("title", 0, 1024), STR("source", 0, 2048), END};
static const struct contract_field document_item = {"", CF_OBJECT, 1, 0, 0, document_fields};
static const struct contract_field ref_fields[] = {
    STR("document_id", 1, 512), STR("section", 0, 1024), INT("page", 0, 1, 100000), END};
static const struct contract_field item_fields[] = {
    STR("text", 1, CONTRACT_TEXT_MAX), {"ref", CF_OBJECT, 1, 0, 0, ref_fields}, END};
static const struct contract_field item_item = {"", CF_OBJECT, 1, 0, 0, item_fields};
static const struct contract_field extract_fields[] = {
    STR("question", 1, 1024),
    STR("summary", 0, 4096),
    {"documents", CF_LIST, 1, 1, CONTRACT_ITEMS_MAX, &document_item},
    {"items", CF_LIST, 1, 1, CONTRACT_ITEMS_MAX, &item_item},
    EXTRA,
    END};

/* plan */
static const struct contract_field step_fields[] = {
    INT("n", 1, 1, CONTRACT_ITEMS_MAX), STR("action", 1, CONTRACT_TEXT_MAX), END};
static const struct contract_field step_item = {"", CF_OBJECT, 1, 0, 0, step_fields};
static const struct contract_field plan_fields[] = {
    STR("goal", 1, 1024), {"steps", CF_LIST, 1, 1, CONTRACT_ITEMS_MAX, &step_item}, EXTRA, END};

const struct contract_field contract_envelope[] = {
    STR("id", 1, 64),
    STR("type", 1, 32),
    INT("version", 1, 1, 1),
    STR("conversation_id", 1, 160),
    INT("turn", 1, 1, 1000000000),
    STR("correlation_id", 1, 64),
    STR("created_at", 1, 40),
    STR("title", 1, CONTRACT_TITLE_MAX),
    {"content", CF_OBJECT, 1, 0, 0, NULL},   /* by type: contract_content() */
    END};

const struct contract_field *contract_content(int type)
{
    static const struct contract_field *const by_type[ARTIFACT_TYPES] = {
        brief_fields, extract_fields, plan_fields};

    return type >= 0 && type < ARTIFACT_TYPES ? by_type[type] : NULL;
}

/* Nonzero when `list` has an object whose `key` equals `value`. */
static int has(const json_t *list, const char *key, const json_t *value)
{
    const json_t *item;
    size_t i;

    json_array_foreach(list, i, item)
        if (json_equal(json_object_get(item, key), (json_t *)value))
            return 1;
    return 0;
}

static int check_brief(const json_t *content, struct keel_error *err)
{
    const json_t *sources = json_object_get(content, "sources"), *s, *claim, *n;
    char field[KEEL_JSON_PATH_MAX];
    size_t i, k;

    json_array_foreach(sources, i, s)
        for (k = 0; k < i; k++)
            if (json_equal(json_object_get(s, "n"),
                           json_object_get(json_array_get(sources, k), "n")))
                return keel_error_set(err, KEEL_EINVAL, "content.sources", "number %lld twice",
                                      (long long)json_integer_value(json_object_get(s, "n")));
    json_array_foreach(json_object_get(content, "claims"), i, claim)
        json_array_foreach(json_object_get(claim, "citations"), k, n)
            if (!has(sources, "n", n)) {
                snprintf(field, sizeof(field), "content.claims[%zu].citations[%zu]", i, k);
                return keel_error_set(err, KEEL_EINVAL, field, "cites source %lld, which the brief does not have",
                                      (long long)json_integer_value(n));
            }
    return KEEL_OK;
}

static int check_extract(const json_t *content, struct keel_error *err)
{
    const json_t *docs = json_object_get(content, "documents"), *d, *item;
    char field[KEEL_JSON_PATH_MAX];
    size_t i, k;

    json_array_foreach(docs, i, d)
        for (k = 0; k < i; k++)
            if (json_equal(json_object_get(d, "id"), json_object_get(json_array_get(docs, k), "id")))
                return keel_error_set(err, KEEL_EINVAL, "content.documents", "document \"%s\" twice",
                                      json_string_value(json_object_get(d, "id")));
    json_array_foreach(json_object_get(content, "items"), i, item) {
        const json_t *doc = json_object_get(json_object_get(item, "ref"), "document_id");
        if (!has(docs, "id", doc)) {
            snprintf(field, sizeof(field), "content.items[%zu].ref.document_id", i);
            return keel_error_set(err, KEEL_EINVAL, field, "names no document of the extract");
        }
    }
    return KEEL_OK;
}

static int check_plan(const json_t *content, struct keel_error *err)
{
    const json_t *step;
    char field[KEEL_JSON_PATH_MAX];
    size_t i;

    json_array_foreach(json_object_get(content, "steps"), i, step)
        if (json_integer_value(json_object_get(step, "n")) != (json_int_t)i + 1) {
            snprintf(field, sizeof(field), "content.steps[%zu].n", i);
            return keel_error_set(err, KEEL_EINVAL, field, "must be %zu: steps count from 1",
                                  i + 1);
        }
    return KEEL_OK;
}

int contract_check_refs(int type, const json_t *content, struct keel_error *err)
{
    switch (type) {
    case ARTIFACT_RESEARCH_BRIEF: return check_brief(content, err);
    case ARTIFACT_DOC_EXTRACT: return check_extract(content, err);
    case ARTIFACT_PLAN: return check_plan(content, err);
    }
    return keel_error_set(err, KEEL_EINVAL, "type", "is not a contract");
}
