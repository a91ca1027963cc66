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

int extract_slots(const struct pipeline_config *cfg, const char *msg, size_t n,
                  int values[CONFIG_MAX_SLOTS])
{
    struct lex_result res;
    int longest[CONFIG_MAX_SLOTS] = {0}, named = 0;

    for (int s = 0; s < CONFIG_MAX_SLOTS; s++)
        values[s] = -1;
    config_match(cfg, msg, n, &res);
    for (uint32_t i = 0; i < res.n_matches; i++) {
        const struct lex_match *m = &res.matches[i];
        int s = (int)m->category - CCAT_SLOT;

        if (s < 0 || s >= cfg->n_slots || m->n <= longest[s])
            continue;   /* the longest alias wins: "united healthcare" over "united" */
        named += values[s] < 0;
        values[s] = m->value;
        longest[s] = m->n;
    }
    return named;
}

/* ---- redaction ------------------------------------------------------------- */

static int word_has_digit(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isdigit((unsigned char)w[i]))
            return 1;
    return 0;
}

/* A date (digits with / - . between), a long number, or a code mixing
 * letters and digits of 6+ characters (member ids, MRNs). Years alone
 * (four digits) stay: they are search filters, not identifiers. */
static int is_identifier(const char *w, size_t n)
{
    size_t digits = 0, letters = 0, seps = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        digits += isdigit(c) != 0;
        letters += isalpha(c) != 0;
        seps += c == '/' || c == '-' || c == '.';
    }
    if (!digits)
        return 0;
    if (seps && digits >= 4 && !letters && digits + seps == n)
        return 1;                        /* 01/02/1980, 1980-01-02 */
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
    size_t i = 0, len = 0;
    int names_left = 0, last_redacted = 0;

    out[0] = '\0';
    while (i < n && len + 1 < cap) {
        size_t start = i, end, core_end;

        if (isspace((unsigned char)msg[i])) {
            put(out, cap, &len, msg + i, 1);
            i++;
            continue;
        }
        while (i < n && !isspace((unsigned char)msg[i]))
            i++;
        end = i;
        core_end = end;
        while (core_end > start && strchr(",;:?!)", msg[core_end - 1]))
            core_end--;
        if (core_end > start + 1 && msg[core_end - 1] == '.' && !word_has_digit(msg + start, 1))
            core_end--;
        int capital = isupper((unsigned char)msg[start]);
        if (is_identifier(msg + start, core_end - start) || (names_left > 0 && capital)) {
            if (!last_redacted)
                put(out, cap, &len, REDACTED, strlen(REDACTED));
            else if (len && out[len - 1] == ' ')
                len--, out[len] = '\0';   /* "John Smith" → one marker */
            put(out, cap, &len, msg + core_end, end - core_end);
            last_redacted = 1;
            names_left = names_left > 0 && capital ? names_left - 1 : 0;
            continue;
        }
        last_redacted = 0;
        if (is_name_lead(msg + start, core_end - start))
            names_left = 3;
        else if (!(names_left && is_connector(msg + start, core_end - start)))
            names_left = 0;   /* "name is John", "member id: AB1234" keep looking */
        put(out, cap, &len, msg + start, end - start);
    }
}

/* ---- refining a query with the jurisdiction ---------------------------------- */

void turn_refine(const struct turn *t, const char *text, char *out, size_t cap)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    int named[CONFIG_MAX_SLOTS];
    uint32_t needed = 0;
    size_t len;

    snprintf(out, cap, "%s", text);
    len = strlen(out);
    while (len && strchr("?.! ", out[len - 1]))
        out[--len] = '\0';
    for (int p = 0; p < cfg->n_paths; p++)
        needed |= cfg->paths[p].needs;
    extract_slots(cfg, text, strlen(text), named);
    for (int s = 0; s < cfg->n_slots; s++) {
        const char *value = t->state.slots[s], *at;
        int v = -1;

        if (!value[0] || !(needed >> s & 1))
            continue;
        for (int k = 0; k < cfg->slots[s].n_values; k++)
            if (!strcmp(cfg->slots[s].values[k], value))
                v = k;
        if (named[s] >= 0 && named[s] == v)
            continue;                      /* the text names it already */
        if (strcasestr(out, value))
            continue;
        at = strstr(cfg->slots[s].refine, "{value}");
        len = strlen(out);
        snprintf(out + len, cap - len, " %.*s%s%s", (int)(at - cfg->slots[s].refine),
                 cfg->slots[s].refine, value, at + 7);
    }
}
