/*
 * test_compose.c — unit tests of the extractive answer's text functions
 * (src/pipeline/stage_compose.c, tools.c):
 *
 *   coverage   tools_coverage_of: the share of the query's words a text
 *              has, on fixed cases and on random texts against the
 *              reference below
 *   sentences  compose_pick_sentences, compose_add_plain and
 *              compose_first_sentence: fixed cases, and random passages
 *              against the reference below
 *
 * The references are the plain versions these functions had before
 * they read byte-class tables and skipped words by their first byte
 * (strchr per byte, every word copied and compared): the fast ones must
 * give the same results, byte for byte, on any text.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "pipeline/tools.h"
#include "pipeline/turn.h"
#include "unit.h"

/* ---- the references --------------------------------------------------------- */

static size_t ref_next_word(const char **p, char *out, size_t cap)
{
    const unsigned char *s = (const unsigned char *)*p;
    size_t n = 0;

    while (*s && !((*s | 32) >= 'a' && (*s | 32) <= 'z') && !(*s >= '0' && *s <= '9') && *s < 0x80)
        s++;
    while (*s && (((*s | 32) >= 'a' && (*s | 32) <= 'z') || (*s >= '0' && *s <= '9') || *s >= 0x80)) {
        if (n + 1 < cap)
            out[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
        s++;
    }
    out[n] = '\0';
    *p = (const char *)s;
    return n;
}

static int ref_words_match(const char *q, size_t lq, const char *w, size_t lw)
{
    size_t common = 0, shorter = lq < lw ? lq : lw, need;

    if (lq == lw && !memcmp(q, w, lq))
        return 1;
    if (shorter < 4)
        return 0;
    while (common < shorter && q[common] == w[common])
        common++;
    need = shorter > 6 ? shorter - 2 : 4;
    return common >= need;
}

static double ref_coverage(const struct tool_words *q, const char *text)
{
    int found[STORE_QUERY_WORDS] = {0};
    size_t n_found = 0, len;
    char word[65];

    if (!q->n)
        return 0.0;
    for (const char *p = text; (len = ref_next_word(&p, word, sizeof(word))) > 0 && n_found < q->n;)
        for (size_t k = 0; k < q->n; k++)
            if (!found[k] && ref_words_match(q->word[k], q->len[k], word, len)) {
                found[k] = 1;
                n_found++;
            }
    return (double)n_found / (double)q->n;
}

static int ref_row_end(const char *text, size_t i, size_t len)
{
    size_t k = i + 1;

    if (text[i] != '|')
        return 0;
    while (k < len && text[k] == ' ')
        k++;
    return k > i + 1 && k < len && text[k] == '|';
}

static int ref_pick(const struct tool_words *query, const char *text,
                    struct compose_sentence best[COMPOSE_SENTENCES])
{
    size_t len = strlen(text), start = 0;
    char piece[1024];
    int n_best = 0;

    memset(best, 0, COMPOSE_SENTENCES * sizeof(*best));
    for (size_t i = 0; i <= len; i++) {
        int end = i == len || text[i] == '\n' || ref_row_end(text, i, len) ||
                  (strchr(".?!", text[i]) && (i + 1 == len || text[i + 1] == ' ') &&
                   !(text[i] == '.' && i + 2 < len && islower((unsigned char)text[i + 2])));
        if (!end)
            continue;
        size_t n = i - start + (i < len && text[i] != '\n');
        while (n && strchr(" #>-*|", text[start])) {
            start++;
            n--;
        }
        if (n > 20 && n < sizeof(piece)) {
            memcpy(piece, text + start, n);
            piece[n] = '\0';
            if (strstr(piece, "|-") || strstr(piece, "-|")) {
                start = i + 1;
                continue;
            }
            double score = ref_coverage(query, piece);
            for (int k = 0; k < COMPOSE_SENTENCES; k++)
                if (score > best[k].score) {
                    memmove(best + k + 1, best + k, (COMPOSE_SENTENCES - 1 - k) * sizeof(*best));
                    best[k] = (struct compose_sentence){start, n, score};
                    break;
                }
        }
        start = i + 1;
    }
    for (int k = 0; k < COMPOSE_SENTENCES; k++)
        n_best += best[k].len > 0;
    if (n_best == 2 && best[1].start < best[0].start) {
        struct compose_sentence tmp = best[0];
        best[0] = best[1];
        best[1] = tmp;
    }
    return n_best;
}

static int ref_add_plain(struct keel_buf *b, const char *prefix, const char *text, size_t n)
{
    int rc = keel_buf_adds(b, prefix);

    while (n && (text[n - 1] == '|' || text[n - 1] == ' '))
        n--;
    for (size_t i = 0; i < n && !rc; i++) {
        if (text[i] == '|') {
            while (b->len && b->data[b->len - 1] == ' ')
                keel_buf_truncate(b, b->len - 1);
            rc = keel_buf_adds(b, ", ");
            while (i + 1 < n && text[i + 1] == ' ')
                i++;
        } else if (text[i] == '_' && i + 1 < n && text[i + 1] == '_') {
            i++;
        } else if (text[i] != '*') {
            rc = keel_buf_addc(b, text[i]);
        }
    }
    return rc;
}

static int ref_first_sentence(struct keel_buf *b, const char *text)
{
    size_t n = 0, len = strlen(text);

    while (n < len && !(strchr(".?!", text[n]) && (text[n + 1] == ' ' || !text[n + 1])))
        n++;
    if (n < len)
        n++;
    if (n > 300) {
        n = 300;
        while (n > 0 && text[n] != ' ')
            n--;
        return keel_buf_addf(b, "%.*s\u2026", (int)n, text);
    }
    return keel_buf_add(b, text, n);
}

/* ---- random texts ------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* Words that match each other in every way words_match has (equal, a
 * common prefix of 4, of all but 2), ASCII case, digits, UTF-8, a word
 * longer than 64 bytes; and every byte a sentence, a table or markdown
 * cares about. */
static const char *const pieces[] = {
    "appeal", "Appeals", "APPEALING", "app", "appe", "deadline", "deadlines", "dead", "a", "an",
    "the", "plan", "planning", "x1", "2024", "20245", "\xc3\xbc" "ber", "na\xc3\xafve",
    "\xe2\x80\x94", "b", "ab", "abc", "abcd", "abcdefgh", "abcdefxy",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    " ", " ", " ", " ", ". ", ".", "? ", "! ", "!", "?", "\n", "a.m. ", "p.m. to", ".a", ". B",
    "| ", " | ", "|", " | | ", "|---|", "-|", "|-", "# ", "> ", "- ", "* ", "**", "__", "_", "*",
    ", ", ":", ";", "(", ")", "\t", "'", "\"",
};

static void random_text(uint64_t *rng, char *out, size_t cap, int n_pieces)
{
    size_t len = 0;

    out[0] = '\0';
    for (int i = 0; i < n_pieces; i++) {
        const char *p = pieces[rng_next(rng) % (sizeof(pieces) / sizeof(pieces[0]))];
        size_t n = strlen(p);
        if (len + n + 1 > cap)
            break;
        memcpy(out + len, p, n + 1);
        len += n;
    }
}

/* ---- coverage ------------------------------------------------------------------ */

START_TEST(test_coverage_cases)
{
    struct tool_words q;

    tools_words_init(&q, NULL, "appeal deadline");
    ck_assert(tools_coverage_of(&q, "File your APPEALS before the deadlines.") == 1.0);
    ck_assert(tools_coverage_of(&q, "Appeals only") == 0.5);
    ck_assert(tools_coverage_of(&q, "no match: app, dea, appl, deadlock") == 0.0);
    ck_assert(tools_coverage_of(&q, "dead") == 0.5);   /* a common prefix of 4 */
    ck_assert(tools_coverage_of(&q, "") == 0.0);
    /* words are cut at 64 bytes; UTF-8 bytes are word bytes */
    tools_words_init(&q, NULL, "\xc3\xbc" "ber 2024");
    ck_assert(tools_coverage_of(&q, "\xc3\x9c" "ber 2024") == 0.5);   /* Ü is not folded */
    ck_assert(tools_coverage_of(&q, "x\xc3\xbc" "ber,2024!") == 0.5);
    ck_assert(tools_coverage_of(&q, "(\xc3\xbc" "ber)-2024") == 1.0);
    tools_words_init(&q, NULL, "");
    ck_assert(tools_coverage_of(&q, "anything") == 0.0);
}
END_TEST

START_TEST(test_coverage_matches_reference)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    char query[256], text[2048];
    struct tool_words q;

    for (int i = 0; i < 20000; i++) {
        random_text(&rng, query, sizeof(query), 1 + (int)(rng_next(&rng) % 8));
        random_text(&rng, text, sizeof(text), (int)(rng_next(&rng) % 60));
        tools_words_init(&q, NULL, query);
        ck_assert_msg(tools_coverage_of(&q, text) == ref_coverage(&q, text),
                      "query \"%s\", text \"%s\": %g, expected %g", query, text,
                      tools_coverage_of(&q, text), ref_coverage(&q, text));
    }
}
END_TEST

/* ---- sentences ---------------------------------------------------------------- */

static const char *picked(const char *text, const struct compose_sentence *best, int n,
                          char *out, size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    for (int k = 0; k < n; k++)
        len += (size_t)snprintf(out + len, cap - len, "%s%.*s", k ? "|" : "", (int)best[k].len,
                                text + best[k].start);
    return out;
}

START_TEST(test_pick_sentences_cases)
{
    struct compose_sentence best[COMPOSE_SENTENCES];
    struct tool_words q;
    char got[512];
    const char *text;
    int n;

    tools_words_init(&q, NULL, "appeal hours");
    /* "a.m." ends no sentence; the best two in text order */
    text = "Nothing here to see at all. Appeals are open 8 a.m. to 7 p.m. on weekdays. "
           "Call us with questions about hours.\nThe appeal form is online, as are the hours.";
    n = compose_pick_sentences(&q, text, best);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(picked(text, best, n, got, sizeof(got)),
                     "Appeals are open 8 a.m. to 7 p.m. on weekdays.|"
                     "The appeal form is online, as are the hours.");
    /* table rows end at "| |"; a rule row is no sentence; leading marks go */
    text = "| Appeals line | 1-800-555-0100 | | Hours line for calls | 9 to 5 |\n|---|---|\n"
           "## Appeal hours are listed here";
    n = compose_pick_sentences(&q, text, best);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(picked(text, best, n, got, sizeof(got)),
                     "Appeals line | 1-800-555-0100 ||Appeal hours are listed here");
    /* nothing of the query: none */
    ck_assert_int_eq(compose_pick_sentences(&q, "Nothing of it is here at all, none.", best), 0);
    ck_assert_uint_eq(best[0].len, 0);
}
END_TEST

START_TEST(test_add_plain_cases)
{
    struct keel_buf b;
    const char *text = "| **Mail:** | P.O. Box 1 __x__ a_b * c |  ";

    keel_buf_init(&b, 0);
    ck_assert_int_eq(compose_add_plain(&b, "> ", text, strlen(text)), KEEL_OK);
    ck_assert_str_eq(b.data, ">, Mail:, P.O. Box 1 x a_b  c");
    keel_buf_release(&b);
}
END_TEST

START_TEST(test_first_sentence_cases)
{
    struct keel_buf b;
    char long_text[400];

    keel_buf_init(&b, 0);
    ck_assert_int_eq(compose_first_sentence(&b, "We study sleep. Then more."), KEEL_OK);
    ck_assert_str_eq(b.data, "We study sleep.");
    keel_buf_reset(&b);
    ck_assert_int_eq(compose_first_sentence(&b, "Version 2.1 is out!"), KEEL_OK);
    ck_assert_str_eq(b.data, "Version 2.1 is out!");
    keel_buf_reset(&b);
    for (size_t i = 0; i < sizeof(long_text) - 1; i++)
        long_text[i] = i % 10 == 9 ? ' ' : 'w';
    long_text[sizeof(long_text) - 1] = '\0';
    ck_assert_int_eq(compose_first_sentence(&b, long_text), KEEL_OK);
    ck_assert_uint_eq(b.len, 299 + strlen("\u2026"));   /* cut at the space at 299 */
    ck_assert_str_eq(b.data + 299, "\u2026");
    keel_buf_release(&b);

    /* all of it or nothing: a buffer with room for the cut sentence but
     * not its "…" */
    keel_buf_init(&b, 300);
    ck_assert_int_eq(compose_first_sentence(&b, long_text), KEEL_ETOOBIG);
    ck_assert_uint_eq(b.len, 0);
    keel_buf_release(&b);
}
END_TEST

START_TEST(test_sentences_match_reference)
{
    uint64_t rng = 0x2545f4914f6cdd1dull;
    char query[256], text[4096];
    struct tool_words q;
    struct keel_buf got, want;

    keel_buf_init(&got, 0);
    keel_buf_init(&want, 0);
    for (int i = 0; i < 20000; i++) {
        struct compose_sentence best[COMPOSE_SENTENCES], ref[COMPOSE_SENTENCES];
        int n, ref_n;

        random_text(&rng, query, sizeof(query), 1 + (int)(rng_next(&rng) % 6));
        random_text(&rng, text, sizeof(text), (int)(rng_next(&rng) % (i % 10 ? 80 : 400)));
        tools_words_init(&q, NULL, query);
        n = compose_pick_sentences(&q, text, best);
        ref_n = ref_pick(&q, text, ref);
        ck_assert_msg(n == ref_n && !memcmp(best, ref, sizeof(best)),
                      "query \"%s\", text \"%s\": %d sentences, expected %d", query, text, n,
                      ref_n);

        /* any span of it as plain text */
        {
            size_t len = strlen(text), start = len ? rng_next(&rng) % len : 0;
            size_t span = len - start ? rng_next(&rng) % (len - start + 1) : 0;
            keel_buf_reset(&got);
            keel_buf_reset(&want);
            ck_assert_int_eq(compose_add_plain(&got, i % 2 ? "; " : "", text + start, span),
                             ref_add_plain(&want, i % 2 ? "; " : "", text + start, span));
            ck_assert_msg(got.len == want.len && !memcmp(got.data, want.data, got.len),
                          "plain \"%.*s\": \"%s\", expected \"%s\"", (int)span, text + start,
                          got.data, want.data);
        }
        keel_buf_reset(&got);
        keel_buf_reset(&want);
        ck_assert_int_eq(compose_first_sentence(&got, text), ref_first_sentence(&want, text));
        ck_assert_msg(got.len == want.len && !memcmp(got.data, want.data, got.len),
                      "first sentence of \"%s\": \"%s\", expected \"%s\"", text, got.data,
                      want.data);
    }
    keel_buf_release(&got);
    keel_buf_release(&want);
}
END_TEST

Suite *suite_compose(void)
{
    Suite *s = suite_create("compose");
    TCase *coverage = tcase_create("coverage");
    TCase *sentences = tcase_create("sentences");

    unit_leak_fixture(coverage);
    tcase_add_test(coverage, test_coverage_cases);
    tcase_add_test(coverage, test_coverage_matches_reference);
    suite_add_tcase(s, coverage);

    unit_leak_fixture(sentences);
    tcase_set_timeout(sentences, 60);
    tcase_add_test(sentences, test_pick_sentences_cases);
    tcase_add_test(sentences, test_add_plain_cases);
    tcase_add_test(sentences, test_first_sentence_cases);
    tcase_add_test(sentences, test_sentences_match_reference);
    suite_add_tcase(s, sentences);
    return s;
}
