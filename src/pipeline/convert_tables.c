/*
 * convert_tables.c — the converter's tables (see convert.h): the pack's
 * handlers.convert section (connectors, how_many, number_words, units,
 * currencies, rates) read into struct convert_tables, each alias kept as
 * the tokenizer reads it.
 */
#include "pipeline/convert_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "pipeline/phrases.h"

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

    convert_tokenize(alias, strlen(alias), &ts);
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
