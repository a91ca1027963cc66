/*
 * cmd_policy.c — `keel policy explain "MESSAGE"` (one decision, printed for
 * a person or as JSON) and `keel policy shell` (decide each line read from
 * standard input). Both take the same options.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/log.h"
#include "core/utf8.h"

#define MAX_TOOL_ARGS 64
#define TOPIC_MAX 256
#define ROLE_MAX 64

static void policy_usage(FILE *out)
{
    fprintf(out,
            "usage: keel policy explain [options] [--] \"MESSAGE\"\n"
            "       keel policy shell [options]\n\n"
            "explain prints the deterministic policy decision for MESSAGE and the rules that\n"
            "fired; shell reads messages from standard input, one per line, and explains each\n"
            "(:pack NAME, :topic TEXT, :role ROLE, :show, :help, :quit change or show the context).\n\n"
            "options:\n"
            "  --pack NAME    pack to decide with (default scholar)\n"
            "  --topic TEXT   topic hint: what \"this topic\" refers to\n"
            "  --role ROLE    caller's role (default: the pack's default role)\n"
            "  --tools LIST   tools available, comma-separated (default: all of the pack's\n"
            "                 tools; an empty string means none)\n"
            "  --now TIME     the clock, RFC 3339 or a date (default: KEEL_NOW or now)\n"
            "  --packs DIR    packs directory (default: KEEL_PACKS or ./packs)\n"
            "  --json         print decisions as JSON\n"
            "A MESSAGE that starts with '-' goes after '--'.\n");
}

struct policy_options {
    const char *pack_name, *packs_dir, *now_text;
    char topic[TOPIC_MAX + 1];
    char role[ROLE_MAX + 1];
    const char *tool_names[MAX_TOOL_ARGS];
    size_t n_tools;
    int tools_given, as_json;
    char tools_copy[2048];
};

/* Splits the comma-separated --tools list into o->tool_names (pointing
 * into o->tools_copy), skipping blanks. Returns 0, or 2 after an error. */
static int split_tools(const char *list, struct policy_options *o)
{
    char *item;

    if (strlen(list) >= sizeof(o->tools_copy)) {
        fprintf(stderr, "keel: --tools: list is longer than %zu bytes\n", sizeof(o->tools_copy) - 1);
        return 2;
    }
    snprintf(o->tools_copy, sizeof(o->tools_copy), "%s", list);
    o->tools_given = 1;
    o->n_tools = 0;
    item = o->tools_copy;
    while (item) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        while (*item == ' ')
            item++;
        for (char *end = item + strlen(item); end > item && end[-1] == ' ';)
            *--end = '\0';
        if (*item) {
            if (o->n_tools == MAX_TOOL_ARGS) {
                fprintf(stderr, "keel: --tools: at most %d tools\n", MAX_TOOL_ARGS);
                return 2;
            }
            o->tool_names[o->n_tools++] = item;
        }
        item = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* Parses the shared options; returns 0, 1 after --help, or 2 after
 * printing a usage error. */
static int parse_options(int argc, char **argv, struct policy_options *o)
{
    static const struct option options[] = {
        {"pack", required_argument, NULL, 'p'},  {"topic", required_argument, NULL, 't'},
        {"role", required_argument, NULL, 'r'},  {"tools", required_argument, NULL, 'T'},
        {"now", required_argument, NULL, 'n'},   {"packs", required_argument, NULL, 'P'},
        {"json", no_argument, NULL, 'j'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    memset(o, 0, sizeof(*o));
    o->pack_name = "scholar";
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
        case 'p': o->pack_name = optarg; break;
        case 'n': o->now_text = optarg; break;
        case 'P': o->packs_dir = optarg; break;
        case 'j': o->as_json = 1; break;
        case 'h': policy_usage(stdout); return 1;
        case 't':
            if (strlen(optarg) > TOPIC_MAX) {
                fprintf(stderr, "keel: --topic: longer than %d bytes\n", TOPIC_MAX);
                return 2;
            }
            snprintf(o->topic, sizeof(o->topic), "%s", optarg);
            break;
        case 'r':
            if (strlen(optarg) > ROLE_MAX) {
                fprintf(stderr, "keel: --role: longer than %d bytes\n", ROLE_MAX);
                return 2;
            }
            snprintf(o->role, sizeof(o->role), "%s", optarg);
            break;
        case 'T':
            if (split_tools(optarg, o))
                return 2;
            break;
        case ':':
            fprintf(stderr, "keel: %s needs a value\n\n", argv[optind - 1]);
            policy_usage(stderr);
            return 2;
        default:
            fprintf(stderr, "keel: unknown option %s (a message starting with '-' goes after '--')\n\n",
                    argv[optind - 1]);
            policy_usage(stderr);
            return 2;
        }
    }
    return 0;
}

static void print_years(const struct policy_search *s)
{
    if (!s->year_from && !s->year_to)
        printf("search.years:     any\n");
    else if (!s->year_to)
        printf("search.years:     %d or later\n", s->year_from);
    else if (!s->year_from)
        printf("search.years:     %d or earlier\n", s->year_to);
    else
        printf("search.years:     %d .. %d\n", s->year_from, s->year_to);
}

static void print_human(const struct policy *policy, const struct policy_decision *d)
{
    const struct pack *pack = policy_pack(policy);
    const char *topic_class = policy_topic_class_name(policy, d);

    printf("intent:           %s\n", policy_intent_name(d->intent));
    printf("route:            %s (reason: %s, tool_veto: %s)\n", policy_route_name(d->route),
           policy_reason_name(d->reason), d->tool_veto ? "yes" : "no");
    printf("signals:          explicit=%s volatile=%s topic_class=%s\n",
           d->signals.explicit_request ? "yes" : "no", d->signals.is_volatile ? "yes" : "no",
           topic_class ? topic_class : "none");
    printf("force_tool:       %s\n", d->force_tool >= 0 ? pack->tools[d->force_tool].name : "none");
    if (d->has_search) {
        printf("search.query:     \"%s\"\n", d->search.query);
        printf("search.count:     %d\n", d->search.count);
        print_years(&d->search);
        printf("search.open_access_only: %s\n", d->search.open_access_only ? "yes" : "no");
    } else {
        printf("search:           none\n");
    }
    printf("stage_transition: %s\n", d->stage_transition ? d->stage_transition : "none");
    printf("reasons:\n");
    for (size_t i = 0; i < d->n_reasons; i++)
        printf("  - %s\n", policy_reason_name((enum policy_reason)d->reasons[i]));
}

/* Decides `message` and prints the decision. Returns 0, or 1 when out of
 * memory. At debug level the decision is also logged as a JSON line. */
static int decide_and_print(const struct policy *policy, const struct policy_context *ctx,
                            const char *message, size_t n, int as_json)
{
    struct policy_decision decision;
    json_t *json;
    int rc = 0;

    policy_decide(policy, ctx, message, n, &decision);
    json = policy_decision_json(policy, &decision);
    if (!json) {
        fprintf(stderr, "keel: out of memory\n");
        return 1;
    }
    if (as_json) {
        struct keel_buf text;
        keel_buf_init(&text, 0);
        if (keel_json_append(&text, json, JSON_INDENT(2))) {
            fprintf(stderr, "keel: out of memory\n");
            rc = 1;
        } else {
            printf("%s\n", text.data);
        }
        keel_buf_release(&text);
    } else {
        print_human(policy, &decision);
    }
    if (keel_log_enabled(KEEL_LOG_DEBUG))
        keel_log(KEEL_LOG_DEBUG, "policy.decision",
                 json_pack("{s:s,s:O}", "pack", policy_pack(policy)->name, "decision", json));
    json_decref(json);
    return rc;
}

/* Loads the pack and fills the context from the options. Returns 0, or 2
 * after reporting the error. */
static int setup(const struct policy_options *o, const char *pack_name, const char *role,
                 const char *topic, struct pack **pack, struct policy **policy,
                 struct policy_context *ctx, struct keel_error *err)
{
    int64_t now;

    if (cli_now(o->now_text, &now, err) ||
        (!*pack && policy_load(o->packs_dir, pack_name, pack, policy, err)) ||
        policy_context_init(ctx, *policy, role && *role ? role : NULL,
                            o->tools_given ? o->tool_names : NULL, o->n_tools,
                            topic && *topic ? topic : NULL, now, err)) {
        cli_report(err);
        return 2;
    }
    return 0;
}

static int explain(int argc, char **argv)
{
    struct policy_options o;
    struct keel_error err;
    struct pack *pack = NULL;
    struct policy *policy = NULL;
    struct policy_context ctx;
    const char *message;
    int rc = parse_options(argc, argv, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    if (optind != argc - 1) {
        fprintf(stderr, "keel: policy explain needs exactly one MESSAGE argument\n\n");
        policy_usage(stderr);
        return 2;
    }
    message = argv[optind];
    keel_error_clear(&err);
    if (utf8_valid_prefix(message, strlen(message)) != strlen(message)) {
        fprintf(stderr, "keel: MESSAGE: is not valid UTF-8\n");
        return 2;
    }
    rc = setup(&o, o.pack_name, o.role, o.topic, &pack, &policy, &ctx, &err);
    if (!rc)
        rc = decide_and_print(policy, &ctx, message, strlen(message), o.as_json);
    policy_free(policy);
    pack_free(pack);
    return rc;
}

/* Handles one ":command" line of the shell. Returns 1 to quit. */
static int shell_command(char *line, struct policy_options *o, char *pack_name,
                         struct pack **pack, struct policy **policy)
{
    struct keel_error err;
    char *arg = strchr(line, ' ');

    keel_error_clear(&err);
    if (arg)
        *arg++ = '\0';
    if (!strcmp(line, ":quit") || !strcmp(line, ":q"))
        return 1;
    if (!strcmp(line, ":help")) {
        printf("  :pack NAME   decide with another pack\n  :topic TEXT  set the topic hint (:topic alone clears it)\n"
               "  :role ROLE   act as ROLE (:role alone: the pack's default)\n  :show        show the context\n"
               "  :quit        leave\n");
    } else if (!strcmp(line, ":show")) {
        printf("  pack %s, role %s, topic %s\n", pack_name,
               o->role[0] ? o->role : (*pack)->roles[(*pack)->default_role].name,
               o->topic[0] ? o->topic : "(none)");
    } else if (!strcmp(line, ":pack")) {
        struct pack *next_pack = NULL;
        struct policy *next_policy = NULL;
        if (!arg || !*arg) {
            fprintf(stderr, "keel: :pack needs a pack name\n");
        } else if (!policy_load(o->packs_dir, arg, &next_pack, &next_policy, &err)) {
            policy_free(*policy);
            pack_free(*pack);
            *pack = next_pack;
            *policy = next_policy;
            snprintf(pack_name, PACK_NAME_MAX, "%s", (*pack)->name);
            o->role[0] = '\0';
            printf("  pack %s\n", pack_name);
        } else {
            cli_report(&err);
        }
    } else if (!strcmp(line, ":topic")) {
        if (arg && strlen(arg) > TOPIC_MAX)
            fprintf(stderr, "keel: :topic: longer than %d bytes\n", TOPIC_MAX);
        else
            snprintf(o->topic, sizeof(o->topic), "%s", arg ? arg : "");
    } else if (!strcmp(line, ":role")) {
        if (arg && *arg && (strlen(arg) > ROLE_MAX || pack_role_index(*pack, arg) < 0))
            fprintf(stderr, "keel: :role: \"%.64s\" is not a role of pack %s\n", arg, pack_name);
        else
            snprintf(o->role, sizeof(o->role), "%s", arg ? arg : "");
    } else {
        fprintf(stderr, "keel: unknown shell command %s (try :help)\n", line);
    }
    return 0;
}

static int shell(int argc, char **argv)
{
    struct policy_options o;
    char pack_name[PACK_NAME_MAX], line[POLICY_MESSAGE_MAX + 2];
    struct pack *pack = NULL;
    struct policy *policy = NULL;
    struct policy_context ctx;
    struct keel_error err;
    int interactive = isatty(0), rc = parse_options(argc, argv, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    if (optind != argc) {
        fprintf(stderr, "keel: policy shell reads messages from standard input, not arguments\n");
        return 2;
    }
    keel_error_clear(&err);
    if ((rc = setup(&o, o.pack_name, o.role, o.topic, &pack, &policy, &ctx, &err)))
        return rc;
    snprintf(pack_name, sizeof(pack_name), "%s", pack->name);
    if (interactive)
        printf("keel policy shell: type a message to see its decision (:help for commands).\n");
    for (;;) {
        size_t n;
        int too_long = 0;

        if (interactive) {
            printf("%s> ", pack_name);
            fflush(stdout);
        }
        if (!fgets(line, sizeof(line), stdin))
            break;
        n = strlen(line);
        if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
            /* Over the cap: decide on the first part, as explain does. */
            int c;
            while ((c = getchar()) != EOF && c != '\n')
                ;
            too_long = 1;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!n)
            continue;
        if (line[0] == ':') {
            if (shell_command(line, &o, pack_name, &pack, &policy))
                break;
            continue;
        }
        if (utf8_valid_prefix(line, n) != n && !too_long) {
            fprintf(stderr, "keel: message is not valid UTF-8; not decided\n");
            continue;
        }
        if (setup(&o, pack_name, o.role, o.topic, &pack, &policy, &ctx, &err))
            continue;
        if (decide_and_print(policy, &ctx, line, n, o.as_json)) {
            rc = 1;
            break;
        }
        printf("\n");
    }
    policy_free(policy);
    pack_free(pack);
    return rc;
}

int cmd_policy(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        policy_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "explain"))
        return explain(argc - 1, argv + 1);
    if (!strcmp(argv[1], "shell"))
        return shell(argc - 1, argv + 1);
    fprintf(stderr, "keel: unknown policy subcommand \"%s\" (try: keel policy explain, keel policy shell)\n",
            argv[1]);
    return 2;
}
