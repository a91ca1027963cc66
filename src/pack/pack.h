/*
 * pack.h — a domain pack: packs/NAME/pack.yaml (or pack.json) loaded,
 * checked and kept as a jansson document.
 *
 * The loader checks the parts every layer shares — name, tools with their
 * read/write access, roles and what they may call — and keeps the rest of
 * the document for the layers that own it (the policy compiles `policy`).
 * Every error says "file:line: path: what is wrong".
 */
#ifndef KEEL_PACK_PACK_H
#define KEEL_PACK_PACK_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"

#define PACK_MAX_TOOLS 64
#define PACK_MAX_ROLES 16
#define PACK_NAME_MAX 64
#define PACK_FILE_MAX (1u << 20)

enum pack_access { PACK_READ = 1, PACK_WRITE = 2 };

struct pack_tool {
    const char *name;         /* borrowed from doc */
    const char *description;  /* may be "" */
    int access;               /* PACK_READ or PACK_WRITE */
};

struct pack_role {
    const char *name;
    int access;               /* mask of PACK_READ | PACK_WRITE */
};

struct pack {
    char name[PACK_NAME_MAX];
    char *origin;             /* the file it came from, for error messages */
    const char *description;
    struct pack_tool tools[PACK_MAX_TOOLS];
    size_t n_tools;
    struct pack_role roles[PACK_MAX_ROLES];
    size_t n_roles;
    int default_role;
    json_t *doc;              /* the whole document */
    json_t *lines;            /* path -> line, or NULL for JSON packs */
};

/* Returns the packs directory: $KEEL_PACKS, else ./packs when it exists,
 * else the packs folder beside the running binary's parent (build/keel →
 * packs/). The string is static. */
const char *pack_default_dir(void);

/* Loads pack `name` from `dir` (NULL: pack_default_dir()). The name must
 * be [a-z0-9_-]+. Reads pack.yaml, else pack.json. On success *out is a
 * new pack (free with pack_free); on failure err says file:line and what. */
int pack_load(const char *dir, const char *name, struct pack **out,
              struct keel_error *err);

/* Parses a pack from memory. `origin` names it in errors and decides the
 * format (".json" suffix: JSON, else YAML). Used by pack_load and fuzzing. */
int pack_parse(const char *text, size_t n, const char *origin, struct pack **out,
               struct keel_error *err);

/* Frees a pack and everything it owns. NULL is a no-op. */
void pack_free(struct pack *pack);

/* Index of tool / role `name`, or -1. */
int pack_tool_index(const struct pack *pack, const char *name, size_t n);
int pack_role_index(const struct pack *pack, const char *name);

/* Returns nonzero when `role` may call `tool` (indices into the pack). */
int pack_role_may_call(const struct pack *pack, int role, int tool);

/* Fills err with code KEEL_EINVAL, field "origin:line" for `path` (the
 * line of the nearest ancestor the loader recorded) and the message
 * "path: what". Returns KEEL_EINVAL. */
int pack_fail(const struct pack *pack, const char *path, struct keel_error *err,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
