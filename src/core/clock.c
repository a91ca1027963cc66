/*
 * clock.c — pinned/real clock, RFC 3339 parsing and formatting.
 *
 * Parsing is strict and hand-rolled on purpose: strptime is locale-bound and
 * accepts too much; the grammar here is the small RFC 3339 profile plus a
 * bare date, and every field is range-checked.
 */
#include "core/clock.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int pinned;
static _Atomic int64_t pinned_ms;

void keel_clock_pin(int64_t ms)
{
    atomic_store(&pinned_ms, ms);
    atomic_store(&pinned, 1);
}

void keel_clock_unpin(void)
{
    atomic_store(&pinned, 0);
}

int keel_clock_pinned(void)
{
    return atomic_load(&pinned);
}

int64_t keel_clock_now(void)
{
    struct timespec ts;

    if (atomic_load(&pinned))
        return atomic_load(&pinned_ms);
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int keel_clock_init(struct keel_error *err)
{
    const char *now = getenv("KEEL_NOW");
    int64_t ms;
    int rc;

    if (!now || !*now)
        return KEEL_OK;
    rc = keel_time_parse(now, strlen(now), &ms, "KEEL_NOW", err);
    if (rc)
        return rc;
    keel_clock_pin(ms);
    return KEEL_OK;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : days[m - 1];
}

/* Reads exactly `width` digits at text[*pos]; -1 when they are not digits. */
static int read_digits(const char *text, size_t n, size_t *pos, int width)
{
    int value = 0;

    if (*pos + (size_t)width > n)
        return -1;
    for (int i = 0; i < width; i++) {
        char c = text[*pos + (size_t)i];
        if (c < '0' || c > '9')
            return -1;
        value = value * 10 + (c - '0');
    }
    *pos += (size_t)width;
    return value;
}

static int expect_char(const char *text, size_t n, size_t *pos, char c)
{
    if (*pos >= n || text[*pos] != c)
        return 0;
    (*pos)++;
    return 1;
}

int keel_time_parse(const char *text, size_t n, int64_t *out,
                    const char *field, struct keel_error *err)
{
    size_t pos = 0;
    int year, month, day, hour = 0, minute = 0, second = 0, millis = 0;
    int offset_minutes = 0;

    year = read_digits(text, n, &pos, 4);
    if (year < 0 || !expect_char(text, n, &pos, '-'))
        goto bad;
    month = read_digits(text, n, &pos, 2);
    if (month < 1 || month > 12 || !expect_char(text, n, &pos, '-'))
        goto bad;
    day = read_digits(text, n, &pos, 2);
    if (day < 1 || day > days_in_month(year, month))
        goto bad;
    if (pos == n)
        goto done;
    if (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' ')
        goto bad;
    pos++;
    hour = read_digits(text, n, &pos, 2);
    if (hour < 0 || hour > 23 || !expect_char(text, n, &pos, ':'))
        goto bad;
    minute = read_digits(text, n, &pos, 2);
    if (minute < 0 || minute > 59 || !expect_char(text, n, &pos, ':'))
        goto bad;
    second = read_digits(text, n, &pos, 2);
    if (second < 0 || second > 60)
        goto bad;
    if (pos < n && text[pos] == '.') {
        int digits = 0;
        pos++;
        while (pos < n && text[pos] >= '0' && text[pos] <= '9') {
            if (digits < 3)
                millis = millis * 10 + (text[pos] - '0');
            digits++;
            pos++;
        }
        if (digits == 0 || digits > 9)
            goto bad;
        for (; digits < 3; digits++)
            millis *= 10;
    }
    if (pos < n && (text[pos] == 'Z' || text[pos] == 'z')) {
        pos++;
    } else if (pos < n && (text[pos] == '+' || text[pos] == '-')) {
        int sign = text[pos] == '-' ? -1 : 1, oh, om;
        pos++;
        oh = read_digits(text, n, &pos, 2);
        if (oh < 0 || oh > 23 || !expect_char(text, n, &pos, ':'))
            goto bad;
        om = read_digits(text, n, &pos, 2);
        if (om < 0 || om > 59)
            goto bad;
        offset_minutes = sign * (oh * 60 + om);
    } else {
        goto bad;
    }
    if (pos != n)
        goto bad;
done:
    if (second == 60)
        second = 59;  /* a leap second maps onto the second before it */
    *out = ((days_from_civil(year, month, day) * 86400 + hour * 3600 +
             minute * 60 + second) - (int64_t)offset_minutes * 60) * 1000 + millis;
    return KEEL_OK;
bad:
    return keel_error_set(err, KEEL_EPARSE, field,
                          "expected an RFC 3339 time such as 2026-02-07T12:00:00Z or a date such as 2026-02-07, got \"%.*s\"",
                          (int)(n > 64 ? 64 : n), text);
}

char *keel_time_format(int64_t ms, char *out, size_t n)
{
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    int millis = (int)(ms - (int64_t)secs * 1000);
    struct tm tm;

    gmtime_r(&secs, &tm);
    snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
    return out;
}

int keel_time_year(int64_t ms)
{
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;

    gmtime_r(&secs, &tm);
    return tm.tm_year + 1900;
}
