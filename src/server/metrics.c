/*
 * metrics.c — latency histograms of turns and of each pipeline stage,
 * counted by the workers with atomics and written in Prometheus' text
 * format by GET /metrics.
 */
#include <event2/buffer.h>
#include <string.h>

#include "server/server_int.h"

static const double bounds_ms[METRICS_BUCKETS] = {0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500,
                                                  1000, 2500, 5000};

static const char *const stage_names[METRICS_STAGES] = {
    "load", "classify", "decide", "plan", "clarify",
    "resolve", "compose", "artifact", "remember", "publish",
};

int metrics_stage_index(const char *stage)
{
    for (int i = 0; stage && i < METRICS_STAGES; i++)
        if (!strcmp(stage, stage_names[i]))
            return i;
    return -1;
}

void histogram_observe(struct histogram *h, double ms)
{
    int i = 0;

    while (i < METRICS_BUCKETS && ms > bounds_ms[i])
        i++;
    atomic_fetch_add(&h->buckets[i], 1);   /* i == METRICS_BUCKETS: above every bound */
    atomic_fetch_add(&h->count, 1);
    atomic_fetch_add(&h->sum_us, (long)(ms * 1000.0));
}

static void histogram_write(struct evbuffer *out, const char *name, const char *labels,
                            struct histogram *h)
{
    long cumulative = 0;

    for (int i = 0; i <= METRICS_BUCKETS; i++) {
        cumulative += atomic_load(&h->buckets[i]);
        if (i < METRICS_BUCKETS)
            evbuffer_add_printf(out, "%s_bucket{%s%sle=\"%g\"} %ld\n", name, labels,
                                *labels ? "," : "", bounds_ms[i] / 1000.0, cumulative);
        else
            evbuffer_add_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %ld\n", name, labels,
                                *labels ? "," : "", cumulative);
    }
    if (*labels)
        evbuffer_add_printf(out, "%s_sum{%s} %.6f\n%s_count{%s} %ld\n", name, labels,
                            (double)atomic_load(&h->sum_us) / 1e6, name, labels,
                            atomic_load(&h->count));
    else
        evbuffer_add_printf(out, "%s_sum %.6f\n%s_count %ld\n", name,
                            (double)atomic_load(&h->sum_us) / 1e6, name,
                            atomic_load(&h->count));
}

void server_metrics_write(struct server *srv, struct evbuffer *out)
{
    char labels[64];

    evbuffer_add_printf(out, "# HELP keel_turns_total Turns run by this server.\n"
                             "# TYPE keel_turns_total counter\nkeel_turns_total %ld\n",
                        atomic_load(&srv->metrics.turns));
    evbuffer_add_printf(out, "# HELP keel_turn_errors_total Turns that failed.\n"
                             "# TYPE keel_turn_errors_total counter\nkeel_turn_errors_total %ld\n",
                        atomic_load(&srv->metrics.errors));
    evbuffer_add_printf(out, "# HELP keel_turn_seconds Time of a whole turn.\n"
                             "# TYPE keel_turn_seconds histogram\n");
    histogram_write(out, "keel_turn_seconds", "", &srv->metrics.turn);
    evbuffer_add_printf(out, "# HELP keel_stage_seconds Time of each pipeline stage.\n"
                             "# TYPE keel_stage_seconds histogram\n");
    for (int i = 0; i < METRICS_STAGES; i++) {
        snprintf(labels, sizeof(labels), "stage=\"%s\"", stage_names[i]);
        histogram_write(out, "keel_stage_seconds", labels, &srv->metrics.stages[i]);
    }
}
