/*
 * test_clock.c — unit tests of keel's one clock (src/core/clock.h): the
 * strict RFC 3339 parser (offsets, fractions, bare dates, leap years and
 * leap seconds, every kind of malformed input naming its field and leaving
 * the output untouched), formatting and the calendar year, and pinning the
 * clock through KEEL_NOW. Nothing here reads the real time except to check
 * that an unpinned clock follows it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "unit.h"

#define NOW_MS INT64_C(1770465600000)  /* 2026-02-07T12:00:00Z */
#define UNTOUCHED INT64_C(-424242)

/* Parses a C string; returns the result code and leaves *ms UNTOUCHED on
 * failure (checked by the callers). */
static int parse(const char *text, int64_t *ms, struct keel_error *err)
{
    *ms = UNTOUCHED;
    keel_error_clear(err);
    return keel_time_parse(text, strlen(text), ms, "now", err);
}

static int64_t parse_ok(const char *text)
{
    struct keel_error err;
    int64_t ms;
    int rc = parse(text, &ms, &err);

    ck_assert_msg(rc == KEEL_OK, "\"%s\" was rejected: %s", text, err.message);
    return ms;
}

static void parse_bad(const char *text)
{
    struct keel_error err;
    int64_t ms;
    int rc = parse(text, &ms, &err);

    ck_assert_msg(rc == KEEL_EPARSE, "\"%s\" was accepted (rc %d)", text, rc);
    ck_assert_int_eq(ms, UNTOUCHED);
    ck_assert_int_eq(err.code, KEEL_EPARSE);
    ck_assert_str_eq(err.field, "now");
}

START_TEST(test_parse_utc)
{
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00Z"), NOW_MS);
    ck_assert_int_eq(parse_ok("2026-02-07t12:00:00z"), NOW_MS);
    ck_assert_int_eq(parse_ok("2026-02-07 12:00:00Z"), NOW_MS);
    ck_assert_int_eq(parse_ok("1970-01-01T00:00:00Z"), 0);
    ck_assert_int_eq(parse_ok("1969-12-31T23:59:59Z"), -1000);
    ck_assert_int_eq(parse_ok("2000-02-29T23:59:59Z"), INT64_C(951868799000));
    ck_assert_int_eq(parse_ok("2026-12-31T23:59:59Z"), INT64_C(1798761599000));
}
END_TEST

START_TEST(test_parse_offsets)
{
    ck_assert_int_eq(parse_ok("2026-02-07T13:00:00+01:00"), NOW_MS);
    ck_assert_int_eq(parse_ok("2026-02-07T13:30:00+01:30"), NOW_MS);
    ck_assert_int_eq(parse_ok("2026-02-07T07:00:00-05:00"), NOW_MS);
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00+00:00"), NOW_MS);
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00-00:00"), NOW_MS);
    /* An offset can move the instant across midnight and a year end. */
    ck_assert_int_eq(parse_ok("2026-02-08T00:30:00+12:30"), NOW_MS);
    ck_assert_int_eq(parse_ok("2026-12-31T23:00:00-01:00"), INT64_C(1798761600000));
    ck_assert_int_eq(parse_ok("2027-01-01T00:00:00Z"), INT64_C(1798761600000));
}
END_TEST

START_TEST(test_parse_fractions)
{
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00.5Z"), NOW_MS + 500);
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00.25Z"), NOW_MS + 250);
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00.250Z"), NOW_MS + 250);
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00.007Z"), NOW_MS + 7);
    /* Digits past milliseconds are dropped, not rounded. */
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00.123999Z"), NOW_MS + 123);
    ck_assert_int_eq(parse_ok("2026-02-07T12:00:00.123456789Z"), NOW_MS + 123);
    ck_assert_int_eq(parse_ok("2026-02-07T13:00:00.250+01:00"), NOW_MS + 250);
    parse_bad("2026-02-07T12:00:00.Z");
    parse_bad("2026-02-07T12:00:00.1234567890Z");  /* more than nanoseconds */
    parse_bad("2026-02-07T12:00:00,5Z");
}
END_TEST

START_TEST(test_parse_bare_dates)
{
    ck_assert_int_eq(parse_ok("2026-02-07"), NOW_MS - 12 * 3600 * 1000);
    ck_assert_int_eq(parse_ok("1970-01-01"), 0);
    ck_assert_int_eq(parse_ok("2024-02-29"), INT64_C(1709164800000));
    parse_bad("2026-02-07T");
    parse_bad("2026-02-07T12:00");
    parse_bad("2026-2-07");
    parse_bad("26-02-07");
    parse_bad("2026/02/07");
}
END_TEST

START_TEST(test_parse_leap_years)
{
    ck_assert_int_eq(parse_ok("2024-02-29") + 86400000, parse_ok("2024-03-01"));
    ck_assert_int_eq(parse_ok("2000-02-29") + 86400000, parse_ok("2000-03-01"));
    ck_assert_int_eq(parse_ok("2023-02-28") + 86400000, parse_ok("2023-03-01"));
    ck_assert_int_eq(parse_ok("2400-02-29") + 86400000, parse_ok("2400-03-01"));
    parse_bad("2023-02-29");
    parse_bad("2100-02-29");   /* divisible by 100, not by 400 */
    parse_bad("1900-02-29T00:00:00Z");
    /* A leap second maps onto the second before it. */
    ck_assert_int_eq(parse_ok("2016-12-31T23:59:60Z"), parse_ok("2016-12-31T23:59:59Z"));
}
END_TEST

START_TEST(test_parse_invalid_dates)
{
    const char *const bad[] = {
        "2026-02-30", "2026-02-30T12:00:00Z", "2026-04-31", "2026-06-31", "2026-09-31",
        "2026-11-31", "2026-13-01", "2026-00-10", "2026-01-00", "2026-01-32",
        "2026-02-07T24:00:00Z", "2026-02-07T12:60:00Z", "2026-02-07T12:00:61Z",
        "2026-02-07T12:00:00+24:00", "2026-02-07T12:00:00+01:60", "2026-02-07T12:00:00+0100",
        "2026-02-07T12:00:00+01", "2026-02-07T1:00:00Z", "2026-02-07T12:0:00Z",
        "2026-02-07T12:00:00", "2026-02-07X12:00:00Z", "-026-02-07", "abcd-02-07", "",
        "2026", "2026-02", " 2026-02-07", "2026-02-07 ",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        parse_bad(bad[i]);
    ck_assert_int_eq(parse_ok("2026-04-30"), parse_ok("2026-05-01") - 86400000);
    ck_assert_int_eq(parse_ok("2026-01-31T23:59:59.999Z") + 1, parse_ok("2026-02-01"));
}
END_TEST

START_TEST(test_parse_trailing_garbage)
{
    struct keel_error err;
    int64_t ms = UNTOUCHED;

    parse_bad("2026-02-07T12:00:00Zjunk");
    parse_bad("2026-02-07T12:00:00Z ");
    parse_bad("2026-02-07x");
    parse_bad("2026-02-07T12:00:00+01:00:00");
    parse_bad("2026-02-07T12:00:00ZZ");
    /* Exactly n bytes are read: a longer buffer is fine when n stops short. */
    ck_assert_int_eq(keel_time_parse("2026-02-07T12:00:00Zjunk", 20, &ms, "now", &err), KEEL_OK);
    ck_assert_int_eq(ms, NOW_MS);
    ck_assert_int_eq(keel_time_parse("2026-02-07T12:00:00Z", 10, &ms, "now", &err), KEEL_OK);
    ck_assert_int_eq(ms, NOW_MS - 12 * 3600 * 1000);
    ms = UNTOUCHED;
    ck_assert_int_eq(keel_time_parse("2026-02-07T12:00:00Z", 19, &ms, "now", &err), KEEL_EPARSE);
    ck_assert_int_eq(ms, UNTOUCHED);
}
END_TEST

START_TEST(test_parse_error_names_field)
{
    struct keel_error err;
    int64_t ms = UNTOUCHED;
    char long_text[200];

    ck_assert_int_eq(keel_time_parse("tomorrow", 8, &ms, "turns[2].now", &err), KEEL_EPARSE);
    ck_assert_str_eq(err.field, "turns[2].now");
    ck_assert_ptr_nonnull(strstr(err.message, "RFC 3339"));
    ck_assert_ptr_nonnull(strstr(err.message, "\"tomorrow\""));
    ck_assert_int_eq(ms, UNTOUCHED);

    /* A long input is quoted in part, never overflowing the message. */
    memset(long_text, '9', sizeof(long_text));
    ck_assert_int_eq(keel_time_parse(long_text, sizeof(long_text), &ms, "KEEL_NOW", &err),
                     KEEL_EPARSE);
    ck_assert_str_eq(err.field, "KEEL_NOW");
    ck_assert_uint_lt(strlen(err.message), KEEL_ERROR_MESSAGE_MAX);
    /* NULL err is allowed. */
    ck_assert_int_eq(keel_time_parse("nope", 4, &ms, "now", NULL), KEEL_EPARSE);
}
END_TEST

START_TEST(test_format)
{
    char out[KEEL_RFC3339_MAX], small[11];

    ck_assert_str_eq(keel_time_format(NOW_MS, out, sizeof(out)), "2026-02-07T12:00:00.000Z");
    ck_assert_str_eq(keel_time_format(NOW_MS + 250, out, sizeof(out)), "2026-02-07T12:00:00.250Z");
    ck_assert_str_eq(keel_time_format(0, out, sizeof(out)), "1970-01-01T00:00:00.000Z");
    ck_assert_str_eq(keel_time_format(-1, out, sizeof(out)), "1969-12-31T23:59:59.999Z");
    ck_assert_str_eq(keel_time_format(-1000, out, sizeof(out)), "1969-12-31T23:59:59.000Z");
    ck_assert_str_eq(keel_time_format(INT64_C(951868799999), out, sizeof(out)),
                     "2000-02-29T23:59:59.999Z");
    /* Round trip through the parser. */
    ck_assert_int_eq(parse_ok(keel_time_format(NOW_MS + 7, out, sizeof(out))), NOW_MS + 7);
    ck_assert_int_eq(parse_ok(keel_time_format(-1, out, sizeof(out))), -1);
    /* A short buffer is cut, not overflowed. */
    ck_assert_str_eq(keel_time_format(NOW_MS, small, sizeof(small)), "2026-02-07");
}
END_TEST

START_TEST(test_year)
{
    ck_assert_int_eq(keel_time_year(NOW_MS), 2026);
    ck_assert_int_eq(keel_time_year(0), 1970);
    ck_assert_int_eq(keel_time_year(-1), 1969);
    ck_assert_int_eq(keel_time_year(parse_ok("2026-12-31T23:59:59.999Z")), 2026);
    ck_assert_int_eq(keel_time_year(parse_ok("2027-01-01T00:00:00Z")), 2027);
    ck_assert_int_eq(keel_time_year(parse_ok("2027-01-01T00:30:00+01:00")), 2026);
    ck_assert_int_eq(keel_time_year(parse_ok("2000-02-29")), 2000);
}
END_TEST

START_TEST(test_pin_and_unpin)
{
    struct timespec before, after;
    int64_t now;

    keel_clock_pin(NOW_MS);
    ck_assert(keel_clock_pinned());
    ck_assert_int_eq(keel_clock_now(), NOW_MS);
    ck_assert_int_eq(keel_clock_now(), NOW_MS);  /* a pinned clock never moves */
    keel_clock_unpin();
    ck_assert(!keel_clock_pinned());
    clock_gettime(CLOCK_REALTIME, &before);
    now = keel_clock_now();
    clock_gettime(CLOCK_REALTIME, &after);
    ck_assert_int_ge(now, (int64_t)before.tv_sec * 1000 + before.tv_nsec / 1000000);
    ck_assert_int_le(now, (int64_t)after.tv_sec * 1000 + after.tv_nsec / 1000000);
}
END_TEST

START_TEST(test_keel_now_env)
{
    struct keel_error err;

    keel_clock_unpin();
    setenv("KEEL_NOW", "2026-02-07T13:00:00+01:00", 1);
    ck_assert_int_eq(keel_clock_init(&err), KEEL_OK);
    ck_assert(keel_clock_pinned());
    ck_assert_int_eq(keel_clock_now(), NOW_MS);

    keel_clock_unpin();
    setenv("KEEL_NOW", "2026-02-07", 1);
    ck_assert_int_eq(keel_clock_init(&err), KEEL_OK);
    ck_assert_int_eq(keel_clock_now(), NOW_MS - 12 * 3600 * 1000);
}
END_TEST

START_TEST(test_keel_now_invalid_or_unset)
{
    struct keel_error err;

    keel_clock_unpin();
    setenv("KEEL_NOW", "2026-02-30T12:00:00Z", 1);
    ck_assert_int_eq(keel_clock_init(&err), KEEL_EPARSE);
    ck_assert_int_eq(err.code, KEEL_EPARSE);
    ck_assert_str_eq(err.field, "KEEL_NOW");
    ck_assert_ptr_nonnull(strstr(err.message, "2026-02-30T12:00:00Z"));
    ck_assert(!keel_clock_pinned());

    setenv("KEEL_NOW", "yesterday", 1);
    ck_assert_int_eq(keel_clock_init(&err), KEEL_EPARSE);
    ck_assert(!keel_clock_pinned());

    /* Unset or empty: nothing to pin, not an error. */
    setenv("KEEL_NOW", "", 1);
    ck_assert_int_eq(keel_clock_init(&err), KEEL_OK);
    ck_assert(!keel_clock_pinned());
    unsetenv("KEEL_NOW");
    ck_assert_int_eq(keel_clock_init(&err), KEEL_OK);
    ck_assert(!keel_clock_pinned());
}
END_TEST

Suite *suite_clock(void)
{
    Suite *s = suite_create("clock");
    TCase *parsing = tcase_create("parse"), *format = tcase_create("format");
    TCase *pinning = tcase_create("pin");

    unit_leak_fixture(parsing);
    tcase_add_test(parsing, test_parse_utc);
    tcase_add_test(parsing, test_parse_offsets);
    tcase_add_test(parsing, test_parse_fractions);
    tcase_add_test(parsing, test_parse_bare_dates);
    tcase_add_test(parsing, test_parse_leap_years);
    tcase_add_test(parsing, test_parse_invalid_dates);
    tcase_add_test(parsing, test_parse_trailing_garbage);
    tcase_add_test(parsing, test_parse_error_names_field);
    suite_add_tcase(s, parsing);

    unit_leak_fixture(format);
    tcase_add_test(format, test_format);
    tcase_add_test(format, test_year);
    suite_add_tcase(s, format);

    unit_leak_fixture(pinning);
    tcase_add_test(pinning, test_pin_and_unpin);
    tcase_add_test(pinning, test_keel_now_env);
    tcase_add_test(pinning, test_keel_now_invalid_or_unset);
    suite_add_tcase(s, pinning);
    return s;
}
