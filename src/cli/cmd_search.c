/*
 * cmd_search.c — `keel search`: ask the remote scholarly providers by hand,
 * with the filters the policy would send, and see what each one did.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json.h"
#include "pack/pack.h"
#include "providers/providers.h"

static void search_usage(FILE *out)
{
    fprintf(out,
            "usage: keel search QUERY [--from YEAR] [--to YEAR] [--oa] [--limit N]\n"
            "                   [--provider openalex,semanticscholar] [--pack NAME] [--json]\n\n"
            "Asks the scholarly providers at once, with the years and open access as each one's\n"
            "native filters, then merges, de-duplicates and ranks what they return. Each\n"
            "provider's outcome (status, HTTP code, attempts, reason) is printed on standard\n"
            "error; --json has it, with every URL asked, in its \"providers\" array. Exits 1\n"
            "when every provider asked failed.\n\n"
            "  --from YEAR, --to YEAR   publication years (either may be left open)\n"
            "  --oa                     open access only\n"
            "  --limit N                papers to show, 1..%d (default 10)\n"
            "  --provider LIST          providers to ask (default: $KEEL_PROVIDERS, else both);\n"
            "                           --providers is the same\n"
            "  --pack NAME              the pack whose providers: settings apply (default scholar)\n"
            "  --json                   one JSON object: request, papers, providers\n"
            "KEEL_OPENALEX_URL, KEEL_SEMANTICSCHOLAR_URL and KEEL_OPENALEX_MAILTO override the\n"
            "pack's settings.\n",
            PROVIDER_LIMIT_MAX);
}

static int parse_year(const char *text, const char *field, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);

    if (*end || end == text || v < 1000 || v > 9999) {
        fprintf(stderr, "keel: %s: must be a year such as 2021, got \"%s\"\n", field, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static void print_text(const struct provider_papers *papers)
{
    if (!papers->n)
        printf("No papers found.\n");
    for (size_t i = 0; i < papers->n; i++) {
        const struct provider_paper *p = &papers->items[i];
        printf("%zu. %s", i + 1, p->title);
        if (p->year)
            printf(" (%d)", p->year);
        if (p->venue)
            printf(" — %s", p->venue);
        printf("\n");
        if (json_array_size(p->authors)) {
            printf("   ");
            for (size_t k = 0; k < json_array_size(p->authors) && k < 3; k++)
                printf("%s%s", k ? ", " : "", json_string_value(json_array_get(p->authors, k)));
            printf("%s\n", json_array_size(p->authors) > 3 ? ", et al." : "");
        }
        if (p->doi)
            printf("   https://doi.org/%s\n", p->doi);
        else if (p->url)
            printf("   %s\n", p->url);
        if (p->pdf_url)
            printf("   open access: %s\n", p->pdf_url);
        printf("   from:");
        for (int k = 0; k < PROVIDER_COUNT; k++)
            if (p->providers & (1u << k))
                printf(" %s", provider_name((enum provider_id)k));
        printf("\n");
    }
}

static void print_reports(const struct provider_report reports[PROVIDER_COUNT])
{
    for (int i = PROVIDER_LOCAL + 1; i < PROVIDER_COUNT; i++) {
        const struct provider_report *r = &reports[i];
        if (r->status == PROVIDER_OFF)
            continue;
        fprintf(stderr, "%s: %s", provider_name((enum provider_id)i),
                r->status == PROVIDER_FAILED ? "failed" : "ok");
        if (r->status != PROVIDER_FAILED)
            fprintf(stderr, ", %zu papers%s", r->papers, r->cached ? " (cached)" : "");
        if (r->http_status)
            fprintf(stderr, ", HTTP %ld", r->http_status);
        fprintf(stderr, ", %d attempt%s", r->attempts, r->attempts == 1 ? "" : "s");
        if (r->reason[0])
            fprintf(stderr, " — %s", r->reason);
        fprintf(stderr, "\n");
    }
}

static int print_json(const struct paper_request *req, const struct provider_papers *papers,
                      const struct provider_report reports[PROVIDER_COUNT])
{
    json_t *list = json_array(), *story = json_array(), *out;
    char *text;

    for (size_t i = 0; list && i < papers->n; i++)
        if (json_array_append_new(list, provider_paper_json(&papers->items[i])))
            goto nomem;
    for (int i = PROVIDER_LOCAL + 1; story && i < PROVIDER_COUNT; i++)
        if (reports[i].status != PROVIDER_OFF &&
            json_array_append_new(story, provider_report_json((enum provider_id)i, &reports[i])))
            goto nomem;
    out = json_pack("{s:{s:s, s:o, s:o, s:b, s:i}, s:o, s:o}", "request", "query", req->query,
                    "year_from", req->year_from ? json_integer(req->year_from) : json_null(),
                    "year_to", req->year_to ? json_integer(req->year_to) : json_null(),
                    "open_access", req->open_access, "limit", req->limit, "papers", list,
                    "providers", story);
    list = story = NULL;
    if (!out || !(text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS))) {
        json_decref(out);
        goto nomem;
    }
    printf("%s\n", text);
    free(text);
    json_decref(out);
    return 0;
nomem:
    json_decref(list);
    json_decref(story);
    fprintf(stderr, "keel: search: out of memory\n");
    return 1;
}

int cmd_search(int argc, char **argv)
{
    static const struct option options[] = {
        {"from", required_argument, NULL, 'f'},     {"to", required_argument, NULL, 't'},
        {"oa", no_argument, NULL, 'o'},             {"limit", required_argument, NULL, 'l'},
        {"provider", required_argument, NULL, 'P'}, {"providers", required_argument, NULL, 'P'},
        {"pack", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'j'},           {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct paper_request req = {NULL, 0, 0, 0, 10};
    const char *names = getenv("KEEL_PROVIDERS"), *pack_name = "scholar";
    struct providers_conf conf;
    struct providers *providers = NULL;
    struct provider_papers papers = {0};
    struct provider_report reports[PROVIDER_COUNT];
    struct pack *pack = NULL;
    struct keel_error err;
    int opt, json = 0, rc = 1, failed = 0, asked = 0;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
        case 'f': if (parse_year(optarg, "--from", &req.year_from)) return 2; break;
        case 't': if (parse_year(optarg, "--to", &req.year_to)) return 2; break;
        case 'o': req.open_access = 1; break;
        case 'l': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > PROVIDER_LIMIT_MAX) {
                fprintf(stderr, "keel: --limit: must be 1..%d, got \"%s\"\n", PROVIDER_LIMIT_MAX,
                        optarg);
                return 2;
            }
            req.limit = (int)v;
            break;
        }
        case 'P': names = optarg; break;
        case 'p': pack_name = optarg; break;
        case 'j': json = 1; break;
        case 'h': search_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "keel: search: %s needs a value\n\n", argv[optind - 1]);
            search_usage(stderr);
            return 2;
        default:
            fprintf(stderr, "keel: search: unknown option %s\n\n", argv[optind - 1]);
            search_usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1 || !argv[optind][0]) {
        fprintf(stderr, "keel: search: one QUERY is required (quote it)\n\n");
        search_usage(stderr);
        return 2;
    }
    req.query = argv[optind];
    if (req.year_from && req.year_to && req.year_from > req.year_to) {
        fprintf(stderr, "keel: --from: %d is after --to %d\n", req.year_from, req.year_to);
        return 2;
    }
    keel_error_clear(&err);
    if (pack_load(pack_default_dir(), pack_name, &pack, &err)) {
        cli_report(&err);
        return 1;
    }
    if (providers_conf_load(json_object_get(pack->doc, "providers"), &conf, &err) ||
        providers_conf_enable(&conf, names && *names ? names : "openalex,semanticscholar", &err)) {
        cli_report(&err);
        providers_conf_release(&conf);
        pack_free(pack);
        return 2;
    }
    if (providers_new(&conf, &providers, &err) ||
        providers_search(providers, &req, NULL, &papers, reports, &err)) {
        cli_report(&err);
        goto out;
    }
    for (int i = PROVIDER_LOCAL + 1; i < PROVIDER_COUNT; i++) {
        asked += reports[i].status != PROVIDER_OFF;
        failed += reports[i].status == PROVIDER_FAILED;
    }
    if (!asked)
        fprintf(stderr, "keel: search: no provider is on (--provider openalex,semanticscholar)\n");
    print_reports(reports);
    rc = json ? print_json(&req, &papers, reports) : (print_text(&papers), 0);
    if (!rc && asked && failed == asked) {
        fprintf(stderr, "keel: search: every provider failed\n");
        rc = 1;
    }
    provider_papers_release(&papers);
    provider_reports_release(reports);
out:
    providers_free(providers);
    providers_conf_release(&conf);
    pack_free(pack);
    return rc;
}
