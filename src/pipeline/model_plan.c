/*
 * model_plan.c — the model as planner (optional: the pack's
 * llm.planner). For a new question the policy does not route to one
 * tool, the model is shown the pack's capability registry and asked to
 * split the message into subquestions, each on a path. Its output is
 * validated strictly — a JSON object {"subquestions": [{"text", "path"}]},
 * 1 to BLUEPRINT_MAX_SUBS of them, every path one of the pack's, every
 * text non-empty and short enough, patient identifiers redacted — and
 * anything else (no answer, not JSON, an unknown path) leaves the
 * deterministic plan, with the reason in the decision log. The model can
 * only pick among paths the registry has, and stage_plan.c's guard_plan
 * holds it to the phrases (a patient question stays on the patient
 * path); what each path may run is still decided by the registry, the
 * role and the policy.
 */
#include <string.h>

#include "core/alloc.h"
#include "core/utf8.h"
#include "pipeline/turn.h"

#define PLAN_REPLY_MAX (16u << 10)

static int planner_block(const struct turn *t, struct keel_buf *b)
{
    const struct pipeline_config *cfg = &t->pl->cfg;
    int rc = keel_buf_addf(b, "Plan the user's message before it is answered. Split it into 1 to "
                              "%d self-contained subquestions and give each the path that can "
                              "answer it. Paths and what they can do:",
                           BLUEPRINT_MAX_SUBS);

    for (int p = 0; p < cfg->n_paths && !rc; p++) {
        const json_t *caps = cfg->paths[p].capabilities, *c;
        size_t i;
        rc = keel_buf_addf(b, "\n- %s%s", cfg->paths[p].name,
                           p == cfg->default_path ? " (default)" : "");
        json_array_foreach(caps, i, c)
            if (!rc)
                rc = keel_buf_addf(b, "%s%s", i ? ", " : ": ", json_string_value(c));
    }
    if (!rc)
        rc = keel_buf_adds(b, "\nAnswer with JSON only: {\"subquestions\": [{\"text\": \"...\", "
                              "\"path\": \"...\"}]}");
    return rc;
}

/* Checks the model's plan and fills *bp's subquestions. Returns 0, or -1
 * with the reason in `why`. */
static int take_plan(const struct turn *t, const json_t *doc, struct blueprint *bp, char *why,
                     size_t n)
{
    const json_t *subs = json_object_get(doc, "subquestions"), *sub;
    size_t i;

    if (!json_is_array(subs) || !json_array_size(subs) ||
        json_array_size(subs) > BLUEPRINT_MAX_SUBS) {
        snprintf(why, n, "subquestions must be an array of 1 to %d items", BLUEPRINT_MAX_SUBS);
        return -1;
    }
    json_array_foreach(subs, i, sub) {
        const char *text = json_string_value(json_object_get(sub, "text"));
        const char *path = json_string_value(json_object_get(sub, "path"));
        int p = path ? config_path_index(&t->pl->cfg, path) : -1;
        if (!text || !*text || strlen(text) >= STATE_TEXT_MAX) {
            snprintf(why, n, "subquestions[%zu].text must be 1 to %d bytes", i,
                     STATE_TEXT_MAX - 1);
            return -1;
        }
        if (p < 0) {
            snprintf(why, n, "subquestions[%zu].path \"%.60s\" is not a path of pack %s", i,
                     path ? path : "(none)", t->pl->pack->name);
            utf8_clean(why);   /* the model's bytes, cut at 60 */
            return -1;
        }
        extract_redact(text, strlen(text), bp->subs[i].text, sizeof(bp->subs[i].text));
        bp->subs[i].path = p;
        bp->subs[i].status = SUB_PENDING;
    }
    bp->n_subs = (int)json_array_size(subs);
    return 0;
}

int model_plan(struct turn *t, struct blueprint *bp, int *used, struct keel_error *err)
{
    const struct llm_conf *conf = t->pl->llm ? llm_get_conf(t->pl->llm) : NULL;
    struct keel_buf block;
    struct llm_reply reply;
    struct keel_error lerr;
    json_t *body, *doc = NULL, *log, *entry;
    char why[KEEL_ERROR_MESSAGE_MAX + 64] = "";
    int rc;

    *used = 0;
    if (!conf || !conf->planner)
        return KEEL_OK;
    keel_buf_init(&block, 16u << 10);
    rc = planner_block(t, &block);
    body = rc ? NULL
              : json_pack("{s:[{s:s, s:s}, {s:s, s:s#}, {s:s, s:s}], s:i}", "messages", "role",
                          "system", "content",
                          conf->system_prompt ? conf->system_prompt : "You plan.",
                          "role", "system", "content", block.data, (int)block.len, "role", "user",
                          "content", t->effective, "temperature", 0);
    keel_buf_release(&block);
    if (!body || !(log = model_log(t)))
        return keel_error_set(err, KEEL_ENOMEM, "plan", "out of memory");
    llm_reply_init(&reply);
    keel_error_clear(&lerr);
    if (llm_chat(t->pl->llm, body, NULL, NULL, &reply, &lerr)) {
        snprintf(why, sizeof(why), "%s", lerr.message);
        entry = json_pack("{s:s, s:s}", "status", "failed", "reason", why);
        /* Down or slow: the turn's other calls would wait for it too. */
        if (reply.http_status < 400 || reply.http_status >= 500 || reply.http_status == 429)
            t->model_failed = 1;
    } else if (llm_extract_json(reply.text.data, reply.text.len, PLAN_REPLY_MAX, &doc, &lerr)) {
        snprintf(why, sizeof(why), "the plan is not usable JSON: %s", lerr.message);
        entry = json_pack("{s:s, s:s}", "status", "invalid", "reason", why);
    } else if (take_plan(t, doc, bp, why, sizeof(why))) {
        entry = json_pack("{s:s, s:s}", "status", "invalid", "reason", why);
    } else {
        *used = 1;
        entry = json_pack("{s:s, s:i}", "status", "ok", "subquestions", bp->n_subs);
    }
    json_decref(doc);
    llm_reply_release(&reply);
    json_decref(body);
    if (!*used)
        bp->n_subs = 0;
    if (!entry || json_object_set_new(log, "planner", entry) ||
        turn_emit(t, "info", NULL, NULL, "%s", *used ? "the model planned the subquestions"
                                                     : "the deterministic plan stands"))
        return keel_error_set(err, KEEL_ENOMEM, "plan", "out of memory");
    return KEEL_OK;
}
