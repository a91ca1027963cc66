/*
 * household_tax.c — UK income tax on employment income, from the tax
 * years' figures of the pack (scenario.tax_years): the personal
 * allowance and its taper (£1 lost per £2 over £100,000 in 2024-25),
 * the country's bands (Scotland's six, the rest of the UK's three) and
 * the marriage allowance. Amounts are whole pounds in, pence out, so
 * every figure is exact: pounds × per cent = pence.
 *
 * The marginal rate is the rate on the next pound: the band's rate, and
 * half as much again while the allowance is being withdrawn (40% → 60%,
 * Scotland's 45% → 67.5%). Out of scope, and said so in every answer:
 * National Insurance, dividends, savings and pension income, Child
 * Benefit and its High Income Child Benefit Charge, student loans and
 * pension contributions.
 */
#include "pipeline/household_int.h"

#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"

static const char out_of_scope[] =
    "Income tax only, on employment income: National Insurance, dividends, savings and "
    "pension income, Child Benefit and the High Income Child Benefit Charge, student loans "
    "and pension contributions are not included.";

static long long allowance_of(const struct hh_year *y, long long income)
{
    long long a = y->allowance;

    if (y->taper_threshold && y->taper_per && income > y->taper_threshold) {
        long long cut = (income - y->taper_threshold) / y->taper_per;
        a = cut >= a ? 0 : a - cut;
    }
    return a;
}

int household_tax_income(const struct household *h, const char *year, const char *country,
                         long long income, struct household_tax_line *out)
{
    const struct hh_year *y = household_year(h, year);
    const struct hh_country *c = household_country(y, country);
    long long below = 0;
    int next = -1;

    memset(out, 0, sizeof(*out));
    if (!y || !c)
        return KEEL_ENOTFOUND;
    if (income < 0)
        income = 0;
    out->income = income;
    out->allowance = allowance_of(y, income);
    out->taxable = income > out->allowance ? income - out->allowance : 0;
    for (int i = 0; i < c->n_bands; i++) {
        const struct hh_band *b = &c->bands[i];
        long long top = b->up_to < 0 || out->taxable < b->up_to ? out->taxable : b->up_to;
        if (top > below) {
            out->tax_pence += (top - below) * b->rate;
            out->top_rate = b->rate;
        }
        if (next < 0 && (b->up_to < 0 || out->taxable < b->up_to))
            next = i;
        if (b->up_to < 0)
            break;
        below = b->up_to;
    }
    if (income < out->allowance || next < 0) {
        out->band = "personal allowance";
        return KEEL_OK;
    }
    out->band = c->bands[next].name;
    out->tapered = y->taper_threshold && income >= y->taper_threshold && out->allowance > 0;
    out->marginal_tenths = c->bands[next].rate * 10;
    if (out->tapered)
        out->marginal_tenths = out->marginal_tenths * (y->taper_per + 1) / y->taper_per;
    return KEEL_OK;
}

void household_money_exact(long long pence, char *out, size_t cap)
{
    long long pounds = pence / 100, p = pence % 100;
    char whole[32];

    if (pounds >= 1000000)
        snprintf(whole, sizeof(whole), "%lld,%03lld,%03lld", pounds / 1000000,
                 pounds / 1000 % 1000, pounds % 1000);
    else if (pounds >= 1000)
        snprintf(whole, sizeof(whole), "%lld,%03lld", pounds / 1000, pounds % 1000);
    else
        snprintf(whole, sizeof(whole), "%lld", pounds);
    if (p)
        snprintf(out, cap, "\xc2\xa3%s.%02lld", whole, p);
    else
        snprintf(out, cap, "\xc2\xa3%s", whole);
}

static void rate_text(int tenths, char *out, size_t cap)
{
    if (tenths % 10)
        snprintf(out, cap, "%d.%d%%", tenths / 10, tenths % 10);
    else
        snprintf(out, cap, "%d%%", tenths / 10);
}

static json_t *line_json(const struct household_tax_line *l)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:b}", "income", (json_int_t)l->income,
                     "personal_allowance", (json_int_t)l->allowance, "taxable_income",
                     (json_int_t)l->taxable, "income_tax_pence", (json_int_t)l->tax_pence,
                     "net_income_pence", (json_int_t)(l->income * 100 - l->tax_pence),
                     "marginal_rate", l->marginal_tenths / 10.0, "band", l->band, "tapered",
                     l->tapered);
}

/* "income tax £6,928.31, net income £38,071.69, marginal rate 42% (higher rate)". */
static int add_line(struct keel_buf *b, const struct household_tax_line *l)
{
    char tax[40], net[40], rate[16];

    household_money_exact(l->tax_pence, tax, sizeof(tax));
    household_money_exact(l->income * 100 - l->tax_pence, net, sizeof(net));
    rate_text(l->marginal_tenths, rate, sizeof(rate));
    return keel_buf_addf(b, "income tax %s, net income %s, marginal rate %s (%s%s%s)", tax, net,
                         rate, l->band, strcmp(l->band, "personal allowance") ? " rate" : "",
                         l->tapered ? ", with the personal allowance being withdrawn: "
                                      "\xc2\xa3" "1 of it for every \xc2\xa3" "2 over the "
                                      "threshold" : "");
}

/* The marriage allowance for a married household: who could receive it
 * and whether it applies. Adds a sentence and the result's object. */
static int marriage(const struct household *h, const struct hh_year *y,
                    const struct hh_country *c, const struct household_tax_line *lines, int n,
                    struct keel_buf *b, json_t *result)
{
    int recipient = -1, transferor = n == 1;   /* one earner: the partner has no income */
    char allowance[40], cut[40];
    long long reduction = 0;
    int eligible;

    (void)h;
    if (!y->ma_transfer)
        return KEEL_OK;
    for (int i = 0; i < n; i++)
        if (recipient < 0 || lines[i].income > lines[recipient].income)
            recipient = i;
    for (int i = 0; i < n && !transferor; i++)
        transferor = i != recipient && lines[i].income <= y->allowance;
    eligible = recipient >= 0 && transferor && lines[recipient].taxable > 0 &&
               lines[recipient].top_rate <= c->ma_max_rate;
    if (eligible) {   /* a reduction of the tax, never below nothing */
        reduction = y->ma_transfer * y->ma_relief_rate;
        if (reduction > lines[recipient].tax_pence)
            reduction = lines[recipient].tax_pence;
    }
    household_money_exact(y->ma_transfer * 100, allowance, sizeof(allowance));
    household_money_exact(reduction, cut, sizeof(cut));
    if (json_object_set_new(result, "marriage_allowance",
                            json_pack("{s:b, s:I, s:I}", "eligible", eligible, "transfer",
                                      (json_int_t)y->ma_transfer, "reduction_pence",
                                      (json_int_t)reduction)))
        return KEEL_ENOMEM;
    if (eligible)
        return keel_buf_addf(b, "\nMarried: the partner earning under the personal allowance can "
                                "transfer %s of it (the marriage allowance), which cuts the "
                                "earner's tax by %s a year.", allowance, cut);
    if (!transferor)
        return keel_buf_adds(b, "\nMarried: income tax is charged per person and both partners "
                                "earn more than the personal allowance, so being married changes "
                                "nothing here.");
    return keel_buf_addf(b, "\nMarried: income tax is charged per person, so being married "
                            "changes nothing here. The marriage allowance (%s) needs the partner "
                            "receiving it to pay tax at no more than %d%%, and this earner "
                            "pays %d%% on the top slice.",
                         allowance, c->ma_max_rate, recipient >= 0 ? lines[recipient].top_rate : 0);
}

/* The pack's tax years other than `y`, "2025-26" or "2023-24, 2025-26". */
static void other_years(const struct household *h, const struct hh_year *y, char *out,
                        size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    for (int i = 0; i < h->n_years && len < cap; i++)
        if (&h->years[i] != y)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "",
                                    h->years[i].name);
}

int household_tax(const struct household *h, const json_t *scenario, const json_t *args,
                  json_t **result, struct keel_error *err)
{
    const json_t *hh = json_object_get(scenario, "household");
    const json_t *earners = json_object_get(hh, "earners");
    const char *year_name = json_string_value(json_object_get(args, "tax_year"));
    const char *country_name = json_string_value(json_object_get(args, "country"));
    const char *query = json_string_value(json_object_get(args, "query"));
    const struct hh_year *y;
    const struct hh_country *c;
    struct household_tax_line lines[HOUSEHOLD_EARNERS_MAX], q;
    long long question = -1;
    int n = 0, year_defaulted = 0, country_defaulted = 0, rc = KEEL_ENOMEM;
    struct keel_buf b;
    json_t *out = NULL, *list = NULL;
    char money[40], summary[256], sources[512], others[128];

    if (year_name && !household_year(h, year_name))
        return keel_error_set(err, KEEL_EINVAL, "args.tax_year",
                              "\"%s\" is not a tax year this pack has figures for", year_name);
    if (!year_name) {
        year_name = json_string_value(json_object_get(hh, "tax_year"));
        if (!household_year(h, year_name)) {
            year_defaulted = year_name != NULL ? 1 : 2;   /* 2: no year named at all */
            year_name = h->default_year;
        }
    }
    if (!(y = household_year(h, year_name)))
        return keel_error_set(err, KEEL_EINVAL, "args.tax_year", "the pack has no tax figures");
    if (country_name && !household_country(y, country_name))
        return keel_error_set(err, KEEL_EINVAL, "args.country",
                              "\"%s\" is not a country with figures for %s", country_name,
                              y->name);
    if (!country_name && !household_country(y, country_name = json_string_value(
                                                   json_object_get(hh, "country")))) {
        country_defaulted = 1;
        country_name = h->default_country ? h->default_country : y->countries[0].name;
    }
    c = household_country(y, country_name);
    if (json_object_get(args, "income"))
        question = json_integer_value(json_object_get(args, "income"));
    else if (query)
        question = household_query_income(h, query, strlen(query));
    for (size_t i = 0; i < json_array_size(earners) && n < HOUSEHOLD_EARNERS_MAX; i++)
        household_tax_income(h, y->name, c->name,
                             json_integer_value(json_object_get(json_array_get(earners, i),
                                                                "employment_income")),
                             &lines[n++]);
    keel_buf_init(&b, 16u << 10);
    /* only the sources of the figures used: the UK-wide year's, and the
     * country's own when it has one (Scotland's rates) */
    snprintf(sources, sizeof(sources), "%s%s%s", y->source, c->source ? "; " : "",
             c->source ? c->source : "");
    if (!(out = json_pack("{s:s, s:s, s:s, s:s, s:s}", "tax_year", y->name, "country", c->name,
                          "country_label", c->label, "source", sources, "out_of_scope",
                          out_of_scope)) ||
        !(list = json_array()))
        goto out;
    household_summary(h, scenario, summary, sizeof(summary));
    if (!n && question < 0) {
        if (keel_buf_adds(&b, "Tell me about the household first \xe2\x80\x94 who earns what and "
                              "where they live, for example \xe2\x80\x9cSingle earner \xc2\xa3"
                              "45k Scotland\xe2\x80\x9d \xe2\x80\x94 and I will work out their "
                              "income tax."))
            goto out;
    } else {
        if (summary[0] && keel_buf_addf(&b, "Scenario: %s.\n", summary))
            goto out;
        if (question >= 0) {
            household_tax_income(h, y->name, c->name, question, &q);
            household_money_exact(question * 100, money, sizeof(money));
            if (keel_buf_addf(&b, "At %s in %s (%s): ", money, c->label, y->name) ||
                add_line(&b, &q) || keel_buf_adds(&b, ".") ||
                json_object_set_new(out, "question", line_json(&q)))
                goto out;
        }
        for (int i = 0; i < n; i++) {
            household_money_exact(lines[i].income * 100, money, sizeof(money));
            if ((question >= 0 || i) && keel_buf_addc(&b, '\n'))
                goto out;
            if ((n == 1 ? keel_buf_addf(&b, "The earner on %s in %s (%s): ", money, c->label,
                                        y->name)
                        : keel_buf_addf(&b, "Earner %d on %s in %s (%s): ", i + 1, money,
                                        c->label, y->name)) ||
                add_line(&b, &lines[i]) || keel_buf_adds(&b, ".") ||
                json_array_append_new(list, line_json(&lines[i])))
                goto out;
        }
        if (!strcmp(json_string_value(json_object_get(hh, "marital_status")) ?: "", "married") &&
            n && marriage(h, y, c, lines, n, &b, out))
            goto out;
        if (country_defaulted &&
            keel_buf_addf(&b, "\nNo country is set, so these are the rates for %s.", c->label))
            goto out;
        if (year_defaulted == 1 &&
            keel_buf_addf(&b, "\nI have no figures for %s, so these are for %s.",
                          json_string_value(json_object_get(hh, "tax_year")), y->name))
            goto out;
        other_years(h, y, others, sizeof(others));
        if (year_defaulted == 2 &&
            keel_buf_addf(&b, "\nNo tax year was named, so these are the %s figures%s%s%s.",
                          y->name, others[0] ? " (also available: " : "", others,
                          others[0] ? ")" : ""))
            goto out;
        if (keel_buf_addf(&b, "\n%s\nFigures: %s.", out_of_scope, sources))
            goto out;
    }
    if (json_object_set(out, "earners", list) ||
        json_object_set_new(out, "text", json_stringn(b.data, b.len)) ||
        !json_object_get(out, "text"))
        goto out;
    *result = out;
    out = NULL;
    rc = KEEL_OK;
out:
    json_decref(out);
    json_decref(list);
    keel_buf_release(&b);
    return rc ? keel_error_set(err, KEEL_ENOMEM, "uk_income_tax", "out of memory") : KEEL_OK;
}
