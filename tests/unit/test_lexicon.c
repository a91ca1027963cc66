/*
 * test_lexicon.c — unit tests of the phrase lexicon (src/text/lexicon.h):
 * how a message is cut into tokens (hyphens, apostrophes, dashes between
 * years, decimals, numbers glued to names or units, number words, sentence
 * and break flags), how phrases with {n}, {year}, {word} and {category}
 * slots match,
 * that the longest phrase comes first at a position, that nothing matches
 * across a sentence end or a break, and that the token and match caps set
 * `truncated`. The lexicon here is a small one built in the test, so each
 * expectation follows from the phrases listed beside it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "text/lexicon.h"
#include "core/utf8.h"
#include "unit.h"

enum { C_REQUEST, C_NOUN, C_UNIT, C_CONVERT, C_NUMBER, C_YEAR, C_OPEN, C_FIND, C_MANY };

static int category_of_name(const char *name, size_t n)
{
    static const char *const names[] = {"request", "noun", "unit", "convert", "number",
                                        "year", "open", "find", "many"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == n && !memcmp(names[i], name, n))
            return (int)i;
    return -1;
}

static void add(struct lexicon *lex, int category, int value, const char *text)
{
    struct keel_error err;
    int rc = lexicon_add(lex, category, value, text, category_of_name, "phrase", &err);

    ck_assert_msg(rc == KEEL_OK, "phrase \"%s\": %s", text, err.message);
}

/* The lexicon most tests use. Phrase indices follow the order of adds. */
static void build(struct lexicon *lex)
{
    lexicon_init(lex);
    add(lex, C_FIND, 0, "find");                  /* 0 */
    add(lex, C_REQUEST, 0, "find me");            /* 1 */
    add(lex, C_REQUEST, 0, "find me some");       /* 2 */
    add(lex, C_NOUN, 0, "papers");                /* 3 */
    add(lex, C_OPEN, 0, "open access");           /* 4 */
    add(lex, C_UNIT, 0, "km");                    /* 5 */
    add(lex, C_UNIT, 0, "miles");                 /* 6 */
    add(lex, C_UNIT, 0, "usd");                   /* 7 */
    add(lex, C_UNIT, 0, "eur");                   /* 8 */
    add(lex, C_CONVERT, 0, "{n} {unit} to {unit}");  /* 9 */
    add(lex, C_CONVERT, 1, "{unit} to {unit} rate"); /* 10 */
    add(lex, C_NUMBER, 10, "ten");                /* 11 */
    add(lex, C_NUMBER, 3, "a few");               /* 12 */
    add(lex, C_YEAR, 1, "last {n} years");        /* 13 */
    add(lex, C_YEAR, 2, "since {year}");          /* 14 */
    add(lex, C_YEAR, 3, "{year} - {year}");       /* 15 */
    add(lex, C_REQUEST, 0, "don't search");       /* 16 */
    lexicon_set_number_category(lex, C_NUMBER);
    ck_assert_int_eq(lexicon_compile(lex), KEEL_OK);
}

static struct lex_result *match(const struct lexicon *lex, const char *text)
{
    static struct lex_result res;

    memset(&res, 0xa5, sizeof(res));  /* nothing may depend on prior contents */
    lexicon_match(lex, text, strlen(text), &res);
    return &res;
}

/* The text of token i. */
static const char *tok_text(const char *text, const struct lex_result *res, uint32_t i)
{
    static char out[128];

    ck_assert_uint_lt(i, res->n_tokens);
    snprintf(out, sizeof(out), "%.*s", (int)res->tokens[i].len, text + res->tokens[i].start);
    return out;
}

/* Index of the first match of `phrase` starting at token `start`, or -1. */
static int find_match(const struct lex_result *res, uint32_t phrase, uint32_t start)
{
    for (uint32_t m = 0; m < res->n_matches; m++)
        if (res->matches[m].phrase == phrase && res->matches[m].start == start)
            return (int)m;
    return -1;
}

static void assert_tokens(const char *text, const struct lex_result *res,
                          const char *const *expect, size_t n)
{
    ck_assert_msg(res->n_tokens == n, "\"%s\": %u tokens, expected %zu", text, res->n_tokens, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(tok_text(text, res, (uint32_t)i), expect[i]);
}

/* ---- tokenization ------------------------------------------------------ */

START_TEST(test_hyphen_split_joined)
{
    struct lexicon lex;
    const char *text = "Open-access papers";
    const char *const expect[] = {"Open", "access", "papers"};
    struct lex_result *res;

    build(&lex);
    res = match(&lex, text);
    assert_tokens(text, res, expect, 3);
    ck_assert_uint_eq(res->tokens[0].flags & LEX_JOINED, 0);
    ck_assert_uint_eq(res->tokens[1].flags & LEX_JOINED, LEX_JOINED);
    ck_assert_uint_eq(res->tokens[2].flags & LEX_JOINED, 0);
    ck_assert_uint_eq(res->tokens[1].word, lexicon_word(&lex, "access", 6));
    /* "open access" matches both spellings. */
    ck_assert_int_ge(find_match(res, 4, 0), 0);
    ck_assert_int_ge(find_match(match(&lex, "open access papers"), 4, 0), 0);
    /* A dash between spaces or at the end is no join. */
    res = match(&lex, "open - access");
    ck_assert_uint_eq(res->n_tokens, 3);
    ck_assert_uint_eq(res->tokens[2].flags & LEX_JOINED, 0);
    ck_assert_int_eq(find_match(res, 4, 0), -1);
    res = match(&lex, "open-");
    ck_assert_uint_eq(res->n_tokens, 2);
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_apostrophes)
{
    struct lexicon lex;
    const char *curly = "don\xe2\x80\x99t search";
    struct lex_result *res;

    build(&lex);
    res = match(&lex, "don't search");
    ck_assert_uint_eq(res->n_tokens, 2);
    ck_assert_str_eq(tok_text("don't search", res, 0), "don't");
    ck_assert_int_ge(find_match(res, 16, 0), 0);

    /* ’ is an apostrophe: the same word, three bytes long in the text. */
    res = match(&lex, curly);
    ck_assert_uint_eq(res->n_tokens, 2);
    ck_assert_uint_eq(res->tokens[0].len, 7);
    ck_assert_uint_eq(res->tokens[0].word, lexicon_word(&lex, "don't", 5));
    ck_assert_uint_ne(res->tokens[0].word, 0);
    ck_assert_int_ge(find_match(res, 16, 0), 0);

    /* A leading or trailing quote is not part of a word. */
    res = match(&lex, "'papers' students'");
    ck_assert_uint_eq(res->n_tokens, 2);
    ck_assert_str_eq(tok_text("'papers' students'", res, 0), "papers");
    ck_assert_str_eq(tok_text("'papers' students'", res, 1), "students");
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_year_ranges)
{
    struct lexicon lex;
    const char *en_dash = "papers 2018\xe2\x80\x93" "2022";
    const char *em_dash = "2018\xe2\x80\x94" "2022";
    struct lex_result *res;
    int m;

    build(&lex);
    res = match(&lex, "papers 2018-2022");
    {
        const char *const expect[] = {"papers", "2018", "-", "2022"};
        assert_tokens("papers 2018-2022", res, expect, 4);
    }
    ck_assert_uint_eq(res->tokens[2].flags & LEX_JOINED, 0);
    ck_assert_uint_eq(res->tokens[3].flags & LEX_JOINED, 0);
    ck_assert_int_eq(res->tokens[1].number, 2018);
    ck_assert_int_eq(res->tokens[3].number, 2022);
    m = find_match(res, 15, 1);
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(res->matches[m].n, 3);
    ck_assert_int_eq(res->matches[m].slot[0], 2018);
    ck_assert_int_eq(res->matches[m].slot[1], 2022);

    /* The en dash between years is its own "-" token. */
    res = match(&lex, en_dash);
    ck_assert_uint_eq(res->n_tokens, 4);
    ck_assert_uint_eq(res->tokens[2].len, 3);
    ck_assert_uint_eq(res->tokens[2].word, lexicon_word(&lex, "-", 1));
    ck_assert_uint_ne(res->tokens[2].word, 0);
    m = find_match(res, 15, 1);
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(res->matches[m].slot[1], 2022);
    res = match(&lex, em_dash);
    ck_assert_uint_eq(res->n_tokens, 3);
    ck_assert_int_ge(find_match(res, 15, 0), 0);

    /* {year} wants four digits. */
    ck_assert_int_ge(find_match(match(&lex, "since 1999"), 14, 0), 0);
    ck_assert_int_eq(find_match(match(&lex, "since 99"), 14, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "since 12345"), 14, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "since 0999"), 14, 0), -1);
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_numbers)
{
    struct lexicon lex;
    struct lex_result *res;
    const char *text = "2.5 1,000 42 ten 9999999999 3.";

    build(&lex);
    res = match(&lex, text);
    {
        const char *const expect[] = {"2.5", "1,000", "42", "ten", "9999999999", "3"};
        assert_tokens(text, res, expect, 6);
    }
    ck_assert_uint_eq(res->tokens[0].flags & LEX_NUMERIC, LEX_NUMERIC);
    ck_assert_int_eq(res->tokens[0].number, -1);     /* not a whole number */
    ck_assert_uint_eq(res->tokens[1].flags & LEX_NUMERIC, LEX_NUMERIC);
    ck_assert_int_eq(res->tokens[1].number, -1);
    ck_assert_int_eq(res->tokens[2].number, 42);
    ck_assert_uint_eq(res->tokens[2].flags & LEX_NUMERIC, LEX_NUMERIC);
    ck_assert_int_eq(res->tokens[3].number, 10);      /* a number word */
    ck_assert_uint_eq(res->tokens[3].flags & LEX_NUMERIC, 0);
    ck_assert_int_eq(res->tokens[4].number, -1);      /* too long to hold */
    ck_assert_int_eq(res->tokens[5].number, 3);       /* the full stop ends a sentence */

    /* Words and mixed tokens are not numbers. */
    res = match(&lex, "papers 3d x2");
    ck_assert_int_eq(res->tokens[0].number, -1);
    ck_assert_int_eq(res->tokens[1].number, -1);
    ck_assert_uint_eq(res->tokens[1].flags & LEX_NUMERIC, 0);
    ck_assert_int_eq(res->tokens[2].number, -1);

    /* Number words fill {n}. */
    res = match(&lex, "the last ten years");
    ck_assert_int_ge(find_match(res, 13, 1), 0);
    ck_assert_int_eq(res->matches[find_match(res, 13, 1)].slot[0], 10);
    res = match(&lex, "the last 7 years");
    ck_assert_int_eq(res->matches[find_match(res, 13, 1)].slot[0], 7);
    /* A multi-word number is a phrase of its own. */
    res = match(&lex, "a few papers");
    ck_assert_int_ge(find_match(res, 12, 0), 0);
    ck_assert_int_eq(res->matches[find_match(res, 12, 0)].value, 3);
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_number_glued_to_name)
{
    struct lexicon lex;
    struct lex_result *res;
    const char *text = "COVID-19 papers";

    build(&lex);
    res = match(&lex, text);
    {
        const char *const expect[] = {"COVID", "19", "papers"};
        assert_tokens(text, res, expect, 3);
    }
    ck_assert_uint_eq(res->tokens[1].flags & LEX_JOINED, LEX_JOINED);
    ck_assert_int_eq(res->tokens[1].number, -1);
    /* So "COVID-19 km to miles" has no number for {n}. */
    res = match(&lex, "covid-19 km to miles");
    ck_assert_int_eq(find_match(res, 9, 1), -1);
    ck_assert_int_ge(find_match(match(&lex, "covid 19 km to miles"), 9, 1), 0);
    /* Nor does the number before a glued word the lexicon does not know
     * ("10-fold"); before a known one it stays a number ("10-km",
     * "2015-present"). */
    res = match(&lex, "a 10-fold rise");
    ck_assert_uint_eq(res->n_tokens, 4);
    ck_assert_int_eq(res->tokens[1].number, -1);
    res = match(&lex, "a 10-km run");
    ck_assert_uint_eq(res->n_tokens, 4);
    ck_assert_int_eq(res->tokens[1].number, 10);
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_case_and_flags)
{
    struct lexicon lex;
    struct lex_result *res;
    const char *text = "FIND papers, km: miles; usd! eur? ten (a) few. X\xe2\x80\xa6y \"z\"";

    build(&lex);
    res = match(&lex, text);
    {
        const char *const expect[] = {"FIND", "papers", "km", "miles", "usd", "eur", "ten",
                                      "a", "few", "X", "y", "z"};
        assert_tokens(text, res, expect, 12);
    }
    ck_assert_uint_eq(res->tokens[0].word, lexicon_word(&lex, "find", 4));
    ck_assert_uint_eq(res->tokens[0].flags, 0);
    ck_assert_uint_eq(res->tokens[1].flags, 0);
    ck_assert_uint_eq(res->tokens[2].flags, LEX_BREAK);     /* , */
    ck_assert_uint_eq(res->tokens[3].flags, LEX_BREAK);     /* : */
    ck_assert_uint_eq(res->tokens[4].flags, LEX_SENTENCE);  /* ; */
    ck_assert_uint_eq(res->tokens[5].flags, LEX_SENTENCE);  /* ! */
    ck_assert_uint_eq(res->tokens[6].flags, LEX_SENTENCE);  /* ? */
    ck_assert_uint_eq(res->tokens[7].flags, LEX_BREAK);     /* ( */
    ck_assert_uint_eq(res->tokens[8].flags, LEX_BREAK);     /* ) */
    ck_assert_uint_eq(res->tokens[9].flags, LEX_SENTENCE);  /* . */
    ck_assert_uint_eq(res->tokens[10].flags, LEX_SENTENCE); /* … */
    ck_assert_uint_eq(res->tokens[11].flags, LEX_BREAK);    /* " */
    ck_assert_uint_eq(res->tokens[1].start, 5);
    ck_assert_uint_eq(res->tokens[1].len, 6);
    ck_assert_uint_eq(res->categories & (1u << C_FIND), 1u << C_FIND);
    ck_assert_uint_eq(res->categories & (1u << C_NOUN), 1u << C_NOUN);
    ck_assert_uint_eq(res->categories & (1u << C_REQUEST), 0);
    ck_assert(!res->truncated);

    /* Unknown and over-long words have id 0. */
    char long_word[LEX_MAX_WORD + 10];
    memset(long_word, 'p', sizeof(long_word) - 1);
    long_word[sizeof(long_word) - 1] = '\0';
    res = match(&lex, long_word);
    ck_assert_uint_eq(res->n_tokens, 1);
    ck_assert_uint_eq(res->tokens[0].len, sizeof(long_word) - 1);
    ck_assert_uint_eq(res->tokens[0].word, 0);
    ck_assert_uint_eq(match(&lex, "zebra")->tokens[0].word, 0);
    ck_assert_uint_eq(lexicon_word(&lex, "zebra", 5), 0);
    ck_assert_uint_eq(lexicon_word(&lex, "PAPERS", 6), 0);  /* the vocabulary is lower case */

    /* Only `n` bytes are read. */
    res = match(&lex, "papers");
    ck_assert_uint_eq(res->n_tokens, 1);
    lexicon_match(&lex, "papers km", 6, res);
    ck_assert_uint_eq(res->n_tokens, 1);
    lexicon_match(&lex, "", 0, res);
    ck_assert_uint_eq(res->n_tokens, 0);
    ck_assert_uint_eq(res->n_matches, 0);
    lexicon_release(&lex);
}
END_TEST

/* ---- matching ---------------------------------------------------------- */

START_TEST(test_slots)
{
    struct lexicon lex;
    struct lex_result *res;
    int m;

    build(&lex);
    res = match(&lex, "convert 5 km to miles please");
    m = find_match(res, 9, 1);
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(res->matches[m].n, 4);
    ck_assert_int_eq(res->matches[m].category, C_CONVERT);
    ck_assert_int_eq(res->matches[m].slot[0], 5);
    ck_assert_int_eq(res->matches[m].slot[1], -1);  /* {unit} captures nothing */
    /* {unit} wants a word that is itself a unit phrase. */
    ck_assert_int_eq(find_match(match(&lex, "5 km to apples"), 9, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "five km to miles"), 9, 0), -1);
    ck_assert_int_ge(find_match(match(&lex, "ten km to miles"), 9, 0), 0);
    /* {n} takes any number; a decimal fills it without a whole value. */
    res = match(&lex, "2.5 km to miles");
    m = find_match(res, 9, 0);
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(res->matches[m].slot[0], -1);
    /* Matches that start with a slot are found at any position. */
    res = match(&lex, "what is the usd to eur rate");
    ck_assert_int_ge(find_match(res, 10, 3), 0);
    ck_assert_int_eq(res->matches[find_match(res, 10, 3)].value, 1);
    lexicon_release(&lex);
}
END_TEST

/* Matches at one position: the first is the longest, and lengths never grow. */
static void assert_longest_first(const struct lex_result *res)
{
    for (uint32_t m = 1; m < res->n_matches; m++) {
        const struct lex_match *prev = &res->matches[m - 1], *cur = &res->matches[m];
        ck_assert_uint_ge(cur->start, prev->start);
        if (cur->start == prev->start)
            ck_assert_msg(cur->n <= prev->n, "at token %u: phrase %u (%u tokens) after phrase "
                          "%u (%u tokens)", cur->start, cur->phrase, cur->n, prev->phrase, prev->n);
    }
}

START_TEST(test_longest_first)
{
    struct lexicon lex;
    struct lex_result *res;

    build(&lex);
    res = match(&lex, "find me some papers");
    ck_assert_uint_ge(res->n_matches, 4);
    ck_assert_uint_eq(res->matches[0].phrase, 2);   /* find me some */
    ck_assert_uint_eq(res->matches[1].phrase, 1);   /* find me */
    ck_assert_uint_eq(res->matches[2].phrase, 0);   /* find */
    ck_assert_uint_eq(res->matches[0].n, 3);
    assert_longest_first(res);

    /* Also when the longer phrase starts with a slot and the shorter with
     * the word itself: "usd" is a unit, "usd to eur rate" a conversion. */
    res = match(&lex, "usd to eur rate");
    ck_assert_uint_ge(res->n_matches, 2);
    ck_assert_uint_eq(res->matches[0].start, 0);
    ck_assert_uint_eq(res->matches[0].phrase, 10);
    ck_assert_uint_eq(res->matches[0].n, 4);
    assert_longest_first(res);
    res = match(&lex, "ten km to miles");
    ck_assert_uint_eq(res->matches[0].phrase, 9);
    assert_longest_first(res);
    lexicon_release(&lex);
}
END_TEST

/* A dot inside a word or before a lower-case word is no sentence end:
 * "U.S. opioid", "Node.js", "vs. exercise"; one before a capital is. */
START_TEST(test_abbreviation_dots)
{
    struct lexicon lex;
    struct lex_result *res;

    build(&lex);
    res = match(&lex, "the U.S. opioid crisis in Node.js vs. exercise. Then");
    {
        const char *const expect[] = {"the", "U.S.", "opioid", "crisis", "in", "Node.js", "vs",
                                      "exercise", "Then"};
        assert_tokens("the U.S. opioid crisis in Node.js vs. exercise. Then", res, expect, 9);
    }
    ck_assert_uint_eq(res->tokens[2].flags, 0);
    ck_assert_uint_eq(res->tokens[7].flags, 0);
    ck_assert_uint_eq(res->tokens[8].flags, LEX_SENTENCE);
    lexicon_release(&lex);
}
END_TEST

/* Currency signs are tokens of their own, so "$1,200" and "50€" give a
 * sign and a number; "/" joins rather than breaks ("9/11"). */
START_TEST(test_currency_and_slash)
{
    struct lexicon lex;
    struct lex_result *res;

    build(&lex);
    res = match(&lex, "$1,200 and 50\xe2\x82\xac and \xc2\xa3" "3 on 9/11");
    {
        const char *const expect[] = {"$", "1,200", "and", "50", "\xe2\x82\xac", "and",
                                      "\xc2\xa3", "3", "on", "9", "11"};
        assert_tokens("$1,200 and 50\xe2\x82\xac and \xc2\xa3" "3 on 9/11", res, expect, 11);
    }
    ck_assert_uint_eq(res->tokens[1].flags & LEX_NUMERIC, LEX_NUMERIC);
    ck_assert_int_eq(res->tokens[3].number, 50);
    ck_assert_int_eq(res->tokens[7].number, 3);
    ck_assert_uint_eq(res->tokens[10].flags & (LEX_BREAK | LEX_SENTENCE), 0);
    lexicon_release(&lex);
}
END_TEST

/* A number glued to a word of a {slot} class splits ("5km" → "5" "km"),
 * so "{n} {unit}" matches both spellings; a word of no slot class stays
 * glued ("5g", "1990s"), and a lexicon without class slots splits nothing. */
START_TEST(test_glued_unit)
{
    struct lexicon lex, plain;
    struct lex_result *res;
    int m;
    const char *glued = "5km to miles, 2.5KM to miles, 1,000km to miles";
    const char *whole = "5g and 1990s and 3d and km5";

    build(&lex);
    res = match(&lex, glued);
    {
        const char *const expect[] = {"5", "km", "to", "miles", "2.5", "KM", "to", "miles",
                                      "1,000", "km", "to", "miles"};
        assert_tokens(glued, res, expect, 12);
    }
    ck_assert_int_eq(res->tokens[0].number, 5);
    ck_assert_uint_eq(res->tokens[0].flags & LEX_NUMERIC, LEX_NUMERIC);
    ck_assert_uint_eq(res->tokens[1].flags & LEX_GLUED, LEX_GLUED);
    ck_assert_uint_eq(res->tokens[2].flags & LEX_GLUED, 0);
    ck_assert_int_eq(res->tokens[4].number, -1);           /* a decimal: no whole value */
    ck_assert_uint_eq(res->tokens[4].flags & LEX_NUMERIC, LEX_NUMERIC);
    ck_assert_uint_eq(res->tokens[4].flags & LEX_BREAK, LEX_BREAK);  /* the comma stays */
    m = find_match(res, 9, 0);
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(res->matches[m].slot[0], 5);
    ck_assert_int_ge(find_match(res, 9, 4), 0);
    ck_assert_int_ge(find_match(res, 9, 8), 0);
    /* Not a unit of the lexicon: one token, as before. */
    res = match(&lex, whole);
    {
        const char *const expect[] = {"5g", "and", "1990s", "and", "3d", "and", "km5"};
        assert_tokens(whole, res, expect, 7);
    }
    /* Without {CATEGORY} slots no lexicon splits anything. */
    lexicon_init(&plain);
    add(&plain, C_UNIT, 0, "km");
    ck_assert_int_eq(lexicon_compile(&plain), KEEL_OK);
    res = match(&plain, "5km");
    ck_assert_uint_eq(res->n_tokens, 1);
    lexicon_release(&plain);
    lexicon_release(&lex);
}
END_TEST

/* {word} takes any one word that is not a number. */
START_TEST(test_word_slot)
{
    struct lexicon lex;

    lexicon_init(&lex);
    add(&lex, C_UNIT, 0, "km");                        /* 0 */
    add(&lex, C_CONVERT, 0, "{n} {word} to {unit}");   /* 1 */
    ck_assert_int_eq(lexicon_compile(&lex), KEEL_OK);
    ck_assert_int_ge(find_match(match(&lex, "3 parsecs to km"), 1, 0), 0);
    ck_assert_int_ge(find_match(match(&lex, "convert 100 XYZ to km"), 1, 1), 0);
    ck_assert_int_ge(find_match(match(&lex, "3 km to km"), 1, 0), 0);
    ck_assert_int_eq(find_match(match(&lex, "3 5 to km"), 1, 0), -1);     /* a number */
    ck_assert_int_eq(find_match(match(&lex, "3 parsecs to paris"), 1, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "3 parsecs, to km"), 1, 0), -1);  /* a break */
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_no_match_across_sentence)
{
    struct lexicon lex;

    build(&lex);
    ck_assert_int_ge(find_match(match(&lex, "find me"), 1, 0), 0);
    ck_assert_int_eq(find_match(match(&lex, "find. Me"), 1, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "find! Me"), 1, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "find, me"), 1, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "find (me)"), 1, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "5 km. To miles"), 9, 0), -1);
    ck_assert_int_eq(find_match(match(&lex, "since: 2020"), 14, 0), -1);
    /* A break before the first word of a phrase is fine. */
    ck_assert_int_ge(find_match(match(&lex, "ok. find me"), 1, 1), 0);
    /* A phrase needs all its words: "find" at the end is not "find me". */
    ck_assert_int_eq(find_match(match(&lex, "papers find"), 1, 1), -1);
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_caps_truncate)
{
    struct lexicon lex;
    struct lex_result *res = malloc(sizeof(*res));
    size_t n = LEX_MAX_TOKENS + 100;
    char *text = malloc(n * 2 + 1);

    ck_assert_ptr_nonnull(res);
    ck_assert_ptr_nonnull(text);
    build(&lex);
    /* Too many tokens. */
    for (size_t i = 0; i < n; i++)
        memcpy(text + i * 2, "x ", 2);
    lexicon_match(&lex, text, n * 2, res);
    ck_assert_uint_eq(res->n_tokens, LEX_MAX_TOKENS);
    ck_assert(res->truncated);
    /* Few tokens, each matching twice: too many matches. */
    lexicon_release(&lex);
    lexicon_init(&lex);
    add(&lex, C_MANY, 0, "x");
    add(&lex, C_MANY, 1, "x x");
    ck_assert_int_eq(lexicon_compile(&lex), KEEL_OK);
    lexicon_match(&lex, text, 300 * 2, res);
    ck_assert_uint_eq(res->n_tokens, 300);
    ck_assert_uint_eq(res->n_matches, LEX_MAX_MATCHES);
    ck_assert(res->truncated);
    /* Under both caps: not truncated. */
    lexicon_match(&lex, text, 200 * 2, res);
    ck_assert_uint_eq(res->n_matches, 200 + 199);
    ck_assert(!res->truncated);
    lexicon_release(&lex);
    free(text);
    free(res);
}
END_TEST

/* ---- building ---------------------------------------------------------- */

START_TEST(test_add_errors)
{
    struct lexicon lex;
    struct keel_error err;
    uint32_t words, phrases;
    const char *const bad[] = {
        "", "   ", "...", "{nope} papers", "papers {n", "one two three four five six seven eight nine",
        "{n} {n} {n} {n} {n} {n} {n} {n} {n}",
        "papersxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    };

    build(&lex);
    words = lex.n_words;
    phrases = lex.n_phrases;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        keel_error_clear(&err);
        ck_assert_msg(lexicon_add(&lex, C_NOUN, 0, bad[i], category_of_name,
                                  "policy.phrases.noun[3]", &err) == KEEL_EINVAL,
                      "accepted \"%s\"", bad[i]);
        ck_assert_str_eq(err.field, "policy.phrases.noun[3]");
        ck_assert_str_ne(err.message, "");
        /* The lexicon is unchanged on failure. */
        ck_assert_uint_eq(lex.n_phrases, phrases);
        ck_assert_msg(lex.n_words == words, "\"%s\" added %u word(s)", bad[i],
                      lex.n_words - words);
    }
    ck_assert_uint_eq(lexicon_word(&lex, "nine", 4), 0);
    ck_assert_int_eq(lexicon_add(&lex, C_NOUN, 0, "{nope}", category_of_name, "f", &err),
                     KEEL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "{nope}"));
    ck_assert_int_eq(lexicon_add(&lex, C_NOUN, 0, "{unit}", NULL, "f", &err), KEEL_EINVAL);
    ck_assert_int_eq(lexicon_add(&lex, LEX_MAX_CATEGORIES, 0, "x", category_of_name, "f", &err),
                     KEEL_EINVAL);
    ck_assert_int_eq(lexicon_add(&lex, -1, 0, "x", category_of_name, "f", &err), KEEL_EINVAL);
    ck_assert_int_eq(lexicon_add(&lex, C_NOUN, 40000, "x", category_of_name, "f", &err),
                     KEEL_EINVAL);
    ck_assert_uint_eq(lex.n_phrases, phrases);
    /* Eight items is the most, and allowed. */
    ck_assert_int_eq(lexicon_add(&lex, C_NOUN, 0, "one two three four five six seven eight",
                                 category_of_name, "f", &err), KEEL_OK);
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_uncompiled_and_recompile)
{
    struct lexicon lex;
    struct lex_result *res;

    lexicon_init(&lex);
    res = match(&lex, "find papers");   /* empty lexicon: tokens only */
    ck_assert_uint_eq(res->n_tokens, 2);
    ck_assert_uint_eq(res->n_matches, 0);
    ck_assert_uint_eq(res->tokens[0].word, 0);
    add(&lex, C_NOUN, 0, "papers");
    res = match(&lex, "find papers");   /* not compiled yet: no matches */
    ck_assert_uint_eq(res->n_matches, 0);
    ck_assert_uint_ne(res->tokens[1].word, 0);
    ck_assert_int_eq(lexicon_compile(&lex), KEEL_OK);
    ck_assert_uint_eq(match(&lex, "find papers")->n_matches, 1);
    /* Adding after a compile needs another compile. */
    add(&lex, C_FIND, 0, "find");
    ck_assert_uint_eq(match(&lex, "find papers")->n_matches, 0);
    ck_assert_int_eq(lexicon_compile(&lex), KEEL_OK);
    ck_assert_uint_eq(match(&lex, "find papers")->n_matches, 2);
    lexicon_release(&lex);
    lexicon_release(&lex);  /* released twice is harmless */

    /* Many words force the vocabulary to grow and rehash. */
    lexicon_init(&lex);
    for (int i = 0; i < 1000; i++) {
        char word[16];
        snprintf(word, sizeof(word), "w%d", i);
        add(&lex, C_NOUN, i, word);
    }
    ck_assert_int_eq(lexicon_compile(&lex), KEEL_OK);
    for (int i = 0; i < 1000; i += 37) {
        char word[16];
        snprintf(word, sizeof(word), "W%d", i);
        res = match(&lex, word);
        ck_assert_uint_eq(res->n_matches, 1);
        ck_assert_int_eq(res->matches[0].value, i);
    }
    lexicon_release(&lex);
}
END_TEST

START_TEST(test_match_never_allocates)
{
    struct lexicon lex;
    struct lex_result *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    const char *text = "Find me some open-access papers: 5 km to miles, since 2019; "
                       "the last ten years (2018\xe2\x80\x93" "2022) don\xe2\x80\x99t search";
    long live;

    build(&lex);
    lexicon_match(&lex, text, strlen(text), a);
    live = keel_alloc_live();
    keel_alloc_fail_after(0, 1);
    lexicon_match(&lex, text, strlen(text), b);
    keel_alloc_fail_after(-1, 0);
    ck_assert_int_eq(keel_alloc_live(), live);
    ck_assert_uint_eq(a->n_tokens, b->n_tokens);
    ck_assert_uint_eq(a->n_matches, b->n_matches);
    ck_assert_mem_eq(a->tokens, b->tokens, a->n_tokens * sizeof(a->tokens[0]));
    ck_assert_mem_eq(a->matches, b->matches, a->n_matches * sizeof(a->matches[0]));
    ck_assert_uint_gt(a->n_matches, 8);
    lexicon_release(&lex);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_build_enomem_sweep)
{
    static const struct {
        int category;
        const char *text;
    } phrases[] = {
        {C_FIND, "find"}, {C_REQUEST, "find me"}, {C_NOUN, "papers"},
        {C_CONVERT, "{n} {unit} to {unit}"}, {C_UNIT, "km"}, {C_UNIT, "miles"},
        {C_YEAR, "last {n} years"}, {C_YEAR, "since {year}"}, {C_YEAR, "{year} - {year}"},
        {C_OPEN, "open-access"}, {C_REQUEST, "don't search"},
    };
    long before = keel_alloc_live(), n;
    int rc = KEEL_ENOMEM;

    for (n = 0; rc != KEEL_OK; n++) {
        struct lexicon lex;
        struct keel_error err;
        size_t i;

        lexicon_init(&lex);
        keel_alloc_fail_after(n, 0);
        rc = KEEL_OK;
        for (i = 0; i < sizeof(phrases) / sizeof(phrases[0]) && !rc; i++)
            rc = lexicon_add(&lex, phrases[i].category, 0, phrases[i].text, category_of_name,
                             "p", &err);
        if (!rc)
            rc = lexicon_compile(&lex);
        keel_alloc_fail_after(-1, 0);
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "allocation %ld: rc %d", n, rc);
        if (rc == KEEL_OK)
            ck_assert_int_ge(find_match(match(&lex, "5 km to miles"), 3, 0), 0);
        lexicon_release(&lex);
        ck_assert_int_eq(keel_alloc_live(), before);
    }
    ck_assert_int_gt(n, 10);
}
END_TEST

/* utf8_valid_prefix: well-formed text passes whole; each kind of
 * malformed sequence stops the prefix right before it. */
START_TEST(test_utf8_valid)
{
    static const char ok[] = "caf\xc3\xa9 \xe2\x80\x93 \xf0\x9f\x93\x9a plain";
    ck_assert_uint_eq(utf8_valid_prefix(ok, sizeof(ok) - 1), sizeof(ok) - 1);
    ck_assert_uint_eq(utf8_valid_prefix("", 0), 0);
}
END_TEST

START_TEST(test_utf8_invalid)
{
    struct { const char *text; size_t n, valid; } cases[] = {
        {"ab\xff", 3, 2},                  /* never a UTF-8 byte */
        {"ab\xc0\xaf", 4, 2},              /* overlong '/' */
        {"a\xe0\x80\xaf", 4, 1},           /* overlong three-byte */
        {"a\xed\xa0\x80", 4, 1},           /* surrogate U+D800 */
        {"a\xf4\x90\x80\x80", 5, 1},       /* above U+10FFFF */
        {"abc\xe2\x80", 5, 3},             /* cut in the middle */
        {"a\xc3" "b", 3, 1},               /* bad continuation */
        {"ab\0cd", 5, 2},                  /* NUL */
        {"\x80", 1, 0},                    /* lone continuation */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(utf8_valid_prefix(cases[i].text, cases[i].n) == cases[i].valid,
                      "case %zu: got %zu, want %zu", i,
                      utf8_valid_prefix(cases[i].text, cases[i].n), cases[i].valid);
}
END_TEST

/* The same cases at every offset from 0 to 40 behind plain ASCII and
 * well-formed multibyte text, so the bad byte falls at every position of
 * the sixteen-byte blocks the validator skips through. */
START_TEST(test_utf8_invalid_at_every_offset)
{
    static const char *const bad[] = {"\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80",
                                      "\xf4\x90\x80\x80", "\xe2\x80", "\xc3" "b", "\x80"};
    static const char *const fill[] = {"abcdefghij", "\xc3\xa9", "\xf0\x9f\x93\x9a", "x y"};
    char text[128];

    for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
        for (size_t f = 0; f < sizeof(fill) / sizeof(fill[0]); f++)
            for (size_t at = 0; at <= 40; at++) {
                size_t len = 0, n = strlen(bad[b]);
                while (len < at) {   /* whole fill pieces, then ASCII up to `at` */
                    size_t k = strlen(fill[f]);
                    if (len + k > at)
                        k = 0;
                    if (!k) {
                        text[len++] = 'q';
                        continue;
                    }
                    memcpy(text + len, fill[f], k);
                    len += k;
                }
                memcpy(text + len, bad[b], n);
                memcpy(text + len + n, "tail that is long enough", 24);
                ck_assert_uint_eq(utf8_valid_prefix(text, len + n + 24), at);
                text[at] = '\0';   /* and a NUL there stops it too */
                ck_assert_uint_eq(utf8_valid_prefix(text, len + n + 24), at);
                ck_assert_uint_eq(utf8_valid_prefix(text, at), at);
            }
}
END_TEST


START_TEST(test_utf8_repair)
{
    struct keel_buf out;

    keel_buf_init(&out, 0);
    ck_assert_int_eq(utf8_repair("caf\xe9 ok \xc3\xa9", 10, &out), KEEL_OK);
    ck_assert_str_eq(out.data, "caf\xef\xbf\xbd ok \xc3\xa9");
    ck_assert_uint_eq(utf8_valid_prefix(out.data, out.len), out.len);
    keel_buf_release(&out);
    keel_buf_init(&out, 4);  /* a cap the repair would pass: nothing is kept */
    ck_assert_int_eq(utf8_repair("ab\xff", 3, &out), KEEL_ETOOBIG);
    ck_assert_uint_eq(out.len, 0);
    keel_buf_release(&out);
}
END_TEST

Suite *suite_lexicon(void)
{
    Suite *s = suite_create("lexicon");
    TCase *tokens = tcase_create("tokens"), *matching = tcase_create("match");
    TCase *building = tcase_create("build");

    unit_leak_fixture(tokens);
    tcase_add_test(tokens, test_hyphen_split_joined);
    tcase_add_test(tokens, test_apostrophes);
    tcase_add_test(tokens, test_year_ranges);
    tcase_add_test(tokens, test_numbers);
    tcase_add_test(tokens, test_number_glued_to_name);
    tcase_add_test(tokens, test_case_and_flags);
    tcase_add_test(tokens, test_abbreviation_dots);
    tcase_add_test(tokens, test_currency_and_slash);
    tcase_add_test(tokens, test_utf8_valid);
    tcase_add_test(tokens, test_utf8_invalid);
    tcase_add_test(tokens, test_utf8_invalid_at_every_offset);
    tcase_add_test(tokens, test_utf8_repair);
    suite_add_tcase(s, tokens);

    unit_leak_fixture(matching);
    tcase_add_test(matching, test_slots);
    tcase_add_test(matching, test_glued_unit);
    tcase_add_test(matching, test_word_slot);
    tcase_add_test(matching, test_longest_first);
    tcase_add_test(matching, test_no_match_across_sentence);
    tcase_add_test(matching, test_caps_truncate);
    suite_add_tcase(s, matching);

    unit_leak_fixture(building);
    tcase_add_test(building, test_add_errors);
    tcase_add_test(building, test_uncompiled_and_recompile);
    tcase_add_test(building, test_match_never_allocates);
    tcase_add_test(building, test_build_enomem_sweep);
    suite_add_tcase(s, building);
    return s;
}
