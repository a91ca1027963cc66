/*
 * ingest.h — filling the store from files: a paper library (JSON array or
 * JSON lines) and a document corpus (a folder of markdown with front
 * matter, text and HTML), chunked for retrieval.
 *
 * Ingestion is idempotent: the store reports each record as added,
 * updated or unchanged, so re-ingesting the same file changes nothing.
 * A bad record is skipped with a warning naming the file and its line
 * (JSON lines, BibTeX) or record (a JSON array), counted from 1; it never
 * stops the run.
 */
#ifndef KEEL_INGEST_INGEST_H
#define KEEL_INGEST_INGEST_H

#include <jansson.h>
#include <stdio.h>

#include "core/error.h"
#include "store/store.h"

#define INGEST_FILE_MAX (256u << 20)   /* one papers file or document */
#define INGEST_CHUNK_TARGET 1200       /* bytes a chunk aims for */
#define INGEST_MAX_CHUNKS 4096         /* per document; the rest is dropped with a warning */

struct ingest_stats {
    long added, updated, unchanged, skipped;
    json_t *seen_papers;   /* ids put by this run, across files; NULL until
                              the first paper; ingest_stats_release frees it */
};

/* Frees what `stats` holds (not the counts). */
void ingest_stats_release(struct ingest_stats *stats);

/* Where warnings and progress go. `warnings` may be NULL (silent);
 * `progress` non-NULL draws a progress bar there (use it only for a
 * terminal). */
struct ingest_output {
    FILE *warnings;
    FILE *progress;
};

/* Reads paper records from `path` into the store: a JSON array (also
 * OpenAlex's {"results": [...]}, CSL-JSON), JSON lines, or BibTeX (a
 * ".bib" file, or text whose first character is '@'). A record whose id (see
 * store_paper_id) repeats one put earlier in the same run — this file or
 * an earlier one — is skipped with a warning, so re-runs stay unchanged. Returns KEEL_OK when
 * the file could be read (skipped records are counted, not errors), or
 * the error that stopped it (unreadable file, a store failure). */
int ingest_papers_file(struct store *store, const char *path, const struct ingest_output *out,
                       struct ingest_stats *stats, struct keel_error *err);

/* Reads BibTeX text (see bibtex.c for the grammar and caps) and calls
 * `each` once per entry, in order, with `line` where the entry starts:
 * with the entry as a JSON record for ingest_paper_from_json() (title,
 * author, year, venue, doi, url, abstract, bibtex_key, bibtex_type) and
 * why NULL, or with record NULL and `why` saying how the entry breaks the
 * grammar (it is skipped). A nonzero return from `each` stops the reading
 * and is returned (`each` fills err). KEEL_ENOMEM otherwise. */
typedef int (*ingest_bibtex_each)(const json_t *record, long line, const char *why, void *ctx);
int ingest_bibtex(const char *text, size_t n, ingest_bibtex_each each, void *ctx,
                  struct keel_error *err);

/* Ingests every *.md, *.markdown, *.txt, *.html and *.htm file below
 * `dir`, in name order; a document's id is `dir`'s own name and its path
 * below `dir`, its source that path alone (never the server's directories). */
int ingest_docs_dir(struct store *store, const char *dir, const struct ingest_output *out,
                    struct ingest_stats *stats, struct keel_error *err);

/* Maps one JSON record onto a paper. Accepts the common shapes: title;
 * abstract; year or publication_year (a number, "2021" or "2021-05-01";
 * 0 or unreadable means unknown); venue, journal or container-title
 * (a string or a list of strings); authors as strings, {name},
 * {first, middle, last}, {given, family}, or OpenAlex authorships;
 * doi or DOI (a doi.org URL is cut to the bare DOI); url; pdf_url,
 * oa_url or openAccessPdf.url; is_open_access, isOpenAccess,
 * open_access (bool or {is_oa}). Returns KEEL_EINVAL naming the field
 * when the record has no title or a field has the wrong type; `out` is
 * then empty. On success the caller releases `out`. */
int ingest_paper_from_json(const json_t *record, const char *source, struct store_paper *out,
                           struct keel_error *err);

struct ingest_chunk {
    char *section;   /* "Heading > Subheading", or NULL */
    char *text;
};

struct ingest_chunks {
    struct ingest_chunk *items;
    size_t n;
    int truncated;   /* INGEST_MAX_CHUNKS was reached */
};

/* Splits markdown `text` (`n` bytes, front matter already removed) into
 * chunks of about INGEST_CHUNK_TARGET bytes: headings start a section,
 * paragraphs are packed into chunks, a paragraph longer than the target is
 * cut at a space. Returns KEEL_OK or KEEL_ENOMEM (nothing returned). */
int ingest_chunk_markdown(const char *text, size_t n, struct ingest_chunks *out);

/* Frees the chunks. */
void ingest_chunks_release(struct ingest_chunks *chunks);

/* Turns HTML into plain text with blank lines between blocks: tags
 * dropped, script and style skipped, common entities decoded. The
 * <title> goes into *title (may stay NULL). The caller frees both.
 * Returns KEEL_OK or KEEL_ENOMEM. */
int ingest_html_to_text(const char *html, size_t n, char **text, char **title);

/* A progress bar on `stream`: label, done/total, redrawn at most every
 * 100 ms, finished with a newline by progress_done(). */
struct ingest_progress {
    FILE *stream;
    const char *label;
    long total;
    long done;
    long long last_ms;
};

/* Writes "keel: " and the formatted warning on out->warnings (nothing
 * when out or out->warnings is NULL), first ending a progress bar's line
 * so the warning starts on a line of its own. */
void ingest_warning(const struct ingest_output *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void progress_start(struct ingest_progress *bar, FILE *stream, const char *label, long total);
void progress_step(struct ingest_progress *bar);
void progress_done(struct ingest_progress *bar);

#endif
