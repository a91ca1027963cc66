/*
 * cmd_keys.c — `keel keys create|list|revoke`: API keys for keel serve.
 * The token is printed once, at creation; only its hash is stored.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/id.h"
#include "server/auth.h"
#include "store/store.h"

static void keys_usage(FILE *out)
{
    fprintf(out,
            "usage: keel keys create --user USER --role owner|editor|viewer [--db FILE]\n"
            "       keel keys list [--db FILE] [--json]\n"
            "       keel keys revoke KEY_ID [--db FILE]\n\n"
            "API keys for keel serve. create prints the token once (keep it: only its hash is\n"
            "stored); clients send it as \"Authorization: Bearer TOKEN\". A user sees only the\n"
            "conversations they created; a viewer may chat, but tools that write never run.\n"
            "revoke stops a key at once. --db defaults to $KEEL_DB, else keel.db.\n");
}

static int keys_list(struct store *store, int json)
{
    struct keel_error err;
    json_t *list = NULL, *key;
    size_t i;

    keel_error_clear(&err);
    if (store_key_list(store, &list, &err)) {
        cli_report(&err);
        return 1;
    }
    if (json) {
        char *text = json_dumps(list, JSON_COMPACT);
        printf("%s\n", text ? text : "[]");
        keel_free(text);
    } else if (!json_array_size(list)) {
        printf("No keys. Create one with: keel keys create --user NAME --role editor\n");
    } else {
        json_array_foreach(list, i, key) {
            char when[40];
            keel_time_format(json_integer_value(json_object_get(key, "created_ms")), when,
                             sizeof(when));
            printf("%-32s %-16s %-7s created %s%s\n",
                   json_string_value(json_object_get(key, "id")),
                   json_string_value(json_object_get(key, "user")),
                   json_string_value(json_object_get(key, "role")), when,
                   json_integer_value(json_object_get(key, "revoked_ms")) ? "  REVOKED" : "");
        }
    }
    json_decref(list);
    return 0;
}

int cmd_keys(int argc, char **argv)
{
    static const struct option options[] = {
        {"user", required_argument, NULL, 'u'}, {"role", required_argument, NULL, 'r'},
        {"db", required_argument, NULL, 'd'},   {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    const char *user = NULL, *role = NULL, *db = NULL, *action;
    struct store *store = NULL;
    struct keel_error err;
    int opt, json = 0, rc = 1;

    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        keys_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    action = argv[1];
    optind = 2;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
        case 'u': user = optarg; break;
        case 'r': role = optarg; break;
        case 'd': db = optarg; break;
        case 'j': json = 1; break;
        case 'h': keys_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "keel: keys: %s needs a value\n\n", argv[optind - 1]);
            keys_usage(stderr);
            return 2;
        default:
            fprintf(stderr, "keel: keys: unknown option %s\n\n", argv[optind - 1]);
            keys_usage(stderr);
            return 2;
        }
    }
    keel_error_clear(&err);
    if (strcmp(action, "create") && strcmp(action, "list") && strcmp(action, "revoke")) {
        fprintf(stderr, "keel: keys: unknown action \"%s\" (create, list, revoke)\n", action);
        return 2;
    }
    if (!strcmp(action, "create") && (!user || !role)) {
        fprintf(stderr, "keel: keys create: --user and --role are required\n");
        return 2;
    }
    if (!strcmp(action, "revoke") && optind != argc - 1) {
        fprintf(stderr, "keel: keys revoke: one KEY_ID is required\n");
        return 2;
    }
    if (strcmp(action, "revoke") && optind != argc) {
        fprintf(stderr, "keel: keys %s: unexpected argument \"%s\"\n", action, argv[optind]);
        return 2;
    }
    if (store_open(cli_db_location(db), &store, &err)) {
        cli_report(&err);
        return 1;
    }
    if (!strcmp(action, "create")) {
        char token[AUTH_TOKEN_MAX], id[KEEL_ID_MAX];
        if (auth_key_create(store, user, role, keel_clock_now(), token, sizeof(token), id,
                            sizeof(id), &err)) {
            cli_report(&err);
            rc = err.code == KEEL_EINVAL ? 2 : 1;
        } else {
            fprintf(stderr, "keel: key %s for %s (%s) created; the token is shown only now:\n",
                    id, user, role);
            printf("%s\n", token);
            rc = 0;
        }
    } else if (!strcmp(action, "list")) {
        rc = keys_list(store, json);
    } else {
        if (store_key_revoke(store, argv[optind], keel_clock_now(), &err)) {
            cli_report(&err);
        } else {
            fprintf(stderr, "keel: key %s revoked\n", argv[optind]);
            rc = 0;
        }
    }
    store_close(store);
    return rc;
}
