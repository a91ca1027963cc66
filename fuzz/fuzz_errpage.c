/*
 * fuzz_errpage.c — errpage_parse (src/server/errpage.c) on arbitrary
 * bytes, as the start of a response in a connection's output buffer.
 * The server reads a growing prefix after each write into the buffer and
 * drops a response the first time the answer is -1, so the answers must
 * agree along prefixes: a prefix that is the page (1) stays the page with
 * the same version, status and lengths; one that cannot be (-1) stays so.
 * A page's head lies within the bytes read and ends with the blank line;
 * its version is "HTTP/1.x" and its status 100..599.
 */
#include <string.h>

#include "fuzz_common.h"
#include "server/server_int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char version[9], first_version[9] = "";
    int status = 0, first = 0, settled = 0, first_status = 0;
    size_t head_len = 0, body_len = 0, first_head = 0, first_body = 0;

    if (size > ERRPAGE_HEAD_MAX - 1)
        size = ERRPAGE_HEAD_MAX - 1;
    for (size_t n = 0; n <= size; n++) {
        int rc = errpage_parse(text, n, version, &status, &head_len, &body_len);
        if (rc < -1 || rc > 1)
            __builtin_trap();
        if (settled && rc != first)
            __builtin_trap();   /* a settled answer changed with more bytes */
        if (rc == 1) {
            if (head_len > n || head_len < 4 || memcmp(text + head_len - 4, "\r\n\r\n", 4) ||
                memcmp(version, "HTTP/1.", 7) || version[8] || status < 100 || status > 599)
                __builtin_trap();
            if (settled && (status != first_status || head_len != first_head ||
                            body_len != first_body || strcmp(version, first_version)))
                __builtin_trap();
            first_status = status;
            first_head = head_len;
            first_body = body_len;
            memcpy(first_version, version, sizeof(version));
        }
        if (rc != 0 && !settled) {
            settled = 1;
            first = rc;
        }
    }
    return 0;
}
