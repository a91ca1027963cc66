/*
 * json.c — capped parsing, path-naming typed getters and serialisation on
 * jansson.
 */
#include "core/json.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json_write.h"
#include "core/utf8.h"

void keel_json_init(void)
{
    json_set_alloc_funcs(keel_malloc, keel_free);
    json_object_seed(0x6b65656c);  /* "keel": same hash order every run */
}

static int parse(const char *text, size_t n, size_t max, const char *origin, size_t flags,
                 json_t **out, struct keel_error *err)
{
    json_error_t jerr;
    json_t *value;
    long failures;

    if (n > max)
        return keel_error_set(err, KEEL_ETOOBIG, origin,
                              "%zu bytes is over the limit of %zu bytes", n, max);
    memset(&jerr, 0, sizeof(jerr));
    failures = keel_alloc_failures();
    value = json_loadb(text, n, JSON_REJECT_DUPLICATES | flags, &jerr);
    if (value && keel_alloc_failures() != failures) {
        /* jansson 2.14's lexer ignores a failed append to a string and
         * goes on without that byte: never trust such a document. */
        json_decref(value);
        return keel_error_set(err, KEEL_ENOMEM, origin, "out of memory");
    }
    if (!value) {
        /* jansson names every syntax error; some of its allocation
         * failures return NULL and leave the error blank. */
        if (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0])
            return keel_error_set(err, KEEL_ENOMEM, origin, "out of memory");
        return keel_error_set(err, KEEL_EPARSE, origin, "line %d column %d: %s",
                              jerr.line, jerr.column, jerr.text);
    }
    *out = value;
    return KEEL_OK;
}

int keel_json_parse(const char *text, size_t n, size_t max, const char *origin,
                    json_t **out, struct keel_error *err)
{
    return parse(text, n, max, origin, 0, out, err);
}

int keel_json_parse_any(const char *text, size_t n, size_t max, const char *origin,
                        json_t **out, struct keel_error *err)
{
    return parse(text, n, max, origin, JSON_DECODE_ANY, out, err);
}

void keel_json_path_key(char *out, size_t n, const char *parent, const char *key)
{
    if (parent && *parent)
        snprintf(out, n, "%s.%s", parent, key);
    else
        snprintf(out, n, "%s", key);
}

void keel_json_path_index(char *out, size_t n, const char *parent, size_t index)
{
    snprintf(out, n, "%s[%zu]", parent ? parent : "", index);
}

const char *keel_json_type_name(const json_t *value)
{
    switch (value ? json_typeof(value) : JSON_NULL) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

int keel_json_check_keys(const json_t *obj, const char *const *allowed,
                         const char *path, struct keel_error *err)
{
    const char *key;
    json_t *value;
    char field[KEEL_JSON_PATH_MAX];

    json_object_foreach((json_t *)obj, key, value) {
        const char *const *a;
        for (a = allowed; *a; a++)
            if (!strcmp(*a, key))
                break;
        if (!*a) {
            keel_json_path_key(field, sizeof(field), path, key);
            return keel_error_set(err, KEEL_EINVAL, field, "unknown key \"%s\"", key);
        }
    }
    return KEEL_OK;
}

/* Looks `key` up; reports a missing required key. *found tells presence. */
static int lookup(const json_t *obj, const char *key, int required, const char *path,
                  json_t **value, char *field, size_t field_n, struct keel_error *err)
{
    keel_json_path_key(field, field_n, path, key);
    *value = json_object_get(obj, key);
    if (!*value && required)
        return keel_error_set(err, KEEL_EINVAL, field, "is required");
    return KEEL_OK;
}

int keel_json_get_string(const json_t *obj, const char *key, int required,
                         const char *path, const char **out, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    json_t *value;
    int rc = lookup(obj, key, required, path, &value, field, sizeof(field), err);

    if (rc || !value)
        return rc;
    if (!json_is_string(value))
        return keel_error_set(err, KEEL_EINVAL, field, "must be a string, not %s",
                              keel_json_type_name(value));
    *out = json_string_value(value);
    return KEEL_OK;
}

int keel_json_get_int(const json_t *obj, const char *key, int required,
                      long long min, long long max, const char *path,
                      long long *out, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    json_t *value;
    long long v;
    int rc = lookup(obj, key, required, path, &value, field, sizeof(field), err);

    if (rc || !value)
        return rc;
    if (!json_is_integer(value))
        return keel_error_set(err, KEEL_EINVAL, field, "must be an integer, not %s",
                              keel_json_type_name(value));
    v = json_integer_value(value);
    if (v < min || v > max)
        return keel_error_set(err, KEEL_EINVAL, field, "must be between %lld and %lld, got %lld",
                              min, max, v);
    *out = v;
    return KEEL_OK;
}

int keel_json_get_bool(const json_t *obj, const char *key, int required,
                       const char *path, int *out, struct keel_error *err)
{
    char field[KEEL_JSON_PATH_MAX];
    json_t *value;
    int rc = lookup(obj, key, required, path, &value, field, sizeof(field), err);

    if (rc || !value)
        return rc;
    if (!json_is_boolean(value))
        return keel_error_set(err, KEEL_EINVAL, field, "must be true or false, not %s",
                              keel_json_type_name(value));
    *out = json_is_true(value);
    return KEEL_OK;
}

struct dump {
    struct keel_buf *buf;
    int failed;
};

/* jansson 2.14 does not stop every dump when a write fails (an object
 * key whose write fails is skipped and the dump goes on), so a failure
 * is remembered here and the whole dump refused. */
static int dump_callback(const char *data, size_t size, void *ctx)
{
    struct dump *d = ctx;

    if (!d->failed && keel_buf_add(d->buf, data, size))
        d->failed = 1;
    return d->failed ? -1 : 0;
}

int keel_json_append(struct keel_buf *buf, const json_t *value, size_t flags)
{
    struct dump d = {buf, 0};
    size_t before = buf->len;
    long failures = keel_alloc_failures();

    int rc;

    /* The fast writer, same text (core/json_write.c); what it leaves
     * (KEEL_EINVAL) jansson writes or refuses. */
    if (flags == JSON_COMPACT && (rc = keel_json_write_compact(buf, value)) != KEEL_EINVAL)
        return rc ? KEEL_ENOMEM : KEEL_OK;
    if (json_dump_callback(value, dump_callback, &d, flags | JSON_SORT_KEYS | JSON_ENCODE_ANY) ||
        d.failed || keel_alloc_failures() != failures) {
        keel_buf_truncate(buf, before);
        return KEEL_ENOMEM;
    }
    return KEEL_OK;
}

json_t *keel_json_text(const char *text)
{
    size_t n = strlen(text);

    return utf8_valid_prefix(text, n) == n ? json_stringn_nocheck(text, n) : NULL;
}

int keel_json_set_text(json_t *obj, const char *key, const char *text)
{
    size_t n = text ? strlen(text) : 0;
    json_t *value;

    if (text && utf8_valid_prefix(text, n) != n)
        return KEEL_EINVAL;
    value = text ? json_stringn_nocheck(text, n) : json_null();
    /* set_new takes the value also when it fails */
    return value && !json_object_set_new_nocheck(obj, key, value) ? KEEL_OK : KEEL_ENOMEM;
}

char *keel_json_dumps(const json_t *value, size_t flags)
{
    return keel_json_dumps_len(value, flags, 0, NULL);
}

/* ---- a thread's scratch buffer for keel_json_dumps_len ------------------- */

/* A document written into a fresh buffer grows it from 64 bytes by
 * doubling: a turn's result (~5 KB) took seven reallocs, each a copy,
 * ~9% of a worker's time per turn over HTTP. The fast writer writes
 * into a buffer each thread keeps instead, and the text is copied out
 * once at its size. The buffer starts at SCRATCH_START bytes, keeps at
 * most SCRATCH_KEEP between calls and is freed when its thread exits.
 * Like alloc.c's cache of small blocks it is the allocator's, not a
 * live allocation of any caller: it is made and freed with malloc and
 * free, so the live-allocation count (keel_alloc_live) leaves it out. */
#define SCRATCH_START 8192
#define SCRATCH_KEEP (256 * 1024)

static _Thread_local struct keel_buf scratch;
static _Thread_local int scratch_state;   /* 0 none, 1 made, -1 thread exiting */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_made;

/* Frees the thread's scratch buffer (its exit, or a trim). */
static void scratch_drop(void)
{
    if (scratch.cap)
        free(scratch.data);
    keel_buf_init(&scratch, 0);   /* back to the static empty text */
}

static void scratch_at_exit(void *arg)
{
    (void)arg;
    scratch_drop();
    scratch_state = -1;
}

static void scratch_make_key(void)
{
    scratch_key_made = pthread_key_create(&scratch_key, scratch_at_exit) == 0;
}

/* The thread's scratch buffer, empty; NULL when it has none (out of
 * memory, no way to free it at exit, or the thread is exiting). */
static struct keel_buf *scratch_take(void)
{
    if (scratch_state < 0)
        return NULL;
    if (!scratch_state) {
        pthread_once(&scratch_once, scratch_make_key);
        if (!scratch_key_made || pthread_setspecific(scratch_key, &scratch))
            return NULL;
        keel_buf_init(&scratch, 0);
        scratch_state = 1;
    }
    if (!scratch.cap) {
        char *data = malloc(SCRATCH_START);

        if (!data)
            return NULL;
        data[0] = '\0';
        scratch.data = data;
        scratch.cap = SCRATCH_START;
    }
    keel_buf_reset(&scratch);
    return &scratch;
}

/* What `b` holds as a new string with `spare` bytes after its NUL;
 * releases b, unless it is the scratch buffer, which it trims to
 * SCRATCH_KEEP. NULL when out of memory. */
static char *copy_out(struct keel_buf *b, size_t spare, size_t *len)
{
    char *text;

    if (b != &scratch) {
        if (spare && keel_buf_grow(b, spare)) {
            keel_buf_release(b);
            return NULL;
        }
        return keel_buf_detach(b, len);
    }
    if ((text = keel_malloc(b->len + 1 + spare))) {
        memcpy(text, b->data, b->len + 1);
        if (len)
            *len = b->len;
    }
    if (b->cap > SCRATCH_KEEP)
        scratch_drop();
    return text;
}

char *keel_json_dumps_len(const json_t *value, size_t flags, size_t spare, size_t *len)
{
    struct keel_buf own, *b = scratch_take();
    char *text, *bigger;
    size_t n;
    int rc;

    if (!value || (!(flags & JSON_ENCODE_ANY) && !json_is_object(value) && !json_is_array(value)))
        return NULL;
    if (!b) {
        keel_buf_init(&own, 0);
        b = &own;
    }
    if ((rc = keel_json_write(b, value, flags)) == KEEL_EINVAL) {
        if (b == &own)
            keel_buf_release(b);
        else if (b->cap > SCRATCH_KEEP)
            scratch_drop();
        if (!(text = json_dumps(value, flags)))
            return NULL;
        n = strlen(text);
        if (spare) {
            if (!(bigger = keel_realloc(text, n + 1 + spare))) {
                keel_free(text);
                return NULL;
            }
            text = bigger;
        }
        if (len)
            *len = n;
        return text;
    }
    if (rc) {
        if (b == &own)
            keel_buf_release(b);
        else if (b->cap > SCRATCH_KEEP)
            scratch_drop();
        return NULL;
    }
    return copy_out(b, spare, len);
}
