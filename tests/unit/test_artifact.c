/*
 * test_artifact.c — seed 001's artifact contracts (src/artifact/), pure
 * parts: no store, no pipeline.
 *
 * TCase "artifact_contract": the validator accepts each contract's valid
 * artifact and refuses, naming the field, unknown keys at every level,
 * missing and blank fields, wrong types, caps, citations of sources the
 * brief lacks, duplicate sources, items naming no document, steps out
 * of order, a NUL inside a string, a bad id or type.
 * TCase "artifact_render": each contract's markdown; a buffer at its cap.
 * TCase "artifact_gate": the pack section's errors; every hard rule and
 * its reason (off, clarification, blocked route, too short, smalltalk,
 * needs document, needs sources, required group), scoring and the
 * threshold, one artifact per turn (best wins, ties in contract order),
 * the decision as JSON.
 * TCase "artifact_build": the three pipelines from envelopes, and each
 * fail-closed reason; what they build always validates.
 * TCase "artifact_distill": only cited claims and referenced items,
 * never a plan or extra_sections.
 * TCase "artifact_export": file names of hostile conversation ids, the
 * default directory, appends, a symbolic link and an unusable directory.
 * Every TCase has the leak fixture.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact/artifact.h"
#include "core/alloc.h"
#include "core/buf.h"
#include "pack/pack.h"
#include "unit.h"

#define T0 INT64_C(1770465600000)   /* 2026-02-07T12:00:00Z */

static const char *const routes[] = {"command", "local_memory_intent", "conversion_tool",
                                     "websearch", "llm_only"};
enum { R_COMMAND, R_MEMORY, R_CONVERSION, R_WEBSEARCH, R_LLM };

static const char *const test_pack =
    "name: t\n"
    "roles: {user: [read]}\n"
    "artifacts:\n"
    "  threshold: 0.75\n"
    "  min_words: 4\n"
    "  contracts:\n"
    "    research_brief:\n"
    "      needs: [sources]\n"
    "      routes: {websearch: 0.35}\n"
    "      groups:\n"
    "        synthesis: {weight: 0.45, phrases: [summarize, overview]}\n"
    "        citation: {weight: 0.3, phrases: [with citations, cite]}\n"
    "      min_sources: 2\n"
    "      max_items: 3\n"
    "      facts: {store: researched, confidence: 0.6}\n"
    "    doc_extract:\n"
    "      needs: [document]\n"
    "      groups:\n"
    "        extract: {weight: 0.45, phrases: [extract, key points]}\n"
    "        document: {weight: 0.35, phrases: [handbook, document]}\n"
    "      facts: {store: verified, confidence: 0.8}\n"
    "    plan:\n"
    "      groups:\n"
    "        personal: {weight: 0.35, required: true, phrases: [i, my, me]}\n"
    "        action: {weight: 0.45, required: true, phrases: [plan, steps]}\n"
    "      min_steps: 2\n"
    "      facts: {store: verified, confidence: 0.9}\n";

struct fixture {
    struct pack *pack;
    struct artifact_conf conf;
};

static int conf_from(const char *yaml, struct fixture *f, struct keel_error *err)
{
    int rc;

    memset(f, 0, sizeof(*f));
    keel_error_clear(err);
    if ((rc = pack_parse(yaml, strlen(yaml), "test.yaml", &f->pack, err)))
        return rc;
    if ((rc = artifact_conf_load(f->pack, routes, 5, &f->conf, err))) {
        pack_free(f->pack);
        f->pack = NULL;
    }
    return rc;
}

static void fixture_open(struct fixture *f)
{
    struct keel_error err;

    ck_assert_msg(conf_from(test_pack, f, &err) == KEEL_OK, "%s: %s", err.field, err.message);
}

static void fixture_close(struct fixture *f)
{
    artifact_conf_release(&f->conf);
    pack_free(f->pack);
}

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);

    ck_assert_msg(v != NULL, "bad test JSON: %s at %d", e.text, e.position);
    return v;
}

static const char *const valid_brief =
    "{\"id\":\"art_1\",\"type\":\"research_brief\",\"version\":1,\"conversation_id\":\"c1\","
    "\"turn\":1,\"correlation_id\":\"turn_1\",\"created_at\":\"2026-02-07T12:00:00.000Z\","
    "\"title\":\"sleep and memory\",\"content\":{\"question\":\"what helps memory?\","
    "\"summary\":\"Two studies.\",\"claims\":[{\"text\":\"Naps help memory.\",\"citations\":[1]},"
    "{\"text\":\"Slow waves fall with age.\",\"citations\":[2, 1]},"
    "{\"text\":\"An uncited view.\",\"citations\":[]}],"
    "\"sources\":[{\"n\":1,\"title\":\"Naps\",\"url\":\"https://example.org/a\",\"year\":2025,"
    "\"venue\":\"Sleep Reports\",\"snippet\":\"Naps help memory. More.\"},"
    "{\"n\":2,\"title\":\"Age\"}],"
    "\"extra_sections\":[{\"title\":\"Method\",\"body\":\"Naps always help everyone.\"}]}}";

static const char *const valid_extract =
    "{\"id\":\"art_2\",\"type\":\"doc_extract\",\"version\":1,\"conversation_id\":\"c1\","
    "\"turn\":2,\"correlation_id\":\"turn_2\",\"created_at\":\"2026-02-07T12:00:00.000Z\","
    "\"title\":\"deadlines\",\"content\":{\"question\":\"deadlines?\","
    "\"documents\":[{\"id\":\"corpus/a.md\",\"title\":\"Appeals\",\"source\":\"/x/a.md\"},"
    "{\"id\":\"corpus/b.md\"}],"
    "\"items\":[{\"text\":\"File within 60 days | by mail.\",\"ref\":{\"document_id\":\"corpus/a.md\","
    "\"section\":\"Appeals > Deadline\"}},"
    "{\"text\":\"Call us first.\",\"ref\":{\"document_id\":\"corpus/b.md\"}},"
    "{\"text\":\"See page four.\",\"ref\":{\"document_id\":\"corpus/b.md\",\"page\":4}}]}}";

static const char *const valid_plan =
    "{\"id\":\"art_3\",\"type\":\"plan\",\"version\":1,\"conversation_id\":\"c1\","
    "\"turn\":3,\"correlation_id\":\"turn_3\",\"created_at\":\"2026-02-07T12:00:00.000Z\","
    "\"title\":\"appeal plan\",\"content\":{\"goal\":\"file an appeal\","
    "\"steps\":[{\"n\":1,\"action\":\"Read the denial letter.\"},{\"n\":2,\"action\":\"Call the plan.\"}]}}";

/* ---- artifact_contract ------------------------------------------------------ */

static void expect_invalid(json_t *a, const char *field)
{
    struct keel_error err;

    keel_error_clear(&err);
    ck_assert_int_eq(artifact_validate(a, &err), KEEL_EINVAL);
    ck_assert_msg(!strcmp(err.field, field), "field %s (%s), expected %s", err.field, err.message,
                  field);
    json_decref(a);
}

/* A valid artifact with `path`'s value replaced by `value` (stolen);
 * path is "a.b.c" with numbers for list items. NULL value: deleted. */
static json_t *with(const char *base, const char *path, json_t *value)
{
    json_t *a = parse(base), *at = a;
    const char *p = path, *dot;
    char part[64];

    /* walk to the parent of the last part */
    while ((dot = strchr(p, '.'))) {
        snprintf(part, sizeof(part), "%.*s", (int)(dot - p), p);
        at = json_is_array(at) ? json_array_get(at, (size_t)strtol(part, NULL, 10))
                               : json_object_get(at, part);
        ck_assert_ptr_nonnull(at);
        p = dot + 1;
    }
    if (json_is_array(at)) {
        if (value)
            json_array_set_new(at, (size_t)strtol(p, NULL, 10), value);
        else
            json_array_remove(at, (size_t)strtol(p, NULL, 10));
    } else if (value) {
        json_object_set_new(at, p, value);
    } else {
        json_object_del(at, p);
    }
    return a;
}

START_TEST(test_validate_valid)
{
    const char *const all[] = {valid_brief, valid_extract, valid_plan};
    struct keel_error err;

    for (int i = 0; i < 3; i++) {
        json_t *a = parse(all[i]);
        keel_error_clear(&err);
        ck_assert_msg(artifact_validate(a, &err) == KEEL_OK, "%d: %s: %s", i, err.field,
                      err.message);
        json_decref(a);
    }
}
END_TEST

START_TEST(test_validate_unknown_keys)
{
    expect_invalid(with(valid_brief, "extra", json_true()), "extra");
    expect_invalid(parse("{\"\": 1}"), "\"\"");   /* an empty key is named too */
    expect_invalid(with(valid_brief, "content.notes", json_string("x")), "content.notes");
    expect_invalid(with(valid_brief, "content.claims.0.confidence", json_real(0.5)),
                   "content.claims[0].confidence");
    expect_invalid(with(valid_extract, "content.items.1.ref.line", json_integer(3)),
                   "content.items[1].ref.line");
    /* a plan has no sources */
    expect_invalid(with(valid_plan, "content.sources", json_array()), "content.sources");
}
END_TEST

START_TEST(test_validate_required_and_types)
{
    expect_invalid(with(valid_brief, "title", NULL), "title");
    expect_invalid(with(valid_brief, "content.summary", NULL), "content.summary");
    expect_invalid(with(valid_brief, "content.summary", json_string("  \n ")), "content.summary");
    expect_invalid(with(valid_brief, "content.claims", json_array()), "content.claims");
    expect_invalid(with(valid_brief, "content.claims.0.citations", json_string("1")),
                   "content.claims[0].citations");
    expect_invalid(with(valid_brief, "content.sources.0.year", json_string("2025")),
                   "content.sources[0].year");
    expect_invalid(with(valid_brief, "turn", json_integer(0)), "turn");
    expect_invalid(with(valid_brief, "version", json_integer(2)), "version");
    expect_invalid(with(valid_brief, "content", json_array()), "content");
    expect_invalid(with(valid_extract, "content.items.0.ref", NULL), "content.items[0].ref");
    expect_invalid(with(valid_extract, "content.items.2.ref.page", json_integer(0)),
                   "content.items[2].ref.page");
    expect_invalid(with(valid_plan, "content.steps.1.action", json_null()),
                   "content.steps[1].action");
    expect_invalid(parse("[]"), "artifact");
}
END_TEST

START_TEST(test_validate_caps)
{
    char *big = keel_malloc(5000);
    json_t *claims = json_array();

    memset(big, 'a', 4999);
    big[4999] = '\0';
    expect_invalid(with(valid_brief, "content.summary", json_string(big)), "content.summary");
    keel_free(big);
    for (int i = 0; i < 21; i++)
        json_array_append_new(claims, json_pack("{s:s, s:[i]}", "text", "x y z", "citations", 1));
    expect_invalid(with(valid_brief, "content.claims", claims), "content.claims");
    /* a NUL inside a string */
    expect_invalid(with(valid_brief, "title", json_stringn("a\0b", 3)), "title");
}
END_TEST

START_TEST(test_validate_cross_rules)
{
    expect_invalid(with(valid_brief, "content.claims.1.citations.0", json_integer(3)),
                   "content.claims[1].citations[0]");
    expect_invalid(with(valid_brief, "content.sources.1.n", json_integer(1)), "content.sources");
    expect_invalid(with(valid_extract, "content.items.0.ref.document_id", json_string("corpus/z.md")),
                   "content.items[0].ref.document_id");
    expect_invalid(with(valid_extract, "content.documents.1.id", json_string("corpus/a.md")),
                   "content.documents");
    expect_invalid(with(valid_plan, "content.steps.1.n", json_integer(3)), "content.steps[1].n");
    expect_invalid(with(valid_plan, "type", json_string("memo")), "type");
    expect_invalid(with(valid_plan, "id", json_string("x_3")), "id");
    /* a brief's content under a plan's type */
    expect_invalid(with(valid_brief, "type", json_string("plan")), "content.question");
}
END_TEST

/* ---- artifact_render ------------------------------------------------------------ */

static char *render(const char *text)
{
    json_t *a = parse(text);
    struct keel_buf b;

    keel_buf_init(&b, 1 << 20);
    ck_assert_int_eq(artifact_render(a, &b), KEEL_OK);
    json_decref(a);
    return keel_buf_detach(&b, NULL);
}

START_TEST(test_render_each_contract)
{
    char *md = render(valid_brief);

    ck_assert_msg(strstr(md, "# Research brief: sleep and memory\n"), "%s", md);
    ck_assert_msg(strstr(md, "**Question:** what helps memory?"), "%s", md);
    ck_assert_msg(strstr(md, "## Findings\n\n- Naps help memory. [1]\n"), "%s", md);
    ck_assert_msg(strstr(md, "- Slow waves fall with age. [2] [1]\n"), "%s", md);
    ck_assert_msg(strstr(md, "1. Naps (2025, Sleep Reports) \u2014 <https://example.org/a>\n"),
                  "%s", md);
    ck_assert_msg(strstr(md, "2. Age\n"), "%s", md);
    ck_assert_msg(strstr(md, "## Method\n\nNaps always help everyone.\n"), "%s", md);
    keel_free(md);

    md = render(valid_extract);
    ck_assert_msg(strstr(md, "# Document extract: deadlines"), "%s", md);
    ck_assert_msg(strstr(md, "| 1 | File within 60 days \\| by mail. | corpus/a.md \u00a7 Appeals > Deadline |"),
                  "%s", md);
    ck_assert_msg(strstr(md, "| 3 | See page four. | corpus/b.md, p. 4 |"), "%s", md);
    ck_assert_msg(strstr(md, "- corpus/a.md: Appeals\n- corpus/b.md\n"), "%s", md);
    keel_free(md);

    md = render(valid_plan);
    ck_assert_msg(strstr(md, "# Plan: appeal plan\n\n**Goal:** file an appeal\n\n## Steps\n\n"
                             "1. Read the denial letter.\n2. Call the plan.\n"),
                  "%s", md);
    keel_free(md);
}
END_TEST

START_TEST(test_render_cap)
{
    json_t *a = parse(valid_brief);
    struct keel_buf b;

    keel_buf_init(&b, 64);
    ck_assert_int_eq(artifact_render(a, &b), KEEL_ETOOBIG);
    keel_buf_release(&b);
    json_decref(a);
}
END_TEST

/* ---- artifact_gate ----------------------------------------------------------------- */

static void gate(struct fixture *f, const char *text, int route, int doc, int sources,
                 struct artifact_gate_result *out)
{
    struct artifact_gate_input in = {text, strlen(text), route, 0, 0, doc, sources};

    artifact_gate(&f->conf, &in, out);
}

START_TEST(test_gate_conf_errors)
{
    static const struct {
        const char *yaml, *field_has, *message_has;
    } cases[] = {
        {"name: t\nroles: {u: [read]}\nartifacts: {colour: red}\n", "test.yaml:3",
         "artifacts.colour"},
        {"name: t\nroles: {u: [read]}\nartifacts: {threshold: 2}\n", "test.yaml", "threshold"},
        {"name: t\nroles: {u: [read]}\nartifacts: {blocked_routes: [teleport]}\n", "test.yaml",
         "blocked_routes[0]"},
        {"name: t\nroles: {u: [read]}\nartifacts:\n  contracts: {memo: {}}\n", "test.yaml",
         "is not a contract"},
        {"name: t\nroles: {u: [read]}\nartifacts:\n  contracts:\n    plan: {routes: {nowhere: 0.3}}\n",
         "test.yaml", "routes.nowhere"},
        {"name: t\nroles: {u: [read]}\nartifacts:\n  contracts:\n    plan:\n      groups: {a: {weight: 1.5, phrases: [x]}}\n",
         "test.yaml", "weight"},
        {"name: t\nroles: {u: [read]}\nartifacts:\n  contracts:\n    plan:\n      groups: {a: {weight: 0.5, phrases: []}}\n",
         "test.yaml", "phrases"},
        {"name: t\nroles: {u: [read]}\nartifacts:\n  contracts:\n    plan: {facts: {store: cloud}}\n",
         "test.yaml", "verified or researched"},
        {"name: t\nroles: {u: [read]}\nartifacts:\n  contracts:\n    plan: {needs: [vibes]}\n",
         "test.yaml", "needs[0]"},
    };
    struct fixture f;
    struct keel_error err;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_msg(conf_from(cases[i].yaml, &f, &err) == KEEL_EINVAL, "case %zu passed", i);
        ck_assert_msg(strstr(err.field, cases[i].field_has), "case %zu: field %s", i, err.field);
        ck_assert_msg(strstr(err.message, cases[i].message_has), "case %zu: %s", i, err.message);
    }
}
END_TEST

START_TEST(test_gate_hard_rules)
{
    struct fixture f, off;
    struct artifact_gate_result r;
    struct artifact_gate_input in = {"summarize this with citations please", 36, R_WEBSEARCH,
                                     0, 0, 1, 1};
    struct keel_error err;

    fixture_open(&f);
    ck_assert_int_eq(conf_from("name: t\nroles: {u: [read]}\n", &off, &err), KEEL_OK);
    artifact_gate(&off.conf, &in, &r);
    ck_assert_str_eq(r.reason, "artifacts_off");
    ck_assert_int_eq(r.type, ARTIFACT_NONE);
    fixture_close(&off);

    in.clarification = 1;
    artifact_gate(&f.conf, &in, &r);
    ck_assert_str_eq(r.reason, "clarification");
    in.clarification = 0;
    for (int route = R_COMMAND; route <= R_CONVERSION; route++) {
        in.route = route;
        artifact_gate(&f.conf, &in, &r);
        ck_assert_str_eq(r.reason, "route_blocked");
        ck_assert_ptr_nonnull(strstr(r.detail, routes[route]));
    }
    in.route = R_WEBSEARCH;
    in.text = "summarize with citations";
    in.len = strlen(in.text);
    artifact_gate(&f.conf, &in, &r);
    ck_assert_str_eq(r.reason, "too_short");
    in.text = "summarize this with citations please";
    in.len = strlen(in.text);
    in.smalltalk = 1;
    artifact_gate(&f.conf, &in, &r);
    ck_assert_str_eq(r.reason, "smalltalk");
    in.smalltalk = 0;
    artifact_gate(&f.conf, &in, &r);
    ck_assert_str_eq(r.reason, "selected");
    ck_assert_int_eq(r.type, ARTIFACT_RESEARCH_BRIEF);
    ck_assert(r.confidence == 1.0);   /* 0.35 + 0.45 + 0.3, capped */
    fixture_close(&f);
}
END_TEST

START_TEST(test_gate_contract_rules)
{
    struct fixture f;
    struct artifact_gate_result r;

    fixture_open(&f);
    /* doc_extract only with a document in context */
    gate(&f, "extract the key points of the handbook", R_LLM, 0, 0, &r);
    ck_assert_str_eq(r.reason, "no_candidate");
    ck_assert_str_eq(r.candidates[ARTIFACT_DOC_EXTRACT].blocked, "needs_document");
    ck_assert_str_eq(r.candidates[ARTIFACT_RESEARCH_BRIEF].blocked, "needs_sources");
    gate(&f, "extract the key points of the handbook", R_LLM, 1, 0, &r);
    ck_assert_str_eq(r.reason, "selected");
    ck_assert_int_eq(r.type, ARTIFACT_DOC_EXTRACT);
    ck_assert(r.confidence == 0.8);
    /* plan only with personal and action wording */
    gate(&f, "what are the steps to appeal", R_LLM, 1, 1, &r);
    ck_assert_str_eq(r.candidates[ARTIFACT_PLAN].blocked, "missing_group");
    ck_assert_int_eq(r.type, ARTIFACT_NONE);
    gate(&f, "help me plan the steps to appeal", R_LLM, 0, 0, &r);
    ck_assert_int_eq(r.type, ARTIFACT_PLAN);
    ck_assert(r.confidence == 0.8);
    /* research briefs favoured on the search route */
    gate(&f, "an overview of sleep research please", R_LLM, 0, 1, &r);
    ck_assert_str_eq(r.reason, "below_threshold");
    ck_assert(r.confidence == 0.45);
    gate(&f, "an overview of sleep research please", R_WEBSEARCH, 0, 1, &r);
    ck_assert_str_eq(r.reason, "selected");
    ck_assert(r.confidence == 0.8);
    /* exactly at the threshold: 0.45 + 0.3 */
    gate(&f, "an overview of sleep with citations", R_LLM, 0, 1, &r);
    ck_assert_str_eq(r.reason, "selected");
    ck_assert(r.confidence == 0.75);
    fixture_close(&f);
}
END_TEST

START_TEST(test_gate_one_per_turn)
{
    struct fixture f;
    struct artifact_gate_result r, again;
    json_t *j;

    fixture_open(&f);
    /* brief 1.0, extract 0.8, plan 0.8: one artifact, the best */
    gate(&f, "summarize my handbook steps plan, extract key points with citations", R_WEBSEARCH,
         1, 1, &r);
    ck_assert_int_eq(r.type, ARTIFACT_RESEARCH_BRIEF);
    ck_assert(r.candidates[ARTIFACT_DOC_EXTRACT].confidence == 0.8);
    ck_assert(r.candidates[ARTIFACT_PLAN].confidence == 0.8);
    /* extract and plan tie at 0.8: the earlier contract wins */
    gate(&f, "extract my handbook plan steps", R_LLM, 1, 0, &r);
    ck_assert_int_eq(r.type, ARTIFACT_DOC_EXTRACT);
    gate(&f, "extract my handbook plan steps", R_LLM, 1, 0, &again);
    ck_assert_mem_eq(&r, &again, sizeof(r));   /* deterministic */
    j = artifact_gate_json(&f.conf, &r);
    ck_assert_str_eq(json_string_value(json_object_get(j, "intent")), "doc_extract");
    ck_assert_str_eq(json_string_value(json_object_get(j, "reason")), "selected");
    ck_assert_uint_eq(json_array_size(json_object_get(j, "candidates")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(j, "candidates"), 0), "blocked")),
                     "needs_sources");
    json_decref(j);
    gate(&f, "ok", R_LLM, 1, 1, &r);
    j = artifact_gate_json(&f.conf, &r);
    ck_assert(json_is_null(json_object_get(j, "intent")));
    ck_assert_uint_eq(json_array_size(json_object_get(j, "candidates")), 0);
    json_decref(j);
    fixture_close(&f);
}
END_TEST

/* ---- artifact_build ------------------------------------------------------------------ */

static struct artifact_envelope envelope(const char *answer, json_t *sources, json_t *chunks)
{
    return (struct artifact_envelope){"art_T1", "conv_1", "turn_T1", 2, T0, "how do naps help memory",
                                      answer, sources, chunks, "search_papers \u201cnaps\u201d",
                                      1, 0};
}

static json_t *papers(int n)
{
    json_t *list = json_array();
    static const char *const abstracts[] = {
        "Naps of an hour improve recall of word pairs. We studied 40 adults.",
        "Slow-wave sleep declines with age. Memory follows.",
        "Short.",
        "Spindles predict overnight gains in memory."};

    for (int i = 0; i < n; i++)
        json_array_append_new(list, json_pack("{s:i, s:s, s:s, s:i, s:s}", "n", i + 1, "title",
                                              "A paper", "url", "https://example.org/p",
                                              "year", 2020 + i, "snippet", abstracts[i % 4]));
    return list;
}

START_TEST(test_build_brief)
{
    struct fixture f;
    struct keel_error err;
    json_t *sources = papers(4), *a = NULL, *claims;
    struct artifact_envelope env = envelope("I found 4 papers on naps:\n1. A paper [1]", sources, NULL);

    fixture_open(&f);
    keel_error_clear(&err);
    ck_assert_msg(artifact_build(&f.conf, ARTIFACT_RESEARCH_BRIEF, &env, &a, &err) == KEEL_OK,
                  "%s: %s", err.field, err.message);
    ck_assert_int_eq(artifact_validate(a, &err), KEEL_OK);
    ck_assert_str_eq(json_string_value(json_object_get(a, "id")), "art_T1");
    ck_assert_str_eq(json_string_value(json_object_get(a, "created_at")), "2026-02-07T12:00:00.000Z");
    claims = json_object_get(json_object_get(a, "content"), "claims");
    /* max_items 3; the source with a two-word text gives none */
    ck_assert_uint_eq(json_array_size(claims), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(claims, 0), "text")),
                     "Naps of an hour improve recall of word pairs.");
    ck_assert_int_eq(json_integer_value(json_array_get(
                         json_object_get(json_array_get(claims, 2), "citations"), 0)),
                     4);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "content"), "summary")),
                     "I found 4 papers on naps:");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(
                                                           json_object_get(a, "content"),
                                                           "extra_sections"),
                                                       0),
                                                       "title")),
                     "Method");
    json_decref(a);
    json_decref(sources);
    fixture_close(&f);
}
END_TEST

START_TEST(test_build_brief_fails_closed)
{
    struct fixture f;
    struct keel_error err;
    json_t *one = papers(1), *none_cited = json_pack("[{s:i, s:s}, {s:i, s:s}]", "n", 1, "title",
                                                     "A", "n", 2, "title", "B");
    json_t *a = NULL;
    struct artifact_envelope env = envelope("An answer line here.", one, NULL);

    fixture_open(&f);
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_RESEARCH_BRIEF, &env, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "too_few_sources");
    ck_assert_str_eq(err.message, "1 source(s); a research brief needs 2");
    ck_assert_ptr_null(a);
    env.sources = none_cited;
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_RESEARCH_BRIEF, &env, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "no_claims");
    env.question = "";
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_RESEARCH_BRIEF, &env, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "no_question");
    ck_assert_ptr_null(a);
    json_decref(one);
    json_decref(none_cited);
    fixture_close(&f);
}
END_TEST

static json_t *chunks(void)
{
    return json_pack("[{s:i, s:s, s:s, s:s, s:s}, {s:i, s:s, s:s, s:s}]", "n", 1, "document_id",
                     "corpus/appeals.md", "title", "Appeals", "section", "Appeals > Deadline",
                     "text", "## Deadline\nFile within 60 days. Use the form. Then wait.", "n", 2,
                     "document_id", "corpus/contact.md", "title", "Contact", "text",
                     "Call 1-800-555-0100 on weekdays. We answer fast.");
}

START_TEST(test_build_extract)
{
    struct fixture f;
    struct keel_error err;
    json_t *c = chunks(), *a = NULL, *items;
    struct artifact_envelope env = envelope(
        "Our materials say:\nYou must file within 60 calendar days. [1]\n"
        "Call member services on weekdays to ask. [2]\nA line citing nothing at all.\n", NULL, c);

    fixture_open(&f);
    keel_error_clear(&err);
    ck_assert_msg(artifact_build(&f.conf, ARTIFACT_DOC_EXTRACT, &env, &a, &err) == KEEL_OK,
                  "%s: %s", err.field, err.message);
    items = json_object_get(json_object_get(a, "content"), "items");
    ck_assert_uint_eq(json_array_size(items), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "text")),
                     "You must file within 60 calendar days.");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_array_get(items, 0), "ref"), "section")),
                     "Appeals > Deadline");
    ck_assert_ptr_null(json_object_get(json_object_get(json_array_get(items, 1), "ref"), "section"));
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(a, "content"), "documents")), 2);
    json_decref(a);

    /* no answer line cites a chunk: the chunks' opening sentences */
    env.answer = "A model answer without markers.";
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_DOC_EXTRACT, &env, &a, &err), KEEL_OK);
    items = json_object_get(json_object_get(a, "content"), "items");
    ck_assert_uint_eq(json_array_size(items), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "text")),
                     "Deadline File within 60 days. Use the form.");
    json_decref(a);
    json_decref(c);
    fixture_close(&f);
}
END_TEST

START_TEST(test_build_extract_fails_closed)
{
    struct fixture f;
    struct keel_error err;
    json_t *empty = json_array(), *blank = json_pack("[{s:i, s:s, s:s}]", "n", 1, "document_id",
                                                       "d", "text", "   \n  ");
    json_t *a = NULL;
    struct artifact_envelope env = envelope("Nothing. [1]", empty, empty);

    fixture_open(&f);
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_DOC_EXTRACT, &env, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "empty_document");
    env.chunks = blank;
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_DOC_EXTRACT, &env, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "empty_document");
    ck_assert_ptr_null(a);
    json_decref(empty);
    json_decref(blank);
    fixture_close(&f);
}
END_TEST

START_TEST(test_build_plan)
{
    struct fixture f;
    struct keel_error err;
    json_t *a = NULL, *steps;
    struct artifact_envelope env = envelope(
        "Read the denial letter first. Then call the plan within a week. [1]\n"
        "- **Send** the appeal form by mail. [2]\nOk.\n", NULL, NULL);

    fixture_open(&f);
    keel_error_clear(&err);
    ck_assert_msg(artifact_build(&f.conf, ARTIFACT_PLAN, &env, &a, &err) == KEEL_OK, "%s: %s",
                  err.field, err.message);
    steps = json_object_get(json_object_get(a, "content"), "steps");
    ck_assert_uint_eq(json_array_size(steps), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(steps, 1), "action")),
                     "Then call the plan within a week.");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(steps, 2), "action")),
                     "Send the appeal form by mail.");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(steps, 2), "n")), 3);
    json_decref(a);
    /* an extractive answer: only the lines citing a source are steps */
    env.cited_only = 1;
    env.answer = "Our materials only partly cover this, so please check with your plan.\n"
                 "Read the denial letter first. Then call the plan within a week. [1]\n"
                 "Send the appeal form by mail. [2]\n";
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_PLAN, &env, &a, &err), KEEL_OK);
    steps = json_object_get(json_object_get(a, "content"), "steps");
    ck_assert_uint_eq(json_array_size(steps), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(steps, 0), "action")),
                     "Read the denial letter first.");
    json_decref(a);
    a = NULL;
    env.answer = "I can't access your records. [1]";
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_PLAN, &env, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "too_few_steps");
    /* the pack's fixed texts alone are nothing to plan from */
    env.grounded = 0;
    env.answer = "I answer from the sources I can search. Ask me to find something, for example this.";
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_build(&f.conf, ARTIFACT_PLAN, &env, &a, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "no_content");
    ck_assert_ptr_null(a);
    fixture_close(&f);
}
END_TEST

START_TEST(test_build_allocation_failures)
{
    struct fixture f;
    json_t *sources = papers(3), *a;
    struct artifact_envelope env = envelope("I found 3 papers on naps:", sources, NULL);
    int done = 0;

    fixture_open(&f);
    for (long n = 0; !done && n < 5000; n++) {
        struct keel_error err;
        long before = keel_alloc_failures();
        int rc;
        a = NULL;
        keel_error_clear(&err);
        keel_alloc_fail_after(n, 0);
        rc = artifact_build(&f.conf, ARTIFACT_RESEARCH_BRIEF, &env, &a, &err);
        keel_alloc_fail_after(-1, 0);
        if (rc == KEEL_OK && keel_alloc_failures() == before) {
            done = 1;
        } else if (rc == KEEL_OK) {   /* jansson hid a failure: callers refuse such turns */
            ck_assert_ptr_nonnull(a);
        } else {
            ck_assert_msg(rc == KEEL_ENOMEM || rc == KEEL_EINVAL, "at %ld: %d %s", n, rc, err.field);
            ck_assert_ptr_null(a);
        }
        json_decref(a);
    }
    ck_assert(done);
    json_decref(sources);
    fixture_close(&f);
}
END_TEST

/* ---- artifact_distill ---------------------------------------------------------------- */

START_TEST(test_distill_brief_cited_only)
{
    struct fixture f;
    json_t *a = parse(valid_brief), *facts, *fact;

    fixture_open(&f);
    facts = artifact_distill(&f.conf, a, "science");
    /* three claims, one uncited; the Method section's "Naps always help
     * everyone." is never a fact */
    ck_assert_uint_eq(json_array_size(facts), 2);
    fact = json_array_get(facts, 0);
    ck_assert_str_eq(json_string_value(json_object_get(fact, "id")), "fact_1_1");
    ck_assert_str_eq(json_string_value(json_object_get(fact, "store")), "researched");
    ck_assert_str_eq(json_string_value(json_object_get(fact, "topic")), "what helps memory?");
    ck_assert_str_eq(json_string_value(json_object_get(fact, "fact")), "Naps help memory.");
    ck_assert_str_eq(json_string_value(json_object_get(fact, "source")), "https://example.org/a");
    ck_assert_str_eq(json_string_value(json_object_get(fact, "evidence_snippet")),
                     "Naps help memory. More.");
    ck_assert(json_real_value(json_object_get(fact, "confidence")) == 0.6);
    ck_assert_str_eq(json_string_value(json_object_get(fact, "domain")), "science");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(fact, "tags"), 1)),
                     "research_brief");
    fact = json_array_get(facts, 1);
    ck_assert_str_eq(json_string_value(json_object_get(fact, "source")), "Age");   /* no url */
    ck_assert_str_eq(json_string_value(json_object_get(fact, "evidence_snippet")),
                     "Slow waves fall with age.");
    for (size_t i = 0; i < json_array_size(facts); i++)
        ck_assert_ptr_null(strstr(json_string_value(json_object_get(json_array_get(facts, i), "fact")),
                                  "always"));
    json_decref(facts);
    json_decref(a);
    fixture_close(&f);
}
END_TEST

START_TEST(test_distill_extract_and_plan)
{
    struct fixture f;
    json_t *a = parse(valid_extract), *facts;

    fixture_open(&f);
    facts = artifact_distill(&f.conf, a, NULL);
    /* the item without a section or page is left out */
    ck_assert_uint_eq(json_array_size(facts), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(facts, 0), "source")),
                     "/x/a.md \u00a7 Appeals > Deadline");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(facts, 1), "source")),
                     "corpus/b.md, p. 4");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(facts, 1), "store")),
                     "verified");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(facts, 1), "domain")), "t");
    json_decref(facts);
    json_decref(a);
    /* the pack gives plans a fact store: still nothing */
    a = parse(valid_plan);
    facts = artifact_distill(&f.conf, a, NULL);
    ck_assert_uint_eq(json_array_size(facts), 0);
    json_decref(facts);
    json_decref(a);
    fixture_close(&f);
}
END_TEST

/* ---- artifact_export ------------------------------------------------------------------- */

START_TEST(test_export_names)
{
    static const char *const hostile[] = {"..", "../../etc/passwd", "/abs", ".hidden", "a/b",
                                          "a\\b", "con:1", "", "a\nb", "....//....//x"};
    char name[ARTIFACT_FILE_MAX], other[ARTIFACT_FILE_MAX], long_id[400];

    artifact_export_name("conv_01ABC-x_y", name, sizeof(name));
    ck_assert_str_eq(name, "conv_01ABC-x_y.jsonl");
    for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
        artifact_export_name(hostile[i], name, sizeof(name));
        ck_assert_msg(!strchr(name, '/') && !strchr(name, '\\') && name[0] != '.' &&
                          !strstr(name, "..") && strlen(name) > 6,
                      "%s -> %s", hostile[i], name);
        for (const char *p = name; *p; p++)
            ck_assert(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", *p));
        ck_assert_str_eq(name + strlen(name) - 6, ".jsonl");
    }
    /* ids that would sanitise alike keep apart */
    artifact_export_name("a.b", name, sizeof(name));
    artifact_export_name("a:b", other, sizeof(other));
    ck_assert_str_ne(name, other);
    artifact_export_name("a_b", other, sizeof(other));
    ck_assert_str_ne(name, other);
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    artifact_export_name(long_id, name, sizeof(name));
    ck_assert_uint_lt(strlen(name), ARTIFACT_FILE_MAX);
    long_id[300] = 'y';
    artifact_export_name(long_id, other, sizeof(other));
    ck_assert_str_ne(name, other);
    /* the default directory */
    artifact_export_default_dir("keel.db", name, sizeof(name));
    ck_assert_str_eq(name, "keel.artifacts");
    artifact_export_default_dir("sqlite:data/k.db", name, sizeof(name));
    ck_assert_str_eq(name, "data/k.artifacts");
    artifact_export_default_dir("store.sqlite", name, sizeof(name));
    ck_assert_str_eq(name, "store.sqlite.artifacts");
    artifact_export_default_dir("mem:", name, sizeof(name));
    ck_assert_str_eq(name, "");
}
END_TEST

START_TEST(test_export_append)
{
    char dir[256], sub[320], path[4600], target[400], line[4096];
    json_t *a = parse(valid_plan), *back;
    struct keel_error err;
    FILE *f;
    int lines = 0;

    unit_temp_dir(dir, sizeof(dir), "export", 0);
    snprintf(sub, sizeof(sub), "%s/artifacts", dir);
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_export_append(sub, "../escape", a, &err), KEEL_OK);
    ck_assert_int_eq(artifact_export_append(sub, "../escape", a, &err), KEEL_OK);
    artifact_export_name("../escape", line, sizeof(line));
    snprintf(path, sizeof(path), "%s/%s", sub, line);
    ck_assert_int_eq(access(path, F_OK), 0);
    snprintf(target, sizeof(target), "%s/escape.jsonl", dir);
    ck_assert_int_ne(access(target, F_OK), 0);   /* nothing outside */
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f)) {
        back = json_loads(line, 0, NULL);
        ck_assert(json_equal(back, a));
        json_decref(back);
        lines++;
    }
    fclose(f);
    ck_assert_int_eq(lines, 2);
    /* a symbolic link where the file would be is not followed */
    artifact_export_name("linked", line, sizeof(line));
    snprintf(path, sizeof(path), "%s/%s", sub, line);
    ck_assert_int_eq(symlink(target, path), 0);
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_export_append(sub, "linked", a, &err), KEEL_EIO);
    ck_assert_str_eq(err.field, "artifacts_dir");
    ck_assert_int_ne(access(target, F_OK), 0);
    unlink(path);
    /* a directory that cannot be made: a file is in the way */
    artifact_export_name("../escape", line, sizeof(line));
    snprintf(path, sizeof(path), "%s/%s/deeper", sub, line);
    keel_error_clear(&err);
    ck_assert_int_eq(artifact_export_append(path, "c", a, &err), KEEL_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "cannot create"));
    ck_assert_int_eq(artifact_export_append("", "c", a, &err), KEEL_EINVAL);
    /* removing a conversation's export; a missing one is no error */
    ck_assert_int_eq(artifact_export_remove(sub, "../escape"), KEEL_OK);
    snprintf(path, sizeof(path), "%s/%s", sub, line);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(artifact_export_remove(sub, "../escape"), KEEL_OK);
    ck_assert_int_eq(artifact_export_remove(NULL, "x"), KEEL_OK);
    rmdir(sub);
    unit_temp_dir_remove(dir);
    json_decref(a);
}
END_TEST

Suite *suite_artifact(void)
{
    Suite *s = suite_create("artifact");
    TCase *contract = tcase_create("artifact_contract");
    TCase *rendering = tcase_create("artifact_render");
    TCase *gating = tcase_create("artifact_gate");
    TCase *building = tcase_create("artifact_build");
    TCase *distill = tcase_create("artifact_distill");
    TCase *export = tcase_create("artifact_export");

    unit_leak_fixture(contract);
    tcase_add_test(contract, test_validate_valid);
    tcase_add_test(contract, test_validate_unknown_keys);
    tcase_add_test(contract, test_validate_required_and_types);
    tcase_add_test(contract, test_validate_caps);
    tcase_add_test(contract, test_validate_cross_rules);
    suite_add_tcase(s, contract);

    unit_leak_fixture(rendering);
    tcase_add_test(rendering, test_render_each_contract);
    tcase_add_test(rendering, test_render_cap);
    suite_add_tcase(s, rendering);

    unit_leak_fixture(gating);
    tcase_add_test(gating, test_gate_conf_errors);
    tcase_add_test(gating, test_gate_hard_rules);
    tcase_add_test(gating, test_gate_contract_rules);
    tcase_add_test(gating, test_gate_one_per_turn);
    suite_add_tcase(s, gating);

    unit_leak_fixture(building);
    tcase_add_test(building, test_build_brief);
    tcase_add_test(building, test_build_brief_fails_closed);
    tcase_add_test(building, test_build_extract);
    tcase_add_test(building, test_build_extract_fails_closed);
    tcase_add_test(building, test_build_plan);
    tcase_add_test(building, test_build_allocation_failures);
    suite_add_tcase(s, building);

    unit_leak_fixture(distill);
    tcase_add_test(distill, test_distill_brief_cited_only);
    tcase_add_test(distill, test_distill_extract_and_plan);
    suite_add_tcase(s, distill);

    unit_leak_fixture(export);
    tcase_add_test(export, test_export_names);
    tcase_add_test(export, test_export_append);
    suite_add_tcase(s, export);
    return s;
}
