/*
 * household_int.h — the compiled household tables and tax figures that
 * household.c (loading, extraction, summary) and household_tax.c (the
 * calculator) share. Internal to src/pipeline/.
 */
#ifndef KEEL_PIPELINE_HOUSEHOLD_INT_H
#define KEEL_PIPELINE_HOUSEHOLD_INT_H

#include "pipeline/household.h"
#include "text/lexicon.h"

#define HH_MAX_VALUES 8        /* marital statuses, countries */
#define HH_MAX_YEARS 8
#define HH_MAX_BANDS 8

/* Lexicon categories of the household phrases. */
enum hh_category { HC_MARITAL, HC_COUNTRY, HC_EARNERS, HC_CHILDREN, HC_QUERY, HC_NUMBER };

struct hh_band {
    const char *name;
    int rate;                  /* per cent */
    long long up_to;           /* taxable income at the band's top; -1: no top */
};

struct hh_country {
    const char *name;          /* rest_of_uk, scotland (the pack's keys) */
    const char *label;
    const char *source;        /* the country's own figures' source, or NULL */
    int ma_max_rate;           /* marriage allowance: the recipient's highest band rate */
    struct hh_band bands[HH_MAX_BANDS];
    int n_bands;
};

struct hh_year {
    const char *name;          /* "2024-25" */
    const char *source;
    long long allowance;
    long long taper_threshold; /* 0: no taper */
    int taper_per;             /* £1 of allowance lost per this many pounds above */
    long long ma_transfer;     /* 0: no marriage allowance */
    int ma_relief_rate;
    struct hh_country countries[HH_MAX_VALUES];
    int n_countries;
};

struct household {
    const struct pack *pack;
    struct lexicon lex;
    const char *marital[HH_MAX_VALUES];    /* value index -> status name */
    int n_marital;
    const char *countries[HH_MAX_VALUES];  /* value index -> country name */
    int n_countries;
    const char *default_year;
    const char *default_country;
    const json_t *summary;                 /* borrowed: the summary labels, or NULL */
    struct hh_year years[HH_MAX_YEARS];
    int n_years;
};

/* The year / the country of a year named `name`, or NULL. */
const struct hh_year *household_year(const struct household *h, const char *name);
const struct hh_country *household_country(const struct hh_year *y, const char *name);

/* "£45k", "£45,500", "£1m" into out. */
void household_money(long long pounds, char *out, size_t cap);
/* "£6,928.31", "£45,000": pence to the penny, pounds grouped by three. */
void household_money_exact(long long pence, char *out, size_t cap);

#endif
