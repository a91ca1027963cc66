/*
 * household.c — loading a pack's household tables (phrases into one
 * lexicon, summary labels, defaults) and its tax figures per year and
 * country, checked with errors naming file, line and path (see
 * household.h). Reading messages and the summary line are
 * household_extract.c; the calculator household_tax.c.
 */
#include "pipeline/household_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"

/* ---- loading ---------------------------------------------------------------- */

static int no_slots(const char *name, size_t n)
{
    (void)name;
    (void)n;
    return -1;
}

static int add_phrase(struct household *h, int category, int value, const json_t *phrase,
                      const char *path, struct keel_error *err)
{
    struct keel_error inner;

    if (!json_is_string(phrase))
        return pack_fail(h->pack, path, err, "must be a phrase (a string), not %s",
                         keel_json_type_name(phrase));
    if (lexicon_add(&h->lex, category, value, json_string_value(phrase), no_slots, path, &inner))
        return inner.code == KEEL_ENOMEM
                   ? keel_error_set(err, KEEL_ENOMEM, h->pack->origin, "out of memory")
                   : pack_fail(h->pack, path, err, "%s", inner.message);
    return KEEL_OK;
}

static int add_list(struct household *h, int category, int value, const json_t *list,
                    const char *path, struct keel_error *err)
{
    char item[KEEL_JSON_PATH_MAX];
    json_t *p;
    size_t i;
    int rc;

    if (!json_is_array(list))
        return pack_fail(h->pack, path, err, "must be a list of phrases");
    json_array_foreach(list, i, p) {
        keel_json_path_index(item, sizeof(item), path, i);
        if ((rc = add_phrase(h, category, value, p, item, err)))
            return rc;
    }
    return KEEL_OK;
}

/* A map name -> phrases: names[] gets each name, phrases their index. */
static int load_named(struct household *h, const json_t *map, int category, const char *path,
                      const char **names, int *n, struct keel_error *err)
{
    char sub[KEEL_JSON_PATH_MAX];
    const char *name;
    json_t *list;
    int rc;

    if (!map)
        return KEEL_OK;
    if (!json_is_object(map) || json_object_size(map) > HH_MAX_VALUES)
        return pack_fail(h->pack, path, err, "must map at most %d names to phrase lists",
                         HH_MAX_VALUES);
    json_object_foreach((json_t *)map, name, list) {
        keel_json_path_key(sub, sizeof(sub), path, name);
        names[*n] = name;
        if ((rc = add_list(h, category, *n, list, sub, err)))
            return rc;
        /* the name itself is a phrase too ("married", "scotland") */
        if (strchr(name, '_') == NULL) {
            json_t *self = json_string(name);
            rc = self ? add_phrase(h, category, *n, self, sub, err)
                      : keel_error_set(err, KEEL_ENOMEM, h->pack->origin, "out of memory");
            json_decref(self);
            if (rc)
                return rc;
        }
        (*n)++;
    }
    return KEEL_OK;
}

/* A list of {phrase, count}. */
static int load_counts(struct household *h, const json_t *list, int category, const char *path,
                       struct keel_error *err)
{
    static const char *const keys[] = {"phrase", "count", NULL};
    char item[KEEL_JSON_PATH_MAX], sub[KEEL_JSON_PATH_MAX];
    struct keel_error inner;
    json_t *entry;
    size_t i;
    int rc;

    if (!list)
        return KEEL_OK;
    if (!json_is_array(list))
        return pack_fail(h->pack, path, err, "must be a list of {phrase, count}");
    json_array_foreach(list, i, entry) {
        long long count = 0;
        keel_json_path_index(item, sizeof(item), path, i);
        if (!json_is_object(entry))
            return pack_fail(h->pack, item, err, "must be a mapping {phrase, count}");
        if (keel_json_check_keys(entry, keys, item, &inner) ||
            keel_json_get_int(entry, "count", 1, 0, HOUSEHOLD_EARNERS_MAX, item, &count, &inner))
            return pack_fail(h->pack, inner.field, err, "%s", inner.message);
        keel_json_path_key(sub, sizeof(sub), item, "phrase");
        if ((rc = add_phrase(h, category, (int)count, json_object_get(entry, "phrase"), sub,
                             err)))
            return rc;
    }
    return KEEL_OK;
}

static int load_numbers(struct household *h, const json_t *map, const char *path,
                        struct keel_error *err)
{
    char sub[KEEL_JSON_PATH_MAX];
    const char *word;
    json_t *value;
    int rc;

    if (!map)
        return KEEL_OK;
    if (!json_is_object(map))
        return pack_fail(h->pack, path, err, "must map number words to numbers");
    json_object_foreach((json_t *)map, word, value) {
        json_t *self;
        keel_json_path_key(sub, sizeof(sub), path, word);
        if (!json_is_integer(value) || json_integer_value(value) < 0 ||
            json_integer_value(value) > 100)
            return pack_fail(h->pack, sub, err, "must be an integer from 0 to 100");
        if (!(self = json_string(word)))
            return keel_error_set(err, KEEL_ENOMEM, h->pack->origin, "out of memory");
        rc = add_phrase(h, HC_NUMBER, (int)json_integer_value(value), self, sub, err);
        json_decref(self);
        if (rc)
            return rc;
    }
    return KEEL_OK;
}

static int load_bands(struct household *h, struct hh_country *c, const json_t *bands,
                      const char *path, struct keel_error *err)
{
    static const char *const keys[] = {"name", "rate", "up_to", NULL};
    char item[KEEL_JSON_PATH_MAX];
    struct keel_error inner;
    long long last = 0;
    json_t *b;
    size_t i;

    if (!json_is_array(bands) || !json_array_size(bands) || json_array_size(bands) > HH_MAX_BANDS)
        return pack_fail(h->pack, path, err, "must be a list of 1 to %d bands", HH_MAX_BANDS);
    json_array_foreach(bands, i, b) {
        struct hh_band *band = &c->bands[i];
        long long rate = 0, up_to = -1;
        keel_json_path_index(item, sizeof(item), path, i);
        if (!json_is_object(b))
            return pack_fail(h->pack, item, err, "must be a mapping {name, rate, up_to}");
        if (keel_json_check_keys(b, keys, item, &inner) ||
            keel_json_get_string(b, "name", 1, item, &band->name, &inner) ||
            keel_json_get_int(b, "rate", 1, 0, 100, item, &rate, &inner) ||
            keel_json_get_int(b, "up_to", 0, 1, HOUSEHOLD_AMOUNT_MAX, item, &up_to, &inner))
            return pack_fail(h->pack, inner.field, err, "%s", inner.message);
        if ((up_to < 0) != (i + 1 == json_array_size(bands)))
            return pack_fail(h->pack, item, err, "every band but the last needs up_to, the last "
                                                 "none");
        if (up_to >= 0 && up_to <= last)
            return pack_fail(h->pack, item, err, "up_to must be above the band before");
        band->rate = (int)rate;
        band->up_to = up_to;
        last = up_to;
    }
    c->n_bands = (int)json_array_size(bands);
    return KEEL_OK;
}

static int load_year(struct household *h, struct hh_year *y, const char *name,
                     const json_t *def, const char *path, struct keel_error *err)
{
    static const char *const keys[] = {"source", "personal_allowance", "taper",
                                       "marriage_allowance", "countries", NULL};
    static const char *const taper_keys[] = {"threshold", "per", NULL};
    static const char *const ma_keys[] = {"transfer", "relief_rate", NULL};
    static const char *const country_keys[] = {"label", "source", "marriage_allowance_max_rate",
                                               "bands", NULL};
    char sub[KEEL_JSON_PATH_MAX], item[KEEL_JSON_PATH_MAX], bands[KEEL_JSON_PATH_MAX];
    const json_t *taper, *ma, *countries, *c;
    struct keel_error inner;
    long long v;
    const char *cname;
    int rc;

    y->name = name;
    if (strlen(name) != 7 || !isdigit((unsigned char)name[0]) || name[4] != '-')
        return pack_fail(h->pack, path, err, "a tax year is named like \"2024-25\"");
    if (!json_is_object(def))
        return pack_fail(h->pack, path, err, "must be a mapping");
    if (keel_json_check_keys(def, keys, path, &inner) ||
        keel_json_get_string(def, "source", 1, path, &y->source, &inner) ||
        keel_json_get_int(def, "personal_allowance", 1, 0, HOUSEHOLD_AMOUNT_MAX, path,
                          &y->allowance, &inner))
        return pack_fail(h->pack, inner.field, err, "%s", inner.message);
    keel_json_path_key(sub, sizeof(sub), path, "taper");
    if ((taper = json_object_get(def, "taper"))) {
        v = 2;
        if (!json_is_object(taper) || keel_json_check_keys(taper, taper_keys, sub, &inner) ||
            keel_json_get_int(taper, "threshold", 1, 1, HOUSEHOLD_AMOUNT_MAX, sub,
                              &y->taper_threshold, &inner) ||
            keel_json_get_int(taper, "per", 1, 1, 100, sub, &v, &inner))
            return pack_fail(h->pack, json_is_object(taper) ? inner.field : sub, err, "%s",
                             json_is_object(taper) ? inner.message : "must be {threshold, per}");
        y->taper_per = (int)v;
    }
    keel_json_path_key(sub, sizeof(sub), path, "marriage_allowance");
    if ((ma = json_object_get(def, "marriage_allowance"))) {
        v = 0;
        if (!json_is_object(ma) || keel_json_check_keys(ma, ma_keys, sub, &inner) ||
            keel_json_get_int(ma, "transfer", 1, 1, HOUSEHOLD_AMOUNT_MAX, sub, &y->ma_transfer,
                              &inner) ||
            keel_json_get_int(ma, "relief_rate", 1, 1, 100, sub, &v, &inner))
            return pack_fail(h->pack, json_is_object(ma) ? inner.field : sub, err, "%s",
                             json_is_object(ma) ? inner.message : "must be {transfer, relief_rate}");
        y->ma_relief_rate = (int)v;
    }
    keel_json_path_key(sub, sizeof(sub), path, "countries");
    countries = json_object_get(def, "countries");
    if (!json_is_object(countries) || !json_object_size(countries) ||
        json_object_size(countries) > HH_MAX_VALUES)
        return pack_fail(h->pack, sub, err, "must map 1 to %d countries to their bands",
                         HH_MAX_VALUES);
    json_object_foreach((json_t *)countries, cname, c) {
        struct hh_country *country = &y->countries[y->n_countries];
        keel_json_path_key(item, sizeof(item), sub, cname);
        country->name = cname;
        country->label = cname;
        country->source = NULL;
        v = 0;
        if (!json_is_object(c))
            return pack_fail(h->pack, item, err, "must be a mapping {label, bands}");
        if (keel_json_check_keys(c, country_keys, item, &inner) ||
            keel_json_get_string(c, "label", 0, item, &country->label, &inner) ||
            keel_json_get_string(c, "source", 0, item, &country->source, &inner) ||
            keel_json_get_int(c, "marriage_allowance_max_rate", 0, 0, 100, item, &v, &inner))
            return pack_fail(h->pack, inner.field, err, "%s", inner.message);
        country->ma_max_rate = (int)v;
        keel_json_path_key(bands, sizeof(bands), item, "bands");
        if ((rc = load_bands(h, country, json_object_get(c, "bands"), bands, err)))
            return rc;
        y->n_countries++;
    }
    return KEEL_OK;
}

static int load_years(struct household *h, const json_t *years, struct keel_error *err)
{
    char path[KEEL_JSON_PATH_MAX];
    const char *name;
    json_t *def;
    int rc;

    if (!years)
        return KEEL_OK;
    if (!json_is_object(years) || json_object_size(years) > HH_MAX_YEARS)
        return pack_fail(h->pack, "scenario.tax_years", err,
                         "must map at most %d tax years to their figures", HH_MAX_YEARS);
    json_object_foreach((json_t *)years, name, def) {
        keel_json_path_key(path, sizeof(path), "scenario.tax_years", name);
        if ((rc = load_year(h, &h->years[h->n_years], name, def, path, err)))
            return rc;
        h->n_years++;
    }
    return KEEL_OK;
}

static int load_tables(struct household *h, const json_t *t, struct keel_error *err)
{
    static const char *const keys[] = {"default_tax_year", "default_country", "numbers",
                                       "marital_status", "country", "earners", "children",
                                       "query_leads", "summary", NULL};
    const char *const base = "scenario.household";
    struct keel_error inner;
    int rc;

    if (!json_is_object(t))
        return pack_fail(h->pack, base, err, "must be a mapping");
    if (keel_json_check_keys(t, keys, base, &inner) ||
        keel_json_get_string(t, "default_tax_year", 0, base, &h->default_year, &inner) ||
        keel_json_get_string(t, "default_country", 0, base, &h->default_country, &inner))
        return pack_fail(h->pack, inner.field, err, "%s", inner.message);
    if ((rc = load_numbers(h, json_object_get(t, "numbers"), "scenario.household.numbers",
                           err)) ||
        (rc = load_named(h, json_object_get(t, "marital_status"), HC_MARITAL,
                         "scenario.household.marital_status", h->marital, &h->n_marital, err)) ||
        (rc = load_named(h, json_object_get(t, "country"), HC_COUNTRY,
                         "scenario.household.country", h->countries, &h->n_countries, err)) ||
        (rc = load_counts(h, json_object_get(t, "earners"), HC_EARNERS,
                          "scenario.household.earners", err)) ||
        (rc = load_counts(h, json_object_get(t, "children"), HC_CHILDREN,
                          "scenario.household.children", err)))
        return rc;
    if (json_object_get(t, "query_leads") &&
        (rc = add_list(h, HC_QUERY, 0, json_object_get(t, "query_leads"),
                       "scenario.household.query_leads", err)))
        return rc;
    h->summary = json_object_get(t, "summary");
    if (h->summary && !json_is_object(h->summary))
        return pack_fail(h->pack, "scenario.household.summary", err, "must be a mapping");
    return KEEL_OK;
}

int household_load(const struct pack *pack, const json_t *tables, const json_t *tax_years,
                   struct household **out, struct keel_error *err)
{
    struct household *h = keel_calloc(1, sizeof(*h));
    int rc;

    if (!h)
        return keel_error_set(err, KEEL_ENOMEM, pack->origin, "out of memory");
    h->pack = pack;
    lexicon_init(&h->lex);
    if ((rc = load_tables(h, tables, err)) || (rc = load_years(h, tax_years, err)))
        goto fail;
    if (h->default_year && !household_year(h, h->default_year)) {
        rc = pack_fail(pack, "scenario.household.default_tax_year", err,
                       "\"%s\" is not a year of scenario.tax_years", h->default_year);
        goto fail;
    }
    if (!h->default_year && h->n_years)
        h->default_year = h->years[0].name;
    if (h->default_country && h->n_years &&
        !household_country(household_year(h, h->default_year), h->default_country)) {
        rc = pack_fail(pack, "scenario.household.default_country", err,
                       "\"%s\" has no figures in tax year %s", h->default_country,
                       h->default_year);
        goto fail;
    }
    lexicon_set_number_category(&h->lex, HC_NUMBER);
    if ((rc = lexicon_compile(&h->lex))) {
        keel_error_set(err, rc, pack->origin, "out of memory");
        goto fail;
    }
    *out = h;
    return KEEL_OK;
fail:
    household_free(h);
    return rc;
}

void household_free(struct household *h)
{
    if (!h)
        return;
    lexicon_release(&h->lex);
    keel_free(h);
}

const struct hh_year *household_year(const struct household *h, const char *name)
{
    for (int i = 0; name && i < h->n_years; i++)
        if (!strcmp(h->years[i].name, name))
            return &h->years[i];
    return NULL;
}

const struct hh_country *household_country(const struct hh_year *y, const char *name)
{
    for (int i = 0; y && name && i < y->n_countries; i++)
        if (!strcmp(y->countries[i].name, name))
            return &y->countries[i];
    return NULL;
}

