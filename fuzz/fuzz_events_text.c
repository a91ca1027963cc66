/*
 * fuzz_events_text.c — a turn's events stored without their correlation
 * ids (src/store/store_events_text.c). The input's first line is the id,
 * the rest the events text. Whatever compact accepts, expand must give
 * back byte for byte, and the compacted text must be no longer than the
 * original; expand on any text (as a stored row may hold) must stay in
 * its cap. Neither may crash, leak or read out of bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "fuzz_common.h"
#include "store/store_events_text.h"

#define CAP 4096

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nl = memchr(data, '\n', size);
    char id[300], *compact = NULL, *back = NULL, *expanded = NULL;
    const char *text;
    size_t id_len, len, n = 0, m = 0;
    int rc;

    if (!nl || (size_t)(nl - (const char *)data) >= sizeof(id))
        return 0;
    id_len = (size_t)(nl - (const char *)data);
    memcpy(id, data, id_len);
    id[id_len] = '\0';
    if (strlen(id) != id_len)
        return 0;   /* an id holds no NUL */
    text = nl + 1;
    len = size - id_len - 1;

    rc = store_events_compact(text, len, id, &compact, &n);
    if (rc == KEEL_OK) {
        if (n > len || compact[n] != '\0')
            abort();
        if (store_events_expand(compact, n, id, len, &back, &m) != KEEL_OK || m != len ||
            memcmp(back, text, len))
            abort();
    } else if (rc != KEEL_EINVAL || compact) {
        abort();
    }
    rc = store_events_expand(text, len, id, CAP, &expanded, &m);
    if (rc == KEEL_OK ? m > CAP : (expanded != NULL || (rc != KEEL_EINVAL && rc != KEEL_ETOOBIG)))
        abort();
    keel_free(compact);
    keel_free(back);
    keel_free(expanded);
    return 0;
}
