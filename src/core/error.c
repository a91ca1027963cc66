/*
 * error.c — names for keel_result codes and the fixed-size error struct.
 */
#include "core/error.h"
#include "core/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const result_names[KEEL_RESULT_COUNT] = {
    [KEEL_OK] = "success",
    [KEEL_ENOMEM] = "out of memory",
    [KEEL_EINVAL] = "invalid input",
    [KEEL_EPARSE] = "parse error",
    [KEEL_ETOOBIG] = "input too large",
    [KEEL_ENOTFOUND] = "not found",
    [KEEL_EIO] = "input/output error",
    [KEEL_EUNSUPPORTED] = "unsupported",
    [KEEL_EFAIL] = "check failed",
};

static const char *const result_tokens[KEEL_RESULT_COUNT] = {
    [KEEL_OK] = "ok",
    [KEEL_ENOMEM] = "no_memory",
    [KEEL_EINVAL] = "invalid",
    [KEEL_EPARSE] = "parse_error",
    [KEEL_ETOOBIG] = "too_big",
    [KEEL_ENOTFOUND] = "not_found",
    [KEEL_EIO] = "io_error",
    [KEEL_EUNSUPPORTED] = "unsupported",
    [KEEL_EFAIL] = "failed",
};

const char *keel_strerror(int rc)
{
    if (rc < 0 || rc >= KEEL_RESULT_COUNT)
        return "unknown error";
    return result_names[rc];
}

const char *keel_result_token(int rc)
{
    if (rc < 0 || rc >= KEEL_RESULT_COUNT)
        return "unknown";
    return result_tokens[rc];
}

void keel_error_clear(struct keel_error *err)
{
    if (!err)
        return;
    err->code = KEEL_OK;
    err->field[0] = '\0';
    err->message[0] = '\0';
}

int keel_error_set(struct keel_error *err, int code, const char *field,
                   const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return code;
    err->code = code;
    snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    /* Messages quote input (a file's bytes, a server's error page) and
     * are cut at a fixed size: they stay well-formed UTF-8, so any of
     * them can go into JSON. */
    utf8_clean(err->field);
    utf8_clean(err->message);
    return code;
}

const char *keel_error_format(const struct keel_error *err, char *out, size_t n)
{
    if (!n)
        return out;
    if (!err) {
        out[0] = '\0';
        return out;
    }
    if (err->field[0])
        snprintf(out, n, "%s: %s", err->field,
                 err->message[0] ? err->message : keel_strerror(err->code));
    else
        snprintf(out, n, "%s",
                 err->message[0] ? err->message : keel_strerror(err->code));
    return out;
}
