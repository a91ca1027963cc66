/*
 * distill.c — facts-only distillation (seed 001): the bridge from
 * artifacts to the fact stores. Only provenance-backed statements pass:
 *
 *   research_brief  each claim that cites at least one of the brief's
 *                   sources; the fact's source is the first cited
 *                   source's URL (else its title), the evidence snippet
 *                   that source's text
 *   doc_extract     each item whose reference has a section or a page;
 *                   the source is "document § section" (or ", p. N")
 *   plan            nothing, ever: plans are advice, not facts
 *
 * Nothing of extra_sections is read. Each fact goes to the contract's
 * store (facts.store: verified | researched) with its confidence and
 * domain (the turn's topic class, else the pack); without facts.store
 * the contract writes no facts.
 */
#include <stdio.h>
#include <string.h>

#include "artifact/artifact_text.h"

static const char *str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static json_t *snippet(const char *text)
{
    char buf[ARTIFACT_SNIPPET_MAX + 8];

    artifact_cut(text, strlen(text), ARTIFACT_SNIPPET_MAX, buf, sizeof(buf));
    return json_string(buf);
}

static int add_fact(json_t *facts, const struct artifact_conf *conf,
                    const struct artifact_contract_conf *cc, const json_t *artifact,
                    const char *domain, const char *topic, const char *fact, const char *source,
                    const char *evidence)
{
    const char *id = str(artifact, "id");
    char fid[96];

    snprintf(fid, sizeof(fid), "fact_%s_%zu", !strncmp(id, "art_", 4) ? id + 4 : id,
             json_array_size(facts) + 1);
    return json_array_append_new(
        facts, json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:s, s:[s,s], s:o}", "id", fid, "store",
                         cc->fact_store, "topic", topic, "fact", fact, "source", source,
                         "confidence", cc->fact_confidence, "domain",
                         domain && *domain ? domain : conf->pack->name, "tags", conf->pack->name,
                         str(artifact, "type"), "evidence_snippet", snippet(evidence)));
}

static int from_brief(json_t *facts, const struct artifact_conf *conf,
                      const struct artifact_contract_conf *cc, const json_t *artifact,
                      const char *domain)
{
    const json_t *content = json_object_get(artifact, "content"), *claim, *s;
    const char *topic = str(content, "question");
    size_t i, k;
    int bad = 0;

    json_array_foreach(json_object_get(content, "claims"), i, claim) {
        const json_t *first = json_array_get(json_object_get(claim, "citations"), 0);
        const json_t *source = NULL;

        if (!first)
            continue;   /* uncited: not a fact */
        json_array_foreach(json_object_get(content, "sources"), k, s)
            if (json_equal(json_object_get(s, "n"), (json_t *)first))
                source = s;
        if (!source)
            continue;   /* the validator refuses this; never trust it here */
        bad |= add_fact(facts, conf, cc, artifact, domain, topic, str(claim, "text"),
                        str(source, "url") ? str(source, "url") : str(source, "title"),
                        str(source, "snippet") ? str(source, "snippet") : str(claim, "text"));
    }
    return bad;
}

static int from_extract(json_t *facts, const struct artifact_conf *conf,
                        const struct artifact_contract_conf *cc, const json_t *artifact,
                        const char *domain)
{
    const json_t *content = json_object_get(artifact, "content"), *item, *d;
    const char *topic = str(content, "question");
    size_t i, k;
    int bad = 0;

    json_array_foreach(json_object_get(content, "items"), i, item) {
        const json_t *ref = json_object_get(item, "ref");
        const char *doc = str(ref, "document_id"), *section = str(ref, "section");
        json_int_t page = json_integer_value(json_object_get(ref, "page"));
        char source[1600];

        if (!(section && *section) && page < 1)
            continue;   /* no page or section: no provenance */
        json_array_foreach(json_object_get(content, "documents"), k, d)
            if (!strcmp(str(d, "id"), doc) && str(d, "source"))
                doc = str(d, "source");
        if (section && *section)
            snprintf(source, sizeof(source), "%.700s \u00a7 %.700s", doc, section);
        else
            snprintf(source, sizeof(source), "%.700s, p. %lld", doc, (long long)page);
        bad |= add_fact(facts, conf, cc, artifact, domain, topic, str(item, "text"), source,
                        str(item, "text"));
    }
    return bad;
}

json_t *artifact_distill(const struct artifact_conf *conf, const json_t *artifact,
                         const char *domain)
{
    int type = artifact_type_from_name(str(artifact, "type"));
    const struct artifact_contract_conf *cc;
    json_t *facts = json_array();
    int bad = 0;

    if (!facts || type == ARTIFACT_NONE)
        return facts;
    cc = &conf->contracts[type];
    if (!cc->fact_store || type == ARTIFACT_PLAN)
        return facts;   /* a plan never writes facts, whatever the pack says */
    if (type == ARTIFACT_RESEARCH_BRIEF)
        bad = from_brief(facts, conf, cc, artifact, domain);
    else
        bad = from_extract(facts, conf, cc, artifact, domain);
    if (bad) {
        json_decref(facts);
        return NULL;
    }
    return facts;
}
