/*
 * fuzz_bus_frame.c — an event's SSE text as the bus keeps it
 * (src/server/bus.c: bus_frame writes it, bus_frame_parse splits it back
 * for the OpenAI stream). Whatever bus_frame_parse accepts must point
 * inside the input, and what bus_frame writes of the parts must parse
 * back to the same parts; on any input neither may crash, leak or read
 * out of bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "fuzz_common.h"
#include "server/bus.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *frame = (const char *)data, *text = NULL;
    char name[32], *again;
    size_t text_len = 0, len = 0;
    long id = 0;

    if (bus_frame_parse(frame, size, &id, name, sizeof(name), &text, &text_len))
        return 0;
    if (text < frame || text + text_len > frame + size || strlen(name) >= sizeof(name))
        abort();
    if (!(again = bus_frame(id, name, text, text_len, &len)))
        return 0;
    {
        const char *text2 = NULL;
        char name2[32];
        size_t text2_len = 0;
        long id2 = 0;
        if (bus_frame_parse(again, len, &id2, name2, sizeof(name2), &text2, &text2_len) ||
            id2 != id || strcmp(name2, name) || text2_len != text_len ||
            memcmp(text2, text, text_len))
            abort();
    }
    keel_free(again);
    return 0;
}
