/*
 * cmd_chat.c — `keel chat`: a conversation in the terminal through the
 * turn pipeline. On a terminal it prompts, shows the user-level progress
 * lines of each turn ("Searching our materials…") and prints the answer
 * with its sources. Otherwise it reads one message per line and prints
 * each answer — with --json one JSON object per turn — so it can be
 * scripted. A conversation resumes with --conversation ID.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/alloc.h"
#include "artifact/artifact.h"
#include "core/clock.h"
#include "pipeline/pipeline.h"

#define LINE_MAX_BYTES (PIPELINE_MESSAGE_MAX + 2)

struct chat {
    struct pipeline *pl;
    struct store *store;
    char conversation[160];
    const char *role;
    const char *user;   /* whose personal facts (--user); NULL: "local" */
    int json;
    int interactive;
    int trace;
    int streaming;      /* this turn's answer is being printed as the model writes it */
    int closing;        /* a close command answered: the chat ends */
    int64_t now;        /* 0: the clock */
};

static void chat_usage(FILE *out)
{
    fprintf(out,
            "usage: keel chat [--pack NAME] [--db FILE] [--conversation ID] [--role ROLE]\n"
            "                 [--user NAME] [--json] [--now TIME] [--providers LIST]\n"
            "                 [--llm-url URL --llm-model NAME [--llm-key-env VAR]]\n"
            "                 [--websearch-url URL] [--artifacts-dir DIR|none]\n\n"
            "Talk to keel. On a terminal: type a message, see progress and the answer with its\n"
            "sources; :quit or Ctrl-D leaves; stop, end, quit or exit answers with a closing\n"
            "line and ends the chat; reset starts a new conversation (assistant pack).\n"
            "Otherwise one message per line is read from standard input and each answer\n"
            "printed; --json prints one JSON object per turn (answer, sources, decision,\n"
            "stage, clarification, tools_called, tool_args, active_scenario,\n"
            "scenario_summary, scenario_changes, artifact, conversation_id, and providers when\n"
            "remote paper providers were asked). The conversation id is printed when the chat\n"
            "ends (on standard error when scripted). The pack's sample data (its\n"
            "pipeline.sample papers or corpus) is ingested when the store has no papers or no\n"
            "documents yet. A model, when configured, phrases the answers; keel still decides\n"
            "the tools and their arguments. KEEL_DEBUG_TRACE=1 shows every technical event on\n"
            "standard error.\n\n"
            "  --pack NAME          scholar (default), payer, … (a folder of the packs directory)\n"
            "  --db FILE            the store (default: $KEEL_DB, else keel.db; mem: for none)\n"
            "  --conversation ID    resume a conversation\n"
            "  --role ROLE          the user's role in the pack (default: the pack's)\n"
            "  --user NAME          whose personal facts the assistant pack keeps (default: local)\n"
            "  --json               one JSON object per turn on standard output\n"
            "  --now TIME           pin the clock (RFC 3339), like KEEL_NOW\n"
            "  --providers LIST     openalex,semanticscholar or none (default: $KEEL_PROVIDERS)\n"
            "  --llm-url URL        an OpenAI-compatible /v1 (default: $KEEL_LLM_URL; none: off)\n"
            "  --llm-model NAME     the model's name on that server (default: $KEEL_LLM_MODEL)\n"
            "  --llm-key-env VAR    the variable with the server's key (default: $KEEL_LLM_KEY_ENV)\n"
            "  --websearch-url URL  a SearxNG endpoint (default: $KEEL_WEBSEARCH_URL; none: off)\n"
            "  --artifacts-dir DIR  artifacts as JSON lines (default: keel.db → keel.artifacts)\n"
            "\n"
            "Without the option, a setting comes from the environment variable named, else\n"
            "from the pack (providers:, llm:, handlers.websearch.url). --artifacts-dir none\n"
            "exports nothing; the store keeps the artifacts either way.\n");
}

static void on_event(void *ctx, const struct pipeline_event *event)
{
    const struct chat *chat = ctx;
    const char *user = event->user_message;

    if (chat->trace)
        fprintf(stderr, "  [%s %s] %s\n", event->stage, event->kind, event->message);
    if (user && chat->interactive && !chat->json)
        printf("  \u00b7 %s\n", user);
    fflush(stdout);
}

/* The model's answer as it is written (a terminal, not --json). */
static void on_token(void *ctx, const char *text, size_t n)
{
    struct chat *chat = ctx;

    if (!text) {   /* the model failed mid-answer: the whole answer follows */
        printf("\n  \u00b7 (the model stopped; the answer from the sources follows)\n");
        chat->streaming = 0;
    } else {
        if (!chat->streaming)
            printf("\nkeel> ");
        chat->streaming = 1;
        fwrite(text, 1, n, stdout);
    }
    fflush(stdout);
}

/* The answer (unless it was already printed as it was written) and
 * its sources. */
static void print_text(const json_t *result, int answer)
{
    const json_t *sources = json_object_get(result, "sources");
    size_t i;
    json_t *s;

    if (answer)
        printf("%s\n", json_string_value(json_object_get(result, "answer")));
    else
        printf("\n");
    if (json_array_size(sources))
        printf("\nSources:\n");
    json_array_foreach(sources, i, s) {
        const char *title = json_string_value(json_object_get(s, "title"));
        const char *where = json_string_value(json_object_get(s, "url"));
        const char *section = json_string_value(json_object_get(s, "section"));

        if (!where)
            where = json_string_value(json_object_get(s, "source"));
        printf("  [%d] %s", (int)json_integer_value(json_object_get(s, "n")),
               title ? title : "(untitled)");
        if (section && *section)
            printf(" \u2014 %s", section);
        if (where)
            printf(" (%s)", where);
        printf("\n");
    }
    if (json_is_object(json_object_get(result, "artifact"))) {   /* docs/artifacts.md */
        const json_t *a = json_object_get(result, "artifact");
        printf("\nArtifact: %s \u201c%s\u201d (%s, %lld fact(s))\n",
               json_string_value(json_object_get(a, "type")),
               json_string_value(json_object_get(a, "title")),
               json_string_value(json_object_get(a, "id")),
               (long long)json_integer_value(json_object_get(a, "facts")));
    }
    printf("\n");
}

static void print_json(const json_t *result)
{
    json_t *line = json_pack("{s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O*,s:O,s:O*,s:O*,"
                             "s:O*,s:O?}",
                             "conversation_id",
                             json_object_get(result, "conversation_id"), "turn",
                             json_object_get(result, "turn"), "answer",
                             json_object_get(result, "answer"), "sources",
                             json_object_get(result, "sources"), "decision",
                             json_object_get(result, "decision"), "stage",
                             json_object_get(result, "stage"), "clarification",
                             json_object_get(result, "clarification"), "kind",
                             json_object_get(result, "kind"), "tools_called",
                             json_object_get(result, "tools_called"), "state",
                             json_object_get(result, "state"), "active_scenario",
                             json_object_get(result, "active_scenario"), "providers", json_object_get(result, "providers"), "tool_args",
                             json_object_get(result, "tool_args"), "model",
                             json_object_get(result, "model"), "memory",
                             json_object_get(result, "memory"), "scenario_summary",
                             json_object_get(result, "scenario_summary"), "scenario_changes",
                             json_object_get(result, "scenario_changes"));
    if (line && json_is_true(json_object_get(result, "closing")))
        json_object_set_new(line, "closing", json_true());
    if (line && json_is_true(json_object_get(result, "reset")))
        json_object_set_new(line, "reset", json_true());
    if (line && (json_object_set(line, "artifact", json_object_get(result, "artifact")) ||
                 (json_object_get(result, "artifact_gate") &&
                  json_object_set(line, "artifact_gate", json_object_get(result, "artifact_gate"))))) {
        json_decref(line);
        line = NULL;
    }
    char *text = line ? json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

    if (text)
        printf("%s\n", text);
    keel_free(text);
    json_decref(line);
}

static void print_error(const struct chat *chat, const struct keel_error *err)
{
    cli_report(err);
    if (chat->json) {
        json_t *line = json_pack("{s:{s:s,s:s,s:s}}", "error", "code",
                                 keel_result_token(err->code), "field", err->field, "message",
                                 err->message);
        char *text = line ? json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (text)
            printf("%s\n", text);
        keel_free(text);
        json_decref(line);
    }
}

/* One turn. Returns 0, or 1 when the turn failed (reported). */
static int chat_turn(struct chat *chat, const char *line, size_t n)
{
    struct turn_request req = {
        .conversation_id = chat->conversation[0] ? chat->conversation : NULL,
        .message = line,
        .message_len = n,
        .role = chat->role,
        .now_ms = chat->now,
        .on_event = on_event,
        .event_ctx = chat,
        .no_events_list = 1,   /* shown through on_event; --json prints none */
        .on_token = chat->interactive && !chat->json ? on_token : NULL,
        .token_ctx = chat,
        .user = chat->user,
    };
    struct keel_error err;
    json_t *result = NULL;

    keel_error_clear(&err);
    chat->streaming = 0;
    if (pipeline_turn(chat->pl, &req, &result, &err)) {
        print_error(chat, &err);
        return 1;
    }
    snprintf(chat->conversation, sizeof(chat->conversation), "%s",
             json_string_value(json_object_get(result, "conversation_id")));
    if (chat->json)
        print_json(result);
    else if (chat->interactive && json_is_true(json_object_get(result, "streamed")))
        print_text(result, 0);
    else if (chat->interactive)
        printf("\nkeel> "), print_text(result, 1);
    else
        print_text(result, 1);
    fflush(stdout);
    /* "stop", "quit": the assistant said goodbye, the chat ends. */
    chat->closing = json_is_true(json_object_get(result, "closing"));
    /* "reset": the next message starts a new conversation. */
    if (json_is_true(json_object_get(result, "reset")))
        chat->conversation[0] = '\0';
    json_decref(result);
    return 0;
}

/* Reads one line of at most LINE_MAX_BYTES into `line` (NUL bytes kept,
 * so the pipeline can refuse them); a longer line is consumed to its end
 * and *too_long set. Returns the length, or -1 at the end of input. */
static long read_line(char *line, int *too_long)
{
    long n = 0;
    int c;

    *too_long = 0;
    while ((c = getchar()) != EOF && c != '\n') {
        if (n < LINE_MAX_BYTES)
            line[n++] = (char)c;
        else
            *too_long = 1;
    }
    if (c == EOF && n == 0 && !*too_long)
        return -1;
    while (n && line[n - 1] == '\r')
        n--;
    line[n] = '\0';
    return n;
}

static int blank(const char *line, long n)
{
    for (long i = 0; i < n; i++)
        if (!strchr(" \t\f\v", line[i]))
            return 0;
    return 1;
}

static int chat_loop(struct chat *chat)
{
    char line[LINE_MAX_BYTES + 1];
    int failed = 0, too_long;
    long n;

    for (;;) {
        if (chat->interactive)
            printf("you> "), fflush(stdout);
        if ((n = read_line(line, &too_long)) < 0)
            break;
        if (too_long) {
            struct keel_error err;
            keel_error_set(&err, KEEL_ETOOBIG, "message", "is longer than %d bytes",
                           PIPELINE_MESSAGE_MAX);
            print_error(chat, &err);
            failed = 1;
            continue;
        }
        if (blank(line, n))
            continue;
        if (!strcmp(line, ":quit") || !strcmp(line, ":q"))
            break;
        failed |= chat_turn(chat, line, (size_t)n);
        if (chat->closing)
            break;
    }
    if (chat->interactive)
        printf("\n");
    return failed;
}

static int chat_open(struct chat *chat, const char *db, const char *pack, const char *providers,
                     const struct llm_options *llm, const char *websearch_url,
                     const char *artifacts_dir, struct keel_error *err)
{
    char dir[4096];
    struct pipeline_options options = {.pack = pack, .providers = providers, .llm = *llm,
                                       .websearch_url = websearch_url};

    if (!artifacts_dir)   /* beside the store: keel.db → keel.artifacts/ */
        artifact_export_default_dir(cli_db_location(db), dir, sizeof(dir));
    else
        snprintf(dir, sizeof(dir), "%s", strcmp(artifacts_dir, "none") ? artifacts_dir : "");
    long ingested = 0;
    int rc;

    if ((rc = store_open(cli_db_location(db), &chat->store, err)))
        return rc;
    options.store = chat->store;
    if ((rc = pipeline_new(&options, &chat->pl, err)) ||
        (rc = pipeline_set_artifacts_dir(chat->pl, dir, err)) ||
        (rc = pipeline_check_role(chat->pl, chat->role, err)))
        return rc;
    if ((rc = pipeline_ingest_sample(chat->pl, &ingested, err)))
        return rc;
    if (ingested)
        fprintf(stderr, "keel: ingested %ld sample records of pack %s into %s\n", ingested, pack,
                cli_db_location(db));
    return KEEL_OK;
}

int cmd_chat(int argc, char **argv)
{
    static const struct option options[] = {
        {"pack", required_argument, NULL, 'p'},   {"db", required_argument, NULL, 'd'},
        {"conversation", required_argument, NULL, 'c'},
        {"role", required_argument, NULL, 'r'},   {"json", no_argument, NULL, 'j'},
        {"now", required_argument, NULL, 'n'},    {"help", no_argument, NULL, 'h'},
        {"providers", required_argument, NULL, 'P'},
        {"llm-url", required_argument, NULL, 'U'},
        {"llm-model", required_argument, NULL, 'M'},
        {"llm-key-env", required_argument, NULL, 'K'},
        {"user", required_argument, NULL, 'u'},
        {"websearch-url", required_argument, NULL, 'W'},
        {"artifacts-dir", required_argument, NULL, 'A'},
        {NULL, 0, NULL, 0},
    };
    struct llm_options llm = {NULL, NULL, NULL};
    const char *artifacts_dir = NULL;
    struct chat chat;
    const char *db = NULL, *pack = "scholar", *now = NULL, *trace = getenv("KEEL_DEBUG_TRACE");
    const char *providers = NULL, *websearch_url = NULL;
    struct keel_error err;
    int opt, rc;

    memset(&chat, 0, sizeof(chat));
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
        case 'p': pack = optarg; break;
        case 'd': db = optarg; break;
        case 'c': snprintf(chat.conversation, sizeof(chat.conversation), "%s", optarg); break;
        case 'r': chat.role = optarg; break;
        case 'j': chat.json = 1; break;
        case 'n': now = optarg; break;
        case 'P': providers = optarg; break;
        case 'U': llm.url = optarg; break;
        case 'M': llm.model = optarg; break;
        case 'K': llm.key_env = optarg; break;
        case 'u': chat.user = optarg; break;
        case 'W': websearch_url = optarg; break;
        case 'A': artifacts_dir = optarg; break;
        case 'h': chat_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "keel: chat: %s needs a value\n\n", argv[optind - 1]);
            chat_usage(stderr);
            return 2;
        default:
            fprintf(stderr, "keel: chat: unknown option %s\n\n", argv[optind - 1]);
            chat_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "keel: chat: unexpected argument \"%s\" (messages come on standard input)\n",
                argv[optind]);
        return 2;
    }
    keel_error_clear(&err);
    if (now && cli_now(now, &chat.now, &err)) {
        cli_report(&err);
        return 2;
    }
    chat.interactive = isatty(0);
    chat.trace = trace && !strcmp(trace, "1");
    rc = chat_open(&chat, db, pack, providers, &llm, websearch_url, artifacts_dir, &err);
    if (!rc && chat.conversation[0]) {   /* fail early on an unknown id */
        struct store_conversation conv;
        if (!(rc = store_load_conversation(chat.store, chat.conversation, &conv, &err))) {
            if (chat.interactive)
                printf("Resuming conversation %s (%d turns, pack %s).\n", conv.id, conv.turns,
                       conv.pack);
            store_conversation_release(&conv);
        }
    }
    if (rc) {
        print_error(&chat, &err);
        pipeline_free(chat.pl);
        store_close(chat.store);
        return 1;
    }
    if (chat.interactive && !chat.json && !chat.conversation[0])
        printf("keel chat \u2014 pack %s, store %s. Type a message; :quit or Ctrl-D leaves.\n",
               pack, cli_db_location(db));
    rc = chat_loop(&chat);
    if (chat.interactive && chat.conversation[0])
        printf("Conversation %s \u2014 resume with: keel chat --pack %s --conversation %s\n",
               chat.conversation, pack, chat.conversation);
    else if (!chat.json && chat.conversation[0])   /* scripted: the id goes to stderr */
        fprintf(stderr, "keel: conversation %s (resume with --conversation %s)\n",
                chat.conversation, chat.conversation);
    pipeline_free(chat.pl);
    store_close(chat.store);
    return rc;
}
