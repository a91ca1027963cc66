/*
 * lexicon.h — a compiled phrase table and the tokenizer/matcher over it.
 *
 * A pack's phrase lists ("can you find me", "last {n} years", …) are
 * compiled once into a lexicon: a vocabulary (lower-cased word → id, open
 * addressing) and phrases as sequences of word ids and slots, indexed by
 * their first word. A message is then tokenized into a fixed array and
 * matched against every phrase in one pass, without allocating, so the
 * policy decision stays well under a microsecond.
 *
 * Slots in a phrase: `{n}` matches a number (digits or a number word),
 * `{year}` a four-digit year, `{word}` any one word that is not a number,
 * `{CATEGORY}` any single word that is itself a one-word phrase of that
 * category (e.g. `{unit}`).
 *
 * Matching is ASCII case-insensitive; UTF-8 passes through as word bytes,
 * except that ’ counts as an apostrophe and – — as a dash. A hyphen inside
 * a word splits it ("open-access" → "open" "access") with the second token
 * marked LEX_JOINED, so "open access" matches both spellings. A number
 * glued to a word of a category used as a `{CATEGORY}` slot splits in two
 * ("5km" → "5" "km", the second marked LEX_GLUED), so "{n} {unit}" matches
 * both spellings; other glued tokens ("5g", "1990s") stay whole.
 */
#ifndef KEEL_TEXT_LEXICON_H
#define KEEL_TEXT_LEXICON_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define LEX_MAX_PHRASE_ITEMS 8
#define LEX_MAX_CATEGORIES 64
#define LEX_MAX_TOKENS 512
#define LEX_MAX_MATCHES 512
#define LEX_MAX_WORD 48        /* longer tokens are never vocabulary words */

/* Token flags. */
#define LEX_JOINED 0x01        /* joined to the previous token by a hyphen */
#define LEX_BREAK 0x02         /* a comma/colon/parenthesis precedes it */
#define LEX_SENTENCE 0x04      /* a sentence end (. ! ? ;) precedes it */
#define LEX_NUMERIC 0x08       /* digits, maybe with one decimal point */
#define LEX_GLUED 0x10         /* a word split off the number before it ("5km") */

struct lex_token {
    uint32_t start;   /* byte offset in the message */
    uint32_t len;     /* bytes */
    uint32_t word;    /* vocabulary id, 0 when unknown */
    int32_t number;   /* integer value of a number token or number word, else -1 */
    uint32_t flags;
};

struct lex_match {
    uint16_t category;
    int16_t value;     /* the phrase's value (e.g. a number word's value) */
    uint16_t start;    /* first token */
    uint16_t n;        /* tokens covered */
    int32_t slot[2];   /* numbers captured by the first two {n}/{year} slots, else -1 */
    uint32_t phrase;   /* index of the phrase, in compile order */
};

struct lex_phrase;

struct lexicon {
    /* vocabulary */
    char **words;              /* id -> lower-cased word; words[0] unused */
    uint8_t *word_len;
    uint64_t *word_classes;    /* id -> categories where the word alone is a phrase */
    int32_t *word_number;      /* id -> number value, or -1 */
    uint32_t n_words, cap_words;
    uint32_t *table;           /* hash slots holding ids, 0 = empty */
    uint32_t table_mask;
    /* phrases */
    struct lex_phrase *phrases;
    uint32_t n_phrases, cap_phrases;
    uint32_t *by_first;        /* phrase indices sorted by first word */
    uint32_t *first_start;     /* word id -> range in by_first; n_words+1 entries */
    uint32_t *slot_first;      /* phrases that start with a slot */
    uint64_t slot_classes;     /* categories some phrase uses as a {slot} */
    uint32_t n_slot_first;
    int compiled;
};

/* The result of matching one message. Lives on the caller's stack. */
struct lex_result {
    struct lex_token tokens[LEX_MAX_TOKENS];
    struct lex_match matches[LEX_MAX_MATCHES];
    uint32_t n_tokens;
    uint32_t n_matches;
    uint64_t categories;       /* bit c set when any match has category c */
    int truncated;             /* tokens or matches hit their cap */
};

/* Initialises an empty lexicon. Never fails. */
void lexicon_init(struct lexicon *lex);

/* Frees everything the lexicon owns. */
void lexicon_release(struct lexicon *lex);

/* Adds a phrase of `category` (< LEX_MAX_CATEGORIES) with `value`. The text
 * is tokenized like a message; `{n}`, `{year}` and `{NAME}` become slots,
 * where NAME is resolved through `category_of_name` (returns -1 when
 * unknown). Returns KEEL_EINVAL (err names `field`) for an empty phrase,
 * too many items or an unknown slot, KEEL_ENOMEM; the lexicon is unchanged
 * on failure. Must be called before lexicon_compile. */
int lexicon_add(struct lexicon *lex, int category, int value, const char *text,
                int (*category_of_name)(const char *name, size_t n),
                const char *field, struct keel_error *err);

/* Gives every one-word phrase of `category` its phrase value as a number,
 * so number words ("ten") fill {n} slots. Call after the last add. */
void lexicon_set_number_category(struct lexicon *lex, int category);

/* Builds the first-word index. Returns KEEL_ENOMEM on failure. */
int lexicon_compile(struct lexicon *lex);

/* Returns the id of `word` (lower-case, `n` bytes), or 0. */
uint32_t lexicon_word(const struct lexicon *lex, const char *word, size_t n);

/* Tokenizes `text` (`n` bytes) and matches every phrase. Never allocates;
 * stops at the caps and sets out->truncated. */
void lexicon_match(const struct lexicon *lex, const char *text, size_t n,
                   struct lex_result *out);

/* Returns nonzero when token `i` of `res` is a one-word phrase of `category`. */
static inline int lex_token_is(const struct lexicon *lex, const struct lex_result *res,
                               uint32_t i, int category)
{
    uint32_t w = res->tokens[i].word;
    return w && (lex->word_classes[w] >> category & 1);
}

#endif
