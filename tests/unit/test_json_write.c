/*
 * test_json_write.c — the fast compact JSON writer (src/core/json_write.c)
 * writes exactly what jansson writes (JSON_COMPACT | JSON_SORT_KEYS |
 * JSON_ENCODE_ANY): hand-picked values (escapes, control characters, NUL
 * inside a string, UTF-8, keys that are prefixes of each other, many keys,
 * deep nesting, reals of every shape, integer extremes), a few thousand
 * generated values, what it leaves to jansson (invalid UTF-8, too deep),
 * a full buffer, and allocation failures.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/json_write.h"
#include "unit.h"

/* jansson's text of `value`, or "" when jansson refuses. */
static void jansson_text(const json_t *value, struct keel_buf *out)
{
    char *text = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);

    keel_buf_reset(out);
    if (text)
        keel_buf_adds(out, text);
    keel_free(text);   /* jansson allocates through keel's allocator */
}

static void assert_same(const json_t *value)
{
    struct keel_buf mine, theirs;

    keel_buf_init(&mine, 0);
    keel_buf_init(&theirs, 0);
    jansson_text(value, &theirs);
    ck_assert_int_eq(keel_json_write_compact(&mine, value), KEEL_OK);
    ck_assert_uint_eq(mine.len, theirs.len);
    ck_assert_msg(!memcmp(mine.data, theirs.data, mine.len), "%s\nvs jansson\n%s", mine.data,
                  theirs.data);
    /* keel_json_append takes the same path */
    keel_buf_reset(&mine);
    ck_assert_int_eq(keel_json_append(&mine, value, JSON_COMPACT), KEEL_OK);
    ck_assert_str_eq(mine.data, theirs.data);
    keel_buf_release(&mine);
    keel_buf_release(&theirs);
}

START_TEST(test_json_write_hand_picked)
{
    static const double reals[] = {0.0, -0.0, 1.0, -3.0, 0.1, 1e22, 1e21, 1e-7, 123456789012345678.0,
                                   2.5e-300, 1.7976931348623157e308, 4.9e-324, 0.5, 100.0, 1e100,
                                   -1.25e-5, 3.14159, 1e16, 1e17};
    json_t *v = json_object(), *arr = json_array(), *deep = json_array(), *big = json_object();

    json_object_set_new(v, "b", json_string("quote \" backslash \\ slash / tab \t nl \n cr \r"
                                            " bs \b ff \f bell \a esc \x1b del \x7f"));
    json_object_set_new(v, "a", json_stringn("nul\0inside", 10));
    json_object_set_new(v, "ab", json_string("café — ✓ 日本語 😀"));
    json_object_set_new(v, "a\x01key", json_true());
    json_object_setn_new(v, "k\0z", 3, json_false());
    json_object_set_new(v, "k", json_null());
    json_object_set_new(v, "", json_object());
    json_object_set_new(v, "empty", json_array());
    json_object_set_new(v, "min", json_integer(INT64_MIN));
    json_object_set_new(v, "max", json_integer(INT64_MAX));
    json_object_set_new(v, "zero", json_integer(0));
    json_object_set_new(v, "neg", json_integer(-42));
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++)
        json_array_append_new(arr, json_real(reals[i]));
    json_object_set_new(v, "reals", arr);
    for (int i = 0; i < 100; i++) {
        char key[16];
        snprintf(key, sizeof(key), "key%03d", (i * 37) % 100);
        json_object_set_new(big, key, json_integer(i));
    }
    json_object_set_new(v, "big", big);
    for (int i = 0; i < 200; i++) {
        json_t *inner = json_array();
        json_array_append_new(inner, deep);
        deep = inner;
    }
    json_object_set_new(v, "deep", deep);
    assert_same(v);
    assert_same(json_object_get(v, "ab"));   /* a bare string (JSON_ENCODE_ANY) */
    assert_same(json_object_get(v, "reals"));
    json_decref(v);
}
END_TEST

static unsigned seed;

static unsigned rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return (seed >> 8) & 0xffffff;
}

static json_t *random_value(int depth)
{
    static const char *const strings[] = {"", "a", "ab", "b", "é", "\"", "\\", "\n", "x\x1fy",
                                          "/", "日", "a b", "A", "aa"};
    unsigned kind = rnd() % (depth > 4 ? 6 : 8);
    json_t *v;

    switch (kind) {
    case 0: return json_integer((json_int_t)rnd() - 8000000);
    case 1: return json_real(ldexp((double)rnd() - 8000000.0, (int)(rnd() % 200) - 100));
    case 2: return json_string(strings[rnd() % (sizeof(strings) / sizeof(strings[0]))]);
    case 3: return rnd() % 2 ? json_true() : json_false();
    case 4: return json_null();
    case 5: return json_real((double)(rnd() % 1000));
    case 6:
        v = json_array();
        for (unsigned i = rnd() % 6; i > 0; i--)
            json_array_append_new(v, random_value(depth + 1));
        return v;
    default:
        v = json_object();
        for (unsigned i = rnd() % 8; i > 0; i--)
            json_object_set_new(v, strings[rnd() % (sizeof(strings) / sizeof(strings[0]))],
                                random_value(depth + 1));
        return v;
    }
}

START_TEST(test_json_write_generated)
{
    seed = 42;
    for (int i = 0; i < 3000; i++) {
        json_t *v = random_value(0);
        assert_same(v);
        json_decref(v);
    }
}
END_TEST

/* Strings long enough for the sixteen-byte scan, with the bytes that
 * need a look (escapes, control characters, NUL, UTF-8, invalid UTF-8)
 * at every position around the blocks' edges. */
START_TEST(test_json_write_long_strings)
{
    static const char *const pieces[] = {"plain words ", "x", "\"", "\\", "\n", "\x01", "\x1f",
                                         "\x7f", "é", "日本", "😀", "/", "\t", "0123456789abcdef"};
    static const char *const bad[] = {"\xff", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                      "\xc0\xaf"};
    struct keel_buf mine;

    keel_buf_init(&mine, 0);
    seed = 7;
    for (int i = 0; i < 4000; i++) {
        char text[200];
        size_t len = 0, target = rnd() % 120;
        int broken = i % 4 == 3;
        while (len < target) {
            const char *p = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t n = strlen(p);
            if (len + n >= sizeof(text) - 8)
                break;
            memcpy(text + len, p, n);
            len += n;
        }
        if (i % 5 == 0 && len < sizeof(text) - 1)
            text[len++] = '\0';   /* NUL inside: jansson writes \u0000 */
        if (broken) {
            const char *b = bad[rnd() % (sizeof(bad) / sizeof(bad[0]))];
            size_t at = len ? rnd() % (len + 1) : 0, n = strlen(b);
            memmove(text + at + n, text + at, len - at);
            memcpy(text + at, b, n);
            len += n;
        }
        json_t *v = json_stringn_nocheck(text, len);
        if (broken) {
            keel_buf_reset(&mine);
            ck_assert_int_eq(keel_json_write_compact(&mine, v), KEEL_EINVAL);
            ck_assert_uint_eq(mine.len, 0);
        } else {
            assert_same(v);
        }
        json_decref(v);
    }
    keel_buf_release(&mine);
}
END_TEST

/* keel_json_dumps is json_dumps, text for text, under every flag set
 * keel's code uses and some it leaves to jansson; NULL where jansson's
 * is NULL. keel_json_dumps_len the same, with its length and a byte to
 * spare after the NUL. */
START_TEST(test_json_dumps_same_as_jansson)
{
    static const size_t flags[] = {
        JSON_COMPACT, JSON_COMPACT | JSON_SORT_KEYS, JSON_COMPACT | JSON_REAL_PRECISION(10),
        JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(6), JSON_COMPACT | JSON_ENCODE_ANY,
        JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS | JSON_PRESERVE_ORDER,
        JSON_COMPACT | JSON_REAL_PRECISION(1), JSON_INDENT(2), JSON_COMPACT | JSON_ENSURE_ASCII,
        JSON_COMPACT | JSON_ESCAPE_SLASH, 0};
    json_t *bad = json_pack("{s:o}", "k", json_stringn_nocheck("\xff", 1));

    seed = 99;
    for (int i = 0; i < 1500; i++) {
        json_t *v = random_value(i % 3);   /* top-level scalars too */
        for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
            char *mine = keel_json_dumps(v, flags[f]), *theirs = json_dumps(v, flags[f]);
            size_t len = 0;
            /* with room for a newline after the NUL (ASan sees a write past it) */
            char *spare = keel_json_dumps_len(v, flags[f], 1, &len);
            if (!theirs) {
                ck_assert_msg(!mine, "flags %zx: keel wrote %s, jansson nothing", flags[f], mine);
                ck_assert_ptr_null(spare);
            } else {
                ck_assert_msg(mine && !strcmp(mine, theirs), "flags %zx: %s\nvs jansson\n%s",
                              flags[f], mine ? mine : "(null)", theirs);
                ck_assert_msg(spare && !strcmp(spare, theirs), "flags %zx: with spare", flags[f]);
                ck_assert_uint_eq(len, strlen(theirs));
                spare[len] = '\n';
                spare[len + 1] = '\0';
            }
            keel_free(mine);
            keel_free(theirs);
            keel_free(spare);
        }
        json_decref(v);
    }
    ck_assert_ptr_null(keel_json_dumps(bad, JSON_COMPACT));
    ck_assert_ptr_null(keel_json_dumps(NULL, JSON_COMPACT | JSON_ENCODE_ANY));
    json_decref(bad);
}
END_TEST

START_TEST(test_json_write_leaves_to_jansson)
{
    struct keel_buf buf;
    json_t *bad = json_stringn_nocheck("\xff\xfe", 2), *deep = json_array();

    keel_buf_init(&buf, 0);
    keel_buf_adds(&buf, "kept");
    ck_assert_int_eq(keel_json_write_compact(&buf, bad), KEEL_EINVAL);
    ck_assert_str_eq(buf.data, "kept");
    ck_assert_int_eq(keel_json_append(&buf, bad, JSON_COMPACT), KEEL_ENOMEM);   /* jansson refuses */
    ck_assert_str_eq(buf.data, "kept");
    ck_assert_int_eq(keel_json_write_compact(&buf, NULL), KEEL_EINVAL);
    for (int i = 0; i < 300; i++) {
        json_t *inner = json_array();
        json_array_append_new(inner, deep);
        deep = inner;
    }
    ck_assert_int_eq(keel_json_write_compact(&buf, deep), KEEL_EINVAL);
    ck_assert_str_eq(buf.data, "kept");
    ck_assert_int_eq(keel_json_append(&buf, deep, JSON_COMPACT), KEEL_OK);   /* jansson writes it */
    ck_assert_uint_eq(buf.len, 4 + 301 * 2);
    keel_buf_release(&buf);
    json_decref(bad);
    json_decref(deep);
}
END_TEST

START_TEST(test_json_write_full_buffer_and_failures)
{
    json_t *v = json_pack("{s:s,s:[i,f,b],s:{s:n}}", "text", "some words here", "list", 1, 2.5,
                          1, "nested", "x");
    struct keel_buf buf;
    char expect[256];

    keel_buf_init(&buf, 0);
    ck_assert_int_eq(keel_json_write_compact(&buf, v), KEEL_OK);
    snprintf(expect, sizeof(expect), "%s", buf.data);
    keel_buf_release(&buf);
    /* Every cap short of the text fails and leaves the buffer as it was. */
    for (size_t max = 1; max < strlen(expect); max++) {   /* (0 is no cap) */
        keel_buf_init(&buf, max);
        ck_assert_int_ne(keel_json_write_compact(&buf, v), KEEL_OK);
        ck_assert_uint_eq(buf.len, 0);
        keel_buf_release(&buf);
    }
    for (long fail = 0; fail < 40; fail++) {
        int rc;
        keel_buf_init(&buf, 0);
        keel_alloc_fail_after(fail, 1);
        rc = keel_json_write_compact(&buf, v);
        keel_alloc_fail_after(-1, 0);
        if (rc)
            ck_assert_int_eq(rc, KEEL_ENOMEM);
        else
            ck_assert_str_eq(buf.data, expect);
        keel_buf_release(&buf);
    }
    json_decref(v);
}
END_TEST

Suite *suite_json_write(void)
{
    Suite *s = suite_create("json_write");
    TCase *tc = tcase_create("json_write");

    unit_leak_fixture(tc);
    tcase_add_test(tc, test_json_write_hand_picked);
    tcase_add_test(tc, test_json_write_generated);
    tcase_add_test(tc, test_json_write_long_strings);
    tcase_add_test(tc, test_json_dumps_same_as_jansson);
    tcase_add_test(tc, test_json_write_leaves_to_jansson);
    tcase_add_test(tc, test_json_write_full_buffer_and_failures);
    suite_add_tcase(s, tc);
    return s;
}
