/*
 * file.h — reading whole files with a size cap.
 */
#ifndef KEEL_CORE_FILE_H
#define KEEL_CORE_FILE_H

#include <stddef.h>

#include "core/buf.h"
#include "core/error.h"

/* Appends the contents of `path` to `out`. Fails with KEEL_ENOTFOUND (no
 * such file), KEEL_EIO (unreadable, a directory or another file that is
 * not a regular file, such as a FIFO), KEEL_ETOOBIG (over
 * `max` bytes) or KEEL_ENOMEM; err names the path. On failure `out` holds
 * what it held before. */
int keel_file_read(const char *path, size_t max, struct keel_buf *out,
                   struct keel_error *err);

/* Returns nonzero when `path` is a directory. */
int keel_is_dir(const char *path);

#endif
