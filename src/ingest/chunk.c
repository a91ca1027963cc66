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
#include "core/utf8.h"

#define MAX_HEADING_DEPTH 6
#define MAX_HEADING 256      /* bytes of one heading; longer ones are cut */
#define MAX_TITLE 1024       /* bytes of an HTML <title> */

/* The largest cut <= `max` into `p` (`n` bytes) that does not split a
 * UTF-8 sequence. Backs off at most three continuation bytes, so invalid
 * input still makes progress. */
static size_t utf8_cut(const char *p, size_t n, size_t max)
{
    size_t cut = max < n ? max : n;

    for (int back = 0; back < 3 && cut > 1 && cut < n && ((unsigned char)p[cut] & 0xc0) == 0x80;
         back++)
        cut--;
    return cut;
}

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

/* A heading longer than MAX_HEADING is cut at a character boundary, so the
 * section path (at most 6 * MAX_HEADING + 5 * 3 bytes) always fits its
 * buffer and the only possible failure is KEEL_ENOMEM. */
static int set_heading(struct chunker *ck, int level, const char *title, size_t n)
{
    int rc = emit(ck);

    if (rc)
        return rc;
    for (int i = level - 1; i < MAX_HEADING_DEPTH; i++) {
        keel_free(ck->headings[i]);
        ck->headings[i] = NULL;
    }
    if (!(ck->headings[level - 1] = keel_strndup(title, utf8_cut(title, n, MAX_HEADING))))
        return KEEL_ENOMEM;
    keel_buf_reset(&ck->section);
    for (int i = 0; i < MAX_HEADING_DEPTH; i++)
        if (ck->headings[i] &&
            (rc = keel_buf_addf(&ck->section, "%s%s", ck->section.len ? " > " : "",
                                ck->headings[i])))
            return rc;
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
        if (p[cut] != ' ')  /* no space: cut the word, between characters */
            cut = utf8_cut(p, n, INGEST_CHUNK_TARGET);
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

static int is_blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t')
            return 0;
    return 1;
}

/* The length of the fence run (three or more ` or ~, after at most three
 * spaces) that opens `line`, or 0; its character goes to *mark. */
static size_t fence_run(const char *line, size_t len, char *mark)
{
    size_t i = 0, run = 0;

    while (i < len && i < 3 && line[i] == ' ')
        i++;
    if (i == len || (line[i] != '`' && line[i] != '~'))
        return 0;
    *mark = line[i];
    while (i + run < len && line[i + run] == *mark)
        run++;
    return run >= 3 ? run : 0;
}

/* The heading text of `line` after its `level` #s: leading spaces and a
 * closing # sequence dropped — but only one preceded by a space, so
 * "## Using C#" keeps its #. */
static int add_heading(struct chunker *ck, const char *line, size_t len, size_t level)
{
    size_t start = level, end = len, hashes;

    while (start < end && (line[start] == ' ' || line[start] == '\t'))
        start++;
    while (end > start && (line[end - 1] == ' ' || line[end - 1] == '\t'))
        end--;
    for (hashes = end; hashes > start && line[hashes - 1] == '#'; hashes--)
        ;
    if (hashes < end && (hashes == start || line[hashes - 1] == ' ' || line[hashes - 1] == '\t')) {
        end = hashes;
        while (end > start && (line[end - 1] == ' ' || line[end - 1] == '\t'))
            end--;
    }
    return set_heading(ck, (int)level, line + start, end - start);
}

/* Markdown state between lines: the paragraph being gathered and the
 * open code fence, if any. A fenced block is one paragraph with its lines
 * joined by newlines; nothing inside it is a heading or a break. */
struct md_state {
    struct chunker ck;
    struct keel_buf para;
    char fence_mark;
    size_t fence_len;    /* 0 outside a fence */
};

static int flush_para(struct md_state *st)
{
    int rc = st->para.len ? add_paragraph(&st->ck, st->para.data, st->para.len) : KEEL_OK;

    keel_buf_reset(&st->para);
    return rc;
}

static int md_line(struct md_state *st, const char *line, size_t len)
{
    size_t level = 0, run;
    char mark = 0;
    int rc;

    if (st->fence_len) {
        if ((rc = keel_buf_addc(&st->para, '\n')) || (rc = keel_buf_add(&st->para, line, len)))
            return rc;
        run = fence_run(line, len, &mark);
        if (run >= st->fence_len && mark == st->fence_mark) {
            st->fence_len = 0;
            return flush_para(st);
        }
        return KEEL_OK;
    }
    if ((run = fence_run(line, len, &mark))) {
        if ((rc = flush_para(st)))
            return rc;
        st->fence_len = run;
        st->fence_mark = mark;
        return keel_buf_add(&st->para, line, len);
    }
    while (level < len && level < MAX_HEADING_DEPTH && line[level] == '#')
        level++;
    if (is_blank(line, len))
        return flush_para(st);
    if (level && level < len && (line[level] == ' ' || line[level] == '\t')) {
        if ((rc = flush_para(st)))
            return rc;
        return add_heading(&st->ck, line, len, level);
    }
    if (st->para.len && (rc = keel_buf_addc(&st->para, ' ')))
        return rc;
    return keel_buf_add(&st->para, line, len);
}

int ingest_chunk_markdown(const char *text, size_t n, struct ingest_chunks *out)
{
    struct md_state st;
    size_t i = 0;
    int rc = KEEL_OK;

    memset(&st, 0, sizeof(st));
    memset(out, 0, sizeof(*out));
    st.ck.out = out;
    keel_buf_init(&st.ck.text, 0);
    keel_buf_init(&st.ck.section, 4096);
    keel_buf_init(&st.para, 0);
    while (i < n && !rc) {
        const char *line = text + i;
        const char *end = memchr(line, '\n', n - i);
        size_t raw_len = end ? (size_t)(end - line) : n - i, len = raw_len;

        while (len && line[len - 1] == '\r')
            len--;
        rc = md_line(&st, line, len);
        i += raw_len + 1;
    }
    if (!rc)
        rc = flush_para(&st);   /* the end closes a paragraph, and an unclosed fence */
    if (!rc)
        rc = emit(&st.ck);
    keel_buf_release(&st.ck.text);
    keel_buf_release(&st.ck.section);
    keel_buf_release(&st.para);
    for (int h = 0; h < MAX_HEADING_DEPTH; h++)
        keel_free(st.ck.headings[h]);
    if (rc)
        ingest_chunks_release(out);
    return rc;   /* KEEL_ENOMEM: every buffer above is unbounded or sized to fit */
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

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static const struct {
    const char *name;
    const char *text;
} entities[] = {
    {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""},
    {"&apos;", "'"}, {"&nbsp;", " "}, {"&mdash;", "\xe2\x80\x94"}, {"&ndash;", "\xe2\x80\x93"},
    {"&rsquo;", "\xe2\x80\x99"}, {"&lsquo;", "\xe2\x80\x98"}, {"&hellip;", "\xe2\x80\xa6"},
};

/* Decodes the numeric entity &#NNN; or &#xHH; at `s` (`n` bytes) into
 * `utf8` (*utf8_n bytes, 0 for a code point that is not a character: 0,
 * a surrogate, past U+10FFFF). Returns the bytes consumed, or 0 when `s`
 * is no numeric entity (then the '&' is text). */
static size_t numeric_entity(const char *s, size_t n, char utf8[4], size_t *utf8_n)
{
    size_t i = 2, digits = 0;
    int hex = n > 2 && (s[2] == 'x' || s[2] == 'X');
    unsigned long cp = 0;

    if (n < 3 || s[0] != '&' || s[1] != '#')
        return 0;
    i += (size_t)hex;
    for (; i < n; i++, digits++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
              : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            break;
        if (cp <= 0x10ffff)   /* stop growing once out of range: no overflow */
            cp = cp * (hex ? 16 : 10) + (unsigned long)d;
    }
    if (!digits || i == n || s[i] != ';')
        return 0;
    *utf8_n = 0;
    if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
        /* not a character: skipped */
    } else if (cp < 0x80) {
        utf8[(*utf8_n)++] = (char)cp;
    } else if (cp < 0x800) {
        utf8[(*utf8_n)++] = (char)(0xc0 | (cp >> 6));
        utf8[(*utf8_n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        utf8[(*utf8_n)++] = (char)(0xe0 | (cp >> 12));
        utf8[(*utf8_n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        utf8[(*utf8_n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        utf8[(*utf8_n)++] = (char)(0xf0 | (cp >> 18));
        utf8[(*utf8_n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        utf8[(*utf8_n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        utf8[(*utf8_n)++] = (char)(0x80 | (cp & 0x3f));
    }
    return i + 1;
}

/* Tags that end a block: a paragraph break in the text. */
static const char *const block_tags[] = {
    "p", "br", "div", "li", "tr", "section", "article", "table", "ul", "ol", "dl", "dt", "dd",
    "blockquote", "pre", "hr", "header", "footer", "nav", "main", "aside", "figure", "figcaption",
};

struct html_state {
    struct keel_buf text, title;
    int in_title;
    int in_heading;      /* inside <h1>..<h6>: the heading must stay on one line */
    int title_space;     /* whitespace seen in the title since its last word */
};

static int tag_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && !strncasecmp(name, want, len);
}

/* A break of `sep` ("\n\n" or " ") unless the text already has one. */
static int add_break(struct html_state *st, const char *sep)
{
    const char *t = st->text.data;
    size_t len = st->text.len;

    if (st->in_heading || sep[0] == ' ') {
        if (!len || t[len - 1] == ' ' || t[len - 1] == '\n')
            return KEEL_OK;
        return keel_buf_addc(&st->text, ' ');
    }
    if (!len || (len >= 2 && t[len - 1] == '\n' && t[len - 2] == '\n'))
        return KEEL_OK;
    return keel_buf_adds(&st->text, "\n\n");
}

/* The end of the tag that opens at `i` (just past its '>', or n); quoted
 * attribute values may hold '>'. */
static size_t tag_end(const char *html, size_t n, size_t i)
{
    char quote = 0;

    for (i++; i < n; i++) {
        if (quote) {
            if (html[i] == quote)
                quote = 0;
        } else if (html[i] == '"' || html[i] == '\'') {
            quote = html[i];
        } else if (html[i] == '>') {
            return i + 1;
        }
    }
    return n;
}

/* Handles the tag at html[i] == '<' (followed by a letter, '/' or '!');
 * returns where the text resumes in *next. */
static int html_tag(struct html_state *st, const char *html, size_t n, size_t i, size_t *next)
{
    size_t end, name_len = 0, k;
    const char *name = html + i + 1;
    int closing = 0;

    if (starts_with(html + i, n - i, "<!--")) {
        const char *stop = memmem(html + i + 4, n - i - 4, "-->", 3);
        *next = stop ? (size_t)(stop - html) + 3 : n;
        return KEEL_OK;
    }
    end = tag_end(html, n, i);
    *next = end;
    if (*name == '/') {
        closing = 1;
        name++;
    }
    while (name + name_len < html + end &&
           (is_alpha(name[name_len]) || (name[name_len] >= '0' && name[name_len] <= '9')))
        name_len++;
    if (!closing && (tag_is(name, name_len, "script") || tag_is(name, name_len, "style"))) {
        const char *stop = tag_is(name, name_len, "script") ? "</script" : "</style";
        for (k = end; k < n && !starts_with(html + k, n - k, stop); k++)
            ;
        *next = k < n ? tag_end(html, n, k) : n;
        return KEEL_OK;
    }
    if (tag_is(name, name_len, "title")) {
        st->in_title = !closing;
        return KEEL_OK;
    }
    if (name_len == 2 && (name[0] == 'h' || name[0] == 'H') && name[1] >= '1' && name[1] <= '6') {
        /* A markdown heading, so the chunker starts a section. */
        int rc;
        st->in_heading = 0;
        if ((rc = add_break(st, "\n\n")))
            return rc;
        if (closing)
            return KEEL_OK;
        for (int level = name[1] - '0'; level > 0; level--)
            if ((rc = keel_buf_addc(&st->text, '#')))
                return rc;
        st->in_heading = 1;
        return keel_buf_addc(&st->text, ' ');
    }
    if (tag_is(name, name_len, "td") || tag_is(name, name_len, "th"))
        return add_break(st, " ");
    for (k = 0; k < sizeof(block_tags) / sizeof(block_tags[0]); k++)
        if (tag_is(name, name_len, block_tags[k]))
            return add_break(st, "\n\n");
    return KEEL_OK;
}

/* Adds text to the title, whitespace runs collapsed to one space and
 * leading whitespace dropped; past MAX_TITLE (plus room for the cut) the
 * rest is ignored. */
static int add_title(struct html_state *st, const char *piece, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (is_space(piece[i])) {
            st->title_space = 1;
            continue;
        }
        if (st->title.len >= MAX_TITLE + 4)
            return KEEL_OK;
        if (st->title_space && st->title.len && (rc = keel_buf_addc(&st->title, ' ')))
            return rc;
        st->title_space = 0;
        if ((rc = keel_buf_addc(&st->title, piece[i])))
            return rc;
    }
    return KEEL_OK;
}

/* The title as valid UTF-8 of at most MAX_TITLE bytes, cut between
 * characters; NULL in *out when it is empty. */
static int finish_title(struct keel_buf *title, char **out)
{
    struct keel_buf clean;
    size_t len;
    int rc;

    *out = NULL;
    if (!title->len)
        return KEEL_OK;
    keel_buf_init(&clean, 0);
    if ((rc = utf8_repair(title->data, title->len, &clean)) == KEEL_OK) {
        len = utf8_cut(clean.data, clean.len, MAX_TITLE);
        while (len && clean.data[len - 1] == ' ')
            len--;
        if (len && !(*out = keel_strndup(clean.data, len)))
            rc = KEEL_ENOMEM;
    }
    keel_buf_release(&clean);
    return rc;
}

int ingest_html_to_text(const char *html, size_t n, char **text_out, char **title_out)
{
    struct html_state st;
    size_t i = 0;
    int rc = KEEL_OK;

    *text_out = *title_out = NULL;
    memset(&st, 0, sizeof(st));
    keel_buf_init(&st.text, 0);
    keel_buf_init(&st.title, 0);
    while (i < n && !rc) {
        const char *piece = html + i;
        size_t piece_n = 1, used = 1;
        char utf8[4];

        if (html[i] == '<' && i + 1 < n &&
            (is_alpha(html[i + 1]) || html[i + 1] == '/' || html[i + 1] == '!')) {
            rc = html_tag(&st, html, n, i, &i);
            continue;
        }
        if (html[i] == '&') {
            if ((used = numeric_entity(html + i, n - i, utf8, &piece_n))) {
                piece = utf8;
            } else {
                used = 1;
                for (size_t e = 0; e < sizeof(entities) / sizeof(entities[0]); e++)
                    if (starts_with(html + i, n - i, entities[e].name)) {
                        piece = entities[e].text;
                        piece_n = strlen(piece);
                        used = strlen(entities[e].name);
                        break;
                    }
            }
        }
        if (st.in_title)
            rc = add_title(&st, piece, piece_n);
        else if (st.in_heading && piece_n == 1 && is_space(*piece))
            rc = keel_buf_addc(&st.text, ' ');   /* a heading stays on its line */
        else
            rc = keel_buf_add(&st.text, piece, piece_n);
        i += used;
    }
    if (!rc && st.in_heading)
        rc = add_break(&st, "\n\n");
    if (!rc)
        rc = finish_title(&st.title, title_out);
    if (!rc && !(*text_out = keel_buf_detach(&st.text, NULL)))
        rc = KEEL_ENOMEM;
    keel_buf_release(&st.text);
    keel_buf_release(&st.title);
    if (rc) {
        keel_free(*title_out);
        keel_free(*text_out);
        *title_out = *text_out = NULL;
    }
    return rc;
}
