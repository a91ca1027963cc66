/*
 * personal.c — the personal-fact reader (see personal.h).
 *
 * The message is first made plain: curly apostrophes become "'",
 * whitespace runs one space, the ends trimmed of spaces and ".!?". A
 * lower-case twin with the same byte offsets is matched against the
 * pack's phrases, always at word boundaries; values are cut from the
 * original so they keep the user's spelling. Order: list, forget, recall,
 * set ("[remember that] my X is|are Y"), note ("remember that …").
 */
#include "pipeline/personal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "pipeline/phrases.h"

struct plain {
    char orig[PERSONAL_INPUT_MAX + 1];
    char low[PERSONAL_INPUT_MAX + 1];
    size_t n;
};

static void make_plain(const char *text, size_t n, struct plain *p)
{
    size_t k = 0;

    if (n > PERSONAL_INPUT_MAX)
        n = utf8_valid_prefix(text, PERSONAL_INPUT_MAX);
    for (size_t i = 0; i < n && k < PERSONAL_INPUT_MAX; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0xe2 && i + 2 < n && (unsigned char)text[i + 1] == 0x80 &&
            ((unsigned char)text[i + 2] == 0x98 || (unsigned char)text[i + 2] == 0x99)) {
            p->orig[k++] = '\'';   /* ' ' */
            i += 2;
        } else if (isspace(c) || c == '\0') {
            if (k && p->orig[k - 1] != ' ')
                p->orig[k++] = ' ';
        } else {
            p->orig[k++] = (char)c;
        }
    }
    while (k && strchr(" .!?", p->orig[k - 1]))
        k--;
    while (k && p->orig[0] == ' ') {
        memmove(p->orig, p->orig + 1, --k);
    }
    p->orig[k] = '\0';
    p->n = k;
    for (size_t i = 0; i <= k; i++)
        p->low[i] = (char)tolower((unsigned char)p->orig[i]);
}

/* The length of the longest phrase of `list` that `s` starts with, ending
 * at a word boundary; 0 when none. */
static size_t starts_with(const struct personal_list *list, const char *s)
{
    size_t best = 0;

    for (int i = 0; i < list->n; i++) {
        size_t len = strlen(list->items[i]);
        if (len > best && !strncmp(s, list->items[i], len) && (s[len] == ' ' || !s[len]))
            best = len;
    }
    return best;
}

/* Whether `phrase` occurs in `s` as whole words. */
static int has_words(const char *s, const char *phrase)
{
    size_t len = strlen(phrase);

    for (const char *p = strstr(s, phrase); p; p = strstr(p + 1, phrase))
        if ((p == s || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[len]))
            return 1;
    return 0;
}

static size_t skip_space(const char *s, size_t i)
{
    while (s[i] == ' ')
        i++;
    return i;
}

/* Skips `word` followed by a space (or the end) at s[i]. */
static size_t skip_word(const char *s, size_t i, const char *word)
{
    size_t len = strlen(word);

    if (!strncmp(s + i, word, len) && (s[i + len] == ' ' || !s[i + len]))
        return skip_space(s, i + len);
    return i;
}

/* The key from low[from, to): words joined by single spaces with the
 * pack's same_words applied; "the name of my dog" reads "dog's name". */
static int make_key(const struct personal_conf *conf, const char *low, size_t from, size_t to,
                    char *out, size_t cap)
{
    char tmp[PERSONAL_INPUT_MAX + 1];
    size_t len = 0, i;

    while (from < to && low[from] == ' ')
        from++;
    while (to > from && strchr(" '", low[to - 1]))
        to--;
    if (to - from > 16 && !strncmp(low + from, "the name of my ", 15)) {
        snprintf(tmp, sizeof(tmp), "%.*s's name", (int)(to - from - 15), low + from + 15);
    } else {
        if (!strncmp(low + from, "the ", 4) && to - from > 4)
            from += 4;
        snprintf(tmp, sizeof(tmp), "%.*s", (int)(to - from), low + from);
    }
    out[0] = '\0';
    for (i = 0; tmp[i];) {
        size_t w = strcspn(tmp + i, " ");
        const char *word = tmp + i;
        int wlen = (int)w;
        for (int s = 0; s < conf->same_from.n; s++)
            if (strlen(conf->same_from.items[s]) == w && !strncmp(word, conf->same_from.items[s], w)) {
                word = conf->same_to.items[s];
                wlen = (int)strlen(word);
            }
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%.*s", len ? " " : "",
                                wlen, word);
        i = skip_space(tmp, i + w);
    }
    if (len >= cap)
        return -1;   /* too long */
    return len ? 0 : -1;
}

int personal_has_card_number(const char *text)
{
    int digits[19], n = 0;

    for (const char *p = text;; p++) {
        if (isdigit((unsigned char)*p)) {
            if (n < 19)
                digits[n] = *p - '0';
            n++;
            continue;
        }
        if ((*p == ' ' || *p == '-') && n && isdigit((unsigned char)p[1]))
            continue;   /* a separator inside the number */
        if (n >= 13 && n <= 19) {
            int sum = 0;
            for (int i = n - 1, k = 0; i >= 0; i--, k++) {
                int d = digits[i];
                if (k % 2 == 1 && (d *= 2) > 9)
                    d -= 9;
                sum += d;
            }
            if (sum % 10 == 0)
                return 1;
        }
        n = 0;
        if (!*p)
            return 0;
    }
}

/* A code of letters and digits (six or more, three or more digits): a
 * member id, an MRN, a policy number. */
static int has_identifier(const char *text)
{
    for (const char *p = text; *p;) {
        size_t n = 0;
        int letters = 0, digits = 0;
        while (isalnum((unsigned char)p[n])) {
            letters += isalpha((unsigned char)p[n]) != 0;
            digits += isdigit((unsigned char)p[n]) != 0;
            n++;
        }
        if (n >= 6 && letters && digits >= 3)
            return 1;
        p += n ? n : 1;
    }
    return 0;
}

/* Refuses what must not be stored; else leaves req as it is. */
static void vet(const struct personal_conf *conf, const char *key_words, const char *value,
                struct personal_request *req)
{
    char low_value[STORE_PERSONAL_VALUE_MAX + 1];
    size_t i;

    for (i = 0; value[i] && i < STORE_PERSONAL_VALUE_MAX; i++)
        low_value[i] = (char)tolower((unsigned char)value[i]);
    low_value[i] = '\0';
    for (int k = 0; k < conf->refuse.n; k++)
        if (has_words(key_words, conf->refuse.items[k]) ||
            (req->op == PERSONAL_NOTE && has_words(low_value, conf->refuse.items[k]))) {
            req->op = PERSONAL_REFUSE;
            snprintf(req->reason, sizeof(req->reason),
                     "it looks like a secret or an identifier (%s)", conf->refuse.items[k]);
            return;
        }
    if (personal_has_card_number(value)) {
        req->op = PERSONAL_REFUSE;
        snprintf(req->reason, sizeof(req->reason), "it holds what looks like a card number");
    } else if (has_identifier(value)) {
        req->op = PERSONAL_REFUSE;
        snprintf(req->reason, sizeof(req->reason),
                 "it holds what looks like an identifier (a member id, record or policy number)");
    }
}

/* "my X is Y" from low/orig[at…]: key and value; 0 on success. */
static int read_set(const struct personal_conf *conf, const struct plain *p, size_t at,
                    struct personal_request *req)
{
    const char *rest = p->low + at, *verb = NULL;
    size_t key_end, value_at, vlen;
    const char *verbs[] = {" is ", " are ", " was "};

    if (strncmp(rest, "my ", 3))
        return -1;
    for (size_t v = 0; v < sizeof(verbs) / sizeof(verbs[0]); v++) {
        const char *hit = strstr(rest + 2, verbs[v]);
        if (hit && (!verb || hit < verb))
            verb = hit;
    }
    if (!verb)
        return -1;
    key_end = (size_t)(verb - p->low);
    value_at = skip_space(p->low, key_end + 1 + strcspn(verb + 1, " "));
    vlen = p->n - value_at;
    req->op = PERSONAL_SET;
    if (make_key(conf, p->low, at + 3, key_end, req->key, sizeof(req->key))) {
        req->op = PERSONAL_REFUSE;
        snprintf(req->reason, sizeof(req->reason), "the name of the fact is longer than %d bytes",
                 STORE_PERSONAL_KEY_MAX);
        return 0;
    }
    if (!vlen)
        return -1;
    if (vlen > STORE_PERSONAL_VALUE_MAX) {
        req->op = PERSONAL_REFUSE;
        snprintf(req->reason, sizeof(req->reason), "the value is longer than %d bytes",
                 STORE_PERSONAL_VALUE_MAX);
        return 0;
    }
    snprintf(req->value, sizeof(req->value), "%.*s", (int)vlen, p->orig + value_at);
    vet(conf, req->key, req->value, req);
    return 0;
}

static void read_note(const struct personal_conf *conf, const struct plain *p, size_t at,
                      struct personal_request *req)
{
    size_t vlen = p->n - at, klen;

    if (!vlen)
        return;
    if (vlen > STORE_PERSONAL_VALUE_MAX) {
        req->op = PERSONAL_REFUSE;
        snprintf(req->reason, sizeof(req->reason), "the note is longer than %d bytes",
                 STORE_PERSONAL_VALUE_MAX);
        return;
    }
    req->op = PERSONAL_NOTE;
    snprintf(req->value, sizeof(req->value), "%.*s", (int)vlen, p->orig + at);
    klen = utf8_valid_prefix(p->low + at, vlen < STORE_PERSONAL_KEY_MAX - 6
                                              ? vlen : STORE_PERSONAL_KEY_MAX - 6);
    snprintf(req->key, sizeof(req->key), "note: %.*s", (int)klen, p->low + at);
    vet(conf, "", req->value, req);
}

void personal_parse(const struct personal_conf *conf, const char *text, size_t n,
                    struct personal_request *req)
{
    struct plain local;
    size_t len, at;

    memset(req, 0, sizeof(*req));
    req->op = PERSONAL_NONE;
    make_plain(text, n, &local);
    if (!local.n)
        return;
    if ((len = starts_with(&conf->list, local.low)) &&
        (local.low[len] == '\0' || !strcmp(local.low + len, " about me"))) {
        req->op = PERSONAL_LIST;
        return;
    }
    if ((len = starts_with(&conf->forget, local.low))) {
        at = skip_space(local.low, len);
        at = skip_word(local.low, at, "that");
        at = skip_word(local.low, at, "about");
        at = skip_word(local.low, at, "my");
        if (local.low[at] && !make_key(conf, local.low, at, local.n, req->key, sizeof(req->key)))
            req->op = PERSONAL_FORGET;
        return;
    }
    if ((len = starts_with(&conf->recall, local.low))) {
        at = skip_space(local.low, len);
        if (!strncmp(local.low + at, "my ", 3) &&
            !make_key(conf, local.low, at + 3, local.n, req->key, sizeof(req->key))) {
            req->op = PERSONAL_GET;
            return;
        }
        if (!strncmp(local.low + at, "the name of my ", 15) &&
            !make_key(conf, local.low, at, local.n, req->key, sizeof(req->key))) {
            req->op = PERSONAL_GET;
            return;
        }
    }
    len = starts_with(&conf->remember, local.low);
    at = skip_space(local.low, len);
    if (!read_set(conf, &local, at, req))
        return;
    if (len)
        read_note(conf, &local, at, req);
}

/* ---- the pack's section ---------------------------------------------------- */

static int load_list(const json_t *s, const char *key, struct personal_list *out,
                     struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];

    keel_json_path_key(field, sizeof(field), "handlers.personal", key);
    return phrase_list_load(json_object_get(s, key), (char *)out->items, PERSONAL_PHRASE_MAX,
                            PERSONAL_PHRASES_MAX, &out->n, field, "phrases", "a phrase of ",
                            err);
}

int personal_load(const json_t *s, struct personal_conf *conf, struct keel_error *err)
{
    static const char *const keys[] = {"remember", "recall", "forget", "list", "same_words",
                                       "refuse", "max_facts", NULL};
    const json_t *same = json_object_get(s, "same_words"), *v;
    const char *word;
    long long max = STORE_PERSONAL_FACTS_MAX;
    int rc;

    memset(conf, 0, sizeof(*conf));
    conf->max_facts = STORE_PERSONAL_FACTS_MAX;
    if (!s)
        return KEEL_OK;
    if (!json_is_object(s))
        return keel_error_set(err, KEEL_EINVAL, "handlers.personal", "must be a mapping");
    if ((rc = keel_json_check_keys(s, keys, "handlers.personal", err)) ||
        (rc = load_list(s, "remember", &conf->remember, err)) ||
        (rc = load_list(s, "recall", &conf->recall, err)) ||
        (rc = load_list(s, "forget", &conf->forget, err)) ||
        (rc = load_list(s, "list", &conf->list, err)) ||
        (rc = load_list(s, "refuse", &conf->refuse, err)))
        return rc;
    if ((v = json_object_get(s, "max_facts"))) {
        max = json_is_integer(v) ? json_integer_value(v) : 0;
        if (max < 1 || max > STORE_PERSONAL_FACTS_MAX)
            return keel_error_set(err, KEEL_EINVAL, "handlers.personal.max_facts",
                                  "must be an integer from 1 to %d", STORE_PERSONAL_FACTS_MAX);
        conf->max_facts = (int)max;
    }
    if (same && (!json_is_object(same) || json_object_size(same) > PERSONAL_PHRASES_MAX))
        return keel_error_set(err, KEEL_EINVAL, "handlers.personal.same_words",
                              "must map at most %d words to words", PERSONAL_PHRASES_MAX);
    json_object_foreach((json_t *)same, word, v) {
        const char *to = json_string_value(v);
        char field[KEEL_JSON_PATH_MAX];
        keel_json_path_key(field, sizeof(field), "handlers.personal.same_words", word);
        if (!to || !*to || strchr(to, ' ') || strchr(word, ' ') ||
            strlen(to) >= PERSONAL_PHRASE_MAX || strlen(word) >= PERSONAL_PHRASE_MAX)
            return keel_error_set(err, KEEL_EINVAL, field, "must be one word (both sides)");
        snprintf(conf->same_from.items[conf->same_from.n++], PERSONAL_PHRASE_MAX, "%s", word);
        snprintf(conf->same_to.items[conf->same_to.n++], PERSONAL_PHRASE_MAX, "%s", to);
    }
    return KEEL_OK;
}

int personal_refuses(const struct personal_conf *conf, const char *key, const char *value,
                     int note, char *reason, size_t n)
{
    struct personal_request req;

    memset(&req, 0, sizeof(req));
    req.op = note ? PERSONAL_NOTE : PERSONAL_SET;
    vet(conf, note ? "" : key, value, &req);
    if (req.op != PERSONAL_REFUSE)
        return 0;
    snprintf(reason, n, "%s", req.reason);
    return 1;
}

int personal_key(const struct personal_conf *conf, const char *text, char *out, size_t cap)
{
    struct plain p;

    make_plain(text, strlen(text), &p);
    return make_key(conf, p.low, 0, p.n, out, cap);
}
