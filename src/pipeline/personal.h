/*
 * personal.h — reading personal-fact requests (seed 001 §2, route
 * local_memory_intent): what the user asks the assistant to remember,
 * recall or forget about themselves. The phrases are the pack's
 * (handlers.personal); this is the mechanism.
 *
 *   "remember that my favourite drink is tea"   set  favourite drink = tea
 *   "my favourite drink is coffee"              set  (replaces tea)
 *   "remember that I'm allergic to peanuts"     note "I'm allergic to peanuts"
 *   "what's my favourite drink?"                get  favourite drink
 *   "what's the name of my dog?"                get  dog's name
 *   "forget my favourite drink"                 forget
 *   "what do you remember about me?"            list
 *
 * Keys are lower-case with the pack's same_words applied ("favorite" ->
 * "favourite"); values keep the user's spelling. A fact whose key names a
 * secret or an identifier (password, PIN, card number, member id, MRN, …)
 * or whose value holds a card number or an identifier-like code is
 * refused with the reason. Pure functions: no allocation, no I/O.
 */
#ifndef KEEL_PIPELINE_PERSONAL_H
#define KEEL_PIPELINE_PERSONAL_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"
#include "store/store.h"

#define PERSONAL_PHRASES_MAX 48     /* phrases of one list */
#define PERSONAL_PHRASE_MAX 48      /* bytes of one phrase */
#define PERSONAL_INPUT_MAX 1024     /* bytes of a message read */

struct personal_list {
    char items[PERSONAL_PHRASES_MAX][PERSONAL_PHRASE_MAX];
    int n;
};

struct personal_conf {
    struct personal_list remember;    /* "remember that", "please remember" */
    struct personal_list recall;      /* "what's", "do you remember" (before "my …") */
    struct personal_list forget;      /* "forget about", "forget" */
    struct personal_list list;        /* "what do you remember about me" */
    struct personal_list same_from;   /* same_words: "favorite" … */
    struct personal_list same_to;     /* … "favourite" */
    struct personal_list refuse;      /* key words refused: "password", "member id" */
    int max_facts;                    /* facts of one user, 1..STORE_PERSONAL_FACTS_MAX */
};

/* Compiles the pack's handlers.personal section (NULL: empty lists and
 * STORE_PERSONAL_FACTS_MAX). Errors name the field. */
int personal_load(const json_t *section, struct personal_conf *conf, struct keel_error *err);

enum personal_op {
    PERSONAL_NONE,       /* no request the mechanism understands */
    PERSONAL_SET,        /* key = value */
    PERSONAL_NOTE,       /* a free note: key "note: …", value the text */
    PERSONAL_GET,        /* key */
    PERSONAL_FORGET,     /* key */
    PERSONAL_LIST,
    PERSONAL_REFUSE      /* a set or note refused: reason */
};

struct personal_request {
    enum personal_op op;
    char key[STORE_PERSONAL_KEY_MAX + 1];
    char value[STORE_PERSONAL_VALUE_MAX + 1];
    char reason[160];          /* PERSONAL_REFUSE: why, for the answer */
};

/* Reads `text` (`n` bytes; at most PERSONAL_INPUT_MAX read). */
void personal_parse(const struct personal_conf *conf, const char *text, size_t n,
                    struct personal_request *req);

/* The key of a fact named `text` as the reader makes it (lower case,
 * single spaces, same_words, "the name of my dog" → "dog's name"), into
 * `out`; -1 when empty or longer than `cap` - 1. */
int personal_key(const struct personal_conf *conf, const char *text, char *out, size_t cap);

/* Whether a fact (key, value; `note`: a free note, whose text is also
 * checked for refused words) must not be stored: 1 with the reason in
 * `reason`, else 0. The same rules as personal_parse's. */
int personal_refuses(const struct personal_conf *conf, const char *key, const char *value,
                     int note, char *reason, size_t n);

/* Whether `text` holds a payment-card number: 13 to 19 digits (spaces
 * and dashes between them allowed) that pass the Luhn check. */
int personal_has_card_number(const char *text);

#endif
