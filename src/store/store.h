/*
 * store.h — the persistence port: one interface, several backends.
 *
 * A store holds what keel knows between processes. This first slice holds
 * the local paper library and the document corpus (chunks), with full-text
 * search; conversations, turns and decision logs join it with the turn
 * pipeline. Backends are siblings behind `struct store_ops`:
 *
 *   store_sqlite.c   SQLite file (WAL, numbered migrations, prepared
 *                    statements only, FTS5 with BM25) — the default
 *   store_mem.c      in memory, for tests; chosen only explicitly ("mem:")
 *
 * store_open() picks the backend from the location and never falls back
 * from one to another. Matching: SQLite's FTS5 folds case and accents of
 * all Unicode text ("café" finds "cafe"); the in-memory backend folds
 * ASCII only, so tests that compare the two use ASCII text. `outcome`
 * arguments may be NULL. Every function returns a keel_result and fills
 * `err`; a failed write changes nothing (each put is one transaction).
 * Strings handed in are copied; strings in results are owned by the
 * result and freed with its release function.
 */
#ifndef KEEL_STORE_STORE_H
#define KEEL_STORE_STORE_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define STORE_TEXT_MAX (1u << 20)     /* any one text field */
#define STORE_QUERY_WORDS 32          /* words of a search used, the rest ignored */
#define STORE_LIMIT_MAX 200           /* most hits one search returns */
#define STORE_CHUNKS_MAX 100000       /* chunks of one document */

/* One paper of the local library. `id` is derived by store_paper_id()
 * when empty: "doi:<lower-case doi>", else "title:<hash of the normalised
 * title, the year and the URL>". Unknown year is 0. `authors` is a JSON array of
 * strings (may be NULL). Optional strings may be NULL. */
struct store_paper {
    char *id;
    char *title;          /* required */
    char *abstract;
    int year;
    char *venue;
    json_t *authors;
    char *doi;
    char *url;
    char *pdf_url;
    int is_open_access;   /* is_oa, or an open-access/PDF url */
    char *source;         /* where it came from: a file name, a provider */
};

/* A document of the corpus and its chunks. `id` is the caller's stable
 * key (e.g. the path below the ingested folder). */
struct store_document {
    const char *id;
    const char *title;
    const char *source;    /* file path or URL */
    const char *lang;      /* may be NULL */
};

struct store_chunk {
    const char *section;   /* heading path, may be NULL */
    const char *text;
};

/* What a put did: KEEL_OK with one of these in *outcome. */
enum store_outcome { STORE_ADDED, STORE_UPDATED, STORE_UNCHANGED };

/* How a search matches its words: rows holding any of them (OR), or
 * rows holding all of them, each as a word or the start of one ("limit"
 * finds "limits"): an AND of prefix queries, fewer rows to rank and the
 * better ones. */
enum store_match { STORE_MATCH_ANY, STORE_MATCH_ALL };

struct paper_query {
    const char *text;      /* free text; words are matched by `match` */
    int year_from;         /* 0: none. With a year filter, unknown years are dropped */
    int year_to;           /* 0: none */
    int open_access_only;
    int limit;             /* 1..STORE_LIMIT_MAX */
    enum store_match match;   /* STORE_MATCH_ANY (zero) or STORE_MATCH_ALL */
    /* Optional, for a caller that keeps only some hits: the `limit` best
     * rows are ranked as without it, then offered in rank order to
     * accept(accept_ctx, paper); a row it refuses (0) is left out, and
     * no row is read after the `want`th accepted one (want 0: no such
     * stop). A backend that reads rows one by one so reads fewer. */
    int (*accept)(void *ctx, const struct store_paper *paper);
    void *accept_ctx;
    int want;
};

/* Whether a search of `query` that has accepted `n` rows reads no more;
 * for the backends. */
int paper_query_full(const struct paper_query *query, size_t n);

struct paper_hit {
    struct store_paper paper;
    double score;          /* higher is better; comparable within one result */
};

struct paper_hits {
    struct paper_hit *items;
    size_t n;
};

/* For the backends: hits->items[hits->n] has just been filled (paper and
 * score); it is kept (hits->n grows) when `query` accepts it — always
 * without an accept callback — else released. */
void paper_hits_offer(const struct paper_query *query, struct paper_hits *hits);

struct chunk_hit {
    char *document_id;
    char *title;
    char *source;
    char *section;
    char *text;
    int ordinal;           /* position of the chunk in its document, from 0 */
    double score;          /* higher is better; comparable within one result */
};

struct chunk_hits {
    struct chunk_hit *items;
    size_t n;
};

struct store_counts {
    long papers;
    long documents;
    long chunks;
};

/* A conversation as stored: its pack, the thread state after its last
 * turn (JSON text) and how many turns it has. */
struct store_conversation {
    char *id;
    char *pack;
    char *owner;          /* the API user who created it; NULL when none (keel chat) */
    char *state_json;
    int turns;
    int64_t created_ms;
    int64_t updated_ms;
    char *scenario_json;        /* the active scenario (seed 004), NULL: none */
    int64_t scenario_version;   /* counts its changes; a write names the one it read */
};

/* An API key: its id ("key_…"), the user it acts for and its role
 * (owner, editor, viewer). Only a hash of the token is ever stored. */
struct store_key {
    char *id;
    char *user;
    char *role;
    int64_t created_ms;
    int64_t revoked_ms;   /* 0: active */
};

/* A quality counter to add to (seed 000 Phase G). */
struct store_metric {
    const char *name;
    long delta;
};

/* One run of long-term memory (seed 003) as the store keeps it. JSON
 * fields are text; conversation_id may be NULL. */
struct store_memory_run {
    const char *id;
    const char *task;
    const char *summary;
    const char *outcome;          /* success | failure | partial */
    const char *refs_json;        /* array of strings */
    const char *artifacts_json;   /* array */
    const char *conversation_id;
    int64_t created_ms;
    const char *embedder;         /* what made the vector ("hashed-v1") */
    int dim;
    const float *vector;          /* dim floats */
    const char *owner;            /* the API user it belongs to; NULL: none (the local user:
                                   * the CLI, --auth none) */
};

/* One admission decision and what it changes, in one transaction:
 * ADD, REPLACE and MERGE insert `run` (active); REPLACE marks the target
 * superseded by it; MERGE makes `new_canonical` ? the run : the target
 * the canonical one (the other not), gives the canonical one
 * `merged_refs_json` and the uses of both; NOT inserts nothing. The
 * decision is always stored. */
struct store_memory_change {
    const char *decision;         /* ADD | NOT | REPLACE | MERGE */
    const struct store_memory_run *run;
    const char *target_id;        /* may be NULL */
    const char *reason;
    double similarity;            /* < 0: none */
    const char *judge;            /* rules | model */
    int64_t ts_ms;
    const char *merged_refs_json; /* MERGE only */
    int new_canonical;            /* MERGE only */
};

/* Personal facts (migration 10): what a user asked the assistant to
 * remember, per user and key ("favourite drink" -> "tea"). A change sets
 * (value) or removes (value NULL) one fact; it is stored with the turn
 * that made it (store_turn_record.personal). `kind` is fact | note. */
#define STORE_PERSONAL_KEY_MAX 64      /* bytes of a key */
#define STORE_PERSONAL_VALUE_MAX 256   /* bytes of a value */
#define STORE_PERSONAL_USER_MAX 128    /* bytes of a user name */
#define STORE_PERSONAL_FACTS_MAX 200   /* facts of one user */

struct store_personal_change {
    const char *user;
    const char *key;
    const char *value;            /* NULL: remove the fact */
    const char *kind;             /* fact | note (with a value) */
    const char *conversation_id;  /* where it was said; may be NULL */
    int64_t ts_ms;
};

/* One fact distilled from an artifact (seed 001), for the verified or
 * the researched fact store. JSON fields are text. */
struct store_fact {
    const char *id;
    const char *store;            /* verified | researched */
    const char *topic;
    const char *fact;
    const char *source;
    double confidence;            /* 0..1 */
    const char *domain;           /* "science", a pack's name */
    const char *tags_json;        /* array of strings */
    const char *evidence_snippet;
};

/* A turn's artifact and its facts, written in the turn's transaction
 * (the conversation, turn and time are the record's). */
struct store_artifact {
    const char *id;               /* "art_…" */
    const char *type;             /* research_brief | doc_extract | plan */
    const char *title;
    const char *body_json;        /* the whole artifact */
    const struct store_fact *facts;
    size_t n_facts;
};

/* Which facts store_facts_list returns: every filter may be NULL. */
struct store_fact_query {
    const char *owner;            /* facts of this user's conversations; NULL: all */
    const char *store;            /* verified | researched */
    const char *conversation_id;
    const char *artifact_id;
    const char *text;             /* a substring of topic or fact (ASCII case folded) */
    int limit;                    /* 1..STORE_LIMIT_MAX */
    int offset;
};

/* Everything one turn writes, in one transaction. `seq` is the turn's
 * number in its conversation, from 1; it must be the stored turn count
 * plus one (seq 1 creates the conversation), else the save is a conflict
 * (KEEL_EFAIL, field "conversation_id") and nothing is written. JSON
 * fields are text; `tool` and `arguments_json` may be NULL. A memory
 * decision (`memory`) is stored in the same transaction, as
 * store_memory_apply would. */
struct store_turn_record {
    const char *conversation_id;
    const char *pack;
    const char *owner;           /* stored with turn 1 only; may be NULL */
    int seq;
    const char *correlation_id;
    int64_t ts_ms;
    const char *user_text;
    const char *assistant_text;
    int clarification;
    const char *state_json;      /* the full state after the turn's deltas */
    const char *deltas_json;
    const char *events_json;
    int events_compacted;        /* 1: events_json is already without each event's
                                  * correlation_id (store_events_compact's form, for an id
                                  * store_events_id_plain accepts) */
    const char *sources_json;
    /* the decision log */
    const char *intent;
    const char *route;
    const char *tool;
    const char *arguments_json;
    const char *stage_from;
    const char *stage_to;
    const char *reasons_json;
    const char *decision_json;
    const struct store_metric *metrics;
    size_t n_metrics;
    const struct store_memory_change *memory;   /* the remember stage's decision, or NULL */
    const struct store_personal_change *personal;   /* a personal fact set or removed, or NULL */
    const struct store_artifact *artifact;      /* the artifact stage's artifact, or NULL */
    /* The active scenario (seed 004): scenario_json is the scenario after
     * the turn (NULL: none), kept on the turn; scenario_changed also
     * writes it to the conversation, provided its version is still
     * scenario_version (the one the turn read), else the save is a
     * conflict; scenario_delta_json is the turn's changes (NULL: none). */
    const char *scenario_json;
    const char *scenario_delta_json;
    int scenario_changed;
    int64_t scenario_version;
};

/* Called by memory_sync for each change to the active runs, in order:
 * a run that became active (its owner, NULL for none, and its vector)
 * or one that stopped being (superseded or erased: vector NULL). */
typedef int (*store_memory_fn)(void *ctx, const char *id, const char *owner,
                               const char *embedder, int dim, const float *vector);

struct store;

struct store_ops {
    const char *name;
    void (*close)(struct store *store);
    int (*put_paper)(struct store *store, const struct store_paper *paper,
                     enum store_outcome *outcome, struct keel_error *err);
    int (*search_papers)(struct store *store, const struct paper_query *query,
                         struct paper_hits *out, struct keel_error *err);
    int (*put_document)(struct store *store, const struct store_document *doc,
                        const struct store_chunk *chunks, size_t n_chunks,
                        enum store_outcome *outcome, struct keel_error *err);
    int (*search_chunks)(struct store *store, const char *text, enum store_match match,
                         int limit, struct chunk_hits *out, struct keel_error *err);
    int (*counts)(struct store *store, struct store_counts *out, struct keel_error *err);
    int (*load_conversation)(struct store *store, const char *id,
                             struct store_conversation *out, struct keel_error *err);
    int (*save_turn)(struct store *store, const struct store_turn_record *rec,
                     struct keel_error *err);
    int (*metrics)(struct store *store, json_t **out, struct keel_error *err);
    int (*list_turns)(struct store *store, const char *id, json_t **out, struct keel_error *err);
    int (*get_turn)(struct store *store, const char *correlation_id, json_t **out,
                    struct keel_error *err);
    int (*key_put)(struct store *store, const struct store_key *key, const char *hash,
                   struct keel_error *err);
    int (*key_find)(struct store *store, const char *hash, struct store_key *out,
                    struct keel_error *err);
    int (*key_list)(struct store *store, json_t **out, struct keel_error *err);
    int (*key_revoke)(struct store *store, const char *id, int64_t now_ms,
                      struct keel_error *err);
    int (*share_put)(struct store *store, const char *hash, const char *conversation_id,
                     const char *user, int64_t now_ms, struct keel_error *err);
    int (*share_find)(struct store *store, const char *hash, char **conversation_id,
                      struct keel_error *err);
    int (*list_conversations)(struct store *store, const char *owner, int limit, int offset,
                              json_t **out, struct keel_error *err);
    int (*delete_conversation)(struct store *store, const char *id, struct keel_error *err);
    int (*metrics_reset)(struct store *store, struct keel_error *err);
    int (*metrics_history)(struct store *store, int aggregate_minutes, int limit, json_t **out,
                           struct keel_error *err);
    int (*memory_apply)(struct store *store, const struct store_memory_change *change,
                        struct keel_error *err);
    int (*memory_sync)(struct store *store, int64_t *seq, store_memory_fn fn, void *ctx,
                       struct keel_error *err);
    int (*memory_get)(struct store *store, const char *const *ids, size_t n, json_t **out,
                      struct keel_error *err);
    int (*memory_decisions)(struct store *store, const char *owner, int limit, int offset, json_t **out,
                            struct keel_error *err);
    int (*personal_list)(struct store *store, const char *user, json_t **out,
                         struct keel_error *err);
    int (*personal_stats)(struct store *store, json_t **out, struct keel_error *err);
    int (*artifacts_list)(struct store *store, const char *conversation_id, const char *type,
                          int last, json_t **out, struct keel_error *err);
    int (*artifact_get)(struct store *store, const char *id, json_t **out,
                        struct keel_error *err);
    int (*facts_list)(struct store *store, const struct store_fact_query *query, json_t **out,
                      struct keel_error *err);
    int (*scenario_set)(struct store *store, const char *id, int64_t version,
                        const char *scenario_json, struct keel_error *err);
    /* optional (NULL: reads need no snapshot) */
    int (*read_begin)(struct store *store, struct keel_error *err);
    void (*read_end)(struct store *store);
    /* optional (NULL: every turn commits on its own) */
    int (*batch_begin)(struct store *store);
    int (*batch_flush)(struct store *store, struct keel_error *err);
    int (*batch_end)(struct store *store, struct keel_error *err);
    void (*batch_counts)(struct store *store, long *saved, long *committed);
};

struct store_lock;

/* Every backend's struct starts with this. */
struct store {
    const struct store_ops *ops;
    struct store_lock *lock;   /* store_share_threads's; NULL: one thread at a time */
};

/* Opens a store. `location` is "mem:" for the in-memory backend, or a
 * SQLite file path (optionally prefixed "sqlite:"), created and migrated
 * when needed. Returns KEEL_EINVAL for an unknown scheme, KEEL_EIO when the
 * file cannot be opened or migrated; nothing is opened on failure. */
int store_open(const char *location, struct store **out, struct keel_error *err);

/* Closes a store; NULL is a no-op. */
void store_close(struct store *store);

/* Lets several threads use `store` at once (a server's workers): from
 * now on every store_* call on it holds the store's lock for its length,
 * and store_read_begin/end do nothing unless the calling thread holds
 * the lock itself (store_enter) across the snapshot. Without this, a
 * store is for one thread at a time. Idempotent; KEEL_ENOMEM.
 *
 * The lock is recursive (a backend's callback may call the store again)
 * and fair: threads waiting for it get it in the order they came. */
int store_share_threads(struct store *store, struct keel_error *err);

/* Take the lock of a shared store (no-op otherwise); store_leave gives it
 * back and returns `rc`. The store_* wrappers hold it for each call; a
 * caller may hold it across many (a server's worker, for a whole turn:
 * one handover per turn instead of one per call). */
void store_enter(struct store *store);
int store_leave(struct store *store, int rc);

/* Lets go of the shared store this thread holds while it waits on
 * something else (the network): returns what store_resume needs to take
 * it back. Only a caller's own hold (store_enter) is let go: inside a
 * store call, or when the thread holds nothing, it returns 0 and nothing
 * changes. */
int store_yield(struct store *store);

/* Takes back what store_yield let go (`depth`, its return), after the
 * threads already waiting for the store. When it must wait, `waiting`
 * (if not NULL) is called with `ctx` once its place is taken: to ask the
 * holder to let go. */
void store_resume(struct store *store, int depth, void (*waiting)(void *ctx), void *ctx);

/* Convenience wrappers over ops, checking arguments first: a paper needs a
 * title; a query's limit must be 1..STORE_LIMIT_MAX and its year range
 * ordered; text fields over STORE_TEXT_MAX are KEEL_ETOOBIG. err names
 * the field. */
int store_put_paper(struct store *store, const struct store_paper *paper,
                    enum store_outcome *outcome, struct keel_error *err);
int store_search_papers(struct store *store, const struct paper_query *query,
                        struct paper_hits *out, struct keel_error *err);
int store_put_document(struct store *store, const struct store_document *doc,
                       const struct store_chunk *chunks, size_t n_chunks,
                       enum store_outcome *outcome, struct keel_error *err);
int store_search_chunks(struct store *store, const char *text, int limit,
                        struct chunk_hits *out, struct keel_error *err);

/* store_search_chunks() matching chunks that hold every word of `text`. */
int store_search_chunks_all(struct store *store, const char *text, int limit,
                            struct chunk_hits *out, struct keel_error *err);
int store_counts(struct store *store, struct store_counts *out, struct keel_error *err);

/* A read snapshot: until store_read_end(), the store's reads share one
 * read transaction and see one state of the data, instead of a
 * transaction (and its locks) each. A write ends the snapshot first, so
 * reads after it see the write. Hold it across local work only: with
 * SQLite, a snapshot held through a slow call (a model, a remote provider)
 * keeps the WAL from starting over. A begin while one is open is a
 * no-op and the first end ends it (they are not counted); ending without
 * one is a no-op; a backend without transactions ignores both. */
int store_read_begin(struct store *store, struct keel_error *err);
void store_read_end(struct store *store);

/* A batch of turns: from store_batch_begin to store_batch_end, the turns
 * store_save_turn saves are committed together, in one transaction, at
 * the end (or at a store_batch_flush, or before any other write). Each
 * turn is still written whole or not at all: one whose writes fail is
 * undone alone, under its own savepoint. Sharing one commit among
 * several turns saves most of a commit's work per turn (the write lock,
 * the WAL frames of pages the turns share, the locks of a new
 * transaction): with a server's turns back to back, a third of a turn.
 *
 * Until the commit no other connection sees those turns, and so a
 * caller must not report them saved before store_batch_end (or a flush)
 * returns KEEL_OK. When a commit fails, none of the batch's turns since
 * the last good commit is stored, and every save after it in the batch
 * fails with the same error, so the caller learns it; store_batch_counts
 * tells which turns an earlier commit of the batch (a flush) stored.
 * Reads on this store see the batch's turns. Only the thread that began
 * the batch may save in it (another's save is refused, KEEL_EFAIL), and
 * it ends the batch before it lets the store go.
 *
 * store_batch_begin returns 1 when a batch began, 0 when the backend has
 * none (every turn then commits on its own, and _flush and _end return
 * KEEL_OK) or one is on already. store_batch_end commits and ends the
 * batch: KEEL_OK, or the failure of the batch (err names it). */
int store_batch_begin(struct store *store);
int store_batch_flush(struct store *store, struct keel_error *err);
int store_batch_end(struct store *store, struct keel_error *err);

/* How many turns store_save_turn saved since the batch began (*saved)
 * and how many of those a commit of the batch stored (*committed): a
 * turn saved while *saved went from a to b is stored when b <=
 * *committed. Both stay after store_batch_end, until the next batch;
 * 0 and 0 for a backend without batches. Either pointer may be NULL. */
void store_batch_counts(struct store *store, long *saved, long *committed);

/* Reads conversation `id`: KEEL_ENOTFOUND (field "conversation_id") when
 * there is none. On success the caller releases *out. */
int store_load_conversation(struct store *store, const char *id, struct store_conversation *out,
                            struct keel_error *err);

/* Writes one whole turn atomically: the conversation row (created at seq
 * 1, else its state and turn count updated), the turn with its state,
 * deltas, events and sources, both messages, the decision log and the
 * metric counters (each named; KEEL_EINVAL, field "metrics", else).
 * Either all of it is stored or none of it. */
int store_save_turn(struct store *store, const struct store_turn_record *rec,
                    struct keel_error *err);

/* The quality counters as a new JSON object {name: value}. */
int store_metrics(struct store *store, json_t **out, struct keel_error *err);

/* The turns of conversation `id`, oldest first, as a new JSON array of
 * {turn, ts, user, assistant, clarification, sources} (sources: what the
 * answer cites by number, as stored); KEEL_ENOTFOUND when there is no
 * such conversation. */
int store_list_turns(struct store *store, const char *id, json_t **out, struct keel_error *err);

/* The stored turn whose correlation id is `correlation_id`, as a new JSON
 * object {conversation_id, turn, ts, correlation_id, user, assistant,
 * clarification, state, events, sources, decision, active_scenario,
 * scenario_delta} (JSON values, not text; the scenario after the turn
 * and the turn's changes of it, null when none); KEEL_ENOTFOUND when no
 * turn has that id. */
int store_get_turn(struct store *store, const char *correlation_id, json_t **out,
                   struct keel_error *err);

/* API keys. put: stores a new key under the hex SHA-256 `hash` of its
 * token (KEEL_EFAIL when the id or hash exists). find: the key of a token
 * hash, revoked or not (KEEL_ENOTFOUND). list: a new JSON array of {id,
 * user, role, created_ms, revoked_ms}, oldest first, never a hash.
 * revoke: marks a key revoked at `now_ms` (KEEL_ENOTFOUND; revoking twice
 * keeps the first time). */
int store_key_put(struct store *store, const struct store_key *key, const char *hash,
                  struct keel_error *err);
int store_key_find(struct store *store, const char *hash, struct store_key *out,
                   struct keel_error *err);
int store_key_list(struct store *store, json_t **out, struct keel_error *err);
int store_key_revoke(struct store *store, const char *id, int64_t now_ms, struct keel_error *err);
void store_key_release(struct store_key *key);

/* Read-only share links: put stores the hash of a share token for a
 * conversation (KEEL_ENOTFOUND when the conversation does not exist);
 * find gives the conversation id of a token hash (KEEL_ENOTFOUND). */
int store_share_put(struct store *store, const char *hash, const char *conversation_id,
                    const char *user, int64_t now_ms, struct keel_error *err);
int store_share_find(struct store *store, const char *hash, char **conversation_id,
                     struct keel_error *err);

/* Conversations, newest first (by last update, then id): all of them
 * when `owner` is NULL, else those of `owner`; `limit` 1..STORE_LIMIT_MAX
 * from `offset`. A new JSON array of {id, pack, turns, created_ms,
 * updated_ms}. */
int store_list_conversations(struct store *store, const char *owner, int limit, int offset,
                             json_t **out, struct keel_error *err);

/* Deletes a conversation with its turns, messages, decision logs and
 * share links, in one transaction; KEEL_ENOTFOUND when there is none.
 * In the same transaction the memory runs its owner made from it are
 * erased (migration 12): an ERASE decision each, their texts and vector
 * emptied, the tasks of the decisions about them (and of those made in
 * it) blanked. */
int store_delete_conversation(struct store *store, const char *id, struct keel_error *err);

/* Sets every quality counter back to zero (their history stays). */
int store_metrics_reset(struct store *store, struct keel_error *err);

/* The quality counters per period: every turn's counts are also kept per
 * minute of its time; this sums them over periods of `aggregate_minutes`
 * (1..10080), the newest `limit` periods (1..STORE_LIMIT_MAX), oldest
 * first, as a new JSON array of {start_ms, minutes, counters: {…}}. */
int store_metrics_history(struct store *store, int aggregate_minutes, int limit, json_t **out,
                          struct keel_error *err);

/* Long-term memory (seed 003; migration 7). */

/* Stores one admission decision and its change (see struct
 * store_memory_change) in one transaction. A REPLACE or MERGE whose
 * target is not an active run is KEEL_ENOTFOUND ("target_run_id") and
 * changes nothing; a run id that exists is KEEL_EFAIL ("id"). */
int store_memory_apply(struct store *store, const struct store_memory_change *change,
                       struct keel_error *err);

/* Replays the changes to the active runs after decision number *seq
 * (0: from the start) through `fn`, and sets *seq to the last one: how
 * an index is built at start and kept in step with the store, also
 * when other processes write. */
int store_memory_sync(struct store *store, int64_t *seq, store_memory_fn fn, void *ctx,
                      struct keel_error *err);

/* The runs named by `ids` (unknown ones left out), in that order, as a
 * new array of {id, task, summary, outcome, references, artifacts,
 * conversation_id, created_at, status, superseded_by, canonical, uses}.
 * The array is the caller's; the runs in it may be shared with the
 * store (SQLite keeps the last ones read): read them, copy one to
 * change it. */
int store_memory_get(struct store *store, const char *const *ids, size_t n, json_t **out,
                     struct keel_error *err);

/* The decisions of `owner`'s runs (NULL: those of runs without an
 * owner), newest first, as a new array of {seq, run_id, decision,
 * target_run_id, reason, similarity, judge, task, ts}. A decision about
 * a run erased with its conversation shows task "" (and a model judge's
 * reason is replaced); the erasure itself is an ERASE decision. */
int store_memory_decisions(struct store *store, const char *owner, int limit, int offset,
                           json_t **out, struct keel_error *err);

/* Personal facts (migration 10). */

/* The facts of `user`, by key, as a new array of {key, value, kind,
 * created_ms, updated_ms, conversation_id} (at most
 * STORE_PERSONAL_FACTS_MAX; a user never has more). */
int store_personal_list(struct store *store, const char *user, json_t **out,
                        struct keel_error *err);

/* Counts over every user, as a new object {users, facts, notes}. */
int store_personal_stats(struct store *store, json_t **out, struct keel_error *err);

/* Checks a change before a write: user, key and kind present and within
 * their caps, a value (when set) of 1..STORE_PERSONAL_VALUE_MAX bytes.
 * KEEL_EINVAL names the field ("personal.key"). */
int store_personal_check(const struct store_personal_change *change, struct keel_error *err);
/* Artifacts and facts (seed 001; migration 9; store_artifacts.c). */

/* The artifacts of conversation `conversation_id` in turn order, each as
 * {id, type, title, turn, created_ms, artifact} with the artifact as
 * stored; only those of `type` when it is not NULL, only the last `last`
 * when it is above 0 (1..STORE_LIMIT_MAX; 0: all, at most
 * STORE_LIMIT_MAX). A new array; empty for a conversation without any. */
int store_artifacts_list(struct store *store, const char *conversation_id, const char *type,
                         int last, json_t **out, struct keel_error *err);

/* The artifact `id` as {id, type, title, conversation_id, turn,
 * created_ms, artifact, facts: [...]}; KEEL_ENOTFOUND (field
 * "artifact_id") when there is none. */
int store_artifact_get(struct store *store, const char *id, json_t **out, struct keel_error *err);

/* Facts, newest first, as a new array of {id, artifact_id,
 * conversation_id, store, topic, fact, source, confidence, domain, tags,
 * evidence_snippet, created_ms}. */
int store_facts_list(struct store *store, const struct store_fact_query *query, json_t **out,
                     struct keel_error *err);

/* Checks a turn record's artifact before a backend writes it: type,
 * ids, JSON texts, fact stores and confidences (KEEL_EINVAL naming
 * "artifact.…"). */
int store_artifact_check(const struct store_artifact *artifact, struct keel_error *err);
/* The active scenario (seed 004; migration 8). Replaces conversation
 * `id`'s scenario with `scenario_json` (NULL: none) outside a turn, in
 * one transaction, provided its version is still `version`; the version
 * then counts one more. KEEL_ENOTFOUND when there is no such
 * conversation, KEEL_EFAIL (field "active_scenario") when the scenario
 * changed since it was read; nothing is written then. */
int store_scenario_set(struct store *store, const char *id, int64_t version,
                       const char *scenario_json, struct keel_error *err);

/* Frees what a conversation owns. */
void store_conversation_release(struct store_conversation *conv);

/* Writes the derived id of `paper` (see struct store_paper) into `out` of
 * size `n` (at least 256; a DOI is kept up to 239 bytes). */
void store_paper_id(const struct store_paper *paper, char *out, size_t n);

/* Splits `text` into search words: lower-cased ASCII letters/digits and
 * UTF-8 runs, at most STORE_QUERY_WORDS, each at most 64 bytes. Both
 * backends use it so they match the same words. Returns the count;
 * words[i] points into `buf` (size `buf_n`). */
size_t store_query_words(const char *text, char *buf, size_t buf_n,
                         const char **words, size_t max_words);

/* Frees what a paper / result owns (not the struct itself for papers). */
void store_paper_release(struct store_paper *paper);
void paper_hits_release(struct paper_hits *hits);
void chunk_hits_release(struct chunk_hits *hits);

/* Deep-copies `src` into `dst` (keel_malloc'd strings, new authors ref).
 * Returns KEEL_ENOMEM with `dst` released on failure. */
int store_paper_copy(struct store_paper *dst, const struct store_paper *src);

/* Whether SQLite stores opened after the call write each commit's WAL
 * frames as one write through keel's VFS (on, the default) or frame by
 * frame through SQLite's own (off: for benchmarks that compare them).
 * Process-wide; stores already open keep what they had. */
void store_sqlite_wal_coalescing(int on);

/* Backend constructors, called by store_open(). */
int store_sqlite_open(const char *path, struct store **out, struct keel_error *err);
int store_mem_open(struct store **out, struct keel_error *err);


#endif
