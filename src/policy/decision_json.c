/*
 * decision_json.c — a policy decision as JSON: the shape `keel policy
 * explain --json` prints, the replay harness checks and the decision log
 * stores.
 */
#include "policy/policy_int.h"

static json_t *year_or_null(int year)
{
    return year ? json_integer(year) : json_null();
}

const char *policy_topic_class_name(const struct policy *policy,
                                    const struct policy_decision *decision)
{
    int c = decision->signals.topic_class;

    return c >= 0 && (size_t)c < policy->n_classes ? policy->class_name[c] : NULL;
}

json_t *policy_decision_json(const struct policy *policy,
                             const struct policy_decision *d)
{
    const struct pack *pack = policy->pack;
    json_t *out = json_object(), *signals = json_object(), *reasons = json_array();
    json_t *search = NULL;
    int bad = !out || !signals || !reasons;

    if (bad)
        goto fail;
    bad |= json_object_set_new(signals, "explicit", json_boolean(d->signals.explicit_request));
    bad |= json_object_set_new(signals, "volatile", json_boolean(d->signals.is_volatile));
    bad |= json_object_set_new(signals, "topic_class",
                               d->signals.topic_class >= 0
                                   ? json_string(policy_topic_class_name(policy, d))
                                   : json_null());
    for (size_t i = 0; i < d->n_reasons; i++)
        bad |= json_array_append_new(reasons,
                                     json_string(policy_reason_name((enum policy_reason)d->reasons[i])));
    if (d->has_search) {
        search = json_object();
        if (!search)
            goto fail;
        bad |= json_object_set_new(search, "query", json_stringn(d->search.query, d->search.query_len));
        bad |= json_object_set_new(search, "count", json_integer(d->search.count));
        bad |= json_object_set_new(search, "year_from", year_or_null(d->search.year_from));
        bad |= json_object_set_new(search, "year_to", year_or_null(d->search.year_to));
        bad |= json_object_set_new(search, "open_access_only", json_boolean(d->search.open_access_only));
    }
    bad |= json_object_set_new(out, "intent", json_string(policy_intent_name(d->intent)));
    bad |= json_object_set_new(out, "route", json_string(policy_route_name(d->route)));
    bad |= json_object_set_new(out, "tool_veto", json_boolean(d->tool_veto));
    bad |= json_object_set_new(out, "reason", json_string(policy_reason_name(d->reason)));
    bad |= json_object_set_new(out, "signals", signals);
    signals = NULL;
    bad |= json_object_set_new(out, "force_tool",
                               d->force_tool >= 0 ? json_string(pack->tools[d->force_tool].name)
                                                  : json_null());
    bad |= json_object_set_new(out, "search", search ? search : json_null());
    search = NULL;
    bad |= json_object_set_new(out, "stage_transition",
                               d->stage_transition ? json_string(d->stage_transition) : json_null());
    bad |= json_object_set_new(out, "reasons", reasons);
    reasons = NULL;
    if (bad)
        goto fail;
    return out;
fail:
    json_decref(out);
    json_decref(signals);
    json_decref(reasons);
    json_decref(search);
    return NULL;
}
