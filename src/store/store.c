/*
 * store.c — opening a store by location, argument checks shared by every
 * backend, paper ids, query words, and freeing results. The lock of a
 * store shared by threads is store_lock.c's.
 */
#include "store/store.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/utf8.h"
#include "store/store_lock_int.h"

int store_open(const char *location, struct store **out, struct keel_error *err)
{
    if (!location || !*location)
        return keel_error_set(err, KEEL_EINVAL, "db", "a store location is required");
    if (!strcmp(location, "mem:"))
        return store_mem_open(out, err);
    if (!strncmp(location, "sqlite:", 7))
        return store_sqlite_open(location + 7, out, err);
    if (strstr(location, "://") || (strchr(location, ':') && !strchr(location, '/'))) {
        /* "postgres://…" and friends are not served by this build. */
        return keel_error_set(err, KEEL_EINVAL, "db",
                              "\"%.80s\": unknown store (use a file path, sqlite:PATH or mem:)",
                              location);
    }
    return store_sqlite_open(location, out, err);
}

void store_close(struct store *store)
{
    struct store_lock *lock;

    if (!store)
        return;
    lock = store->lock;
    store->ops->close(store);
    store_lock_free(lock);
}

static int check_text(const char *text, const char *field, struct keel_error *err)
{
    if (text && strlen(text) > STORE_TEXT_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, field, "is longer than %u bytes", STORE_TEXT_MAX);
    return KEEL_OK;
}

int store_put_paper(struct store *store, const struct store_paper *paper,
                    enum store_outcome *outcome, struct keel_error *err)
{
    int rc;

    if (!paper->title || !paper->title[strspn(paper->title, " \t\r\n")])
        return keel_error_set(err, KEEL_EINVAL, "title", "is required (and not blank)");
    if (paper->year < 0 || paper->year > 9999)
        return keel_error_set(err, KEEL_EINVAL, "year", "must be 0 (unknown) or 1..9999");
    if (paper->authors && !json_is_array(paper->authors))
        return keel_error_set(err, KEEL_EINVAL, "authors", "must be a list");
    if (paper->authors) {
        char *text = keel_json_dumps(paper->authors, JSON_COMPACT);
        size_t len = text ? strlen(text) : 0;
        keel_free(text);
        if (!text)
            return keel_error_set(err, KEEL_ENOMEM, "authors", "out of memory");
        if (len > STORE_TEXT_MAX)
            return keel_error_set(err, KEEL_ETOOBIG, "authors", "is longer than %u bytes",
                                  STORE_TEXT_MAX);
    }
    if ((rc = check_text(paper->id, "id", err)) || (rc = check_text(paper->source, "source", err)) ||
        (rc = check_text(paper->title, "title", err)) ||
        (rc = check_text(paper->abstract, "abstract", err)) ||
        (rc = check_text(paper->venue, "venue", err)) ||
        (rc = check_text(paper->doi, "doi", err)) || (rc = check_text(paper->url, "url", err)) ||
        (rc = check_text(paper->pdf_url, "pdf_url", err)))
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->put_paper(store, paper, outcome, err));
}

int store_search_papers(struct store *store, const struct paper_query *query,
                        struct paper_hits *out, struct keel_error *err)
{
    out->items = NULL;
    out->n = 0;
    if (query->limit < 1 || query->limit > STORE_LIMIT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "limit", "must be 1..%d", STORE_LIMIT_MAX);
    if (query->want < 0)
        return keel_error_set(err, KEEL_EINVAL, "want", "must not be negative");
    if (query->year_from && query->year_to && query->year_from > query->year_to)
        return keel_error_set(err, KEEL_EINVAL, "year_from", "is after year_to");
    if (!query->text)
        return keel_error_set(err, KEEL_EINVAL, "query", "is required");
    if (strlen(query->text) > STORE_TEXT_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, "query", "is longer than %u bytes", STORE_TEXT_MAX);
    store_enter(store);
    return store_leave(store, store->ops->search_papers(store, query, out, err));
}

void paper_hits_offer(const struct paper_query *query, struct paper_hits *hits)
{
    struct store_paper *paper = &hits->items[hits->n].paper;

    if (!query->accept || query->accept(query->accept_ctx, paper))
        hits->n++;
    else
        store_paper_release(paper);
}

int paper_query_full(const struct paper_query *query, size_t n)
{
    return query->want > 0 && n >= (size_t)query->want;
}

int store_put_document(struct store *store, const struct store_document *doc,
                       const struct store_chunk *chunks, size_t n_chunks,
                       enum store_outcome *outcome, struct keel_error *err)
{
    int rc;

    if (!doc->id || !*doc->id)
        return keel_error_set(err, KEEL_EINVAL, "id", "is required");
    if ((rc = check_text(doc->id, "id", err)) || (rc = check_text(doc->title, "title", err)) ||
        (rc = check_text(doc->source, "source", err)) || (rc = check_text(doc->lang, "lang", err)))
        return rc;
    if (n_chunks > STORE_CHUNKS_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, "chunks", "more than %d chunks", STORE_CHUNKS_MAX);
    for (size_t i = 0; i < n_chunks; i++) {
        if (!chunks[i].text)
            return keel_error_set(err, KEEL_EINVAL, "chunks[].text", "is required");
        if ((rc = check_text(chunks[i].text, "chunks[].text", err)) ||
            (rc = check_text(chunks[i].section, "chunks[].section", err)))
            return rc;
    }
    store_enter(store);
    return store_leave(store, store->ops->put_document(store, doc, chunks, n_chunks, outcome, err));
}

static int search_chunks(struct store *store, const char *text, enum store_match match,
                         int limit, struct chunk_hits *out, struct keel_error *err)
{
    out->items = NULL;
    out->n = 0;
    if (limit < 1 || limit > STORE_LIMIT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "limit", "must be 1..%d", STORE_LIMIT_MAX);
    if (!text)
        return keel_error_set(err, KEEL_EINVAL, "query", "is required");
    if (strlen(text) > STORE_TEXT_MAX)
        return keel_error_set(err, KEEL_ETOOBIG, "query", "is longer than %u bytes", STORE_TEXT_MAX);
    store_enter(store);
    return store_leave(store, store->ops->search_chunks(store, text, match, limit, out, err));
}

int store_search_chunks(struct store *store, const char *text, int limit,
                        struct chunk_hits *out, struct keel_error *err)
{
    return search_chunks(store, text, STORE_MATCH_ANY, limit, out, err);
}

int store_search_chunks_all(struct store *store, const char *text, int limit,
                            struct chunk_hits *out, struct keel_error *err)
{
    return search_chunks(store, text, STORE_MATCH_ALL, limit, out, err);
}

int store_counts(struct store *store, struct store_counts *out, struct keel_error *err)
{
    store_enter(store);
    return store_leave(store, store->ops->counts(store, out, err));
}

static int check_id(const char *id, struct keel_error *err)
{
    if (!id || !*id || strlen(id) > 128)
        return keel_error_set(err, KEEL_EINVAL, "conversation_id", "must be 1 to 128 bytes");
    return KEEL_OK;
}

int store_load_conversation(struct store *store, const char *id, struct store_conversation *out,
                            struct keel_error *err)
{
    int rc = check_id(id, err);

    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->load_conversation(store, id, out, err));
}

static int check_memory_change(const struct store_memory_change *c, struct keel_error *err);

int store_batch_begin(struct store *store)
{
    if (!store->ops->batch_begin)
        return 0;
    store_enter(store);
    return store_leave(store, store->ops->batch_begin(store));
}

int store_batch_flush(struct store *store, struct keel_error *err)
{
    if (!store->ops->batch_flush)
        return KEEL_OK;
    store_enter(store);
    return store_leave(store, store->ops->batch_flush(store, err));
}

int store_batch_end(struct store *store, struct keel_error *err)
{
    if (!store->ops->batch_end)
        return KEEL_OK;
    store_enter(store);
    return store_leave(store, store->ops->batch_end(store, err));
}

void store_batch_counts(struct store *store, long *saved, long *committed)
{
    if (saved)
        *saved = 0;
    if (committed)
        *committed = 0;
    if (!store->ops->batch_counts)
        return;
    store_enter(store);
    store->ops->batch_counts(store, saved, committed);
    store_leave(store, KEEL_OK);
}

int store_save_turn(struct store *store, const struct store_turn_record *rec,
                    struct keel_error *err)
{
    const char *required[] = {rec->pack, rec->correlation_id, rec->user_text,
                              rec->assistant_text, rec->state_json, rec->deltas_json,
                              rec->events_json, rec->sources_json, rec->reasons_json,
                              rec->decision_json};
    const char *names[] = {"pack", "correlation_id", "user_text", "assistant_text", "state",
                           "deltas", "events", "sources", "reasons", "decision"};
    int rc = check_id(rec->conversation_id, err);

    if (rc)
        return rc;
    if (rec->seq < 1)
        return keel_error_set(err, KEEL_EINVAL, "seq", "must be 1 or more");
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if (!required[i])
            return keel_error_set(err, KEEL_EINVAL, names[i], "is required");
    if (rec->n_metrics && !rec->metrics)
        return keel_error_set(err, KEEL_EINVAL, "metrics", "is required for %zu counters",
                              rec->n_metrics);
    for (size_t i = 0; i < rec->n_metrics; i++)
        if (!rec->metrics[i].name)
            return keel_error_set(err, KEEL_EINVAL, "metrics", "counter %zu has no name", i);
    if (rec->memory && (rc = check_memory_change(rec->memory, err)))
        return rc;
    if (rec->personal && (rc = store_personal_check(rec->personal, err)))
        return rc;
    if (rec->artifact && (rc = store_artifact_check(rec->artifact, err)))
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->save_turn(store, rec, err));
}

int store_metrics(struct store *store, json_t **out, struct keel_error *err)
{
    store_enter(store);
    return store_leave(store, store->ops->metrics(store, out, err));
}

int store_list_turns(struct store *store, const char *id, json_t **out, struct keel_error *err)
{
    int rc = check_id(id, err);

    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->list_turns(store, id, out, err));
}

int store_get_turn(struct store *store, const char *correlation_id, json_t **out,
                   struct keel_error *err)
{
    if (!correlation_id || !*correlation_id || strlen(correlation_id) > 128)
        return keel_error_set(err, KEEL_EINVAL, "correlation_id", "must be 1 to 128 bytes");
    store_enter(store);
    return store_leave(store, store->ops->get_turn(store, correlation_id, out, err));
}

static int check_field(const char *value, const char *field, size_t max, struct keel_error *err)
{
    if (!value || !*value || strlen(value) > max)
        return keel_error_set(err, KEEL_EINVAL, field, "must be 1 to %zu bytes", max);
    return KEEL_OK;
}

int store_key_put(struct store *store, const struct store_key *key, const char *hash,
                  struct keel_error *err)
{
    int rc;

    if ((rc = check_field(key->id, "id", 64, err)) || (rc = check_field(key->user, "user", 128, err)) ||
        (rc = check_field(key->role, "role", 16, err)) || (rc = check_field(hash, "hash", 128, err)))
        return rc;
    if (strcmp(key->role, "owner") && strcmp(key->role, "editor") && strcmp(key->role, "viewer"))
        return keel_error_set(err, KEEL_EINVAL, "role", "must be owner, editor or viewer");
    store_enter(store);
    return store_leave(store, store->ops->key_put(store, key, hash, err));
}

int store_key_find(struct store *store, const char *hash, struct store_key *out,
                   struct keel_error *err)
{
    int rc = check_field(hash, "hash", 128, err);

    memset(out, 0, sizeof(*out));
    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->key_find(store, hash, out, err));
}

int store_key_list(struct store *store, json_t **out, struct keel_error *err)
{
    store_enter(store);
    return store_leave(store, store->ops->key_list(store, out, err));
}

int store_key_revoke(struct store *store, const char *id, int64_t now_ms, struct keel_error *err)
{
    int rc = check_field(id, "id", 64, err);

    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->key_revoke(store, id, now_ms, err));
}

void store_key_release(struct store_key *key)
{
    keel_free(key->id);
    keel_free(key->user);
    keel_free(key->role);
    memset(key, 0, sizeof(*key));
}

int store_share_put(struct store *store, const char *hash, const char *conversation_id,
                    const char *user, int64_t now_ms, struct keel_error *err)
{
    int rc;

    if ((rc = check_field(hash, "hash", 128, err)) || (rc = check_id(conversation_id, err)))
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->share_put(store, hash, conversation_id, user, now_ms, err));
}

int store_share_find(struct store *store, const char *hash, char **conversation_id,
                     struct keel_error *err)
{
    int rc = check_field(hash, "hash", 128, err);

    *conversation_id = NULL;
    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->share_find(store, hash, conversation_id, err));
}

int store_list_conversations(struct store *store, const char *owner, int limit, int offset,
                             json_t **out, struct keel_error *err)
{
    if (limit < 1 || limit > STORE_LIMIT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "limit", "must be between 1 and %d",
                              STORE_LIMIT_MAX);
    if (offset < 0)
        return keel_error_set(err, KEEL_EINVAL, "offset", "must not be negative");
    store_enter(store);
    return store_leave(store, store->ops->list_conversations(store, owner, limit, offset, out, err));
}

int store_delete_conversation(struct store *store, const char *id, struct keel_error *err)
{
    int rc = check_id(id, err);

    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->delete_conversation(store, id, err));
}

int store_scenario_set(struct store *store, const char *id, int64_t version,
                       const char *scenario_json, struct keel_error *err)
{
    int rc = check_id(id, err);

    if (!rc && scenario_json && strlen(scenario_json) > STORE_TEXT_MAX)
        rc = keel_error_set(err, KEEL_ETOOBIG, "active_scenario", "is larger than %u bytes",
                            STORE_TEXT_MAX);
    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->scenario_set(store, id, version, scenario_json, err));
}

int store_metrics_reset(struct store *store, struct keel_error *err)
{
    store_enter(store);
    return store_leave(store, store->ops->metrics_reset(store, err));
}

int store_metrics_history(struct store *store, int aggregate_minutes, int limit, json_t **out,
                          struct keel_error *err)
{
    if (aggregate_minutes < 1 || aggregate_minutes > 10080)
        return keel_error_set(err, KEEL_EINVAL, "aggregate_minutes", "must be 1 to 10080");
    if (limit < 1 || limit > STORE_LIMIT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "limit", "must be between 1 and %d",
                              STORE_LIMIT_MAX);
    store_enter(store);
    return store_leave(store, store->ops->metrics_history(store, aggregate_minutes, limit, out, err));
}

static int check_memory_change(const struct store_memory_change *c, struct keel_error *err)
{
    static const char *const decisions[] = {"ADD", "NOT", "REPLACE", "MERGE"};
    static const char *const outcomes[] = {"success", "failure", "partial"};
    const struct store_memory_run *r = c->run;
    int known = 0, outcome = 0;

    for (size_t i = 0; i < 4; i++)
        known |= c->decision && !strcmp(c->decision, decisions[i]);
    if (!known)
        return keel_error_set(err, KEEL_EINVAL, "decision", "must be ADD, NOT, REPLACE or MERGE");
    if (!r || !r->id || !*r->id || strlen(r->id) > 63)
        return keel_error_set(err, KEEL_EINVAL, "id", "must be 1 to 63 bytes");
    if (!r->task || !*r->task || !r->summary || !r->refs_json || !r->artifacts_json)
        return keel_error_set(err, KEEL_EINVAL, "task", "a run needs a task, a summary, "
                                                        "references and artifacts");
    for (size_t i = 0; i < 3; i++)
        outcome |= r->outcome && !strcmp(r->outcome, outcomes[i]);
    if (!outcome)
        return keel_error_set(err, KEEL_EINVAL, "outcome", "must be success, failure or partial");
    if (r->dim < 1 || r->dim > 4096 || !r->vector || !r->embedder)
        return keel_error_set(err, KEEL_EINVAL, "embedding", "must have 1 to 4096 dimensions");
    if ((!strcmp(c->decision, "REPLACE") || !strcmp(c->decision, "MERGE")) &&
        (!c->target_id || !*c->target_id))
        return keel_error_set(err, KEEL_EINVAL, "target_run_id", "is required for %s",
                              c->decision);
    if (c->target_id && !strcmp(c->target_id, r->id))
        return keel_error_set(err, KEEL_EINVAL, "target_run_id", "is the run itself");
    if (!strcmp(c->decision, "MERGE") && !c->merged_refs_json)
        return keel_error_set(err, KEEL_EINVAL, "references", "a MERGE needs the union");
    if (!c->reason || !c->judge)
        return keel_error_set(err, KEEL_EINVAL, "reason", "a decision needs a reason and a judge");
    return KEEL_OK;
}

int store_memory_apply(struct store *store, const struct store_memory_change *change,
                       struct keel_error *err)
{
    int rc = check_memory_change(change, err);

    if (rc)
        return rc;
    store_enter(store);
    return store_leave(store, store->ops->memory_apply(store, change, err));
}

int store_memory_sync(struct store *store, int64_t *seq, store_memory_fn fn, void *ctx,
                      struct keel_error *err)
{
    store_enter(store);
    return store_leave(store, store->ops->memory_sync(store, seq, fn, ctx, err));
}

int store_memory_get(struct store *store, const char *const *ids, size_t n, json_t **out,
                     struct keel_error *err)
{
    store_enter(store);
    return store_leave(store, store->ops->memory_get(store, ids, n, out, err));
}

int store_memory_decisions(struct store *store, const char *owner, int limit, int offset,
                           json_t **out, struct keel_error *err)
{
    if (limit < 1 || limit > STORE_LIMIT_MAX)
        return keel_error_set(err, KEEL_EINVAL, "limit", "must be between 1 and %d",
                              STORE_LIMIT_MAX);
    if (offset < 0)
        return keel_error_set(err, KEEL_EINVAL, "offset", "must not be negative");
    store_enter(store);
    return store_leave(store, store->ops->memory_decisions(store, owner, limit, offset, out, err));
}

int store_personal_check(const struct store_personal_change *c, struct keel_error *err)
{
    size_t n;

    if (!c->user || !*c->user || strlen(c->user) > STORE_PERSONAL_USER_MAX)
        return keel_error_set(err, KEEL_EINVAL, "personal.user", "must be 1 to %d bytes",
                              STORE_PERSONAL_USER_MAX);
    if (!c->key || !*c->key || strlen(c->key) > STORE_PERSONAL_KEY_MAX)
        return keel_error_set(err, KEEL_EINVAL, "personal.key", "must be 1 to %d bytes",
                              STORE_PERSONAL_KEY_MAX);
    if (c->value && (!(n = strlen(c->value)) || n > STORE_PERSONAL_VALUE_MAX))
        return keel_error_set(err, KEEL_EINVAL, "personal.value", "must be 1 to %d bytes",
                              STORE_PERSONAL_VALUE_MAX);
    if (c->value && (!c->kind || (strcmp(c->kind, "fact") && strcmp(c->kind, "note"))))
        return keel_error_set(err, KEEL_EINVAL, "personal.kind", "must be fact or note");
    return KEEL_OK;
}

int store_personal_list(struct store *store, const char *user, json_t **out,
                        struct keel_error *err)
{
    if (!user || !*user || strlen(user) > STORE_PERSONAL_USER_MAX)
        return keel_error_set(err, KEEL_EINVAL, "user", "must be 1 to %d bytes",
                              STORE_PERSONAL_USER_MAX);
    store_enter(store);
    return store_leave(store, store->ops->personal_list(store, user, out, err));
}

int store_personal_stats(struct store *store, json_t **out, struct keel_error *err)
{
    store_enter(store);
    return store_leave(store, store->ops->personal_stats(store, out, err));
}

void store_conversation_release(struct store_conversation *conv)
{
    keel_free(conv->id);
    keel_free(conv->pack);
    keel_free(conv->owner);
    keel_free(conv->state_json);
    keel_free(conv->scenario_json);
    memset(conv, 0, sizeof(*conv));
}

/* Lower-cased letters and digits of `text`, single spaces between words. */
static size_t normalise(const char *text, char *out, size_t n)
{
    size_t len = 0;
    int space = 0;

    for (const unsigned char *p = (const unsigned char *)text; *p && len + 2 < n; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80) {
            if (space && len)
                out[len++] = ' ';
            out[len++] = (char)c;
            space = 0;
        } else if (c >= 'A' && c <= 'Z') {
            if (space && len)
                out[len++] = ' ';
            out[len++] = (char)(c + 32);
            space = 0;
        } else {
            space = 1;
        }
    }
    out[len] = '\0';
    return len;
}

void store_paper_id(const struct store_paper *paper, char *out, size_t n)
{
    char title[1024];
    uint64_t h = 1469598103934665603ull;
    size_t len;

    if (paper->id && *paper->id) {
        snprintf(out, n, "%s", paper->id);
        return;
    }
    if (paper->doi && *paper->doi) {
        char doi[240];
        size_t i;
        for (i = 0; paper->doi[i] && i + 1 < sizeof(doi); i++)
            doi[i] = (char)(paper->doi[i] >= 'A' && paper->doi[i] <= 'Z' ? paper->doi[i] + 32
                                                                         : paper->doi[i]);
        doi[utf8_valid_prefix(doi, i)] = '\0';  /* never cut inside a character */
        snprintf(out, n, "doi:%s", doi);
        return;
    }
    /* No DOI: the normalised title and year, and the URL when there is one
     * (two "Briefly Noted" columns of 1990 are different papers). */
    len = normalise(paper->title ? paper->title : "", title, sizeof(title));
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)title[i]) * 1099511628211ull;
    h = (h ^ (uint64_t)paper->year) * 1099511628211ull;
    for (const char *u = paper->url ? paper->url : ""; *u; u++)
        h = (h ^ (unsigned char)*u) * 1099511628211ull;
    snprintf(out, n, "title:%016llx", (unsigned long long)h);
}

size_t store_query_words(const char *text, char *buf, size_t buf_n,
                         const char **words, size_t max_words)
{
    size_t n_words = 0, used = 0;
    const unsigned char *p = (const unsigned char *)text;

    if (max_words > STORE_QUERY_WORDS)
        max_words = STORE_QUERY_WORDS;
    while (*p && n_words < max_words) {
        size_t start = used, len = 0;
        while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                       (*p >= '0' && *p <= '9') || *p >= 0x80))
            p++;
        while (*p && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p >= 0x80)) {
            if (len < 64 && used + 1 < buf_n) {
                buf[used++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
                len++;
            }
            p++;
        }
        if (!len || used >= buf_n)
            break;
        /* A word cut at 64 bytes must not end inside a character. */
        used = start + utf8_valid_prefix(buf + start, used - start);
        if (used == start)
            continue;
        buf[used++] = '\0';
        words[n_words++] = buf + start;
    }
    return n_words;
}

void store_paper_release(struct store_paper *paper)
{
    keel_free(paper->id);
    keel_free(paper->title);
    keel_free(paper->abstract);
    keel_free(paper->venue);
    keel_free(paper->doi);
    keel_free(paper->url);
    keel_free(paper->pdf_url);
    keel_free(paper->source);
    json_decref(paper->authors);
    memset(paper, 0, sizeof(*paper));
}

static int dup(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return KEEL_OK;
    *dst = keel_strdup(src);
    return *dst ? KEEL_OK : KEEL_ENOMEM;
}

int store_paper_copy(struct store_paper *dst, const struct store_paper *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->year = src->year;
    dst->is_open_access = src->is_open_access;
    dst->authors = src->authors ? json_deep_copy(src->authors) : NULL;
    if ((src->authors && !dst->authors) || dup(&dst->id, src->id) || dup(&dst->title, src->title) ||
        dup(&dst->abstract, src->abstract) || dup(&dst->venue, src->venue) ||
        dup(&dst->doi, src->doi) || dup(&dst->url, src->url) ||
        dup(&dst->pdf_url, src->pdf_url) || dup(&dst->source, src->source)) {
        store_paper_release(dst);
        return KEEL_ENOMEM;
    }
    return KEEL_OK;
}

void paper_hits_release(struct paper_hits *hits)
{
    for (size_t i = 0; i < hits->n; i++)
        store_paper_release(&hits->items[i].paper);
    keel_free(hits->items);
    hits->items = NULL;
    hits->n = 0;
}

void chunk_hits_release(struct chunk_hits *hits)
{
    for (size_t i = 0; i < hits->n; i++) {
        keel_free(hits->items[i].document_id);
        keel_free(hits->items[i].title);
        keel_free(hits->items[i].source);
        keel_free(hits->items[i].section);
        keel_free(hits->items[i].text);
    }
    keel_free(hits->items);
    hits->items = NULL;
    hits->n = 0;
}
