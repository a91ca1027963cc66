/*
 * pack.c — loading and checking the shared part of a pack.
 */
#include "pack/pack.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/file.h"
#include "core/json.h"
#include "pack/yaml_json.h"

/* Top-level keys a pack may have; each layer owns its section. */
static const char *const top_keys[] = {
    "name", "description", "version", "tools", "roles", "default_role", "policy", "pipeline",
    "providers", "llm", "memory", "handlers", "artifacts", "scenario", NULL,
};

const char *pack_default_dir(void)
{
    static char beside_binary[4200];
    const char *env = getenv("KEEL_PACKS");
    char exe[4096];
    ssize_t n;

    if (env && *env)
        return env;
    if (keel_is_dir("packs"))
        return "packs";
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        char *slash;
        exe[n] = '\0';
        /* build/keel or build/san/keel → walk up until a packs/ appears. */
        while ((slash = strrchr(exe, '/')) != NULL) {
            *slash = '\0';
            snprintf(beside_binary, sizeof(beside_binary), "%s/packs", exe);
            if (keel_is_dir(beside_binary))
                return beside_binary;
        }
    }
    return "packs";
}

static int line_of(const struct pack *pack, const char *path)
{
    char probe[KEEL_JSON_PATH_MAX];

    if (!pack->lines)
        return 0;
    snprintf(probe, sizeof(probe), "%s", path);
    for (;;) {
        json_t *line = json_object_get(pack->lines, probe);
        char *cut;
        if (line)
            return (int)json_integer_value(line);
        cut = strrchr(probe, probe[strlen(probe) - 1] == ']' ? '[' : '.');
        if (!cut || cut == probe)
            return 1;
        *cut = '\0';
    }
}

int pack_fail(const struct pack *pack, const char *path, struct keel_error *err,
              const char *fmt, ...)
{
    char field[KEEL_ERROR_FIELD_MAX], what[KEEL_ERROR_MESSAGE_MAX];
    int line = line_of(pack, path);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(field, sizeof(field), "%s:%d", pack->origin, line);
    else
        snprintf(field, sizeof(field), "%s", pack->origin);
    return keel_error_set(err, KEEL_EINVAL, field, "%s: %s", path, what);
}

int pack_tool_index(const struct pack *pack, const char *name, size_t n)
{
    for (size_t i = 0; i < pack->n_tools; i++)
        if (strlen(pack->tools[i].name) == n && !memcmp(pack->tools[i].name, name, n))
            return (int)i;
    return -1;
}

int pack_role_index(const struct pack *pack, const char *name)
{
    for (size_t i = 0; i < pack->n_roles; i++)
        if (!strcmp(pack->roles[i].name, name))
            return (int)i;
    return -1;
}

int pack_role_may_call(const struct pack *pack, int role, int tool)
{
    if (role < 0 || (size_t)role >= pack->n_roles || tool < 0 || (size_t)tool >= pack->n_tools)
        return 0;
    return (pack->roles[role].access & pack->tools[tool].access) != 0;
}

static int valid_name(const char *name)
{
    if (!*name || strlen(name) >= PACK_NAME_MAX)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

static int parse_access(const char *text)
{
    if (!strcmp(text, "read"))
        return PACK_READ;
    if (!strcmp(text, "write"))
        return PACK_WRITE;
    return 0;
}

static int load_tools(struct pack *pack, struct keel_error *err)
{
    static const char *const tool_keys[] = {"name", "access", "description", NULL};
    json_t *tools = json_object_get(pack->doc, "tools"), *tool;
    char path[KEEL_JSON_PATH_MAX];
    size_t i;

    if (!tools)
        return KEEL_OK;
    if (!json_is_array(tools))
        return pack_fail(pack, "tools", err, "must be a list of {name, access}");
    if (json_array_size(tools) > PACK_MAX_TOOLS)
        return pack_fail(pack, "tools", err, "at most %d tools", PACK_MAX_TOOLS);
    json_array_foreach(tools, i, tool) {
        const char *name = NULL, *access = NULL, *description = "";
        struct keel_error inner;
        keel_json_path_index(path, sizeof(path), "tools", i);
        if (!json_is_object(tool))
            return pack_fail(pack, path, err, "must be a mapping with name and access");
        if (keel_json_check_keys(tool, tool_keys, path, &inner) ||
            keel_json_get_string(tool, "name", 1, path, &name, &inner) ||
            keel_json_get_string(tool, "access", 1, path, &access, &inner) ||
            keel_json_get_string(tool, "description", 0, path, &description, &inner))
            return pack_fail(pack, inner.field, err, "%s", inner.message);
        if (!valid_name(name))
            return pack_fail(pack, path, err, "tool name \"%s\" must be [a-z0-9_-]+", name);
        if (pack_tool_index(pack, name, strlen(name)) >= 0)
            return pack_fail(pack, path, err, "tool \"%s\" is listed twice", name);
        pack->tools[i].name = name;
        pack->tools[i].description = description;
        pack->tools[i].access = parse_access(access);
        if (!pack->tools[i].access)
            return pack_fail(pack, path, err, "access must be read or write, not \"%s\"", access);
        pack->n_tools = i + 1;
    }
    return KEEL_OK;
}

static int load_roles(struct pack *pack, struct keel_error *err)
{
    json_t *roles = json_object_get(pack->doc, "roles"), *grants;
    const char *name, *default_role = NULL;
    char path[KEEL_JSON_PATH_MAX];
    struct keel_error inner;

    if (!roles)
        return pack_fail(pack, "roles", err, "is required (e.g. viewer: [read], editor: [read, write])");
    if (!json_is_object(roles) || json_object_size(roles) == 0)
        return pack_fail(pack, "roles", err, "must map role names to lists of read/write");
    if (json_object_size(roles) > PACK_MAX_ROLES)
        return pack_fail(pack, "roles", err, "at most %d roles", PACK_MAX_ROLES);
    json_object_foreach(roles, name, grants) {
        struct pack_role *role = &pack->roles[pack->n_roles];
        json_t *grant;
        size_t i;
        keel_json_path_key(path, sizeof(path), "roles", name);
        if (!valid_name(name))
            return pack_fail(pack, path, err, "role name must be [a-z0-9_-]+");
        if (!json_is_array(grants))
            return pack_fail(pack, path, err, "must be a list of read/write");
        role->name = name;
        role->access = 0;
        json_array_foreach(grants, i, grant) {
            int access = json_is_string(grant) ? parse_access(json_string_value(grant)) : 0;
            char item[KEEL_JSON_PATH_MAX];
            keel_json_path_index(item, sizeof(item), path, i);
            if (!access)
                return pack_fail(pack, item, err, "must be read or write, not %s%s%s",
                                 json_is_string(grant) ? "\"" : "",
                                 json_is_string(grant) ? json_string_value(grant)
                                                       : keel_json_type_name(grant),
                                 json_is_string(grant) ? "\"" : "");
            role->access |= access;
        }
        pack->n_roles++;
    }
    if (keel_json_get_string(pack->doc, "default_role", 0, "", &default_role, &inner))
        return pack_fail(pack, inner.field, err, "%s", inner.message);
    pack->default_role = 0;
    if (default_role) {
        pack->default_role = pack_role_index(pack, default_role);
        if (pack->default_role < 0)
            return pack_fail(pack, "default_role", err, "\"%s\" is not one of the roles",
                             default_role);
    }
    return KEEL_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);

    return a >= b && !strcmp(s + a - b, suffix);
}

int pack_parse(const char *text, size_t n, const char *origin, struct pack **out,
               struct keel_error *err)
{
    struct pack *pack = keel_calloc(1, sizeof(*pack));
    const char *name = NULL, *description = "";
    struct keel_error inner;
    int rc = KEEL_ENOMEM;

    if (!pack || !(pack->origin = keel_strdup(origin))) {
        keel_error_set(err, KEEL_ENOMEM, origin, "out of memory");
        goto out;
    }
    if (ends_with(origin, ".json"))
        rc = keel_json_parse(text, n, PACK_FILE_MAX, origin, &pack->doc, err);
    else
        rc = yaml_json_load(text, n, origin, NULL, &pack->doc, &pack->lines, err);
    if (rc)
        goto out;
    rc = KEEL_EINVAL;
    if (!json_is_object(pack->doc)) {
        keel_error_set(err, KEEL_EINVAL, origin, "a pack must be a mapping at the top level");
        goto out;
    }
    if (keel_json_check_keys(pack->doc, top_keys, "", &inner) ||
        keel_json_get_string(pack->doc, "name", 1, "", &name, &inner) ||
        keel_json_get_string(pack->doc, "description", 0, "", &description, &inner)) {
        pack_fail(pack, inner.field, err, "%s", inner.message);
        goto out;
    }
    if (!valid_name(name)) {
        pack_fail(pack, "name", err, "\"%s\" must be [a-z0-9_-]+ and shorter than %d bytes",
                  name, PACK_NAME_MAX);
        goto out;
    }
    snprintf(pack->name, sizeof(pack->name), "%s", name);
    pack->description = description;
    if ((rc = load_tools(pack, err)) || (rc = load_roles(pack, err)))
        goto out;
    *out = pack;
    pack = NULL;
    rc = KEEL_OK;
out:
    pack_free(pack);
    return rc;
}

int pack_load(const char *dir, const char *name, struct pack **out,
              struct keel_error *err)
{
    char path[4096];
    struct keel_buf text;
    struct pack *pack = NULL;
    int rc;

    if (!valid_name(name))
        return keel_error_set(err, KEEL_EINVAL, "pack",
                              "\"%.64s\" is not a pack name ([a-z0-9_-]+)", name);
    if (!dir)
        dir = pack_default_dir();
    keel_buf_init(&text, PACK_FILE_MAX + 1);
    snprintf(path, sizeof(path), "%s/%s/pack.yaml", dir, name);
    rc = keel_file_read(path, PACK_FILE_MAX, &text, err);
    if (rc == KEEL_ENOTFOUND) {
        snprintf(path, sizeof(path), "%s/%s/pack.json", dir, name);
        rc = keel_file_read(path, PACK_FILE_MAX, &text, err);
        if (rc == KEEL_ENOTFOUND)
            keel_error_set(err, rc, "pack", "no pack \"%s\" in %s (looked for pack.yaml and pack.json)",
                           name, dir);
    }
    if (!rc)
        rc = pack_parse(text.data, text.len, path, &pack, err);
    if (!rc && strcmp(pack->name, name)) {
        rc = pack_fail(pack, "name", err, "is \"%s\" but the folder is \"%s\"", pack->name, name);
        pack_free(pack);
        pack = NULL;
    }
    keel_buf_release(&text);
    if (!rc)
        *out = pack;
    return rc;
}

void pack_free(struct pack *pack)
{
    if (!pack)
        return;
    json_decref(pack->doc);
    json_decref(pack->lines);
    keel_free(pack->origin);
    keel_free(pack);
}
