/*
 * convert.h — the unit and currency converter of the assistant pack
 * (seed 001 §2, route conversion_tool): tables from the pack
 * (handlers.convert: units by category, currencies, a dated rates table),
 * a deterministic parser of amounts and unit words, and the conversion.
 *
 *   "convert 5 km to miles"          5 km → mi
 *   "98.6 fahrenheit in celsius"     98.6 °F → °C
 *   "5 ft 10 in in cm"               5 ft + 10 in → cm (one category)
 *   "how many cups in a liter"       1 l → cup
 *   "$100 to eur", "eur 50 in yen"   currencies, by the pack's rates
 *   "usd to eur rate"                1 USD → EUR
 *
 * Pure functions over the tables: no allocation, no I/O, no clock.
 */
#ifndef KEEL_PIPELINE_CONVERT_H
#define KEEL_PIPELINE_CONVERT_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"

#define CONVERT_UNITS_MAX 96
#define CONVERT_ALIASES_MAX 512
#define CONVERT_ALIAS_MAX 48        /* bytes of one alias, lower-case, words joined by a space */
#define CONVERT_CATEGORIES_MAX 16
#define CONVERT_WORDS_MAX 16        /* connectors, "how many" phrases, number words */
#define CONVERT_TOKENS_MAX 64       /* tokens of a message read; the rest is ignored */
#define CONVERT_INPUT_MAX 1024      /* bytes of a message read */
#define CONVERT_QUANTITIES_MAX 4    /* "5 ft 10 in": parts of one amount */

struct convert_unit {
    const char *name;        /* "km", "USD" (borrowed from the pack) */
    const char *one;         /* "kilometre": the label for exactly 1 */
    const char *other;       /* "kilometres" */
    int category;            /* index into categories[] */
    double factor;           /* base = value * factor + offset */
    double offset;
    int currency;            /* a currency: the factor comes from the rates */
    double rate;             /* currencies: units per 1 of the rates' base; 0: no rate */
};

struct convert_alias {
    char text[CONVERT_ALIAS_MAX];
    int unit;
};

struct convert_tables {
    struct convert_unit units[CONVERT_UNITS_MAX];
    int n_units;
    const char *categories[CONVERT_CATEGORIES_MAX];
    int n_categories;
    struct convert_alias aliases[CONVERT_ALIASES_MAX];
    int n_aliases;
    char connectors[CONVERT_WORDS_MAX][CONVERT_ALIAS_MAX];   /* "to", "in", "into", "as" */
    int n_connectors;
    char how_many[CONVERT_WORDS_MAX][CONVERT_ALIAS_MAX];     /* "how many", "how much" */
    int n_how_many;
    char number_words[CONVERT_WORDS_MAX][CONVERT_ALIAS_MAX]; /* "a", "one" … */
    double number_values[CONVERT_WORDS_MAX];
    int n_number_words;
    const char *rates_date;  /* "2026-11-01" */
    const char *rates_base;  /* "EUR" */
    const char *rates_note;  /* "sample rates bundled with the pack, not live market data" */
};

/* Compiles the pack's handlers.convert section into *t (strings borrowed
 * from `section`, which must outlive the tables). A NULL section gives
 * empty tables. Errors are KEEL_EINVAL naming the field
 * ("handlers.convert.units.length[2].factor"). */
int convert_load(const json_t *section, struct convert_tables *t, struct keel_error *err);

enum convert_status {
    CONVERT_OK,
    CONVERT_NONE,            /* no amount and target found */
    CONVERT_UNKNOWN_UNIT,    /* `unknown` names the word */
    CONVERT_UNKNOWN_CURRENCY,/* `unknown` names the code ("XYZ"), or a currency without a rate */
    CONVERT_MIXED,           /* parts of different categories ("5 km 3 kg to lb") */
    CONVERT_INCOMPATIBLE     /* from and to of different categories ("km to kg") */
};

struct convert_request {
    enum convert_status status;
    double amount;                       /* in `from` (a compound amount summed into from) */
    int from, to;                        /* unit indexes, -1 when not found */
    int n_parts;                         /* "5 ft 10 in": 2 */
    double part_amount[CONVERT_QUANTITIES_MAX];
    int part_unit[CONVERT_QUANTITIES_MAX];
    char unknown[64];                    /* the word not known, for the answer */
};

/* Reads a conversion request from `text` (`n` bytes, at most
 * CONVERT_INPUT_MAX read). Fills *req; status CONVERT_OK when an amount,
 * a source unit and a target unit were found and belong together. */
void convert_parse(const struct convert_tables *t, const char *text, size_t n,
                   struct convert_request *req);

/* The converted value of a parsed request (status CONVERT_OK): currencies
 * through their rates, other units through the base of their category.
 * Returns CONVERT_UNKNOWN_CURRENCY (naming it in req->unknown) when a
 * currency has no rate. */
enum convert_status convert_value(const struct convert_tables *t, struct convert_request *req,
                                  double *out);

/* Writes `v` for people: currencies with 2 decimals, other values with
 * up to 6 significant digits, no trailing zeros ("3.10686", "37", "0.5"). */
void convert_format(double v, int currency, char *out, size_t n);

/* Copies convert_format's `num` into `out` (`n` bytes) with a comma
 * between each group of three digits of the whole part ("1000000" →
 * "1,000,000", "-12345.5" → "-12,345.5"). Anything else ("1e+20", a word,
 * or a result that would not fit) is copied as it is, cut to fit. */
void convert_group(const char *num, char *out, size_t n);

#endif
