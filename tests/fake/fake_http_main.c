/*
 * fake_http_main.c — keel-fake-http, the scripted server of fake_http.h
 * as a program for the black-box tests.
 *
 *   keel-fake-http --port-file F --log F [--route PREFIX --reply SPEC…]…
 *
 * A SPEC is "STATUS [BODY] [delay=MS] [cut] [retry-after=S]" where BODY
 * is @FILE (the file's bytes), cassette=PATH#N (interaction N's response
 * body of a VCR cassette) or text=… (the rest of the spec). The chosen
 * port is written to --port-file once the server listens; each request's
 * URI is appended to --log as it arrives. SIGTERM or SIGINT stops it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "fake_http.h"

#define MAX_REPLIES 8

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *data;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    data = calloc(1, (size_t)n + 1);
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    }
    fclose(f);
    return data;
}

/* Fills `r` from a SPEC; the body and headers are malloc'd (kept for the
 * life of the program). Returns 0, or -1 naming the problem on stderr. */
static int parse_reply(const char *spec, struct fake_reply *r)
{
    char *copy = strdup(spec), *save = NULL, *tok;
    static char headers[8][64];
    static int n_headers;

    memset(r, 0, sizeof(*r));
    if (!copy)
        return -1;
    r->status = atoi(spec);
    for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        if (tok == copy)
            continue;   /* the status */
        if (tok[0] == '@') {
            if (!(r->body = read_file(tok + 1))) {
                fprintf(stderr, "keel-fake-http: cannot read %s\n", tok + 1);
                return -1;
            }
        } else if (!strncmp(tok, "cassette=", 9)) {
            char *hash = strrchr(tok, '#');
            int status = 0;
            if (hash)
                *hash = '\0';
            if (!(r->body = fake_http_cassette_body(tok + 9, hash ? (size_t)atoi(hash + 1) : 0,
                                                    &status))) {
                fprintf(stderr, "keel-fake-http: no body in cassette %s\n", tok + 9);
                return -1;
            }
        } else if (!strncmp(tok, "text=", 5)) {
            r->body = strdup(spec + (tok - copy) + 5);
            break;
        } else if (!strncmp(tok, "delay=", 6)) {
            r->delay_ms = atoi(tok + 6);
        } else if (!strcmp(tok, "cut")) {
            r->cut = 1;
        } else if (!strncmp(tok, "retry-after=", 12) && n_headers < 8) {
            snprintf(headers[n_headers], sizeof(headers[0]), "Retry-After: %s", tok + 12);
            r->headers = headers[n_headers++];
        } else {
            fprintf(stderr, "keel-fake-http: unknown reply part \"%s\"\n", tok);
            return -1;
        }
    }
    free(copy);
    return 0;
}

int main(int argc, char **argv)
{
    struct fake_http *f;
    struct fake_reply replies[MAX_REPLIES];
    const char *port_file = NULL, *log_path = NULL, *prefix = NULL;
    size_t n = 0;
    int port;
    FILE *log = NULL;

    keel_json_init();
    if (fake_http_start(&f, &port)) {
        fprintf(stderr, "keel-fake-http: cannot start\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) {
            fprintf(stderr, "keel-fake-http: %s needs a value\n", arg);
            return 2;
        }
        i++;
        if (!strcmp(arg, "--port-file")) {
            port_file = value;
        } else if (!strcmp(arg, "--log")) {
            log_path = value;
        } else if (!strcmp(arg, "--route")) {
            if (prefix && n)
                fake_http_route(f, prefix, replies, n);
            prefix = value;
            n = 0;
        } else if (!strcmp(arg, "--reply")) {
            if (!prefix || n == MAX_REPLIES || parse_reply(value, &replies[n]))
                return 2;
            n++;
        } else {
            fprintf(stderr, "keel-fake-http: unknown option %s\n", arg);
            return 2;
        }
    }
    if (prefix && n)
        fake_http_route(f, prefix, replies, n);
    if (log_path && !(log = fopen(log_path, "w")))
        return 1;
    fake_http_log_to(f, log);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (port_file) {
        char tmp[4200];
        FILE *pf;
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        if (!(pf = fopen(tmp, "w")) || fprintf(pf, "%d\n", port) < 0 || fclose(pf) ||
            rename(tmp, port_file))
            return 1;
    }
    while (!stop)
        usleep(20000);
    fake_http_stop(f);
    if (log)
        fclose(log);
    return 0;
}
