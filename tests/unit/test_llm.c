/*
 * test_llm.c — the model port (src/llm/): the SSE parser on every way a
 * stream can be cut into pieces and every line ending, its caps and its
 * callback errors; the settings from defaults, the pack, the environment
 * and the options; the circuit breaker on its own; and llm_chat against
 * the fake HTTP server (tests/fake) speaking OpenAI's chat/completions:
 * streamed text and tool calls, whole replies, retries on 429/5xx, no
 * retry on 4xx, a cut stream, an unfinished stream, replies that are not
 * JSON or carry an error, a timeout, the API key header, the circuit
 * opening, refusing at once and closing again after a probe, and an
 * allocation failure at each step of a call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../fake/fake_http.h"
#include "core/alloc.h"
#include "core/buf.h"
#include "llm/llm.h"
#include "unit.h"

/* ---- the environment: KEEL_LLM_* unset while a test runs, then restored ---- */

static const char *const env_names[] = {"KEEL_LLM_URL", "KEEL_LLM_MODEL", "KEEL_LLM_KEY_ENV",
                                        "KEEL_TEST_LLM_KEY"};
#define ENV_COUNT (sizeof(env_names) / sizeof(env_names[0]))
static char *env_saved[ENV_COUNT];

static void env_setup(void)
{
    for (size_t i = 0; i < ENV_COUNT; i++) {
        const char *v = getenv(env_names[i]);
        env_saved[i] = v ? strdup(v) : NULL;
        unsetenv(env_names[i]);
    }
}

static void env_teardown(void)
{
    for (size_t i = 0; i < ENV_COUNT; i++) {
        if (env_saved[i])
            setenv(env_names[i], env_saved[i], 1);
        else
            unsetenv(env_names[i]);
        free(env_saved[i]);
        env_saved[i] = NULL;
    }
}

/* ---- SSE ------------------------------------------------------------------- */

/* What a parser delivered: "event|data" records, each closed by '\x1e'. */
struct events {
    struct keel_buf log;
    int count;
    const char *stop_on;    /* data that makes the callback fail; NULL: never */
};

static int record_event(void *ctx, const char *event, const char *data, size_t n,
                        struct keel_error *err)
{
    struct events *e = ctx;

    ck_assert_msg(data[n] == '\0', "event data is not NUL-terminated");
    e->count++;
    ck_assert_int_eq(keel_buf_addf(&e->log, "%s|", event), KEEL_OK);
    ck_assert_int_eq(keel_buf_add(&e->log, data, n), KEEL_OK);
    ck_assert_int_eq(keel_buf_addc(&e->log, '\x1e'), KEEL_OK);
    if (e->stop_on && n == strlen(e->stop_on) && !memcmp(data, e->stop_on, n))
        return keel_error_set(err, KEEL_EFAIL, "test", "the callback said stop");
    return KEEL_OK;
}

static void events_init(struct events *e)
{
    memset(e, 0, sizeof(*e));
    keel_buf_init(&e->log, 0);
}

/* Feeds `text` cut at the `n_cuts` positions (ascending) and returns the
 * parser's first error, KEEL_OK when none; `e` gets the events. */
static int feed_cut(struct events *e, const char *text, size_t len, const size_t *cuts,
                    size_t n_cuts, struct keel_error *err)
{
    struct sse_parser p;
    size_t from = 0;
    int rc = KEEL_OK;

    sse_init(&p, record_event, e);
    for (size_t i = 0; i <= n_cuts && !rc; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        rc = sse_feed(&p, text + from, to - from, err);
        from = to;
    }
    sse_release(&p);
    return rc;
}

static int feed_whole(struct events *e, const char *text, struct keel_error *err)
{
    return feed_cut(e, text, strlen(text), NULL, 0, err);
}

/* A stream with every feature: comments, event names, CRLF, CR and LF
 * endings, multi-line data, fields keel ignores, no-colon data. */
static const char mixed_stream[] =
    ": keep-alive\n"
    "data: {\"a\":1}\n\n"
    "event: delta\r\n"
    "data: first\r\n"
    "data:second\r\n"
    "\r\n"
    "id: 7\rretry: 100\rdata: cr only\r\r"
    ": another comment\r\n"
    "data\n\n"
    "unknown: field\n"
    "data:  two spaces\n\n"
    "data: [DONE]\n\n";

static const char mixed_events[] =
    "|{\"a\":1}\x1e"
    "delta|first\nsecond\x1e"
    "|cr only\x1e"
    "|\x1e"
    "| two spaces\x1e"
    "|[DONE]\x1e";

START_TEST(test_sse_events_whole)
{
    struct events e;
    struct keel_error err;

    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, mixed_stream, &err), KEEL_OK);
    ck_assert_int_eq(e.count, 6);
    ck_assert_str_eq(e.log.data, mixed_events);
    keel_buf_release(&e.log);
}
END_TEST

START_TEST(test_sse_any_feed_boundaries)
{
    size_t len = strlen(mixed_stream);
    size_t *cuts = keel_malloc(len * sizeof(*cuts));
    struct keel_error err;
    unsigned seed = 12345;

    ck_assert_ptr_nonnull(cuts);
    /* one byte at a time */
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    {
        struct events e;
        events_init(&e);
        ck_assert_int_eq(feed_cut(&e, mixed_stream, len, cuts, len, &err), KEEL_OK);
        ck_assert_str_eq(e.log.data, mixed_events);
        keel_buf_release(&e.log);
    }
    /* every single cut point, so each CR/LF pair is split once */
    for (size_t at = 0; at <= len; at++) {
        struct events e;
        events_init(&e);
        ck_assert_int_eq(feed_cut(&e, mixed_stream, len, &at, 1, &err), KEEL_OK);
        ck_assert_msg(!strcmp(e.log.data, mixed_events), "cut at %zu gave other events", at);
        keel_buf_release(&e.log);
    }
    /* random sets of cuts (a fixed seed: reproducible) */
    for (int round = 0; round < 200; round++) {
        struct events e;
        size_t n = 0;
        for (size_t i = 1; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 5 == 0)
                cuts[n++] = i;
        }
        events_init(&e);
        ck_assert_int_eq(feed_cut(&e, mixed_stream, len, cuts, n, &err), KEEL_OK);
        ck_assert_msg(!strcmp(e.log.data, mixed_events), "round %d gave other events", round);
        keel_buf_release(&e.log);
    }
    keel_free(cuts);
}
END_TEST

START_TEST(test_sse_crlf_across_feeds)
{
    struct events e;
    struct sse_parser p;
    struct keel_error err;

    /* The LF of a CRLF arrives in the next feed: it ends nothing, so the
     * two data lines stay one event. */
    events_init(&e);
    sse_init(&p, record_event, &e);
    ck_assert_int_eq(sse_feed(&p, "data: x\r", 8, &err), KEEL_OK);
    ck_assert_int_eq(sse_feed(&p, "\ndata: y\r", 9, &err), KEEL_OK);
    ck_assert_int_eq(e.count, 0);
    ck_assert_int_eq(sse_feed(&p, "\n\r", 2, &err), KEEL_OK);
    ck_assert_int_eq(e.count, 1);
    ck_assert_int_eq(sse_feed(&p, "\n", 1, &err), KEEL_OK);   /* that blank line's LF */
    ck_assert_int_eq(sse_feed(&p, "data: z\n", 8, &err), KEEL_OK);
    ck_assert_int_eq(sse_feed(&p, "\n", 1, &err), KEEL_OK);
    sse_release(&p);
    ck_assert_int_eq(e.count, 2);
    ck_assert_str_eq(e.log.data, "|x\ny\x1e|z\x1e");
    keel_buf_release(&e.log);

    /* CR CR LF: a line, a blank line, then an LF that belongs to the CR */
    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, "data: a\r\r\ndata: b\n\n", &err), KEEL_OK);
    ck_assert_str_eq(e.log.data, "|a\x1e|b\x1e");
    keel_buf_release(&e.log);

    /* LF LF after a CRLF is still one blank line, not two events */
    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, "data: a\r\n\ndata: b\r\n\r\n", &err), KEEL_OK);
    ck_assert_int_eq(e.count, 2);
    ck_assert_str_eq(e.log.data, "|a\x1e|b\x1e");
    keel_buf_release(&e.log);
}
END_TEST

START_TEST(test_sse_fields)
{
    struct events e;
    struct keel_error err;

    events_init(&e);
    ck_assert_int_eq(feed_whole(&e,
                                ": only a comment\n\n"          /* a comment is no data */
                                ":data: x\n\n"                  /* nor is this */
                                "id: 1\nretry: 5\n\n"           /* no data: no event */
                                "event: lonely\n\n"             /* a name without data */
                                "data: after\n\n"               /* ... is gone by now */
                                "event: tool\ndata: a\n"
                                "data: b\ndata: c\n\n"
                                "data\ndata\n\n"                /* two empty lines */
                                "data:\n\n",                    /* empty, with a colon */
                                &err),
                     KEEL_OK);
    ck_assert_int_eq(e.count, 4);
    ck_assert_str_eq(e.log.data, "|after\x1etool|a\nb\nc\x1e|\n\x1e|\x1e");
    keel_buf_release(&e.log);

    /* an event name longer than the parser keeps is cut, not overflowed */
    {
        char text[300];
        snprintf(text, sizeof(text), "event: %0200d\ndata: x\n\n", 0);
        events_init(&e);
        ck_assert_int_eq(feed_whole(&e, text, &err), KEEL_OK);
        ck_assert_int_eq(e.count, 1);
        ck_assert_uint_eq(strchr(e.log.data, '|') - e.log.data, 63);
        keel_buf_release(&e.log);
    }
}
END_TEST

/* A line "data: xxx…" of `len` bytes, then `tail`. */
static char *long_line(size_t len, const char *tail)
{
    size_t tail_len = strlen(tail);
    char *text = keel_malloc(len + tail_len + 1);

    ck_assert_ptr_nonnull(text);
    memcpy(text, "data: ", 6);
    memset(text + 6, 'x', len - 6);
    memcpy(text + len, tail, tail_len + 1);
    return text;
}

START_TEST(test_sse_line_cap)
{
    struct events e;
    struct keel_error err;
    char *text;
    size_t cuts[64];

    /* exactly the cap: fine */
    text = long_line(LLM_SSE_LINE_MAX, "\n\n");
    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, text, &err), KEEL_OK);
    ck_assert_int_eq(e.count, 1);
    ck_assert_uint_eq(e.log.len, 1 + (LLM_SSE_LINE_MAX - 6) + 1);
    keel_buf_release(&e.log);
    keel_free(text);

    /* one byte over, whole or in 4 KiB pieces: too big, nothing delivered */
    text = long_line(LLM_SSE_LINE_MAX + 1, "\n\n");
    for (size_t i = 0; i < 64; i++)
        cuts[i] = (i + 1) * 4096 < strlen(text) ? (i + 1) * 4096 : strlen(text);
    for (int pieces = 0; pieces < 2; pieces++) {
        events_init(&e);
        keel_error_clear(&err);
        ck_assert_int_eq(feed_cut(&e, text, strlen(text), cuts, pieces ? 64 : 0, &err),
                         KEEL_ETOOBIG);
        ck_assert_int_eq(err.code, KEEL_ETOOBIG);
        ck_assert_msg(strstr(err.message, "line"), "message: %s", err.message);
        ck_assert_int_eq(e.count, 0);
        keel_buf_release(&e.log);
    }
    keel_free(text);

    /* a comment line is capped too */
    text = long_line(LLM_SSE_LINE_MAX + 10, "\n\n");
    text[0] = ':';
    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, text, &err), KEEL_ETOOBIG);
    keel_buf_release(&e.log);
    keel_free(text);
}
END_TEST

START_TEST(test_sse_data_cap)
{
    enum { LINE = 60000 };
    struct events e;
    struct keel_buf text;
    struct keel_error err;
    char *line = long_line(LINE, "\n");

    /* 4 lines of data (240 KB with their joins): under the cap */
    keel_buf_init(&text, 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(keel_buf_adds(&text, line), KEEL_OK);
    ck_assert_int_eq(keel_buf_adds(&text, "\n"), KEEL_OK);
    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, text.data, &err), KEEL_OK);
    ck_assert_int_eq(e.count, 1);
    ck_assert_uint_eq(e.log.len, 1 + 4 * (LINE - 6) + 3 + 1);
    keel_buf_release(&e.log);

    /* a fifth line takes the event over LLM_SSE_DATA_MAX: every line is
     * under its own cap, the event's data is not */
    keel_buf_truncate(&text, text.len - 1);
    ck_assert_int_eq(keel_buf_adds(&text, line), KEEL_OK);
    ck_assert_int_eq(keel_buf_adds(&text, "\n"), KEEL_OK);
    ck_assert_uint_gt(5 * (LINE - 6), LLM_SSE_DATA_MAX);
    events_init(&e);
    keel_error_clear(&err);
    ck_assert_int_eq(feed_whole(&e, text.data, &err), KEEL_ETOOBIG);
    ck_assert_int_eq(err.code, KEEL_ETOOBIG);
    ck_assert_msg(strstr(err.message, "data"), "message: %s", err.message);
    ck_assert_int_eq(e.count, 0);
    keel_buf_release(&e.log);
    keel_buf_release(&text);
    keel_free(line);
}
END_TEST

START_TEST(test_sse_unfinished_event_dropped)
{
    struct events e;
    struct keel_error err;

    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, "data: one\n\ndata: two\n", &err), KEEL_OK);
    ck_assert_int_eq(e.count, 1);
    ck_assert_str_eq(e.log.data, "|one\x1e");
    keel_buf_release(&e.log);

    events_init(&e);
    ck_assert_int_eq(feed_whole(&e, "data: [DONE]", &err), KEEL_OK);   /* no line end */
    ck_assert_int_eq(e.count, 0);
    keel_buf_release(&e.log);
}
END_TEST

START_TEST(test_sse_callback_error_stops)
{
    struct events e;
    struct keel_error err;

    events_init(&e);
    e.stop_on = "stop";
    keel_error_clear(&err);
    ck_assert_int_eq(feed_whole(&e, "data: 1\n\ndata: stop\n\ndata: 3\n\n", &err), KEEL_EFAIL);
    ck_assert_int_eq(err.code, KEEL_EFAIL);
    ck_assert_str_eq(err.message, "the callback said stop");
    ck_assert_int_eq(e.count, 2);
    ck_assert_str_eq(e.log.data, "|1\x1e|stop\x1e");
    keel_buf_release(&e.log);
}
END_TEST

/* ---- settings ----------------------------------------------------------------- */

static json_t *section(const char *text)
{
    json_error_t jerr;
    json_t *s = json_loads(text, 0, &jerr);

    ck_assert_msg(s != NULL, "bad test JSON: %s", jerr.text);
    return s;
}

START_TEST(test_conf_defaults)
{
    struct llm_conf c;
    struct keel_error err;

    ck_assert_int_eq(llm_conf_load(NULL, NULL, &c, &err), KEEL_OK);
    ck_assert_ptr_null(c.url);
    ck_assert_ptr_null(c.model);
    ck_assert_ptr_null(c.key_env);
    ck_assert_ptr_null(c.system_prompt);
    ck_assert_int_eq(c.timeout_ms, 30000);
    ck_assert_int_eq(c.retries, 2);
    ck_assert_int_eq(c.max_backoff_ms, 4000);
    ck_assert_int_eq(c.breaker_failures, 3);
    ck_assert_int_eq(c.breaker_cooldown_ms, 30000);
    ck_assert_int_eq(c.stream, 1);
    ck_assert_uint_eq(c.max_response_bytes, 1u << 20);
    ck_assert_int_eq(c.history_tokens, 1500);
    llm_conf_release(&c);

    /* an empty section is the defaults too */
    {
        json_t *s = section("{}");
        ck_assert_int_eq(llm_conf_load(s, NULL, &c, &err), KEEL_OK);
        ck_assert_ptr_null(c.url);
        ck_assert_int_eq(c.timeout_ms, 30000);
        llm_conf_release(&c);
        json_decref(s);
    }
}
END_TEST

START_TEST(test_conf_pack_section)
{
    json_t *s = section("{\"url\": \"http://127.0.0.1:11434/v1//\", \"model\": \"qwen\","
                        " \"key_env\": \"MY_KEY\", \"system_prompt\": \"Be brief.\","
                        " \"timeout_ms\": 1234, \"retries\": 5, \"max_backoff_ms\": 77,"
                        " \"breaker_failures\": 9, \"breaker_cooldown_ms\": 4321,"
                        " \"stream\": false, \"max_response_bytes\": 8192,"
                        " \"history_tokens\": 42}");
    struct llm_conf c;
    struct keel_error err;

    ck_assert_int_eq(llm_conf_load(s, NULL, &c, &err), KEEL_OK);
    ck_assert_str_eq(c.url, "http://127.0.0.1:11434/v1");   /* trailing slashes dropped */
    ck_assert_str_eq(c.model, "qwen");
    ck_assert_str_eq(c.key_env, "MY_KEY");
    ck_assert_str_eq(c.system_prompt, "Be brief.");
    ck_assert_int_eq(c.timeout_ms, 1234);
    ck_assert_int_eq(c.retries, 5);
    ck_assert_int_eq(c.max_backoff_ms, 77);
    ck_assert_int_eq(c.breaker_failures, 9);
    ck_assert_int_eq(c.breaker_cooldown_ms, 4321);
    ck_assert_int_eq(c.stream, 0);
    ck_assert_uint_eq(c.max_response_bytes, 8192);
    ck_assert_int_eq(c.history_tokens, 42);
    llm_conf_release(&c);
    ck_assert_ptr_null(c.url);
    json_decref(s);
}
END_TEST

/* Loads `text` as the section and expects KEEL_EINVAL naming `field`. */
static void assert_conf_error(const char *text, const struct llm_options *opt, const char *field)
{
    json_t *s = text ? section(text) : NULL;
    struct llm_conf c;
    struct keel_error err;

    keel_error_clear(&err);
    ck_assert_int_eq(llm_conf_load(s, opt, &c, &err), KEEL_EINVAL);
    ck_assert_int_eq(err.code, KEEL_EINVAL);
    ck_assert_msg(!strcmp(err.field, field), "for %s: field \"%s\", wanted \"%s\" (%s)",
                  text ? text : "(no section)", err.field, field, err.message);
    /* released on error */
    ck_assert_ptr_null(c.url);
    ck_assert_ptr_null(c.model);
    ck_assert_ptr_null(c.key_env);
    json_decref(s);
}

START_TEST(test_conf_errors_name_the_field)
{
    struct keel_error err;
    struct llm_conf c;
    json_t *s;

    assert_conf_error("{\"url\": \"http://h/v1\", \"model\": \"m\", \"modle\": \"x\"}", NULL,
                      "llm.modle");
    s = section("{\"temperature\": 0.2}");
    ck_assert_int_eq(llm_conf_load(s, NULL, &c, &err), KEEL_EINVAL);
    ck_assert_msg(strstr(err.message, "temperature"), "message: %s", err.message);
    json_decref(s);

    assert_conf_error("{\"timeout_ms\": 5}", NULL, "llm.timeout_ms");
    assert_conf_error("{\"retries\": 11}", NULL, "llm.retries");
    assert_conf_error("{\"breaker_failures\": 0}", NULL, "llm.breaker_failures");
    assert_conf_error("{\"stream\": \"yes\"}", NULL, "llm.stream");
    assert_conf_error("{\"model\": 3}", NULL, "llm.model");
    assert_conf_error("{\"max_response_bytes\": 100}", NULL, "llm.max_response_bytes");
    assert_conf_error("[1, 2]", NULL, "llm");
    assert_conf_error("{\"key_env\": \"NOT-A-NAME\"}", NULL, "llm.key_env");
}
END_TEST

START_TEST(test_conf_url_needs_model)
{
    struct llm_options opt = {"http://127.0.0.1:9/v1", NULL, NULL};

    /* from the pack */
    assert_conf_error("{\"url\": \"http://127.0.0.1:9/v1\"}", NULL, "llm.model");
    /* from the options */
    assert_conf_error(NULL, &opt, "llm_model");
    /* from the environment */
    setenv("KEEL_LLM_URL", "http://127.0.0.1:9/v1", 1);
    assert_conf_error(NULL, NULL, "llm.model");
    /* a model from anywhere is enough */
    {
        struct llm_conf c;
        struct keel_error err;
        setenv("KEEL_LLM_MODEL", "env-model", 1);
        ck_assert_int_eq(llm_conf_load(NULL, &opt, &c, &err), KEEL_OK);
        ck_assert_str_eq(c.url, "http://127.0.0.1:9/v1");
        ck_assert_str_eq(c.model, "env-model");
        llm_conf_release(&c);
    }
}
END_TEST

START_TEST(test_conf_options_over_env_over_pack)
{
    json_t *s = section("{\"url\": \"http://pack/v1\", \"model\": \"pack-model\","
                        " \"key_env\": \"PACK_KEY\"}");
    struct llm_options all = {"http://opt/v1/", "opt-model", "OPT_KEY"};
    struct llm_options model_only = {NULL, "opt-model", NULL};
    struct llm_options empty = {"", "", ""};
    struct llm_conf c;
    struct keel_error err;

    /* the pack alone */
    ck_assert_int_eq(llm_conf_load(s, NULL, &c, &err), KEEL_OK);
    ck_assert_str_eq(c.url, "http://pack/v1");
    ck_assert_str_eq(c.model, "pack-model");
    ck_assert_str_eq(c.key_env, "PACK_KEY");
    llm_conf_release(&c);

    /* the environment over the pack */
    setenv("KEEL_LLM_URL", "http://env/v1", 1);
    setenv("KEEL_LLM_MODEL", "env-model", 1);
    setenv("KEEL_LLM_KEY_ENV", "ENV_KEY", 1);
    ck_assert_int_eq(llm_conf_load(s, NULL, &c, &err), KEEL_OK);
    ck_assert_str_eq(c.url, "http://env/v1");
    ck_assert_str_eq(c.model, "env-model");
    ck_assert_str_eq(c.key_env, "ENV_KEY");
    llm_conf_release(&c);

    /* the options over both */
    ck_assert_int_eq(llm_conf_load(s, &all, &c, &err), KEEL_OK);
    ck_assert_str_eq(c.url, "http://opt/v1");
    ck_assert_str_eq(c.model, "opt-model");
    ck_assert_str_eq(c.key_env, "OPT_KEY");
    llm_conf_release(&c);

    /* each setting on its own: what an option does not give comes from below */
    ck_assert_int_eq(llm_conf_load(s, &model_only, &c, &err), KEEL_OK);
    ck_assert_str_eq(c.url, "http://env/v1");
    ck_assert_str_eq(c.model, "opt-model");
    ck_assert_str_eq(c.key_env, "ENV_KEY");
    llm_conf_release(&c);

    /* empty strings give nothing */
    unsetenv("KEEL_LLM_KEY_ENV");
    setenv("KEEL_LLM_MODEL", "", 1);
    ck_assert_int_eq(llm_conf_load(s, &empty, &c, &err), KEEL_OK);
    ck_assert_str_eq(c.url, "http://env/v1");
    ck_assert_str_eq(c.model, "pack-model");
    ck_assert_str_eq(c.key_env, "PACK_KEY");
    llm_conf_release(&c);
    json_decref(s);
}
END_TEST

START_TEST(test_conf_url_none_turns_model_off)
{
    json_t *s = section("{\"url\": \"http://pack/v1\", \"model\": \"m\"}");
    struct llm_options none = {"none", NULL, NULL};
    struct llm_options back = {"http://opt/v1", NULL, NULL};
    struct llm_conf c;
    struct keel_error err;

    ck_assert_int_eq(llm_conf_load(s, &none, &c, &err), KEEL_OK);
    ck_assert_ptr_null(c.url);
    llm_conf_release(&c);

    setenv("KEEL_LLM_URL", "none", 1);
    ck_assert_int_eq(llm_conf_load(s, NULL, &c, &err), KEEL_OK);
    ck_assert_ptr_null(c.url);
    llm_conf_release(&c);

    /* an option brings it back over the environment's "none" */
    ck_assert_int_eq(llm_conf_load(s, &back, &c, &err), KEEL_OK);
    ck_assert_str_eq(c.url, "http://opt/v1");
    ck_assert_str_eq(c.model, "m");
    llm_conf_release(&c);
    json_decref(s);
}
END_TEST

START_TEST(test_conf_bad_url)
{
    struct llm_options opt_bad = {"localhost:8080/v1", "m", NULL};
    struct llm_options opt_key = {NULL, NULL, "BAD KEY"};
    char long_url[512];

    assert_conf_error("{\"url\": \"ftp://host/v1\", \"model\": \"m\"}", NULL, "llm.url");
    assert_conf_error("{\"url\": \"none\", \"model\": \"m\"}", NULL, "llm.url");
    assert_conf_error(NULL, &opt_bad, "llm_url");
    assert_conf_error(NULL, &opt_key, "llm_key_env");
    snprintf(long_url, sizeof(long_url), "http://h/%0450d", 0);
    {
        struct llm_options opt_long = {long_url, "m", NULL};
        assert_conf_error(NULL, &opt_long, "llm_url");
    }
    setenv("KEEL_LLM_URL", "127.0.0.1:8080", 1);
    assert_conf_error(NULL, NULL, "KEEL_LLM_URL");
    unsetenv("KEEL_LLM_URL");
    {   /* a scheme and nothing else is no server */
        struct llm_options bare = {"http://", "m", NULL}, slash = {"https:///v1", "m", NULL};
        assert_conf_error(NULL, &bare, "llm_url");
        assert_conf_error(NULL, &slash, "llm_url");
    }
    setenv("KEEL_LLM_KEY_ENV", "a;b", 1);
    assert_conf_error(NULL, NULL, "KEEL_LLM_KEY_ENV");
}
END_TEST

/* The JSON object in a model's text. */
static void assert_extracts(const char *text, const char *key, const char *value)
{
    json_t *doc = NULL;
    struct keel_error err;

    keel_error_clear(&err);
    ck_assert_msg(llm_extract_json(text, strlen(text), 4096, &doc, &err) == KEEL_OK, "%s: %s",
                  text, err.message);
    ck_assert_str_eq(json_string_value(json_object_get(doc, key)), value);
    json_decref(doc);
}

static void assert_no_json(const char *text, int code, const char *part)
{
    json_t *doc = NULL;
    struct keel_error err;

    keel_error_clear(&err);
    ck_assert_int_eq(llm_extract_json(text, strlen(text), 64, &doc, &err), code);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strstr(err.message, part), "\"%s\" lacks \"%s\"", err.message, part);
}

START_TEST(test_extract_json)
{
    assert_extracts("  {\"d\": \"ADD\"}\n", "d", "ADD");
    assert_extracts("Here it is:\n```json\n{\"d\": \"NOT\"}\n```\nDone.", "d", "NOT");
    assert_extracts("```\n{\"d\": \"MERGE\"}\n```", "d", "MERGE");
    assert_extracts("I think {\"d\": \"a } in a string \\\" and {\"} then more", "d",
                    "a } in a string \" and {");
    assert_no_json("no object here", KEEL_EPARSE, "holds no JSON object");
    assert_no_json("{\"d\": \"open", KEEL_EPARSE, "never closes");
    assert_no_json("[1, 2]", KEEL_EPARSE, "no JSON object");
    assert_no_json("{\"d\": 1, \"d\": 2}", KEEL_EPARSE, "");   /* duplicate keys */
    assert_no_json("```json\n[1]\n```", KEEL_EPARSE, "no JSON object");
    {
        char big[100];
        memset(big, ' ', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_no_json(big, KEEL_ETOOBIG, "longer than 64 bytes");
    }
}
END_TEST

START_TEST(test_llm_new_needs_url_and_model)
{
    struct llm_conf c = {0};
    struct llm *llm = NULL;
    struct keel_error err;

    ck_assert_int_eq(llm_new(&c, &llm, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "llm.url");
    c.url = (char *)"http://127.0.0.1:9/v1";
    ck_assert_int_eq(llm_new(&c, &llm, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "llm.model");
    ck_assert_ptr_null(llm);
    c.model = (char *)"m";
    c.timeout_ms = 777;
    ck_assert_int_eq(llm_new(&c, &llm, &err), KEEL_OK);
    /* a copy: the caller's strings may go */
    ck_assert_ptr_ne(llm_get_conf(llm)->url, c.url);
    ck_assert_str_eq(llm_get_conf(llm)->url, c.url);
    ck_assert_int_eq(llm_get_conf(llm)->timeout_ms, 777);
    llm_free(llm);
}
END_TEST

/* ---- the breaker on its own ---------------------------------------------------- */

START_TEST(test_breaker_states)
{
    const char *a = "http://breaker-a/v1", *b = "http://breaker-b/v1";
    long wait_s = -1;

    llm_breaker_reset();
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);
    llm_breaker_record(a, 0, 3, 60000);
    llm_breaker_record(a, 0, 3, 60000);
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);   /* 2 < 3 */
    llm_breaker_record(a, 1, 3, 60000);                   /* a success resets the count */
    llm_breaker_record(a, 0, 3, 60000);
    llm_breaker_record(a, 0, 3, 60000);
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);
    llm_breaker_record(a, 0, 3, 60000);                   /* 3 in a row */
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 0);
    ck_assert_int_eq(wait_s, 60);
    ck_assert_int_eq(llm_breaker_allow(b, &wait_s), 1);   /* per URL */
    llm_breaker_reset();
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);

    /* half-open: after the cooldown one probe, the others wait for it */
    llm_breaker_record(a, 0, 1, 0);
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);   /* the probe */
    wait_s = -1;
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 0);
    ck_assert_int_eq(wait_s, 1);
    llm_breaker_record(a, 0, 1, 0);                       /* the probe failed */
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);   /* the next probe */
    llm_breaker_record(a, 1, 1, 0);                       /* it worked: closed */
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);
    ck_assert_int_eq(llm_breaker_allow(a, &wait_s), 1);
}
END_TEST

/* ---- calls against the fake server ------------------------------------------------ */

static struct fake_http *fake;
static int port;
static char base[64];

static void fake_setup(void)
{
    ck_assert_int_eq(fake_http_start(&fake, &port), 0);
    snprintf(base, sizeof(base), "http://127.0.0.1:%d/v1", port);
    llm_breaker_reset();
}

static void fake_teardown(void)
{
    fake_http_stop(fake);
    fake = NULL;
}

#define ROUTE "/v1/chat/completions"
#define SSE_HEADERS "Content-Type: text/event-stream\nCache-Control: no-cache\n"
#define CHUNK(delta)                                                                          \
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"m1\","     \
    "\"choices\":[{\"index\":0,\"delta\":" delta ",\"finish_reason\":null}]}\n\n"
#define FINISH(reason)                                                                        \
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":"          \
    "[{\"index\":0,\"delta\":{},\"finish_reason\":\"" reason "\"}]}\n\n"
#define DONE "data: [DONE]\n\n"

static const char text_stream[] =
    CHUNK("{\"role\":\"assistant\",\"content\":\"\"}")
    ": keep-alive\n\n"
    CHUNK("{\"content\":\"Hel\"}")
    CHUNK("{\"content\":\"lo, \"}")
    CHUNK("{\"content\":\"world\"}")
    FINISH("stop")
    DONE;

/* The request body of every call, and what keel must send for it. */
#define USER_BODY "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"

/* A client of the fake server, quick to give up: retries, backoff and
 * breaker as given. */
static struct llm *client(int retries, int breaker_failures, long cooldown_ms, int stream)
{
    struct llm_options opt = {base, "m1", NULL};
    struct llm_conf c;
    struct llm *llm;
    struct keel_error err;

    ck_assert_int_eq(llm_conf_load(NULL, &opt, &c, &err), KEEL_OK);
    c.timeout_ms = 2000;
    c.retries = retries;
    c.max_backoff_ms = 10;
    c.breaker_failures = breaker_failures;
    c.breaker_cooldown_ms = cooldown_ms;
    c.stream = stream;
    ck_assert_int_eq(llm_new(&c, &llm, &err), KEEL_OK);
    llm_conf_release(&c);
    return llm;
}

/* What on_token saw. */
struct tokens {
    struct keel_buf text;
    int pieces;
};

static void on_token(void *ctx, const char *text, size_t n)
{
    struct tokens *t = ctx;

    ck_assert_uint_gt(n, 0);
    t->pieces++;
    ck_assert_int_eq(keel_buf_add(&t->text, text, n), KEEL_OK);
}

/* One call, with the allocation after `fail_after` more failing (-1:
 * none): `reply` is initialised here, released by the caller. */
static int chat_failing(struct llm *llm, long fail_after, struct tokens *tokens,
                        struct llm_reply *reply, struct keel_error *err)
{
    json_t *body = json_loads(USER_BODY, 0, NULL);
    int rc;

    ck_assert_ptr_nonnull(body);
    if (tokens) {
        memset(tokens, 0, sizeof(*tokens));
        keel_buf_init(&tokens->text, 0);
        /* room ahead, so that on_token itself never allocates */
        ck_assert_int_eq(keel_buf_grow(&tokens->text, 1024), KEEL_OK);
    }
    llm_reply_init(reply);
    keel_error_clear(err);
    keel_alloc_fail_after(fail_after, 0);
    rc = llm_chat(llm, body, tokens ? on_token : NULL, tokens, reply, err);
    keel_alloc_fail_after(-1, 0);
    json_decref(body);
    return rc;
}

static int chat(struct llm *llm, struct tokens *tokens, struct llm_reply *reply,
                struct keel_error *err)
{
    return chat_failing(llm, -1, tokens, reply, err);
}

/* Fails unless the call failed with `code` and a message holding `part`. */
static void assert_failed(int rc, const struct keel_error *err, int code, const char *part)
{
    ck_assert_msg(rc == code, "rc %d, wanted %d (%s)", rc, code, err->message);
    ck_assert_int_eq(err->code, code);
    ck_assert_msg(strstr(err->message, part), "message \"%s\" lacks \"%s\"", err->message, part);
}

static void route1(const struct fake_reply *reply)
{
    fake_http_route(fake, ROUTE, reply, 1);
}

START_TEST(test_chat_streams_text)
{
    struct fake_reply ok = {200, SSE_HEADERS, text_stream, 0, 0, 0};
    struct llm *llm = client(0, 3, 60000, 1);
    struct tokens tokens;
    struct llm_reply reply;
    struct keel_error err;
    char length[32];
    static const char sent[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                               "\"model\":\"m1\",\"stream\":true}";

    route1(&ok);
    ck_assert_int_eq(chat(llm, &tokens, &reply, &err), KEEL_OK);
    ck_assert_str_eq(reply.text.data, "Hello, world");
    ck_assert_str_eq(tokens.text.data, reply.text.data);
    ck_assert_int_eq(tokens.pieces, 3);          /* as it arrived, the empty one skipped */
    ck_assert_int_eq(reply.streamed, 1);
    ck_assert_str_eq(reply.finish_reason, "stop");
    ck_assert_int_eq(reply.attempts, 1);
    ck_assert_int_eq(reply.http_status, 200);
    ck_assert_ptr_null(reply.tool_calls);
    ck_assert_int_ge(reply.elapsed_ms, 0);

    /* the request: the path, JSON in, SSE asked for, no key, and a body
     * the length of the caller's with "model" and "stream" added */
    ck_assert_uint_eq(fake_http_count(fake), 1);
    ck_assert_str_eq(fake_http_uri(fake, 0), ROUTE);
    ck_assert_str_eq(fake_http_header(fake, 0, "content-type"), "application/json");
    ck_assert_str_eq(fake_http_header(fake, 0, "accept"), "text/event-stream");
    ck_assert_ptr_null(fake_http_header(fake, 0, "authorization"));
    snprintf(length, sizeof(length), "%zu", strlen(sent));
    ck_assert_str_eq(fake_http_header(fake, 0, "content-length"), length);

    llm_reply_release(&reply);
    keel_buf_release(&tokens.text);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_streams_tool_calls)
{
    static const char stream[] =
        CHUNK("{\"role\":\"assistant\",\"content\":null}")
        CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"call_abc\",\"type\":\"function\","
              "\"function\":{\"name\":\"search_papers\",\"arguments\":\"\"}}]}")
        CHUNK("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"query\\\": \"}}]}")
        CHUNK("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"sleep\\\"}\"}}]}")
        /* the second call has no id: keel names it by its place */
        CHUNK("{\"tool_calls\":[{\"index\":1,\"type\":\"function\","
              "\"function\":{\"name\":\"add_to_library\",\"arguments\":\"{\\\"id\\\":\"}}]}")
        CHUNK("{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"7}\"}}]}")
        FINISH("tool_calls")
        DONE;
    struct fake_reply ok = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct llm *llm = client(0, 3, 60000, 1);
    struct tokens tokens;
    struct llm_reply reply;
    struct keel_error err;
    json_t *call;

    route1(&ok);
    ck_assert_int_eq(chat(llm, &tokens, &reply, &err), KEEL_OK);
    ck_assert_uint_eq(reply.text.len, 0);
    ck_assert_int_eq(tokens.pieces, 0);
    ck_assert_str_eq(reply.finish_reason, "tool_calls");
    ck_assert_uint_eq(json_array_size(reply.tool_calls), 2);
    call = json_array_get(reply.tool_calls, 0);
    ck_assert_uint_eq(json_object_size(call), 3);
    ck_assert_str_eq(json_string_value(json_object_get(call, "id")), "call_abc");
    ck_assert_str_eq(json_string_value(json_object_get(call, "name")), "search_papers");
    ck_assert_str_eq(json_string_value(json_object_get(call, "arguments")),
                     "{\"query\": \"sleep\"}");
    call = json_array_get(reply.tool_calls, 1);
    ck_assert_str_eq(json_string_value(json_object_get(call, "id")), "call00002");
    ck_assert_str_eq(json_string_value(json_object_get(call, "name")), "add_to_library");
    ck_assert_str_eq(json_string_value(json_object_get(call, "arguments")), "{\"id\":7}");
    llm_reply_release(&reply);
    keel_buf_release(&tokens.text);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_whole_reply)
{
    static const char whole[] =
        "{\"id\":\"chatcmpl-2\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
        "\"message\":{\"role\":\"assistant\",\"content\":\"Here you go.\",\"tool_calls\":["
        "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"search_papers\","
        "\"arguments\":\"{\\\"query\\\":\\\"sleep\\\"}\"}},"
        "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"add_to_library\","
        "\"arguments\":{\"id\":7,\"tags\":[\"a\",\"b\"]}}}]},"
        "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"total_tokens\":9}}";
    struct fake_reply ok = {200, NULL, whole, 0, 0, 0};
    struct llm *llm = client(0, 3, 60000, 0);
    struct tokens tokens;
    struct llm_reply reply;
    struct keel_error err;
    json_t *call;

    route1(&ok);
    ck_assert_int_eq(chat(llm, &tokens, &reply, &err), KEEL_OK);
    ck_assert_str_eq(fake_http_header(fake, 0, "accept"), "application/json");
    ck_assert_str_eq(reply.text.data, "Here you go.");
    ck_assert_str_eq(tokens.text.data, "Here you go.");
    ck_assert_int_eq(tokens.pieces, 1);
    ck_assert_str_eq(reply.finish_reason, "tool_calls");
    ck_assert_uint_eq(json_array_size(reply.tool_calls), 2);
    call = json_array_get(reply.tool_calls, 0);
    ck_assert_str_eq(json_string_value(json_object_get(call, "id")), "c1");
    ck_assert_str_eq(json_string_value(json_object_get(call, "name")), "search_papers");
    ck_assert_str_eq(json_string_value(json_object_get(call, "arguments")),
                     "{\"query\":\"sleep\"}");
    call = json_array_get(reply.tool_calls, 1);
    ck_assert_str_eq(json_string_value(json_object_get(call, "id")), "c2");
    ck_assert_str_eq(json_string_value(json_object_get(call, "name")), "add_to_library");
    /* arguments sent as an object come back as its compact text */
    ck_assert_str_eq(json_string_value(json_object_get(call, "arguments")),
                     "{\"id\":7,\"tags\":[\"a\",\"b\"]}");
    llm_reply_release(&reply);
    keel_buf_release(&tokens.text);

    /* the same with no on_token: nothing claims to have streamed */
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    ck_assert_int_eq(reply.streamed, 0);
    ck_assert_str_eq(reply.text.data, "Here you go.");
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_429_waits_then_succeeds)
{
    struct fake_reply replies[] = {
        {429, "Retry-After: 1\n", "{\"error\":{\"message\":\"slow down\"}}", 0, 0, 0},
        {200, SSE_HEADERS, text_stream, 0, 0, 0},
    };
    struct llm *llm = client(2, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    fake_http_route(fake, ROUTE, replies, 2);
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    ck_assert_int_eq(reply.attempts, 2);
    ck_assert_int_eq(reply.http_status, 200);
    ck_assert_str_eq(reply.text.data, "Hello, world");
    ck_assert_uint_eq(fake_http_count(fake), 2);
    /* Retry-After: 1 is capped by max_backoff_ms (10) */
    ck_assert_int_lt(reply.elapsed_ms, 900);
    llm_reply_release(&reply);

    /* under a larger cap Retry-After is waited for, not the 250 ms backoff */
    fake_http_reset(fake);
    fake_http_route(fake, ROUTE, replies, 2);
    {
        struct llm_conf c = *llm_get_conf(llm);
        struct llm *patient;
        c.max_backoff_ms = 1500;
        ck_assert_int_eq(llm_new(&c, &patient, &err), KEEL_OK);
        ck_assert_int_eq(chat(patient, NULL, &reply, &err), KEEL_OK);
        ck_assert_int_eq(reply.attempts, 2);
        ck_assert_int_ge(reply.elapsed_ms, 900);
        llm_reply_release(&reply);
        llm_free(patient);
    }

    /* with no retries left the 429 is the answer */
    fake_http_reset(fake);
    fake_http_route(fake, ROUTE, replies, 2);
    llm_free(llm);
    llm = client(0, 3, 60000, 1);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 429");
    ck_assert_msg(strstr(err.message, "slow down"), "message: %s", err.message);
    ck_assert_int_eq(reply.attempts, 1);
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_5xx_retries)
{
    struct fake_reply replies[] = {
        {500, NULL, "{\"error\":\"boom\"}", 0, 0, 0},
        {503, NULL, "busy", 0, 0, 0},
        {200, SSE_HEADERS, text_stream, 0, 0, 0},
    };
    struct llm *llm = client(2, 5, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    fake_http_route(fake, ROUTE, replies, 3);
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    ck_assert_int_eq(reply.attempts, 3);
    ck_assert_str_eq(reply.text.data, "Hello, world");
    ck_assert_uint_eq(fake_http_count(fake), 3);
    llm_reply_release(&reply);
    llm_free(llm);

    /* one retry is not enough for two failures */
    fake_http_reset(fake);
    fake_http_route(fake, ROUTE, replies, 3);
    llm = client(1, 5, 60000, 1);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 503");
    ck_assert_int_eq(reply.attempts, 2);
    ck_assert_int_eq(reply.http_status, 503);
    ck_assert_uint_eq(reply.text.len, 0);
    llm_reply_release(&reply);
    llm_free(llm);

    /* none at all */
    fake_http_reset(fake);
    fake_http_route(fake, ROUTE, replies, 3);
    llm = client(0, 5, 60000, 1);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 500");
    ck_assert_int_eq(reply.attempts, 1);
    ck_assert_uint_eq(fake_http_count(fake), 1);
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_400_fails_at_once)
{
    struct fake_reply replies[] = {
        {400, NULL, "{\"error\":{\"message\":\"model 'm1' not found\"}}", 0, 0, 0},
        {200, SSE_HEADERS, text_stream, 0, 0, 0},
    };
    struct llm *llm = client(2, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    fake_http_route(fake, ROUTE, replies, 2);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 400");
    ck_assert_msg(strstr(err.message, "not found"), "message: %s", err.message);
    ck_assert_int_eq(reply.attempts, 1);
    ck_assert_int_eq(reply.http_status, 400);
    ck_assert_uint_eq(fake_http_count(fake), 1);
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_cut_stream)
{
    struct fake_reply cut = {200, SSE_HEADERS, text_stream, 0, 0, 1};
    struct llm *llm = client(2, 3, 60000, 1);
    struct tokens tokens;
    struct llm_reply reply;
    struct keel_error err;

    route1(&cut);
    assert_failed(chat(llm, &tokens, &reply, &err), &err, KEEL_EIO, "broke off");
    ck_assert_int_eq(reply.attempts, 1);   /* a stream is not retried */
    ck_assert_uint_eq(fake_http_count(fake), 1);
    /* what arrived before the cut was passed on, and is kept */
    ck_assert_str_eq(tokens.text.data, reply.text.data);
    ck_assert_uint_lt(reply.text.len, strlen("Hello, world"));
    llm_reply_release(&reply);
    keel_buf_release(&tokens.text);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_stream_without_end)
{
    static const char stream[] = CHUNK("{\"content\":\"Hel\"}") CHUNK("{\"content\":\"lo\"}");
    struct fake_reply unfinished = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct llm *llm = client(2, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    route1(&unfinished);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "ended before");
    ck_assert_str_eq(reply.text.data, "Hello");
    ck_assert_int_eq(reply.attempts, 1);
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_finish_reason_without_done)
{
    static const char stream[] = CHUNK("{\"content\":\"Hi\"}") FINISH("length");
    struct fake_reply ok = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct llm *llm = client(0, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    route1(&ok);
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    ck_assert_str_eq(reply.text.data, "Hi");
    ck_assert_str_eq(reply.finish_reason, "length");
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_body_not_json)
{
    struct fake_reply html = {200, "Content-Type: text/html\n", "<html>gateway</html>", 0, 0, 0};
    struct llm *llm = client(2, 5, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    /* a streaming request answered with something else is read whole */
    route1(&html);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "not JSON");
    ck_assert_int_eq(reply.attempts, 1);
    llm_reply_release(&reply);
    llm_free(llm);

    /* JSON, but not a chat completion */
    fake_http_reset(fake);
    {
        struct fake_reply other = {200, NULL, "{\"data\":[1,2,3]}", 0, 0, 0};
        route1(&other);
    }
    llm = client(0, 5, 60000, 0);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "choices[0].message");
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_event_not_json)
{
    static const char stream[] = CHUNK("{\"content\":\"ok so far\"}") "data: {\"choices\": [\n\n"
                                 DONE;
    struct fake_reply bad = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct llm *llm = client(2, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    route1(&bad);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "not JSON");
    ck_assert_str_eq(reply.text.data, "ok so far");
    ck_assert_int_eq(reply.attempts, 1);
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_error_object)
{
    static const char stream[] = CHUNK("{\"content\":\"a\"}")
        "data: {\"error\":{\"message\":\"the model crashed\",\"type\":\"server_error\"}}\n\n" DONE;
    struct fake_reply in_stream = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct fake_reply whole = {200, NULL, "{\"error\":{\"message\":\"quota exceeded\"}}", 0, 0, 0};
    struct llm *llm = client(0, 5, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    route1(&in_stream);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "the model crashed");
    llm_reply_release(&reply);
    llm_free(llm);

    fake_http_reset(fake);
    route1(&whole);
    llm = client(0, 5, 60000, 0);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "quota exceeded");
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_empty_reply)
{
    static const char stream[] = CHUNK("{\"role\":\"assistant\",\"content\":\"\"}") FINISH("stop")
                                 DONE;
    struct fake_reply empty_stream = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct fake_reply empty_whole = {
        200, NULL, "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
                   "\"finish_reason\":\"stop\"}]}", 0, 0, 0};
    struct llm *llm = client(0, 5, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    route1(&empty_stream);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "neither text nor tool calls");
    llm_reply_release(&reply);
    llm_free(llm);

    fake_http_reset(fake);
    route1(&empty_whole);
    llm = client(0, 5, 60000, 0);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "neither text nor tool calls");
    llm_reply_release(&reply);
    llm_free(llm);

    /* a 200 with no body at all */
    fake_http_reset(fake);
    {
        struct fake_reply nothing = {200, SSE_HEADERS, NULL, 0, 0, 0};
        route1(&nothing);
    }
    llm = client(0, 5, 60000, 1);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "ended before");
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_timeout)
{
    struct fake_reply slow = {200, SSE_HEADERS, text_stream, 0, 4000, 0};
    struct llm *llm = client(2, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;
    struct llm_conf c = *llm_get_conf(llm);

    /* a client with timeout 300 ms (the conf's strings are copied) */
    struct llm *quick;
    c.timeout_ms = 300;
    ck_assert_int_eq(llm_new(&c, &quick, &err), KEEL_OK);
    llm_free(llm);
    route1(&slow);
    assert_failed(chat(quick, NULL, &reply, &err), &err, KEEL_EIO, "300 ms");
    ck_assert_int_lt(reply.elapsed_ms, 2000);
    ck_assert_int_ge(reply.elapsed_ms, 250);
    ck_assert_int_eq(reply.attempts, 1);   /* a timeout is not retried */
    llm_reply_release(&reply);
    llm_free(quick);
}
END_TEST

START_TEST(test_chat_unreachable)
{
    struct llm_options opt = {"http://127.0.0.1:1/v1", "m1", NULL};
    struct llm_conf c;
    struct llm *llm;
    struct llm_reply reply;
    struct keel_error err;

    ck_assert_int_eq(llm_conf_load(NULL, &opt, &c, &err), KEEL_OK);
    c.timeout_ms = 1000;
    ck_assert_int_eq(llm_new(&c, &llm, &err), KEEL_OK);
    llm_conf_release(&c);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "cannot reach");
    ck_assert_msg(strstr(err.message, "127.0.0.1:1"), "message: %s", err.message);
    ck_assert_int_eq(reply.http_status, 0);
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_authorization_header)
{
    struct fake_reply ok = {200, SSE_HEADERS, text_stream, 0, 0, 0};
    struct llm_options opt = {base, "m1", "KEEL_TEST_LLM_KEY"};
    struct llm_conf c;
    struct llm *llm;
    struct llm_reply reply;
    struct keel_error err;

    route1(&ok);
    ck_assert_int_eq(llm_conf_load(NULL, &opt, &c, &err), KEEL_OK);
    c.timeout_ms = 2000;
    ck_assert_int_eq(llm_new(&c, &llm, &err), KEEL_OK);
    llm_conf_release(&c);

    setenv("KEEL_TEST_LLM_KEY", "sk-test-123", 1);
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    llm_reply_release(&reply);
    ck_assert_str_eq(fake_http_header(fake, 0, "authorization"), "Bearer sk-test-123");

    /* the key is read at each call: unset, no header */
    unsetenv("KEEL_TEST_LLM_KEY");
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    llm_reply_release(&reply);
    ck_assert_uint_eq(fake_http_count(fake), 2);
    ck_assert_ptr_null(fake_http_header(fake, 1, "authorization"));
    llm_free(llm);
}
END_TEST

START_TEST(test_chat_caps)
{
    struct llm *llm = client(0, 5, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;
    struct keel_buf body;

    /* an SSE line over LLM_SSE_LINE_MAX */
    keel_buf_init(&body, 0);
    ck_assert_int_eq(keel_buf_adds(&body, "data: {\"choices\":[{\"delta\":{\"content\":\""), 0);
    for (unsigned i = 0; i < LLM_SSE_LINE_MAX / 8 + 1; i++)
        ck_assert_int_eq(keel_buf_adds(&body, "xxxxxxxx"), 0);
    ck_assert_int_eq(keel_buf_adds(&body, "\"}}]}\n\n" DONE), 0);
    {
        struct fake_reply long_line = {200, SSE_HEADERS, body.data, body.len, 0, 0};
        route1(&long_line);
    }
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_ETOOBIG, "line");
    llm_reply_release(&reply);

    /* reply text over LLM_TEXT_MAX, in events each under every cap */
    keel_buf_reset(&body);
    for (unsigned i = 0; i < LLM_TEXT_MAX / 1000 + 2; i++) {
        ck_assert_int_eq(keel_buf_adds(&body, "data: {\"choices\":[{\"delta\":{\"content\":\""), 0);
        for (int k = 0; k < 100; k++)
            ck_assert_int_eq(keel_buf_adds(&body, "0123456789"), 0);
        ck_assert_int_eq(keel_buf_adds(&body, "\"}}]}\n\n"), 0);
    }
    ck_assert_int_eq(keel_buf_adds(&body, FINISH("stop") DONE), 0);
    fake_http_reset(fake);
    {
        struct fake_reply long_text = {200, SSE_HEADERS, body.data, body.len, 0, 0};
        route1(&long_text);
    }
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_ETOOBIG, "reply");
    ck_assert_uint_le(reply.text.len, LLM_TEXT_MAX);
    llm_reply_release(&reply);
    llm_free(llm);

    /* a whole reply over max_response_bytes */
    fake_http_reset(fake);
    {
        struct llm_conf c = {0};
        struct llm *small;
        keel_buf_reset(&body);
        ck_assert_int_eq(keel_buf_adds(&body, "{\"choices\":[{\"message\":{\"content\":\""), 0);
        for (int k = 0; k < 1000; k++)
            ck_assert_int_eq(keel_buf_adds(&body, "0123456789"), 0);
        ck_assert_int_eq(keel_buf_adds(&body, "\"},\"finish_reason\":\"stop\"}]}"), 0);
        struct fake_reply big = {200, NULL, body.data, body.len, 0, 0};
        route1(&big);
        c.url = base;
        c.model = (char *)"m1";
        c.timeout_ms = 2000;
        c.breaker_failures = 5;
        c.max_response_bytes = 4096;
        ck_assert_int_eq(llm_new(&c, &small, &err), KEEL_OK);
        assert_failed(chat(small, NULL, &reply, &err), &err, KEEL_ETOOBIG, "larger than 4096");
        llm_reply_release(&reply);
        llm_free(small);
    }
    keel_buf_release(&body);
}
END_TEST

/* ---- the breaker in calls ----------------------------------------------------------- */

START_TEST(test_breaker_opens_and_refuses)
{
    struct fake_reply down = {500, NULL, "down", 0, 0, 0};
    struct fake_reply ok = {200, SSE_HEADERS, text_stream, 0, 0, 0};
    struct llm *llm = client(0, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    llm_breaker_reset();
    route1(&down);
    for (int i = 0; i < 3; i++) {
        assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 500");
        ck_assert_uint_eq(fake_http_count(fake), (size_t)i + 1);
        llm_reply_release(&reply);
    }
    /* open: no request goes out, the message says so */
    for (int i = 0; i < 2; i++) {
        assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "not asking it");
        ck_assert_msg(strstr(err.message, "3 times"), "message: %s", err.message);
        ck_assert_uint_eq(fake_http_count(fake), 3);
        ck_assert_int_eq(reply.attempts, 0);
        ck_assert_int_eq(reply.http_status, 0);
        llm_reply_release(&reply);
    }

    /* the breaker is per URL: another server is still asked */
    {
        struct fake_http *other;
        int other_port;
        char other_base[64];
        struct llm_conf c = *llm_get_conf(llm);
        struct llm *llm2;
        ck_assert_int_eq(fake_http_start(&other, &other_port), 0);
        snprintf(other_base, sizeof(other_base), "http://127.0.0.1:%d/v1", other_port);
        fake_http_route(other, ROUTE, &ok, 1);
        c.url = other_base;
        ck_assert_int_eq(llm_new(&c, &llm2, &err), KEEL_OK);
        ck_assert_int_eq(chat(llm2, NULL, &reply, &err), KEEL_OK);
        ck_assert_uint_eq(fake_http_count(other), 1);
        llm_reply_release(&reply);
        llm_free(llm2);
        fake_http_stop(other);
    }

    /* a reset forgets it */
    llm_breaker_reset();
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 500");
    ck_assert_uint_eq(fake_http_count(fake), 4);
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts))
        ;
}

START_TEST(test_breaker_probe_closes)
{
    struct fake_reply replies[] = {
        {500, NULL, "down", 0, 0, 0},
        {502, NULL, "down", 0, 0, 0},
        {503, NULL, "still down", 0, 0, 0},
        {200, SSE_HEADERS, text_stream, 0, 0, 0},
    };
    struct llm *llm = client(0, 2, 150, 1);
    struct llm_reply reply;
    struct keel_error err;

    llm_breaker_reset();
    fake_http_route(fake, ROUTE, replies, 4);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 500");
    llm_reply_release(&reply);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 502");
    llm_reply_release(&reply);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "not asking it");
    llm_reply_release(&reply);
    ck_assert_uint_eq(fake_http_count(fake), 2);

    /* after the cooldown one probe goes out; it fails: open again */
    sleep_ms(250);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 503");
    llm_reply_release(&reply);
    ck_assert_uint_eq(fake_http_count(fake), 3);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "not asking it");
    llm_reply_release(&reply);
    ck_assert_uint_eq(fake_http_count(fake), 3);

    /* the next probe succeeds: closed, calls go out again */
    sleep_ms(250);
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    ck_assert_str_eq(reply.text.data, "Hello, world");
    llm_reply_release(&reply);
    ck_assert_uint_eq(fake_http_count(fake), 4);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
        llm_reply_release(&reply);
    }
    ck_assert_uint_eq(fake_http_count(fake), 6);
    llm_free(llm);
}
END_TEST

/* Calls streamed one per chunk without an index (as Ollama sends them):
 * a new id starts a new call. */
START_TEST(test_chat_streams_calls_without_index)
{
    static const char stream[] =
        CHUNK("{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\","
              "\"arguments\":\"{\\\"t\\\":\\\"One\\\"}\"}}]}")
        CHUNK("{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"f\","
              "\"arguments\":\"{\\\"t\\\":\"}}]}")
        CHUNK("{\"tool_calls\":[{\"function\":{\"arguments\":\"\\\"Two\\\"}\"}}]}")
        FINISH("tool_calls") DONE;
    struct fake_reply ok = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct llm *llm = client(0, 3, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    route1(&ok);
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    ck_assert_uint_eq(json_array_size(reply.tool_calls), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(reply.tool_calls, 0),
                                                       "arguments")), "{\"t\":\"One\"}");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(reply.tool_calls, 1),
                                                       "arguments")), "{\"t\":\"Two\"}");
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

/* A server that refuses a request (400) is up: refusals do not open
 * the circuit for everyone else. */
START_TEST(test_breaker_ignores_refused_requests)
{
    struct fake_reply bad = {400, NULL, "{\"error\":{\"message\":\"tools not supported\"}}", 0, 0, 0};
    struct llm *llm = client(0, 2, 60000, 1);
    struct llm_reply reply;
    struct keel_error err;

    llm_breaker_reset();
    route1(&bad);
    for (int i = 0; i < 4; i++) {
        assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 400");
        llm_reply_release(&reply);
    }
    ck_assert_uint_eq(fake_http_count(fake), 4);
    llm_free(llm);
}
END_TEST

/* The probe the breaker lets out after its cooldown is recorded even
 * when the call fails before sending (an allocation of the body): the
 * circuit is not left half-open for good. A body that is not an object
 * is refused before the breaker is asked. */
START_TEST(test_breaker_probe_failing_early_is_recorded)
{
    struct fake_reply replies[] = {
        {500, NULL, "down", 0, 0, 0},
        {200, SSE_HEADERS, text_stream, 0, 0, 0},
    };
    struct llm *llm = client(0, 1, 50, 1);
    struct llm_reply reply;
    struct keel_error err;
    json_t *array = json_array();

    llm_breaker_reset();
    fake_http_route(fake, ROUTE, replies, 2);
    assert_failed(chat(llm, NULL, &reply, &err), &err, KEEL_EIO, "HTTP 500");
    llm_reply_release(&reply);
    sleep_ms(80);
    llm_reply_init(&reply);
    keel_error_clear(&err);
    assert_failed(llm_chat(llm, array, NULL, NULL, &reply, &err), &err, KEEL_EINVAL,
                  "must be a JSON object");
    llm_reply_release(&reply);
    assert_failed(chat_failing(llm, 0, NULL, &reply, &err), &err, KEEL_ENOMEM, "out of memory");
    llm_reply_release(&reply);
    /* still half-open: the next call is the probe, and it succeeds */
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    llm_reply_release(&reply);
    ck_assert_uint_eq(fake_http_count(fake), 2);
    json_decref(array);
    llm_free(llm);
}
END_TEST

/* A tool name longer than keel keeps is cut on a character boundary,
 * not in the middle of one (which would not be valid UTF-8). */
START_TEST(test_chat_long_utf8_tool_name)
{
    char stream[2048], name[300] = "";
    struct fake_reply ok = {200, SSE_HEADERS, stream, 0, 0, 0};
    struct llm *llm = client(0, 3, 1000, 1);
    struct llm_reply reply;
    struct keel_error err;
    const char *got;

    for (int i = 0; i < 60; i++)
        strcat(name, "\xc3\xa9");   /* é */
    snprintf(stream, sizeof(stream),
             "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
             "\"id\":\"c1\",\"function\":{\"name\":\"x%s\",\"arguments\":\"{}\"}}]},"
             "\"finish_reason\":\"tool_calls\"}]}\n\n" DONE, name);
    route1(&ok);
    ck_assert_int_eq(chat(llm, NULL, &reply, &err), KEEL_OK);
    got = json_string_value(json_object_get(json_array_get(reply.tool_calls, 0), "name"));
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(strlen(got), 95);   /* "x" and 47 whole characters */
    llm_reply_release(&reply);
    llm_free(llm);
}
END_TEST

/* Every allocation of a call fails once in turn: the call succeeds or
 * fails cleanly, and nothing leaks (the fixture counts). */
START_TEST(test_chat_allocation_failures)
{
    static const char stream[] =
        CHUNK("{\"content\":\"Hi \"}")
        CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\","
              "\"arguments\":\"{\\\"a\\\"\"}}]}")
        CHUNK("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}")
        FINISH("tool_calls") DONE;
    struct fake_reply ok = {200, SSE_HEADERS, stream, 0, 0, 0};
    int successes = 0, failures = 0;

    route1(&ok);
    for (long n = 0; n < 400; n++) {
        struct llm *llm = client(0, 1000, 0, 1);
        struct tokens tokens;
        struct llm_reply reply;
        struct keel_error err;
        int rc;

        llm_breaker_reset();
        rc = chat_failing(llm, n, &tokens, &reply, &err);
        if (rc == KEEL_OK) {
            successes++;
            ck_assert_str_eq(reply.text.data, "Hi ");
            ck_assert_uint_eq(json_array_size(reply.tool_calls), 1);
        } else {
            failures++;
            ck_assert_int_ne(err.code, KEEL_OK);
            ck_assert_msg(err.message[0], "a failure without a message (n=%ld)", n);
        }
        llm_reply_release(&reply);
        keel_buf_release(&tokens.text);
        llm_free(llm);
    }
    ck_assert_int_gt(failures, 0);
    ck_assert_int_gt(successes, 0);
}
END_TEST

Suite *suite_llm(void)
{
    Suite *s = suite_create("llm");
    TCase *sse = tcase_create("llm_sse");
    TCase *conf = tcase_create("llm_conf");
    TCase *net = tcase_create("llm_http");

    unit_leak_fixture(sse);
    tcase_add_test(sse, test_sse_events_whole);
    tcase_add_test(sse, test_sse_any_feed_boundaries);
    tcase_add_test(sse, test_sse_crlf_across_feeds);
    tcase_add_test(sse, test_sse_fields);
    tcase_add_test(sse, test_sse_line_cap);
    tcase_add_test(sse, test_sse_data_cap);
    tcase_add_test(sse, test_sse_unfinished_event_dropped);
    tcase_add_test(sse, test_sse_callback_error_stops);
    suite_add_tcase(s, sse);

    unit_leak_fixture(conf);
    tcase_add_checked_fixture(conf, env_setup, env_teardown);
    tcase_add_test(conf, test_conf_defaults);
    tcase_add_test(conf, test_conf_pack_section);
    tcase_add_test(conf, test_conf_errors_name_the_field);
    tcase_add_test(conf, test_conf_url_needs_model);
    tcase_add_test(conf, test_conf_options_over_env_over_pack);
    tcase_add_test(conf, test_conf_url_none_turns_model_off);
    tcase_add_test(conf, test_conf_bad_url);
    tcase_add_test(conf, test_llm_new_needs_url_and_model);
    tcase_add_test(conf, test_extract_json);
    tcase_add_test(conf, test_breaker_states);
    suite_add_tcase(s, conf);

    unit_leak_fixture(net);
    tcase_add_checked_fixture(net, env_setup, env_teardown);
    tcase_add_checked_fixture(net, fake_setup, fake_teardown);
    tcase_set_timeout(net, 20);
    tcase_add_test(net, test_chat_streams_text);
    tcase_add_test(net, test_chat_streams_tool_calls);
    tcase_add_test(net, test_chat_whole_reply);
    tcase_add_test(net, test_chat_429_waits_then_succeeds);
    tcase_add_test(net, test_chat_5xx_retries);
    tcase_add_test(net, test_chat_400_fails_at_once);
    tcase_add_test(net, test_chat_cut_stream);
    tcase_add_test(net, test_chat_stream_without_end);
    tcase_add_test(net, test_chat_finish_reason_without_done);
    tcase_add_test(net, test_chat_body_not_json);
    tcase_add_test(net, test_chat_event_not_json);
    tcase_add_test(net, test_chat_error_object);
    tcase_add_test(net, test_chat_empty_reply);
    tcase_add_test(net, test_chat_timeout);
    tcase_add_test(net, test_chat_unreachable);
    tcase_add_test(net, test_chat_authorization_header);
    tcase_add_test(net, test_chat_caps);
    tcase_add_test(net, test_breaker_opens_and_refuses);
    tcase_add_test(net, test_breaker_probe_closes);
    tcase_add_test(net, test_breaker_probe_failing_early_is_recorded);
    tcase_add_test(net, test_chat_long_utf8_tool_name);
    tcase_add_test(net, test_chat_streams_calls_without_index);
    tcase_add_test(net, test_breaker_ignores_refused_requests);
    tcase_add_test(net, test_chat_allocation_failures);
    suite_add_tcase(s, net);
    return s;
}
