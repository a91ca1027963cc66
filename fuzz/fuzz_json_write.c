/*
 * fuzz_json_write.c — the fast compact JSON writer (core/json_write.c)
 * against jansson: any JSON text jansson parses (NUL in strings allowed,
 * any top-level value) is written by both, and the texts must be equal
 * byte for byte; what the writer leaves to jansson (KEEL_EINVAL) must be
 * too deep for it. The same for keel_json_dumps under the flag set the
 * input's first byte picks (insertion order or sorted keys, a real
 * precision, top-level scalars or not) against json_dumps.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/json_write.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *value = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    struct keel_buf buf;
    char *theirs;
    int rc;

    if (!value)
        return 0;
    keel_buf_init(&buf, 0);
    rc = keel_json_write_compact(&buf, value);
    theirs = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (rc == KEEL_OK) {
        if (!theirs || strlen(theirs) != buf.len || memcmp(theirs, buf.data, buf.len))
            abort();
    } else if (rc != KEEL_EINVAL && rc != KEEL_ENOMEM) {
        abort();
    }
    keel_free(theirs);
    keel_buf_release(&buf);
    {
        size_t flags = JSON_COMPACT | (data[0] & 1 ? JSON_SORT_KEYS : 0) |
                       (data[0] & 2 ? JSON_ENCODE_ANY : 0) |
                       (data[0] & 4 ? JSON_REAL_PRECISION(1 + (data[0] >> 3) % 17) : 0);
        char *mine = keel_json_dumps(value, flags);
        theirs = json_dumps(value, flags);
        if (!mine != !theirs || (mine && strcmp(mine, theirs)))
            abort();
        keel_free(mine);
        keel_free(theirs);
    }
    json_decref(value);
    return 0;
}
