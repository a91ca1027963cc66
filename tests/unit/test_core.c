/*
 * test_core.c — unit tests of src/core: result names and the error struct,
 * the allocation wrapper with its failure injection and live count, the
 * string buffer's invariants (always terminated, capped, unchanged on
 * failure), the arena, the jansson helpers that name the offending field,
 * JSON-lines logging, ids under a pinned clock and a seeded generator, and
 * capped file reads. Every test runs in its own process under the leak
 * fixture, so a test that forgets a keel_free fails.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/id.h"
#include "core/json.h"
#include "core/utf8.h"
#include "core/log.h"
#include "unit.h"

#define NOW_MS INT64_C(1770465600000)  /* 2026-02-07T12:00:00Z */

/* ---- errors ------------------------------------------------------------ */

START_TEST(test_strerror_every_code)
{
    static const char *const tokens[KEEL_RESULT_COUNT] = {
        "ok", "no_memory", "invalid", "parse_error", "too_big",
        "not_found", "io_error", "unsupported", "failed",
    };

    ck_assert_str_eq(keel_strerror(KEEL_OK), "success");
    ck_assert_str_eq(keel_strerror(KEEL_ENOMEM), "out of memory");
    ck_assert_str_eq(keel_strerror(KEEL_EINVAL), "invalid input");
    ck_assert_str_eq(keel_strerror(KEEL_EPARSE), "parse error");
    ck_assert_str_eq(keel_strerror(KEEL_ETOOBIG), "input too large");
    ck_assert_str_eq(keel_strerror(KEEL_ENOTFOUND), "not found");
    ck_assert_str_eq(keel_strerror(KEEL_EIO), "input/output error");
    ck_assert_str_eq(keel_strerror(KEEL_EUNSUPPORTED), "unsupported");
    ck_assert_str_eq(keel_strerror(KEEL_EFAIL), "check failed");
    for (int rc = 0; rc < KEEL_RESULT_COUNT; rc++) {
        ck_assert_str_eq(keel_result_token(rc), tokens[rc]);
        /* Names and tokens are distinct per code. */
        for (int other = 0; other < rc; other++) {
            ck_assert_str_ne(keel_strerror(rc), keel_strerror(other));
            ck_assert_str_ne(keel_result_token(rc), keel_result_token(other));
        }
    }
}
END_TEST

START_TEST(test_strerror_out_of_range)
{
    const int bad[] = {-1, KEEL_RESULT_COUNT, KEEL_RESULT_COUNT + 1, 1000, -1000};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_ptr_nonnull(keel_strerror(bad[i]));
        ck_assert_str_eq(keel_strerror(bad[i]), "unknown error");
        ck_assert_str_eq(keel_result_token(bad[i]), "unknown");
    }
}
END_TEST

START_TEST(test_error_set_and_clear)
{
    struct keel_error err;

    memset(&err, 'x', sizeof(err));
    keel_error_clear(&err);
    ck_assert_int_eq(err.code, KEEL_OK);
    ck_assert_str_eq(err.field, "");
    ck_assert_str_eq(err.message, "");

    ck_assert_int_eq(keel_error_set(&err, KEEL_EINVAL, "search.count", "must be %d..%d", 1, 50),
                     KEEL_EINVAL);
    ck_assert_int_eq(err.code, KEEL_EINVAL);
    ck_assert_str_eq(err.field, "search.count");
    ck_assert_str_eq(err.message, "must be 1..50");

    ck_assert_int_eq(keel_error_set(&err, KEEL_EIO, NULL, "disk on fire"), KEEL_EIO);
    ck_assert_str_eq(err.field, "");

    /* NULL err is allowed and still returns the code. */
    ck_assert_int_eq(keel_error_set(NULL, KEEL_ETOOBIG, "f", "m"), KEEL_ETOOBIG);
    keel_error_clear(NULL);
}
END_TEST

START_TEST(test_error_set_truncates)
{
    struct keel_error err;
    char field[1000], message[1000];

    memset(field, 'f', sizeof(field) - 1);
    field[sizeof(field) - 1] = '\0';
    memset(message, 'm', sizeof(message) - 1);
    message[sizeof(message) - 1] = '\0';
    keel_error_set(&err, KEEL_EINVAL, field, "%s", message);
    ck_assert_uint_eq(strlen(err.field), KEEL_ERROR_FIELD_MAX - 1);
    ck_assert_uint_eq(strlen(err.message), KEEL_ERROR_MESSAGE_MAX - 1);
    ck_assert_int_eq(err.field[0], 'f');
    ck_assert_int_eq(err.message[KEEL_ERROR_MESSAGE_MAX - 2], 'm');
}
END_TEST

/* Messages quote bytes from outside and are cut at a fixed size: they
 * stay well-formed UTF-8 (a cut character is dropped, a stray byte
 * becomes '?'), so they can always go into JSON. */
START_TEST(test_error_set_keeps_utf8)
{
    struct keel_error err;
    char message[KEEL_ERROR_MESSAGE_MAX + 8];
    json_t *j;

    keel_error_set(&err, KEEL_EIO, "llm", "page: <html>\xff\xfe Bad\xc3 gateway \xe6\x97\xa5</html>");
    ck_assert_str_eq(err.message, "page: <html>?? Bad? gateway \xe6\x97\xa5</html>");
    /* a three-byte character across the cut */
    memset(message, 'a', KEEL_ERROR_MESSAGE_MAX - 2);
    memcpy(message + KEEL_ERROR_MESSAGE_MAX - 2, "\xe6\x97\xa5", 4);
    keel_error_set(&err, KEEL_EIO, "f\xc3", "%s", message);
    ck_assert_uint_eq(strlen(err.message), KEEL_ERROR_MESSAGE_MAX - 2);
    ck_assert_str_eq(err.field, "f");
    j = json_pack("{s:s, s:s}", "f", err.field, "m", err.message);
    ck_assert_ptr_nonnull(j);
    json_decref(j);
    {
        char s[] = "ok \xe6\x97";   /* cut at the end: dropped */
        utf8_clean(s);
        ck_assert_str_eq(s, "ok ");
    }
}
END_TEST

START_TEST(test_error_format)
{
    struct keel_error err;
    char out[64], tiny[8];

    keel_error_set(&err, KEEL_EINVAL, "turns[0].user", "is required");
    ck_assert_str_eq(keel_error_format(&err, out, sizeof(out)), "turns[0].user: is required");

    keel_error_set(&err, KEEL_EIO, NULL, "read failed");
    ck_assert_str_eq(keel_error_format(&err, out, sizeof(out)), "read failed");

    /* No message: the code's name stands in. */
    keel_error_set(&err, KEEL_ENOMEM, "pack", "%s", "");
    ck_assert_str_eq(keel_error_format(&err, out, sizeof(out)), "pack: out of memory");

    keel_error_set(&err, KEEL_EINVAL, "abcdef", "ghijkl");
    ck_assert_str_eq(keel_error_format(&err, tiny, sizeof(tiny)), "abcdef:");
    ck_assert_str_eq(keel_error_format(NULL, out, sizeof(out)), "");
}
END_TEST

/* ---- allocation wrapper ------------------------------------------------ */

START_TEST(test_alloc_live_count)
{
    long before = keel_alloc_live();
    char *a = keel_malloc(10), *b = keel_calloc(4, 8), *c = keel_strdup("keel");
    char *d = keel_strndup("keelson", 4), *zero = keel_malloc(0), *zero2 = keel_malloc(0);

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(zero);
    ck_assert_ptr_nonnull(zero2);
    ck_assert_ptr_ne(zero, zero2);
    ck_assert_int_eq(keel_alloc_live(), before + 6);
    for (int i = 0; i < 32; i++)
        ck_assert_int_eq(b[i], 0);
    ck_assert_str_eq(c, "keel");
    ck_assert_str_eq(d, "keel");

    /* realloc moves or grows without changing the count. */
    memcpy(a, "123456789", 10);
    a = keel_realloc(a, 4096);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(a, "123456789");
    ck_assert_int_eq(keel_alloc_live(), before + 6);

    /* realloc(NULL) is a malloc and counts. */
    char *e = keel_realloc(NULL, 16);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(keel_alloc_live(), before + 7);

    keel_free(NULL);
    keel_free(a);
    keel_free(b);
    keel_free(c);
    keel_free(d);
    keel_free(e);
    keel_free(zero);
    keel_free(zero2);
    ck_assert_int_eq(keel_alloc_live(), before);
}
END_TEST

START_TEST(test_alloc_fail_one_shot)
{
    long before = keel_alloc_live();
    void *p[4];

    keel_alloc_fail_after(2, 0);
    p[0] = keel_malloc(8);
    p[1] = keel_calloc(1, 8);
    p[2] = keel_malloc(8);   /* the third allocation fails */
    p[3] = keel_malloc(8);   /* one-shot: the next one works again */
    ck_assert_ptr_nonnull(p[0]);
    ck_assert_ptr_nonnull(p[1]);
    ck_assert_ptr_null(p[2]);
    ck_assert_ptr_nonnull(p[3]);
    ck_assert_int_eq(keel_alloc_live(), before + 3);

    keel_alloc_fail_after(0, 0);
    ck_assert_ptr_null(keel_strdup("x"));
    char *s = keel_strdup("x");
    ck_assert_ptr_nonnull(s);
    keel_free(s);

    keel_alloc_fail_after(0, 0);
    ck_assert_ptr_null(keel_calloc(2, 2));

    for (int i = 0; i < 4; i++)
        keel_free(p[i]);
    ck_assert_int_eq(keel_alloc_live(), before);
}
END_TEST

START_TEST(test_alloc_fail_sticky)
{
    long before = keel_alloc_live();
    char *ok, *grown;

    keel_alloc_fail_after(1, 1);
    ok = keel_malloc(4);
    ck_assert_ptr_nonnull(ok);
    for (int i = 0; i < 10; i++) {
        ck_assert_ptr_null(keel_malloc(4));
        ck_assert_ptr_null(keel_calloc(1, 4));
        ck_assert_ptr_null(keel_strdup("no"));
    }
    /* A failed realloc leaves the block intact. */
    memcpy(ok, "abc", 4);
    ck_assert_ptr_null(keel_realloc(ok, 1 << 16));
    ck_assert_str_eq(ok, "abc");
    ck_assert_int_eq(keel_alloc_live(), before + 1);

    keel_alloc_fail_after(-1, 0);
    grown = keel_realloc(ok, 1 << 16);
    ck_assert_ptr_nonnull(grown);
    ck_assert_str_eq(grown, "abc");
    keel_free(grown);
    ck_assert_int_eq(keel_alloc_live(), before);
}
END_TEST

/* The per-thread cache in front of malloc: blocks of every size it
 * hands back are big enough and distinct, across size classes and
 * rounds; a freed block comes back for the same size (the cache is off
 * under AddressSanitizer); a thread's parked blocks go back to malloc
 * when it exits. */
START_TEST(test_alloc_cache_blocks)
{
    enum { N = 300 };
    unsigned char *p[N];
    size_t size[N];
    uint32_t seed = 7;

    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 1103515245u + 12345u;
            size[i] = (seed >> 8) % 640;   /* below, across and above the classes */
            p[i] = keel_malloc(size[i]);
            ck_assert_ptr_nonnull(p[i]);
            ck_assert_uint_ge(malloc_usable_size(p[i]), size[i]);
            memset(p[i], i & 0xff, size[i]);
        }
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < size[i]; k++)
                ck_assert_uint_eq(p[i][k], (unsigned)(i & 0xff));
        for (int i = 0; i < N; i++)
            keel_free(p[i]);
    }
#if !defined(__SANITIZE_ADDRESS__)
    unsigned char *a = keel_malloc(100);
    keel_free(a);
    ck_assert_ptr_eq(keel_malloc(97), a);
    keel_free(a);
#endif
}
END_TEST

static void *churn(void *arg)
{
    void *p[1000];

    (void)arg;
    for (int i = 0; i < 1000; i++)
        p[i] = keel_malloc(16 + (size_t)(i % 20) * 16);
    for (int i = 0; i < 1000; i++)
        keel_free(p[i]);
    return NULL;
}

START_TEST(test_alloc_cache_thread_exit)
{
    pthread_t th;
    size_t before, after;

    churn(NULL);   /* this thread's cache fills first, so it does not move below */
    before = mallinfo2().uordblks;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(pthread_create(&th, NULL, churn, NULL), 0);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
    }
    after = mallinfo2().uordblks;
    /* each thread parked ~100 KB; none of it may outlive the thread */
    ck_assert_uint_lt(after, before + 16384);
}
END_TEST

/* ---- buffer ------------------------------------------------------------ */

static void assert_terminated(const struct keel_buf *buf)
{
    ck_assert_ptr_nonnull(buf->data);
    ck_assert_int_eq(buf->data[buf->len], '\0');
    ck_assert_uint_le(buf->len, buf->max);
}

START_TEST(test_buf_basics)
{
    struct keel_buf buf;

    keel_buf_init(&buf, 0);
    assert_terminated(&buf);
    ck_assert_uint_eq(buf.len, 0);
    ck_assert_uint_eq(buf.cap, 0);
    ck_assert_uint_eq(buf.max, SIZE_MAX / 2);
    ck_assert_str_eq(buf.data, "");

    ck_assert_int_eq(keel_buf_adds(&buf, "hello"), KEEL_OK);
    assert_terminated(&buf);
    ck_assert_int_eq(keel_buf_addc(&buf, ','), KEEL_OK);
    ck_assert_int_eq(keel_buf_addf(&buf, " %s %d%c", "world", 42, '!'), KEEL_OK);
    assert_terminated(&buf);
    ck_assert_str_eq(buf.data, "hello, world 42!");
    ck_assert_uint_eq(buf.len, strlen("hello, world 42!"));

    /* Binary safe: embedded NULs count. */
    ck_assert_int_eq(keel_buf_add(&buf, "a\0b", 3), KEEL_OK);
    ck_assert_uint_eq(buf.len, 19);
    ck_assert_mem_eq(buf.data + 16, "a\0b", 4);

    /* Adding nothing is fine and keeps the terminator. */
    ck_assert_int_eq(keel_buf_add(&buf, NULL, 0), KEEL_OK);
    ck_assert_int_eq(keel_buf_addf(&buf, "%s", ""), KEEL_OK);
    ck_assert_uint_eq(buf.len, 19);
    assert_terminated(&buf);

    keel_buf_release(&buf);
    assert_terminated(&buf);
    ck_assert_uint_eq(buf.len, 0);
    ck_assert_uint_eq(buf.cap, 0);
    /* Reusable after release. */
    ck_assert_int_eq(keel_buf_adds(&buf, "again"), KEEL_OK);
    ck_assert_str_eq(buf.data, "again");
    keel_buf_release(&buf);
}
END_TEST

START_TEST(test_buf_growth_keeps_contents)
{
    struct keel_buf buf;
    char expect[5001];

    keel_buf_init(&buf, 0);
    for (int i = 0; i < 5000; i++) {
        ck_assert_int_eq(keel_buf_addc(&buf, (char)('a' + i % 26)), KEEL_OK);
        expect[i] = (char)('a' + i % 26);
        assert_terminated(&buf);
        ck_assert_uint_gt(buf.cap, buf.len);
    }
    expect[5000] = '\0';
    ck_assert_str_eq(buf.data, expect);
    keel_buf_release(&buf);
}
END_TEST

START_TEST(test_buf_max_is_too_big)
{
    struct keel_buf buf;

    keel_buf_init(&buf, 5);
    ck_assert_int_eq(keel_buf_adds(&buf, "abc"), KEEL_OK);
    ck_assert_int_eq(keel_buf_adds(&buf, "def"), KEEL_ETOOBIG);
    ck_assert_str_eq(buf.data, "abc");
    ck_assert_uint_eq(buf.len, 3);
    ck_assert_int_eq(keel_buf_addf(&buf, "%d", 1234), KEEL_ETOOBIG);
    ck_assert_str_eq(buf.data, "abc");
    ck_assert_int_eq(keel_buf_grow(&buf, 3), KEEL_ETOOBIG);
    ck_assert_int_eq(keel_buf_grow(&buf, SIZE_MAX), KEEL_ETOOBIG);
    {   /* volatile: a constant bound would make gcc warn about the memcpy it never reaches */
        volatile size_t huge = SIZE_MAX - 1;
        ck_assert_int_eq(keel_buf_add(&buf, "xyz", huge), KEEL_ETOOBIG);
    }
    ck_assert_str_eq(buf.data, "abc");

    /* Exactly up to the cap is allowed, one more byte is not. */
    ck_assert_int_eq(keel_buf_adds(&buf, "de"), KEEL_OK);
    ck_assert_str_eq(buf.data, "abcde");
    ck_assert_int_eq(keel_buf_addc(&buf, 'f'), KEEL_ETOOBIG);
    ck_assert_str_eq(buf.data, "abcde");
    ck_assert_uint_eq(buf.len, 5);
    assert_terminated(&buf);
    keel_buf_release(&buf);
}
END_TEST

START_TEST(test_buf_truncate_reset)
{
    struct keel_buf buf;
    size_t cap;

    keel_buf_init(&buf, 0);
    keel_buf_adds(&buf, "keel policy");
    keel_buf_truncate(&buf, 100);  /* longer: no-op */
    ck_assert_str_eq(buf.data, "keel policy");
    keel_buf_truncate(&buf, 4);
    ck_assert_str_eq(buf.data, "keel");
    ck_assert_uint_eq(buf.len, 4);
    assert_terminated(&buf);

    cap = buf.cap;
    keel_buf_reset(&buf);
    ck_assert_uint_eq(buf.len, 0);
    ck_assert_uint_eq(buf.cap, cap);
    ck_assert_str_eq(buf.data, "");
    keel_buf_release(&buf);

    /* Reset and truncate on a never-used buffer are harmless. */
    keel_buf_init(&buf, 0);
    keel_buf_reset(&buf);
    keel_buf_truncate(&buf, 0);
    assert_terminated(&buf);
    ck_assert_uint_eq(buf.cap, 0);
}
END_TEST

START_TEST(test_buf_detach)
{
    struct keel_buf buf;
    size_t len = 99;
    char *data;

    keel_buf_init(&buf, 0);
    keel_buf_adds(&buf, "owned");
    data = keel_buf_detach(&buf, &len);
    ck_assert_str_eq(data, "owned");
    ck_assert_uint_eq(len, 5);
    ck_assert_uint_eq(buf.len, 0);
    ck_assert_uint_eq(buf.cap, 0);
    assert_terminated(&buf);
    keel_free(data);

    /* An empty buffer detaches into a fresh "" the caller frees. */
    data = keel_buf_detach(&buf, &len);
    ck_assert_ptr_nonnull(data);
    ck_assert_str_eq(data, "");
    ck_assert_uint_eq(len, 0);
    keel_free(data);

    keel_alloc_fail_after(0, 0);
    ck_assert_ptr_null(keel_buf_detach(&buf, NULL));
    keel_buf_release(&buf);
}
END_TEST

START_TEST(test_buf_enomem_leaves_buffer)
{
    struct keel_buf buf;
    char big[200];
    size_t cap;

    /* First allocation of an empty buffer fails. */
    keel_buf_init(&buf, 0);
    keel_alloc_fail_after(0, 0);
    ck_assert_int_eq(keel_buf_adds(&buf, "x"), KEEL_ENOMEM);
    ck_assert_uint_eq(buf.len, 0);
    ck_assert_uint_eq(buf.cap, 0);
    ck_assert_str_eq(buf.data, "");

    /* A growing realloc fails: contents and cap unchanged. */
    ck_assert_int_eq(keel_buf_adds(&buf, "hello"), KEEL_OK);
    cap = buf.cap;
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    keel_alloc_fail_after(0, 1);
    ck_assert_int_eq(keel_buf_adds(&buf, big), KEEL_ENOMEM);
    ck_assert_int_eq(keel_buf_addf(&buf, "%s%s", big, big), KEEL_ENOMEM);
    ck_assert_str_eq(buf.data, "hello");
    ck_assert_uint_eq(buf.len, 5);
    ck_assert_uint_eq(buf.cap, cap);
    /* Appends that fit in the current allocation need no memory. */
    ck_assert_int_eq(keel_buf_adds(&buf, " there"), KEEL_OK);
    keel_alloc_fail_after(-1, 0);
    ck_assert_str_eq(buf.data, "hello there");
    ck_assert_int_eq(keel_buf_adds(&buf, big), KEEL_OK);
    ck_assert_uint_eq(buf.len, 11 + 199);
    assert_terminated(&buf);
    keel_buf_release(&buf);
}
END_TEST

/* ---- arena ------------------------------------------------------------- */

START_TEST(test_arena_alignment_and_zero)
{
    struct keel_arena arena;
    long before = keel_alloc_live();
    const size_t sizes[] = {1, 3, 16, 17, 0, 31, 100, 5000, 7};

    keel_arena_init(&arena, 256, 0);
    ck_assert_uint_eq(arena.max, (size_t)64 << 20);
    ck_assert_int_eq(keel_alloc_live(), before);  /* nothing yet */
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        unsigned char *p = keel_arena_alloc(&arena, sizes[i]);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 16, 0);
        for (size_t k = 0; k < sizes[i]; k++)
            ck_assert_int_eq(p[k], 0);
        memset(p, 0xab, sizes[i]);
    }
    char *s = keel_arena_strdup(&arena, "arena string");
    char *t = keel_arena_strndup(&arena, "truncated", 5);
    ck_assert_str_eq(s, "arena string");
    ck_assert_str_eq(t, "trunc");
    ck_assert_uint_eq((uintptr_t)t % 16, 0);
    keel_arena_release(&arena);
    ck_assert_int_eq(keel_alloc_live(), before);
}
END_TEST

START_TEST(test_arena_cap)
{
    struct keel_arena arena;

    keel_arena_init(&arena, 64, 256);
    ck_assert_ptr_null(keel_arena_alloc(&arena, 257));
    ck_assert_ptr_nonnull(keel_arena_alloc(&arena, 200));   /* 208 used */
    ck_assert_uint_eq(arena.used, 208);
    ck_assert_ptr_null(keel_arena_alloc(&arena, 64));       /* would be 272 */
    ck_assert_ptr_nonnull(keel_arena_alloc(&arena, 48));    /* exactly 256 */
    ck_assert_uint_eq(arena.used, 256);
    ck_assert_ptr_null(keel_arena_alloc(&arena, 1));
    ck_assert_ptr_null(keel_arena_strdup(&arena, ""));
    ck_assert_ptr_null(keel_arena_alloc(&arena, SIZE_MAX));
    ck_assert_ptr_null(keel_arena_strndup(&arena, "x", SIZE_MAX));
    /* A reset gives the whole budget back. */
    keel_arena_reset(&arena);
    ck_assert_uint_eq(arena.used, 0);
    ck_assert_ptr_nonnull(keel_arena_alloc(&arena, 256));
    keel_arena_release(&arena);
}
END_TEST

START_TEST(test_arena_reset_release)
{
    struct keel_arena arena;
    long before = keel_alloc_live();
    char *p;

    keel_arena_init(&arena, 64, 0);
    for (int i = 0; i < 20; i++)
        ck_assert_ptr_nonnull(keel_arena_alloc(&arena, 48));
    ck_assert_int_gt(keel_alloc_live(), before + 1);
    keel_arena_reset(&arena);
    ck_assert_int_eq(keel_alloc_live(), before + 1);  /* newest chunk kept */
    ck_assert_uint_eq(arena.used, 0);
    p = keel_arena_alloc(&arena, 16);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(keel_alloc_live(), before + 1);  /* reused, not new */
    keel_arena_release(&arena);
    ck_assert_int_eq(keel_alloc_live(), before);
    ck_assert_ptr_null(arena.head);
    /* Usable again after release; reset/release of an empty arena are no-ops. */
    ck_assert_ptr_nonnull(keel_arena_strdup(&arena, "again"));
    keel_arena_release(&arena);
    keel_arena_reset(&arena);
    keel_arena_release(&arena);
    ck_assert_int_eq(keel_alloc_live(), before);

    /* Out of memory: NULL, and the arena stays consistent. */
    keel_arena_init(&arena, 64, 0);
    keel_alloc_fail_after(0, 0);
    ck_assert_ptr_null(keel_arena_alloc(&arena, 8));
    ck_assert_uint_eq(arena.used, 0);
    ck_assert_ptr_nonnull(keel_arena_alloc(&arena, 8));
    ck_assert_uint_eq(arena.used, 16);
    keel_arena_release(&arena);
}
END_TEST

/* ---- json helpers ------------------------------------------------------ */

START_TEST(test_json_parse)
{
    const char text[] = "{\"a\": 1, \"b\": [true, null]}";
    struct keel_error err;
    json_t *value = NULL, *sentinel = (json_t *)&err;

    ck_assert_int_eq(keel_json_parse(text, strlen(text), 1024, "body", &value, &err), KEEL_OK);
    ck_assert(json_is_object(value));
    ck_assert_int_eq(json_integer_value(json_object_get(value, "a")), 1);
    json_decref(value);

    /* Over the cap: rejected before parsing, output untouched. */
    value = sentinel;
    ck_assert_int_eq(keel_json_parse(text, strlen(text), 10, "request body", &value, &err),
                     KEEL_ETOOBIG);
    ck_assert_ptr_eq(value, sentinel);
    ck_assert_str_eq(err.field, "request body");
    ck_assert_ptr_nonnull(strstr(err.message, "limit of 10 bytes"));
    /* Exactly at the cap is fine. */
    ck_assert_int_eq(keel_json_parse(text, strlen(text), strlen(text), "b", &value, &err), KEEL_OK);
    json_decref(value);
}
END_TEST

START_TEST(test_json_parse_errors)
{
    const char bad_line3[] = "{\n  \"a\": 1,\n  \"b\" 2\n}";
    const char dup[] = "{\"a\": 1, \"a\": 2}";
    const char trailing[] = "{\"a\": 1} x";
    struct keel_error err;
    json_t *value = NULL;

    ck_assert_int_eq(keel_json_parse(bad_line3, strlen(bad_line3), 1024, "fixture.json", &value,
                                     &err), KEEL_EPARSE);
    ck_assert_ptr_null(value);
    ck_assert_int_eq(err.code, KEEL_EPARSE);
    ck_assert_str_eq(err.field, "fixture.json");
    ck_assert_msg(strstr(err.message, "line 3") != NULL, "message: %s", err.message);

    ck_assert_int_eq(keel_json_parse(dup, strlen(dup), 1024, "d", &value, &err), KEEL_EPARSE);
    ck_assert_msg(strstr(err.message, "duplicate") != NULL, "message: %s", err.message);
    ck_assert_int_eq(keel_json_parse(trailing, strlen(trailing), 1024, "t", &value, &err),
                     KEEL_EPARSE);
    ck_assert_int_eq(keel_json_parse("", 0, 1024, "e", &value, &err), KEEL_EPARSE);
    /* Only the first n bytes are read. */
    ck_assert_int_eq(keel_json_parse(trailing, 8, 1024, "t", &value, &err), KEEL_OK);
    json_decref(value);
}
END_TEST

START_TEST(test_json_parse_enomem)
{
    const char text[] = "{\"key\": [1, 2.5, \"three\", {\"nested\": \"value\"}], \"b\": null}";
    struct keel_error err;
    json_t *value = NULL;
    long before = keel_alloc_live();
    int rc;

    keel_alloc_fail_after(0, 1);
    rc = keel_json_parse(text, strlen(text), 1024, "body", &value, &err);
    keel_alloc_fail_after(-1, 0);
    ck_assert_int_eq(rc, KEEL_ENOMEM);
    ck_assert_ptr_null(value);
    ck_assert_str_eq(err.field, "body");

    /* Fail each allocation in turn: never a crash or a leak, and a failure
     * returns nothing. (jansson reports some allocation failures inside
     * its lexer as syntax errors, so a parse error is possible too.) */
    for (long n = 0;; n++) {
        keel_alloc_fail_after(n, 0);
        rc = keel_json_parse(text, strlen(text), 1024, "body", &value, &err);
        keel_alloc_fail_after(-1, 0);
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM || rc == KEEL_EPARSE,
                      "allocation %ld failing gave %s: %s", n, keel_strerror(rc), err.message);
        if (rc == KEEL_OK)
            break;
        ck_assert_ptr_null(value);
        ck_assert_int_eq(err.code, rc);
        ck_assert_int_eq(keel_alloc_live(), before);
    }
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(
                         json_object_get(value, "key"), 3), "nested")), "value");
    json_decref(value);
}
END_TEST

START_TEST(test_json_paths)
{
    char out[KEEL_JSON_PATH_MAX], tiny[6];

    keel_json_path_key(out, sizeof(out), "turns[0]", "expect");
    ck_assert_str_eq(out, "turns[0].expect");
    keel_json_path_key(out, sizeof(out), "", "name");
    ck_assert_str_eq(out, "name");
    keel_json_path_key(out, sizeof(out), NULL, "name");
    ck_assert_str_eq(out, "name");
    keel_json_path_index(out, sizeof(out), "turns", 12);
    ck_assert_str_eq(out, "turns[12]");
    keel_json_path_index(out, sizeof(out), NULL, 3);
    ck_assert_str_eq(out, "[3]");
    keel_json_path_key(tiny, sizeof(tiny), "search", "count");
    ck_assert_str_eq(tiny, "searc");
}
END_TEST

START_TEST(test_json_check_keys)
{
    static const char *const allowed[] = {"name", "pack", "turns", NULL};
    json_t *ok = json_pack("{s:s, s:s}", "name", "a", "turns", "x");
    json_t *bad = json_pack("{s:s, s:i}", "name", "a", "trns", 1);
    struct keel_error err;

    ck_assert_int_eq(keel_json_check_keys(ok, allowed, "", &err), KEEL_OK);
    ck_assert_int_eq(keel_json_check_keys(bad, allowed, "cases[2]", &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "cases[2].trns");
    ck_assert_ptr_nonnull(strstr(err.message, "\"trns\""));
    ck_assert_int_eq(keel_json_check_keys(bad, allowed, "", &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "trns");
    json_decref(ok);
    json_decref(bad);
}
END_TEST

START_TEST(test_json_get_string)
{
    json_t *obj = json_pack("{s:s, s:i, s:n}", "user", "hello", "count", 3, "hint", NULL);
    struct keel_error err;
    const char *out = "preset";

    ck_assert_int_eq(keel_json_get_string(obj, "user", 1, "turns[0]", &out, &err), KEEL_OK);
    ck_assert_str_eq(out, "hello");
    ck_assert_ptr_eq(out, json_string_value(json_object_get(obj, "user")));  /* borrowed */

    out = "preset";
    ck_assert_int_eq(keel_json_get_string(obj, "missing", 0, "turns[0]", &out, &err), KEEL_OK);
    ck_assert_str_eq(out, "preset");
    ck_assert_int_eq(keel_json_get_string(obj, "missing", 1, "turns[0]", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "turns[0].missing");
    ck_assert_str_eq(err.message, "is required");
    ck_assert_str_eq(out, "preset");

    ck_assert_int_eq(keel_json_get_string(obj, "count", 0, "turns[0]", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "turns[0].count");
    ck_assert_str_eq(err.message, "must be a string, not integer");
    ck_assert_int_eq(keel_json_get_string(obj, "hint", 0, "", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "hint");
    ck_assert_str_eq(err.message, "must be a string, not null");
    ck_assert_str_eq(out, "preset");
    json_decref(obj);
}
END_TEST

START_TEST(test_json_get_int)
{
    json_t *obj = json_pack("{s:i, s:f, s:s, s:I}", "count", 50, "ratio", 0.5, "text", "7",
                            "huge", (json_int_t)1 << 40);
    struct keel_error err;
    long long out = -1;

    ck_assert_int_eq(keel_json_get_int(obj, "count", 1, 1, 50, "search", &out, &err), KEEL_OK);
    ck_assert_int_eq(out, 50);
    out = -1;
    ck_assert_int_eq(keel_json_get_int(obj, "count", 1, 50, 50, "search", &out, &err), KEEL_OK);
    ck_assert_int_eq(out, 50);

    out = -1;
    ck_assert_int_eq(keel_json_get_int(obj, "count", 1, 1, 49, "search", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "search.count");
    ck_assert_str_eq(err.message, "must be between 1 and 49, got 50");
    ck_assert_int_eq(out, -1);
    ck_assert_int_eq(keel_json_get_int(obj, "count", 1, 51, 100, "search", &out, &err),
                     KEEL_EINVAL);
    ck_assert_int_eq(keel_json_get_int(obj, "huge", 1, 0, 1000000, "", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "huge");

    ck_assert_int_eq(keel_json_get_int(obj, "ratio", 0, 0, 10, "search", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "search.ratio");
    ck_assert_str_eq(err.message, "must be an integer, not number");
    ck_assert_int_eq(keel_json_get_int(obj, "text", 0, 0, 10, "search", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.message, "must be an integer, not string");
    ck_assert_int_eq(keel_json_get_int(obj, "absent", 0, 0, 10, "search", &out, &err), KEEL_OK);
    ck_assert_int_eq(out, -1);
    ck_assert_int_eq(keel_json_get_int(obj, "absent", 1, 0, 10, "search", &out, &err),
                     KEEL_EINVAL);
    ck_assert_str_eq(err.field, "search.absent");
    json_decref(obj);
}
END_TEST

START_TEST(test_json_get_bool)
{
    json_t *obj = json_pack("{s:b, s:b, s:i}", "yes", 1, "no", 0, "num", 1);
    struct keel_error err;
    int out = 7;

    ck_assert_int_eq(keel_json_get_bool(obj, "yes", 1, "s", &out, &err), KEEL_OK);
    ck_assert_int_eq(out, 1);
    ck_assert_int_eq(keel_json_get_bool(obj, "no", 1, "s", &out, &err), KEEL_OK);
    ck_assert_int_eq(out, 0);
    out = 7;
    ck_assert_int_eq(keel_json_get_bool(obj, "num", 1, "s", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "s.num");
    ck_assert_str_eq(err.message, "must be true or false, not integer");
    ck_assert_int_eq(out, 7);
    ck_assert_int_eq(keel_json_get_bool(obj, "gone", 0, "s", &out, &err), KEEL_OK);
    ck_assert_int_eq(out, 7);
    ck_assert_int_eq(keel_json_get_bool(obj, "gone", 1, "s", &out, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "s.gone");
    json_decref(obj);
}
END_TEST

/* keel_json_set_text: a string, null for NULL, refused when not UTF-8
 * (the object unchanged), and out of memory reported; keel_json_text
 * the same as a value. */
START_TEST(test_json_set_text)
{
    json_t *o = json_object();
    char long_text[100];

    memset(long_text, 'a', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    ck_assert_int_eq(keel_json_set_text(o, "a", "caf\xc3\xa9"), KEEL_OK);
    ck_assert_str_eq(json_string_value(json_object_get(o, "a")), "caf\xc3\xa9");
    ck_assert_int_eq(keel_json_set_text(o, "b", NULL), KEEL_OK);
    ck_assert(json_is_null(json_object_get(o, "b")));
    ck_assert_int_eq(keel_json_set_text(o, "c", long_text), KEEL_OK);
    ck_assert_uint_eq(json_string_length(json_object_get(o, "c")), 99);
    long_text[40] = (char)0xff;
    ck_assert_int_eq(keel_json_set_text(o, "a", long_text), KEEL_EINVAL);
    ck_assert_int_eq(keel_json_set_text(o, "d", "\xed\xa0\x80"), KEEL_EINVAL);
    ck_assert_str_eq(json_string_value(json_object_get(o, "a")), "caf\xc3\xa9");
    ck_assert_ptr_null(json_object_get(o, "d"));
    keel_alloc_fail_after(0, 0);
    ck_assert_int_eq(keel_json_set_text(o, "e", "text"), KEEL_ENOMEM);
    ck_assert_ptr_null(json_object_get(o, "e"));
    ck_assert_uint_eq(json_object_size(o), 3);
    json_decref(o);
    /* keel_json_text: the same check, as a value */
    o = keel_json_text("caf\xc3\xa9");
    ck_assert_str_eq(json_string_value(o), "caf\xc3\xa9");
    json_decref(o);
    ck_assert_ptr_null(keel_json_text(long_text));
    ck_assert_ptr_null(keel_json_text("\xed\xa0\x80"));
}
END_TEST

START_TEST(test_json_type_names_and_append)
{
    json_t *obj = json_pack("{s:i, s:[b, n], s:f, s:s}", "b", 1, "a", 1, "c", 1.5, "d", "x");
    struct keel_buf buf;

    ck_assert_str_eq(keel_json_type_name(obj), "object");
    ck_assert_str_eq(keel_json_type_name(json_object_get(obj, "a")), "array");
    ck_assert_str_eq(keel_json_type_name(json_object_get(obj, "b")), "integer");
    ck_assert_str_eq(keel_json_type_name(json_object_get(obj, "c")), "number");
    ck_assert_str_eq(keel_json_type_name(json_object_get(obj, "d")), "string");
    ck_assert_str_eq(keel_json_type_name(json_true()), "boolean");
    ck_assert_str_eq(keel_json_type_name(json_false()), "boolean");
    ck_assert_str_eq(keel_json_type_name(json_null()), "null");
    ck_assert_str_eq(keel_json_type_name(NULL), "null");

    keel_buf_init(&buf, 0);
    keel_buf_adds(&buf, "> ");
    ck_assert_int_eq(keel_json_append(&buf, obj, JSON_COMPACT), KEEL_OK);
    ck_assert_str_eq(buf.data, "> {\"a\":[true,null],\"b\":1,\"c\":1.5,\"d\":\"x\"}");
    keel_buf_release(&buf);

    /* A scalar is allowed too. */
    keel_buf_init(&buf, 0);
    ck_assert_int_eq(keel_json_append(&buf, json_object_get(obj, "d"), 0), KEEL_OK);
    ck_assert_str_eq(buf.data, "\"x\"");
    keel_buf_release(&buf);

    /* A buffer too small to take it: failure, contents unchanged. */
    keel_buf_init(&buf, 12);
    keel_buf_adds(&buf, "keep");
    ck_assert_int_ne(keel_json_append(&buf, obj, JSON_COMPACT), KEEL_OK);
    ck_assert_str_eq(buf.data, "keep");
    ck_assert_uint_eq(buf.len, 4);
    keel_buf_release(&buf);
    json_decref(obj);
}
END_TEST

/* ---- log --------------------------------------------------------------- */

/* Splits the memstream text into lines and parses each as JSON. */
static size_t parse_log_lines(const char *text, size_t len, json_t **records, size_t max)
{
    size_t n = 0, start = 0;

    for (size_t i = 0; i < len && n < max; i++) {
        if (text[i] != '\n')
            continue;
        records[n] = json_loadb(text + start, i - start, 0, NULL);
        ck_assert_msg(records[n] != NULL, "log line is not JSON: %.*s", (int)(i - start),
                      text + start);
        n++;
        start = i + 1;
    }
    ck_assert_uint_eq(start, len);  /* every record ends with a newline */
    return n;
}

START_TEST(test_log_json_lines)
{
    char *text = NULL;
    size_t len = 0, n;
    json_t *records[4];
    FILE *stream = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(stream);
    keel_clock_pin(NOW_MS);
    keel_log_set_stream(stream);
    keel_log_set_level(KEEL_LOG_INFO);
    keel_log(KEEL_LOG_INFO, "turn_done", json_pack("{s:s, s:i}", "turn", "t_1", "ms", 3));
    keel_log(KEEL_LOG_DEBUG, "dropped", json_pack("{s:i}", "x", 1));
    keel_log(KEEL_LOG_ERROR, "boom", NULL);
    /* Record fields cannot overwrite ts/level/event. */
    keel_log(KEEL_LOG_WARN, "real", json_pack("{s:s, s:s}", "event", "fake", "level", "debug"));
    keel_log_set_stream(NULL);
    fclose(stream);

    n = parse_log_lines(text, len, records, 4);
    free(text);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(json_string_value(json_object_get(records[0], "ts")),
                     "2026-02-07T12:00:00.000Z");
    ck_assert_str_eq(json_string_value(json_object_get(records[0], "level")), "info");
    ck_assert_str_eq(json_string_value(json_object_get(records[0], "event")), "turn_done");
    ck_assert_str_eq(json_string_value(json_object_get(records[0], "turn")), "t_1");
    ck_assert_int_eq(json_integer_value(json_object_get(records[0], "ms")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(records[1], "level")), "error");
    ck_assert_str_eq(json_string_value(json_object_get(records[1], "event")), "boom");
    ck_assert_uint_eq(json_object_size(records[1]), 3);
    ck_assert_str_eq(json_string_value(json_object_get(records[2], "event")), "real");
    ck_assert_str_eq(json_string_value(json_object_get(records[2], "level")), "warn");
    for (size_t i = 0; i < n; i++)
        json_decref(records[i]);
}
END_TEST

START_TEST(test_log_levels)
{
    char *text = NULL;
    size_t len = 0;
    json_t *records[8];
    FILE *stream = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(stream);
    keel_clock_pin(NOW_MS);
    keel_log_set_stream(stream);

    keel_log_set_level(KEEL_LOG_WARN);
    ck_assert(!keel_log_enabled(KEEL_LOG_DEBUG));
    ck_assert(!keel_log_enabled(KEEL_LOG_INFO));
    ck_assert(keel_log_enabled(KEEL_LOG_WARN));
    ck_assert(keel_log_enabled(KEEL_LOG_ERROR));
    keel_log(KEEL_LOG_INFO, "quiet", json_object());
    keel_log(KEEL_LOG_WARN, "loud", NULL);

    setenv("KEEL_LOG_LEVEL", "debug", 1);
    keel_log_init();
    ck_assert(keel_log_enabled(KEEL_LOG_DEBUG));
    keel_log(KEEL_LOG_DEBUG, "chatty", NULL);

    setenv("KEEL_LOG_LEVEL", "shouting", 1);  /* unknown: level unchanged */
    keel_log_init();
    ck_assert(keel_log_enabled(KEEL_LOG_DEBUG));
    setenv("KEEL_LOG_LEVEL", "error", 1);
    keel_log_init();
    ck_assert(!keel_log_enabled(KEEL_LOG_WARN));
    keel_log(KEEL_LOG_WARN, "muted", NULL);
    /* Not an object: ignored, still freed. */
    keel_log_set_level(KEEL_LOG_DEBUG);
    keel_log(KEEL_LOG_INFO, "odd", json_string("not an object"));
    keel_log_set_stream(NULL);
    fclose(stream);

    size_t n = parse_log_lines(text, len, records, 8);
    free(text);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(json_string_value(json_object_get(records[0], "event")), "loud");
    ck_assert_str_eq(json_string_value(json_object_get(records[1], "event")), "chatty");
    ck_assert_str_eq(json_string_value(json_object_get(records[1], "level")), "debug");
    ck_assert_str_eq(json_string_value(json_object_get(records[2], "event")), "odd");
    for (size_t i = 0; i < n; i++)
        json_decref(records[i]);
}
END_TEST

START_TEST(test_log_drops_on_enomem)
{
    char *text = NULL;
    size_t len = 0;
    FILE *stream = open_memstream(&text, &len);

    keel_log_set_stream(stream);
    keel_log_set_level(KEEL_LOG_DEBUG);
    keel_alloc_fail_after(0, 1);
    keel_log(KEEL_LOG_ERROR, "lost", NULL);
    keel_alloc_fail_after(-1, 0);
    keel_log_set_stream(NULL);
    fclose(stream);
    ck_assert_uint_eq(len, 0);
    free(text);
}
END_TEST

/* ---- ids --------------------------------------------------------------- */

static int64_t decode_id_time(const char *body)
{
    static const char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    int64_t ms = 0;

    for (int i = 0; i < 10; i++)
        ms = ms * 32 + (strchr(crockford, body[i]) - crockford);
    return ms;
}

START_TEST(test_id_format)
{
    char id[KEEL_ID_MAX], later[KEEL_ID_MAX];

    keel_clock_pin(NOW_MS);
    keel_id_seed(1);
    ck_assert_ptr_eq(keel_id_new("turn", id, sizeof(id)), id);
    ck_assert_uint_eq(strlen(id), 4 + 1 + 26);
    ck_assert_mem_eq(id, "turn_", 5);
    for (const char *p = id + 5; *p; p++)
        ck_assert_msg(strchr("0123456789ABCDEFGHJKMNPQRSTVWXYZ", *p) != NULL, "bad char %c", *p);
    ck_assert_int_eq(decode_id_time(id + 5), NOW_MS);
    ck_assert(keel_id_valid(id, "turn"));
    ck_assert(!keel_id_valid(id, "conv"));
    ck_assert(!keel_id_valid(id, "tur"));
    ck_assert(!keel_id_valid(id, "turn_"));

    /* Ids sort by time. */
    keel_clock_pin(NOW_MS + 1);
    keel_id_new("turn", later, sizeof(later));
    ck_assert_int_lt(strcmp(id, later), 0);

    /* A long prefix is cut to 16 bytes. */
    keel_id_new("abcdefghijklmnopqrstuvwxyz", id, sizeof(id));
    ck_assert_uint_eq(strlen(id), 16 + 1 + 26);
    ck_assert_mem_eq(id, "abcdefghijklmnop_", 17);
    ck_assert(keel_id_valid(id, "abcdefghijklmnop"));
}
END_TEST

START_TEST(test_id_valid_rejects)
{
    char id[KEEL_ID_MAX], bad[KEEL_ID_MAX + 2];

    keel_clock_pin(NOW_MS);
    keel_id_new("run", id, sizeof(id));
    ck_assert(keel_id_valid(id, "run"));

    snprintf(bad, sizeof(bad), "%sA", id);          /* 27 characters */
    ck_assert(!keel_id_valid(bad, "run"));
    snprintf(bad, sizeof(bad), "%.29s", id);        /* 25 characters */
    ck_assert(!keel_id_valid(bad, "run"));
    for (const char *c = "ILOUa!_-"; *c; c++) {     /* not Crockford base 32 */
        snprintf(bad, sizeof(bad), "%s", id);
        bad[20] = *c;
        ck_assert_msg(!keel_id_valid(bad, "run"), "accepted %s", bad);
    }
    snprintf(bad, sizeof(bad), "%s", id);
    bad[3] = '-';
    ck_assert(!keel_id_valid(bad, "run"));
    ck_assert(!keel_id_valid("run", "run"));
    ck_assert(!keel_id_valid("run_", "run"));
    ck_assert(!keel_id_valid("", "run"));
}
END_TEST

START_TEST(test_id_deterministic)
{
    char a1[KEEL_ID_MAX], a2[KEEL_ID_MAX], b1[KEEL_ID_MAX], b2[KEEL_ID_MAX], c1[KEEL_ID_MAX];

    keel_clock_pin(NOW_MS);
    keel_id_seed(42);
    keel_id_new("run", a1, sizeof(a1));
    keel_id_new("run", a2, sizeof(a2));
    ck_assert_str_ne(a1, a2);
    keel_id_seed(42);
    keel_id_new("run", b1, sizeof(b1));
    keel_id_new("run", b2, sizeof(b2));
    ck_assert_str_eq(a1, b1);
    ck_assert_str_eq(a2, b2);
    keel_id_seed(43);
    keel_id_new("run", c1, sizeof(c1));
    ck_assert_str_ne(a1, c1);
    /* Same time part, different random part. */
    ck_assert_mem_eq(a1, c1, 4 + 10);

    /* KEEL_SEED seeds like keel_id_seed. */
    setenv("KEEL_SEED", "42", 1);
    keel_id_init();
    keel_id_new("run", b1, sizeof(b1));
    ck_assert_str_eq(a1, b1);
}
END_TEST

START_TEST(test_id_small_output)
{
    char small[8];

    keel_clock_pin(NOW_MS);
    keel_id_new("turn", small, sizeof(small));
    ck_assert_str_eq(small, "turn_01");
}
END_TEST

/* ---- files ------------------------------------------------------------- */

struct temp_dir {
    char path[64];
};

static void temp_dir_make(struct temp_dir *dir)
{
    snprintf(dir->path, sizeof(dir->path), "/tmp/keel-unit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir->path));
}

static void temp_write(const struct temp_dir *dir, const char *name, const char *text,
                       size_t n, char *path, size_t path_n)
{
    FILE *f;

    snprintf(path, path_n, "%s/%s", dir->path, name);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, n, f), n);
    fclose(f);
}

START_TEST(test_file_read)
{
    struct temp_dir dir;
    char path[128], missing[128], sub[128];
    struct keel_buf buf;
    struct keel_error err, err_missing, err_dir, err_big;
    int rc_ok, rc_missing, rc_dir, rc_big, rc_exact;
    char *after_ok, *after_fail;
    size_t exact_len;

    temp_dir_make(&dir);
    temp_write(&dir, "ten.txt", "0123456789", 10, path, sizeof(path));
    snprintf(missing, sizeof(missing), "%s/nope.txt", dir.path);
    snprintf(sub, sizeof(sub), "%s/sub", dir.path);
    mkdir(sub, 0700);

    keel_buf_init(&buf, 0);
    keel_buf_adds(&buf, "head:");
    rc_ok = keel_file_read(path, 100, &buf, &err);
    after_ok = keel_strdup(buf.data);
    rc_big = keel_file_read(path, 9, &buf, &err_big);
    rc_missing = keel_file_read(missing, 100, &buf, &err_missing);
    rc_dir = keel_file_read(sub, 100, &buf, &err_dir);
    after_fail = keel_strdup(buf.data);
    keel_buf_reset(&buf);
    rc_exact = keel_file_read(path, 10, &buf, &err);
    exact_len = buf.len;
    keel_buf_release(&buf);

    unlink(path);
    rmdir(sub);
    rmdir(dir.path);

    ck_assert_int_eq(rc_ok, KEEL_OK);
    ck_assert_str_eq(after_ok, "head:0123456789");
    ck_assert_int_eq(rc_big, KEEL_ETOOBIG);
    ck_assert_str_eq(err_big.field, path);
    ck_assert_int_eq(rc_missing, KEEL_ENOTFOUND);
    ck_assert_str_eq(err_missing.field, missing);
    ck_assert_int_eq(rc_dir, KEEL_EIO);
    ck_assert_str_eq(err_dir.field, sub);
    ck_assert_ptr_nonnull(strstr(err_dir.message, "directory"));
    ck_assert_str_eq(after_fail, "head:0123456789");  /* unchanged by the failures */
    ck_assert_int_eq(rc_exact, KEEL_OK);
    ck_assert_uint_eq(exact_len, 10);
    ck_assert_uint_eq(buf.max, SIZE_MAX / 2);  /* the cap is restored */
    keel_free(after_ok);
    keel_free(after_fail);
}
END_TEST

START_TEST(test_file_read_large_and_buffer_cap)
{
    struct temp_dir dir;
    char path[128];
    static char big[20000];
    struct keel_buf buf;
    struct keel_error err;
    int rc_all, rc_capped;
    size_t len_all, len_capped;

    memset(big, 'k', sizeof(big));
    temp_dir_make(&dir);
    temp_write(&dir, "big.txt", big, sizeof(big), path, sizeof(path));
    keel_buf_init(&buf, 0);
    rc_all = keel_file_read(path, 0, &buf, &err);  /* 0: no extra cap */
    len_all = buf.len;
    keel_buf_release(&buf);
    keel_buf_init(&buf, 15000);                    /* the buffer's own cap applies */
    rc_capped = keel_file_read(path, 0, &buf, &err);
    len_capped = buf.len;
    keel_buf_release(&buf);
    unlink(path);
    rmdir(dir.path);

    ck_assert_int_eq(rc_all, KEEL_OK);
    ck_assert_uint_eq(len_all, sizeof(big));
    ck_assert_int_eq(rc_capped, KEEL_ETOOBIG);
    ck_assert_uint_eq(len_capped, 0);
    ck_assert(keel_is_dir("/tmp"));
    ck_assert(!keel_is_dir(path));
}
END_TEST

Suite *suite_core(void)
{
    Suite *s = suite_create("core");
    TCase *errors = tcase_create("errors"), *alloc = tcase_create("alloc");
    TCase *buf = tcase_create("buf"), *arena = tcase_create("arena");
    TCase *json = tcase_create("json"), *log = tcase_create("log");
    TCase *id = tcase_create("id"), *file = tcase_create("file");

    unit_leak_fixture(errors);
    tcase_add_test(errors, test_strerror_every_code);
    tcase_add_test(errors, test_strerror_out_of_range);
    tcase_add_test(errors, test_error_set_and_clear);
    tcase_add_test(errors, test_error_set_truncates);
    tcase_add_test(errors, test_error_set_keeps_utf8);
    tcase_add_test(errors, test_error_format);
    suite_add_tcase(s, errors);

    unit_leak_fixture(alloc);
    tcase_add_test(alloc, test_alloc_live_count);
    tcase_add_test(alloc, test_alloc_fail_one_shot);
    tcase_add_test(alloc, test_alloc_fail_sticky);
    tcase_add_test(alloc, test_alloc_cache_blocks);
    tcase_add_test(alloc, test_alloc_cache_thread_exit);
    suite_add_tcase(s, alloc);

    unit_leak_fixture(buf);
    tcase_add_test(buf, test_buf_basics);
    tcase_add_test(buf, test_buf_growth_keeps_contents);
    tcase_add_test(buf, test_buf_max_is_too_big);
    tcase_add_test(buf, test_buf_truncate_reset);
    tcase_add_test(buf, test_buf_detach);
    tcase_add_test(buf, test_buf_enomem_leaves_buffer);
    suite_add_tcase(s, buf);

    unit_leak_fixture(arena);
    tcase_add_test(arena, test_arena_alignment_and_zero);
    tcase_add_test(arena, test_arena_cap);
    tcase_add_test(arena, test_arena_reset_release);
    suite_add_tcase(s, arena);

    unit_leak_fixture(json);
    tcase_add_test(json, test_json_parse);
    tcase_add_test(json, test_json_set_text);
    tcase_add_test(json, test_json_parse_errors);
    tcase_add_test(json, test_json_parse_enomem);
    tcase_add_test(json, test_json_paths);
    tcase_add_test(json, test_json_check_keys);
    tcase_add_test(json, test_json_get_string);
    tcase_add_test(json, test_json_get_int);
    tcase_add_test(json, test_json_get_bool);
    tcase_add_test(json, test_json_type_names_and_append);
    suite_add_tcase(s, json);

    unit_leak_fixture(log);
    tcase_add_test(log, test_log_json_lines);
    tcase_add_test(log, test_log_levels);
    tcase_add_test(log, test_log_drops_on_enomem);
    suite_add_tcase(s, log);

    unit_leak_fixture(id);
    tcase_add_test(id, test_id_format);
    tcase_add_test(id, test_id_valid_rejects);
    tcase_add_test(id, test_id_deterministic);
    tcase_add_test(id, test_id_small_output);
    suite_add_tcase(s, id);

    unit_leak_fixture(file);
    tcase_add_test(file, test_file_read);
    tcase_add_test(file, test_file_read_large_and_buffer_cap);
    suite_add_tcase(s, file);
    return s;
}
