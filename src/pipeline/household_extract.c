/*
 * household_extract.c — reading household facts from a message into a
 * scenario patch, and the scenario's one-line summary (see household.h).
 * Phrases are matched with the pack's lexicon (case-insensitive, on word
 * boundaries; of overlapping phrases the longest wins, so "single
 * earner" is a count of earners, not a marital status). Amounts ("£45k",
 * "45,000", "£45,500", "£1.2m") and tax years ("2024-25", "2024/25",
 * "2024 to 2025") are read by the scanners below, bounded in digits and
 * value.
 */
#include "pipeline/household_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/json.h"

#define HH_AMOUNTS_MAX 8

/* ---- scanners ---------------------------------------------------------------- */

struct amount {
    size_t start;        /* byte of the £ or the first digit */
    long long pounds;
};

static int is_word_byte(unsigned char c)
{
    return isalnum(c) || c >= 0x80;
}

/* The amount at msg[i] (a £ or a digit at a word start), or 0 when
 * there is none; *end gets the byte after it. */
static int scan_amount(const char *msg, size_t n, size_t i, struct amount *a, size_t *end)
{
    size_t p = i, digits = 0, groups = 0;
    int pound = 0, suffix = 0;
    long long whole = 0, frac = 0, frac_div = 1;

    if (p + 1 < n && (unsigned char)msg[p] == 0xc2 && (unsigned char)msg[p + 1] == 0xa3) {
        pound = 1;
        p += 2;
        while (p < n && msg[p] == ' ')
            p++;
    }
    if (p >= n || !isdigit((unsigned char)msg[p]))
        return 0;
    while (p < n) {
        if (isdigit((unsigned char)msg[p])) {
            if (++digits > 12)
                return 0;
            whole = whole * 10 + (msg[p] - '0');
            p++;
        } else if (msg[p] == ',' && p + 3 < n && isdigit((unsigned char)msg[p + 1]) &&
                   isdigit((unsigned char)msg[p + 2]) && isdigit((unsigned char)msg[p + 3]) &&
                   (p + 4 >= n || !isdigit((unsigned char)msg[p + 4]))) {
            groups++;
            p++;
        } else {
            break;
        }
    }
    if (p + 1 < n && msg[p] == '.' && isdigit((unsigned char)msg[p + 1])) {
        for (p++; p < n && isdigit((unsigned char)msg[p]) && frac_div < 1000000; p++) {
            frac = frac * 10 + (msg[p] - '0');
            frac_div *= 10;
        }
    }
    if (p < n && (msg[p] == 'k' || msg[p] == 'K') &&
        (p + 1 >= n || !is_word_byte((unsigned char)msg[p + 1]))) {
        suffix = 1000;
        p++;
    } else if (p < n && (msg[p] == 'm' || msg[p] == 'M') &&
               (p + 1 >= n || !is_word_byte((unsigned char)msg[p + 1]))) {
        suffix = 1000000;
        p++;
    } else if (p + 9 <= n && !strncasecmp(msg + p, " thousand", 9) &&
               (p + 9 >= n || !is_word_byte((unsigned char)msg[p + 9]))) {
        suffix = 1000;
        p += 9;
    } else if (p < n && is_word_byte((unsigned char)msg[p])) {
        return 0;   /* "45abc", "2nd" */
    }
    if (!pound && !suffix && !groups && digits < 5)
        return 0;   /* "2 children", "2024" */
    a->start = i;
    a->pounds = suffix ? whole * suffix + frac * suffix / frac_div : whole;
    *end = p;
    return a->pounds > 0 && a->pounds <= HOUSEHOLD_AMOUNT_MAX;
}

/* "2024-25", "2024/25", "2024–25", "2024 to 2025", "2024-2025" → "2024-25". */
static int scan_tax_year(const char *msg, size_t n, size_t i, char out[8], size_t *end)
{
    size_t p = i + 4;
    int first, second = -1;

    if (i + 4 > n || msg[i] != '2' || msg[i + 1] != '0' || !isdigit((unsigned char)msg[i + 2]) ||
        !isdigit((unsigned char)msg[i + 3]) || (i + 4 < n && isdigit((unsigned char)msg[i + 4])))
        return 0;
    first = (msg[i + 2] - '0') * 10 + (msg[i + 3] - '0');
    if (p < n && (msg[p] == '-' || msg[p] == '/'))
        p++;
    else if (p + 2 < n && !memcmp(msg + p, "\xe2\x80\x93", 3))
        p += 3;
    else if (p + 4 <= n && !strncasecmp(msg + p, " to ", 4))
        p += 4;
    else
        return 0;
    if (p + 4 <= n && msg[p] == '2' && msg[p + 1] == '0' && isdigit((unsigned char)msg[p + 2]) &&
        isdigit((unsigned char)msg[p + 3]) && (p + 4 >= n || !isdigit((unsigned char)msg[p + 4]))) {
        second = (msg[p + 2] - '0') * 10 + (msg[p + 3] - '0');
        p += 4;
    } else if (p + 2 <= n && isdigit((unsigned char)msg[p]) && isdigit((unsigned char)msg[p + 1]) &&
               (p + 2 >= n || !isdigit((unsigned char)msg[p + 2]))) {
        second = (msg[p] - '0') * 10 + (msg[p + 1] - '0');
        p += 2;
    }
    if (second != (first + 1) % 100)
        return 0;
    out[0] = '2';
    out[1] = '0';
    out[2] = (char)('0' + first / 10);
    out[3] = (char)('0' + first % 10);
    out[4] = '-';
    out[5] = (char)('0' + second / 10);
    out[6] = (char)('0' + second % 10);
    out[7] = '\0';
    *end = p;
    return 1;
}

/* ---- extraction --------------------------------------------------------------- */

struct reading {
    struct lex_result res;
    struct amount amounts[HH_AMOUNTS_MAX];   /* the earners' (no query lead) */
    int n_amounts;
    long long query;                         /* the first amount after a lead, or -1 */
    char tax_year[8];
    int marital, country, earners, children; /* value or count; -1: not named */
};

static uint32_t token_at(const struct lex_result *res, size_t byte)
{
    for (uint32_t i = 0; i < res->n_tokens; i++)
        if (res->tokens[i].start == byte)
            return i;
    return UINT32_MAX;
}

static int led_by_query(const struct lex_result *res, uint32_t token)
{
    for (uint32_t i = 0; token != UINT32_MAX && i < res->n_matches; i++)
        if (res->matches[i].category == HC_QUERY &&
            res->matches[i].start + res->matches[i].n == token)
            return 1;
    return 0;
}

static void read_message(const struct household *h, const char *msg, size_t n, struct reading *r)
{
    uint8_t covered[LEX_MAX_TOKENS] = {0};
    int taken[LEX_MAX_MATCHES] = {0};

    r->n_amounts = 0;
    r->query = -1;
    r->tax_year[0] = '\0';
    r->marital = r->country = r->earners = r->children = -1;
    lexicon_match(&h->lex, msg, n, &r->res);
    for (size_t i = 0; i < n;) {
        struct amount a;
        size_t end = i + 1;
        char year[8];
        if (i > 0 && is_word_byte((unsigned char)msg[i - 1]) && (unsigned char)msg[i] != 0xc2) {
            i++;
            continue;
        }
        if (scan_tax_year(msg, n, i, year, &end)) {
            memcpy(r->tax_year, year, sizeof(year));
        } else if (scan_amount(msg, n, i, &a, &end)) {
            if (led_by_query(&r->res, token_at(&r->res, a.start))) {
                if (r->query < 0)
                    r->query = a.pounds;
            } else if (r->n_amounts < HH_AMOUNTS_MAX) {
                r->amounts[r->n_amounts++] = a;
            }
        } else {
            end = i + 1;
        }
        i = end;
    }
    /* Of overlapping phrases the longest wins; later mentions win over
     * earlier ones ("single, or rather married"). */
    for (uint32_t len = LEX_MAX_PHRASE_ITEMS; len > 0; len--)
        for (uint32_t m = 0; m < r->res.n_matches; m++) {
            const struct lex_match *x = &r->res.matches[m];
            int free_span = 1;
            if (x->n != len || x->category > HC_CHILDREN)
                continue;
            for (uint32_t k = x->start; k < (uint32_t)x->start + x->n && k < LEX_MAX_TOKENS; k++)
                free_span &= !covered[k];
            if (!free_span)
                continue;
            memset(covered + x->start, 1, x->n);
            taken[m] = 1;
        }
    for (uint32_t m = 0; m < r->res.n_matches; m++) {
        const struct lex_match *x = &r->res.matches[m];
        int count = x->slot[0] >= 0 ? x->slot[0] : x->value;
        if (!taken[m])
            continue;
        switch (x->category) {
        case HC_MARITAL: r->marital = x->value; break;
        case HC_COUNTRY: r->country = x->value; break;
        case HC_EARNERS: r->earners = count > HOUSEHOLD_EARNERS_MAX ? -1 : count; break;
        case HC_CHILDREN: r->children = count > 20 ? -1 : count; break;
        default: break;
        }
    }
}

static json_t *earner(long long pounds)
{
    return json_pack("{s:I}", "employment_income", (json_int_t)pounds);
}

/* The earners the message states, or NULL (nothing said) with *oom 0. */
static json_t *earners_of(const struct reading *r, const json_t *current, int *oom)
{
    const json_t *old = json_object_get(json_object_get(current, "household"), "earners");
    int count = r->earners, k = r->n_amounts;
    json_t *out;

    *oom = 0;
    if (!k && count < 0)
        return NULL;
    if (!(out = json_array())) {
        *oom = 1;
        return NULL;
    }
    if (count < 0)
        count = k;
    for (int i = 0; i < count && i < HOUSEHOLD_EARNERS_MAX; i++) {
        json_t *e;
        if (k == 1)   /* "both earn £30k": each */
            e = earner(r->amounts[0].pounds);
        else if (i < k)
            e = earner(r->amounts[i].pounds);
        else if (json_is_object(json_array_get(old, (size_t)i)))
            e = json_deep_copy(json_array_get(old, (size_t)i));
        else
            e = earner(0);
        if (json_array_append_new(out, e)) {
            json_decref(out);
            *oom = 1;
            return NULL;
        }
    }
    return out;
}

int household_extract(const struct household *h, const char *msg, size_t n,
                      const json_t *current, json_t **patch)
{
    struct reading *r = keel_malloc(sizeof(*r));
    json_t *hh = NULL, *earners;
    int oom = 0;

    *patch = NULL;
    if (!r || !(hh = json_object()))
        goto nomem;
    read_message(h, msg, n, r);
    if (r->marital >= 0)
        oom |= json_object_set_new(hh, "marital_status", json_string(h->marital[r->marital]));
    if (r->country >= 0)
        oom |= json_object_set_new(hh, "country", json_string(h->countries[r->country]));
    if (r->children >= 0)
        oom |= json_object_set_new(hh, "children", json_integer(r->children));
    if (r->tax_year[0])
        oom |= json_object_set_new(hh, "tax_year", json_string(r->tax_year));
    if ((earners = earners_of(r, current, &oom)))
        oom |= json_object_set_new(hh, "earners", earners);
    if (oom)
        goto nomem;
    if (json_object_size(hh) && !(*patch = json_pack("{s:O}", "household", hh)))
        goto nomem;
    json_decref(hh);
    keel_free(r);
    return KEEL_OK;
nomem:
    json_decref(hh);
    keel_free(r);
    return KEEL_ENOMEM;
}

long long household_query_income(const struct household *h, const char *msg, size_t n)
{
    struct reading *r = keel_malloc(sizeof(*r));
    long long q;

    if (!r)
        return -1;
    read_message(h, msg, n, r);
    q = r->query;
    keel_free(r);
    return q;
}

/* ---- the summary line --------------------------------------------------------- */

void household_money(long long pounds, char *out, size_t cap)
{
    if (pounds >= 1000000 && pounds % 1000000 == 0)
        snprintf(out, cap, "\xc2\xa3%lldm", pounds / 1000000);
    else if (pounds >= 1000 && pounds % 1000 == 0)
        snprintf(out, cap, "\xc2\xa3%lldk", pounds / 1000);
    else
        household_money_exact(pounds * 100, out, cap);
}

/* The label summary.<table>[key], else summary.<table>.other with {n},
 * else `fallback`. */
static void label(const struct household *h, const char *table, const char *key, long long n,
                  const char *fallback, char *out, size_t cap)
{
    const json_t *t = json_object_get(h->summary, table);
    const char *text = json_string_value(json_object_get(t, key));
    const char *other = json_string_value(json_object_get(t, "other"));
    const char *at;

    if (!text && other && (at = strstr(other, "{n}"))) {
        snprintf(out, cap, "%.*s%lld%s", (int)(at - other), other, n, at + 3);
        return;
    }
    snprintf(out, cap, "%s", text ? text : fallback);
}

static void add_piece(char *out, size_t cap, size_t *len, const char *piece)
{
    if (!piece[0] || *len >= cap)
        return;
    *len += (size_t)snprintf(out + *len, cap - *len, "%s%s", *len ? ", " : "", piece);
    if (*len >= cap)
        *len = cap - 1;
}

void household_summary(const struct household *h, const json_t *scenario, char *out,
                       size_t cap)
{
    const json_t *hh = json_object_get(scenario, "household"), *earners, *e, *v;
    char piece[128], key[24];
    size_t len = 0, i;

    out[0] = '\0';
    if (!json_is_object(hh) || !cap)
        return;
    if (json_is_string(v = json_object_get(hh, "marital_status"))) {
        label(h, "marital_status", json_string_value(v), 0, json_string_value(v), piece,
              sizeof(piece));
        add_piece(out, cap, &len, piece);
    }
    earners = json_object_get(hh, "earners");
    if (json_is_array(earners) && json_array_size(earners)) {
        size_t plen = 0;
        snprintf(key, sizeof(key), "%zu", json_array_size(earners));
        label(h, "earners", key, (long long)json_array_size(earners), "", piece, sizeof(piece));
        add_piece(out, cap, &len, piece);
        piece[0] = '\0';
        json_array_foreach(earners, i, e) {
            char money[40];
            json_int_t income = json_integer_value(json_object_get(e, "employment_income"));
            household_money(income, money, sizeof(money));
            if (plen < sizeof(piece))
                plen += (size_t)snprintf(piece + plen, sizeof(piece) - plen, "%s%s",
                                         i ? " + " : "", money);
        }
        add_piece(out, cap, &len, piece);
    }
    if (json_is_integer(v = json_object_get(hh, "children"))) {
        snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(v));
        label(h, "children", key, json_integer_value(v), "", piece, sizeof(piece));
        add_piece(out, cap, &len, piece);
    }
    if (json_is_string(v = json_object_get(hh, "country"))) {
        label(h, "country", json_string_value(v), 0, json_string_value(v), piece, sizeof(piece));
        add_piece(out, cap, &len, piece);
    }
    if (json_is_string(v = json_object_get(hh, "tax_year")))
        add_piece(out, cap, &len, json_string_value(v));
    if (out[0] >= 'a' && out[0] <= 'z')
        out[0] = (char)(out[0] - 'a' + 'A');
}
