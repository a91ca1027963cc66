/*
 * household.h — the household mechanism of a pack's
 * `scenario.household` section (packs/household): reading household
 * facts from a message into a scenario patch, the scenario's one-line
 * summary, and UK income tax on its earners' employment income with
 * the tax years' figures as pack data (`scenario.tax_years`).
 *
 * The scenario's household object:
 *   {earners: [{employment_income}], marital_status, children, country,
 *    tax_year}
 * every field optional. See docs/scenario.md.
 */
#ifndef KEEL_PIPELINE_HOUSEHOLD_H
#define KEEL_PIPELINE_HOUSEHOLD_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"
#include "pack/pack.h"

#define HOUSEHOLD_AMOUNT_MAX 100000000LL   /* the largest income read or taxed, in pounds */
#define HOUSEHOLD_EARNERS_MAX 8

struct household;

/* Compiles the `household` tables and the `tax_years` figures of a
 * pack's scenario section into *out. Errors are KEEL_EINVAL naming
 * "file:line: scenario.household.…" (or scenario.tax_years.…), or
 * KEEL_ENOMEM; nothing is returned then. The pack must outlive it. */
int household_load(const struct pack *pack, const json_t *tables, const json_t *tax_years,
                   struct household **out, struct keel_error *err);

/* Frees a household; NULL is a no-op. */
void household_free(struct household *h);

/* The household facts `msg` states, as a patch {"household": {…}} in
 * *patch (a new object), or *patch NULL when it states none. Earners
 * named only by a count ("two earners") keep the incomes `current`
 * already has. Amounts after a query lead ("at £60k") are the
 * question's, not an earner's. Returns KEEL_ENOMEM or KEEL_OK. */
int household_extract(const struct household *h, const char *msg, size_t n,
                      const json_t *current, json_t **patch);

/* The income a question asks about ("marginal rate at £60k?"): the
 * first amount after a query lead, or -1. */
long long household_query_income(const struct household *h, const char *msg, size_t n);

/* Checks the values of a household object `hh` that the pack defines:
 * country, tax_year and marital_status one of the pack's, earners a
 * list of at most HOUSEHOLD_EARNERS_MAX objects with whole-pound
 * employment_income, children a count from 0 to 20; absent or null
 * fields pass. Errors are KEEL_EINVAL naming `field`.KEY (e.g.
 * "active_scenario.household.country"). */
int household_check(const struct household *h, const json_t *hh, const char *field,
                    struct keel_error *err);

/* The one-line summary of the scenario's household ("Single earner,
 * £45k, Scotland") into `out`; "" when it has none. */
void household_summary(const struct household *h, const json_t *scenario, char *out,
                       size_t cap);

/* The uk_income_tax tool: tax, net income and marginal rate for each
 * earner of `scenario` (may be NULL) and, when `args` give an income
 * (`income`, or an amount after a query lead in `query`), for that
 * income; `country` and `tax_year` override the scenario's. *result is
 * a new object {tax_year, country, source, earners: […], question?,
 * marriage_allowance?, text, out_of_scope}. Errors: KEEL_ENOMEM, or
 * KEEL_EINVAL naming "args.country" / "args.tax_year" for a value the
 * pack has no figures for. */
int household_tax(const struct household *h, const json_t *scenario, const json_t *args,
                  json_t **result, struct keel_error *err);

/* Tax of one income: pounds in, pence out, in a tax year and country
 * the pack has (by name). Returns KEEL_OK, or KEEL_ENOTFOUND when the
 * pack has no such year or country. marginal_tenths is the rate on the
 * next pound in tenths of a per cent (600 = 60%, the allowance taper
 * included). For tests and the tool. */
struct household_tax_line {
    long long income;           /* pounds */
    long long allowance;        /* pounds, after the taper */
    long long taxable;          /* pounds */
    long long tax_pence;
    int marginal_tenths;
    const char *band;           /* the band of the next pound, "personal allowance" below it */
    int tapered;                /* the next pound also reduces the allowance */
    int top_rate;               /* the rate of the band the last taxed pound is in; 0: none */
};
int household_tax_income(const struct household *h, const char *year, const char *country,
                         long long income, struct household_tax_line *out);

#endif
