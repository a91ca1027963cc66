/*
 * fuzz_ingest.c — the ingestion parsers on arbitrary bytes: the first
 * byte picks markdown chunking, HTML to text, a JSON paper record
 * (parsed, mapped, and put into an in-memory store) or BibTeX (each
 * entry mapped onto a paper). Checks that chunks
 * stay under their size target and nothing leaks or overflows.
 */
#include <string.h>

#include "core/alloc.h"
#include "fuzz_common.h"
#include "ingest/ingest.h"

struct fuzz_bib_count {
    long records, broken;
};

/* Each BibTeX record must map onto a paper or be refused with a reason. */
static int count_entry(const json_t *record, long line, const char *why, void *arg)
{
    struct fuzz_bib_count *c = arg;

    if (line < 1 || (!record && !why))
        __builtin_trap();
    if (record) {
        struct store_paper paper;
        struct keel_error err;
        if (ingest_paper_from_json(record, "fuzz.bib", &paper, &err) == KEEL_OK)
            store_paper_release(&paper);
        c->records++;
    } else {
        c->broken++;
    }
    return KEEL_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data + 1;
    size_t n = size ? size - 1 : 0;

    if (size < 1)
        return 0;
    switch (data[0] % 4) {
    case 0: {
        struct ingest_chunks chunks;
        if (ingest_chunk_markdown(text, n, &chunks) == KEEL_OK) {
            for (size_t i = 0; i < chunks.n; i++)
                if (strlen(chunks.items[i].text) > INGEST_CHUNK_TARGET)
                    __builtin_trap();
            ingest_chunks_release(&chunks);
        }
        break;
    }
    case 1: {
        char *plain = NULL, *title = NULL;
        if (ingest_html_to_text(text, n, &plain, &title) == KEEL_OK) {
            keel_free(plain);
            keel_free(title);
        }
        break;
    }
    case 3: {
        struct fuzz_bib_count count = {0};
        struct keel_error err;
        ingest_bibtex(text, n, count_entry, &count, &err);
        break;
    }
    default: {
        json_t *record = json_loadb(text, n, 0, NULL);
        struct store_paper paper;
        struct keel_error err;
        if (record && ingest_paper_from_json(record, "fuzz", &paper, &err) == KEEL_OK) {
            /* A fresh store per input, so runs stay small and independent. */
            struct store *store = NULL;
            enum store_outcome outcome;
            if (store_open("mem:", &store, &err))
                __builtin_trap();
            store_put_paper(store, &paper, &outcome, &err);
            store_close(store);
            store_paper_release(&paper);
        }
        json_decref(record);
        break;
    }
    }
    return 0;
}
