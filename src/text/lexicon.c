/*
 * lexicon.c — tokenizer, vocabulary, phrase compilation and matching.
 *
 * The hot path is lexicon_match(): one left-to-right scan that hashes each
 * token's lower-cased bytes (FNV-1a) into the vocabulary, then tries only
 * the phrases whose first item can match that token. It writes into the
 * caller's lex_result and never allocates; work is linear in the message
 * length times the (small, pack-bounded) number of phrases per first word.
 */
#include "text/lexicon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

#define ITEM_WORD 0u
#define ITEM_NUMBER 1u
#define ITEM_YEAR 2u
#define ITEM_CLASS 3u
#define ITEM_WORD_ANY 4u
#define ITEM_KIND(item) ((item) >> 29)
#define ITEM_ARG(item) ((item) & 0x1fffffffu)
#define MAKE_ITEM(kind, arg) (((uint32_t)(kind) << 29) | (uint32_t)(arg))

struct lex_phrase {
    uint16_t category;
    int16_t value;
    uint8_t n;
    uint32_t items[LEX_MAX_PHRASE_ITEMS];
};

/* One token as the scanner sees it, with its normalised spelling. */
struct raw_token {
    size_t start, len;
    uint32_t flags;
    uint32_t hash;
    size_t norm_len;           /* > LEX_MAX_WORD means "too long to be a word" */
    char norm[LEX_MAX_WORD + 1];
};

void lexicon_init(struct lexicon *lex)
{
    memset(lex, 0, sizeof(*lex));
}

void lexicon_release(struct lexicon *lex)
{
    for (uint32_t i = 1; i < lex->n_words; i++)
        keel_free(lex->words[i]);
    keel_free(lex->words);
    keel_free(lex->word_len);
    keel_free(lex->word_classes);
    keel_free(lex->word_number);
    keel_free(lex->table);
    keel_free(lex->phrases);
    keel_free(lex->by_first);
    keel_free(lex->first_start);
    keel_free(lex->slot_first);
    memset(lex, 0, sizeof(*lex));
}

/* ---- scanning ------------------------------------------------------- */

static inline int is_ascii_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static inline int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Classifies the character at text[i]: returns its byte length and sets
 * *kind to 'w' (word), '\'' (apostrophe), '-' (dash), '.' (sentence end),
 * ',' (soft break) or ' ' (space/other). */
static inline size_t char_kind(const unsigned char *s, size_t n, size_t i, char *kind)
{
    unsigned char c = s[i];

    if (c < 0x80) {
        if (is_ascii_word(c))
            *kind = 'w';
        else if (c == '\'')
            *kind = '\'';
        else if (c == '-')
            *kind = '-';
        else if (c == '.' || c == '!' || c == '?' || c == ';')
            *kind = '.';
        else if (c == '$')
            *kind = '$';
        else if (c == ',' || c == ':' || c == '(' || c == ')' || c == '"' ||
                 c == '[' || c == ']')
            *kind = ',';
        else
            *kind = ' ';
        return 1;
    }
    if (c == 0xe2 && i + 2 < n && s[i + 1] == 0x80) {
        unsigned char d = s[i + 2];
        if (d == 0x98 || d == 0x99)
            *kind = '\'';
        else if (d == 0x93 || d == 0x94)
            *kind = '-';
        else if (d == 0xa6)
            *kind = '.';
        else
            *kind = ',';
        return 3;
    }
    if (c == 0xc2 && i + 1 < n && (s[i + 1] == 0xa0 || s[i + 1] == 0xab || s[i + 1] == 0xbb)) {
        *kind = s[i + 1] == 0xa0 ? ' ' : ',';
        return 2;
    }
    if (c == 0xc2 && i + 1 < n && (s[i + 1] == 0xa3 || s[i + 1] == 0xa5)) {
        *kind = '$';  /* £ ¥ */
        return 2;
    }
    if (c == 0xe2 && i + 2 < n && s[i + 1] == 0x82 && s[i + 2] == 0xac) {
        *kind = '$';  /* € */
        return 3;
    }
    *kind = 'w';
    return 1;
}

/* Nonzero when, after blanks, the text at i goes on with a lower-case
 * letter: the dot before was an abbreviation's, not a sentence's end. */
static int lowercase_follows(const unsigned char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i < n && s[i] >= 'a' && s[i] <= 'z';
}

static inline void norm_add(struct raw_token *tok, unsigned char c)
{
    if (tok->norm_len < LEX_MAX_WORD) {
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c + 32);
        tok->norm[tok->norm_len] = (char)c;
        tok->hash = (tok->hash ^ c) * 16777619u;
    }
    tok->norm_len++;
}

/* Scans the next token at or after *pos. Returns 0 at the end of input.
 * `carry` holds flags (breaks, joins) seen since the previous token. */
/* Scans the word that starts at s[i] into `tok` (start already set):
 * letters, digits and UTF-8, with apostrophes, dots and decimal
 * separators that sit inside it. A hyphen inside a word ends it and marks
 * the next token LEX_JOINED through `carry`. Sets tok->len and
 * LEX_NUMERIC; returns the position after the word. */
static size_t scan_word(const unsigned char *s, size_t n, size_t i, uint32_t *carry,
                        struct raw_token *tok)
{
    int numeric, digits_only, inner_dot;
    char kind;

    numeric = 1;
    digits_only = 1;
    inner_dot = 0;
    while (i < n) {
        size_t w = char_kind(s, n, i, &kind);
        if (kind == 'w') {
            if (w == 1 && !is_digit(s[i]))
                numeric = digits_only = 0;
            else if (w > 1 || s[i] >= 0x80)
                numeric = digits_only = 0;
            norm_add(tok, s[i]);
            i++;
            continue;
        }
        if (kind == '\'' && tok->norm_len > 0 && i + w < n) {
            char next;
            char_kind(s, n, i + w, &next);
            if (next == 'w') {
                norm_add(tok, '\'');
                numeric = digits_only = 0;
                i += w;
                continue;
            }
        }
        if (s[i] == '.' && !numeric && tok->norm_len > 0 && i + 1 < n && is_ascii_word(s[i + 1])) {
            /* U.S, Node.js, e.g: a dot between letters stays in the word. */
            norm_add(tok, '.');
            inner_dot = 1;
            i++;
            continue;
        }
        if (s[i] == '.' && inner_dot && (i + 1 >= n || !is_ascii_word(s[i + 1]))) {
            /* …and so does the closing dot of such an abbreviation. */
            norm_add(tok, '.');
            i++;
            break;
        }
        if ((s[i] == '.' || s[i] == ',') && numeric && digits_only && i + 1 < n &&
            is_digit(s[i + 1]) && tok->norm_len > 0) {
            /* 2.5 or 1,000: one numeric token with a separator. */
            norm_add(tok, s[i]);
            digits_only = 0;
            i++;
            continue;
        }
        if (kind == '-' && w == 1 && i + 1 < n) {
            char next;
            char_kind(s, n, i + 1, &next);
            if (next == 'w' && !(numeric && is_digit(s[i + 1]))) {
                /* open-access: split, mark the next token as joined. */
                tok->len = i - tok->start;
                *carry |= LEX_JOINED;
                i++;
                goto done;
            }
        }
        break;
    }
    tok->len = i - tok->start;
done:
    if (numeric)
        tok->flags |= LEX_NUMERIC;
    return i;
}

static int scan_token(const char *text, size_t n, size_t *pos, uint32_t *carry,
                      struct raw_token *tok)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = *pos;
    char kind;

    /* Skip separators, remembering what they were. */
    while (i < n) {
        size_t w = char_kind(s, n, i, &kind);
        if (kind == 'w')
            break;
        if (kind == '-' || kind == '$') {
            /* A free-standing dash, and a currency sign, are tokens of
             * their own: "2019 – 2021", "$1,200 in euros", "50€". */
            tok->start = i;
            tok->len = w;
            tok->flags = *carry;
            tok->hash = 2166136261u;
            tok->norm_len = 0;
            if (kind == '-')
                norm_add(tok, '-');
            else
                for (size_t k = 0; k < w; k++)
                    norm_add(tok, s[i + k]);
            tok->norm[tok->norm_len] = '\0';
            *carry = 0;
            *pos = i + w;
            return 1;
        }
        if (kind == '.' && !(s[i] == '.' && lowercase_follows(s, n, i + 1)))
            *carry |= LEX_SENTENCE;  /* "vs. exercise": no new sentence */
        else if (kind == ',')
            *carry |= LEX_BREAK;
        i += w;
    }
    if (i >= n) {
        *pos = i;
        return 0;
    }
    tok->start = i;
    tok->flags = *carry;
    tok->hash = 2166136261u;
    tok->norm_len = 0;
    *carry = 0;
    i = scan_word(s, n, i, carry, tok);
    if (tok->norm_len <= LEX_MAX_WORD)
        tok->norm[tok->norm_len] = '\0';
    *pos = i;
    return 1;
}

/* ---- vocabulary ----------------------------------------------------- */

static uint32_t lookup_hashed(const struct lexicon *lex, const char *word, size_t n,
                              uint32_t hash)
{
    uint32_t slot, id;

    if (!lex->table)
        return 0;
    for (slot = hash & lex->table_mask;; slot = (slot + 1) & lex->table_mask) {
        id = lex->table[slot];
        if (!id)
            return 0;
        if (lex->word_len[id] == n && !memcmp(lex->words[id], word, n))
            return id;
    }
}

static uint32_t hash_word(const char *word, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)word[i]) * 16777619u;
    return h;
}

uint32_t lexicon_word(const struct lexicon *lex, const char *word, size_t n)
{
    return lookup_hashed(lex, word, n, hash_word(word, n));
}

static int rehash(struct lexicon *lex, uint32_t size)
{
    uint32_t *table = keel_calloc(size, sizeof(*table));

    if (!table)
        return KEEL_ENOMEM;
    for (uint32_t id = 1; id < lex->n_words; id++) {
        uint32_t slot = hash_word(lex->words[id], lex->word_len[id]) & (size - 1);
        while (table[slot])
            slot = (slot + 1) & (size - 1);
        table[slot] = id;
    }
    keel_free(lex->table);
    lex->table = table;
    lex->table_mask = size - 1;
    return KEEL_OK;
}

static int grow_words(struct lexicon *lex)
{
    uint32_t cap = lex->cap_words ? lex->cap_words * 2 : 64;
    char **words = keel_realloc(lex->words, cap * sizeof(*words));
    uint8_t *lens;
    uint64_t *classes;
    int32_t *numbers;

    if (!words)
        return KEEL_ENOMEM;
    lex->words = words;
    lens = keel_realloc(lex->word_len, cap * sizeof(*lens));
    if (!lens)
        return KEEL_ENOMEM;
    lex->word_len = lens;
    classes = keel_realloc(lex->word_classes, cap * sizeof(*classes));
    if (!classes)
        return KEEL_ENOMEM;
    lex->word_classes = classes;
    numbers = keel_realloc(lex->word_number, cap * sizeof(*numbers));
    if (!numbers)
        return KEEL_ENOMEM;
    lex->word_number = numbers;
    lex->cap_words = cap;
    return KEEL_OK;
}

/* Returns the id of `word`, adding it when new; 0 on allocation failure. */
static uint32_t intern(struct lexicon *lex, const char *word, size_t n)
{
    uint32_t id = lexicon_word(lex, word, n);
    char *copy;

    if (id)
        return id;
    if (lex->n_words == 0)
        lex->n_words = 1;  /* id 0 means "unknown" */
    if (lex->n_words + 1 > lex->cap_words && grow_words(lex))
        return 0;
    if (((uint64_t)lex->n_words + 1) * 2 > (uint64_t)lex->table_mask + 1 || !lex->table) {
        uint32_t size = lex->table ? (lex->table_mask + 1) * 2 : 256;
        while ((uint64_t)(lex->n_words + 1) * 2 > size)
            size *= 2;
        if (rehash(lex, size))
            return 0;
    }
    copy = keel_strndup(word, n);
    if (!copy)
        return 0;
    id = lex->n_words++;
    lex->words[id] = copy;
    lex->word_len[id] = (uint8_t)n;
    lex->word_classes[id] = 0;
    lex->word_number[id] = -1;
    {
        uint32_t slot = hash_word(word, n) & lex->table_mask;
        while (lex->table[slot])
            slot = (slot + 1) & lex->table_mask;
        lex->table[slot] = id;
    }
    return id;
}

/* ---- phrases -------------------------------------------------------- */

/* Drops the words interned since the vocabulary held `n_words`, so a
 * failed lexicon_add leaves the lexicon as it was. Newer ids only ever
 * went into slots that were empty when they came (a rehash inserts in id
 * order too), so clearing their slots breaks no older id's probe chain. */
static void forget_words(struct lexicon *lex, uint32_t n_words)
{
    uint32_t first = n_words ? n_words : 1;

    if (lex->n_words <= first)
        return;
    for (uint32_t slot = 0; lex->table && slot <= lex->table_mask; slot++)
        if (lex->table[slot] >= first)
            lex->table[slot] = 0;
    for (uint32_t id = first; id < lex->n_words; id++)
        keel_free(lex->words[id]);
    lex->n_words = n_words;
}

static int add_phrase(struct lexicon *lex, int category, int value, const char *text,
                      int (*category_of_name)(const char *name, size_t n),
                      const char *field, struct keel_error *err)
{
    struct lex_phrase phrase;
    size_t len = strlen(text), pos = 0;
    uint32_t carry = 0;

    memset(&phrase, 0, sizeof(phrase));
    phrase.category = (uint16_t)category;
    phrase.value = (int16_t)value;
    if (category < 0 || category >= LEX_MAX_CATEGORIES)
        return keel_error_set(err, KEEL_EINVAL, field, "category out of range");
    if (value < INT16_MIN || value > INT16_MAX)
        return keel_error_set(err, KEEL_EINVAL, field, "value %d is out of range", value);
    while (pos < len) {
        const char *brace = memchr(text + pos, '{', len - pos);
        size_t seg_end = brace ? (size_t)(brace - text) : len;
        struct raw_token tok;

        /* Plain words up to the next slot. */
        while (pos < seg_end && scan_token(text, seg_end, &pos, &carry, &tok)) {
            uint32_t id;
            if (phrase.n >= LEX_MAX_PHRASE_ITEMS)
                return keel_error_set(err, KEEL_EINVAL, field,
                                      "phrase \"%s\" has more than %d words", text,
                                      LEX_MAX_PHRASE_ITEMS);
            if (tok.norm_len > LEX_MAX_WORD)
                return keel_error_set(err, KEEL_EINVAL, field,
                                      "a word in \"%s\" is longer than %d bytes", text,
                                      LEX_MAX_WORD);
            id = intern(lex, tok.norm, tok.norm_len);
            if (!id)
                return keel_error_set(err, KEEL_ENOMEM, field, "out of memory");
            phrase.items[phrase.n++] = MAKE_ITEM(ITEM_WORD, id);
        }
        pos = seg_end;
        if (brace) {
            const char *close = memchr(brace, '}', len - (size_t)(brace - text));
            size_t name_len;
            uint32_t item;
            if (!close)
                return keel_error_set(err, KEEL_EINVAL, field, "unclosed { in \"%s\"", text);
            name_len = (size_t)(close - brace - 1);
            if (name_len == 1 && brace[1] == 'n') {
                item = MAKE_ITEM(ITEM_NUMBER, 0);
            } else if (name_len == 4 && !memcmp(brace + 1, "year", 4)) {
                item = MAKE_ITEM(ITEM_YEAR, 0);
            } else if (name_len == 4 && !memcmp(brace + 1, "word", 4)) {
                item = MAKE_ITEM(ITEM_WORD_ANY, 0);
            } else {
                int cat = category_of_name ? category_of_name(brace + 1, name_len) : -1;
                if (cat < 0 || cat >= LEX_MAX_CATEGORIES)
                    return keel_error_set(err, KEEL_EINVAL, field,
                                          "unknown slot {%.*s} in \"%s\" (use {n}, {year}, {word} or a table name)",
                                          (int)name_len, brace + 1, text);
                item = MAKE_ITEM(ITEM_CLASS, cat);
                lex->slot_classes |= (uint64_t)1 << cat;
            }
            if (phrase.n >= LEX_MAX_PHRASE_ITEMS)
                return keel_error_set(err, KEEL_EINVAL, field,
                                      "phrase \"%s\" has more than %d words", text,
                                      LEX_MAX_PHRASE_ITEMS);
            phrase.items[phrase.n++] = item;
            pos = (size_t)(close - text) + 1;
            carry = 0;
        }
    }
    if (phrase.n == 0)
        return keel_error_set(err, KEEL_EINVAL, field, "empty phrase");
    if (lex->n_phrases == lex->cap_phrases) {
        uint32_t cap = lex->cap_phrases ? lex->cap_phrases * 2 : 64;
        struct lex_phrase *grown = keel_realloc(lex->phrases, cap * sizeof(*grown));
        if (!grown)
            return keel_error_set(err, KEEL_ENOMEM, field, "out of memory");
        lex->phrases = grown;
        lex->cap_phrases = cap;
    }
    /* Only now, when nothing can fail any more, does the word join its class. */
    if (phrase.n == 1 && ITEM_KIND(phrase.items[0]) == ITEM_WORD) {
        uint32_t id = ITEM_ARG(phrase.items[0]);
        lex->word_classes[id] |= (uint64_t)1 << category;
    }
    lex->phrases[lex->n_phrases++] = phrase;
    lex->compiled = 0;
    return KEEL_OK;
}

int lexicon_add(struct lexicon *lex, int category, int value, const char *text,
                int (*category_of_name)(const char *name, size_t n),
                const char *field, struct keel_error *err)
{
    uint32_t n_words = lex->n_words;
    int rc = add_phrase(lex, category, value, text, category_of_name, field, err);

    if (rc)
        forget_words(lex, n_words);
    return rc;
}

/* Sets the number value of a single-word phrase's word (number words). */
static void note_number_words(struct lexicon *lex, int number_category)
{
    for (uint32_t i = 0; i < lex->n_phrases; i++) {
        const struct lex_phrase *p = &lex->phrases[i];
        if (p->category == number_category && p->n == 1 &&
            ITEM_KIND(p->items[0]) == ITEM_WORD)
            lex->word_number[ITEM_ARG(p->items[0])] = p->value;
    }
}

/* Longer phrases first, then compile order: the first match at a position
 * is the longest. The lexicon comes through qsort_r's argument, so two
 * lexicons may be compiled at once. */
static int by_length(const void *a, const void *b, void *arg)
{
    const struct lexicon *lex = arg;
    uint32_t ia = *(const uint32_t *)a, ib = *(const uint32_t *)b;
    const struct lex_phrase *pa = &lex->phrases[ia], *pb = &lex->phrases[ib];

    if (pa->n != pb->n)
        return pa->n > pb->n ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

int lexicon_compile(struct lexicon *lex)
{
    uint32_t n_words = lex->n_words ? lex->n_words : 1;
    uint32_t *counts, *by_first, *slot_first;
    uint32_t n_slot = 0;

    keel_free(lex->by_first);
    keel_free(lex->first_start);
    keel_free(lex->slot_first);
    lex->by_first = lex->first_start = lex->slot_first = NULL;
    counts = keel_calloc(n_words + 1, sizeof(*counts));
    by_first = keel_calloc(lex->n_phrases + 1, sizeof(*by_first));
    slot_first = keel_calloc(lex->n_phrases + 1, sizeof(*slot_first));
    if (!counts || !by_first || !slot_first) {
        keel_free(counts);
        keel_free(by_first);
        keel_free(slot_first);
        return KEEL_ENOMEM;
    }
    for (uint32_t i = 0; i < lex->n_phrases; i++) {
        uint32_t first = lex->phrases[i].items[0];
        if (ITEM_KIND(first) == ITEM_WORD)
            counts[ITEM_ARG(first) + 1]++;
        else
            slot_first[n_slot++] = i;
    }
    for (uint32_t w = 1; w <= n_words; w++)
        counts[w] += counts[w - 1];
    {
        uint32_t *fill = keel_calloc(n_words + 1, sizeof(*fill));
        if (!fill) {
            keel_free(counts);
            keel_free(by_first);
            keel_free(slot_first);
            return KEEL_ENOMEM;
        }
        memcpy(fill, counts, (n_words + 1) * sizeof(*fill));
        for (uint32_t i = 0; i < lex->n_phrases; i++) {
            uint32_t first = lex->phrases[i].items[0];
            if (ITEM_KIND(first) == ITEM_WORD)
                by_first[fill[ITEM_ARG(first)]++] = i;
        }
        keel_free(fill);
    }
    for (uint32_t w = 0; w < n_words; w++)
        if (counts[w + 1] - counts[w] > 1)
            qsort_r(by_first + counts[w], counts[w + 1] - counts[w], sizeof(*by_first), by_length,
                    lex);
    qsort_r(slot_first, n_slot, sizeof(*slot_first), by_length, lex);
    lex->by_first = by_first;
    lex->first_start = counts;
    lex->slot_first = slot_first;
    lex->n_slot_first = n_slot;
    lex->compiled = 1;
    return KEEL_OK;
}

void lexicon_set_number_category(struct lexicon *lex, int category)
{
    note_number_words(lex, category);
}

/* ---- matching ------------------------------------------------------- */

static inline int item_matches(const struct lexicon *lex, const struct lex_token *tok,
                               uint32_t item)
{
    switch (ITEM_KIND(item)) {
    case ITEM_WORD:
        return tok->word == ITEM_ARG(item);
    case ITEM_NUMBER:
        /* Any number: 5, ten, 98.6, 1,500 (the slot then captures -1 when
         * the value is not a small whole number). */
        return tok->number >= 0 || (tok->flags & LEX_NUMERIC);
    case ITEM_YEAR:
        return (tok->flags & LEX_NUMERIC) && tok->len == 4 && tok->number >= 1000;
    case ITEM_WORD_ANY:
        /* Any one word that is not a number or a dash: "3 parsecs to km". */
        return !(tok->flags & LEX_NUMERIC) && tok->number < 0;
    default:
        return tok->word && (lex->word_classes[tok->word] >> ITEM_ARG(item) & 1);
    }
}

static void try_phrase(const struct lexicon *lex, struct lex_result *out, uint32_t at,
                       uint32_t index)
{
    const struct lex_phrase *p = &lex->phrases[index];
    struct lex_match *m;
    int32_t slot[2] = {-1, -1};
    int slots = 0;

    if (at + p->n > out->n_tokens)
        return;
    for (uint32_t k = 0; k < p->n; k++) {
        const struct lex_token *tok = &out->tokens[at + k];
        if (k > 0 && (tok->flags & (LEX_SENTENCE | LEX_BREAK)))
            return;
        if (!item_matches(lex, tok, p->items[k]))
            return;
        if ((ITEM_KIND(p->items[k]) == ITEM_NUMBER || ITEM_KIND(p->items[k]) == ITEM_YEAR) &&
            slots < 2)
            slot[slots++] = tok->number;
    }
    if (out->n_matches >= LEX_MAX_MATCHES) {
        out->truncated = 1;
        return;
    }
    m = &out->matches[out->n_matches++];
    m->category = p->category;
    m->value = p->value;
    m->start = (uint16_t)at;
    m->n = p->n;
    m->slot[0] = slot[0];
    m->slot[1] = slot[1];
    m->phrase = index;
    out->categories |= (uint64_t)1 << p->category;
}

/* The order of by_length(): longer phrases first, then compile order. */
static inline int comes_first(const struct lexicon *lex, uint32_t a, uint32_t b)
{
    return lex->phrases[a].n != lex->phrases[b].n ? lex->phrases[a].n > lex->phrases[b].n : a < b;
}

/* The value of a numeric token's `n` bytes when it is a small whole
 * number (at most nine digits, no separator), else -1. */
static int32_t number_value(const char *norm, size_t n)
{
    int32_t v = 0;

    if (n == 0 || n > 9 || memchr(norm, '.', n) || memchr(norm, ',', n))
        return -1;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (norm[i] - '0');
    return v;
}

/* A number glued to a word the pack uses as a {slot} ("5km", "98.6°f",
 * "1,000mb"): returns the bytes of the number, else 0. Only words of a
 * slot class split off, so "5g", "3d" or "1990s" stay whole in packs
 * without such a word. */
static size_t glued_number(const struct lexicon *lex, const struct raw_token *raw)
{
    size_t i = 0;
    uint32_t id;

    if (!lex->slot_classes || (raw->flags & LEX_NUMERIC) || raw->norm_len != raw->len ||
        raw->norm_len > LEX_MAX_WORD)
        return 0;
    while (i < raw->norm_len && (is_digit((unsigned char)raw->norm[i]) ||
                                 (i > 0 && (raw->norm[i] == '.' || raw->norm[i] == ',') &&
                                  i + 1 < raw->norm_len &&
                                  is_digit((unsigned char)raw->norm[i + 1]))))
        i++;
    if (i == 0 || i == raw->norm_len)
        return 0;
    id = lexicon_word(lex, raw->norm + i, raw->norm_len - i);
    return id && (lex->word_classes[id] & lex->slot_classes) ? i : 0;
}

void lexicon_match(const struct lexicon *lex, const char *text, size_t n,
                   struct lex_result *out)
{
    struct raw_token raw;
    size_t pos = 0;
    uint32_t carry = 0;

    out->n_tokens = 0;
    out->n_matches = 0;
    out->categories = 0;
    out->truncated = 0;
    while (scan_token(text, n, &pos, &carry, &raw)) {
        struct lex_token *tok;
        size_t glued;
        if (out->n_tokens >= LEX_MAX_TOKENS) {
            out->truncated = 1;
            break;
        }
        glued = glued_number(lex, &raw);
        if (glued && out->n_tokens + 1 >= LEX_MAX_TOKENS) {
            out->truncated = 1;
            break;
        }
        tok = &out->tokens[out->n_tokens++];
        tok->start = (uint32_t)raw.start;
        tok->len = (uint32_t)raw.len;
        tok->flags = raw.flags;
        tok->word = raw.norm_len <= LEX_MAX_WORD
                        ? lookup_hashed(lex, raw.norm, raw.norm_len, raw.hash) : 0;
        tok->number = -1;
        if (glued) {
            /* "5km": the number, then its unit as a token of its own. */
            tok->len = (uint32_t)glued;
            tok->word = 0;
            tok->flags |= LEX_NUMERIC;
            tok->number = number_value(raw.norm, glued);
            tok = &out->tokens[out->n_tokens++];
            tok->start = (uint32_t)(raw.start + glued);
            tok->len = (uint32_t)(raw.len - glued);
            tok->flags = LEX_GLUED;
            tok->word = lexicon_word(lex, raw.norm + glued, raw.norm_len - glued);
            tok->number = lex->word_number[tok->word];
        } else if (raw.flags & LEX_NUMERIC) {
            if (raw.norm_len == raw.len)
                tok->number = number_value(raw.norm, raw.norm_len);
        } else if (tok->word) {
            tok->number = lex->word_number[tok->word];
        }
        /* COVID-19, 19-nor: a number glued to a word is part of a name,
         * unless the word is one the pack knows (post-2015, 2015-present,
         * 10-year). */
        if (tok->flags & LEX_JOINED) {
            const struct lex_token *prev = &out->tokens[out->n_tokens - 2];
            if ((tok->flags & LEX_NUMERIC) && !prev->word) {
                tok->number = -1;
                tok->flags &= ~(uint32_t)LEX_NUMERIC;
            }
            if ((prev->flags & LEX_NUMERIC) && !tok->word) {
                out->tokens[out->n_tokens - 2].number = -1;
                out->tokens[out->n_tokens - 2].flags &= ~(uint32_t)LEX_NUMERIC;
            }
        }
    }
    if (!lex->compiled)
        return;
    for (uint32_t i = 0; i < out->n_tokens; i++) {
        uint32_t w = out->tokens[i].word;
        uint32_t k = w ? lex->first_start[w] : 0, end = w ? lex->first_start[w + 1] : 0, s = 0;
        const struct lex_token *tok = &out->tokens[i];
        /* Slot-first phrases need a number or a word of some class here;
         * most tokens are neither, so skip that list for them. */
        uint32_t n_slot = (tok->number >= 0 || (tok->flags & LEX_NUMERIC) ||
                           (w && (lex->word_classes[w] & lex->slot_classes))) ? lex->n_slot_first : 0;
        /* Both lists are longest first; merge them so the first match at a
         * position is the longest whether its phrase starts with a word
         * ("usd") or a slot ("{unit} to {unit} rate"). */
        while (k < end || s < n_slot) {
            if (s == n_slot ||
                (k < end && comes_first(lex, lex->by_first[k], lex->slot_first[s])))
                try_phrase(lex, out, i, lex->by_first[k++]);
            else
                try_phrase(lex, out, i, lex->slot_first[s++]);
        }
    }
}
