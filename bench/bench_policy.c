/*
 * bench_policy.c — the policy decision over a realistic message mix.
 *
 * Reports, side by side in one run:
 *   policy.decide            scholar pack, per decision (timer overhead subtracted)
 *   policy.decide.assistant  assistant pack, per decision
 *   policy.decide.long       a 4 KiB message (the input cap), per decision
 *   lexicon.match            tokenize + match alone, scholar mix
 * The target for policy.decide is a median of at most 1 µs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/clock.h"
#include "pack/pack.h"
#include "policy/policy_int.h"

static const char *const scholar_mix[] = {
    "Can you find me some recent papers on this topic?",
    "Find 10 papers from the last 3 years about transformer models in healthcare",
    "Search for open-access papers on CRISPR published since 2020",
    "papers on graph neural networks between 2022 and 2018",
    "What is the latest consensus on intermittent fasting?",
    "Find papers in my library about sleep",
    "Summarize these papers for me",
    "hi there",
    "Thanks, that was helpful!",
    "I'm looking for a few recent studies on COVID-19 vaccines with PDF",
    "Could you pull up the top 20 articles on federated learning privacy?",
    "Are there any meta-analyses of mindfulness interventions for anxiety?",
    "What does the second paper say about sample size?",
    "My research question is whether remote work affects productivity.",
    "Get me literature on soil carbon sequestration from 2015 to 2019",
    "How do transformers handle long context?",
    "Show me newest preprints about protein folding, open access only",
    "Can you compare the methods in these two studies?",
    "find the mean of these numbers: 3, 5, 8",
    "/reset",
    "Please search for peer-reviewed papers on microplastics in drinking water published in 2023",
    "Recommend several papers that examine social media use and adolescent sleep",
    "I need up-to-date research on battery recycling",
    "What are the limitations of this study?",
};

static const char *const assistant_mix[] = {
    "stop",
    "what's my favorite drink?",
    "remember that I like green tea",
    "convert 5 km to miles",
    "how many ounces in a pound",
    "What's the weather in Paris today?",
    "price of bitcoin right now",
    "latest news about the Mars mission",
    "search the web for reviews of the Framework laptop",
    "explain how a heat pump works",
    "don't search, just tell me what a black hole is",
    "hello!",
    "summarize this article for me",
    "What's the latest research on sleep and memory?",
};

#define ROUNDS 4000

static int load(const char *name, struct pack **pack, struct policy **policy)
{
    char dir[4096];
    struct keel_error err;

    snprintf(dir, sizeof(dir), "%s/packs", bench_root());
    if (policy_load(dir, name, pack, policy, &err)) {
        fprintf(stderr, "keel-bench: %s: %s\n", err.field, err.message);
        return 1;
    }
    return 0;
}

/* Median cost of reading the clock twice, subtracted from every sample. */
static uint64_t timer_overhead(void)
{
    uint64_t samples[2001];

    for (size_t i = 0; i < 2001; i++) {
        uint64_t t0 = bench_now_ns();
        samples[i] = bench_now_ns() - t0;
    }
    bench_report("timer.overhead", samples, 2001, NULL);
    return samples[1000];
}

static volatile int sink;

static void run_decide(const char *name, const struct policy *policy,
                       const struct policy_context *ctx, const char *const *mix, size_t n_mix,
                       uint64_t overhead)
{
    size_t n = (size_t)ROUNDS * n_mix;
    uint64_t *samples = malloc(n * sizeof(*samples));
    size_t lens[64];
    struct policy_decision d;
    char extra[128];

    if (!samples)
        return;
    for (size_t i = 0; i < n_mix; i++)
        lens[i] = strlen(mix[i]);
    for (size_t i = 0; i < n_mix * 50; i++)  /* warm caches and branch predictors */
        policy_decide(policy, ctx, mix[i % n_mix], lens[i % n_mix], &d);
    for (size_t i = 0; i < n; i++) {
        size_t m = i % n_mix;
        uint64_t t0 = bench_now_ns(), dt;
        policy_decide(policy, ctx, mix[m], lens[m], &d);
        dt = bench_now_ns() - t0;
        samples[i] = dt > overhead ? dt - overhead : 0;
        sink += d.intent;
    }
    snprintf(extra, sizeof(extra), "\"pack\": \"%s\", \"messages\": %zu, \"timer_overhead_ns\": %llu",
             policy_pack(policy)->name, n_mix, (unsigned long long)overhead);
    bench_report(name, samples, n, extra);
    free(samples);
}

static void run_match(const struct policy *policy, const char *const *mix, size_t n_mix,
                      uint64_t overhead)
{
    size_t n = (size_t)ROUNDS * n_mix;
    uint64_t *samples = malloc(n * sizeof(*samples));
    static struct lex_result res;

    if (!samples)
        return;
    for (size_t i = 0; i < n; i++) {
        const char *text = mix[i % n_mix];
        size_t len = strlen(text);
        uint64_t t0 = bench_now_ns(), dt;
        lexicon_match(&policy->lex, text, len, &res);
        dt = bench_now_ns() - t0;
        samples[i] = dt > overhead ? dt - overhead : 0;
        sink += (int)res.n_matches;
    }
    bench_report("lexicon.match", samples, n, "\"pack\": \"scholar\"");
    free(samples);
}

int bench_policy(void)
{
    struct pack *scholar = NULL, *assistant = NULL;
    struct policy *scholar_policy = NULL, *assistant_policy = NULL;
    struct policy_context scholar_ctx, assistant_ctx;
    struct keel_error err;
    static char long_message[POLICY_MESSAGE_MAX + 1];
    const char *long_mix[1] = {long_message};
    uint64_t overhead;
    int rc = 1;

    if (load("scholar", &scholar, &scholar_policy) ||
        load("assistant", &assistant, &assistant_policy))
        goto out;
    if (policy_context_init(&scholar_ctx, scholar_policy, NULL, NULL, 0,
                            "social media and academic performance", keel_clock_now(), &err) ||
        policy_context_init(&assistant_ctx, assistant_policy, NULL, NULL, 0, NULL,
                            keel_clock_now(), &err)) {
        fprintf(stderr, "keel-bench: %s: %s\n", err.field, err.message);
        goto out;
    }
    for (size_t i = 0; i < POLICY_MESSAGE_MAX; i++)
        long_message[i] = "find recent papers on sleep and memory since 2019 please "[i % 56];
    overhead = timer_overhead();
    run_decide("policy.decide", scholar_policy, &scholar_ctx, scholar_mix,
               sizeof(scholar_mix) / sizeof(scholar_mix[0]), overhead);
    run_decide("policy.decide.assistant", assistant_policy, &assistant_ctx, assistant_mix,
               sizeof(assistant_mix) / sizeof(assistant_mix[0]), overhead);
    run_match(scholar_policy, scholar_mix, sizeof(scholar_mix) / sizeof(scholar_mix[0]), overhead);
    run_decide("policy.decide.long", scholar_policy, &scholar_ctx, long_mix, 1, overhead);
    rc = 0;
out:
    policy_free(scholar_policy);
    policy_free(assistant_policy);
    pack_free(scholar);
    pack_free(assistant);
    return rc;
}
