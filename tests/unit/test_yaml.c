/*
 * test_yaml.c — unit tests of the YAML-to-jansson loader
 * (src/pack/yaml_json.h): YAML 1.2 core-schema typing of plain scalars,
 * nesting, anchors and aliases, `<<` merge keys, and every way a document
 * is refused — duplicate keys, the depth/alias/node/size caps (including an
 * alias bomb), multiple documents, syntax errors — each with the
 * "origin:LINE" that points at the offending line. Also the path→line map
 * the pack loader uses for its own error messages.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "pack/yaml_json.h"
#include "unit.h"

/* Loads a C string with the default limits; fails the test on error. */
static json_t *load_ok(const char *text, json_t **lines)
{
    struct keel_error err;
    json_t *root = NULL;
    int rc = yaml_json_load(text, strlen(text), "t.yaml", NULL, &root, lines, &err);

    ck_assert_msg(rc == KEEL_OK, "rejected: %s: %s", err.field, err.message);
    ck_assert_ptr_nonnull(root);
    return root;
}

/* Loads a C string that must fail with `code` at `line`; returns the
 * message for further checks (static storage). */
static const char *load_bad(const char *text, const struct yaml_limits *limits, int code,
                            int line)
{
    static struct keel_error err;
    json_t *root = (json_t *)&err, *lines = (json_t *)&err;
    char field[64];
    int rc = yaml_json_load(text, strlen(text), "t.yaml", limits, &root, &lines, &err);

    ck_assert_msg(rc == code, "rc %d (%s: %s), expected %d", rc, err.field, err.message, code);
    ck_assert_int_eq(err.code, code);
    ck_assert_ptr_eq(root, (json_t *)&err);   /* nothing returned */
    ck_assert_ptr_eq(lines, (json_t *)&err);
    snprintf(field, sizeof(field), "t.yaml:%d", line);
    ck_assert_str_eq(err.field, field);
    return err.message;
}

static json_t *get(json_t *root, const char *key)
{
    json_t *value = json_object_get(root, key);

    ck_assert_msg(value != NULL, "no key \"%s\"", key);
    return value;
}

static long line_of(json_t *lines, const char *path)
{
    json_t *line = json_object_get(lines, path);

    ck_assert_msg(json_is_integer(line), "no line for \"%s\"", path);
    return (long)json_integer_value(line);
}

START_TEST(test_scalar_types)
{
    json_t *root = load_ok("a: null\n"
                           "b: ~\n"
                           "c:\n"
                           "d: true\n"
                           "e: False\n"
                           "f: 42\n"
                           "g: -7\n"
                           "h: 3.5\n"
                           "i: '42'\n"
                           "j: \"true\"\n"
                           "k: hello world\n"
                           "l: 1e3\n"
                           "m: +12\n"
                           "n: '~'\n"
                           "o: 2026-02-07\n"
                           "p: \"null\"\n"
                           "q: 007\n"
                           "r: -x\n"
                           "s: yes\n"
                           "t: !!str 12\n"
                           "u: ''\n"
                           "w: NULL\n",
                           NULL);

    ck_assert(json_is_null(get(root, "a")));
    ck_assert(json_is_null(get(root, "b")));
    ck_assert(json_is_null(get(root, "c")));
    ck_assert(json_is_true(get(root, "d")));
    ck_assert(json_is_false(get(root, "e")));
    ck_assert(json_is_integer(get(root, "f")));
    ck_assert_int_eq(json_integer_value(get(root, "f")), 42);
    ck_assert_int_eq(json_integer_value(get(root, "g")), -7);
    ck_assert(json_is_real(get(root, "h")));
    ck_assert_double_eq(json_real_value(get(root, "h")), 3.5);
    /* Quoted scalars stay strings. */
    ck_assert_str_eq(json_string_value(get(root, "i")), "42");
    ck_assert_str_eq(json_string_value(get(root, "j")), "true");
    ck_assert_str_eq(json_string_value(get(root, "k")), "hello world");
    ck_assert(json_is_real(get(root, "l")));
    ck_assert_double_eq(json_real_value(get(root, "l")), 1000.0);
    ck_assert_int_eq(json_integer_value(get(root, "m")), 12);
    ck_assert_str_eq(json_string_value(get(root, "n")), "~");
    ck_assert_str_eq(json_string_value(get(root, "o")), "2026-02-07");
    ck_assert_str_eq(json_string_value(get(root, "p")), "null");
    ck_assert_int_eq(json_integer_value(get(root, "q")), 7);
    ck_assert_str_eq(json_string_value(get(root, "r")), "-x");
    ck_assert_str_eq(json_string_value(get(root, "s")), "yes");  /* YAML 1.2: not a bool */
    ck_assert_str_eq(json_string_value(get(root, "t")), "12");
    ck_assert_str_eq(json_string_value(get(root, "u")), "");
    ck_assert(json_is_null(get(root, "w")));
    json_decref(root);
}
END_TEST

START_TEST(test_nested)
{
    json_t *root = load_ok("name: scholar\n"
                           "tools:\n"
                           "  - name: search\n"
                           "    access: read\n"
                           "  - {name: save, access: write}\n"
                           "roles:\n"
                           "  viewer: [read]\n"
                           "  editor:\n"
                           "    - read\n"
                           "    - write\n"
                           "deep: {a: {b: [[1, 2], {c: d}]}}\n",
                           NULL);
    json_t *tools = get(root, "tools"), *editor;

    ck_assert(json_is_array(tools));
    ck_assert_uint_eq(json_array_size(tools), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 0), "access")), "read");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 1), "name")), "save");
    editor = json_object_get(get(root, "roles"), "editor");
    ck_assert_uint_eq(json_array_size(editor), 2);
    ck_assert_str_eq(json_string_value(json_array_get(editor, 1)), "write");
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(json_object_get(
                         json_object_get(get(root, "deep"), "a"), "b"), 0), 1)), 2);
    json_decref(root);

    /* A scalar or an empty document at the top level. */
    root = load_ok("just text\n", NULL);
    ck_assert_str_eq(json_string_value(root), "just text");
    json_decref(root);
    root = load_ok("", NULL);
    ck_assert(json_is_null(root));
    json_decref(root);
    root = load_ok("# only a comment\n", NULL);
    ck_assert(json_is_null(root));
    json_decref(root);
    root = load_ok("- 1\n- [2, 3]\n", NULL);
    ck_assert_uint_eq(json_array_size(root), 2);
    json_decref(root);
}
END_TEST

START_TEST(test_anchors_aliases)
{
    json_t *root = load_ok("base: &b {x: 1, y: [1, 2]}\n"
                           "copy: *b\n"
                           "word: &w hello\n"
                           "list: [*w, *w]\n",
                           NULL);
    json_t *base = get(root, "base"), *copy = get(root, "copy");

    ck_assert(json_equal(base, copy));
    /* An alias is a deep copy: changing one leaves the other. */
    ck_assert_ptr_ne(base, copy);
    ck_assert_ptr_ne(json_object_get(base, "y"), json_object_get(copy, "y"));
    json_array_append_new(json_object_get(copy, "y"), json_integer(3));
    ck_assert_uint_eq(json_array_size(json_object_get(base, "y")), 2);
    ck_assert_str_eq(json_string_value(json_array_get(get(root, "list"), 1)), "hello");
    json_decref(root);

    load_bad("a: 1\nb: *missing\n", NULL, KEEL_EINVAL, 2);
    /* An anchor is usable only once its node is complete: no cycles. */
    load_bad("a: &a\n  b: *a\n", NULL, KEEL_EINVAL, 2);
}
END_TEST

START_TEST(test_merge_keys)
{
    json_t *root = load_ok("defaults: &d {x: 1, y: 2, z: 3}\n"
                           "after:\n"
                           "  <<: *d\n"
                           "  y: 20\n"
                           "before:\n"
                           "  y: 20\n"
                           "  <<: *d\n"
                           "lists:\n"
                           "  <<: [{a: first, b: first}, {a: second, c: second}]\n"
                           "  c: own\n",
                           NULL);
    json_t *after = get(root, "after"), *before = get(root, "before"), *lists = get(root, "lists");

    /* Explicit keys win wherever they are written. */
    ck_assert_uint_eq(json_object_size(after), 3);
    ck_assert_int_eq(json_integer_value(get(after, "x")), 1);
    ck_assert_int_eq(json_integer_value(get(after, "y")), 20);
    ck_assert_int_eq(json_integer_value(get(after, "z")), 3);
    ck_assert_uint_eq(json_object_size(before), 3);
    ck_assert_int_eq(json_integer_value(get(before, "y")), 20);
    ck_assert(json_object_get(after, "<<") == NULL);
    /* In a list of mappings, earlier ones win. */
    ck_assert_str_eq(json_string_value(get(lists, "a")), "first");
    ck_assert_str_eq(json_string_value(get(lists, "b")), "first");
    ck_assert_str_eq(json_string_value(get(lists, "c")), "own");
    /* The source is not changed by merging. */
    ck_assert_int_eq(json_integer_value(get(get(root, "defaults"), "y")), 2);
    json_decref(root);

    /* An explicit key written twice is still a duplicate. */
    load_bad("d: &d {x: 1}\nm:\n  <<: *d\n  x: 2\n  x: 3\n", NULL, KEEL_EINVAL, 5);
    load_bad("m:\n  <<: 5\n", NULL, KEEL_EINVAL, 2);
}
END_TEST

START_TEST(test_duplicate_keys)
{
    const char *message;

    message = load_bad("a: 1\nb: 2\na: 3\n", NULL, KEEL_EINVAL, 3);
    ck_assert_ptr_nonnull(strstr(message, "duplicate key \"a\""));
    load_bad("outer:\n  x: 1\n  y: 2\n\n  x: [1]\n", NULL, KEEL_EINVAL, 5);
    load_bad("list:\n  - {k: 1, k: 2}\n", NULL, KEEL_EINVAL, 2);
    /* Keys that differ only in type are the same key. */
    load_bad("1: a\n'1': b\n", NULL, KEEL_EINVAL, 2);
}
END_TEST

START_TEST(test_depth_cap)
{
    struct yaml_limits limits = yaml_default_limits;
    char deep[400];
    json_t *root;
    size_t n = 0;

    limits.max_depth = 3;
    root = NULL;
    {
        struct keel_error err;
        const char *ok = "a: {b: {c: 1}}\n";
        ck_assert_int_eq(yaml_json_load(ok, strlen(ok), "t.yaml", &limits, &root, NULL, &err),
                         KEEL_OK);
        json_decref(root);
    }
    load_bad("a:\n  b:\n    c:\n      d: 1\n", &limits, KEEL_ETOOBIG, 4);

    /* The default cap of 64 levels. */
    for (int i = 0; i < 65; i++)
        deep[n++] = '[';
    for (int i = 0; i < 65; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    ck_assert_ptr_nonnull(strstr(load_bad(deep, NULL, KEEL_ETOOBIG, 1), "deep"));
    deep[64] = ' ';
    deep[65] = ' ';
    root = load_ok(deep, NULL);
    json_decref(root);
}
END_TEST

START_TEST(test_alias_cap)
{
    struct yaml_limits limits = yaml_default_limits;
    const char *text = "a: &a 1\nb: [*a, *a]\nc: *a\n";

    limits.max_aliases = 2;
    ck_assert_ptr_nonnull(strstr(load_bad(text, &limits, KEEL_ETOOBIG, 3), "aliases"));
    limits.max_aliases = 3;
    {
        struct keel_error err;
        json_t *root = NULL;
        ck_assert_int_eq(yaml_json_load(text, strlen(text), "t.yaml", &limits, &root, NULL, &err),
                         KEEL_OK);
        json_decref(root);
    }
}
END_TEST

START_TEST(test_node_cap_alias_bomb)
{
    /* Each level multiplies by nine: 10, 91, 820, 7381, 66430, 597871 nodes
     * with only 45 aliases, a few hundred bytes of text. */
    const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
                       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
    long before = keel_alloc_live();
    const char *message = load_bad(bomb, NULL, KEEL_ETOOBIG, 6);

    ck_assert_ptr_nonnull(strstr(message, "too many nodes"));
    ck_assert_int_eq(keel_alloc_live(), before);
}
END_TEST

START_TEST(test_node_cap_counts_containers)
{
    struct yaml_limits limits = yaml_default_limits;
    struct keel_error err;
    json_t *root = NULL;

    /* Five scalars and their list: six nodes. */
    limits.max_nodes = 6;
    ck_assert_int_eq(yaml_json_load("[1, 2, 3, 4, 5]", 15, "t.yaml", &limits, &root, NULL, &err),
                     KEEL_OK);
    json_decref(root);
    limits.max_nodes = 5;
    load_bad("[1, 2, 3, 4, 5]", &limits, KEEL_ETOOBIG, 1);
    /* Empty containers are nodes too: seven of them here. */
    load_bad("[[], [], {}, [], [], []]", &limits, KEEL_ETOOBIG, 1);
    /* An alias copy counts every node it copies. */
    limits.max_nodes = 8;
    load_bad("a: &a [1, 2, 3]\nb: *a\n", &limits, KEEL_ETOOBIG, 2);
}
END_TEST

START_TEST(test_size_cap)
{
    struct yaml_limits limits = yaml_default_limits;
    size_t big_n = yaml_default_limits.max_bytes + 1;
    char *big = malloc(big_n + 1);
    struct keel_error err;
    json_t *root = NULL;
    int rc;

    limits.max_bytes = 8;
    ck_assert_ptr_nonnull(strstr(load_bad("a: 123456", &limits, KEEL_ETOOBIG, 1), "limit"));
    ck_assert_int_eq(yaml_json_load("a: 12345", 8, "t.yaml", &limits, &root, NULL, &err), KEEL_OK);
    json_decref(root);

    ck_assert_ptr_nonnull(big);
    memset(big, '#', big_n);
    big[big_n] = '\0';
    rc = yaml_json_load(big, big_n, "t.yaml", NULL, &root, NULL, &err);
    free(big);
    ck_assert_int_eq(rc, KEEL_ETOOBIG);
    ck_assert_str_eq(err.field, "t.yaml:1");
}
END_TEST

START_TEST(test_multi_document)
{
    const char *message = load_bad("a: 1\n---\nb: 2\n", NULL, KEEL_EINVAL, 2);

    ck_assert_ptr_nonnull(strstr(message, "one YAML document"));
    load_bad("---\na: 1\n...\n---\nb: 2\n", NULL, KEEL_EINVAL, 4);
    /* One explicit document is fine. */
    json_decref(load_ok("---\na: 1\n...\n", NULL));
}
END_TEST

START_TEST(test_syntax_errors)
{
    const char *message;

    message = load_bad("a: 1\nb: c: d\n", NULL, KEEL_EPARSE, 2);
    ck_assert_ptr_nonnull(strstr(message, "mapping values are not allowed"));
    load_bad("a: 1\nb: 2\nc: \"open\n", NULL, KEEL_EPARSE, 4);
    load_bad("a: [1, 2\nb: 3\n", NULL, KEEL_EPARSE, 2);
    load_bad("a:\n  - 1\n - 2\n", NULL, KEEL_EPARSE, 3);
    load_bad("a: 1\n\tb: 2\n", NULL, KEEL_EPARSE, 2);
    /* Only the !!str tag is understood; complex keys are refused. */
    load_bad("a: !!int 5\n", NULL, KEEL_EUNSUPPORTED, 1);
    load_bad("? [a, b]\n: c\n", NULL, KEEL_EINVAL, 1);
}
END_TEST

START_TEST(test_lines_map)
{
    json_t *lines = NULL;
    json_t *root = load_ok("name: x\n"                          /* 1 */
                           "tools:\n"                           /* 2 */
                           "  - name: a\n"                      /* 3 */
                           "    access: read\n"                 /* 4 */
                           "  - {name: b, access: write}\n"     /* 5 */
                           "roles:\n"                           /* 6 */
                           "  viewer: [read]\n"                 /* 7 */
                           "  editor:\n"                        /* 8 */
                           "    - read\n"                       /* 9 */
                           "\n"                                 /* 10 */
                           "    - write\n"                      /* 11 */
                           "empty:\n"                           /* 12 */
                           "anchor: &a {k: v}\n"                /* 13 */
                           "alias: *a\n",                       /* 14 */
                           &lines);

    ck_assert_ptr_nonnull(lines);
    ck_assert_int_eq(line_of(lines, "name"), 1);
    ck_assert_int_eq(line_of(lines, "tools"), 2);
    ck_assert_int_eq(line_of(lines, "tools[0]"), 3);
    ck_assert_int_eq(line_of(lines, "tools[0].name"), 3);
    ck_assert_int_eq(line_of(lines, "tools[0].access"), 4);
    ck_assert_int_eq(line_of(lines, "tools[1]"), 5);
    ck_assert_int_eq(line_of(lines, "tools[1].access"), 5);
    ck_assert_int_eq(line_of(lines, "roles"), 6);
    ck_assert_int_eq(line_of(lines, "roles.viewer"), 7);
    ck_assert_int_eq(line_of(lines, "roles.viewer[0]"), 7);
    ck_assert_int_eq(line_of(lines, "roles.editor"), 8);
    ck_assert_int_eq(line_of(lines, "roles.editor[0]"), 9);
    ck_assert_int_eq(line_of(lines, "roles.editor[1]"), 11);
    ck_assert_int_eq(line_of(lines, "empty"), 12);
    ck_assert_int_eq(line_of(lines, "anchor.k"), 13);
    ck_assert_int_eq(line_of(lines, "alias"), 14);
    ck_assert(json_object_get(lines, "nope") == NULL);
    json_decref(lines);
    json_decref(root);
}
END_TEST

START_TEST(test_enomem_sweep)
{
    const char *text = "name: x\n"
                       "base: &b {x: 1, y: [a, b]}\n"
                       "tools:\n"
                       "  - {name: a, access: read}\n"
                       "  - <<: *b\n"
                       "    y: 2\n"
                       "copy: *b\n";
    long before = keel_alloc_live();
    struct keel_error err;
    json_t *root = NULL, *lines = NULL;
    int rc = KEEL_ENOMEM;
    long n;

    for (n = 0; n < 100000 && rc != KEEL_OK; n++) {
        keel_alloc_fail_after(n, 0);
        rc = yaml_json_load(text, strlen(text), "t.yaml", NULL, &root, &lines, &err);
        keel_alloc_fail_after(-1, 0);
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "allocation %ld: %s: %s", n,
                      err.field, err.message);
        if (rc != KEEL_OK)
            ck_assert_int_eq(keel_alloc_live(), before);
    }
    ck_assert_int_eq(rc, KEEL_OK);
    ck_assert_int_gt(n, 20);
    ck_assert_int_eq(line_of(lines, "copy"), 7);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(
                         json_object_get(root, "tools"), 1), "y")), 2);
    json_decref(root);
    json_decref(lines);
}
END_TEST

Suite *suite_yaml(void)
{
    Suite *s = suite_create("yaml");
    TCase *values = tcase_create("values"), *refusals = tcase_create("refusals");
    TCase *caps = tcase_create("caps"), *lines = tcase_create("lines");

    unit_leak_fixture(values);
    tcase_add_test(values, test_scalar_types);
    tcase_add_test(values, test_nested);
    tcase_add_test(values, test_anchors_aliases);
    tcase_add_test(values, test_merge_keys);
    suite_add_tcase(s, values);

    unit_leak_fixture(refusals);
    tcase_add_test(refusals, test_duplicate_keys);
    tcase_add_test(refusals, test_multi_document);
    tcase_add_test(refusals, test_syntax_errors);
    suite_add_tcase(s, refusals);

    unit_leak_fixture(caps);
    tcase_set_timeout(caps, 30);
    tcase_add_test(caps, test_depth_cap);
    tcase_add_test(caps, test_alias_cap);
    tcase_add_test(caps, test_node_cap_alias_bomb);
    tcase_add_test(caps, test_node_cap_counts_containers);
    tcase_add_test(caps, test_size_cap);
    tcase_add_test(caps, test_enomem_sweep);
    suite_add_tcase(s, caps);

    unit_leak_fixture(lines);
    tcase_add_test(lines, test_lines_map);
    suite_add_tcase(s, lines);
    return s;
}
