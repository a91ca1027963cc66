/*
 * file.c — capped whole-file reads.
 */
#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int keel_is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int keel_file_read(const char *path, size_t max, struct keel_buf *out,
                   struct keel_error *err)
{
    size_t before = out->len, limit = out->max;
    char chunk[8192];
    FILE *f;
    int rc = KEEL_OK;

    {
        struct stat st;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return keel_error_set(err, KEEL_EIO, path, "%s",
                                  S_ISDIR(st.st_mode) ? "is a directory, not a file"
                                                      : "is not a regular file");
    }
    f = fopen(path, "rb");
    if (!f)
        return keel_error_set(err, errno == ENOENT ? KEEL_ENOTFOUND : KEEL_EIO, path,
                              "cannot open: %s", strerror(errno));
    if (max && before + max < out->max)
        out->max = before + max;
    for (;;) {
        size_t got = fread(chunk, 1, sizeof(chunk), f);
        if (got && (rc = keel_buf_add(out, chunk, got)) != KEEL_OK) {
            if (rc == KEEL_ETOOBIG)
                keel_error_set(err, rc, path, "file is larger than the limit of %zu bytes", max);
            else
                keel_error_set(err, rc, path, "out of memory");
            break;
        }
        if (got < sizeof(chunk)) {
            if (ferror(f))
                rc = keel_error_set(err, KEEL_EIO, path, "read failed: %s", strerror(errno));
            break;
        }
    }
    fclose(f);
    out->max = limit;
    if (rc)
        keel_buf_truncate(out, before);
    return rc;
}
