/*
 * cmd_serve.c — `keel serve`: the HTTP API and the web page.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/artifact.h"
#include "cli/cli.h"
#include "server/server.h"

static void serve_usage(FILE *out)
{
    fprintf(out,
            "usage: keel serve [--listen HOST:PORT] [--db FILE] [--workers N] [--packs LIST]\n"
            "                  [--auth keys|none] [--providers LIST] [--port-file FILE]\n"
            "                  [--llm-url URL --llm-model NAME [--llm-key-env VAR]]\n"
            "                  [--websearch-url URL] [--artifacts-dir DIR|none]\n\n"
            "Serves the HTTP API (POST /v1/chat, GET /v1/responses/ID, GET /v1/stream/ID, …)\n"
            "and the web page at /. Turns run on worker threads; SIGTERM or Ctrl-C stops\n"
            "accepting, finishes the accepted turns, then exits. Each pack's sample data is\n"
            "ingested into an empty store. See docs/server.md.\n\n"
            "  --listen HOST:PORT   address (default 127.0.0.1:8080; port 0 picks a free one)\n"
            "  --db FILE            the SQLite store (default: $KEEL_DB, else keel.db)\n"
            "  --workers N          worker threads (default 2)\n"
            "  --packs LIST         packs to serve, the first is the default\n"
            "                       (default " SERVER_DEFAULT_PACKS ")\n"
            "  --auth keys          every /v1 route needs \"Authorization: Bearer TOKEN\" of a\n"
            "                       key made with keel keys create (the default)\n"
            "  --auth none          no API keys: only on a loopback address (the demo)\n"
            "  --providers LIST     remote paper providers, as for keel chat\n"
            "  --llm-url URL        an OpenAI-compatible server's /v1 that phrases the answers,\n"
            "  --llm-model NAME     as for keel chat (default: each pack's llm section, or\n"
            "  --llm-key-env VAR    $KEEL_LLM_URL, $KEEL_LLM_MODEL, $KEEL_LLM_KEY_ENV)\n"
            "  --websearch-url URL  a SearxNG-compatible search endpoint for the web_search\n"
            "                       tool, as for keel chat\n"
            "  --rate N             requests per second per key, twice that at once\n"
            "                       (default 20; over it: 429 with Retry-After)\n"
            "  --port-file FILE     write the bound port to FILE once listening\n"
            "  --artifacts-dir DIR  where each conversation's artifacts are appended as JSON\n"
            "                       lines (default: beside the store, keel.db → keel.artifacts;\n"
            "                       none: no export; the store always keeps them)\n");
}

int cmd_serve(int argc, char **argv)
{
    static const struct option options[] = {
        {"listen", required_argument, NULL, 'l'},  {"db", required_argument, NULL, 'd'},
        {"workers", required_argument, NULL, 'w'}, {"packs", required_argument, NULL, 'p'},
        {"auth", required_argument, NULL, 'a'},    {"providers", required_argument, NULL, 'P'},
        {"port-file", required_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'},
        {"rate", required_argument, NULL, 'R'},
        {"llm-url", required_argument, NULL, 'U'},
        {"llm-model", required_argument, NULL, 'M'},
        {"llm-key-env", required_argument, NULL, 'K'},
        {"websearch-url", required_argument, NULL, 'W'},
        {"artifacts-dir", required_argument, NULL, 'A'},
        {NULL, 0, NULL, 0},
    };
    struct server_options o;
    const char *db = NULL, *artifacts_dir = NULL;
    char dir[4096];
    struct keel_error err;
    int opt;

    memset(&o, 0, sizeof(o));
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
        case 'l': o.listen = optarg; break;
        case 'd': db = optarg; break;
        case 'w': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 64) {
                fprintf(stderr, "keel: --workers: must be 1..64, got \"%s\"\n", optarg);
                return 2;
            }
            o.workers = (int)n;
            break;
        }
        case 'p': o.packs = optarg; break;
        case 'a':
            if (strcmp(optarg, "none") && strcmp(optarg, "keys")) {
                fprintf(stderr, "keel: --auth: keys or none, got \"%s\"\n", optarg);
                return 2;
            }
            o.auth_none = !strcmp(optarg, "none");
            break;
        case 'P': o.providers = optarg; break;
        case 'f': o.port_file = optarg; break;
        case 'U': o.llm.url = optarg; break;
        case 'M': o.llm.model = optarg; break;
        case 'K': o.llm.key_env = optarg; break;
        case 'W': o.websearch_url = optarg; break;
        case 'A': artifacts_dir = optarg; break;
        case 'R': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 100000) {
                fprintf(stderr, "keel: --rate: must be 1..100000, got \"%s\"\n", optarg);
                return 2;
            }
            o.rate = (int)n;
            break;
        }
        case 'h': serve_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "keel: serve: %s needs a value\n\n", argv[optind - 1]);
            serve_usage(stderr);
            return 2;
        default:
            fprintf(stderr, "keel: serve: unknown option %s\n\n", argv[optind - 1]);
            serve_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "keel: serve: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    o.db = cli_db_location(db);
    if (!artifacts_dir)   /* beside the store: keel.db → keel.artifacts/ */
        artifact_export_default_dir(o.db, dir, sizeof(dir));
    else
        snprintf(dir, sizeof(dir), "%s", strcmp(artifacts_dir, "none") ? artifacts_dir : "");
    o.artifacts_dir = dir;
    keel_error_clear(&err);
    if (server_run(&o, &err)) {
        cli_report(&err);
        return err.code == KEEL_EINVAL ? 2 : 1;
    }
    return 0;
}
