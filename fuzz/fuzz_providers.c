/*
 * fuzz_providers.c — the provider answer parsers on arbitrary bytes: the
 * first byte picks OpenAlex or Semantic Scholar and the request's filters;
 * the rest is the body. Parsed papers go through the post-filters, the
 * merge and the JSON rendering; the body is also used as a query for
 * both URL builders. Checks that merged papers pass the filters and
 * nothing leaks or overflows.
 */
#include <string.h>

#include "core/alloc.h"
#include "fuzz_common.h"
#include "providers/providers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init(argc, argv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum provider_id id;
    struct paper_request req = {"fuzz", 0, 0, 0, 5};
    struct provider_papers lists[2] = {{0}}, merged;
    struct provider_conf conf = {1, (char *)"http://127.0.0.1:1", (char *)"a@b.c", NULL, 1000};
    struct keel_error err;
    char query[512];

    if (size < 1)
        return 0;
    id = data[0] & 1 ? PROVIDER_SEMANTICSCHOLAR : PROVIDER_OPENALEX;
    req.year_from = data[0] & 2 ? 2015 : 0;
    req.year_to = data[0] & 4 ? 2022 : 0;
    req.open_access = (data[0] & 8) != 0;
    if (provider_parse(id, (const char *)data + 1, size - 1, &lists[0], &err) == KEEL_OK) {
        /* the same papers twice: every one has a twin to merge with */
        provider_parse(id, (const char *)data + 1, size - 1, &lists[1], &err);
        if (provider_papers_merge(lists, 2, &req, &merged) == KEEL_OK) {
            for (size_t i = 0; i < merged.n; i++) {
                json_t *j = provider_paper_json(&merged.items[i]);
                if (!provider_paper_allowed(&merged.items[i], &req) || (int)merged.n > req.limit)
                    __builtin_trap();
                json_decref(j);
            }
            provider_papers_release(&merged);
        }
    } else {
        provider_papers_release(&lists[0]);
    }
    memcpy(query, data + 1, size - 1 < sizeof(query) - 1 ? size - 1 : sizeof(query) - 1);
    query[size - 1 < sizeof(query) - 1 ? size - 1 : sizeof(query) - 1] = '\0';
    if (query[0]) {
        req.query = query;
        for (int f = 0; f < 2; f++) {
            keel_free(provider_url(PROVIDER_OPENALEX, &conf, &req, f));
            keel_free(provider_url(PROVIDER_SEMANTICSCHOLAR, &conf, &req, f));
        }
    }
    return 0;
}
