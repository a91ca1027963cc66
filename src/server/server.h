/*
 * server.h — `keel serve`: the HTTP API (libevent's evhttp) and the
 * worker threads that run turns from the job queue.
 *
 * One event loop thread accepts connections, checks requests, answers
 * reads from its own store connection, queues turns and streams their
 * events (SSE); N worker threads each hold a store connection and one
 * pipeline per pack, take turns from their queue partition and publish
 * events on the bus. Routes and formats: docs/server.md.
 */
#ifndef KEEL_SERVER_SERVER_H
#define KEEL_SERVER_SERVER_H

#include "core/error.h"
#include "llm/llm.h"

/* The packs keel serve serves when --packs is not given: every shipped pack. */
#define SERVER_DEFAULT_PACKS "scholar,payer,household,assistant"

struct server_options {
    const char *listen;        /* "HOST:PORT"; NULL: 127.0.0.1:8080 */
    const char *db;            /* a SQLite file (required) */
    const char *packs_dir;     /* NULL: pack_default_dir() */
    const char *packs;         /* comma list of packs to serve; NULL: SERVER_DEFAULT_PACKS */
    int workers;               /* 0: 2 */
    int auth_none;             /* serve without API keys (loopback only); else every /v1
                                * route needs a key (keel keys create) */
    const char *providers;     /* remote paper providers, as for keel chat; may be NULL */
    const char *port_file;     /* write the bound port here once listening; may be NULL */
    int rate;                  /* requests per second per key (burst twice that); 0: 20 */
    struct llm_options llm;    /* the model, as for keel chat; unset: each pack's and KEEL_LLM_* */
    const char *websearch_url; /* web search, as for keel chat; NULL: each pack's and
                                * KEEL_WEBSEARCH_URL */
    const char *artifacts_dir; /* the artifacts' JSONL export; NULL or "": none */
};

/* Runs the server until SIGTERM or SIGINT: then it stops accepting,
 * finishes the turns already accepted, ends the streams and returns
 * KEEL_OK. Fails early (KEEL_EINVAL naming the option, KEEL_EIO) when
 * the options are wrong, the store or a pack cannot be opened, or the
 * address cannot be bound. */
int server_run(const struct server_options *options, struct keel_error *err);

#endif
