/*
 * chunk.c — markdown into retrieval chunks, and HTML into text.
 *
 * Chunks follow the document's structure: a heading starts a new section
 * ("Appeals > External review"), blank-line paragraphs are packed into
 * chunks of about INGEST_CHUNK_TARGET bytes, and a paragraph longer than
 * that is cut at a space. Deterministic: same text, same chunks.
 */
#include "ingest/ingest.h"

#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"

#define MAX_HEADING_DEPTH 6

struct chunker {
    struct ingest_chunks *out;
    size_t cap;
    struct keel_buf text;                        /* the chunk being filled */
    struct keel_buf section;                     /* its section path */
    char *headings[MAX_HEADING_DEPTH];           /* current heading per level */
};

static int emit(struct chunker *ck)
{
    struct ingest_chunk *chunk;
    size_t len = ck->text.len;

    while (len && (ck->text.data[len - 1] == ' ' || ck->text.data[len - 1] == '\n'))
        len--;
    if (!len) {
        keel_buf_reset(&ck->text);
        return KEEL_OK;
    }
    if (ck->out->n == INGEST_MAX_CHUNKS) {
        ck->out->truncated = 1;
        keel_buf_reset(&ck->text);
        return KEEL_OK;
    }
    if (ck->out->n == ck->cap) {
        size_t cap = ck->cap ? ck->cap * 2 : 16;
        struct ingest_chunk *items = keel_realloc(ck->out->items, cap * sizeof(*items));
        if (!items)
            return KEEL_ENOMEM;
        ck->out->items = items;
        ck->cap = cap;
    }
    chunk = &ck->out->items[ck->out->n];
    chunk->text = keel_strndup(ck->text.data, len);
    chunk->section = ck->section.len ? keel_strndup(ck->section.data, ck->section.len) : NULL;
    if (!chunk->text || (ck->section.len && !chunk->section)) {
        keel_free(chunk->text);
        keel_free(chunk->section);
        return KEEL_ENOMEM;
    }
    ck->out->n++;
    keel_buf_reset(&ck->text);
    return KEEL_OK;
}

static int set_heading(struct chunker *ck, int level, const char *title, size_t n)
{
    int rc = emit(ck);

    if (rc)
        return rc;
    for (int i = level - 1; i < MAX_HEADING_DEPTH; i++) {
        keel_free(ck->headings[i]);
        ck->headings[i] = NULL;
    }
    if (!(ck->headings[level - 1] = keel_strndup(title, n)))
        return KEEL_ENOMEM;
    keel_buf_reset(&ck->section);
    for (int i = 0; i < MAX_HEADING_DEPTH; i++)
        if (ck->headings[i] &&
            keel_buf_addf(&ck->section, "%s%s", ck->section.len ? " > " : "", ck->headings[i]))
            return KEEL_ENOMEM;
    return KEEL_OK;
}

/* Adds one paragraph, cutting it at spaces when it is too long. */
static int add_paragraph(struct chunker *ck, const char *p, size_t n)
{
    int rc;

    while (n > INGEST_CHUNK_TARGET) {
        size_t cut = INGEST_CHUNK_TARGET;
        while (cut > INGEST_CHUNK_TARGET / 2 && p[cut] != ' ')
            cut--;
        if (p[cut] != ' ')
            cut = INGEST_CHUNK_TARGET;  /* no space: cut the word */
        if ((rc = emit(ck)) || (rc = keel_buf_add(&ck->text, p, cut)) || (rc = emit(ck)))
            return rc;
        while (cut < n && p[cut] == ' ')
            cut++;
        p += cut;
        n -= cut;
    }
    if (ck->text.len && ck->text.len + n + 2 > INGEST_CHUNK_TARGET && (rc = emit(ck)))
        return rc;
    if (ck->text.len && (rc = keel_buf_add(&ck->text, "\n\n", 2)))
        return rc;
    return keel_buf_add(&ck->text, p, n);
}

int ingest_chunk_markdown(const char *text, size_t n, struct ingest_chunks *out)
{
    struct chunker ck;
    struct keel_buf para;
    size_t i = 0;
    int rc = KEEL_OK;

    memset(&ck, 0, sizeof(ck));
    memset(out, 0, sizeof(*out));
    ck.out = out;
    keel_buf_init(&ck.text, 0);
    keel_buf_init(&ck.section, 4096);
    keel_buf_init(&para, 0);
    while (i <= n && !rc) {
        const char *line = text + i;
        const char *end = i < n ? memchr(line, '\n', n - i) : NULL;
        size_t raw_len = end ? (size_t)(end - line) : n - i, len = raw_len, level = 0;

        while (len && line[len - 1] == '\r')
            len--;
        while (level < len && level < MAX_HEADING_DEPTH && line[level] == '#')
            level++;
        if (i == n || len == 0 || (level && level < len && line[level] == ' ')) {
            /* A blank line, a heading or the end closes the paragraph. */
            if (para.len)
                rc = add_paragraph(&ck, para.data, para.len);
            keel_buf_reset(&para);
            if (!rc && len && level) {
                size_t start = (size_t)level;
                while (start < len && line[start] == ' ')
                    start++;
                while (len > start && (line[len - 1] == '#' || line[len - 1] == ' '))
                    len--;
                rc = set_heading(&ck, (int)level, line + start, len - start);
            }
        } else {
            if (para.len)
                rc = keel_buf_addc(&para, ' ');
            if (!rc)
                rc = keel_buf_add(&para, line, len);
        }
        if (i == n)
            break;
        i += raw_len + 1;
        if (i > n)
            i = n;
    }
    if (!rc)
        rc = emit(&ck);
    keel_buf_release(&ck.text);
    keel_buf_release(&ck.section);
    keel_buf_release(&para);
    for (int h = 0; h < MAX_HEADING_DEPTH; h++)
        keel_free(ck.headings[h]);
    if (rc) {
        ingest_chunks_release(out);
        return KEEL_ENOMEM;
    }
    return KEEL_OK;
}

void ingest_chunks_release(struct ingest_chunks *chunks)
{
    for (size_t i = 0; i < chunks->n; i++) {
        keel_free(chunks->items[i].section);
        keel_free(chunks->items[i].text);
    }
    keel_free(chunks->items);
    memset(chunks, 0, sizeof(*chunks));
}

/* Case-insensitive: does `s` (n bytes left) start with `word`? */
static int starts_with(const char *s, size_t n, const char *word)
{
    size_t len = strlen(word);

    return n >= len && !strncasecmp(s, word, len);
}

static const struct {
    const char *name;
    const char *text;
} entities[] = {
    {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"},
    {"&apos;", "'"}, {"&nbsp;", " "}, {"&mdash;", "\xe2\x80\x94"}, {"&ndash;", "\xe2\x80\x93"},
    {"&rsquo;", "\xe2\x80\x99"}, {"&lsquo;", "\xe2\x80\x98"}, {"&hellip;", "\xe2\x80\xa6"},
};

int ingest_html_to_text(const char *html, size_t n, char **text_out, char **title_out)
{
    struct keel_buf text, title;
    size_t i = 0;
    int rc = KEEL_OK, in_title = 0;

    *text_out = *title_out = NULL;
    keel_buf_init(&text, 0);
    keel_buf_init(&title, 1024);
    while (i < n && !rc) {
        if (html[i] == '<') {
            const char *close = memchr(html + i, '>', n - i);
            size_t tag_end = close ? (size_t)(close - html) + 1 : n;
            const char *tag = html + i + 1;
            size_t tag_n = tag_end - i - 1;
            if (starts_with(tag, tag_n, "script") || starts_with(tag, tag_n, "style")) {
                const char *end_tag = starts_with(tag, tag_n, "script") ? "</script" : "</style";
                size_t k = tag_end;
                while (k < n && !starts_with(html + k, n - k, end_tag))
                    k++;
                const char *gt = k < n ? memchr(html + k, '>', n - k) : NULL;
                i = gt ? (size_t)(gt - html) + 1 : n;
                continue;
            }
            if (starts_with(tag, tag_n, "title"))
                in_title = 1;
            else if (starts_with(tag, tag_n, "/title"))
                in_title = 0;
            else if (starts_with(tag, tag_n, "p") || starts_with(tag, tag_n, "/p") ||
                     starts_with(tag, tag_n, "br") || starts_with(tag, tag_n, "div") ||
                     starts_with(tag, tag_n, "/div") || starts_with(tag, tag_n, "li") ||
                     starts_with(tag, tag_n, "h") || starts_with(tag, tag_n, "/h") ||
                     starts_with(tag, tag_n, "tr") || starts_with(tag, tag_n, "/li"))
                rc = keel_buf_adds(&text, "\n\n");
            i = tag_end;
            continue;
        }
        {
            const char *piece = html + i;
            size_t piece_n = 1;
            if (html[i] == '&') {
                for (size_t e = 0; e < sizeof(entities) / sizeof(entities[0]); e++)
                    if (starts_with(html + i, n - i, entities[e].name)) {
                        piece = entities[e].text;
                        piece_n = strlen(piece);
                        i += strlen(entities[e].name) - 1;
                        break;
                    }
            }
            if (in_title)
                (void)keel_buf_add(&title, piece, piece_n);  /* a title past 1 KiB is cut */
            else
                rc = keel_buf_add(&text, piece, piece_n);
            i++;
        }
    }
    if (!rc && title.len && !(*title_out = keel_strndup(title.data, title.len)))
        rc = KEEL_ENOMEM;
    if (!rc && !(*text_out = keel_buf_detach(&text, NULL)))
        rc = KEEL_ENOMEM;
    keel_buf_release(&text);
    keel_buf_release(&title);
    if (rc) {
        keel_free(*title_out);
        keel_free(*text_out);
        *title_out = *text_out = NULL;
    }
    return rc;
}
