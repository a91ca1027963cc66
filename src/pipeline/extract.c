/*
 * extract.c — deterministic extraction from a user message: the text
 * after a lead phrase ("my research question is …"), jurisdiction slot
 * values by alias, and redaction of patient identifiers so none reaches
 * the thread state.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "pipeline/turn.h"

#define REDACTED "[redacted]"

static int is_sentence_end(char c)
{
    return c == '.' || c == '?' || c == '!' || c == ';' || c == '\n';
}

void extract_after_lead(const struct pipeline_config *cfg, const char *msg, size_t n,
                        int category, char *out, size_t cap)
{
    struct lex_result res;
    size_t start = n, end;

    out[0] = '\0';
    config_match(cfg, msg, n, &res);
    for (uint32_t i = 0; i < res.n_matches; i++) {
        const struct lex_match *m = &res.matches[i];
        if (m->category != category)
            continue;
        const struct lex_token *last = &res.tokens[m->start + m->n - 1];
        start = last->start + last->len;
        break;
    }
    if (start >= n)
        return;
    while (start < n && (isspace((unsigned char)msg[start]) || msg[start] == ':' ||
                         msg[start] == ',' || msg[start] == '-'))
        start++;
    /* "that"/"whether" after "my question is" introduces the question. */
    if (n - start > 5 && !strncasecmp(msg + start, "that ", 5))
        start += 5;
    end = start;
    while (end < n && !(is_sentence_end(msg[end]) &&
                        (end + 1 == n || isspace((unsigned char)msg[end + 1]))))
        end++;
    while (end > start && (isspace((unsigned char)msg[end - 1]) || msg[end - 1] == ','))
        end--;
    if (end > start)
        extract_redact(msg + start, end - start, out, cap);
}

int extract_slot_spans_in(const struct pipeline_config *cfg, const struct lex_result *res,
                          struct slot_span spans[CONFIG_MAX_SLOTS])
{
    int named = 0;

    for (int s = 0; s < CONFIG_MAX_SLOTS; s++)
        spans[s] = (struct slot_span){-1, 0, 0, 0};
    for (uint32_t i = 0; i < res->n_matches; i++) {
        const struct lex_match *m = &res->matches[i];
        int s = (int)m->category - CCAT_SLOT;

        if (s < 0 || s >= cfg->n_slots || m->n <= spans[s].tokens)
            continue;   /* the longest alias wins: "united healthcare" over "united" */
        named += spans[s].value < 0;
        spans[s].value = m->value;
        spans[s].tokens = m->n;
        spans[s].start = res->tokens[m->start].start;
        spans[s].len = res->tokens[m->start + m->n - 1].start +
                       res->tokens[m->start + m->n - 1].len - spans[s].start;
    }
    return named;
}

int extract_slot_spans(const struct pipeline_config *cfg, const char *msg, size_t n,
                       struct slot_span spans[CONFIG_MAX_SLOTS])
{
    struct lex_result res;

    config_match(cfg, msg, n, &res);
    return extract_slot_spans_in(cfg, &res, spans);
}

int extract_slots(const struct pipeline_config *cfg, const char *msg, size_t n,
                  int values[CONFIG_MAX_SLOTS])
{
    struct slot_span spans[CONFIG_MAX_SLOTS];
    int named = extract_slot_spans(cfg, msg, n, spans);

    for (int s = 0; s < CONFIG_MAX_SLOTS; s++)
        values[s] = spans[s].value;
    return named;
}

/* ---- redaction ------------------------------------------------------------- */

/* The length of a currency sign starting `w` (£ $ €), or 0. */
static size_t currency_sign(const char *w, size_t n)
{
    if (n >= 1 && w[0] == '$')
        return 1;
    if (n >= 2 && !memcmp(w, "\xc2\xa3", 2))          /* £ */
        return 2;
    if (n >= 3 && !memcmp(w, "\xe2\x82\xac", 3))      /* € */
        return 3;
    return 0;
}

/* A money amount, never an identifier: a currency sign, then digits
 * with optional , or . separators, then optionally k, m or bn ("£110k",
 * "£1,250,000", "$2.5m"); or, without a sign, digits grouped by commas
 * in threes ("1,250,000"). */
static int is_money(const char *w, size_t n)
{
    size_t i = currency_sign(w, n), digits = 0, end;
    int sign = i > 0;

    if (i >= n || !isdigit((unsigned char)w[i]))
        return 0;
    end = n;
    if (sign && end - i > 2 && !strncasecmp(w + end - 2, "bn", 2))
        end -= 2;
    else if (sign && (w[end - 1] == 'k' || w[end - 1] == 'K' || w[end - 1] == 'm' ||
                      w[end - 1] == 'M'))
        end--;
    if (sign) {
        for (; i < end; i++) {
            if (isdigit((unsigned char)w[i]))
                digits++;
            else if (!(w[i] == ',' || w[i] == '.') || !isdigit((unsigned char)w[i - 1]))
                return 0;
        }
        return digits > 0 && isdigit((unsigned char)w[end - 1]);
    }
    /* 1,250,000: one to three digits, then groups of ",ddd" */
    for (; i < end && isdigit((unsigned char)w[i]); i++)
        digits++;
    if (digits > 3 || i == end)
        return 0;
    while (i < end) {
        if (end - i < 4 || w[i] != ',' || !isdigit((unsigned char)w[i + 1]) ||
            !isdigit((unsigned char)w[i + 2]) || !isdigit((unsigned char)w[i + 3]))
            return 0;
        i += 4;
    }
    return 1;
}

/* A date (digits with / - . between), a long number, or a code mixing
 * letters and digits of 6+ characters (member ids, MRNs). Years alone
 * (four digits) stay: they are search filters, not identifiers; so do
 * money amounts (is_money: the £ sign is two bytes, and "£110k" is not
 * a code). */
static int is_identifier(const char *w, size_t n)
{
    size_t digits = 0, letters = 0, seps = 0;

    if (is_money(w, n))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        digits += isdigit(c) != 0;
        letters += isalpha(c) != 0;
        seps += c == '/' || c == '-' || c == '.';
    }
    if (!digits)
        return 0;
    if (seps == 2 && !letters && digits >= 4 && digits + seps == n)
        return 1;                        /* 01/02/1980, 1980-01-02 (not 2018-2020) */
    if (!letters && !seps && digits >= 7)
        return 1;                        /* 123456789 */
    return letters && digits >= 3 && n >= 6;   /* AB123456, MRN00123 */
}

/* Lower-case words after which names follow. */
static const char *const name_leads[] = {"patient", "patient's", "member", "name", "named",
                                         "mrn", "dob", NULL};

static int is_name_lead(const char *w, size_t n)
{
    for (int i = 0; name_leads[i]; i++)
        if (strlen(name_leads[i]) == n && !strncasecmp(w, name_leads[i], n))
            return 1;
    return 0;
}

static int is_connector(const char *w, size_t n)
{
    static const char *const words[] = {"is", "was", "id", "number", "of", "for", "named", NULL};

    for (int i = 0; words[i]; i++)
        if (strlen(words[i]) == n && !strncasecmp(w, words[i], n))
            return 1;
    return 0;
}

static void put(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n + 1 > cap)
        n = cap - 1 - *len;
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

void extract_redact(const char *msg, size_t n, char *out, size_t cap)
{
    size_t i = 0, len = 0, marker_end = 0;
    int names_left = 0, last_redacted = 0;

    out[0] = '\0';
    while (i < n && len + 1 < cap) {
        size_t start = i, end, core_end;

        if (isspace((unsigned char)msg[i]) || iscntrl((unsigned char)msg[i])) {
            put(out, cap, &len, " ", 1);   /* control characters never reach the state */
            i++;
            continue;
        }
        while (i < n && !isspace((unsigned char)msg[i]) && !iscntrl((unsigned char)msg[i]))
            i++;
        end = i;
        core_end = end;
        while (core_end > start && strchr(",;:?!)", msg[core_end - 1]))
            core_end--;
        if (core_end > start + 1 && msg[core_end - 1] == '.')
            core_end--;   /* a sentence's full stop, also after "2019." */
        int capital = isupper((unsigned char)msg[start]);
        int sentence_end = core_end < end && strchr(".?!", msg[end - 1]);
        if (is_identifier(msg + start, core_end - start) || (names_left > 0 && capital)) {
            if (last_redacted) {
                len = marker_end;   /* "John Smith," → one marker, one comma */
                out[len] = '\0';
            } else {
                put(out, cap, &len, REDACTED, strlen(REDACTED));
                marker_end = len;
            }
            put(out, cap, &len, msg + core_end, end - core_end);
            last_redacted = 1;
            names_left = names_left > 0 && capital && !sentence_end ? names_left - 1 : 0;
            continue;
        }
        last_redacted = 0;
        if (is_name_lead(msg + start, core_end - start))
            names_left = 3;
        else if (!(names_left && is_connector(msg + start, core_end - start)))
            names_left = 0;   /* "name is John", "member id: AB1234" keep looking */
        if (sentence_end)
            names_left = 0;   /* a name never runs past its sentence */
        put(out, cap, &len, msg + start, end - start);
    }
}

/* ---- refining a query with the jurisdiction ---------------------------------- */

void turn_refine(const struct turn *t, const char *text, char *out, size_t cap)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    struct slot_span spans[CONFIG_MAX_SLOTS];
    uint32_t needed = cfg->needed_slots;
    size_t len = 0, at = 0, n = strlen(text);

    extract_slot_spans(cfg, text, n, spans);
    /* Each named value of a needed slot reads as the state's canonical
     * value: "with UHC" → "with United Healthcare" (what the corpus
     * says), and after a change "with sunshine" → "with Aetna Better
     * Health". Spans are copied in text order. */
    out[0] = '\0';
    while (at <= n) {
        int next = -1;
        for (int s = 0; s < cfg->n_slots; s++)
            if (spans[s].value >= 0 && t->state.slots[s][0] && (needed >> s & 1) &&
                spans[s].start >= at && (next < 0 || spans[s].start < spans[next].start))
                next = s;
        size_t stop = next >= 0 ? spans[next].start : n;
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%.*s", (int)(stop - at),
                                text + at);
        if (next < 0 || len >= cap)
            break;
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s", t->state.slots[next]);
        at = spans[next].start + spans[next].len;
        spans[next].value = -2;   /* done; still counts as named below */
    }
    len = strlen(out);
    while (len && strchr("?.! ", out[len - 1]))
        out[--len] = '\0';
    for (int s = 0; s < cfg->n_slots; s++) {
        const char *value = t->state.slots[s], *mark;

        if (!value[0] || !(needed >> s & 1) || spans[s].value != -1 || strcasestr(out, value))
            continue;   /* unknown, not needed, or the text names it already */
        mark = strstr(cfg->slots[s].refine, "{value}");
        len = strlen(out);
        snprintf(out + len, cap - len, " %.*s%s%s", (int)(mark - cfg->slots[s].refine),
                 cfg->slots[s].refine, value, mark + 7);
    }
}

void turn_focus(const struct turn *t, const char *text, char *out, size_t cap)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    struct slot_span spans[CONFIG_MAX_SLOTS];
    size_t n = strlen(text), len = 0;

    extract_slot_spans(cfg, text, n, spans);
    out[0] = '\0';
    for (size_t i = 0; i < n && len + 1 < cap; i++) {
        int inside = 0;
        for (int s = 0; s < cfg->n_slots && !inside; s++)
            inside = spans[s].value >= 0 && i >= spans[s].start && i < spans[s].start + spans[s].len;
        out[len++] = inside ? ' ' : text[i];
    }
    out[len] = '\0';
}
