/*
 * convert.c — the converter's tables, parser and arithmetic (see
 * convert.h).
 *
 * The parser reads tokens: numbers ("1,000.5", "-40", the "5" of "5km"),
 * words (letters, digits after a letter, "/" and "'": "km/h") and the
 * currency signs $ £ € ¥ ("°" is ignored). Units are matched by their
 * aliases, longest first, over up to three tokens ("miles per hour").
 *
 *   how many: "how many U2 … N U1"  (N defaults to 1: "a", "one")
 *   else: the last connector ("to", "in", …) followed by a unit names the
 *   target; before it, each "N U" (and "U N" for a currency: "$100")
 *   is a part of the amount; none, then a unit right before the
 *   connector counts as 1 ("usd to eur rate").
 *
 * A connector followed by a word that is no unit, or a number followed
 * by one, is reported as unknown (a three-letter word in capitals as an
 * unknown currency).
 */
#include "pipeline/convert.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "pipeline/phrases.h"

/* ---- tokens ------------------------------------------------------------------ */

enum tok_kind { TOK_NUM, TOK_WORD, TOK_SYM };

struct tok {
    enum tok_kind kind;
    size_t start, len;
    double value;
    char low[CONVERT_ALIAS_MAX];   /* lower-case text (cut at the cap) */
};

struct toks {
    struct tok t[CONVERT_TOKENS_MAX];
    int n;
    const char *text;
};

/* The length of a currency sign at `s` (UTF-8), or 0. */
static size_t sign_len(const unsigned char *s, size_t left)
{
    if (s[0] == '$')
        return 1;
    if (left >= 2 && s[0] == 0xc2 && (s[1] == 0xa3 || s[1] == 0xa5))
        return 2;   /* £ ¥ */
    if (left >= 3 && s[0] == 0xe2 && s[1] == 0x82 && s[2] == 0xac)
        return 3;   /* € */
    return 0;
}

static int is_degree(const unsigned char *s, size_t left)
{
    return left >= 2 && s[0] == 0xc2 && s[1] == 0xb0;
}

static int word_byte(unsigned char c)
{
    return isalpha(c) || c == '/' || c == '\'' || c >= 0x80;
}

static void push(struct toks *ts, enum tok_kind kind, size_t start, size_t len, double value)
{
    struct tok *t;
    size_t k;

    if (ts->n == CONVERT_TOKENS_MAX)
        return;
    t = &ts->t[ts->n++];
    t->kind = kind;
    t->start = start;
    t->len = len;
    t->value = value;
    for (k = 0; k < len && k + 1 < sizeof(t->low); k++)
        t->low[k] = (char)tolower((unsigned char)ts->text[start + k]);
    t->low[k] = '\0';
}

/* A number at s[i]: digits, ","-groups of exactly three digits, one "."
 * with digits after it. Returns its length (0: none) and its value. */
static size_t read_number(const char *s, size_t i, size_t n, double *value)
{
    char digits[48];
    size_t k = i, d = 0;
    int dot = 0;

    if (k < n && s[k] == '-')
        digits[d++] = s[k++];
    if (k >= n || !isdigit((unsigned char)s[k]))
        return 0;
    while (k < n && d + 1 < sizeof(digits)) {
        if (isdigit((unsigned char)s[k])) {
            digits[d++] = s[k++];
        } else if (s[k] == ',' && !dot && k + 3 < n &&
                   isdigit((unsigned char)s[k + 1]) && isdigit((unsigned char)s[k + 2]) &&
                   isdigit((unsigned char)s[k + 3]) &&
                   (k + 4 >= n || !isdigit((unsigned char)s[k + 4]))) {
            k++;   /* a thousands separator */
        } else if (s[k] == '.' && !dot && k + 1 < n && isdigit((unsigned char)s[k + 1])) {
            dot = 1;
            digits[d++] = s[k++];
        } else {
            break;
        }
    }
    while (k < n && isdigit((unsigned char)s[k]))
        k++;   /* digits past the buffer: part of this (absurd) number */
    digits[d] = '\0';
    *value = strtod(digits, NULL);
    return k - i;
}

static void tokenize(const char *s, size_t n, struct toks *ts)
{
    size_t i = 0;

    ts->n = 0;
    ts->text = s;
    if (n > CONVERT_INPUT_MAX)
        n = CONVERT_INPUT_MAX;
    while (i < n && ts->n < CONVERT_TOKENS_MAX) {
        const unsigned char *u = (const unsigned char *)s + i;
        size_t len;
        double v;

        if ((len = sign_len(u, n - i))) {
            push(ts, TOK_SYM, i, len, 0);
            i += len;
        } else if (is_degree(u, n - i)) {
            i += 2;
        } else if ((s[i] != '-' || i == 0 || !word_byte((unsigned char)s[i - 1])) &&
                   (len = read_number(s, i, n, &v))) {
            push(ts, TOK_NUM, i, len, v);
            i += len;
        } else if (isalpha(*u) || *u >= 0x80) {
            size_t start = i;
            while (i < n && (word_byte((unsigned char)s[i]) || isdigit((unsigned char)s[i])) &&
                   !sign_len((const unsigned char *)s + i, n - i) &&
                   !is_degree((const unsigned char *)s + i, n - i))
                i++;
            /* A word's trailing apostrophe ("dollars'") is not part of it. */
            len = i - start;
            while (len > 1 && s[start + len - 1] == '\'')
                len--;
            push(ts, TOK_WORD, start, len, 0);
        } else {
            i++;
        }
    }
}

/* ---- tables ------------------------------------------------------------------ */

static void lower_copy(char *out, size_t cap, const char *s)
{
    size_t k = 0;

    for (; s[k] && k + 1 < cap; k++)
        out[k] = (char)tolower((unsigned char)s[k]);
    out[k] = '\0';
}

/* An alias as the tokenizer reads it: its tokens' lower-case text,
 * joined by single spaces ("Miles per hour" -> "miles per hour"). */
static void alias_norm(const char *alias, char *out, size_t cap)
{
    struct toks ts;
    size_t len = 0;

    tokenize(alias, strlen(alias), &ts);
    out[0] = '\0';
    for (int i = 0; i < ts.n; i++)
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", i ? " " : "",
                                ts.t[i].low);
}

static int add_unit(struct convert_tables *t, const json_t *u, int category, int currency,
                    const char *field, struct keel_error *err)
{
    static const char *const keys[] = {"name", "one", "other", "factor", "offset", "aliases",
                                       NULL};
    struct convert_unit *unit;
    const json_t *aliases = json_object_get(u, "aliases"), *a;
    char sub[KEEL_JSON_PATH_MAX];
    size_t i;
    int rc;

    if (!json_is_object(u))
        return keel_error_set(err, KEEL_EINVAL, field, "must be a mapping");
    if (t->n_units == CONVERT_UNITS_MAX)
        return keel_error_set(err, KEEL_EINVAL, field, "is one unit too many (at most %d)",
                              CONVERT_UNITS_MAX);
    if ((rc = keel_json_check_keys(u, keys, field, err)))
        return rc;
    unit = &t->units[t->n_units];
    memset(unit, 0, sizeof(*unit));
    unit->category = category;
    unit->currency = currency;
    unit->factor = 1;
    if ((rc = keel_json_get_string(u, "name", 1, field, &unit->name, err)) ||
        (rc = keel_json_get_string(u, "one", 0, field, &unit->one, err)) ||
        (rc = keel_json_get_string(u, "other", 0, field, &unit->other, err)))
        return rc;
    if (!unit->one)
        unit->one = unit->name;
    if (!unit->other)
        unit->other = unit->one;
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "offset" : "factor";
        const json_t *v = json_object_get(u, key);
        if (!v)
            continue;
        keel_json_path_key(sub, sizeof(sub), field, key);
        if (currency || !json_is_number(v) || (!k && !(json_number_value(v) > 0)))
            return keel_error_set(err, KEEL_EINVAL, sub, currency ? "is not set on a currency "
                                  "(the rates give it)" : k ? "must be a number"
                                                            : "must be a number above 0");
        *(k ? &unit->offset : &unit->factor) = json_number_value(v);
    }
    keel_json_path_key(sub, sizeof(sub), field, "aliases");
    if (!json_is_array(aliases) || !json_array_size(aliases))
        return keel_error_set(err, KEEL_EINVAL, sub, "must be a list of words");
    json_array_foreach(aliases, i, a) {
        struct convert_alias *al = &t->aliases[t->n_aliases];
        if (!json_is_string(a) || !json_string_length(a) ||
            json_string_length(a) >= CONVERT_ALIAS_MAX)
            return keel_error_set(err, KEEL_EINVAL, sub, "item %zu must be a word of 1 to %d "
                                  "bytes", i, CONVERT_ALIAS_MAX - 1);
        if (t->n_aliases == CONVERT_ALIASES_MAX)
            return keel_error_set(err, KEEL_EINVAL, sub, "one alias too many (at most %d in all)",
                                  CONVERT_ALIASES_MAX);
        alias_norm(json_string_value(a), al->text, sizeof(al->text));
        if (!al->text[0])
            return keel_error_set(err, KEEL_EINVAL, sub, "item %zu has no word", i);
        for (int k = 0; k < t->n_aliases; k++)
            if (!strcmp(t->aliases[k].text, al->text))
                return keel_error_set(err, KEEL_EINVAL, sub, "\"%s\" is already an alias of %s",
                                      al->text, t->units[t->aliases[k].unit].name);
        al->unit = t->n_units;
        t->n_aliases++;
    }
    t->n_units++;
    return KEEL_OK;
}

static int load_rates(struct convert_tables *t, const json_t *rates, struct keel_error *err)
{
    static const char *const keys[] = {"date", "base", "note", "values", NULL};
    const char *f = "handlers.convert.rates";
    const json_t *values = json_object_get(rates, "values"), *v;
    const char *code;
    int rc, base = -1;

    if (!rates)
        return KEEL_OK;
    if (!json_is_object(rates))
        return keel_error_set(err, KEEL_EINVAL, f, "must be a mapping");
    if ((rc = keel_json_check_keys(rates, keys, f, err)) ||
        (rc = keel_json_get_string(rates, "date", 1, f, &t->rates_date, err)) ||
        (rc = keel_json_get_string(rates, "base", 1, f, &t->rates_base, err)) ||
        (rc = keel_json_get_string(rates, "note", 0, f, &t->rates_note, err)))
        return rc;
    if (!json_is_object(values))
        return keel_error_set(err, KEEL_EINVAL, "handlers.convert.rates.values",
                              "must map currency codes to rates");
    json_object_foreach((json_t *)values, code, v) {
        char sub[KEEL_JSON_PATH_MAX];
        int found = 0;
        keel_json_path_key(sub, sizeof(sub), "handlers.convert.rates.values", code);
        if (!json_is_number(v) || !(json_number_value(v) > 0))
            return keel_error_set(err, KEEL_EINVAL, sub, "must be a number above 0");
        for (int u = 0; u < t->n_units; u++)
            if (t->units[u].currency && !strcmp(t->units[u].name, code)) {
                t->units[u].rate = json_number_value(v);
                found = 1;
            }
        if (!found)
            return keel_error_set(err, KEEL_EINVAL, sub, "is not one of the currencies");
    }
    for (int u = 0; u < t->n_units; u++)
        if (t->units[u].currency && !strcmp(t->units[u].name, t->rates_base))
            base = u;
    if (base < 0 || t->units[base].rate != 1.0)
        return keel_error_set(err, KEEL_EINVAL, "handlers.convert.rates.base",
                              "must be a currency whose rate is 1");
    return KEEL_OK;
}

int convert_load(const json_t *s, struct convert_tables *t, struct keel_error *err)
{
    static const char *const keys[] = {"connectors", "how_many", "number_words", "units",
                                       "currencies", "rates", NULL};
    const json_t *units = json_object_get(s, "units"), *list, *u, *nw;
    const char *name;
    char field[KEEL_JSON_PATH_MAX], item[KEEL_JSON_PATH_MAX + 24];
    size_t i;
    int rc;

    memset(t, 0, sizeof(*t));
    if (!s)
        return KEEL_OK;
    if (!json_is_object(s))
        return keel_error_set(err, KEEL_EINVAL, "handlers.convert", "must be a mapping");
    if ((rc = keel_json_check_keys(s, keys, "handlers.convert", err)) ||
        (rc = phrase_list_load(json_object_get(s, "connectors"), (char *)t->connectors,
                               CONVERT_ALIAS_MAX, CONVERT_WORDS_MAX, &t->n_connectors,
                               "handlers.convert.connectors", "phrases", "a phrase of ", err)) ||
        (rc = phrase_list_load(json_object_get(s, "how_many"), (char *)t->how_many,
                               CONVERT_ALIAS_MAX, CONVERT_WORDS_MAX, &t->n_how_many,
                               "handlers.convert.how_many", "phrases", "a phrase of ", err)))
        return rc;
    if ((nw = json_object_get(s, "number_words"))) {
        if (!json_is_object(nw) || json_object_size(nw) > CONVERT_WORDS_MAX)
            return keel_error_set(err, KEEL_EINVAL, "handlers.convert.number_words",
                                  "must map at most %d words to numbers", CONVERT_WORDS_MAX);
        json_object_foreach((json_t *)nw, name, u) {
            keel_json_path_key(field, sizeof(field), "handlers.convert.number_words", name);
            if (!json_is_number(u) || strlen(name) >= CONVERT_ALIAS_MAX)
                return keel_error_set(err, KEEL_EINVAL, field, "must be a number");
            lower_copy(t->number_words[t->n_number_words], CONVERT_ALIAS_MAX, name);
            t->number_values[t->n_number_words++] = json_number_value(u);
        }
    }
    if (units && !json_is_object(units))
        return keel_error_set(err, KEEL_EINVAL, "handlers.convert.units",
                              "must map categories to lists of units");
    json_object_foreach((json_t *)units, name, list) {
        keel_json_path_key(field, sizeof(field), "handlers.convert.units", name);
        if (t->n_categories == CONVERT_CATEGORIES_MAX - 1)   /* room for "currency" */
            return keel_error_set(err, KEEL_EINVAL, field, "is one category too many");
        if (!json_is_array(list))
            return keel_error_set(err, KEEL_EINVAL, field, "must be a list of units");
        t->categories[t->n_categories] = name;
        json_array_foreach(list, i, u) {
            snprintf(item, sizeof(item), "%s[%zu]", field, i);
            if ((rc = add_unit(t, u, t->n_categories, 0, item, err)))
                return rc;
        }
        t->n_categories++;
    }
    if ((list = json_object_get(s, "currencies"))) {
        if (!json_is_array(list))
            return keel_error_set(err, KEEL_EINVAL, "handlers.convert.currencies",
                                  "must be a list of currencies");
        t->categories[t->n_categories] = "currency";
        json_array_foreach(list, i, u) {
            snprintf(item, sizeof(item), "handlers.convert.currencies[%zu]", i);
            if ((rc = add_unit(t, u, t->n_categories, 1, item, err)))
                return rc;
        }
        t->n_categories++;
        if (!json_object_get(s, "rates"))
            return keel_error_set(err, KEEL_EINVAL, "handlers.convert.rates",
                                  "is required with currencies");
    }
    return load_rates(t, json_object_get(s, "rates"), err);
}

/* ---- parsing ----------------------------------------------------------------- */

/* The longest alias matching the tokens from `i` (up to three): its unit,
 * and *len its tokens; -1 when none. */
static int unit_at(const struct convert_tables *t, const struct toks *ts, int i, int *len)
{
    char joined[CONVERT_ALIAS_MAX * 3 + 3];
    int best = -1;

    *len = 0;
    for (int k = 1; k <= 3 && i + k <= ts->n; k++) {
        size_t n = 0;
        for (int j = i; j < i + k; j++) {
            if (ts->t[j].kind == TOK_NUM)
                return best;
            n += (size_t)snprintf(joined + n, sizeof(joined) - n, "%s%s", j > i ? " " : "",
                                  ts->t[j].low);
        }
        for (int a = 0; a < t->n_aliases; a++)
            if (!strcmp(t->aliases[a].text, joined)) {
                best = t->aliases[a].unit;
                *len = k;
            }
    }
    return best;
}

/* Whether phrase `p` (lower-case words joined by spaces) starts at token i;
 * *len gets its tokens. */
static int phrase_at(const struct toks *ts, int i, const char *p, int *len)
{
    int k = i;

    while (*p) {
        size_t w = strcspn(p, " ");
        if (k >= ts->n || ts->t[k].kind == TOK_NUM || strlen(ts->t[k].low) != w ||
            strncmp(ts->t[k].low, p, w))
            return 0;
        k++;
        p += w;
        while (*p == ' ')
            p++;
    }
    *len = k - i;
    return k > i;
}

static int connector_at(const struct convert_tables *t, const struct toks *ts, int i)
{
    int len;

    for (int c = 0; c < t->n_connectors; c++)
        if (phrase_at(ts, i, t->connectors[c], &len) && len == 1)
            return 1;
    return 0;
}

/* A number word ("a", "one") at token i: its value, or -1. */
static double number_word(const struct convert_tables *t, const struct toks *ts, int i)
{
    for (int k = 0; k < t->n_number_words; k++)
        if (ts->t[i].kind == TOK_WORD && !strcmp(ts->t[i].low, t->number_words[k]))
            return t->number_values[k];
    return -1;
}

/* Names the token as the unknown word: a three-letter word in capitals is
 * taken for a currency code. */
static void set_unknown(struct convert_request *req, const struct toks *ts, int i)
{
    const struct tok *tok = &ts->t[i];
    int caps = tok->len == 3;

    for (size_t k = 0; k < tok->len && caps; k++)
        caps = isupper((unsigned char)ts->text[tok->start + k]);
    req->status = caps ? CONVERT_UNKNOWN_CURRENCY : CONVERT_UNKNOWN_UNIT;
    snprintf(req->unknown, sizeof(req->unknown), "%.*s",
             (int)utf8_valid_prefix(ts->text + tok->start, tok->len < 60 ? tok->len : 60),
             ts->text + tok->start);
}

static void add_part(struct convert_request *req, double amount, int unit)
{
    if (req->n_parts == CONVERT_QUANTITIES_MAX)
        return;
    req->part_amount[req->n_parts] = amount;
    req->part_unit[req->n_parts++] = unit;
}

/* The amount in tokens [from, to): "N U" parts, "U N" for a currency, a
 * number word before a unit; none, then a unit right before `to` is 1.
 * *unknown_at gets a word after a number that is no unit (-1: none). */
static void read_amount(const struct convert_tables *t, const struct toks *ts, int from, int to,
                        struct convert_request *req, int *unknown_at)
{
    int len, u;

    *unknown_at = -1;
    for (int i = from; i < to;) {
        const struct tok *tok = &ts->t[i];
        double w;
        if (tok->kind == TOK_NUM && i + 1 < to && (u = unit_at(t, ts, i + 1, &len)) >= 0 &&
            i + 1 + len <= to) {
            add_part(req, tok->value, u);
            i += 1 + len;
        } else if (tok->kind == TOK_NUM && i + 1 < to && ts->t[i + 1].kind == TOK_WORD) {
            if (*unknown_at < 0)
                *unknown_at = i + 1;
            i++;
        } else if (tok->kind != TOK_NUM && (u = unit_at(t, ts, i, &len)) >= 0 &&
                   t->units[u].currency && i + len < to && ts->t[i + len].kind == TOK_NUM) {
            add_part(req, ts->t[i + len].value, u);
            i += len + 1;
        } else if ((w = number_word(t, ts, i)) >= 0 && i + 1 < to &&
                   (u = unit_at(t, ts, i + 1, &len)) >= 0 && i + 1 + len <= to) {
            add_part(req, w, u);
            i += 1 + len;
        } else {
            i++;
        }
    }
    if (req->n_parts)
        return;
    /* A unit alone right before the connector: "usd to eur". */
    for (int i = from; i < to; i++)
        if ((u = unit_at(t, ts, i, &len)) >= 0 && i + len == to) {
            add_part(req, 1, u);
            return;
        }
}

/* Sums the parts into req->amount in the first part's unit; parts of two
 * categories are CONVERT_MIXED. */
static void settle(const struct convert_tables *t, struct convert_request *req)
{
    const struct convert_unit *first;
    double base = 0;

    if (!req->n_parts || req->to < 0) {
        req->status = CONVERT_NONE;
        return;
    }
    req->from = req->part_unit[0];
    first = &t->units[req->from];
    for (int i = 0; i < req->n_parts; i++) {
        const struct convert_unit *u = &t->units[req->part_unit[i]];
        if (u->category != first->category) {
            req->status = CONVERT_MIXED;
            return;
        }
        base += u->currency ? req->part_amount[i] / (u->rate > 0 ? u->rate : 1)
                            : req->part_amount[i] * u->factor;
    }
    if (req->n_parts == 1)
        req->amount = req->part_amount[0];
    else
        req->amount = first->currency ? base * (first->rate > 0 ? first->rate : 1)
                                      : base / first->factor;
    req->status = t->units[req->to].category == first->category ? CONVERT_OK
                                                                 : CONVERT_INCOMPATIBLE;
}

void convert_parse(const struct convert_tables *t, const char *text, size_t n,
                   struct convert_request *req)
{
    struct toks ts;
    int len, unknown_at = -1, target_unknown = -1;

    memset(req, 0, sizeof(*req));
    req->status = CONVERT_NONE;
    req->from = req->to = -1;
    tokenize(text, n, &ts);
    /* "how many cups in a liter", "how many km is 3 miles" */
    for (int i = 0; i < ts.n; i++)
        for (int h = 0; h < t->n_how_many; h++)
            if (phrase_at(&ts, i, t->how_many[h], &len)) {
                int to_len, u = i + len < ts.n ? unit_at(t, &ts, i + len, &to_len) : -1;
                if (u < 0) {
                    if (i + len < ts.n && ts.t[i + len].kind == TOK_WORD &&
                        !connector_at(t, &ts, i + len))
                        target_unknown = i + len;
                    continue;
                }
                req->to = u;
                read_amount(t, &ts, i + len + to_len, ts.n, req, &unknown_at);
                if (!req->n_parts)   /* "how many cups in a liter": "a liter" */
                    for (int k = i + len + to_len; k < ts.n && !req->n_parts; k++) {
                        int ul, uu = unit_at(t, &ts, k, &ul);
                        if (uu >= 0 && k > i + len + to_len && connector_at(t, &ts, k - 1))
                            add_part(req, 1, uu);
                    }
                if (!req->n_parts && unknown_at >= 0) {
                    set_unknown(req, &ts, unknown_at);
                    return;
                }
                settle(t, req);
                return;
            }
    /* The last connector followed by a unit names the target. */
    for (int c = ts.n - 2; c >= 0; c--) {
        int u;
        if (!connector_at(t, &ts, c))
            continue;
        if ((u = unit_at(t, &ts, c + 1, &len)) < 0) {
            if (target_unknown < 0 && ts.t[c + 1].kind == TOK_WORD)
                target_unknown = c + 1;
            continue;
        }
        req->to = u;
        read_amount(t, &ts, 0, c, req, &unknown_at);
        if (!req->n_parts && unknown_at >= 0) {
            set_unknown(req, &ts, unknown_at);
            return;
        }
        if (req->n_parts) {
            settle(t, req);
            return;
        }
        req->to = -1;
    }
    /* No target found: a word after a connector or after a number that is
     * no unit is named, if the rest reads as an amount. */
    if (target_unknown >= 0) {
        read_amount(t, &ts, 0, target_unknown, req, &unknown_at);
        if (req->n_parts) {
            set_unknown(req, &ts, target_unknown);
            return;
        }
    }
    read_amount(t, &ts, 0, ts.n, req, &unknown_at);
    if (unknown_at >= 0)
        set_unknown(req, &ts, unknown_at);
    else
        req->status = CONVERT_NONE;
}

/* ---- arithmetic -------------------------------------------------------------- */

enum convert_status convert_value(const struct convert_tables *t, struct convert_request *req,
                                  double *out)
{
    const struct convert_unit *from = &t->units[req->from], *to = &t->units[req->to];

    *out = 0;
    if (req->status != CONVERT_OK)
        return req->status;
    if (from->currency) {
        const struct convert_unit *missing = from->rate > 0 ? (to->rate > 0 ? NULL : to) : from;
        if (missing) {
            snprintf(req->unknown, sizeof(req->unknown), "%s", missing->name);
            return req->status = CONVERT_UNKNOWN_CURRENCY;
        }
        *out = req->amount / from->rate * to->rate;
    } else {
        *out = ((req->amount * from->factor + from->offset) - to->offset) / to->factor;
    }
    return CONVERT_OK;
}

void convert_format(double v, int currency, char *out, size_t n)
{
    double a = fabs(v);
    int decimals;
    size_t len;

    if (!isfinite(v)) {
        snprintf(out, n, "%s", "an amount too large to show");
        return;
    }
    if (currency) {
        snprintf(out, n, "%.2f", v);
        return;
    }
    if (a != 0 && (a >= 1e15 || a < 1e-6)) {
        snprintf(out, n, "%.6g", v);
        return;
    }
    decimals = a == 0 ? 0 : 5 - (int)floor(log10(a));
    decimals = decimals < 0 ? 0 : decimals > 6 ? 6 : decimals;
    snprintf(out, n, "%.*f", decimals, v);
    len = strlen(out);
    if (strchr(out, '.')) {
        while (len && out[len - 1] == '0')
            out[--len] = '\0';
        if (len && out[len - 1] == '.')
            out[--len] = '\0';
    }
    if (!strcmp(out, "-0"))
        snprintf(out, n, "0");
}

void convert_group(const char *num, char *out, size_t n)
{
    size_t len = strlen(num), start = num[0] == '-' ? 1 : 0, digits = 0, k = 0;

    if (n == 0)
        return;
    while (start + digits < len && isdigit((unsigned char)num[start + digits]))
        digits++;
    /* Not a plain number ("3.1e+20", "an amount too large …"): as it is. */
    if (digits == 0 || (start + digits < len && num[start + digits] != '.') ||
        len + (digits - 1) / 3 + 1 > n) {
        snprintf(out, n, "%s", num);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        if (i > start && i < start + digits && (start + digits - i) % 3 == 0)
            out[k++] = ',';
        out[k++] = num[i];
    }
    out[k] = '\0';
}
