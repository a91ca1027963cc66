/*
 * yaml_json.c — libyaml events to a jansson tree with a path→line map.
 *
 * The converter keeps an explicit stack of open containers (never
 * recursion on input), so depth is bounded by the cap, not by the C stack.
 */
#include "pack/yaml_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/alloc.h"
#include "core/json.h"

const struct yaml_limits yaml_default_limits = {
    .max_bytes = 1 << 20, .max_depth = 64, .max_aliases = 64, .max_nodes = 200000,
};

#define PATH_MAX_LEN 256

struct frame {
    json_t *container;       /* object or array being filled */
    json_t *merged;          /* keys that came from `<<` (objects only) */
    char *pending_key;       /* object: key waiting for its value */
    int pending_key_line;
    char path[PATH_MAX_LEN]; /* path of the container itself */
    char *anchor;            /* anchor to register when the container closes */
};

struct loader {
    const char *origin;
    const struct yaml_limits *limits;
    struct keel_error *err;
    struct frame stack[128];
    int depth;
    json_t *root;
    json_t *lines;
    json_t *anchors;         /* anchor name -> value */
    int aliases;
    long nodes;
};

static int fail(struct loader *ld, int line, int code, const char *what)
{
    char field[KEEL_ERROR_FIELD_MAX];

    snprintf(field, sizeof(field), "%s:%d", ld->origin, line);
    return keel_error_set(ld->err, code, field, "%s", what);
}

static long count_nodes(const json_t *value)
{
    long n = 1;
    const char *key;
    json_t *child;
    size_t i;

    if (json_is_object(value)) {
        json_object_foreach((json_t *)value, key, child)
            n += count_nodes(child);
    } else if (json_is_array(value)) {
        json_array_foreach(value, i, child)
            n += count_nodes(child);
    }
    return n;
}

/* Types a plain scalar by the YAML 1.2 core schema. */
static json_t *plain_scalar(const char *s, size_t n)
{
    char *end;

    if (n == 0 || (n == 1 && s[0] == '~') || !strcmp(s, "null") ||
        !strcmp(s, "Null") || !strcmp(s, "NULL"))
        return json_null();
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
        return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return json_false();
    if ((s[0] >= '0' && s[0] <= '9') || ((s[0] == '-' || s[0] == '+') && n > 1)) {
        long long v;
        double d;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (*end == '\0' && errno == 0)
            return json_integer(v);
        errno = 0;
        d = strtod(s, &end);
        if (*end == '\0' && errno == 0 && strpbrk(s, "0123456789"))
            return json_real(d);
    }
    return json_stringn(s, n);
}

/* Records where `path` was written. A map with holes would point errors
 * at the wrong line, so running out of memory here fails the load. */
static int note_line(struct loader *ld, const char *path, int line)
{
    if (ld->lines && json_object_set_new(ld->lines, path, json_integer(line)))
        return fail(ld, line, KEEL_ENOMEM, "out of memory");
    return KEEL_OK;
}

/* Line to record for the next value placed in the top frame: the line of
 * its key inside a mapping (libyaml starts a block collection on the line
 * of its first entry, but "tools:" is where a person looks), else `line`. */
static int value_line(const struct loader *ld, int line)
{
    const struct frame *top = ld->depth > 0 ? &ld->stack[ld->depth - 1] : NULL;

    if (top && json_is_object(top->container) && top->pending_key)
        return top->pending_key_line;
    return line;
}

/* Path of the next value placed in the top frame. */
static void child_path(struct loader *ld, char *out, size_t n)
{
    struct frame *top;

    if (ld->depth == 0) {
        out[0] = '\0';
        return;
    }
    top = &ld->stack[ld->depth - 1];
    if (json_is_array(top->container))
        keel_json_path_index(out, n, top->path, json_array_size(top->container));
    else
        keel_json_path_key(out, n, top->path, top->pending_key ? top->pending_key : "");
}

/* Merges `src` (an object, or an array of objects) into the top frame's
 * object for a `<<` key. Explicit keys already present win. */
static int merge_into(struct loader *ld, struct frame *top, json_t *src, int line)
{
    const char *key;
    json_t *value, *item;
    size_t i;

    if (json_is_array(src)) {
        json_array_foreach(src, i, item) {
            int rc = merge_into(ld, top, item, line);
            if (rc)
                return rc;
        }
        return KEEL_OK;
    }
    if (!json_is_object(src))
        return fail(ld, line, KEEL_EINVAL, "a merge key (<<) needs a mapping or a list of mappings");
    json_object_foreach(src, key, value) {
        if (json_object_get(top->container, key))
            continue;
        if (json_object_set(top->container, key, value) ||
            json_object_set_new(top->merged, key, json_true()))
            return fail(ld, line, KEEL_ENOMEM, "out of memory");
    }
    return KEEL_OK;
}

/* Places a finished value (reference stolen) into the top container or
 * makes it the root. */
static int place(struct loader *ld, json_t *value, int line, const char *anchor)
{
    struct frame *top;
    int rc = KEEL_OK;

    if (!value)
        return fail(ld, line, KEEL_ENOMEM, "out of memory");
    if (++ld->nodes > ld->limits->max_nodes) {
        json_decref(value);
        return fail(ld, line, KEEL_ETOOBIG, "document has too many nodes");
    }
    if (anchor && json_object_set(ld->anchors, anchor, value)) {
        json_decref(value);
        return fail(ld, line, KEEL_ENOMEM, "out of memory");
    }
    if (ld->depth == 0) {
        ld->root = value;
        return KEEL_OK;
    }
    top = &ld->stack[ld->depth - 1];
    if (json_is_array(top->container)) {
        if (json_array_append_new(top->container, value))
            return fail(ld, line, KEEL_ENOMEM, "out of memory");
        return KEEL_OK;
    }
    if (!top->pending_key) {
        /* This value is a key. */
        if (!json_is_string(value)) {
            if (json_is_integer(value) || json_is_real(value) || json_is_boolean(value) ||
                json_is_null(value)) {
                char text[64];
                if (json_is_integer(value))
                    snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(value));
                else if (json_is_real(value))
                    snprintf(text, sizeof(text), "%g", json_real_value(value));
                else
                    snprintf(text, sizeof(text), "%s", json_is_null(value) ? "null" :
                             json_is_true(value) ? "true" : "false");
                json_decref(value);
                top->pending_key = keel_strdup(text);
            } else {
                json_decref(value);
                return fail(ld, line, KEEL_EINVAL, "mapping keys must be scalars");
            }
        } else {
            top->pending_key = keel_strdup(json_string_value(value));
            json_decref(value);
        }
        if (!top->pending_key)
            return fail(ld, line, KEEL_ENOMEM, "out of memory");
        top->pending_key_line = line;
        return KEEL_OK;
    }
    if (!strcmp(top->pending_key, "<<")) {
        rc = merge_into(ld, top, value, line);
        json_decref(value);
    } else if (json_object_get(top->container, top->pending_key) &&
               !json_object_get(top->merged, top->pending_key)) {
        char what[KEEL_ERROR_MESSAGE_MAX];
        snprintf(what, sizeof(what), "duplicate key \"%.200s\"", top->pending_key);
        json_decref(value);
        rc = fail(ld, top->pending_key_line, KEEL_EINVAL, what);
    } else {
        json_object_del(top->merged, top->pending_key);
        if (json_object_set_new(top->container, top->pending_key, value))
            rc = fail(ld, line, KEEL_ENOMEM, "out of memory");
    }
    keel_free(top->pending_key);
    top->pending_key = NULL;
    return rc;
}

static int open_container(struct loader *ld, json_t *container, int line,
                          const char *anchor)
{
    struct frame *frame;
    char path[PATH_MAX_LEN];

    if (!container)
        return fail(ld, line, KEEL_ENOMEM, "out of memory");
    if (ld->depth >= ld->limits->max_depth || ld->depth >= (int)(sizeof(ld->stack) / sizeof(ld->stack[0]))) {
        json_decref(container);
        return fail(ld, line, KEEL_ETOOBIG, "nesting is too deep");
    }
    child_path(ld, path, sizeof(path));
    if (note_line(ld, path, value_line(ld, line))) {
        json_decref(container);
        return KEEL_ENOMEM;
    }
    frame = &ld->stack[ld->depth++];
    memset(frame, 0, sizeof(*frame));
    frame->container = container;
    frame->merged = json_is_object(container) ? json_object() : NULL;
    snprintf(frame->path, sizeof(frame->path), "%s", path);
    if (anchor && !(frame->anchor = keel_strdup(anchor)))
        return fail(ld, line, KEEL_ENOMEM, "out of memory");
    if (json_is_object(container) && !frame->merged)
        return fail(ld, line, KEEL_ENOMEM, "out of memory");
    return KEEL_OK;
}

static void drop_frame(struct frame *frame)
{
    json_decref(frame->container);
    json_decref(frame->merged);
    keel_free(frame->pending_key);
    keel_free(frame->anchor);
    memset(frame, 0, sizeof(*frame));
}

static int close_container(struct loader *ld, int line)
{
    struct frame frame = ld->stack[--ld->depth];
    json_t *container = frame.container;
    int rc;

    frame.container = NULL;
    rc = place(ld, container, line, frame.anchor);  /* counts the container as a node */
    drop_frame(&frame);
    return rc;
}

static int on_event(struct loader *ld, yaml_event_t *ev)
{
    int line = (int)ev->start_mark.line + 1;
    char path[PATH_MAX_LEN];
    json_t *value;
    const char *anchor;

    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        const char *text = (const char *)ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        const char *tag = (const char *)ev->data.scalar.tag;
        anchor = (const char *)ev->data.scalar.anchor;
        if (tag && strcmp(tag, YAML_STR_TAG) && strcmp(tag, "!"))
            return fail(ld, line, KEEL_EUNSUPPORTED, "only the !!str tag is supported");
        if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !tag)
            value = plain_scalar(text, n);
        else
            value = json_stringn(text, n);
        if (ld->depth > 0 && (json_is_array(ld->stack[ld->depth - 1].container) ||
                              ld->stack[ld->depth - 1].pending_key)) {
            child_path(ld, path, sizeof(path));
            if (note_line(ld, path, value_line(ld, line))) {
                json_decref(value);
                return KEEL_ENOMEM;
            }
        }
        return place(ld, value, line, anchor);
    }
    case YAML_ALIAS_EVENT: {
        json_t *target = json_object_get(ld->anchors, (const char *)ev->data.alias.anchor);
        long extra;
        if (!target)
            return fail(ld, line, KEEL_EINVAL, "alias to an unknown anchor");
        if (++ld->aliases > ld->limits->max_aliases)
            return fail(ld, line, KEEL_ETOOBIG, "too many aliases");
        extra = count_nodes(target);
        if (extra > ld->limits->max_nodes - ld->nodes)
            return fail(ld, line, KEEL_ETOOBIG, "document has too many nodes (alias expansion)");
        ld->nodes += extra - 1;  /* place() adds the last one */
        if (ld->depth > 0) {
            child_path(ld, path, sizeof(path));
            if (note_line(ld, path, value_line(ld, line)))
                return KEEL_ENOMEM;
        }
        return place(ld, json_deep_copy(target), line, NULL);
    }
    case YAML_MAPPING_START_EVENT:
        return open_container(ld, json_object(), line,
                              (const char *)ev->data.mapping_start.anchor);
    case YAML_SEQUENCE_START_EVENT:
        return open_container(ld, json_array(), line,
                              (const char *)ev->data.sequence_start.anchor);
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
        return close_container(ld, line);
    case YAML_DOCUMENT_START_EVENT:
        if (ld->root)
            return fail(ld, line, KEEL_EINVAL, "only one YAML document is allowed");
        return KEEL_OK;
    default:
        return KEEL_OK;
    }
}

int yaml_json_load(const char *text, size_t n, const char *origin,
                   const struct yaml_limits *limits, json_t **root,
                   json_t **lines, struct keel_error *err)
{
    struct loader ld;
    yaml_parser_t parser;
    yaml_event_t ev;
    int rc = KEEL_OK, done = 0;

    memset(&ld, 0, sizeof(ld));
    ld.origin = origin;
    ld.limits = limits ? limits : &yaml_default_limits;
    ld.err = err;
    if (n > ld.limits->max_bytes) {
        char what[128];
        snprintf(what, sizeof(what), "file is %zu bytes, over the limit of %zu", n,
                 ld.limits->max_bytes);
        return fail(&ld, 1, KEEL_ETOOBIG, what);
    }
    if (!yaml_parser_initialize(&parser))
        return fail(&ld, 1, KEEL_ENOMEM, "out of memory");
    ld.anchors = json_object();
    ld.lines = lines ? json_object() : NULL;
    if (!ld.anchors || (lines && !ld.lines)) {
        rc = fail(&ld, 1, KEEL_ENOMEM, "out of memory");
        goto out;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, n);
    while (!done) {
        if (!yaml_parser_parse(&parser, &ev)) {
            char what[KEEL_ERROR_MESSAGE_MAX];
            snprintf(what, sizeof(what), "%s%s%s",
                     parser.problem ? parser.problem : "YAML syntax error",
                     parser.context ? " " : "", parser.context ? parser.context : "");
            rc = fail(&ld, (int)parser.problem_mark.line + 1, KEEL_EPARSE, what);
            goto out;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        rc = on_event(&ld, &ev);
        yaml_event_delete(&ev);
        if (rc)
            goto out;
    }
    if (!ld.root)
        ld.root = json_null();
    *root = ld.root;
    ld.root = NULL;
    if (lines) {
        *lines = ld.lines;
        ld.lines = NULL;
    }
out:
    while (ld.depth > 0)
        drop_frame(&ld.stack[--ld.depth]);
    json_decref(ld.root);
    json_decref(ld.lines);
    json_decref(ld.anchors);
    yaml_parser_delete(&parser);
    return rc;
}
