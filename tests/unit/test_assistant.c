/*
 * test_assistant.c — the assistant pack's route handlers: the converter's
 * parser and arithmetic, the personal-fact reader and its refusals, the
 * personal-fact store on both backends, and whole turns (two users whose
 * facts never meet, a fact stored with its turn or not at all).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/log.h"
#include "pack/pack.h"
#include "pipeline/handlers.h"
#include "pipeline/pipeline.h"
#include "store/store.h"
#include "unit.h"

static struct pack *assistant_pack(void)
{
    char dir[1024];
    struct keel_error err;
    struct pack *pack = NULL;

    snprintf(dir, sizeof(dir), "%s/packs", unit_root());
    ck_assert_msg(pack_load(dir, "assistant", &pack, &err) == KEEL_OK, "%s: %s", err.field,
                  err.message);
    return pack;
}

static struct handlers *assistant_handlers(struct pack **pack)
{
    struct handlers *h = NULL;
    struct keel_error err;

    *pack = assistant_pack();
    ck_assert_msg(handlers_load(json_object_get((*pack)->doc, "handlers"), "none", &h, &err) ==
                      KEEL_OK, "%s: %s", err.field, err.message);
    ck_assert_ptr_nonnull(h);
    return h;
}

/* ---- the converter ------------------------------------------------------------ */

static const struct {
    const char *text;
    enum convert_status status;
    const char *from, *to;
    double amount;
    const char *value;   /* convert_format of the result, or the unknown word */
} conversions[] = {
    {"convert 5 km to miles", CONVERT_OK, "km", "mi", 5, "3.10686"},
    {"5km in miles", CONVERT_OK, "km", "mi", 5, "3.10686"},
    {"98.6 fahrenheit in celsius", CONVERT_OK, "F", "C", 98.6, "37"},
    {"98.6°F to C", CONVERT_OK, "F", "C", 98.6, "37"},
    {"-40 c to f", CONVERT_OK, "C", "F", -40, "-40"},
    {"0 celsius to kelvin", CONVERT_OK, "C", "K", 0, "273.15"},
    {"how many cups in a liter", CONVERT_OK, "l", "cup", 1, "4.22675"},
    {"how many feet are in 3 miles?", CONVERT_OK, "mi", "ft", 3, "15840"},
    {"5 ft 10 in in cm", CONVERT_OK, "ft", "cm", 5.833333, "177.8"},
    {"1,000 meters to km", CONVERT_OK, "m", "km", 1000, "1"},
    {"60 miles per hour to km/h", CONVERT_OK, "mph", "km/h", 60, "96.5606"},
    {"2 gb into mb", CONVERT_OK, "GB", "MB", 2, "2000"},
    {"100 usd in eur", CONVERT_OK, "USD", "EUR", 100, "92.5926"},
    {"$100 to eur", CONVERT_OK, "USD", "EUR", 100, "92.5926"},
    {"eur 50 to yen", CONVERT_OK, "EUR", "JPY", 50, "8125"},
    {"usd to eur rate", CONVERT_OK, "USD", "EUR", 1, "0.925926"},
    {"convert 5 km to parsecs", CONVERT_UNKNOWN_UNIT, "km", NULL, 5, "parsecs"},
    {"convert 5km to miles", CONVERT_OK, "km", "mi", 5, "3.10686"},
    {"98.6 °F to celsius", CONVERT_OK, "F", "C", 98.6, "37"},
    {"a mile in km", CONVERT_OK, "mi", "km", 1, "1.60934"},
    {"1,000,000 yen to usd", CONVERT_OK, "JPY", "USD", 1000000, "6646.15"},
    {"convert 3 parsecs to km", CONVERT_UNKNOWN_UNIT, NULL, "km", 0, "parsecs"},
    {"3 parsecs to km", CONVERT_UNKNOWN_UNIT, NULL, "km", 0, "parsecs"},
    {"100 XYZ to eur", CONVERT_UNKNOWN_CURRENCY, NULL, "EUR", 0, "XYZ"},
    {"convert 50 usd to XYZ", CONVERT_UNKNOWN_CURRENCY, "USD", NULL, 50, "XYZ"},
    {"convert 5 blorps to km", CONVERT_UNKNOWN_UNIT, NULL, "km", 0, "blorps"},
    {"5 km to kg", CONVERT_INCOMPATIBLE, "km", "kg", 5, NULL},
    {"5 km 3 kg to lb", CONVERT_MIXED, NULL, "lb", 0, NULL},
    {"hello there", CONVERT_NONE, NULL, NULL, 0, NULL},
    {"", CONVERT_NONE, NULL, NULL, 0, NULL},
};

START_TEST(test_convert_parse)
{
    struct pack *pack;
    struct handlers *h = assistant_handlers(&pack);
    const struct convert_tables *t = &h->convert;
    struct convert_request req;
    double v;
    char out[64];
    int i = _i;

    convert_parse(t, conversions[i].text, strlen(conversions[i].text), &req);
    ck_assert_msg(req.status == conversions[i].status, "%s: status %d, expected %d",
                  conversions[i].text, req.status, conversions[i].status);
    if (conversions[i].from && req.status != CONVERT_MIXED)
        ck_assert_str_eq(t->units[req.part_unit[0]].name, conversions[i].from);
    if (conversions[i].to && req.status != CONVERT_UNKNOWN_UNIT &&
        req.status != CONVERT_UNKNOWN_CURRENCY)
        ck_assert_str_eq(t->units[req.to].name, conversions[i].to);
    if (req.status == CONVERT_OK) {
        ck_assert_msg(fabs(req.amount - conversions[i].amount) < 1e-5, "%s: amount %f",
                      conversions[i].text, req.amount);
        ck_assert_int_eq(convert_value(t, &req, &v), CONVERT_OK);
        convert_format(v, 0, out, sizeof(out));
        ck_assert_str_eq(out, conversions[i].value);
    } else if (conversions[i].value) {
        ck_assert_str_eq(req.unknown, conversions[i].value);
    }
    handlers_free(h);
    pack_free(pack);
}
END_TEST

START_TEST(test_convert_format)
{
    char out[64];

    convert_format(3.106855961, 0, out, sizeof(out));
    ck_assert_str_eq(out, "3.10686");
    convert_format(37.0000000001, 0, out, sizeof(out));
    ck_assert_str_eq(out, "37");
    convert_format(0.5, 0, out, sizeof(out));
    ck_assert_str_eq(out, "0.5");
    convert_format(1e20, 0, out, sizeof(out));
    ck_assert_str_eq(out, "1e+20");
    convert_format(-0.0000001, 0, out, sizeof(out));
    ck_assert_str_eq(out, "-1e-07");
    convert_format(92.592592, 1, out, sizeof(out));
    ck_assert_str_eq(out, "92.59");
    convert_format(INFINITY, 0, out, sizeof(out));
    ck_assert_str_eq(out, "an amount too large to show");
}
END_TEST

/* Digits grouped by three in the whole part only; anything else as it is. */
START_TEST(test_convert_group)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"1000000", "1,000,000"}, {"6646.15", "6,646.15"}, {"-12345.5", "-12,345.5"},
        {"999", "999"},           {"1000", "1,000"},       {"0.000123", "0.000123"},
        {"-40", "-40"},           {"123456.123456", "123,456.123456"},
        {"1e+20", "1e+20"},       {"-1e-07", "-1e-07"},
        {"an amount too large to show", "an amount too large to show"}, {"", ""},
    };
    char out[64], tiny[8];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        convert_group(cases[i].in, out, sizeof(out));
        ck_assert_str_eq(out, cases[i].out);
    }
    /* What would not fit is copied as it is, cut to fit: never overrun. */
    convert_group("1234567", tiny, sizeof(tiny));
    ck_assert_str_eq(tiny, "1234567");
    convert_group("12345678", tiny, sizeof(tiny));
    ck_assert_str_eq(tiny, "1234567");
    convert_group("123456", tiny, sizeof(tiny));
    ck_assert_str_eq(tiny, "123,456");
}
END_TEST

static int load_convert(const char *json, struct convert_tables *t, struct keel_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(json, 0, &jerr);
    int rc;

    ck_assert_msg(doc != NULL, "%s", jerr.text);
    keel_error_clear(err);
    rc = convert_load(doc, t, err);
    json_decref(doc);
    return rc;
}

START_TEST(test_convert_load_errors)
{
    static struct convert_tables t;
    struct keel_error err;

    ck_assert_int_eq(load_convert("{\"units\": {\"length\": [{\"name\": \"m\", \"factor\": 0, "
                                  "\"aliases\": [\"m\"]}]}}", &t, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "handlers.convert.units.length[0].factor");
    ck_assert_int_eq(load_convert("{\"units\": {\"length\": [{\"name\": \"m\", \"aliases\": "
                                  "[\"m\"]}, {\"name\": \"mm\", \"aliases\": [\"M\"]}]}}", &t,
                                  &err), KEEL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "already an alias of m"));
    ck_assert_int_eq(load_convert("{\"currencies\": [{\"name\": \"EUR\", \"aliases\": "
                                  "[\"eur\"]}]}", &t, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "handlers.convert.rates");
    ck_assert_int_eq(load_convert("{\"currencies\": [{\"name\": \"EUR\", \"aliases\": [\"eur\"]}],"
                                  " \"rates\": {\"date\": \"2026-11-01\", \"base\": \"EUR\", "
                                  "\"values\": {\"EUR\": 1, \"XYZ\": 2}}}", &t, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "handlers.convert.rates.values.XYZ");
    ck_assert_int_eq(load_convert("{\"colour\": 1}", &t, &err), KEEL_EINVAL);
    ck_assert_int_eq(load_convert("{\"units\": {\"length\": [{\"name\": \"m\", \"aliases\": "
                                  "[\"m\"]}]}}", &t, &err), KEEL_OK);
}
END_TEST

/* ---- personal facts: reading ----------------------------------------------------- */

static const struct {
    const char *text;
    enum personal_op op;
    const char *key, *value;
} readings[] = {
    {"remember that my favourite drink is tea", PERSONAL_SET, "favourite drink", "tea"},
    {"Remember that my favorite drink is Earl Grey.", PERSONAL_SET, "favourite drink", "Earl Grey"},
    {"my favourite drink is coffee", PERSONAL_SET, "favourite drink", "coffee"},
    {"my goals are to run a marathon", PERSONAL_SET, "goals", "to run a marathon"},
    {"remember my dog's name is Rex", PERSONAL_SET, "dog's name", "Rex"},
    {"what's my favourite drink?", PERSONAL_GET, "favourite drink", NULL},
    {"What\u2019s my favorite   colour?", PERSONAL_GET, "favourite colour", NULL},
    {"what is the name of my dog", PERSONAL_GET, "dog's name", NULL},
    {"do you remember my birthday?", PERSONAL_GET, "birthday", NULL},
    {"forget my favourite drink", PERSONAL_FORGET, "favourite drink", NULL},
    {"please forget about my goals", PERSONAL_FORGET, "goals", NULL},
    {"what do you remember about me?", PERSONAL_LIST, NULL, NULL},
    {"what did I tell you", PERSONAL_LIST, NULL, NULL},
    {"remember that I'm allergic to peanuts", PERSONAL_NOTE, "note: i'm allergic to peanuts",
     "I'm allergic to peanuts"},
    {"remember that my password is hunter2", PERSONAL_REFUSE, NULL, NULL},
    {"my PIN is 1234", PERSONAL_REFUSE, NULL, NULL},
    {"remember that my visa is 4111-1111-1111-1111", PERSONAL_REFUSE, NULL, NULL},
    {"remember that my member id is XYZ", PERSONAL_REFUSE, NULL, NULL},
    {"remember that my plan card says AB123456", PERSONAL_REFUSE, NULL, NULL},
    {"remember that the api key is abc", PERSONAL_REFUSE, NULL, NULL},
    {"what's the weather", PERSONAL_NONE, NULL, NULL},
    {"my", PERSONAL_NONE, NULL, NULL},
    {"forget", PERSONAL_NONE, NULL, NULL},
    {"", PERSONAL_NONE, NULL, NULL},
};

START_TEST(test_personal_parse)
{
    struct pack *pack;
    struct handlers *h = assistant_handlers(&pack);
    struct personal_request req;
    int i = _i;

    personal_parse(&h->personal, readings[i].text, strlen(readings[i].text), &req);
    ck_assert_msg(req.op == readings[i].op, "%s: op %d, expected %d (%s)", readings[i].text,
                  req.op, readings[i].op, req.reason);
    if (readings[i].key)
        ck_assert_str_eq(req.key, readings[i].key);
    if (readings[i].value)
        ck_assert_str_eq(req.value, readings[i].value);
    if (req.op == PERSONAL_REFUSE)
        ck_assert_int_gt(strlen(req.reason), 10);
    handlers_free(h);
    pack_free(pack);
}
END_TEST

START_TEST(test_personal_caps)
{
    struct pack *pack;
    struct handlers *h = assistant_handlers(&pack);
    struct personal_request req;
    char text[2048];

    /* A key over 64 bytes and a value over 256 are refused, not cut. */
    snprintf(text, sizeof(text), "my %0100d is tea", 0);
    memset(text + 3, 'k', 100);
    personal_parse(&h->personal, text, strlen(text), &req);
    ck_assert_int_eq(req.op, PERSONAL_REFUSE);
    ck_assert_ptr_nonnull(strstr(req.reason, "longer than 64"));
    snprintf(text, sizeof(text), "my drink is %0300d", 0);
    memset(text + 12, 'v', 300);
    personal_parse(&h->personal, text, strlen(text), &req);
    ck_assert_int_eq(req.op, PERSONAL_REFUSE);
    ck_assert_ptr_nonnull(strstr(req.reason, "longer than 256"));
    /* Input past the cap is not read. */
    memset(text, 'a', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    personal_parse(&h->personal, text, strlen(text), &req);
    ck_assert_int_eq(req.op, PERSONAL_NONE);
    handlers_free(h);
    pack_free(pack);
}
END_TEST

START_TEST(test_personal_key)
{
    struct pack *pack;
    struct handlers *h = assistant_handlers(&pack);
    char key[STORE_PERSONAL_KEY_MAX + 1];

    ck_assert_int_eq(personal_key(&h->personal, "Favorite   Drink ", key, sizeof(key)), 0);
    ck_assert_str_eq(key, "favourite drink");
    ck_assert_int_eq(personal_key(&h->personal, "the name of my dog", key, sizeof(key)), 0);
    ck_assert_str_eq(key, "dog's name");
    ck_assert_int_eq(personal_key(&h->personal, "  ", key, sizeof(key)), -1);
    handlers_free(h);
    pack_free(pack);
}
END_TEST

START_TEST(test_card_numbers)
{
    ck_assert(personal_has_card_number("4111 1111 1111 1111"));
    ck_assert(personal_has_card_number("card 5500-0000-0000-0004 exp"));
    ck_assert(!personal_has_card_number("4111 1111 1111 1112"));   /* Luhn fails */
    ck_assert(!personal_has_card_number("call 555-123-4567"));
    ck_assert(!personal_has_card_number(""));
}
END_TEST

/* ---- the store ---------------------------------------------------------------- */

static struct store *open_store(int sqlite, char *dir, size_t n)
{
    struct store *store = NULL;
    struct keel_error err;
    char path[512];

    if (sqlite) {
        unit_temp_dir(dir, n, "assistant", 1);
        snprintf(path, sizeof(path), "%s/k.db", dir);
    } else {
        dir[0] = '\0';
        snprintf(path, sizeof(path), "mem:");
    }
    ck_assert_msg(store_open(path, &store, &err) == KEEL_OK, "%s", err.message);
    return store;
}

static void save(struct store *store, const char *conv, int seq,
                 const struct store_personal_change *change)
{
    struct store_turn_record rec = {
        .conversation_id = conv, .pack = "assistant", .seq = seq, .correlation_id = NULL,
        .ts_ms = 1000 + seq, .user_text = "u", .assistant_text = "a", .state_json = "{}",
        .deltas_json = "[]", .events_json = "[]", .sources_json = "[]", .intent = "general",
        .route = "local_memory_intent", .reasons_json = "[]", .decision_json = "{}",
        .personal = change};
    char cid[64];
    struct keel_error err;

    snprintf(cid, sizeof(cid), "turn_%s%d", conv, seq);
    rec.correlation_id = cid;
    ck_assert_msg(store_save_turn(store, &rec, &err) == KEEL_OK, "%s: %s", err.field,
                  err.message);
}

START_TEST(test_store_personal)
{
    char dir[256];
    struct store *store = open_store(_i, dir, sizeof(dir));
    struct store_personal_change set = {"ada", "favourite drink", "tea", "fact", "c1", 1};
    struct store_personal_change other = {"bob", "favourite drink", "water", "fact", NULL, 2};
    struct store_personal_change note = {"ada", "note: x", "X", "note", "c1", 3};
    struct store_personal_change drop = {"ada", "favourite drink", NULL, NULL, "c1", 4};
    struct store_personal_change bad = {"ada", "", "tea", "fact", NULL, 5};
    struct store_turn_record rec;
    struct keel_error err;
    json_t *list = NULL, *stats = NULL;

    save(store, "c1", 1, &set);
    save(store, "c2", 1, &other);
    set.value = "coffee";
    save(store, "c1", 2, &set);
    save(store, "c1", 3, &note);
    ck_assert_int_eq(store_personal_list(store, "ada", &list, &err), KEEL_OK);
    ck_assert_int_eq(json_array_size(list), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "key")),
                     "favourite drink");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "value")),
                     "coffee");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 1), "kind")), "note");
    json_decref(list);
    ck_assert_int_eq(store_personal_stats(store, &stats, &err), KEEL_OK);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "users")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "facts")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "notes")), 1);
    json_decref(stats);
    save(store, "c1", 4, &drop);
    ck_assert_int_eq(store_personal_list(store, "ada", &list, &err), KEEL_OK);
    ck_assert_int_eq(json_array_size(list), 1);
    json_decref(list);
    /* bob's fact is his alone */
    ck_assert_int_eq(store_personal_list(store, "bob", &list, &err), KEEL_OK);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "value")),
                     "water");
    json_decref(list);
    ck_assert_int_eq(store_personal_list(store, "nobody", &list, &err), KEEL_OK);
    ck_assert_int_eq(json_array_size(list), 0);
    json_decref(list);
    /* A bad change is refused before anything is written; a turn that
     * conflicts stores no fact. */
    memset(&rec, 0, sizeof(rec));
    keel_error_clear(&err);
    rec = (struct store_turn_record){.conversation_id = "c1", .pack = "assistant", .seq = 5,
                                     .correlation_id = "turn_bad", .user_text = "u",
                                     .assistant_text = "a", .state_json = "{}",
                                     .deltas_json = "[]", .events_json = "[]",
                                     .sources_json = "[]", .reasons_json = "[]",
                                     .decision_json = "{}", .personal = &bad};
    ck_assert_int_eq(store_save_turn(store, &rec, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "personal.key");
    set.value = "milk";
    rec.personal = &set;
    rec.seq = 3;   /* stale: turn 3 exists */
    ck_assert_int_ne(store_save_turn(store, &rec, &err), KEEL_OK);
    ck_assert_int_eq(store_personal_list(store, "ada", &list, &err), KEEL_OK);
    ck_assert_int_eq(json_array_size(list), 1);   /* the note only */
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "kind")), "note");
    json_decref(list);
    store_close(store);
    if (dir[0])
        unit_temp_dir_remove(dir);
}
END_TEST

/* ---- whole turns -------------------------------------------------------------- */

static struct pipeline *open_pipeline(struct store *store)
{
    char dir[1024];
    struct pipeline_options options = {.packs_dir = dir, .pack = "assistant", .store = store,
                                       .llm = {"none", NULL, NULL}, .websearch_url = "none"};
    struct pipeline *pl = NULL;
    struct keel_error err;

    snprintf(dir, sizeof(dir), "%s/packs", unit_root());
    ck_assert_msg(pipeline_new(&options, &pl, &err) == KEEL_OK, "%s: %s", err.field, err.message);
    return pl;
}

static json_t *say(struct pipeline *pl, const char *user, const char *text, const char *role)
{
    struct turn_request req = {.message = text, .message_len = strlen(text), .role = role,
                               .now_ms = 1770465600000, .user = user};
    struct keel_error err;
    json_t *out = NULL;

    ck_assert_msg(pipeline_turn(pl, &req, &out, &err) == KEEL_OK, "%s: %s: %s", text, err.field,
                  err.message);
    return out;
}

static const char *answer(const json_t *r)
{
    return json_string_value(json_object_get(r, "answer"));
}

START_TEST(test_turns_two_users)
{
    struct store *store = NULL;
    struct keel_error err;
    struct pipeline *pl;
    json_t *r;

    ck_assert_int_eq(store_open("mem:", &store, &err), KEEL_OK);
    pl = open_pipeline(store);
    json_decref(say(pl, "ada", "remember that my favourite drink is tea", NULL));
    json_decref(say(pl, "bob", "my favourite drink is water", NULL));
    r = say(pl, "ada", "what's my favourite drink?", NULL);
    ck_assert_str_eq(answer(r), "Your favourite drink is tea.");
    json_decref(r);
    r = say(pl, "bob", "what's my favourite drink?", NULL);
    ck_assert_str_eq(answer(r), "Your favourite drink is water.");
    json_decref(r);
    r = say(pl, "carol", "what do you remember about me", NULL);
    ck_assert_ptr_nonnull(strstr(answer(r), "haven't asked me to remember anything"));
    json_decref(r);
    /* A guest reads but does not write. */
    r = say(pl, "ada", "my favourite drink is milk", "guest");
    ck_assert_ptr_nonnull(strstr(answer(r), "guest"));
    ck_assert_int_eq(json_array_size(json_object_get(r, "tools_called")), 0);
    json_decref(r);
    r = say(pl, "ada", "what's my favourite drink?", "guest");
    ck_assert_str_eq(answer(r), "Your favourite drink is tea.");
    json_decref(r);
    /* A user name over the cap is bad input. */
    {
        char name[200];
        struct turn_request req = {.message = "hi", .message_len = 2, .user = name};
        json_t *out = NULL;
        memset(name, 'u', sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        ck_assert_int_eq(pipeline_turn(pl, &req, &out, &err), KEEL_EINVAL);
        ck_assert_str_eq(err.field, "user");
    }
    pipeline_free(pl);
    store_close(store);
}
END_TEST

/* A turn that stores a fact, failing at each allocation in turn: the
 * fact exists exactly when its turn does. */
START_TEST(test_turn_atomic)
{
    char dir[256];
    struct store *store = open_store(_i, dir, sizeof(dir));
    struct pipeline *pl = open_pipeline(store);
    struct keel_error err;
    int stored = 0;

    keel_log_set_level(KEEL_LOG_ERROR);   /* each failed turn logs a warning */
    for (long n = 0; n < 5000 && !stored; n++) {
        struct turn_request req = {.message = "remember that my favourite drink is tea",
                                   .message_len = 39, .now_ms = 1770465600000, .user = "ada"};
        json_t *out = NULL, *list = NULL;
        int rc;

        keel_alloc_fail_after(n, 0);
        rc = pipeline_turn(pl, &req, &out, &err);
        keel_alloc_fail_after(-1, 0);
        ck_assert_int_eq(store_personal_list(store, "ada", &list, &err), KEEL_OK);
        if (rc == KEEL_OK) {
            ck_assert_int_eq(json_array_size(list), 1);
            stored = 1;
        } else if (json_array_size(list)) {
            /* The turn failed after the store committed (the result could
             * not be built): then its conversation holds it. */
            ck_assert_str_eq(err.message, "out of memory (the turn was stored)");
            stored = 1;
        }
        json_decref(list);
        json_decref(out);
    }
    ck_assert(stored);
    pipeline_free(pl);
    store_close(store);
    if (dir[0])
        unit_temp_dir_remove(dir);
}
END_TEST

Suite *suite_assistant(void)
{
    Suite *s = suite_create("assistant");
    TCase *parse = tcase_create("parse"), *store = tcase_create("store"),
          *turns = tcase_create("turns");

    unit_leak_fixture(parse);
    unit_leak_fixture(store);
    unit_leak_fixture(turns);
    tcase_add_loop_test(parse, test_convert_parse, 0,
                        (int)(sizeof(conversions) / sizeof(conversions[0])));
    tcase_add_test(parse, test_convert_format);
    tcase_add_test(parse, test_convert_group);
    tcase_add_test(parse, test_convert_load_errors);
    tcase_add_loop_test(parse, test_personal_parse, 0,
                        (int)(sizeof(readings) / sizeof(readings[0])));
    tcase_add_test(parse, test_personal_caps);
    tcase_add_test(parse, test_card_numbers);
    tcase_add_test(parse, test_personal_key);
    tcase_add_loop_test(store, test_store_personal, 0, 2);   /* mem, sqlite */
    tcase_add_test(turns, test_turns_two_users);
    tcase_add_loop_test(turns, test_turn_atomic, 0, 2);
    tcase_set_timeout(turns, 120);
    suite_add_tcase(s, parse);
    suite_add_tcase(s, store);
    suite_add_tcase(s, turns);
    return s;
}
