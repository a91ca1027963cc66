/*
 * fuzz_scenario.c — the active scenario's parsers on arbitrary bytes:
 * the first byte modulo 3 picks what the rest is. 0: a JSON patch (and,
 * after a NUL, a current scenario) merged under the household pack's
 * rules, whose result must stay within the cap, be an object and
 * summarise. 1: a message read for household facts, whose patch (if
 * any) must merge, and whose question income the tax tool answers. 2: a
 * pack (YAML) whose scenario section — household tables and tax
 * figures — is compiled and freed.
 */
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "fuzz_common.h"
#include "pipeline/household.h"
#include "pipeline/scenario.h"

static struct pack *pack;
static struct scenario_conf conf;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct keel_error err;

    fuzz_init(argc, argv);
    if (pack_load(fuzz_packs_dir(), "household", &pack, &err) ||
        scenario_conf_load(pack, &conf, &err)) {
        fprintf(stderr, "fuzz_scenario: %s: %s\n", err.field, err.message);
        abort();
    }
    return 0;
}

static void check_result(const json_t *out)
{
    char line[SCENARIO_SUMMARY_MAX];
    char *text;
    int oom;

    if (!json_is_object(out))
        abort();
    text = scenario_dump(out, &oom);
    if (text && strlen(text) > conf.max_bytes)
        abort();
    keel_free(text);
    scenario_summary(&conf, out, line, sizeof(line));
    if (strlen(line) >= sizeof(line))
        abort();
}

static void merge(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    json_t *patch = NULL, *current = NULL, *out = NULL;
    struct keel_error err;

    if (keel_json_parse_any((const char *)data, n, 1u << 16, "patch", &patch, &err))
        return;
    /* the same value as a client's whole copy: refused with a field named */
    keel_error_clear(&err);
    if (scenario_check(&conf, patch, "active_scenario", &err) != KEEL_OK &&
        strncmp(err.field, "active_scenario", 15))
        abort();
    if (nul && keel_json_parse((const char *)nul + 1, size - n - 1, 1u << 16, "current",
                               &current, &err) == KEEL_OK && !json_is_object(current)) {
        json_decref(current);
        current = NULL;
    }
    if (scenario_apply(&conf, current, patch, &out, &err) == KEEL_OK) {
        check_result(out);
        json_decref(out);
    } else if (out) {
        abort();   /* a failure hands nothing back */
    }
    json_decref(patch);
    json_decref(current);
}

static void extract(const uint8_t *data, size_t size)
{
    json_t *patch = NULL, *out = NULL, *args, *tax = NULL;
    struct keel_error err;

    if (household_extract(conf.household, (const char *)data, size, NULL, &patch))
        return;
    if (patch && scenario_apply(&conf, NULL, patch, &out, &err) == KEEL_OK)
        check_result(out);
    args = json_pack("{s:s%}", "query", (const char *)data, size < 512 ? size : 512);
    if (args && household_tax(conf.household, out, args, &tax, &err) == KEEL_OK &&
        !json_is_string(json_object_get(tax, "text")))
        abort();
    json_decref(tax);
    json_decref(args);
    json_decref(out);
    json_decref(patch);
}

static void pack_section(const uint8_t *data, size_t size)
{
    struct pack *p = NULL;
    struct scenario_conf c;
    struct keel_error err;

    if (pack_parse((const char *)data, size, "fuzz.yaml", &p, &err) != KEEL_OK)
        return;
    if (scenario_conf_load(p, &c, &err) == KEEL_OK)
        scenario_conf_release(&c);
    pack_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 16))
        return 0;
    switch (data[0] % 3) {
    case 0: merge(data + 1, size - 1); break;
    case 1: extract(data + 1, size - 1); break;
    default: pack_section(data + 1, size - 1); break;
    }
    return 0;
}
