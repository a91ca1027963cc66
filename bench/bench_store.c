/*
 * bench_store.c — the SQLite store at the sizes issue 3 names: a
 * 10,000-paper library and a 1,000-document corpus (5 chunks each),
 * generated deterministically from a fixed seed (bench_data.h: 8,000
 * synthetic words with skewed frequencies), in a temporary file.
 *
 * Reports, side by side in one run:
 *   store.put_paper       one transaction per paper (WAL, synchronous=NORMAL)
 *   store.search_papers   mixed two-word queries, half with year/OA filters, limit 10
 *   store.search_chunks   two-word queries over the chunks, limit 5
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_data.h"
#include "core/buf.h"
#include "store/store.h"

#define N_PAPERS 10000
#define N_DOCS 1000
#define CHUNKS_PER_DOC 5
#define N_QUERIES 4000

static int fill(struct store *store, uint64_t *put_samples)
{
    struct keel_buf title, abstract, text;
    struct keel_error err;
    int rc = 0;

    keel_buf_init(&title, 0);
    keel_buf_init(&abstract, 0);
    keel_buf_init(&text, 0);
    for (int i = 0; i < N_PAPERS && !rc; i++) {
        struct store_paper paper = {0};
        enum store_outcome outcome;
        char doi[32];
        uint64_t t0;
        bench_sentence(&title, 6 + (int)(bench_rand() % 6));
        bench_sentence(&abstract, 80 + (int)(bench_rand() % 120));
        snprintf(doi, sizeof(doi), "10.9999/bench.%d", i);
        paper.title = title.data;
        paper.abstract = abstract.data;
        paper.year = bench_rand() % 10 ? 1995 + (int)(bench_rand() % 31) : 0;
        paper.doi = doi;
        paper.is_open_access = bench_rand() % 3 == 0;
        t0 = bench_now_ns();
        rc = store_put_paper(store, &paper, &outcome, &err);
        put_samples[i] = bench_now_ns() - t0;
    }
    for (int d = 0; d < N_DOCS && !rc; d++) {
        struct store_chunk chunks[CHUNKS_PER_DOC];
        char *texts[CHUNKS_PER_DOC];
        char id[32];
        struct store_document doc = {id, id, id, "en"};
        enum store_outcome outcome;
        snprintf(id, sizeof(id), "doc-%d.md", d);
        for (int c = 0; c < CHUNKS_PER_DOC; c++) {
            bench_sentence(&text, 120 + (int)(bench_rand() % 60));
            texts[c] = strdup(text.data);
            chunks[c].section = "Section";
            chunks[c].text = texts[c];
        }
        rc = store_put_document(store, &doc, chunks, CHUNKS_PER_DOC, &outcome, &err);
        for (int c = 0; c < CHUNKS_PER_DOC; c++)
            free(texts[c]);
    }
    if (rc)
        fprintf(stderr, "keel-bench: filling the store: %s: %s\n", err.field, err.message);
    keel_buf_release(&title);
    keel_buf_release(&abstract);
    keel_buf_release(&text);
    return rc;
}

int bench_store(void)
{
    char dir[] = "/tmp/keel-bench-XXXXXX", path[64] = "", extra[96];
    uint64_t *puts = malloc(N_PAPERS * sizeof(*puts)), *samples = malloc(N_QUERIES * sizeof(*samples));
    struct store *store = NULL;
    struct keel_error err;
    struct keel_buf query;
    int rc = 1;

    keel_buf_init(&query, 0);
    bench_seed(0x6b65656cu);
    if (!puts || !samples || !mkdtemp(dir))
        goto out;
    snprintf(path, sizeof(path), "%s/bench.db", dir);
    if (store_open(path, &store, &err)) {
        fprintf(stderr, "keel-bench: %s: %s\n", err.field, err.message);
        goto out;
    }
    if (fill(store, puts))
        goto out;
    bench_report("store.put_paper", puts, N_PAPERS, "\"backend\": \"sqlite\", \"synchronous\": \"NORMAL\"");
    for (int i = 0; i < N_QUERIES; i++) {
        struct paper_query q = {NULL, 0, 0, 0, 10, STORE_MATCH_ANY, NULL, NULL, 0};
        struct paper_hits hits;
        uint64_t t0;
        bench_sentence(&query, 2);
        q.text = query.data;
        if (i % 2) {
            q.year_from = 2021;
            q.year_to = 2025;
            q.open_access_only = i % 4 == 1;
        }
        t0 = bench_now_ns();
        if (store_search_papers(store, &q, &hits, &err))
            goto out;
        samples[i] = bench_now_ns() - t0;
        paper_hits_release(&hits);
    }
    snprintf(extra, sizeof(extra), "\"backend\": \"sqlite\", \"papers\": %d", N_PAPERS);
    bench_report("store.search_papers", samples, N_QUERIES, extra);
    for (int i = 0; i < N_QUERIES; i++) {
        struct chunk_hits hits;
        uint64_t t0;
        bench_sentence(&query, 2);
        t0 = bench_now_ns();
        if (store_search_chunks(store, query.data, 5, &hits, &err))
            goto out;
        samples[i] = bench_now_ns() - t0;
        chunk_hits_release(&hits);
    }
    snprintf(extra, sizeof(extra), "\"backend\": \"sqlite\", \"chunks\": %d", N_DOCS * CHUNKS_PER_DOC);
    bench_report("store.search_chunks", samples, N_QUERIES, extra);
    rc = 0;
out:
    store_close(store);
    bench_remove_db(path, dir);
    keel_buf_release(&query);
    free(puts);
    free(samples);
    return rc;
}
