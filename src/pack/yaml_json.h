/*
 * yaml_json.h — YAML text to jansson values, with caps.
 *
 * libyaml is an event parser only; this turns its events into a json_t
 * tree. Plain scalars get YAML 1.2 core-schema types (null, booleans,
 * integers, floats, else strings); quoted scalars are always strings.
 * Anchors and aliases work (an alias is a deep copy), as do `<<` merge
 * keys. Duplicate keys are an error. Input size, nesting depth, the number
 * of aliases and the total number of nodes are capped, so a small hostile
 * file cannot make the loader slow or large.
 *
 * Alongside the tree the loader returns `lines`: an object mapping each
 * node's path ("policy.phrases.request[3]") to its 1-based line, so later
 * validation can report "file:line: what is wrong".
 */
#ifndef KEEL_PACK_YAML_JSON_H
#define KEEL_PACK_YAML_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"

struct yaml_limits {
    size_t max_bytes;   /* input size */
    int max_depth;      /* nesting of mappings/sequences */
    int max_aliases;    /* alias references */
    long max_nodes;     /* nodes in the result, counting alias copies */
};

/* The defaults: 1 MiB, depth 64, 64 aliases, 200,000 nodes. */
extern const struct yaml_limits yaml_default_limits;

/* Parses one YAML document of `n` bytes. `origin` names the file in errors
 * (err->field is "origin:line"). `limits` NULL means the defaults. On
 * success *root and *lines (may be NULL when not wanted) own new
 * references; on failure nothing is returned and err says what and where. */
int yaml_json_load(const char *text, size_t n, const char *origin,
                   const struct yaml_limits *limits, json_t **root,
                   json_t **lines, struct keel_error *err);

#endif
