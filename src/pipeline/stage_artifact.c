/*
 * stage_artifact.c — artifact (seed 001): the intent gate, then at most
 * one artifact built from the turn's envelopes, validated, rendered once
 * as a check, and distilled into facts. Publish stores the artifact, its
 * facts and the gate's decision (in the decision log, key "artifact") in
 * the turn's one transaction, then appends the artifact to the
 * conversation's JSONL export (artifact_export, after the commit).
 *
 * The envelopes (src/artifact/artifact.h) come from what resolve found:
 * search results (papers, web results) become numbered sources with
 * their snippets; corpus passages become document chunks with their
 * sections; the answer is the plain answer. Everything keeps the number
 * the answer cites it by.
 *
 * Failing closed: a build that cannot meet its contract (too few
 * sources, an empty document, too few steps) leaves the turn as it was —
 * the normal answer goes out — with the reason in the decision log, an
 * info event and a warning log line. Only running out of memory fails
 * the turn.
 */
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/log.h"
#include "pipeline/turn.h"

#define SNIPPET_MAX 1000

static int oom(struct keel_error *err)
{
    return keel_error_set(err, KEEL_ENOMEM, "artifact", "out of memory");
}

/* The result item (paper, passage, web result) behind source `s`. */
static const json_t *item_of(const struct turn *t, const json_t *s)
{
    const json_t *doc = json_object_get(s, "document_id"), *id = json_object_get(s, "id");
    const json_t *url = json_object_get(s, "source"), *item;
    size_t k;

    for (int i = 0; i < t->state.blueprint.n_subs; i++)
        json_array_foreach(t->results[i].items, k, item) {
            if (doc && json_equal((json_t *)doc, json_object_get(item, "document_id")))
                return item;
            if (!doc && id && json_equal((json_t *)id, json_object_get(item, "id")))
                return item;
            if (!doc && !id && url && json_equal((json_t *)url, json_object_get(item, "url")))
                return item;
        }
    return NULL;
}

/* `text` cut to SNIPPET_MAX bytes, never inside a UTF-8 sequence. */
static json_t *cut(const char *text)
{
    size_t n = strlen(text);

    if (n <= SNIPPET_MAX)
        return json_string(text);
    n = SNIPPET_MAX;
    while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--;
    return json_stringn(text, n);
}

/* `value` as compact JSON text with sorted keys, or NULL (out of memory). */
static char *dump(const json_t *value)
{
    struct keel_buf b;

    keel_buf_init(&b, ARTIFACT_JSON_MAX);
    if (keel_json_append(&b, value, JSON_COMPACT)) {
        keel_buf_release(&b);
        return NULL;
    }
    return keel_buf_detach(&b, NULL);
}

/* SearchEnvelope sources and DocEnvelope chunks from the turn's sources. */
static int envelopes(const struct turn *t, json_t *sources, json_t *chunks)
{
    const json_t *s;
    size_t i;
    int bad = 0;

    json_array_foreach(t->sources, i, s) {
        const char *kind = json_string_value(json_object_get(s, "kind"));
        const json_t *item = item_of(t, s);
        json_t *e;

        if (!kind)
            continue;
        if (!strcmp(kind, "passage")) {
            const char *text = json_string_value(json_object_get(item, "text"));
            e = json_pack("{s:O, s:O, s:O?, s:O?, s:O?, s:o}", "n", json_object_get(s, "n"),
                          "document_id", json_object_get(s, "document_id"), "title",
                          json_object_get(s, "title"), "source", json_object_get(s, "source"),
                          "section", json_object_get(s, "section"), "text",
                          text ? json_string(text) : json_string(""));
            bad |= json_array_append_new(chunks, e);
        } else {
            const char *snippet = json_string_value(json_object_get(item, "abstract"));
            if (!snippet)
                snippet = json_string_value(json_object_get(item, "snippet"));
            e = json_pack("{s:O, s:O?, s:O?, s:O?, s:O?}", "n", json_object_get(s, "n"), "title",
                          json_object_get(s, "title"), "url",
                          json_object_get(s, strcmp(kind, "web") ? "url" : "source"), "year",
                          json_object_get(s, "year"), "venue", json_object_get(s, "venue"));
            if (e && snippet && *snippet)
                bad |= json_object_set_new(e, "snippet", cut(snippet));
            bad |= json_array_append_new(sources, e);
        }
    }
    return bad;
}

/* What ran, for the artifact's Method section: "search_papers “sleep”". */
static void method_of(const struct turn *t, struct keel_buf *b)
{
    for (int i = 0; i < t->state.blueprint.n_subs; i++) {
        const struct sub_result *r = &t->results[i];
        if (!r->ran)
            continue;
        keel_buf_addf(b, "%s%s \u201c%s\u201d: %zu result(s)", b->len ? "; " : "", r->tool,
                      json_string_value(json_object_get(r->args, "query")) ?: "",
                      json_array_size(r->items));
    }
}

/* The decision as logged: the gate's JSON plus outcome (built | none |
 * failed) and, for a failed build, its reason code and message. */
static int decision(struct turn *t, const struct artifact_gate_result *gate, const char *outcome,
                    const struct keel_error *build)
{
    json_t *d = artifact_gate_json(&t->pl->artifacts, gate);

    if (!d || json_object_set_new(d, "outcome", json_string(outcome)) ||
        json_object_set_new(d, "type", t->artifact ? json_incref(json_object_get(t->artifact, "type"))
                                                   : json_null())) {
        json_decref(d);
        return KEEL_ENOMEM;
    }
    if (build && (json_object_set_new(d, "reason", json_string(build->field)) ||
                  json_object_set_new(d, "detail", json_string(build->message)))) {
        json_decref(d);
        return KEEL_ENOMEM;
    }
    t->artifact_gate = d;
    return KEEL_OK;
}

static int build(struct turn *t, const struct artifact_gate_result *gate, struct keel_error *err)
{
    struct artifact_envelope env;
    struct keel_error why;
    struct keel_buf method, markdown;
    char question[STATE_TEXT_MAX], id[KEEL_ID_MAX + 8];
    json_t *sources = json_array(), *chunks = json_array(), *art = NULL;
    const json_t *by_model = json_object_get(t->model_log, "answer");
    int model = by_model && json_is_string(json_object_get(by_model, "status")) &&
                !strcmp(json_string_value(json_object_get(by_model, "status")), "ok");
    int rc = KEEL_OK;

    keel_buf_init(&method, 2000);
    keel_buf_init(&markdown, 4 * ARTIFACT_JSON_MAX);
    keel_error_clear(&why);
    if (!sources || !chunks || envelopes(t, sources, chunks)) {
        rc = oom(err);
        goto out;
    }
    method_of(t, &method);
    /* Never a patient identifier: the question as the state keeps it. */
    extract_redact(t->state.blueprint.question[0] ? t->state.blueprint.question : t->effective,
                   strlen(t->state.blueprint.question[0] ? t->state.blueprint.question
                                                         : t->effective),
                   question, sizeof(question));
    snprintf(id, sizeof(id), "art_%s",
             !strncmp(t->correlation_id, "turn_", 5) ? t->correlation_id + 5 : t->correlation_id);
    env = (struct artifact_envelope){
        .id = id, .conversation_id = t->conversation_id, .correlation_id = t->correlation_id,
        .turn = t->seq, .now_ms = t->now, .question = question, .answer = t->answer.data,
        .sources = sources, .chunks = chunks, .method = method.len ? method.data : NULL,
        /* the model phrased it, or the extractive answer cites sources */
        .grounded = model || json_array_size(t->sources) > 0,
        .cited_only = !model};
    rc = artifact_build(&t->pl->artifacts, gate->type, &env, &art, &why);
    if (rc == KEEL_ENOMEM) {
        rc = oom(err);
        goto out;
    }
    if (!rc && (rc = artifact_render(art, &markdown)) != KEEL_OK) {
        /* A contract that cannot be shown is not kept: fail closed. */
        keel_error_set(&why, KEEL_EINVAL, "render", "the artifact cannot be rendered (%s)",
                       keel_strerror(rc));
        json_decref(art);
        art = NULL;
    }
    if (!rc) {   /* publish stores it as one text of at most ARTIFACT_JSON_MAX bytes */
        long failures = keel_alloc_failures();
        char *text = dump(art);
        if (!text && keel_alloc_failures() != failures) {
            rc = oom(err);
            goto out;
        }
        if (!text) {
            rc = keel_error_set(&why, KEEL_EINVAL, "too_large", "the artifact is over %u bytes",
                                ARTIFACT_JSON_MAX);
            json_decref(art);
            art = NULL;
        }
        keel_free(text);
    }
    if (rc) {   /* fail closed: the plain answer goes out */
        keel_log(KEEL_LOG_WARN, "artifact.failed",
                 json_pack("{s:s, s:s, s:s, s:s}", "correlation_id", t->correlation_id, "type",
                           artifact_type_name(gate->type), "reason", why.field, "detail",
                           why.message));
        rc = decision(t, gate, "failed", &why) ||
                     turn_emit(t, "info", "artifact.failed",
                               json_pack("{s:s, s:s}", "reason", why.field, "detail", why.message),
                               "%s not built: %s (%s)", artifact_type_name(gate->type), why.field,
                               why.message)
                 ? oom(err) : KEEL_OK;
        goto out;
    }
    t->artifact = art;
    art = NULL;
    if (!(t->facts = artifact_distill(&t->pl->artifacts, t->artifact,
                                      policy_topic_class_name(t->pl->policy, &t->decision))) ||
        decision(t, gate, "built", NULL) ||
        turn_emit(t, "info", "artifact.built",
                  json_pack("{s:O, s:O, s:O, s:I}", "id", json_object_get(t->artifact, "id"),
                            "type", json_object_get(t->artifact, "type"), "title",
                            json_object_get(t->artifact, "title"), "facts",
                            (json_int_t)json_array_size(t->facts)),
                  "%s %s built, %zu fact(s)", artifact_type_name(gate->type),
                  json_string_value(json_object_get(t->artifact, "id")),
                  json_array_size(t->facts)))
        rc = oom(err);
out:
    json_decref(art);
    json_decref(sources);
    json_decref(chunks);
    keel_buf_release(&method);
    keel_buf_release(&markdown);
    return rc;
}

int stage_artifact(struct turn *t, struct keel_error *err)
{
    struct artifact_gate_input in = {
        .text = t->effective,
        .len = t->effective_len ? t->effective_len : strlen(t->effective),
        .route = (int)t->decision.route,
        .smalltalk = t->decision.reason == R_SMALLTALK,
        .clarification = t->clarification != NULL,
    };
    struct artifact_gate_result gate;
    const json_t *s;
    size_t i;

    json_array_foreach(t->sources, i, s) {
        const char *kind = json_string_value(json_object_get(s, "kind"));
        in.has_document |= kind && !strcmp(kind, "passage");
        in.has_sources |= kind && (!strcmp(kind, "paper") || !strcmp(kind, "web"));
    }
    artifact_gate(&t->pl->artifacts, &in, &gate);
    if (gate.type == ARTIFACT_NONE) {
        if (!t->pl->artifacts.enabled)
            return turn_emit(t, "info", NULL, NULL, "no artifact contract is enabled")
                       ? oom(err) : KEEL_OK;
        return decision(t, &gate, "none", NULL) ||
                       turn_emit(t, "info", "artifact.none",
                                 json_pack("{s:s, s:f}", "reason", gate.reason, "confidence",
                                           gate.confidence),
                                 "no artifact: %s (%s)", gate.reason, gate.detail)
                   ? oom(err) : KEEL_OK;
    }
    return build(t, &gate, err);
}

int artifact_note_skipped(struct turn *t)
{
    struct artifact_gate_input in = {.clarification = 1, .route = (int)t->decision.route};
    struct artifact_gate_result gate;

    if (!t->pl->artifacts.enabled || t->artifact_gate)
        return KEEL_OK;
    artifact_gate(&t->pl->artifacts, &in, &gate);
    return decision(t, &gate, "none", NULL);
}

int artifact_record(struct turn *t, struct artifact_write *w)
{
    const json_t *f;
    size_t i;

    memset(w, 0, sizeof(*w));
    if (!t->artifact)
        return KEEL_OK;
    if (!(w->body = dump(t->artifact)))
        return KEEL_ENOMEM;
    w->has = 1;
    w->art.id = json_string_value(json_object_get(t->artifact, "id"));
    w->art.type = json_string_value(json_object_get(t->artifact, "type"));
    w->art.title = json_string_value(json_object_get(t->artifact, "title"));
    w->art.body_json = w->body;
    w->art.facts = w->facts;
    json_array_foreach(t->facts, i, f) {
        if (i == ARTIFACT_FACTS_MAX)
            break;
        if (!(w->tags[i] = dump(json_object_get(f, "tags"))))
            return KEEL_ENOMEM;
        w->facts[i] = (struct store_fact){
            .id = json_string_value(json_object_get(f, "id")),
            .store = json_string_value(json_object_get(f, "store")),
            .topic = json_string_value(json_object_get(f, "topic")),
            .fact = json_string_value(json_object_get(f, "fact")),
            .source = json_string_value(json_object_get(f, "source")),
            .confidence = json_number_value(json_object_get(f, "confidence")),
            .domain = json_string_value(json_object_get(f, "domain")),
            .tags_json = w->tags[i],
            .evidence_snippet = json_string_value(json_object_get(f, "evidence_snippet"))};
        w->art.n_facts = i + 1;
    }
    return KEEL_OK;
}

void artifact_write_release(struct artifact_write *w)
{
    keel_free(w->body);
    for (int i = 0; i < ARTIFACT_FACTS_MAX; i++)
        keel_free(w->tags[i]);
    memset(w, 0, sizeof(*w));
}

void artifact_export(struct turn *t)
{
    struct keel_error err;

    if (!t->artifact || !t->pl->artifacts_dir)
        return;
    keel_error_clear(&err);
    if (artifact_export_append(t->pl->artifacts_dir, t->conversation_id, t->artifact, &err)) {
        keel_log(KEEL_LOG_WARN, "artifact.export_failed",
                 json_pack("{s:s, s:O, s:s}", "correlation_id", t->correlation_id, "artifact_id",
                           json_object_get(t->artifact, "id"), "error", err.message));
        return;
    }
    t->artifact_exported = 1;
}
