/*
 * papers.c — paper records from JSON (an array, or JSON lines) into the
 * store. Field names vary between sources (S2ORC, Semantic Scholar,
 * OpenAlex exports, CSL-JSON, hand-written lists); the mapping is in
 * ingest_paper_from_json().
 */
#include "ingest/ingest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/file.h"
#include "core/json.h"

/* The first of `keys` present with a string value, or NULL. A present key
 * of another type (other than null) is an error naming it. */
static int first_string(const json_t *record, const char *const *keys, const char **out,
                        struct keel_error *err)
{
    *out = NULL;
    for (; *keys; keys++) {
        json_t *value = json_object_get(record, *keys);
        if (!value || json_is_null(value))
            continue;
        if (json_is_array(value) && json_is_string(json_array_get(value, 0)))
            value = json_array_get(value, 0);  /* Crossref: "container-title": ["…"] */
        if (!json_is_string(value))
            return keel_error_set(err, KEEL_EINVAL, *keys, "must be a string, not %s",
                                  keel_json_type_name(value));
        if (json_string_length(value) == 0)
            continue;
        *out = json_string_value(value);
        return KEEL_OK;
    }
    return KEEL_OK;
}

static int copy_string(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return KEEL_OK;
    *dst = keel_strdup(src);
    return *dst ? KEEL_OK : KEEL_ENOMEM;
}

/* "First Middle Last" from S2ORC's author objects, "Given Family" from
 * CSL, or the name string. Appends to `authors`; skips unusable ones. */
static int add_author(json_t *authors, const json_t *author)
{
    struct keel_buf name;
    int rc = KEEL_OK;

    if (json_is_string(author))
        return json_array_append(authors, (json_t *)author) ? KEEL_ENOMEM : KEEL_OK;
    if (!json_is_object(author))
        return KEEL_OK;
    if (json_is_string(json_object_get(author, "name")))
        return json_array_append(authors, json_object_get(author, "name")) ? KEEL_ENOMEM : KEEL_OK;
    keel_buf_init(&name, 512);
    {
        const char *parts[] = {"first", "given", NULL};
        for (const char **p = parts; *p && !rc; p++)
            if (json_is_string(json_object_get(author, *p)))
                rc = keel_buf_adds(&name, json_string_value(json_object_get(author, *p)));
    }
    if (json_is_array(json_object_get(author, "middle"))) {
        json_t *middle;
        size_t i;
        json_array_foreach(json_object_get(author, "middle"), i, middle)
            if (json_is_string(middle) && !rc)
                rc = keel_buf_addf(&name, "%s%s", name.len ? " " : "", json_string_value(middle));
    }
    {
        const char *parts[] = {"last", "family", NULL};
        for (const char **p = parts; *p && !rc; p++)
            if (json_is_string(json_object_get(author, *p)))
                rc = keel_buf_addf(&name, "%s%s", name.len ? " " : "",
                                   json_string_value(json_object_get(author, *p)));
    }
    if (!rc && name.len)
        rc = json_array_append_new(authors, json_string(name.data)) ? KEEL_ENOMEM : KEEL_OK;
    keel_buf_release(&name);
    return rc == KEEL_ETOOBIG ? KEEL_OK : rc;
}

/* CSL-JSON dates: {"date-parts": [[2020, 5, 1]]}, the year first (a
 * number or a digit string); anything else is unknown. */
static int csl_year(const json_t *date)
{
    const json_t *y = json_array_get(json_array_get(json_object_get(date, "date-parts"), 0), 0);
    long v = json_is_integer(y)  ? (long)json_integer_value(y)
             : json_is_string(y) ? strtol(json_string_value(y), NULL, 10)
                                 : 0;

    return v >= 1000 && v <= 9999 ? (int)v : 0;
}

static int read_year(const json_t *record, int *year, struct keel_error *err)
{
    static const char *const keys[] = {"year", "publication_year", NULL};
    static const char *const csl_keys[] = {"issued", "published-print", "published-online",
                                           "created", NULL};

    *year = 0;
    for (const char *const *k = keys; *k; k++) {
        json_t *value = json_object_get(record, *k);
        if (!value || json_is_null(value))
            continue;
        if (json_is_number(value)) {
            double y = json_number_value(value);
            *year = y >= 1000 && y <= 9999 ? (int)y : 0;  /* 0 and nonsense: unknown */
            return KEEL_OK;
        }
        if (json_is_string(value)) {
            /* "2021", "2021-05-01": the leading four digits. */
            const char *s = json_string_value(value);
            int y = 0, i;
            for (i = 0; i < 4 && s[i] >= '0' && s[i] <= '9'; i++)
                y = y * 10 + (s[i] - '0');
            *year = i == 4 && y >= 1000 && (s[4] == '\0' || s[4] == '-') ? y : 0;
            return KEEL_OK;
        }
        return keel_error_set(err, KEEL_EINVAL, *k, "must be a year such as 2021");
    }
    for (const char *const *k = csl_keys; *k && !*year; k++)
        *year = csl_year(json_object_get(record, *k));
    return KEEL_OK;
}

static int read_open_access(const json_t *record, const char *pdf_url)
{
    static const char *const keys[] = {"is_open_access", "isOpenAccess", "open_access", "is_oa",
                                       NULL};

    for (const char *const *k = keys; *k; k++) {
        json_t *value = json_object_get(record, *k);
        if (json_is_boolean(value))
            return json_is_true(value);
        if (json_is_object(value) && json_is_boolean(json_object_get(value, "is_oa")))
            return json_is_true(json_object_get(value, "is_oa"));
    }
    return pdf_url != NULL;
}

int ingest_paper_from_json(const json_t *record, const char *source, struct store_paper *out,
                           struct keel_error *err)
{
    static const char *const title_keys[] = {"title", NULL};
    static const char *const abstract_keys[] = {"abstract", NULL};
    static const char *const venue_keys[] = {"venue", "journal", "container-title", NULL};
    static const char *const doi_keys[] = {"doi", "DOI", NULL};
    static const char *const url_keys[] = {"url", "URL", NULL};
    static const char *const pdf_keys[] = {"pdf_url", "oa_url", NULL};
    const char *title, *abstract, *venue, *doi, *url, *pdf = NULL;
    json_t *authors_in;
    int rc;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(record))
        return keel_error_set(err, KEEL_EINVAL, "record", "must be an object, not %s",
                              keel_json_type_name(record));
    if ((rc = first_string(record, title_keys, &title, err)) ||
        (rc = first_string(record, abstract_keys, &abstract, err)) ||
        (rc = first_string(record, venue_keys, &venue, err)) ||
        (rc = first_string(record, doi_keys, &doi, err)) ||
        (rc = first_string(record, url_keys, &url, err)) ||
        (rc = first_string(record, pdf_keys, &pdf, err)) ||
        (rc = read_year(record, &out->year, err)))
        return rc;
    if (!title)
        return keel_error_set(err, KEEL_EINVAL, "title", "is required");
    if (!pdf && json_is_object(json_object_get(record, "openAccessPdf")) &&
        json_is_string(json_object_get(json_object_get(record, "openAccessPdf"), "url")))
        pdf = json_string_value(json_object_get(json_object_get(record, "openAccessPdf"), "url"));
    if (doi) {
        const char *prefixes[] = {"https://doi.org/", "http://doi.org/", "https://dx.doi.org/",
                                  "http://dx.doi.org/", "https://www.doi.org/",
                                  "http://www.doi.org/", "doi:", NULL};
        for (const char **p = prefixes; *p; p++)
            if (!strncasecmp(doi, *p, strlen(*p))) {
                doi += strlen(*p);
                break;
            }
    }
    out->is_open_access = read_open_access(record, pdf);
    out->authors = json_array();
    if (!out->authors)
        goto nomem;
    authors_in = json_object_get(record, "authors");
    if (!authors_in)
        authors_in = json_object_get(record, "author");
    if (!authors_in && json_is_array(json_object_get(record, "authorships"))) {
        /* OpenAlex: [{"author": {"display_name": …}}, …] */
        json_t *ship;
        size_t i;
        json_array_foreach(json_object_get(record, "authorships"), i, ship) {
            json_t *name = json_object_get(json_object_get(ship, "author"), "display_name");
            if (json_is_string(name) && json_array_append(out->authors, name))
                goto nomem;
        }
    }
    if (json_is_array(authors_in)) {
        json_t *author;
        size_t i;
        json_array_foreach(authors_in, i, author)
            if (add_author(out->authors, author))
                goto nomem;
    }
    if (copy_string(&out->title, title) || copy_string(&out->abstract, abstract) ||
        copy_string(&out->venue, venue) || copy_string(&out->doi, doi) ||
        copy_string(&out->url, url) || copy_string(&out->pdf_url, pdf) ||
        copy_string(&out->source, source))
        goto nomem;
    return KEEL_OK;
nomem:
    store_paper_release(out);
    return keel_error_set(err, KEEL_ENOMEM, "record", "out of memory");
}

/* Warns that the record at `where` was skipped: "papers.json: record 3:
 * skipped: title: is required" or "refs.bib: line 9: skipped: …"; both
 * count from 1. */
static void warn(const struct ingest_output *out, const char *path, long where,
                 const char *unit, const struct keel_error *err)
{
    const char *sep = err->field[0] ? ": " : "";

    ingest_warning(out, "%s: %s %ld: skipped: %s%s%s", path, unit, where, err->field, sep,
                   err->message);
}

/* Puts one record; counts it. `seen` holds the ids put by this run: a
 * second record with the same id (same DOI, or same title and year) is
 * skipped, so the first one wins and a re-run reports it unchanged.
 * Returns KEEL_OK unless the store failed. */
static int put_record(struct store *store, const json_t *record, const char *path,
                      const char *source, long where, const char *unit,
                      const struct ingest_output *out, struct ingest_stats *stats,
                      struct keel_error *err)
{
    struct store_paper paper;
    enum store_outcome outcome;
    struct keel_error record_err;
    char id[256];
    int rc = ingest_paper_from_json(record, source, &paper, &record_err);

    if (rc == KEEL_ENOMEM)
        return keel_error_set(err, rc, path, "out of memory");
    if (rc) {
        stats->skipped++;
        warn(out, path, where, unit, &record_err);
        return KEEL_OK;
    }
    store_paper_id(&paper, id, sizeof(id));
    if (json_object_get(stats->seen_papers, id)) {
        stats->skipped++;
        keel_error_set(&record_err, KEEL_EINVAL, "", "duplicate of an earlier record (%s)", id);
        warn(out, path, where, unit, &record_err);
        store_paper_release(&paper);
        return KEEL_OK;
    }
    rc = store_put_paper(store, &paper, &outcome, &record_err);
    store_paper_release(&paper);
    if (rc == KEEL_EINVAL || rc == KEEL_ETOOBIG) {
        stats->skipped++;
        warn(out, path, where, unit, &record_err);
        return KEEL_OK;
    }
    if (rc) {
        *err = record_err;
        return rc;
    }
    /* Only a record that made it into the store shadows later copies. */
    if (json_object_set_new(stats->seen_papers, id, json_true()))
        return keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
    stats->added += outcome == STORE_ADDED;
    stats->updated += outcome == STORE_UPDATED;
    stats->unchanged += outcome == STORE_UNCHANGED;
    return KEEL_OK;
}

/* A JSON line is parsed on its own, so its parse error says "line 1
 * column 14: …"; the warning names the file's line already, and keeps
 * only the column. */
static void line_position(struct keel_error *err)
{
    static const char own_line[] = "line 1 column ";
    size_t n = sizeof(own_line) - 1 - strlen("column ");

    if (!strncmp(err->message, own_line, sizeof(own_line) - 1))
        memmove(err->message, err->message + n, strlen(err->message + n) + 1);
}

struct bib_ctx {
    struct store *store;
    const char *path, *source;
    const struct ingest_output *out;
    struct ingest_stats *stats;
    struct keel_error *err;
    struct ingest_progress *bar;
};

static int put_bibtex(const json_t *record, long line, const char *why, void *arg)
{
    struct bib_ctx *c = arg;
    struct keel_error entry_err;

    progress_step(c->bar);
    if (record)
        return put_record(c->store, record, c->path, c->source, line, "line", c->out, c->stats,
                          c->err);
    c->stats->skipped++;
    keel_error_set(&entry_err, KEEL_EINVAL, "", "%s", why);
    warn(c->out, c->path, line, "line", &entry_err);
    return KEEL_OK;
}

/* Nonzero for a BibTeX file: a .bib name, or '@' first. */
static int is_bibtex(const char *path, const char *text, size_t n)
{
    size_t len = strlen(path);

    return (len > 4 && !strcasecmp(path + len - 4, ".bib")) || (n && text[0] == '@');
}

static long count_entries(const char *text, size_t n)
{
    long entries = 0;

    for (size_t i = 0; i < n; i++)
        entries += text[i] == '@';
    return entries;
}

static long count_newlines(const char *text, size_t n)
{
    long lines = 0;

    for (size_t k = 0; k < n; k++)
        lines += text[k] == '\n';
    return lines;
}

static long count_lines(const char *text, size_t n)
{
    long lines = 0;

    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    return lines + (n && text[n - 1] != '\n');
}

int ingest_papers_file(struct store *store, const char *path, const struct ingest_output *out,
                       struct ingest_stats *stats, struct keel_error *err)
{
    struct keel_buf text;
    struct ingest_progress bar;
    size_t i = 0;
    long records_before = stats->added + stats->updated + stats->unchanged + stats->skipped;
    char *canonical = NULL;
    const char *source = path;
    int rc;

    keel_buf_init(&text, INGEST_FILE_MAX + 1);
    if (!stats->seen_papers && !(stats->seen_papers = json_object())) {
        rc = keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
        goto out;
    }
    if ((rc = keel_file_read(path, INGEST_FILE_MAX, &text, err)))
        goto out;
    /* The canonical path, so "./papers.json" and "papers.json" give the
     * same records. */
    canonical = realpath(path, NULL);
    source = canonical ? canonical : path;
    if (text.len >= 3 && !memcmp(text.data, "\xef\xbb\xbf", 3))
        i = 3;  /* a byte-order mark */
    while (i < text.len && (text.data[i] == ' ' || text.data[i] == '\n' ||
                            text.data[i] == '\r' || text.data[i] == '\t'))
        i++;
    if (is_bibtex(path, text.data + i, text.len - i)) {
        /* From the top (after a byte-order mark), so lines count right. */
        size_t from = text.len >= 3 && !memcmp(text.data, "\xef\xbb\xbf", 3) ? 3 : 0;
        struct bib_ctx ctx = {store, path, source, out, stats, err, &bar};
        progress_start(&bar, out ? out->progress : NULL, "papers",
                       count_entries(text.data + from, text.len - from));
        rc = ingest_bibtex(text.data + from, text.len - from, put_bibtex, &ctx, err);
        progress_done(&bar);
        goto out;
    }
    if (i < text.len && (text.data[i] == '[' || text.data[i] == '{')) {
        /* One JSON value: an array of records, or {"results": [...]}. */
        json_t *parsed, *array, *record;
        size_t index;
        if (text.data[i] == '{') {
            /* A single object may still be JSON lines; only an envelope
             * with a "results" list is read whole. */
            json_error_t jerr;
            parsed = json_loadb(text.data + i, text.len - i, 0, &jerr);
            if (!parsed || !json_is_array(json_object_get(parsed, "results"))) {
                json_decref(parsed);
                goto lines;
            }
        } else if ((rc = keel_json_parse(text.data + i, text.len - i, INGEST_FILE_MAX, path,
                                         &parsed, err))) {
            goto out;
        }
        array = json_is_array(parsed) ? parsed : json_object_get(parsed, "results");
        progress_start(&bar, out ? out->progress : NULL, "papers", (long)json_array_size(array));
        json_array_foreach(array, index, record) {
            /* Records are counted from 1, as a reader counts them. */
            if ((rc = put_record(store, record, path, source, (long)index + 1, "record", out,
                                 stats, err)))
                break;
            progress_step(&bar);
        }
        progress_done(&bar);
        json_decref(parsed);
        goto out;
    }
lines:
    /* JSON lines: one record per line; a bad line is skipped. */
    progress_start(&bar, out ? out->progress : NULL, "papers", count_lines(text.data, text.len));
    for (long line = 1 + count_newlines(text.data, i); i < text.len; line++) {
        char *end = memchr(text.data + i, '\n', text.len - i);
        size_t len = end ? (size_t)(end - (text.data + i)) : text.len - i;
        struct keel_error line_err;
        json_t *record;
        size_t k = 0;
        while (k < len && (text.data[i + k] == ' ' || text.data[i + k] == '\r' ||
                           text.data[i + k] == '\t'))
            k++;
        if (k < len) {
            if (keel_json_parse(text.data + i, len, INGEST_FILE_MAX, "", &record, &line_err)) {
                stats->skipped++;
                line_position(&line_err);
                warn(out, path, line, "line", &line_err);
            } else {
                rc = put_record(store, record, path, source, line, "line", out, stats, err);
                json_decref(record);
                if (rc)
                    break;
            }
        }
        progress_step(&bar);
        i += len + 1;
    }
    progress_done(&bar);
out:
    if (!rc && stats->added + stats->updated + stats->unchanged + stats->skipped == records_before)
        ingest_warning(out, "%s: no paper records found", path);
    free(canonical);  /* from realpath(), not keel's allocator */
    keel_buf_release(&text);
    return rc;
}

void ingest_stats_release(struct ingest_stats *stats)
{
    json_decref(stats->seen_papers);
    stats->seen_papers = NULL;
}
