/*
 * convert.c — the converter's parser and arithmetic (see convert.h); the
 * tokenizer is convert_tokens.c, the pack's tables convert_tables.c.
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
#include "pipeline/convert_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"

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
    convert_tokenize(text, n, &ts);
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
