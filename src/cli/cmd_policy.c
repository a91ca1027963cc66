/*
 * cmd_policy.c — `keel policy explain "MESSAGE"`: one policy decision,
 * printed for a person or as JSON.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/json.h"
#include "text/utf8.h"

#define MAX_TOOL_ARGS 64

static void explain_usage(FILE *out)
{
    fprintf(out,
            "usage: keel policy explain \"MESSAGE\" [--pack NAME] [--topic TEXT] [--role ROLE]\n"
            "                           [--tools a,b,…] [--now TIME] [--packs DIR] [--json]\n\n"
            "Prints the deterministic policy decision for MESSAGE and the rules that fired.\n"
            "  --pack NAME    pack to decide with (default scholar)\n"
            "  --topic TEXT   topic hint: what \"this topic\" refers to\n"
            "  --role ROLE    caller's role (default: the pack's default role)\n"
            "  --tools LIST   tools available this turn (default: all of the pack's tools;\n"
            "                 an empty string means none)\n"
            "  --now TIME     the clock, RFC 3339 or a date (default: KEEL_NOW or now)\n"
            "  --packs DIR    packs directory (default: KEEL_PACKS or ./packs)\n"
            "  --json         print the decision as JSON\n\n"
            "       keel policy shell [--packs DIR]\n\n"
            "Reads messages from standard input, one per line, and explains each.\n");
}

static void print_human(const struct policy *policy, const struct policy_decision *d)
{
    const struct pack *pack = policy_pack(policy);
    const char *topic_class = "none";
    json_t *json = policy_decision_json(policy, d);

    if (json && json_is_string(json_object_get(json_object_get(json, "signals"), "topic_class")))
        topic_class = json_string_value(json_object_get(json_object_get(json, "signals"), "topic_class"));
    printf("intent:           %s\n", policy_intent_name(d->intent));
    printf("route:            %s (reason: %s, tool_veto: %s)\n", policy_route_name(d->route),
           policy_reason_name(d->reason), d->tool_veto ? "yes" : "no");
    printf("signals:          explicit=%s volatile=%s topic_class=%s\n",
           d->signals.explicit_request ? "yes" : "no", d->signals.is_volatile ? "yes" : "no",
           topic_class);
    printf("force_tool:       %s\n", d->force_tool >= 0 ? pack->tools[d->force_tool].name : "none");
    if (d->has_search) {
        printf("search.query:     \"%s\"\n", d->search.query);
        printf("search.count:     %d\n", d->search.count);
        if (d->search.year_from || d->search.year_to)
            printf("search.years:     %s%d .. %s%d\n", d->search.year_from ? "" : "(open) ",
                   d->search.year_from, d->search.year_to ? "" : "(open) ", d->search.year_to);
        else
            printf("search.years:     any\n");
        printf("search.open_access_only: %s\n", d->search.open_access_only ? "yes" : "no");
    } else {
        printf("search:           none\n");
    }
    printf("stage_transition: %s\n", d->stage_transition ? d->stage_transition : "none");
    printf("reasons:\n");
    for (size_t i = 0; i < d->n_reasons; i++)
        printf("  - %s\n", policy_reason_name((enum policy_reason)d->reasons[i]));
    json_decref(json);
}

static int explain(int argc, char **argv)
{
    static const struct option options[] = {
        {"pack", required_argument, NULL, 'p'},  {"topic", required_argument, NULL, 't'},
        {"role", required_argument, NULL, 'r'},  {"tools", required_argument, NULL, 'T'},
        {"now", required_argument, NULL, 'n'},   {"packs", required_argument, NULL, 'P'},
        {"json", no_argument, NULL, 'j'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *pack_name = "scholar", *topic = NULL, *role = NULL, *tools_arg = NULL;
    const char *now_text = NULL, *packs_dir = NULL, *tool_names[MAX_TOOL_ARGS];
    char tools_copy[2048];
    size_t n_tools = 0;
    int as_json = 0, opt, rc = 1;
    struct keel_error err;
    struct pack *pack = NULL;
    struct policy *policy = NULL;
    struct policy_context ctx;
    struct policy_decision decision;
    int64_t now;

    keel_error_clear(&err);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'p': pack_name = optarg; break;
        case 't': topic = optarg; break;
        case 'r': role = optarg; break;
        case 'T': tools_arg = optarg; break;
        case 'n': now_text = optarg; break;
        case 'P': packs_dir = optarg; break;
        case 'j': as_json = 1; break;
        case 'h': explain_usage(stdout); return 0;
        default: explain_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "keel: policy explain needs exactly one MESSAGE argument\n\n");
        explain_usage(stderr);
        return 2;
    }
    if (tools_arg) {
        char *save = NULL, *item;
        if (strlen(tools_arg) >= sizeof(tools_copy)) {
            fprintf(stderr, "keel: --tools: list is longer than %zu bytes\n", sizeof(tools_copy) - 1);
            return 2;
        }
        snprintf(tools_copy, sizeof(tools_copy), "%s", tools_arg);
        for (item = strtok_r(tools_copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            while (*item == ' ')
                item++;
            if (!*item)
                continue;
            if (n_tools == MAX_TOOL_ARGS) {
                fprintf(stderr, "keel: --tools: at most %d tools\n", MAX_TOOL_ARGS);
                return 2;
            }
            tool_names[n_tools++] = item;
        }
    }
    if (cli_now(now_text, &now, &err) ||
        cli_load_policy(packs_dir, pack_name, &pack, &policy, &err) ||
        policy_context_init(&ctx, policy, role, tools_arg ? tool_names : NULL, n_tools, topic,
                            now, &err)) {
        cli_report(&err);
        rc = err.code == KEEL_ENOMEM ? 1 : 2;
        goto out;
    }
    if (utf8_valid_prefix(argv[optind], strlen(argv[optind])) != strlen(argv[optind])) {
        fprintf(stderr, "keel: MESSAGE: is not valid UTF-8\n");
        rc = 2;
        goto out;
    }
    policy_decide(policy, &ctx, argv[optind], strlen(argv[optind]), &decision);
    if (as_json) {
        json_t *json = policy_decision_json(policy, &decision);
        struct keel_buf text;
        keel_buf_init(&text, 0);
        if (!json || keel_json_append(&text, json, JSON_INDENT(2))) {
            fprintf(stderr, "keel: out of memory\n");
        } else {
            printf("%s\n", text.data);
            rc = 0;
        }
        keel_buf_release(&text);
        json_decref(json);
    } else {
        print_human(policy, &decision);
        rc = 0;
    }
out:
    policy_free(policy);
    pack_free(pack);
    return rc;
}

/* `keel policy shell`: read messages line by line and explain each. Lines
 * starting with ':' change the context (:pack, :topic, :role, :quit). */
static int shell(int argc, char **argv)
{
    char pack_name[PACK_NAME_MAX] = "scholar", topic[1024] = "", role[64] = "";
    const char *packs_dir = argc > 2 && !strcmp(argv[1], "--packs") ? argv[2] : NULL;
    char line[POLICY_MESSAGE_MAX + 2];
    struct pack *pack = NULL;
    struct policy *policy = NULL;
    struct keel_error err;
    int interactive = isatty(0), rc = 0;

    if (cli_load_policy(packs_dir, pack_name, &pack, &policy, &err)) {
        cli_report(&err);
        return 1;
    }
    if (interactive)
        printf("keel policy shell: type a message to see its decision.\n"
               "  :pack NAME  :topic TEXT  :role ROLE  :quit\n");
    for (;;) {
        struct policy_context ctx;
        struct policy_decision decision;
        int64_t now;
        size_t n;

        if (interactive) {
            printf("%s> ", pack_name);
            fflush(stdout);
        }
        if (!fgets(line, sizeof(line), stdin))
            break;
        n = strlen(line);
        if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
            int c;
            while ((c = getchar()) != EOF && c != '\n')
                ;
            fprintf(stderr, "keel: message is longer than %d bytes; not decided\n", POLICY_MESSAGE_MAX);
            continue;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!n)
            continue;
        if (!strcmp(line, ":quit") || !strcmp(line, ":q"))
            break;
        if (!strncmp(line, ":pack ", 6)) {
            struct pack *next_pack = NULL;
            struct policy *next_policy = NULL;
            if (cli_load_policy(packs_dir, line + 6, &next_pack, &next_policy, &err)) {
                cli_report(&err);
                continue;
            }
            policy_free(policy);
            pack_free(pack);
            pack = next_pack;
            policy = next_policy;
            snprintf(pack_name, sizeof(pack_name), "%s", pack->name);
            role[0] = '\0';
            continue;
        }
        if (!strncmp(line, ":topic", 6)) {
            snprintf(topic, sizeof(topic), "%.1023s", line[6] == ' ' ? line + 7 : "");
            continue;
        }
        if (!strncmp(line, ":role ", 6)) {
            snprintf(role, sizeof(role), "%.63s", line + 6);
            continue;
        }
        if (cli_now(NULL, &now, &err) ||
            policy_context_init(&ctx, policy, role[0] ? role : NULL, NULL, 0,
                                topic[0] ? topic : NULL, now, &err)) {
            cli_report(&err);
            role[0] = '\0';
            continue;
        }
        if (utf8_valid_prefix(line, n) != n) {
            fprintf(stderr, "keel: message is not valid UTF-8; not decided\n");
            continue;
        }
        policy_decide(policy, &ctx, line, n, &decision);
        print_human(policy, &decision);
        printf("\n");
    }
    policy_free(policy);
    pack_free(pack);
    return rc;
}

int cmd_policy(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        explain_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "explain"))
        return explain(argc - 1, argv + 1);
    if (!strcmp(argv[1], "shell"))
        return shell(argc - 1, argv + 1);
    fprintf(stderr, "keel: unknown policy subcommand \"%s\" (try: keel policy explain)\n", argv[1]);
    return 2;
}
