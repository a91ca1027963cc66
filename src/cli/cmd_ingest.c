/*
 * cmd_ingest.c — `keel ingest papers FILE…` and `keel ingest docs DIR…`:
 * fill the store, with a progress bar on a terminal and a summary line.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ingest/ingest.h"

static void ingest_usage(FILE *out)
{
    fprintf(out,
            "usage: keel ingest papers [--db FILE] FILE…\n"
            "       keel ingest docs [--db FILE] DIR…\n\n"
            "papers reads a JSON array or JSON lines of paper records (title, abstract, year,\n"
            "venue, authors, doi, url, open access); docs reads the *.md, *.markdown, *.txt,\n"
            "*.html and *.htm files below each DIR (markdown front matter gives title and\n"
            "lang; symbolic links to folders are not followed) and chunks them. A document's\n"
            "id is DIR's name and its path below DIR, its source that path alone (never the\n"
            "server's directories). Re-ingesting the same input changes nothing. Bad records\n"
            "are skipped with a warning naming the file and its line or record, from 1.\n\n"
            "  --db FILE   the store (default: $KEEL_DB, else keel.db; mem: for a throw-away one)\n");
}

int cmd_ingest(int argc, char **argv)
{
    static const struct option options[] = {
        {"db", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *db = NULL, *kind;
    struct ingest_output out = {stderr, isatty(2) ? stderr : NULL};
    struct ingest_stats stats = {0, 0, 0, 0, NULL};
    struct store_counts counts;
    struct store *store = NULL;
    struct keel_error err;
    int opt, rc = 0, papers;

    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        ingest_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    kind = argv[1];
    papers = !strcmp(kind, "papers");
    if (!papers && strcmp(kind, "docs")) {
        fprintf(stderr, "keel: ingest: unknown kind \"%s\" (papers or docs)\n\n", kind);
        ingest_usage(stderr);
        return 2;
    }
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc - 1, argv + 1, ":", options, NULL)) != -1) {
        switch (opt) {
        case 'd': db = optarg; break;
        case 'h': ingest_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "keel: ingest: %s needs a value\n\n", argv[optind]);
            ingest_usage(stderr);
            return 2;
        default:
            fprintf(stderr, "keel: ingest: unknown option %s\n\n", argv[optind]);
            ingest_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc - 1) {
        fprintf(stderr, "keel: ingest %s needs at least one %s\n", kind, papers ? "FILE" : "DIR");
        return 2;
    }
    keel_error_clear(&err);
    if (store_open(cli_db_location(db), &store, &err)) {
        cli_report(&err);
        return 1;
    }
    /* A bad argument is reported and the others are still ingested; the
     * exit code says something failed. */
    for (int i = optind + 1; i < argc; i++) {
        const char *path = argv[i];
        int failed = papers ? ingest_papers_file(store, path, &out, &stats, &err)
                            : ingest_docs_dir(store, path, &out, &stats, &err);
        if (failed) {
            cli_report(&err);
            rc = 1;
            if (failed == KEEL_ENOMEM)
                break;
        }
    }
    if (!store_counts(store, &counts, &err))
        printf("%s: %ld added, %ld updated, %ld unchanged, %ld skipped; the store %s now holds "
               "%ld papers, %ld documents, %ld chunks\n",
               kind, stats.added, stats.updated, stats.unchanged, stats.skipped,
               cli_db_location(db), counts.papers, counts.documents, counts.chunks);
    ingest_stats_release(&stats);
    store_close(store);
    return rc;
}
