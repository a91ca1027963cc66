/*
 * bibtex.c — BibTeX files into paper records.
 *
 * The grammar read: text outside entries is a comment; an entry is
 * `@type{key, name = value, …}` (or with parentheses); a value is a
 * {braced} or "quoted" string, a number or a macro name, joined by `#`.
 * `@string{name = value}` defines a macro (the month names jan…dec are
 * predefined); `@comment` and `@preamble` are skipped. Field names are
 * case-insensitive. Each entry becomes the JSON record that
 * ingest_paper_from_json() reads: title, author (split on " and ", "Last,
 * First" turned into "First Last"), year (else the year of `date`),
 * venue (journal, booktitle or series), doi, url, abstract, and the
 * entry's key and type. LaTeX in values is tidied: braces go, common
 * accents ({\"u}, \'{e}, \c{c}) become their letters, escaped specials
 * (\&, \%, \_) their characters, `--` an en dash, `~` a space, other
 * commands (\emph) only their argument.
 *
 * Values must be UTF-8. Caps: a value of at most 64 KiB, 512 fields per
 * entry, 1,024 macros, braces nested at most 32 deep. An entry that
 * breaks the grammar, a cap or UTF-8 is reported with its line and
 * skipped; reading goes on at the next line that starts with `@`. An `@`
 * not followed by a type and `{` or `(` is text, not an entry. URLs and
 * DOIs keep their characters (only braces and \_ \% \& \# \~ are undone).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "ingest/ingest.h"
#include "core/utf8.h"

#define VALUE_MAX  (64 * 1024)
#define FIELDS_MAX 512
#define MACROS_MAX 1024
#define DEPTH_MAX  32

struct bib {
    const char *text;
    size_t n, pos;
    long line;
    json_t *macros;
    char why[160];
};

static int at_end(const struct bib *b)
{
    return b->pos >= b->n;
}

static char peek(const struct bib *b)
{
    return at_end(b) ? '\0' : b->text[b->pos];
}

static void advance(struct bib *b)
{
    if (!at_end(b) && b->text[b->pos++] == '\n')
        b->line++;
}

static void skip_space(struct bib *b)
{
    while (!at_end(b) && isspace((unsigned char)peek(b)))
        advance(b);
}

/* Nonzero when position `at` starts a line (only blanks before it since
 * the last newline) with '@' and a letter: where a new entry begins. */
static int entry_line_at(const struct bib *b, size_t at)
{
    size_t k = at;

    if (at >= b->n || b->text[at] != '@' || at + 1 >= b->n ||
        !isalpha((unsigned char)b->text[at + 1]))
        return 0;
    while (k > 0 && (b->text[k - 1] == ' ' || b->text[k - 1] == '\t'))
        k--;
    return k == 0 || b->text[k - 1] == '\n';
}

static int fail(struct bib *b, const char *why)
{
    snprintf(b->why, sizeof(b->why), "%s", why);
    return KEEL_EINVAL;
}

/* A name: letters, digits and - _ : . + / (entry types, field names,
 * macros), lowercased into `out`. */
static int read_name(struct bib *b, char *out, size_t n)
{
    size_t len = 0;

    while (!at_end(b)) {
        char c = peek(b);
        if (!isalnum((unsigned char)c) && !strchr("-_:.+/", c))
            break;
        if (len + 1 < n)
            out[len++] = (char)tolower((unsigned char)c);
        advance(b);
    }
    out[len] = '\0';
    return len ? KEEL_OK : KEEL_EINVAL;
}

/* Appends a {braced} group (without its outer braces, inner ones kept)
 * or a "quoted" string to `out`. */
static int read_delimited(struct bib *b, struct keel_buf *out)
{
    char open = peek(b);
    int depth = 0;

    advance(b);
    for (;;) {
        char c;
        if (at_end(b))
            return fail(b, open == '{' ? "a { is never closed" : "a \" is never closed");
        c = peek(b);
        if (c == '{' && ++depth > DEPTH_MAX)
            return fail(b, "braces nested too deep");
        if (c == '}') {
            if (depth == 0) {
                if (open == '{') {
                    advance(b);
                    return KEEL_OK;
                }
                return fail(b, "a } closes nothing");
            }
            depth--;
        }
        if (c == '"' && open == '"' && depth == 0) {
            advance(b);
            return KEEL_OK;
        }
        if (c == '\n') {   /* a value running into the next entry was never closed */
            size_t k = b->pos + 1;
            while (k < b->n && (b->text[k] == ' ' || b->text[k] == '\t'))
                k++;
            if (entry_line_at(b, k))
                return fail(b, open == '{' ? "a { is never closed" : "a \" is never closed");
        }
        if (keel_buf_addc(out, c))
            return fail(b, "a value is longer than 64 KiB");
        advance(b);
    }
}

/* value = part ( '#' part )* */
static int read_value(struct bib *b, struct keel_buf *out)
{
    for (;;) {
        char c;
        skip_space(b);
        c = peek(b);
        if (c == '{' || c == '"') {
            if (read_delimited(b, out))
                return KEEL_EINVAL;
        } else if (isdigit((unsigned char)c)) {
            while (isdigit((unsigned char)peek(b))) {
                if (keel_buf_addc(out, peek(b)))
                    return fail(b, "a value is longer than 64 KiB");
                advance(b);
            }
        } else {
            char name[64];
            json_t *macro;
            if (read_name(b, name, sizeof(name)))
                return fail(b, "a field has no value");
            macro = json_object_get(b->macros, name);
            if (macro && keel_buf_adds(out, json_string_value(macro)))
                return fail(b, "a value is longer than 64 KiB");
        }
        skip_space(b);
        if (peek(b) != '#')
            return KEEL_OK;
        advance(b);
    }
}

/* Skips a balanced {…} or (…) body. */
static int skip_body(struct bib *b, char close)
{
    int depth = 0;

    for (; !at_end(b); advance(b)) {
        char c = peek(b);
        if (c == '{')
            depth++;
        else if (c == '}' && depth > 0)
            depth--;
        else if (c == close && depth == 0) {
            advance(b);
            return KEEL_OK;
        }
    }
    return fail(b, "an entry is never closed");
}

/* ---- LaTeX to text ----------------------------------------------------- */

static const struct {
    char accent, letter;
    const char *utf8;
} accents[] = {
    {'"', 'a', "ä"}, {'"', 'e', "ë"}, {'"', 'i', "ï"}, {'"', 'o', "ö"}, {'"', 'u', "ü"},
    {'"', 'A', "Ä"}, {'"', 'O', "Ö"}, {'"', 'U', "Ü"}, {'"', 'y', "ÿ"},
    {'\'', 'a', "á"}, {'\'', 'e', "é"}, {'\'', 'i', "í"}, {'\'', 'o', "ó"}, {'\'', 'u', "ú"},
    {'\'', 'E', "É"}, {'\'', 'A', "Á"}, {'\'', 'O', "Ó"}, {'\'', 'c', "ć"}, {'\'', 'n', "ń"},
    {'\'', 's', "ś"}, {'\'', 'z', "ź"}, {'\'', 'y', "ý"},
    {'`', 'a', "à"}, {'`', 'e', "è"}, {'`', 'i', "ì"}, {'`', 'o', "ò"}, {'`', 'u', "ù"},
    {'^', 'a', "â"}, {'^', 'e', "ê"}, {'^', 'i', "î"}, {'^', 'o', "ô"}, {'^', 'u', "û"},
    {'~', 'a', "ã"}, {'~', 'n', "ñ"}, {'~', 'o', "õ"}, {'~', 'N', "Ñ"},
    {'c', 'c', "ç"}, {'c', 'C', "Ç"}, {'v', 's', "š"}, {'v', 'c', "č"}, {'v', 'z', "ž"},
    {'v', 'r', "ř"}, {'v', 'S', "Š"}, {'v', 'C', "Č"},
};

static const struct {
    const char *command, *utf8;
} letters[] = {
    {"ss", "ß"}, {"o", "ø"}, {"O", "Ø"}, {"ae", "æ"}, {"AE", "Æ"}, {"aa", "å"}, {"AA", "Å"},
    {"l", "ł"}, {"L", "Ł"}, {"i", "i"}, {"oe", "œ"},
};

/* The letter an accent command applies to: "u", "{u}" or " u". */
static const char *accent_target(const char *p, char *letter)
{
    while (*p == ' ')
        p++;
    if (*p == '{' && p[1] == '}') {   /* \'{} : nothing to accent */
        *letter = '\0';
        return p + 2;
    }
    if (*p == '{' && p[1] == '\\' && p[2] == 'i' && p[3] == '}') {   /* \"{\i} */
        *letter = 'i';
        return p + 4;
    }
    if (*p == '{' && p[1] && p[2] == '}') {
        *letter = p[1];
        return p + 3;
    }
    if (*p == '\\' && p[1] == 'i' && !isalpha((unsigned char)p[2])) {   /* \'\i */
        *letter = 'i';
        return p + 2;
    }
    *letter = *p;
    return *p ? p + 1 : p;
}

/* Turns a raw BibTeX value into plain text: braces out, accents and
 * specials decoded, whitespace runs one space, trimmed. */
static int latex_to_text(const char *raw, struct keel_buf *out)
{
    int space = 0, rc = KEEL_OK;

    for (const char *p = raw; *p && !rc;) {
        const char *emit = NULL;
        char one[2] = {0, 0};

        if (*p == '{' || *p == '}' || *p == '$') {
            p++;
            continue;
        }
        if (isspace((unsigned char)*p) || *p == '~') {
            space = 1;
            p++;
            continue;
        }
        if (*p == '\\') {
            char accent = p[1];
            if ((accent && strchr("\"'`^~", accent)) ||
                ((accent == 'c' || accent == 'v') && (p[2] == '{' || p[2] == ' '))) {
                char letter;
                p = accent_target(p + 2, &letter);
                one[0] = letter;
                emit = one;   /* "" when there was no letter */
                for (size_t i = 0; i < sizeof(accents) / sizeof(accents[0]); i++)
                    if (accents[i].accent == accent && accents[i].letter == letter)
                        emit = accents[i].utf8;
            } else if (isalpha((unsigned char)accent)) {
                const char *start = p + 1;
                size_t len = 0;
                while (isalpha((unsigned char)start[len]))
                    len++;
                p = start + len;
                for (size_t i = 0; i < sizeof(letters) / sizeof(letters[0]); i++)
                    if (strlen(letters[i].command) == len &&
                        !strncmp(letters[i].command, start, len))
                        emit = letters[i].utf8;
                if (emit && *p == ' ')
                    p++;   /* "\ss " */
                if (!emit)
                    continue;   /* \emph{x}: only x stays */
            } else if (accent) {
                one[0] = accent;   /* \& \% \_ \# \$ \{ */
                emit = one;
                p += 2;
            } else {
                p++;
                continue;
            }
        } else if (p[0] == '-' && p[1] == '-') {
            emit = p[2] == '-' ? "—" : "–";
            p += p[2] == '-' ? 3 : 2;
        } else {
            one[0] = *p++;
            emit = one;
        }
        if (space && out->len)
            rc = keel_buf_addc(out, ' ');
        space = 0;
        if (!rc && emit[0])
            rc = keel_buf_adds(out, emit);
    }
    return rc;
}

/* ---- entries into records ---------------------------------------------- */

/* Adds `key` = `raw` with only braces removed and \_ \% \& \# \~ \$
 * unescaped: URLs and DOIs keep their ~ and --. */
static int set_verbatim(json_t *record, const char *key, const char *raw)
{
    struct keel_buf text;
    int rc = KEEL_OK;

    if (!raw)
        return KEEL_OK;
    keel_buf_init(&text, VALUE_MAX);
    for (const char *p = raw; *p && !rc; p++) {
        if (*p == '{' || *p == '}')
            continue;
        if (*p == '\\' && p[1] && strchr("_%&#~$", p[1]))
            p++;
        if (!isspace((unsigned char)*p))
            rc = keel_buf_addc(&text, *p);
    }
    if (!rc && text.len && json_object_set_new(record, key, json_string(text.data)))
        rc = KEEL_ENOMEM;
    keel_buf_release(&text);
    return rc;
}

/* Adds `key` = plain text of `raw` to `record` when not empty. */
static int set_text(json_t *record, const char *key, const char *raw)
{
    struct keel_buf text;
    int rc;

    if (!raw)
        return KEEL_OK;
    keel_buf_init(&text, 2 * VALUE_MAX);
    rc = latex_to_text(raw, &text);
    if (!rc && text.len && json_object_set_new(record, key, json_string(text.data)))
        rc = KEEL_ENOMEM;
    keel_buf_release(&text);
    return rc;
}

/* "Lovelace, Ada" → "Ada Lovelace"; "von Neumann, Jr., John" → "John von
 * Neumann Jr."; "Ada Lovelace" stays. */
static int add_name(json_t *authors, const char *raw, size_t n)
{
    struct keel_buf name, text;
    const char *comma[2] = {NULL, NULL};
    int depth = 0, commas = 0, rc;

    for (size_t i = 0; i < n; i++) {
        if (raw[i] == '{')
            depth++;
        else if (raw[i] == '}')
            depth -= depth > 0;
        else if (raw[i] == ',' && depth == 0 && commas < 2)
            comma[commas++] = raw + i;
    }
    keel_buf_init(&name, VALUE_MAX);
    keel_buf_init(&text, 2 * VALUE_MAX);
    if (commas == 0)
        rc = keel_buf_add(&name, raw, n);
    else if (commas == 1)
        rc = keel_buf_add(&name, comma[0] + 1, (size_t)(raw + n - comma[0] - 1)) ||
             keel_buf_addc(&name, ' ') || keel_buf_add(&name, raw, (size_t)(comma[0] - raw));
    else
        rc = keel_buf_add(&name, comma[1] + 1, (size_t)(raw + n - comma[1] - 1)) ||
             keel_buf_addc(&name, ' ') || keel_buf_add(&name, raw, (size_t)(comma[0] - raw)) ||
             keel_buf_addc(&name, ' ') ||
             keel_buf_add(&name, comma[0] + 1, (size_t)(comma[1] - comma[0] - 1));
    if (!rc)
        rc = latex_to_text(name.data, &text);
    if (!rc && text.len && json_array_append_new(authors, json_string(text.data)))
        rc = KEEL_ENOMEM;
    keel_buf_release(&name);
    keel_buf_release(&text);
    return rc ? KEEL_ENOMEM : KEEL_OK;
}

/* Splits an author field on " and " outside braces. */
static int add_authors(json_t *record, const char *raw)
{
    json_t *authors;
    const char *start = raw;
    int depth = 0, rc = KEEL_OK;

    if (!raw)
        return KEEL_OK;
    if (!(authors = json_array()))
        return KEEL_ENOMEM;
    for (const char *p = raw;; p++) {
        if (*p == '{')
            depth++;
        else if (*p == '}')
            depth -= depth > 0;
        if (!*p || (depth == 0 && isspace((unsigned char)*p) && !strncasecmp(p + 1, "and", 3) &&
                    isspace((unsigned char)p[4]))) {
            const char *s = start, *e = p;
            while (s < e && isspace((unsigned char)*s))
                s++;
            while (e > s && isspace((unsigned char)e[-1]))
                e--;
            if (e > s && !(e - s == 6 && !strncasecmp(s, "others", 6)) &&
                (rc = add_name(authors, s, (size_t)(e - s))))
                break;
            if (!*p)
                break;
            start = p + 4;
            p += 3;
        }
    }
    if (!rc && json_array_size(authors) && json_object_set(record, "author", authors))
        rc = KEEL_ENOMEM;
    json_decref(authors);
    return rc;
}

static const char *field(const json_t *fields, const char *name)
{
    return json_string_value(json_object_get(fields, name));
}

/* The record of one entry's fields. */
static json_t *entry_record(const json_t *fields, const char *type, const char *key)
{
    json_t *record = json_pack("{s:s, s:s}", "bibtex_type", type, "bibtex_key", key);
    const char *venue = field(fields, "journal");
    const char *year = field(fields, "year");
    char digits[8];

    if (!venue)
        venue = field(fields, "booktitle");
    if (!venue)
        venue = field(fields, "series");
    if (!year)
        year = field(fields, "date");   /* biblatex: 2021-05-01 */
    if (!record || set_text(record, "title", field(fields, "title")) ||
        set_text(record, "abstract", field(fields, "abstract")) ||
        set_text(record, "venue", venue) || set_verbatim(record, "doi", field(fields, "doi")) ||
        set_verbatim(record, "url", field(fields, "url")) ||
        add_authors(record, field(fields, "author")))
        goto nomem;
    if (year) {
        size_t k = 0;
        while (*year && !isdigit((unsigned char)*year))
            year++;
        while (k < 4 && isdigit((unsigned char)year[k])) {
            digits[k] = year[k];
            k++;
        }
        digits[k] = '\0';
        if (k == 4 && json_object_set_new(record, "year", json_string(digits)))
            goto nomem;
    }
    return record;
nomem:
    json_decref(record);
    return NULL;
}

/* Reads one entry after its '@'. Returns KEEL_OK (an entry or something
 * skipped), KEEL_EINVAL (b->why says what; the caller skips on) or
 * KEEL_ENOMEM. */
static int read_entry(struct bib *b, json_t **record)
{
    char type[32], name[64], close, key[256];
    json_t *fields;
    struct keel_buf value;
    size_t n_fields = 0, len = 0;
    int rc = KEEL_OK;

    *record = NULL;
    /* An @ not followed by "type {" or "type (" is text between entries
     * (an e-mail address in a comment), not a broken entry. */
    if (read_name(b, type, sizeof(type)))
        return KEEL_OK;
    skip_space(b);
    if (peek(b) != '{' && peek(b) != '(')
        return KEEL_OK;
    close = peek(b) == '{' ? '}' : ')';
    advance(b);
    if (!strcmp(type, "comment") || !strcmp(type, "preamble"))
        return skip_body(b, close);
    if (!(fields = json_object()))
        return KEEL_ENOMEM;
    keel_buf_init(&value, VALUE_MAX);
    if (strcmp(type, "string")) {
        skip_space(b);
        while (!at_end(b) && peek(b) != ',' && peek(b) != close && !isspace((unsigned char)peek(b))) {
            if (len + 1 < sizeof(key))
                key[len++] = peek(b);
            advance(b);
        }
        key[utf8_valid_prefix(key, len)] = '\0';   /* never half a character */
        skip_space(b);
        if (peek(b) == ',')
            advance(b);
    }
    for (;;) {
        skip_space(b);
        if (peek(b) == ',') {
            advance(b);
            continue;
        }
        if (peek(b) == close) {
            advance(b);
            break;
        }
        if (at_end(b)) {
            rc = fail(b, "an entry is never closed");
            break;
        }
        if (read_name(b, name, sizeof(name))) {
            rc = fail(b, "a field name is expected");
            break;
        }
        skip_space(b);
        if (peek(b) != '=') {
            rc = fail(b, "a field name is not followed by =");
            break;
        }
        advance(b);
        keel_buf_reset(&value);
        if ((rc = read_value(b, &value)))
            break;
        if (utf8_valid_prefix(value.data, value.len) != value.len || memchr(value.data, 0, value.len)) {
            rc = fail(b, "a value is not UTF-8 text (convert the file to UTF-8)");
            break;
        }
        if (++n_fields > FIELDS_MAX) {
            rc = fail(b, "an entry has more than 512 fields");
            break;
        }
        if (!strcmp(type, "string")) {
            if (json_object_size(b->macros) >= MACROS_MAX) {
                rc = fail(b, "more than 1024 @string macros");
                break;
            }
            if (json_object_set_new(b->macros, name, json_string(value.data))) {
                rc = KEEL_ENOMEM;
                break;
            }
        } else if (!json_object_get(fields, name) &&   /* the first of a repeated field */
                   json_object_set_new(fields, name, json_string(value.data))) {
            rc = KEEL_ENOMEM;
            break;
        }
    }
    if (!rc && strcmp(type, "string") && !(*record = entry_record(fields, type, key)))
        rc = KEEL_ENOMEM;
    keel_buf_release(&value);
    json_decref(fields);
    return rc;
}

int ingest_bibtex(const char *text, size_t n, ingest_bibtex_each each, void *ctx,
                  struct keel_error *err)
{
    static const char *const months[] = {"jan", "January", "feb", "February", "mar", "March",
                                         "apr", "April", "may", "May", "jun", "June",
                                         "jul", "July", "aug", "August", "sep", "September",
                                         "oct", "October", "nov", "November", "dec", "December"};
    struct bib b = {text, n, 0, 1, json_object(), ""};
    int rc = KEEL_OK;

    for (size_t i = 0; b.macros && i < sizeof(months) / sizeof(months[0]); i += 2)
        if (json_object_set_new(b.macros, months[i], json_string(months[i + 1])))
            rc = KEEL_ENOMEM;
    if (!b.macros || rc) {
        json_decref(b.macros);
        return keel_error_set(err, KEEL_ENOMEM, "bibtex", "out of memory");
    }
    while (!rc) {
        json_t *record;
        long line;
        int entry_rc;

        while (!at_end(&b) && peek(&b) != '@')
            advance(&b);
        if (at_end(&b))
            break;
        line = b.line;
        advance(&b);
        entry_rc = read_entry(&b, &record);
        if (entry_rc == KEEL_ENOMEM) {
            rc = keel_error_set(err, KEEL_ENOMEM, "bibtex", "out of memory");
            break;
        }
        if (entry_rc) {
            rc = each(NULL, line, b.why, ctx);
            /* Go on at the next line that starts with @ (perhaps this
             * one: the entry broke where the next began); an @ inside the
             * broken entry's text is not an entry. */
            while (!at_end(&b) && !entry_line_at(&b, b.pos))
                advance(&b);
        } else if (record) {
            rc = each(record, line, NULL, ctx);
        }
        json_decref(record);
    }
    json_decref(b.macros);
    return rc;
}
