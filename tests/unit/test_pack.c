/*
 * test_pack.c — unit tests of the pack loader (src/pack/pack.h): the real
 * packs under unit_root()/packs load with the tools, roles and default
 * role every layer relies on, and a role may call only the tools its
 * grants cover. Bad packs are parsed from strings; each is refused with
 * KEEL_EINVAL and the field "origin:LINE" of the line that is wrong. A
 * temporary packs directory covers pack_load's own checks (the folder name
 * must match, pack.json is the fallback).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "pack/pack.h"
#include "unit.h"

static struct pack *load_real(const char *name)
{
    char dir[1024];
    struct keel_error err;
    struct pack *pack = NULL;
    int rc;

    snprintf(dir, sizeof(dir), "%s/packs", unit_root());
    rc = pack_load(dir, name, &pack, &err);
    ck_assert_msg(rc == KEEL_OK, "pack %s: %s: %s", name, err.field, err.message);
    return pack;
}

static int tool(const struct pack *pack, const char *name)
{
    int index = pack_tool_index(pack, name, strlen(name));

    ck_assert_msg(index >= 0, "pack %s has no tool %s", pack->name, name);
    return index;
}

static int role(const struct pack *pack, const char *name)
{
    int index = pack_role_index(pack, name);

    ck_assert_msg(index >= 0, "pack %s has no role %s", pack->name, name);
    return index;
}

/* Parses `text` as origin "bad.yaml"; it must fail with KEEL_EINVAL at
 * `line`, with `needle` in the message. */
static void parse_bad(const char *text, int line, const char *needle)
{
    struct keel_error err;
    struct pack *pack = (struct pack *)&err;
    char field[64];
    int rc = pack_parse(text, strlen(text), "bad.yaml", &pack, &err);

    ck_assert_msg(rc == KEEL_EINVAL, "rc %d for:\n%s", rc, text);
    ck_assert_ptr_eq(pack, (struct pack *)&err);  /* nothing returned */
    ck_assert_int_eq(err.code, KEEL_EINVAL);
    snprintf(field, sizeof(field), "bad.yaml:%d", line);
    ck_assert_msg(!strcmp(err.field, field), "field \"%s\", expected \"%s\" (%s)", err.field,
                  field, err.message);
    ck_assert_msg(strstr(err.message, needle) != NULL, "message \"%s\" lacks \"%s\"",
                  err.message, needle);
}

/* ---- the real packs ---------------------------------------------------- */

START_TEST(test_scholar)
{
    struct pack *pack = load_real("scholar");
    int viewer, editor, owner;

    ck_assert_str_eq(pack->name, "scholar");
    ck_assert_ptr_nonnull(strstr(pack->origin, "packs/scholar/pack.yaml"));
    ck_assert_uint_eq(pack->n_tools, 5);
    ck_assert_str_eq(pack->tools[0].name, "search_papers");
    ck_assert_int_eq(pack->tools[tool(pack, "search_papers")].access, PACK_READ);
    ck_assert_int_eq(pack->tools[tool(pack, "batch_search_papers")].access, PACK_READ);
    ck_assert_int_eq(pack->tools[tool(pack, "get_paper")].access, PACK_READ);
    ck_assert_int_eq(pack->tools[tool(pack, "add_to_library")].access, PACK_WRITE);
    ck_assert_int_eq(pack->tools[tool(pack, "update_project_notes")].access, PACK_WRITE);
    ck_assert_str_ne(pack->tools[0].description, "");

    ck_assert_uint_eq(pack->n_roles, 3);
    viewer = role(pack, "viewer");
    editor = role(pack, "editor");
    owner = role(pack, "owner");
    ck_assert_int_eq(pack->roles[viewer].access, PACK_READ);
    ck_assert_int_eq(pack->roles[editor].access, PACK_READ | PACK_WRITE);
    ck_assert_int_eq(pack->default_role, editor);

    /* The viewer is read-only. */
    for (size_t t = 0; t < pack->n_tools; t++) {
        ck_assert_int_eq(pack_role_may_call(pack, viewer, (int)t),
                         pack->tools[t].access == PACK_READ);
        ck_assert(pack_role_may_call(pack, editor, (int)t));
        ck_assert(pack_role_may_call(pack, owner, (int)t));
    }
    ck_assert(!pack_role_may_call(pack, viewer, tool(pack, "add_to_library")));
    ck_assert(pack_role_may_call(pack, viewer, tool(pack, "get_paper")));
    /* Out of range indices may call nothing. */
    ck_assert(!pack_role_may_call(pack, -1, 0));
    ck_assert(!pack_role_may_call(pack, editor, -1));
    ck_assert(!pack_role_may_call(pack, (int)pack->n_roles, 0));
    ck_assert(!pack_role_may_call(pack, editor, (int)pack->n_tools));

    ck_assert_int_eq(pack_role_index(pack, "admin"), -1);
    ck_assert_int_eq(pack_tool_index(pack, "get_paper_x", 9), tool(pack, "get_paper"));
    ck_assert_int_eq(pack_tool_index(pack, "get_pape", 8), -1);
    ck_assert_int_eq(pack_tool_index(pack, "nope", 4), -1);
    ck_assert(json_is_object(json_object_get(pack->doc, "policy")));
    ck_assert_ptr_nonnull(pack->lines);
    pack_free(pack);
}
END_TEST

START_TEST(test_assistant)
{
    struct pack *pack = load_real("assistant");
    int guest, user;

    ck_assert_str_eq(pack->name, "assistant");
    ck_assert_uint_eq(pack->n_tools, 5);
    ck_assert_int_eq(pack->tools[tool(pack, "web_search")].access, PACK_READ);
    ck_assert_int_eq(pack->tools[tool(pack, "convert_units")].access, PACK_READ);
    ck_assert_int_eq(pack->tools[tool(pack, "recall_memory")].access, PACK_READ);
    ck_assert_int_eq(pack->tools[tool(pack, "remember_fact")].access, PACK_WRITE);
    ck_assert_uint_eq(pack->n_roles, 2);
    guest = role(pack, "guest");
    user = role(pack, "user");
    ck_assert_int_eq(pack->default_role, user);
    ck_assert(pack_role_may_call(pack, guest, tool(pack, "web_search")));
    ck_assert(!pack_role_may_call(pack, guest, tool(pack, "remember_fact")));
    ck_assert(pack_role_may_call(pack, user, tool(pack, "remember_fact")));
    pack_free(pack);
    pack_free(NULL);
}
END_TEST

START_TEST(test_load_names)
{
    char dir[1024];
    struct keel_error err;
    struct pack *pack = NULL;

    snprintf(dir, sizeof(dir), "%s/packs", unit_root());
    ck_assert_int_eq(pack_load(dir, "nosuchpack", &pack, &err), KEEL_ENOTFOUND);
    ck_assert_str_eq(err.field, "pack");
    ck_assert_ptr_nonnull(strstr(err.message, "nosuchpack"));
    ck_assert_int_eq(pack_load(dir, "../etc", &pack, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "pack");
    ck_assert_int_eq(pack_load(dir, "Scholar", &pack, &err), KEEL_EINVAL);
    ck_assert_int_eq(pack_load(dir, "", &pack, &err), KEEL_EINVAL);
    ck_assert_ptr_null(pack);
}
END_TEST

/* ---- bad packs --------------------------------------------------------- */

START_TEST(test_unknown_top_level_key)
{
    parse_bad("name: t\n"
              "roles: {viewer: [read]}\n"
              "polcy:\n"
              "  search: {}\n",
              3, "unknown key \"polcy\"");
    parse_bad("name: t\nroles: {viewer: [read]}\nextra: 1\n", 3, "extra");
}
END_TEST

START_TEST(test_tool_access)
{
    parse_bad("name: t\n"
              "tools:\n"
              "  - {name: ok, access: read}\n"
              "  - {name: shell, access: execute}\n"
              "roles: {viewer: [read]}\n",
              4, "access must be read or write, not \"execute\"");
    parse_bad("name: t\n"
              "tools:\n"
              "  - name: ok\n"
              "    access: read\n"
              "  - name: shell\n"
              "    access: rw\n"
              "roles: {viewer: [read]}\n",
              5, "\"rw\"");
    parse_bad("name: t\ntools:\n  - {name: x}\nroles: {viewer: [read]}\n", 3,
              "tools[0].access: is required");
    parse_bad("name: t\ntools:\n  - {name: x, access: 1}\nroles: {viewer: [read]}\n", 3,
              "must be a string");
    parse_bad("name: t\ntools:\n  - {name: x, access: read, scope: all}\nroles: {viewer: [read]}\n",
              3, "unknown key \"scope\"");
    parse_bad("name: t\ntools:\n  - {name: Bad Name, access: read}\nroles: {viewer: [read]}\n", 3,
              "[a-z0-9_-]+");
    parse_bad("name: t\ntools: search\nroles: {viewer: [read]}\n", 2, "must be a list");
    parse_bad("name: t\ntools:\n  - search\nroles: {viewer: [read]}\n", 3, "must be a mapping");
}
END_TEST

START_TEST(test_duplicate_tool)
{
    parse_bad("name: t\n"
              "tools:\n"
              "  - {name: search, access: read}\n"
              "  - {name: save, access: write}\n"
              "  - {name: search, access: write}\n"
              "roles: {viewer: [read]}\n",
              5, "tool \"search\" is listed twice");
}
END_TEST

START_TEST(test_bad_role_grant)
{
    parse_bad("name: t\n"
              "roles:\n"
              "  viewer: [read]\n"
              "  editor:\n"
              "    - read\n"
              "    - admin\n",
              6, "roles.editor[1]: must be read or write");
    parse_bad("name: t\nroles:\n  viewer: read\n", 3, "must be a list");
    parse_bad("name: t\nroles:\n  viewer: [read, 7]\n", 3, "roles.viewer[1]");
    parse_bad("name: t\nroles:\n  Viewer: [read]\n", 3, "role name");
    parse_bad("name: t\ntools: []\n", 1, "roles: is required");
    parse_bad("name: t\nroles: {}\n", 2, "must map role names");
    parse_bad("name: t\nroles: [read]\n", 2, "must map role names");
}
END_TEST

START_TEST(test_default_role)
{
    parse_bad("name: t\n"
              "roles: {viewer: [read], editor: [read, write]}\n"
              "default_role: admin\n",
              3, "\"admin\" is not one of the roles");
    parse_bad("name: t\nroles: {viewer: [read]}\ndefault_role: [viewer]\n", 3, "must be a string");
}
END_TEST

START_TEST(test_bad_name_and_shape)
{
    struct keel_error err;
    struct pack *pack = NULL;

    parse_bad("description: no name\nroles: {viewer: [read]}\n", 1, "name: is required");
    parse_bad("roles: {viewer: [read]}\nname: Not Valid\n", 2, "must be [a-z0-9_-]+");
    parse_bad("roles: {viewer: [read]}\nname: 42\n", 2, "must be a string");
    /* Not a mapping at all: the origin alone names it. */
    ck_assert_int_eq(pack_parse("- a\n- b\n", 8, "bad.yaml", &pack, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "bad.yaml");
    /* YAML errors come through with their line. */
    ck_assert_int_eq(pack_parse("name: t\nname: u\n", 16, "bad.yaml", &pack, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "bad.yaml:2");
    ck_assert_int_eq(pack_parse("name: [t\n", 9, "bad.yaml", &pack, &err), KEEL_EPARSE);
    ck_assert_ptr_null(pack);
}
END_TEST

START_TEST(test_caps)
{
    static char text[8192];
    size_t n;

    /* One tool too many. */
    n = (size_t)snprintf(text, sizeof(text), "name: t\nroles: {r: [read]}\ntools:\n");
    for (int i = 0; i <= PACK_MAX_TOOLS; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "  - {name: t%d, access: read}\n", i);
    parse_bad(text, 3, "at most 64 tools");
    /* One role too many. */
    n = (size_t)snprintf(text, sizeof(text), "name: t\nroles:\n");
    for (int i = 0; i <= PACK_MAX_ROLES; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "  r%d: [read]\n", i);
    parse_bad(text, 2, "at most 16 roles");
    /* A name must fit. */
    n = (size_t)snprintf(text, sizeof(text), "roles: {r: [read]}\nname: ");
    for (int i = 0; i < PACK_NAME_MAX; i++)
        text[n++] = 'n';
    text[n] = '\0';
    parse_bad(text, 2, "shorter than 64 bytes");
}
END_TEST

START_TEST(test_good_pack_from_text)
{
    const char *text = "name: mini\n"
                       "description: A tiny pack.\n"
                       "version: 2\n"
                       "tools:\n"
                       "  - {name: look, access: read}\n"
                       "  - {name: poke, access: write, description: Changes things.}\n"
                       "roles:\n"
                       "  reader: [read]\n"
                       "  writer: [write]\n"
                       "  both: [read, write, read]\n"
                       "default_role: both\n"
                       "policy: {}\n";
    struct keel_error err;
    struct pack *pack = NULL;

    ck_assert_int_eq(pack_parse(text, strlen(text), "mini.yaml", &pack, &err), KEEL_OK);
    ck_assert_str_eq(pack->name, "mini");
    ck_assert_str_eq(pack->description, "A tiny pack.");
    ck_assert_str_eq(pack->tools[0].description, "");
    ck_assert_str_eq(pack->tools[1].description, "Changes things.");
    ck_assert_int_eq(pack->default_role, 2);
    ck_assert(pack_role_may_call(pack, 0, 0));
    ck_assert(!pack_role_may_call(pack, 0, 1));
    ck_assert(!pack_role_may_call(pack, 1, 0));   /* write does not imply read */
    ck_assert(pack_role_may_call(pack, 1, 1));
    ck_assert_int_eq(pack->roles[2].access, PACK_READ | PACK_WRITE);
    pack_free(pack);

    /* Without default_role the first role is the default. */
    text = "name: mini\nroles: {first: [read], second: [write]}\n";
    ck_assert_int_eq(pack_parse(text, strlen(text), "mini.yaml", &pack, &err), KEEL_OK);
    ck_assert_int_eq(pack->default_role, 0);
    ck_assert_uint_eq(pack->n_tools, 0);
    pack_free(pack);
}
END_TEST

START_TEST(test_json_pack)
{
    const char *text = "{\"name\": \"jp\", \"tools\": [{\"name\": \"look\", \"access\": \"read\"}],"
                       " \"roles\": {\"viewer\": [\"read\"]}, \"policy\": {}}";
    const char *bad = "{\"name\": \"jp\", \"roles\": {\"viewer\": [\"execute\"]}}";
    struct keel_error err;
    struct pack *pack = NULL;

    ck_assert_int_eq(pack_parse(text, strlen(text), "dir/jp/pack.json", &pack, &err), KEEL_OK);
    ck_assert_str_eq(pack->name, "jp");
    ck_assert_uint_eq(pack->n_tools, 1);
    ck_assert_ptr_null(pack->lines);
    pack_free(pack);
    pack = NULL;

    /* JSON has no line map: the error names the file and the path. */
    ck_assert_int_eq(pack_parse(bad, strlen(bad), "dir/jp/pack.json", &pack, &err), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "dir/jp/pack.json");
    ck_assert_ptr_nonnull(strstr(err.message, "roles.viewer[0]"));
    /* The same text named .yaml is read as YAML (JSON is YAML too). */
    ck_assert_int_eq(pack_parse(text, strlen(text), "jp.yaml", &pack, &err), KEEL_OK);
    pack_free(pack);
    ck_assert_int_eq(pack_parse("{\"name\": 1,}", 12, "x.json", &pack, &err), KEEL_EPARSE);
}
END_TEST

START_TEST(test_pack_fail_lines)
{
    const char *text = "name: t\n"
                       "roles:\n"
                       "  viewer: [read]\n"
                       "policy:\n"
                       "  search:\n"
                       "    count: 5\n";
    struct keel_error err;
    struct pack *pack = NULL;

    ck_assert_int_eq(pack_parse(text, strlen(text), "p.yaml", &pack, &err), KEEL_OK);
    ck_assert_int_eq(pack_fail(pack, "policy.search.count", &err, "bad %s", "count"), KEEL_EINVAL);
    ck_assert_str_eq(err.field, "p.yaml:6");
    ck_assert_str_eq(err.message, "policy.search.count: bad count");
    /* A path the loader never saw falls back to its nearest ancestor. */
    pack_fail(pack, "policy.search.missing[3].x", &err, "x");
    ck_assert_str_eq(err.field, "p.yaml:5");
    pack_fail(pack, "roles.viewer[7]", &err, "x");
    ck_assert_str_eq(err.field, "p.yaml:3");
    pack_fail(pack, "policy", &err, "x");
    ck_assert_str_eq(err.field, "p.yaml:4");
    pack_fail(pack, "nothing.here", &err, "x");
    ck_assert_str_eq(err.field, "p.yaml:1");
    pack_free(pack);
}
END_TEST

/* ---- pack_load from a directory ---------------------------------------- */

struct temp_packs {
    char dir[64];
    char files[4][160];
    char subdirs[4][128];
    int n_files, n_subdirs;
};

static void temp_packs_init(struct temp_packs *t)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->dir, sizeof(t->dir), "/tmp/keel-unit-packs-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
}

static void temp_packs_write(struct temp_packs *t, const char *name, const char *file,
                             const char *text)
{
    char sub[sizeof(t->subdirs[0])], path[sizeof(t->files[0])];
    FILE *f;

    snprintf(sub, sizeof(sub), "%s/%s", t->dir, name);
    if (mkdir(sub, 0700) == 0)
        memcpy(t->subdirs[t->n_subdirs++], sub, sizeof(sub));
    snprintf(path, sizeof(path), "%s/%s", sub, file);
    memcpy(t->files[t->n_files++], path, sizeof(path));
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void temp_packs_remove(struct temp_packs *t)
{
    for (int i = 0; i < t->n_files; i++)
        unlink(t->files[i]);
    for (int i = 0; i < t->n_subdirs; i++)
        rmdir(t->subdirs[i]);
    rmdir(t->dir);
}

START_TEST(test_load_from_dir)
{
    struct temp_packs t;
    struct keel_error err_mismatch, err_json;
    struct pack *mismatch = NULL, *json = NULL, *yaml_first = NULL;
    char expect_field[256];
    int rc_mismatch, rc_json, rc_yaml_first;

    temp_packs_init(&t);
    temp_packs_write(&t, "foo", "pack.yaml", "# a comment\nname: bar\nroles: {viewer: [read]}\n");
    temp_packs_write(&t, "jp", "pack.json", "{\"name\": \"jp\", \"roles\": {\"r\": [\"read\"]}}");
    temp_packs_write(&t, "both", "pack.json", "{\"name\": \"wrong\"}");
    temp_packs_write(&t, "both", "pack.yaml", "name: both\nroles: {r: [read]}\n");
    rc_mismatch = pack_load(t.dir, "foo", &mismatch, &err_mismatch);
    rc_json = pack_load(t.dir, "jp", &json, &err_json);
    rc_yaml_first = pack_load(t.dir, "both", &yaml_first, &err_json);
    snprintf(expect_field, sizeof(expect_field), "%s/foo/pack.yaml:2", t.dir);
    temp_packs_remove(&t);

    ck_assert_int_eq(rc_mismatch, KEEL_EINVAL);
    ck_assert_ptr_null(mismatch);
    ck_assert_str_eq(err_mismatch.field, expect_field);
    ck_assert_ptr_nonnull(strstr(err_mismatch.message, "\"bar\" but the folder is \"foo\""));
    ck_assert_int_eq(rc_json, KEEL_OK);
    ck_assert_str_eq(json->name, "jp");
    ck_assert_ptr_nonnull(strstr(json->origin, "jp/pack.json"));
    ck_assert_int_eq(rc_yaml_first, KEEL_OK);
    ck_assert_str_eq(yaml_first->name, "both");
    pack_free(json);
    pack_free(yaml_first);
}
END_TEST

START_TEST(test_parse_enomem_sweep)
{
    static char text[PACK_FILE_MAX];
    char path[1024];
    struct keel_error err;
    struct pack *pack = NULL;
    long before = keel_alloc_live(), n;
    int rc = KEEL_ENOMEM;
    size_t len;
    FILE *f;

    /* Fail each allocation of parsing a real pack in turn: every one is
     * reported as KEEL_ENOMEM and leaves nothing allocated. */
    snprintf(path, sizeof(path), "%s/packs/assistant/pack.yaml", unit_root());
    f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    len = fread(text, 1, sizeof(text), f);
    fclose(f);
    for (n = 0; rc != KEEL_OK; n++) {
        keel_alloc_fail_after(n, 0);
        rc = pack_parse(text, len, "assistant.yaml", &pack, &err);
        keel_alloc_fail_after(-1, 0);
        ck_assert_msg(rc == KEEL_OK || rc == KEEL_ENOMEM, "allocation %ld: %s: %s", n,
                      err.field, err.message);
        if (rc)
            ck_assert_int_eq(keel_alloc_live(), before);
    }
    ck_assert_int_gt(n, 100);
    ck_assert_str_eq(pack->name, "assistant");
    ck_assert_uint_eq(pack->n_tools, 5);
    pack_free(pack);
}
END_TEST

Suite *suite_pack(void)
{
    Suite *s = suite_create("pack");
    TCase *real = tcase_create("real"), *bad = tcase_create("bad");
    TCase *files = tcase_create("files");

    unit_leak_fixture(real);
    tcase_add_test(real, test_scholar);
    tcase_add_test(real, test_assistant);
    tcase_add_test(real, test_load_names);
    suite_add_tcase(s, real);

    unit_leak_fixture(bad);
    tcase_add_test(bad, test_unknown_top_level_key);
    tcase_add_test(bad, test_tool_access);
    tcase_add_test(bad, test_duplicate_tool);
    tcase_add_test(bad, test_bad_role_grant);
    tcase_add_test(bad, test_default_role);
    tcase_add_test(bad, test_bad_name_and_shape);
    tcase_add_test(bad, test_caps);
    tcase_add_test(bad, test_good_pack_from_text);
    tcase_add_test(bad, test_json_pack);
    tcase_add_test(bad, test_pack_fail_lines);
    suite_add_tcase(s, bad);

    unit_leak_fixture(files);
    tcase_set_timeout(files, 120);
    tcase_add_test(files, test_load_from_dir);
    tcase_add_test(files, test_parse_enomem_sweep);
    suite_add_tcase(s, files);
    return s;
}
