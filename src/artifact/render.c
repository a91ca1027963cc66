/*
 * render.c — an artifact as markdown, for people: a heading with the
 * title, the contract's parts in a fixed order, then extra_sections.
 * Citations render as [n] after a claim and sources as a numbered list;
 * a doc extract's items show their document and section or page. Text
 * is written as it is (it came from sources and answers, already
 * validated as UTF-8); only newlines inside list items are folded so a
 * list stays a list.
 */
#include <string.h>

#include "artifact/artifact_int.h"

static const char *str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* Appends `text` with newlines folded to spaces (for one list line). */
static int add_line(struct keel_buf *b, const char *text)
{
    int rc = KEEL_OK;

    for (const char *p = text; *p && !rc; p++)
        rc = keel_buf_addc(b, *p == '\n' || *p == '\r' ? ' ' : *p);
    return rc;
}

static int render_extra(const json_t *content, struct keel_buf *b)
{
    const json_t *s;
    size_t i;
    int rc = KEEL_OK;

    json_array_foreach(json_object_get(content, "extra_sections"), i, s) {
        if (rc)
            break;
        rc = keel_buf_adds(b, "\n## ");
        if (!rc)
            rc = add_line(b, str(s, "title"));
        if (!rc)
            rc = keel_buf_addf(b, "\n\n%s\n", str(s, "body"));
    }
    return rc;
}

static int render_brief(const json_t *c, struct keel_buf *b)
{
    const json_t *claim, *n, *s;
    size_t i, k;
    int rc = keel_buf_addf(b, "**Question:** %s\n\n%s\n\n## Findings\n\n", str(c, "question"),
                           str(c, "summary"));

    json_array_foreach(json_object_get(c, "claims"), i, claim) {
        if (!rc)
            rc = keel_buf_adds(b, "- ");
        if (!rc)
            rc = add_line(b, str(claim, "text"));
        json_array_foreach(json_object_get(claim, "citations"), k, n)
            if (!rc)
                rc = keel_buf_addf(b, " [%lld]", (long long)json_integer_value(n));
        if (!rc)
            rc = keel_buf_addc(b, '\n');
    }
    if (!rc)
        rc = keel_buf_adds(b, "\n## Sources\n\n");
    json_array_foreach(json_object_get(c, "sources"), i, s) {
        const json_t *year = json_object_get(s, "year");
        if (!rc)
            rc = keel_buf_addf(b, "%lld. ", (long long)json_integer_value(json_object_get(s, "n")));
        if (!rc)
            rc = add_line(b, str(s, "title"));
        long long y = json_integer_value(year);
        const char *venue = str(s, "venue");
        if (!rc && (y || venue))
            rc = keel_buf_adds(b, " (");
        if (!rc && y)
            rc = keel_buf_addf(b, "%lld", y);
        if (!rc && venue)
            rc = keel_buf_addf(b, "%s%s", y ? ", " : "", venue);
        if (!rc && (y || venue))
            rc = keel_buf_addc(b, ')');
        if (!rc && str(s, "url"))
            rc = keel_buf_addf(b, " \u2014 <%s>", str(s, "url"));
        if (!rc)
            rc = keel_buf_addc(b, '\n');
    }
    return rc;
}

static int render_extract(const json_t *c, struct keel_buf *b)
{
    const json_t *item, *d;
    size_t i;
    int rc = keel_buf_addf(b, "**Question:** %s\n\n", str(c, "question"));

    if (!rc && str(c, "summary"))
        rc = keel_buf_addf(b, "%s\n\n", str(c, "summary"));
    if (!rc)
        rc = keel_buf_adds(b, "## Extract\n\n| # | Item | Where |\n|---|---|---|\n");
    json_array_foreach(json_object_get(c, "items"), i, item) {
        const json_t *ref = json_object_get(item, "ref");
        if (!rc)
            rc = keel_buf_addf(b, "| %zu | ", i + 1);
        for (const char *p = str(item, "text"); p && *p && !rc; p++)
            rc = *p == '|' ? keel_buf_adds(b, "\\|") : keel_buf_addc(b, *p == '\n' ? ' ' : *p);
        if (!rc)
            rc = keel_buf_addf(b, " | %s", str(ref, "document_id"));
        if (!rc && str(ref, "section"))
            rc = keel_buf_addf(b, " \u00a7 %s", str(ref, "section"));
        if (!rc && json_integer_value(json_object_get(ref, "page")))
            rc = keel_buf_addf(b, ", p. %lld",
                               (long long)json_integer_value(json_object_get(ref, "page")));
        if (!rc)
            rc = keel_buf_adds(b, " |\n");
    }
    if (!rc)
        rc = keel_buf_adds(b, "\n## Documents\n\n");
    json_array_foreach(json_object_get(c, "documents"), i, d) {
        if (!rc)
            rc = keel_buf_addf(b, "- %s", str(d, "id"));
        if (!rc && str(d, "title"))
            rc = keel_buf_addf(b, ": %s", str(d, "title"));
        if (!rc)
            rc = keel_buf_addc(b, '\n');
    }
    return rc;
}

static int render_plan(const json_t *c, struct keel_buf *b)
{
    const json_t *step;
    size_t i;
    int rc = keel_buf_addf(b, "**Goal:** %s\n\n## Steps\n\n", str(c, "goal"));

    json_array_foreach(json_object_get(c, "steps"), i, step) {
        if (!rc)
            rc = keel_buf_addf(b, "%lld. ", (long long)json_integer_value(json_object_get(step, "n")));
        if (!rc)
            rc = add_line(b, str(step, "action"));
        if (!rc)
            rc = keel_buf_addc(b, '\n');
    }
    return rc;
}

int artifact_render(const json_t *artifact, struct keel_buf *out)
{
    static const char *const headings[ARTIFACT_TYPES] = {"Research brief", "Document extract",
                                                         "Plan"};
    const json_t *content = json_object_get(artifact, "content");
    int type = artifact_type_from_name(str(artifact, "type"));
    int rc;

    if (type == ARTIFACT_NONE)
        return KEEL_EINVAL;
    rc = keel_buf_addf(out, "# %s: ", headings[type]);
    if (!rc)
        rc = add_line(out, str(artifact, "title"));
    if (!rc)
        rc = keel_buf_adds(out, "\n\n");
    if (!rc)
        rc = type == ARTIFACT_RESEARCH_BRIEF ? render_brief(content, out)
             : type == ARTIFACT_DOC_EXTRACT  ? render_extract(content, out)
                                             : render_plan(content, out);
    if (!rc)
        rc = render_extra(content, out);
    return rc;
}
