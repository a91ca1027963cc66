/*
 * cmd_memory.c — `keel memory add|search|decisions`: long-term memory of
 * runs (seed 003) from the terminal, over the same store as keel serve.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "llm/llm.h"
#include "memory/memory.h"
#include "store/store.h"

#define MAX_REFS 100

static void memory_usage(FILE *out)
{
    fprintf(out,
            "usage: keel memory add --task TEXT --outcome success|failure|partial\n"
            "                       [--summary TEXT] [--ref REF]… [--artifact A]… [--id ID]\n"
            "                       [--conversation ID] [--db FILE] [--json] [--user NAME]\n"
            "                       [--llm-url URL --llm-model NAME [--llm-key-env VAR]]\n"
            "                       [--embed-url URL --embed-model NAME [--embed-key-env VAR]]\n"
            "       keel memory search QUERY [--limit N] [--db FILE] [--json] [--user NAME]\n"
            "       keel memory decisions [--limit N] [--db FILE] [--json] [--user NAME]\n\n"
            "Long-term memory of finished runs. add decides whether the run enters it: ADD (new),\n"
            "NOT (redundant: only the decision is kept), REPLACE (a better version of a similar\n"
            "run, which is kept for audit but no longer found) or MERGE (complementary: both\n"
            "kept, one canonical). Runs are compared with the 3 most similar active runs\n"
            "(similarity 0.7 or more); the rules decide, or a model when --llm-url and\n"
            "--llm-model name one (any error of the model: ADD). Runs are embedded by hashed\n"
            "features, or by an OpenAI-compatible /v1/embeddings; runs of another embedder are\n"
            "never compared. search never returns superseded runs; decisions lists every\n"
            "decision, newest first. Memory belongs to users: the CLI acts for the local user\n"
            "(runs without an owner, as keel serve --auth none), or with --user NAME for that\n"
            "API user. See docs/memory.md.\n\n"
            "  --task TEXT            what the run set out to do (add)\n"
            "  --outcome OUTCOME      success, failure or partial (add)\n"
            "  --summary TEXT         how it went: the approach, the answer (add)\n"
            "  --ref REF              a reference it used; repeat for more (add)\n"
            "  --artifact A           something it produced; repeat for more (add)\n"
            "  --id ID                the run's id (default: a fresh run_… id) (add)\n"
            "  --conversation ID      the conversation it came from (add)\n"
            "  --limit N              runs or decisions to show, 1..100 (default 10)\n"
            "  --db FILE              the store (default: $KEEL_DB, else keel.db)\n"
            "  --json                 print JSON instead of text\n"
            "  --user NAME            act for this API user (default: the local user)\n"
            "  --llm-url URL          an OpenAI-compatible /v1 whose model judges ($KEEL_LLM_URL)\n"
            "  --llm-model NAME       the judge's model name ($KEEL_LLM_MODEL)\n"
            "  --llm-key-env VAR      the variable with its key ($KEEL_LLM_KEY_ENV)\n"
            "  --embed-url URL        an OpenAI-compatible /v1 that embeds runs ($KEEL_EMBED_URL)\n"
            "  --embed-model NAME     the embedding model's name ($KEEL_EMBED_MODEL)\n"
            "  --embed-key-env VAR    the variable with its key ($KEEL_EMBED_KEY_ENV)\n");
}

static void print_json(const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(6));

    printf("%s\n", text ? text : "null");
    keel_free(text);
}

static int fail(const struct keel_error *err, int json)
{
    cli_report(err);
    if (json) {
        json_t *line = json_pack("{s:{s:s, s:s, s:s}}", "error", "code",
                                 keel_result_token(err->code), "field", err->field, "message",
                                 err->message);
        print_json(line);
        json_decref(line);
    }
    return err->code == KEEL_EINVAL || err->code == KEEL_ETOOBIG ? 2 : 1;
}

int cmd_memory(int argc, char **argv)
{
    static const struct option options[] = {
        {"task", required_argument, NULL, 't'},     {"outcome", required_argument, NULL, 'o'},
        {"summary", required_argument, NULL, 's'},  {"ref", required_argument, NULL, 'r'},
        {"artifact", required_argument, NULL, 'a'}, {"id", required_argument, NULL, 'i'},
        {"conversation", required_argument, NULL, 'c'},
        {"limit", required_argument, NULL, 'l'},    {"db", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},           {"help", no_argument, NULL, 'h'},
        {"llm-url", required_argument, NULL, 'U'},  {"llm-model", required_argument, NULL, 'M'},
        {"llm-key-env", required_argument, NULL, 'K'},
        {"embed-url", required_argument, NULL, 'E'}, {"embed-model", required_argument, NULL, 'F'},
        {"embed-key-env", required_argument, NULL, 'G'},
        {"user", required_argument, NULL, 'u'},
        {NULL, 0, NULL, 0},
    };
    struct memory_input in = {0};
    struct llm_options lo = {NULL, NULL, NULL}, eo = {NULL, NULL, NULL};
    struct llm_conf conf;
    struct memory_conf mconf;
    struct llm *judge = NULL, *embedder = NULL;
    struct store *store = NULL;
    struct memory *m = NULL;
    struct keel_error err;
    const char *db = NULL, *sub;
    json_t *refs = json_array(), *artifacts = json_array(), *out = NULL;
    long limit = 10;
    int json = 0, opt, rc = 0;

    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        memory_usage(argc < 2 ? stderr : stdout);
        json_decref(refs);
        json_decref(artifacts);
        return argc < 2 ? 2 : 0;
    }
    sub = argv[1];
    optind = 2;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
        case 't': in.task = optarg; break;
        case 'o': in.outcome = optarg; break;
        case 's': in.summary = optarg; break;
        case 'r': json_array_append_new(refs, json_string(optarg)); break;
        case 'a': json_array_append_new(artifacts, json_string(optarg)); break;
        case 'i': in.id = optarg; break;
        case 'c': in.conversation_id = optarg; break;
        case 'd': db = optarg; break;
        case 'u':
            if (!*optarg || strlen(optarg) > 128) {
                fprintf(stderr, "keel: memory: --user must be 1 to 128 bytes\n");
                rc = 2;
            }
            in.owner = optarg;
            break;
        case 'j': json = 1; break;
        case 'U': lo.url = optarg; break;
        case 'M': lo.model = optarg; break;
        case 'K': lo.key_env = optarg; break;
        case 'E': eo.url = optarg; break;
        case 'F': eo.model = optarg; break;
        case 'G': eo.key_env = optarg; break;
        case 'l': {
            char *end;
            limit = strtol(optarg, &end, 10);
            if (*end || limit < 1 || limit > 100) {
                fprintf(stderr, "keel: memory: --limit must be 1..100, got \"%s\"\n", optarg);
                rc = 2;
            }
            break;
        }
        case 'h': memory_usage(stdout); rc = -1; break;
        case ':':
            fprintf(stderr, "keel: memory: %s needs a value\n\n", argv[optind - 1]);
            rc = 2;
            break;
        default:
            fprintf(stderr, "keel: memory: unknown option %s\n\n", argv[optind - 1]);
            rc = 2;
            break;
        }
        if (rc)
            break;
    }
    if (!rc && strcmp(sub, "add") && strcmp(sub, "search") && strcmp(sub, "decisions")) {
        fprintf(stderr, "keel: memory: unknown command \"%s\" (add, search, decisions)\n", sub);
        rc = 2;
    }
    if (!rc && !strcmp(sub, "search") && optind != argc - 1) {
        fprintf(stderr, "keel: memory search: give one QUERY (quote it)\n");
        rc = 2;
    } else if (!rc && strcmp(sub, "search") && optind < argc) {
        fprintf(stderr, "keel: memory %s: unexpected argument \"%s\"\n", sub, argv[optind]);
        rc = 2;
    }
    if (rc) {
        if (rc == 2)
            memory_usage(stderr);
        json_decref(refs);
        json_decref(artifacts);
        return rc < 0 ? 0 : rc;
    }
    keel_error_clear(&err);
    if (!(rc = store_open(cli_db_location(db), &store, &err)) &&
        !(rc = llm_conf_load(NULL, &lo, &conf, &err))) {
        if (conf.url)
            rc = llm_new(&conf, &judge, &err);
        llm_conf_release(&conf);
    }
    if (!rc && !(rc = llm_conf_load_as(NULL, "memory.embedder", "KEEL_EMBED", &eo, &conf, &err))) {
        if (conf.url)
            rc = llm_new(&conf, &embedder, &err);
        llm_conf_release(&conf);
    }
    memory_conf_default(&mconf);
    mconf.embedder = embedder;
    /* One command, then the process ends: a graph built in the background
     * would never be used, so the exact scan answers (docs/memory.md). */
    mconf.index.approximate_from = 0;
    if (!rc)
        rc = memory_open(store, &mconf, judge, &m, &err);
    if (!rc && !strcmp(sub, "add")) {
        in.references = refs;
        in.artifacts = artifacts;
        in.now_ms = keel_clock_now();
        rc = memory_admit(m, &in, &out, &err);
    } else if (!rc && !strcmp(sub, "search")) {
        rc = memory_search(m, in.owner, argv[optind], (int)limit, &out, &err);
    } else if (!rc) {
        rc = store_memory_decisions(store, in.owner, (int)limit, 0, &out, &err);
    }
    if (rc) {
        rc = fail(&err, json);
    } else if (json) {
        print_json(out);
    } else if (!strcmp(sub, "add")) {
        const char *target = json_string_value(json_object_get(out, "target_run_id"));
        printf("%s %s%s%s: %s\n", json_string_value(json_object_get(out, "decision")),
               json_string_value(json_object_get(out, "run_id")), target ? " → " : "",
               target ? target : "", json_string_value(json_object_get(out, "reason")));
    } else {
        size_t i;
        json_t *x;
        if (!json_array_size(out))
            printf("%s\n", !strcmp(sub, "search") ? "No run matches." : "No decisions yet.");
        json_array_foreach(out, i, x) {
            if (!strcmp(sub, "search"))
                printf("%.3f  %s  %s  %s%s\n",
                       json_real_value(json_object_get(x, "similarity")),
                       json_string_value(json_object_get(x, "id")),
                       json_string_value(json_object_get(x, "outcome")),
                       json_string_value(json_object_get(x, "task")),
                       json_is_false(json_object_get(x, "canonical")) ? "  (merged)" : "");
            else
                printf("%-7s %s%s%s  %s (%s)\n",
                       json_string_value(json_object_get(x, "decision")),
                       json_string_value(json_object_get(x, "run_id")),
                       json_object_get(x, "target_run_id") &&
                               !json_is_null(json_object_get(x, "target_run_id"))
                           ? " → " : "",
                       json_string_value(json_object_get(x, "target_run_id")) ?: "",
                       json_string_value(json_object_get(x, "reason")),
                       json_string_value(json_object_get(x, "judge")));
        }
    }
    json_decref(out);
    json_decref(refs);
    json_decref(artifacts);
    memory_free(m);
    llm_free(judge);
    llm_free(embedder);
    store_close(store);
    return rc;
}
