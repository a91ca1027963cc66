/*
 * config.c — compiling a pack's `pipeline` section (see config.h). Every
 * error names the pack file, the line and the path of the bad value.
 */
#include "pipeline/config.h"

#include <stdio.h>
#include <string.h>

#include "core/json.h"

static int no_slots(const char *name, size_t n)
{
    (void)name;
    (void)n;
    return -1;
}

/* Adds every string of `list` (a list of phrases, or NULL) to category
 * `category` with value `value`. */
static int add_phrases(struct pipeline_config *cfg, const json_t *list, int category, int value,
                       const char *path, struct keel_error *err)
{
    char item[KEEL_JSON_PATH_MAX];
    struct keel_error inner;
    size_t i;
    json_t *phrase;

    if (!list)
        return KEEL_OK;
    if (!json_is_array(list))
        return pack_fail(cfg->pack, path, err, "must be a list of phrases");
    json_array_foreach(list, i, phrase) {
        keel_json_path_index(item, sizeof(item), path, i);
        if (!json_is_string(phrase))
            return pack_fail(cfg->pack, item, err, "must be a string, not %s",
                             keel_json_type_name(phrase));
        if (lexicon_add(&cfg->lex, category, value, json_string_value(phrase), no_slots, item,
                        &inner))
            return inner.code == KEEL_ENOMEM
                       ? keel_error_set(err, KEEL_ENOMEM, cfg->pack->origin, "out of memory")
                       : pack_fail(cfg->pack, item, err, "%s", inner.message);
    }
    return KEEL_OK;
}

static int check_keys(struct pipeline_config *cfg, const json_t *obj, const char *const *keys,
                      const char *path, struct keel_error *err)
{
    struct keel_error inner;

    if (!json_is_object(obj))
        return pack_fail(cfg->pack, path, err, "must be a mapping");
    if (keel_json_check_keys(obj, keys, path, &inner))
        return pack_fail(cfg->pack, inner.field, err, "%s", inner.message);
    return KEEL_OK;
}

static int get_string(struct pipeline_config *cfg, const json_t *obj, const char *key,
                      const char *path, const char **out, struct keel_error *err)
{
    struct keel_error inner;

    if (keel_json_get_string(obj, key, 0, path, out, &inner))
        return pack_fail(cfg->pack, inner.field, err, "%s", inner.message);
    return KEEL_OK;
}

static int load_stage(struct pipeline_config *cfg, const json_t *stage, struct keel_error *err)
{
    static const char *const keys[] = {"initial", "history_max", NULL};
    const char *initial = NULL;
    long long history = 20;
    struct keel_error inner;
    int rc;

    if (!stage)
        return KEEL_OK;
    if ((rc = check_keys(cfg, stage, keys, "pipeline.stage", err)) ||
        (rc = get_string(cfg, stage, "initial", "pipeline.stage", &initial, err)))
        return rc;
    if (keel_json_get_int(stage, "history_max", 0, 1, 256, "pipeline.stage", &history, &inner))
        return pack_fail(cfg->pack, inner.field, err, "%s", inner.message);
    if (initial) {
        if (!*initial || strlen(initial) >= CONFIG_STAGE_MAX)
            return pack_fail(cfg->pack, "pipeline.stage.initial", err,
                             "must be 1 to %d bytes", CONFIG_STAGE_MAX - 1);
        snprintf(cfg->initial_stage, sizeof(cfg->initial_stage), "%s", initial);
    }
    cfg->history_max = (int)history;
    return KEEL_OK;
}

static int load_slot_values(struct pipeline_config *cfg, struct config_slot *slot, int index,
                            const json_t *values, const char *path, struct keel_error *err)
{
    static const char *const keys[] = {"value", "aliases", NULL};
    char item[KEEL_JSON_PATH_MAX], sub[KEEL_JSON_PATH_MAX];
    size_t i;
    json_t *entry;
    int rc;

    if (!json_is_array(values) || json_array_size(values) > CONFIG_MAX_VALUES)
        return pack_fail(cfg->pack, path, err, "must be a list of at most %d {value, aliases}",
                         CONFIG_MAX_VALUES);
    json_array_foreach(values, i, entry) {
        const char *value = NULL;

        keel_json_path_index(item, sizeof(item), path, i);
        if ((rc = check_keys(cfg, entry, keys, item, err)) ||
            (rc = get_string(cfg, entry, "value", item, &value, err)))
            return rc;
        if (!value || !*value || strlen(value) > 60)
            return pack_fail(cfg->pack, item, err, "value: must be 1 to 60 bytes");
        slot->values[slot->n_values] = value;
        /* The value itself is always an alias of itself. */
        json_t *self = json_pack("[s]", value);
        keel_json_path_key(sub, sizeof(sub), item, "value");
        rc = self ? add_phrases(cfg, self, CCAT_SLOT + index, slot->n_values, sub, err)
                  : keel_error_set(err, KEEL_ENOMEM, cfg->pack->origin, "out of memory");
        json_decref(self);
        keel_json_path_key(sub, sizeof(sub), item, "aliases");
        if (rc || (rc = add_phrases(cfg, json_object_get(entry, "aliases"), CCAT_SLOT + index,
                                    slot->n_values, sub, err)))
            return rc;
        slot->n_values++;
    }
    return KEEL_OK;
}

static int load_slots(struct pipeline_config *cfg, const json_t *slots, struct keel_error *err)
{
    static const char *const keys[] = {"name", "question", "refine", "depends_on", "values", NULL};
    char path[KEEL_JSON_PATH_MAX], sub[KEEL_JSON_PATH_MAX];
    size_t i;
    json_t *slot;
    int rc;

    if (!slots)
        return KEEL_OK;
    if (!json_is_array(slots) || json_array_size(slots) > CONFIG_MAX_SLOTS)
        return pack_fail(cfg->pack, "pipeline.slots", err, "must be a list of at most %d slots",
                         CONFIG_MAX_SLOTS);
    json_array_foreach(slots, i, slot) {
        struct config_slot *s = &cfg->slots[i];
        const char *depends = NULL;

        keel_json_path_index(path, sizeof(path), "pipeline.slots", i);
        if ((rc = check_keys(cfg, slot, keys, path, err)) ||
            (rc = get_string(cfg, slot, "name", path, &s->name, err)) ||
            (rc = get_string(cfg, slot, "question", path, &s->question, err)) ||
            (rc = get_string(cfg, slot, "refine", path, &s->refine, err)) ||
            (rc = get_string(cfg, slot, "depends_on", path, &depends, err)))
            return rc;
        if (!s->name || !*s->name || strlen(s->name) > 32)
            return pack_fail(cfg->pack, path, err, "name: must be 1 to 32 bytes");
        if (config_slot_index(cfg, s->name) >= 0)
            return pack_fail(cfg->pack, path, err, "name: slot \"%s\" is defined twice", s->name);
        if (!s->refine)
            s->refine = "for {value}";
        else if (!strstr(s->refine, "{value}"))
            return pack_fail(cfg->pack, path, err, "refine: must contain {value}");
        s->depends_on = -1;
        if (depends && (s->depends_on = config_slot_index(cfg, depends)) < 0)
            return pack_fail(cfg->pack, path, err,
                             "depends_on: \"%s\" is not a slot defined before it", depends);
        keel_json_path_key(sub, sizeof(sub), path, "values");
        if ((rc = load_slot_values(cfg, s, (int)i, json_object_get(slot, "values"), sub, err)))
            return rc;
        cfg->n_slots = (int)i + 1;
    }
    return KEEL_OK;
}

static int load_needs(struct pipeline_config *cfg, struct config_path *p, const json_t *needs,
                      const char *path, struct keel_error *err)
{
    size_t i;
    json_t *name;

    if (!needs)
        return KEEL_OK;
    if (!json_is_array(needs))
        return pack_fail(cfg->pack, path, err, "must be a list of slot names");
    json_array_foreach(needs, i, name) {
        int s = json_is_string(name) ? config_slot_index(cfg, json_string_value(name)) : -1;

        if (s < 0)
            return pack_fail(cfg->pack, path, err, "[%zu]: is not a slot of pipeline.slots", i);
        p->needs |= 1u << s;
    }
    return KEEL_OK;
}

static int load_paths(struct pipeline_config *cfg, const json_t *paths, struct keel_error *err)
{
    static const char *const keys[] = {"default", "tool", "needs", "capabilities", "phrases",
                                       "unavailable", NULL};
    char path[KEEL_JSON_PATH_MAX], sub[KEEL_JSON_PATH_MAX];
    const char *name;
    json_t *def;
    int rc;

    if (!paths) {
        cfg->paths[0].name = "conversation";
        cfg->n_paths = 1;
        cfg->default_path = 0;
        return KEEL_OK;
    }
    if (!json_is_object(paths) || json_object_size(paths) > CONFIG_MAX_PATHS)
        return pack_fail(cfg->pack, "pipeline.paths", err, "must map at most %d path names",
                         CONFIG_MAX_PATHS);
    cfg->default_path = -1;
    json_object_foreach((json_t *)paths, name, def) {
        struct config_path *p = &cfg->paths[cfg->n_paths];
        struct keel_error inner;
        int is_default = 0;

        keel_json_path_key(path, sizeof(path), "pipeline.paths", name);
        if ((rc = check_keys(cfg, def, keys, path, err)) ||
            (rc = get_string(cfg, def, "tool", path, &p->tool, err)) ||
            (rc = get_string(cfg, def, "unavailable", path, &p->unavailable, err)))
            return rc;
        if (keel_json_get_bool(def, "default", 0, path, &is_default, &inner))
            return pack_fail(cfg->pack, inner.field, err, "%s", inner.message);
        if (p->tool && pack_tool_index(cfg->pack, p->tool, strlen(p->tool)) < 0)
            return pack_fail(cfg->pack, path, err, "tool: \"%s\" is not a tool of the pack",
                             p->tool);
        p->name = name;
        p->capabilities = json_object_get(def, "capabilities");
        if (p->capabilities && !json_is_array(p->capabilities))
            return pack_fail(cfg->pack, path, err, "capabilities: must be a list of strings");
        keel_json_path_key(sub, sizeof(sub), path, "needs");
        if ((rc = load_needs(cfg, p, json_object_get(def, "needs"), sub, err)))
            return rc;
        keel_json_path_key(sub, sizeof(sub), path, "phrases");
        if ((rc = add_phrases(cfg, json_object_get(def, "phrases"), CCAT_PATH + cfg->n_paths, 0,
                              sub, err)))
            return rc;
        if (is_default) {
            if (cfg->default_path >= 0)
                return pack_fail(cfg->pack, path, err, "default: only one path may be default");
            cfg->default_path = cfg->n_paths;
        }
        cfg->n_paths++;
    }
    if (cfg->default_path < 0)
        return pack_fail(cfg->pack, "pipeline.paths", err, "one path must have default: true");
    for (int p = 0; p < cfg->n_paths; p++)
        cfg->needed_slots |= cfg->paths[p].needs;
    return KEEL_OK;
}

static int load_retrieval(struct pipeline_config *cfg, const json_t *r, struct keel_error *err)
{
    static const char *const keys[] = {"tool", "top_k", "abstain_below", "confident_at", NULL};
    long long top_k = 5;
    struct keel_error inner;
    int rc;

    if (!r)
        return KEEL_OK;
    if ((rc = check_keys(cfg, r, keys, "pipeline.retrieval", err)) ||
        (rc = get_string(cfg, r, "tool", "pipeline.retrieval", &cfg->retrieval_tool, err)))
        return rc;
    if (keel_json_get_int(r, "top_k", 0, 1, 50, "pipeline.retrieval", &top_k, &inner))
        return pack_fail(cfg->pack, inner.field, err, "%s", inner.message);
    cfg->top_k = (int)top_k;
    const char *names[2] = {"abstain_below", "confident_at"};
    double *slots[2] = {&cfg->abstain_below, &cfg->confident_at};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(r, names[i]);
        char path[KEEL_JSON_PATH_MAX];

        if (!v)
            continue;
        keel_json_path_key(path, sizeof(path), "pipeline.retrieval", names[i]);
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1)
            return pack_fail(cfg->pack, path, err, "must be a number from 0 to 1");
        *slots[i] = json_number_value(v);
    }
    if (cfg->abstain_below > cfg->confident_at)
        return pack_fail(cfg->pack, "pipeline.retrieval", err,
                         "abstain_below must not exceed confident_at");
    return KEEL_OK;
}

/* A map of keys to texts (pipeline.events, pipeline.messages); *out
 * borrows it. */
static int load_texts(struct pipeline_config *cfg, json_t *map, const char *path_name,
                      json_t **out, struct keel_error *err)
{
    const char *key;
    json_t *text;

    if (!map)
        return KEEL_OK;
    if (!json_is_object(map))
        return pack_fail(cfg->pack, path_name, err, "must map keys to texts");
    json_object_foreach(map, key, text) {
        char path[KEEL_JSON_PATH_MAX];

        keel_json_path_key(path, sizeof(path), path_name, key);
        if (!json_is_string(text))
            return pack_fail(cfg->pack, path, err, "must be a string");
    }
    *out = map;
    return KEEL_OK;
}

static int load_sample(struct pipeline_config *cfg, const json_t *sample, struct keel_error *err)
{
    static const char *const keys[] = {"corpus", "papers", NULL};
    int rc;

    if (!sample)
        return KEEL_OK;
    if ((rc = check_keys(cfg, sample, keys, "pipeline.sample", err)) ||
        (rc = get_string(cfg, sample, "corpus", "pipeline.sample", &cfg->sample_corpus, err)) ||
        (rc = get_string(cfg, sample, "papers", "pipeline.sample", &cfg->sample_papers, err)))
        return rc;
    const char *names[2] = {cfg->sample_corpus, cfg->sample_papers};
    for (int i = 0; i < 2; i++)
        if (names[i] && (names[i][0] == '/' || strstr(names[i], "..")))
            return pack_fail(cfg->pack, "pipeline.sample", err,
                             "\"%s\" must be a path inside the pack folder", names[i]);
    return KEEL_OK;
}

static int load_phrase_lists(struct pipeline_config *cfg, const json_t *section,
                             struct keel_error *err)
{
    static const char *const state_keys[] = {"research_question", "topic", NULL};
    const json_t *sp = json_object_get(section, "state_phrases");
    int rc;

    if (sp && ((rc = check_keys(cfg, sp, state_keys, "pipeline.state_phrases", err)) ||
               (rc = add_phrases(cfg, json_object_get(sp, "research_question"), CCAT_RQ_LEAD, 0,
                                 "pipeline.state_phrases.research_question", err)) ||
               (rc = add_phrases(cfg, json_object_get(sp, "topic"), CCAT_TOPIC_LEAD, 0,
                                 "pipeline.state_phrases.topic", err))))
        return rc;
    if ((rc = add_phrases(cfg, json_object_get(section, "affirmations"), CCAT_AFFIRM, 0,
                          "pipeline.affirmations", err)) ||
        (rc = add_phrases(cfg, json_object_get(section, "question_starts"), CCAT_QSTART, 0,
                          "pipeline.question_starts", err)) ||
        (rc = add_phrases(cfg, json_object_get(section, "stopwords"), CCAT_STOPWORD, 0,
                          "pipeline.stopwords", err)) ||
        (rc = add_phrases(cfg, json_object_get(section, "split_phrases"), CCAT_SPLIT, 0,
                          "pipeline.split_phrases", err)) ||
        (rc = add_phrases(cfg, json_object_get(section, "switch_phrases"), CCAT_SWITCH, 0,
                          "pipeline.switch_phrases", err)) ||
        (rc = add_phrases(cfg, json_object_get(section, "thanks_phrases"), CCAT_THANKS, 0,
                          "pipeline.thanks_phrases", err)))
        return rc;
    return KEEL_OK;
}

int config_load(const struct pack *pack, struct pipeline_config *cfg, struct keel_error *err)
{
    static const char *const keys[] = {"stage", "state_phrases", "affirmations",
                                       "question_starts", "stopwords", "split_phrases",
                                       "switch_phrases", "thanks_phrases", "slots",
                                       "paths", "retrieval", "events", "messages", "sample", NULL};
    json_t *section = json_object_get(pack->doc, "pipeline");
    int rc;

    memset(cfg, 0, sizeof(*cfg));
    cfg->pack = pack;
    snprintf(cfg->initial_stage, sizeof(cfg->initial_stage), "exploring");
    cfg->history_max = 20;
    cfg->top_k = 5;
    cfg->abstain_below = 0.5;
    cfg->confident_at = 0.85;
    lexicon_init(&cfg->lex);
    if (section && (rc = check_keys(cfg, section, keys, "pipeline", err)))
        goto fail;
    if (!section)
        section = json_object();   /* defaults everywhere */
    else
        json_incref(section);
    if (!section) {
        rc = keel_error_set(err, KEEL_ENOMEM, pack->origin, "out of memory");
        goto fail;
    }
    rc = load_stage(cfg, json_object_get(section, "stage"), err);
    if (!rc)
        rc = load_phrase_lists(cfg, section, err);
    if (!rc)
        rc = load_slots(cfg, json_object_get(section, "slots"), err);
    if (!rc)
        rc = load_paths(cfg, json_object_get(section, "paths"), err);
    if (!rc)
        rc = load_retrieval(cfg, json_object_get(section, "retrieval"), err);
    if (!rc)
        rc = load_texts(cfg, json_object_get(section, "events"), "pipeline.events", &cfg->events,
                        err);
    if (!rc)
        rc = load_texts(cfg, json_object_get(section, "messages"), "pipeline.messages",
                        &cfg->messages, err);
    if (!rc)
        rc = load_sample(cfg, json_object_get(section, "sample"), err);
    json_decref(section);   /* the pack document still holds it */
    if (rc)
        goto fail;
    if (cfg->retrieval_tool &&
        pack_tool_index(pack, cfg->retrieval_tool, strlen(cfg->retrieval_tool)) < 0) {
        rc = pack_fail(pack, "pipeline.retrieval.tool", err, "\"%s\" is not a tool of the pack",
                       cfg->retrieval_tool);
        goto fail;
    }
    if ((rc = lexicon_compile(&cfg->lex))) {
        keel_error_set(err, rc, pack->origin, "out of memory");
        goto fail;
    }
    return KEEL_OK;
fail:
    config_release(cfg);
    return rc;
}

void config_release(struct pipeline_config *cfg)
{
    lexicon_release(&cfg->lex);
    cfg->events = NULL;
}

void config_match(const struct pipeline_config *cfg, const char *text, size_t n,
                  struct lex_result *out)
{
    lexicon_match(&cfg->lex, text, n, out);
}

int config_slot_index(const struct pipeline_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->n_slots; i++)
        if (cfg->slots[i].name && !strcmp(cfg->slots[i].name, name))
            return i;
    return -1;
}

int config_path_index(const struct pipeline_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->n_paths; i++)
        if (!strcmp(cfg->paths[i].name, name))
            return i;
    return -1;
}

const char *config_message(const struct pipeline_config *cfg, const char *key,
                           const char *fallback)
{
    json_t *text = cfg->messages ? json_object_get(cfg->messages, key) : NULL;

    return text ? json_string_value(text) : fallback;
}

const char *config_event_text(const struct pipeline_config *cfg, const char *key)
{
    json_t *text = cfg->events ? json_object_get(cfg->events, key) : NULL;

    return text ? json_string_value(text) : NULL;
}
