/*
 * store_mem.c — the in-memory store backend, chosen only by "mem:" (tests).
 *
 * Papers and documents are deep copies in growable arrays, found by a
 * linear scan of their ids: every operation is O(rows), which is fine for
 * the few thousand rows a test holds. A search scans every row and ranks
 * with BM25 computed the way SQLite FTS5's bm25() does it (k1 = 1.2,
 * b = 0.75, IDF = log((N - n + 0.5) / (n + 0.5)) floored at 1e-6, one term
 * per query word, row length = tokens of all indexed columns), over words
 * split by the rules of store_query_words(). The scores equal FTS5's bit
 * for bit when FTS5 splits words the same way (its 'ascii' tokenizer);
 * with 'unicode61', which folds case and accents beyond ASCII and splits
 * at Unicode punctuation, the two backends agree on ASCII text only.
 * A put builds the new row completely before it touches the store, so a
 * failed allocation leaves the store as it was.
 */
#include "store/store.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "store/store_mem_int.h"

#define BM25_K1 1.2
#define BM25_B 0.75
#define WORD_MAX 64  /* longest query word, in bytes (store_query_words()) */

struct mem_paper {
    struct store_paper paper;  /* deep copy; id is always set */
    uint64_t hash;             /* over every field, see paper_hash() */
};

struct mem_chunk {
    char *section;  /* may be NULL */
    char *text;
};

struct mem_document {
    char *id;
    char *title;    /* title, source and lang may be NULL */
    char *source;
    char *lang;
    struct mem_chunk *chunks;
    size_t n_chunks;
    uint64_t hash;  /* over title, source, lang and the chunks */
};

struct store_mem {
    struct store base;  /* first: a struct store * is a struct store_mem * */
    struct mem_paper *papers;
    size_t n_papers, cap_papers;
    struct mem_document *docs;
    size_t n_docs, cap_docs;
    size_t n_chunks;    /* over all documents */
    struct mem_conversations *conv;   /* store_mem_conv.c; NULL until the first turn */
    json_t *keys;       /* hash -> {id, user, role, created_ms, revoked_ms} */
    json_t *shares;     /* hash -> conversation id */
    struct mem_memory *memory;        /* store_mem_memory.c; NULL until the first decision */
    json_t *personal;                 /* store_mem_personal.c; NULL until the first fact */
    struct mem_artifacts *artifacts;  /* store_mem_artifacts.c; NULL until the first artifact */
};

/* The words of one search, from store_query_words(). Repeated words are
 * kept: FTS5 scores each phrase of an OR query, repeats included. */
struct query_words {
    char buf[STORE_QUERY_WORDS * (WORD_MAX + 1)];
    const char *words[STORE_QUERY_WORDS];
    size_t lens[STORE_QUERY_WORDS];
    size_t n;
};

/* A row that holds at least one query word and passed the filters. */
struct candidate {
    size_t row;       /* index into papers / docs */
    size_t ordinal;   /* chunk index in its document; 0 for papers */
    const char *key;  /* paper / document id: the first tie-break */
    size_t length;    /* tokens in the row */
    unsigned freq[STORE_QUERY_WORDS];
    double score;
};

/* Collection statistics and candidates of one BM25 ranking. */
struct bm25 {
    const struct query_words *query;
    size_t rows;                          /* N: every row, filtered or not */
    size_t tokens;                        /* over every row */
    size_t rows_with[STORE_QUERY_WORDS];  /* n: rows holding word i */
    int match_all;                        /* candidates hold every word as a prefix
                                             ("limit" finds "limits"), FTS5's AND of
                                             prefix queries */
    struct candidate *items;
    size_t n, cap;
};

/* Returns `items` grown to hold at least `need` items of `size` bytes
 * (`*cap` updated), or NULL when allocation fails; `items` then stays
 * valid and unchanged. */
static void *grow_array(void *items, size_t *cap, size_t need, size_t size)
{
    size_t new_cap;
    void *grown;

    if (need <= *cap)
        return items;
    new_cap = *cap && *cap <= SIZE_MAX / 2 ? *cap * 2 : 16;
    if (new_cap < need)
        new_cap = need;
    if (new_cap > SIZE_MAX / size)
        return NULL;
    grown = keel_realloc(items, new_cap * size);
    if (grown)
        *cap = new_cap;
    return grown;
}

/* Copies an optional string: NULL stays NULL. Returns KEEL_ENOMEM. */
static int dup_optional(char **dst, const char *src)
{
    *dst = src ? keel_strdup(src) : NULL;
    return src && !*dst ? KEEL_ENOMEM : KEEL_OK;
}

/* --- content hashes (FNV-1a, 64 bits) ---------------------------------- */

static void hash_bytes(uint64_t *hash, const void *data, size_t n)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < n; i++)
        *hash = (*hash ^ p[i]) * 1099511628211ull;
}

static void hash_number(uint64_t *hash, uint64_t value)
{
    unsigned char bytes[8];

    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)(value >> (8 * i));
    hash_bytes(hash, bytes, sizeof(bytes));
}

/* Hashes a tag and the length before the bytes, so NULL, "" and the
 * boundaries between fields all change the hash. */
static void hash_string(uint64_t *hash, const char *s)
{
    size_t len = s ? strlen(s) : 0;

    hash_number(hash, s ? 1 : 0);
    hash_number(hash, len);
    hash_bytes(hash, s ? s : "", len);
}

struct json_hash {
    uint64_t hash;
    size_t len;  /* bytes of the serialisation so far */
};

static int hash_dump_chunk(const char *buffer, size_t size, void *data)
{
    struct json_hash *state = data;

    hash_bytes(&state->hash, buffer, size);
    state->len += size;
    return 0;
}

/* Hashes the key-sorted compact serialisation of `value` (may be NULL).
 * KEEL_ENOMEM when jansson cannot allocate while dumping; KEEL_ETOOBIG
 * when the serialisation is over STORE_TEXT_MAX, the cap the SQLite
 * backend puts on its authors column. */
static int hash_json(uint64_t *hash, const json_t *value)
{
    struct json_hash state = {*hash, 0};

    hash_number(&state.hash, value ? 1 : 0);
    if (value && json_dump_callback(value, hash_dump_chunk, &state,
                                    JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY))
        return KEEL_ENOMEM;
    *hash = state.hash;
    return state.len > STORE_TEXT_MAX ? KEEL_ETOOBIG : KEEL_OK;
}

static int paper_hash(const struct store_paper *paper, uint64_t *out)
{
    uint64_t hash = 1469598103934665603ull;
    int rc;

    hash_string(&hash, paper->id);
    hash_string(&hash, paper->title);
    hash_string(&hash, paper->abstract);
    hash_number(&hash, (uint64_t)(int64_t)paper->year);
    hash_string(&hash, paper->venue);
    rc = hash_json(&hash, paper->authors);
    hash_string(&hash, paper->doi);
    hash_string(&hash, paper->url);
    hash_string(&hash, paper->pdf_url);
    hash_number(&hash, (uint64_t)(int64_t)paper->is_open_access);
    hash_string(&hash, paper->source);
    *out = hash;
    return rc;
}

static uint64_t document_hash(const struct store_document *doc, const struct store_chunk *chunks,
                              size_t n_chunks)
{
    uint64_t hash = 1469598103934665603ull;

    hash_string(&hash, doc->title);
    hash_string(&hash, doc->source);
    hash_string(&hash, doc->lang);
    hash_number(&hash, n_chunks);
    for (size_t i = 0; i < n_chunks; i++) {
        hash_string(&hash, chunks[i].section);
        hash_string(&hash, chunks[i].text);
    }
    return hash;
}

/* --- BM25 --------------------------------------------------------------- */

static int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static void query_words_init(struct query_words *query, const char *text)
{
    query->n = store_query_words(text ? text : "", query->buf, sizeof(query->buf), query->words,
                                 STORE_QUERY_WORDS);
    for (size_t i = 0; i < query->n; i++)
        query->lens[i] = strlen(query->words[i]);
}

/* Splits `text` (may be NULL) into words as store_query_words() does,
 * ASCII folded to lower case, adds each query word's occurrences to
 * `freq` and returns the number of words. A word longer than WORD_MAX
 * counts but matches nothing: the index holds it whole, and a query word
 * is at most WORD_MAX bytes. */
static size_t scan_text(const char *text, const struct query_words *query, int prefix,
                        unsigned *freq)
{
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    char word[WORD_MAX + 1];
    size_t tokens = 0;

    for (;;) {
        size_t len = 0;

        while (*p && !is_word_byte(*p))
            p++;
        if (!*p)
            break;
        for (; is_word_byte(*p); p++)
            if (len <= WORD_MAX)
                word[len++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        tokens++;
        for (size_t i = 0; i < query->n; i++)
            if ((query->lens[i] == len || (prefix && query->lens[i] < len)) &&
                !memcmp(query->words[i], word, query->lens[i]))
                freq[i]++;
    }
    return tokens;
}

static void bm25_init(struct bm25 *rank, const struct query_words *query, enum store_match match)
{
    memset(rank, 0, sizeof(*rank));
    rank->query = query;
    rank->match_all = match == STORE_MATCH_ALL;
}

static void bm25_release(struct bm25 *rank)
{
    keel_free(rank->items);
    memset(rank, 0, sizeof(*rank));
}

/* Counts one row of two indexed columns into the statistics and keeps it
 * as a candidate when it holds a query word and `keep` is set. Returns
 * KEEL_ENOMEM (statistics then incomplete: give up the search). */
static int bm25_add_row(struct bm25 *rank, const char *first, const char *second, int keep,
                        size_t row, size_t ordinal, const char *key)
{
    struct candidate item;
    const struct query_words *query = rank->query;
    int matched = 0, missing = 0;
    void *grown;

    memset(&item, 0, sizeof(item));
    item.length = scan_text(first, query, rank->match_all, item.freq);
    item.length += scan_text(second, query, rank->match_all, item.freq);
    rank->rows++;
    rank->tokens += item.length;
    for (size_t i = 0; i < query->n; i++) {
        if (item.freq[i]) {
            rank->rows_with[i]++;
            matched = 1;
        } else {
            missing = 1;
        }
    }
    if (rank->match_all && missing)
        matched = 0;
    if (!matched || !keep)
        return KEEL_OK;
    grown = grow_array(rank->items, &rank->cap, rank->n + 1, sizeof(*rank->items));
    if (!grown)
        return KEEL_ENOMEM;
    rank->items = grown;
    item.row = row;
    item.ordinal = ordinal;
    item.key = key;
    rank->items[rank->n++] = item;
    return KEEL_OK;
}

/* Higher score first, then key ascending, then ordinal ascending. */
static int by_rank(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    int order;

    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if ((order = strcmp(x->key, y->key)))
        return order;
    return x->ordinal < y->ordinal ? -1 : x->ordinal > y->ordinal;
}

/* Scores every candidate once all rows are counted, term by term in query
 * order as FTS5 does, and sorts them best first. */
static void bm25_rank(struct bm25 *rank)
{
    const struct query_words *query = rank->query;
    double idf[STORE_QUERY_WORDS];
    double avgdl;

    if (!rank->n)
        return;  /* a candidate implies rows > 0 and tokens > 0 */
    avgdl = (double)rank->tokens / (double)rank->rows;
    for (size_t i = 0; i < query->n; i++) {
        double n = (double)rank->rows_with[i];
        idf[i] = log(((double)rank->rows - n + 0.5) / (n + 0.5));
        if (idf[i] <= 0.0)
            idf[i] = 1e-6;
    }
    for (size_t c = 0; c < rank->n; c++) {
        struct candidate *item = &rank->items[c];
        double length = (double)item->length, score = 0.0;

        for (size_t i = 0; i < query->n; i++) {
            double f = (double)item->freq[i];
            score += idf[i] * ((f * (BM25_K1 + 1.0)) /
                               (f + BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl)));
        }
        item->score = score;
    }
    qsort(rank->items, rank->n, sizeof(*rank->items), by_rank);
}

/* The first `limit` candidates, `limit` clamped to 0..STORE_LIMIT_MAX (the
 * wrappers have checked it; a direct call through ops still stays in
 * bounds). */
static size_t hit_count(const struct bm25 *rank, int limit)
{
    size_t cap = limit < 1 ? 0 : limit > STORE_LIMIT_MAX ? STORE_LIMIT_MAX : (size_t)limit;

    return rank->n < cap ? rank->n : cap;
}

/* --- papers ------------------------------------------------------------- */

/* Index of the paper with `id`, or n_papers. */
static size_t find_paper(const struct store_mem *mem, const char *id)
{
    size_t i;

    for (i = 0; i < mem->n_papers; i++)
        if (!strcmp(mem->papers[i].paper.id, id))
            break;
    return i;
}

/* Puts a deep copy of `paper` (id set) at index `at`: a new paper when
 * `at` is n_papers, else in place of the old one. KEEL_ENOMEM leaves the
 * store as it was. */
static int paper_keep(struct store_mem *mem, size_t at, const struct store_paper *paper,
                      uint64_t hash)
{
    struct mem_paper fresh;
    int rc = KEEL_ENOMEM;

    memset(&fresh, 0, sizeof(fresh));
    fresh.hash = hash;
    if (at == mem->n_papers) {
        void *grown = grow_array(mem->papers, &mem->cap_papers, mem->n_papers + 1,
                                 sizeof(*mem->papers));
        if (!grown)
            goto out;
        mem->papers = grown;  /* spare room only: the store is unchanged */
    }
    if (store_paper_copy(&fresh.paper, paper))
        goto out;
    if (at < mem->n_papers)
        store_paper_release(&mem->papers[at].paper);
    else
        mem->n_papers++;
    mem->papers[at] = fresh;
    memset(&fresh, 0, sizeof(fresh));  /* owned by the store now */
    rc = KEEL_OK;
out:
    store_paper_release(&fresh.paper);
    return rc;
}

static int mem_put_paper(struct store *store, const struct store_paper *paper,
                         enum store_outcome *outcome, struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    struct store_paper keyed = *paper;  /* shallow; id and is_open_access may differ */
    enum store_outcome result = STORE_UNCHANGED;
    uint64_t hash;
    char id[256];
    size_t at;
    int rc;

    if (!paper->id || !*paper->id) {
        store_paper_id(paper, id, sizeof(id));
        keyed.id = id;
    }
    keyed.is_open_access = paper->is_open_access != 0;  /* kept as 0/1, as SQLite keeps it */
    if ((rc = paper_hash(&keyed, &hash))) {
        if (rc == KEEL_ETOOBIG)
            keel_error_set(err, rc, "authors", "is longer than %u bytes", STORE_TEXT_MAX);
        goto out;
    }
    at = find_paper(mem, keyed.id);
    if (at == mem->n_papers || mem->papers[at].hash != hash) {
        result = at == mem->n_papers ? STORE_ADDED : STORE_UPDATED;
        if ((rc = paper_keep(mem, at, &keyed, hash)))
            goto out;
    }
    if (outcome)
        *outcome = result;
out:
    if (rc == KEEL_ENOMEM)
        keel_error_set(err, rc, NULL, "out of memory");
    return rc;
}

static int paper_passes(const struct store_paper *paper, const struct paper_query *query)
{
    if ((query->year_from || query->year_to) && !paper->year)
        return 0;
    if (query->year_from && paper->year < query->year_from)
        return 0;
    if (query->year_to && paper->year > query->year_to)
        return 0;
    return !query->open_access_only || paper->is_open_access;
}

static int mem_search_papers(struct store *store, const struct paper_query *query,
                             struct paper_hits *out, struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    struct query_words words;
    struct bm25 rank;
    struct paper_hits hits = {NULL, 0};
    size_t n;
    int rc = KEEL_ENOMEM;

    out->items = NULL;
    out->n = 0;
    query_words_init(&words, query->text);
    bm25_init(&rank, &words, query->match);
    for (size_t i = 0; words.n && i < mem->n_papers; i++) {
        const struct store_paper *paper = &mem->papers[i].paper;
        if (bm25_add_row(&rank, paper->title, paper->abstract, paper_passes(paper, query), i, 0,
                         paper->id))
            goto out;
    }
    bm25_rank(&rank);
    n = hit_count(&rank, query->limit);
    if (n && !(hits.items = keel_calloc(n, sizeof(*hits.items))))
        goto out;
    for (size_t k = 0; k < n && !paper_query_full(query, hits.n); k++) {
        struct paper_hit *hit = &hits.items[hits.n];
        if (store_paper_copy(&hit->paper, &mem->papers[rank.items[k].row].paper))
            goto out;   /* a failed copy releases itself */
        hit->score = rank.items[k].score;
        paper_hits_offer(query, &hits);
    }
    *out = hits;
    hits.items = NULL;
    hits.n = 0;
    rc = KEEL_OK;
out:
    paper_hits_release(&hits);
    bm25_release(&rank);
    if (rc)
        keel_error_set(err, rc, NULL, "out of memory");
    return rc;
}

/* --- documents and chunks ----------------------------------------------- */

static void document_release(struct mem_document *doc)
{
    for (size_t i = 0; i < doc->n_chunks; i++) {
        keel_free(doc->chunks[i].section);
        keel_free(doc->chunks[i].text);
    }
    keel_free(doc->chunks);
    keel_free(doc->id);
    keel_free(doc->title);
    keel_free(doc->source);
    keel_free(doc->lang);
    memset(doc, 0, sizeof(*doc));
}

/* Fills `dst` with deep copies. KEEL_ENOMEM with `dst` released. */
static int document_copy(struct mem_document *dst, const struct store_document *doc,
                         const struct store_chunk *chunks, size_t n_chunks)
{
    int rc = KEEL_ENOMEM;

    memset(dst, 0, sizeof(*dst));
    if (dup_optional(&dst->id, doc->id) || dup_optional(&dst->title, doc->title) ||
        dup_optional(&dst->source, doc->source) || dup_optional(&dst->lang, doc->lang))
        goto out;
    if (n_chunks) {
        if (!(dst->chunks = keel_calloc(n_chunks, sizeof(*dst->chunks))))
            goto out;
        dst->n_chunks = n_chunks;  /* zeroed chunks release cleanly */
    }
    for (size_t i = 0; i < n_chunks; i++)
        if (dup_optional(&dst->chunks[i].section, chunks[i].section) ||
            dup_optional(&dst->chunks[i].text, chunks[i].text))
            goto out;
    rc = KEEL_OK;
out:
    if (rc)
        document_release(dst);
    return rc;
}

/* Index of the document with `id`, or n_docs. */
static size_t find_document(const struct store_mem *mem, const char *id)
{
    size_t i;

    for (i = 0; i < mem->n_docs; i++)
        if (!strcmp(mem->docs[i].id, id))
            break;
    return i;
}

/* Puts deep copies of the document and its chunks at index `at`: a new
 * document when `at` is n_docs, else in place of the old one and its
 * chunks. KEEL_ENOMEM leaves the store as it was. */
static int document_keep(struct store_mem *mem, size_t at, const struct store_document *doc,
                         const struct store_chunk *chunks, size_t n_chunks, uint64_t hash)
{
    struct mem_document fresh;
    int rc = KEEL_ENOMEM;

    memset(&fresh, 0, sizeof(fresh));
    if (at == mem->n_docs) {
        void *grown = grow_array(mem->docs, &mem->cap_docs, mem->n_docs + 1, sizeof(*mem->docs));
        if (!grown)
            goto out;
        mem->docs = grown;  /* spare room only: the store is unchanged */
    }
    if (document_copy(&fresh, doc, chunks, n_chunks))
        goto out;
    fresh.hash = hash;
    if (at < mem->n_docs) {
        mem->n_chunks -= mem->docs[at].n_chunks;
        document_release(&mem->docs[at]);
    } else {
        mem->n_docs++;
    }
    mem->n_chunks += fresh.n_chunks;
    mem->docs[at] = fresh;
    memset(&fresh, 0, sizeof(fresh));  /* owned by the store now */
    rc = KEEL_OK;
out:
    document_release(&fresh);
    return rc;
}

static int mem_put_document(struct store *store, const struct store_document *doc,
                            const struct store_chunk *chunks, size_t n_chunks,
                            enum store_outcome *outcome, struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    enum store_outcome result = STORE_UNCHANGED;
    uint64_t hash;
    size_t at;
    int rc = KEEL_OK;

    if (n_chunks > INT_MAX)  /* a hit's ordinal is an int */
        return keel_error_set(err, KEEL_ETOOBIG, "chunks", "more than %d chunks", INT_MAX);
    hash = document_hash(doc, chunks, n_chunks);
    at = find_document(mem, doc->id);
    if (at == mem->n_docs || mem->docs[at].hash != hash) {
        result = at == mem->n_docs ? STORE_ADDED : STORE_UPDATED;
        if ((rc = document_keep(mem, at, doc, chunks, n_chunks, hash)))
            return keel_error_set(err, rc, NULL, "out of memory");
    }
    if (outcome)
        *outcome = result;
    return KEEL_OK;
}

/* Fills one hit with copies of chunk `ordinal` of `doc`. KEEL_ENOMEM
 * leaves what was copied for chunk_hits_release(). */
static int chunk_hit_fill(struct chunk_hit *hit, const struct mem_document *doc, size_t ordinal,
                          double score)
{
    const struct mem_chunk *chunk = &doc->chunks[ordinal];

    hit->ordinal = (int)ordinal;
    hit->score = score;
    if (dup_optional(&hit->document_id, doc->id) || dup_optional(&hit->title, doc->title) ||
        dup_optional(&hit->source, doc->source) || dup_optional(&hit->section, chunk->section) ||
        dup_optional(&hit->text, chunk->text))
        return KEEL_ENOMEM;
    return KEEL_OK;
}

static int mem_search_chunks(struct store *store, const char *text, enum store_match match,
                             int limit, struct chunk_hits *out, struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    struct query_words words;
    struct bm25 rank;
    struct chunk_hits hits = {NULL, 0};
    size_t n;
    int rc = KEEL_ENOMEM;

    out->items = NULL;
    out->n = 0;
    query_words_init(&words, text);
    bm25_init(&rank, &words, match);
    for (size_t d = 0; words.n && d < mem->n_docs; d++) {
        const struct mem_document *doc = &mem->docs[d];
        for (size_t i = 0; i < doc->n_chunks; i++)
            if (bm25_add_row(&rank, doc->chunks[i].section, doc->chunks[i].text, 1, d, i, doc->id))
                goto out;
    }
    bm25_rank(&rank);
    n = hit_count(&rank, limit);
    if (n) {
        if (!(hits.items = keel_calloc(n, sizeof(*hits.items))))
            goto out;
        hits.n = n;  /* zeroed items release cleanly if a copy fails */
        for (size_t k = 0; k < n; k++)
            if (chunk_hit_fill(&hits.items[k], &mem->docs[rank.items[k].row], rank.items[k].ordinal,
                               rank.items[k].score))
                goto out;
    }
    *out = hits;
    hits.items = NULL;
    hits.n = 0;
    rc = KEEL_OK;
out:
    chunk_hits_release(&hits);
    bm25_release(&rank);
    if (rc)
        keel_error_set(err, rc, NULL, "out of memory");
    return rc;
}

/* --- the store ---------------------------------------------------------- */

static int mem_counts(struct store *store, struct store_counts *out, struct keel_error *err)
{
    const struct store_mem *mem = (const struct store_mem *)store;

    (void)err;
    out->papers = (long)mem->n_papers;
    out->documents = (long)mem->n_docs;
    out->chunks = (long)mem->n_chunks;
    return KEEL_OK;
}

static void mem_close(struct store *store)
{
    struct store_mem *mem = (struct store_mem *)store;

    for (size_t i = 0; i < mem->n_papers; i++)
        store_paper_release(&mem->papers[i].paper);
    for (size_t i = 0; i < mem->n_docs; i++)
        document_release(&mem->docs[i]);
    keel_free(mem->papers);
    keel_free(mem->docs);
    mem_conv_free(mem->conv);
    mem_memory_free(mem->memory);
    mem_artifacts_free(mem->artifacts);
    json_decref(mem->keys);
    json_decref(mem->shares);
    json_decref(mem->personal);
    keel_free(mem);
}

/* ---- keys and share links ------------------------------------------------ */

static int mem_key_put(struct store *store, const struct store_key *key, const char *hash,
                       struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    const char *h;
    json_t *k;

    if (!mem->keys && !(mem->keys = json_object()))
        return keel_error_set(err, KEEL_ENOMEM, "key", "out of memory");
    json_object_foreach(mem->keys, h, k)
        if (!strcmp(h, hash) || !strcmp(json_string_value(json_object_get(k, "id")), key->id))
            return keel_error_set(err, KEEL_EFAIL, "id", "a key with this id or token exists");
    k = json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", key->id, "user", key->user, "role",
                  key->role, "created_ms", (json_int_t)key->created_ms, "revoked_ms",
                  (json_int_t)0);
    if (!k || json_object_set_new(mem->keys, hash, k))
        return keel_error_set(err, KEEL_ENOMEM, "key", "out of memory");
    return KEEL_OK;
}

static int mem_key_find(struct store *store, const char *hash, struct store_key *out,
                        struct keel_error *err)
{
    json_t *k = json_object_get(((struct store_mem *)store)->keys, hash);

    if (!k)
        return keel_error_set(err, KEEL_ENOTFOUND, "key", "no such key");
    out->created_ms = json_integer_value(json_object_get(k, "created_ms"));
    out->revoked_ms = json_integer_value(json_object_get(k, "revoked_ms"));
    if (!(out->id = keel_strdup(json_string_value(json_object_get(k, "id")))) ||
        !(out->user = keel_strdup(json_string_value(json_object_get(k, "user")))) ||
        !(out->role = keel_strdup(json_string_value(json_object_get(k, "role"))))) {
        store_key_release(out);
        return keel_error_set(err, KEEL_ENOMEM, "key", "out of memory");
    }
    return KEEL_OK;
}

static int by_created(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t cx = json_integer_value(json_object_get(x, "created_ms"));
    json_int_t cy = json_integer_value(json_object_get(y, "created_ms"));

    if (cx != cy)
        return cx < cy ? -1 : 1;
    return strcmp(json_string_value(json_object_get(x, "id")),
                  json_string_value(json_object_get(y, "id")));
}

static int mem_key_list(struct store *store, json_t **out, struct keel_error *err)
{
    json_t *keys = ((struct store_mem *)store)->keys, *list = json_array(), *k;
    json_t **all = keel_calloc(json_object_size(keys) + 1, sizeof(*all));
    const char *h;
    size_t n = 0;

    if (!list || !all) {
        json_decref(list);
        keel_free(all);
        return keel_error_set(err, KEEL_ENOMEM, "keys", "out of memory");
    }
    json_object_foreach(keys, h, k)
        all[n++] = k;
    qsort(all, n, sizeof(*all), by_created);
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(list, json_copy(all[i]))) {
            json_decref(list);
            keel_free(all);
            return keel_error_set(err, KEEL_ENOMEM, "keys", "out of memory");
        }
    keel_free(all);
    *out = list;
    return KEEL_OK;
}

static int mem_key_revoke(struct store *store, const char *id, int64_t now_ms,
                          struct keel_error *err)
{
    const char *h;
    json_t *k;

    json_object_foreach(((struct store_mem *)store)->keys, h, k)
        if (!strcmp(json_string_value(json_object_get(k, "id")), id)) {
            if (!json_integer_value(json_object_get(k, "revoked_ms")) &&
                json_object_set_new(k, "revoked_ms", json_integer(now_ms)))
                return keel_error_set(err, KEEL_ENOMEM, "id", "out of memory");
            return KEEL_OK;
        }
    return keel_error_set(err, KEEL_ENOTFOUND, "id", "no key \"%s\"", id);
}

static int mem_share_put(struct store *store, const char *hash, const char *conversation_id,
                         const char *user, int64_t now_ms, struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    struct store_conversation conv;
    int rc;

    (void)user;
    (void)now_ms;
    if ((rc = mem_conv_load(mem->conv, conversation_id, &conv, err)))
        return rc;
    store_conversation_release(&conv);
    if ((!mem->shares && !(mem->shares = json_object())) ||
        json_object_set_new(mem->shares, hash, json_string(conversation_id)))
        return keel_error_set(err, KEEL_ENOMEM, "token", "out of memory");
    return KEEL_OK;
}

static int mem_share_find(struct store *store, const char *hash, char **conversation_id,
                          struct keel_error *err)
{
    json_t *id = json_object_get(((struct store_mem *)store)->shares, hash);

    if (!id)
        return keel_error_set(err, KEEL_ENOTFOUND, "token", "no such share link");
    if (!(*conversation_id = keel_strdup(json_string_value(id))))
        return keel_error_set(err, KEEL_ENOMEM, "token", "out of memory");
    return KEEL_OK;
}

static int mem_load_conversation(struct store *store, const char *id,
                                 struct store_conversation *out, struct keel_error *err)
{
    return mem_conv_load(((struct store_mem *)store)->conv, id, out, err);
}

/* The memory decision goes first: it is the part that can be refused
 * (an id taken, a target gone) before anything is written; a turn that
 * then conflicts leaves it stored (the mem backend has no transactions;
 * SQLite writes both or neither). */
static int mem_save_turn(struct store *store, const struct store_turn_record *rec,
                         struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    struct mem_artifacts next;
    json_t *facts = NULL;
    int rc = mem_artifacts_prepare(&mem->artifacts, rec, &next, err);

    /* The artifact and the personal fact are built first and swapped in
     * after the turn. */
    if (!rc && rec->memory)
        rc = mem_memory_apply(&mem->memory, rec->memory, err);
    if (!rc && rec->personal)
        rc = mem_personal_prepare(&mem->personal, rec->personal, &facts, err);
    if (!rc)
        rc = mem_conv_save(&mem->conv, rec, err);
    if (rc) {
        mem_artifacts_discard(&next);
        json_decref(facts);
    } else {
        mem_artifacts_commit(mem->artifacts, &next);   /* cannot fail */
        if (facts)
            mem_personal_commit(mem->personal, rec->personal->user, facts);
    }
    return rc;
}

static int mem_scenario_set(struct store *store, const char *id, int64_t version,
                            const char *scenario_json, struct keel_error *err)
{
    return mem_conv_scenario_set(((struct store_mem *)store)->conv, id, version, scenario_json,
                                 err);
}

static int mem_metrics(struct store *store, json_t **out, struct keel_error *err)
{
    return mem_conv_metrics(((struct store_mem *)store)->conv, out, err);
}

static int mem_list_turns(struct store *store, const char *id, json_t **out,
                          struct keel_error *err)
{
    return mem_conv_list(((struct store_mem *)store)->conv, id, out, err);
}

static int mem_get_turn(struct store *store, const char *correlation_id, json_t **out,
                        struct keel_error *err)
{
    return mem_conv_get_turn(((struct store_mem *)store)->conv, correlation_id, out, err);
}

static int mem_list_conversations(struct store *store, const char *owner, int limit, int offset,
                                  json_t **out, struct keel_error *err)
{
    return mem_conv_list_all(((struct store_mem *)store)->conv, owner, limit, offset, out, err);
}

static int mem_delete_conversation(struct store *store, const char *id, struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;
    const char *hash;
    json_t *conv_id, *tmp;
    struct store_conversation conv;
    int rc = mem_conv_load(mem->conv, id, &conv, err);

    /* the memory of its owner made from it first: what can fail (out of
     * memory) fails before anything changed */
    if (!rc) {
        rc = mem_memory_erase_conversation(mem->memory, id, conv.owner && *conv.owner
                                                               ? conv.owner : NULL,
                                           keel_clock_now(), err);
        store_conversation_release(&conv);
    }
    if (!rc)
        rc = mem_conv_delete(mem->conv, id, err);

    if (!rc)
        mem_artifacts_delete(mem->artifacts, id);
    if (!rc)
        json_object_foreach_safe(mem->shares, tmp, hash, conv_id)
            if (!strcmp(json_string_value(conv_id), id))
                json_object_del(mem->shares, hash);
    return rc;
}

static int mem_metrics_reset(struct store *store, struct keel_error *err)
{
    return mem_conv_metrics_reset(((struct store_mem *)store)->conv, err);
}

static int mem_metrics_history(struct store *store, int aggregate_minutes, int limit,
                               json_t **out, struct keel_error *err)
{
    return mem_conv_metrics_history(((struct store_mem *)store)->conv, aggregate_minutes, limit,
                                    out, err);
}

static int mem_memory_apply_op(struct store *store, const struct store_memory_change *change,
                               struct keel_error *err)
{
    return mem_memory_apply(&((struct store_mem *)store)->memory, change, err);
}

static int mem_memory_sync_op(struct store *store, int64_t *seq, store_memory_fn fn, void *ctx,
                              struct keel_error *err)
{
    return mem_memory_sync(((struct store_mem *)store)->memory, seq, fn, ctx, err);
}

static int mem_memory_get_op(struct store *store, const char *const *ids, size_t n, json_t **out,
                             struct keel_error *err)
{
    return mem_memory_get(((struct store_mem *)store)->memory, ids, n, out, err);
}

static int mem_memory_decisions_op(struct store *store, const char *owner, int limit, int offset,
                                   json_t **out, struct keel_error *err)
{
    return mem_memory_decisions(((struct store_mem *)store)->memory, owner, limit, offset, out,
                                err);
}

static int mem_personal_list_op(struct store *store, const char *user, json_t **out,
                                struct keel_error *err)
{
    return mem_personal_list(((struct store_mem *)store)->personal, user, out, err);
}

static int mem_personal_stats_op(struct store *store, json_t **out, struct keel_error *err)
{
    return mem_personal_stats(((struct store_mem *)store)->personal, out, err);
}

static int mem_artifacts_list_op(struct store *store, const char *conversation_id,
                                 const char *type, int last, json_t **out, struct keel_error *err)
{
    return mem_artifacts_list(((struct store_mem *)store)->artifacts, conversation_id, type, last,
                              out, err);
}

static int mem_artifact_get_op(struct store *store, const char *id, json_t **out,
                               struct keel_error *err)
{
    return mem_artifact_get(((struct store_mem *)store)->artifacts, id, out, err);
}

static int mem_facts_list_op(struct store *store, const struct store_fact_query *q, json_t **out,
                             struct keel_error *err)
{
    struct store_mem *mem = (struct store_mem *)store;

    return mem_facts_list(mem->artifacts, mem->conv, q, out, err);
}

static const struct store_ops mem_ops = {
    .name = "mem",
    .close = mem_close,
    .put_paper = mem_put_paper,
    .search_papers = mem_search_papers,
    .put_document = mem_put_document,
    .search_chunks = mem_search_chunks,
    .counts = mem_counts,
    .load_conversation = mem_load_conversation,
    .save_turn = mem_save_turn,
    .metrics = mem_metrics,
    .list_turns = mem_list_turns,
    .get_turn = mem_get_turn,
    .key_put = mem_key_put,
    .key_find = mem_key_find,
    .key_list = mem_key_list,
    .key_revoke = mem_key_revoke,
    .share_put = mem_share_put,
    .share_find = mem_share_find,
    .list_conversations = mem_list_conversations,
    .delete_conversation = mem_delete_conversation,
    .metrics_reset = mem_metrics_reset,
    .metrics_history = mem_metrics_history,
    .memory_apply = mem_memory_apply_op,
    .memory_sync = mem_memory_sync_op,
    .memory_get = mem_memory_get_op,
    .memory_decisions = mem_memory_decisions_op,
    .personal_list = mem_personal_list_op,
    .personal_stats = mem_personal_stats_op,
    .artifacts_list = mem_artifacts_list_op,
    .artifact_get = mem_artifact_get_op,
    .facts_list = mem_facts_list_op,
    .scenario_set = mem_scenario_set,
};

/* Opens an empty in-memory store into *out; close it with store_close(),
 * which frees every copy it holds. Returns KEEL_ENOMEM (err filled, *out
 * untouched, nothing allocated) when the store cannot be allocated. */
int store_mem_open(struct store **out, struct keel_error *err)
{
    struct store_mem *mem = keel_calloc(1, sizeof(*mem));

    if (!mem)
        return keel_error_set(err, KEEL_ENOMEM, NULL, "out of memory");
    mem->base.ops = &mem_ops;
    *out = &mem->base;
    return KEEL_OK;
}
