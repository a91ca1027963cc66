/*
 * validate.c — the strict validator: walks an artifact against the
 * contract tables of contract.c. Every key must be known, every required
 * field present with its type, strings valid UTF-8 without NUL, within
 * their byte caps and — where required — not blank; integers and lists
 * within their bounds. Then the contract's cross-field rules. The first
 * problem is reported with its path; the artifact is never changed.
 */
#include <string.h>

#include "artifact/artifact_int.h"
#include "core/json.h"
#include "core/utf8.h"

#define DEPTH_MAX 8

static int check_value(const struct contract_field *f, const json_t *v, const char *path,
                       int depth, struct keel_error *err);

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\n\f\v", s[i]))
            return 0;
    return 1;
}

static int check_object(const struct contract_field *fields, const json_t *obj, const char *path,
                        int depth, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    const char *key;
    json_t *v;
    int rc;

    if (!json_is_object(obj))
        return keel_error_set(err, KEEL_EINVAL, path[0] ? path : "artifact",
                              "must be an object, not %s", keel_json_type_name(obj));
    json_object_foreach((json_t *)obj, key, v) {
        const struct contract_field *f = fields;
        while (f->name && strcmp(f->name, key))
            f++;
        keel_json_path_key(field, sizeof(field), path, *key ? key : "\"\"");   /* "" named */
        if (!f->name)
            return keel_error_set(err, KEEL_EINVAL, field, "is not a field of the contract");
    }
    for (const struct contract_field *f = fields; f->name; f++) {
        keel_json_path_key(field, sizeof(field), path, f->name);
        v = json_object_get(obj, f->name);
        if (!v || json_is_null(v)) {
            if (f->required)
                return keel_error_set(err, KEEL_EINVAL, field, "is required");
            continue;
        }
        if (f->children || f->kind != CF_OBJECT)
            if ((rc = check_value(f, v, field, depth + 1, err)))
                return rc;
    }
    return KEEL_OK;
}

static int check_value(const struct contract_field *f, const json_t *v, const char *path,
                       int depth, struct keel_error *err)
{
    char item[KEEL_JSON_PATH_MAX];
    const json_t *x;
    size_t i, n;
    int rc;

    if (depth > DEPTH_MAX)
        return keel_error_set(err, KEEL_EINVAL, path, "is nested too deeply");
    switch (f->kind) {
    case CF_STRING:
        if (!json_is_string(v))
            return keel_error_set(err, KEEL_EINVAL, path, "must be a string, not %s",
                                  keel_json_type_name(v));
        n = json_string_length(v);
        if ((long long)n > f->max)
            return keel_error_set(err, KEEL_EINVAL, path, "is longer than %lld bytes", f->max);
        if (memchr(json_string_value(v), '\0', n) ||
            utf8_valid_prefix(json_string_value(v), n) != n)
            return keel_error_set(err, KEEL_EINVAL, path, "must be UTF-8 text without NUL");
        if (f->min && blank(json_string_value(v), n))
            return keel_error_set(err, KEEL_EINVAL, path, "must not be blank");
        return KEEL_OK;
    case CF_INT:
        if (!json_is_integer(v) || json_integer_value(v) < f->min || json_integer_value(v) > f->max)
            return keel_error_set(err, KEEL_EINVAL, path, "must be an integer from %lld to %lld",
                                  f->min, f->max);
        return KEEL_OK;
    case CF_NUMBER:
        if (!json_is_number(v) || json_number_value(v) < (double)f->min ||
            json_number_value(v) > (double)f->max)
            return keel_error_set(err, KEEL_EINVAL, path, "must be a number from %lld to %lld",
                                  f->min, f->max);
        return KEEL_OK;
    case CF_OBJECT:
        return check_object(f->children, v, path, depth, err);
    case CF_LIST:
        if (!json_is_array(v))
            return keel_error_set(err, KEEL_EINVAL, path, "must be a list, not %s",
                                  keel_json_type_name(v));
        n = json_array_size(v);
        if ((long long)n < f->min || (long long)n > f->max)
            return keel_error_set(err, KEEL_EINVAL, path, "must have %lld to %lld items", f->min,
                                  f->max);
        json_array_foreach(v, i, x) {
            keel_json_path_index(item, sizeof(item), path, i);
            if ((rc = check_value(f->children, x, item, depth + 1, err)))
                return rc;
        }
        return KEEL_OK;
    }
    return KEEL_OK;
}

int artifact_validate(const json_t *artifact, struct keel_error *err)
{
    const json_t *type = json_object_get(artifact, "type");
    int t, rc;

    if ((rc = check_object(contract_envelope, artifact, "", 0, err)))
        return rc;
    if ((t = artifact_type_from_name(json_string_value(type))) == ARTIFACT_NONE)
        return keel_error_set(err, KEEL_EINVAL, "type",
                              "must be research_brief, doc_extract or plan");
    if (strncmp(json_string_value(json_object_get(artifact, "id")), "art_", 4))
        return keel_error_set(err, KEEL_EINVAL, "id", "must start with art_");
    if ((rc = check_object(contract_content(t), json_object_get(artifact, "content"), "content", 1,
                           err)))
        return rc;
    return contract_check_refs(t, json_object_get(artifact, "content"), err);
}
