/*
 * bench_pipeline.c — whole turns through the turn pipeline, in process,
 * at the sizes of the issue: a 10,000-paper library and a 1,000-document
 * health-plan corpus in one SQLite file, and a mix of scholar and payer
 * conversations. Every turn is one store transaction (publish), so each
 * turn is one commit.
 *
 * Reports, side by side in one run:
 *   pipeline.turn        WAL, synchronous=NORMAL (survives a process crash)
 *   pipeline.turn_full   WAL, synchronous=FULL (survives power loss)
 *   pipeline.turn_parallel  as pipeline.turn, a thread per processor
 * each as {"bench", "turns_per_s", "p50_us", "p99_us", "rss_mb", …}.
 * turns_per_s is timed turns over the wall time of the timed loop; p50
 * and p99 are of single turns (pipeline_turn and freeing its result);
 * rss_mb is the process's peak resident size (VmHWM) while the variant
 * ran, its peak reset first where the kernel allows. Target: at least
 * 5,000 turns/s, p99 at most 2 ms, at most 30 MB.
 *
 * Data (not timed) comes from the seeded generator of bench_data.h:
 * papers are about one of 32 research topics (a few topics common, most
 * rare) with titles and abstracts padded by synthetic words, a year and
 * open access; documents are a few chunks of health-plan text naming one
 * of six plans and one subject (appeal, grievance, prior authorization,
 * eligibility, claims, benefits, contact). The file lives in a mkdtemp
 * folder under /tmp, removed at the end.
 *
 * Conversations: 16 run interleaved; each turn goes to a random one, and
 * one that has said all of its script is replaced by a new conversation,
 * so most turns load a stored state. Scripts are direct searches with
 * recency, years and open access, follow-ups, research questions and
 * smalltalk (scholar), and question → clarification → plan name →
 * answer, multi-part questions and the patient path (payer). The clock
 * of each turn is pinned (now_ms), one second after the previous turn's.
 *
 * BENCH_VARIANT=turn (turn_full, turn_parallel) runs one variant only and
 * BENCH_TURNS=N caps the timed turns (for a profiler).
 *
 * pipeline.turn_parallel runs the NORMAL turns on a thread per processor,
 * each with pipelines of its own and all with one store shared by the
 * threads (store_share_threads), each store call taking the store's lock
 * (`keel serve`'s workers instead hold it across turns, docs/server.md):
 * turns_per_s is of all threads together, the percentiles of all their
 * turns, and "threads" in the line says how many. BENCH_THREADS=N (1 to
 * 8) sets the threads of every variant; BENCH_SHARED_STORE=0 gives each
 * thread a store (a connection) of its own instead, for a side-by-side.
 *
 * BENCH_COALESCE=0 opens the stores with SQLite's own VFS instead of
 * keel's (store_sqlite_vfs.c, which writes a commit's WAL frames as one
 * write), for a side-by-side; "coalesce" in the line says which ran.
 * BENCH_STATE_CACHE=0 runs the pipelines without their cache of parsed
 * conversation states (state_cache.h), likewise. Turns run as `keel
 * serve` runs them, without the result's events[] (no_events_list);
 * BENCH_EVENTS_LIST=1 asks for it, as the replay runner does.
 *
 * BENCH_STAGES=1 adds a line per variant with the mean time of each
 * stage, measured between the stages' start events (publish includes
 * the commit and building the result).
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_data.h"
#include "core/buf.h"
#include "pipeline/pipeline.h"
#include "store/store.h"

#define N_PAPERS 10000
#define N_DOCS 1000
#define N_ACTIVE 16               /* conversations in flight */
#define WARMUP_TURNS 600
#define MAX_TURNS 20000           /* timed turns per variant … */
#define BUDGET_NS 20000000000ull  /* … or fewer when 20 s of turns ran out */
#define NOW_MS 1770465600000ll    /* 2026-02-07T12:00:00Z, as bench.c pins */

/* ---- the library ------------------------------------------------------------- */

/* Research topics, most common first; a paper's topic is drawn with a
 * skew: the first is the topic of about 1,800 papers, the last of about
 * 160. Generic words ("learning", "social", "models") are shared by
 * several topics, as in a real library. */
static const char *const topics[] = {
    "deep learning in radiology", "transformer models", "graph neural networks",
    "sleep and memory", "remote work productivity", "reinforcement learning",
    "climate adaptation", "social media and adolescent sleep", "COVID-19 vaccines",
    "gut microbiome", "federated learning privacy", "air pollution and asthma",
    "protein folding", "CRISPR gene editing", "antibiotic resistance", "intermittent fasting",
    "mindfulness interventions for anxiety", "battery recycling", "soil carbon sequestration",
    "microplastics in drinking water", "urban heat islands", "early childhood education",
    "misinformation on social media", "solar cell efficiency", "language acquisition",
    "minimum wage employment", "precision agriculture", "quantum error correction",
    "coral reef bleaching", "wildfire smoke exposure", "bird migration",
    "music therapy for dementia",
};
#define N_TOPICS (sizeof(topics) / sizeof(topics[0]))

static const char *const framings[] = {
    "a systematic review", "a randomized controlled trial", "evidence from a cohort study",
    "in healthcare", "in children and adolescents", "a meta-analysis", "methods and benchmarks",
    "a longitudinal study", "lessons from practice", "a survey",
};

static const char *const academic[] = {
    "study", "analysis", "results", "evidence", "effects", "data", "approach", "outcomes",
    "methods", "sample size", "limitations", "participants", "model", "significant",
};

/* BENCH_COALESCE=0: SQLite's own VFS for every store of the run. */
static int coalesce = 1;

#define PICK(list) (list)[bench_rand() % (sizeof(list) / sizeof((list)[0]))]

static size_t skewed_topic(void)
{
    double u = (bench_rand() + 0.5) / 2147483648.0;
    size_t i = (size_t)(N_TOPICS * u * u);

    return i < N_TOPICS ? i : N_TOPICS - 1;
}

/* Title: topic, a framing or synthetic words. Abstract: 80–200 words,
 * synthetic words with the topic named a few times, academic words and
 * now and then a second topic. */
static void make_paper(struct keel_buf *title, struct keel_buf *abstract)
{
    size_t topic = skewed_topic();
    int words = 80 + (int)(bench_rand() % 120), done = 0;

    keel_buf_reset(title);
    keel_buf_addf(title, "%s:", topics[topic]);
    if (bench_rand() % 2)
        keel_buf_addf(title, " %s", PICK(framings));
    else
        bench_add_words(title, 2 + (int)(bench_rand() % 4));
    keel_buf_reset(abstract);
    while (done < words) {
        int run = 8 + (int)(bench_rand() % 12);
        unsigned what = bench_rand() % 10;

        bench_add_words(abstract, run);
        done += run;
        if (what < 3)
            keel_buf_addf(abstract, " %s", topics[topic]);
        else if (what < 9)
            keel_buf_addf(abstract, " %s", PICK(academic));
        else
            keel_buf_addf(abstract, " %s", topics[skewed_topic()]);
        keel_buf_addc(abstract, bench_rand() % 3 ? ',' : '.');
        done += 2;
    }
}

/* ---- the corpus -------------------------------------------------------------- */

static const char *const payers[] = {
    "Sunshine Health", "United Healthcare", "Aetna Better Health", "Humana",
    "Molina Healthcare", "Simply Healthcare",
};

static const struct {
    const char *title;    /* the document and section subject */
    const char *noun;     /* how sentences name it */
} subjects[] = {
    {"Appeals", "an appeal"},
    {"Grievances", "a grievance"},
    {"Prior authorization", "prior authorization"},
    {"Eligibility", "eligibility"},
    {"Claims", "a claim"},
    {"Benefits", "covered benefits"},
    {"Contact information", "member services"},
};
#define N_SUBJECTS (sizeof(subjects) / sizeof(subjects[0]))

static const char *const states[] = {"Florida", "Texas", "Georgia", "Ohio", "California",
                                     "New York"};
static const char *const programs[] = {"Medicaid", "Medicare", "Marketplace", "CHIP"};
static const char *const subsections[] = {"Who can ask", "How to file", "Deadlines",
                                          "What happens next", "Contact", "Forms"};

/* Health-plan sentences: {plan}, {subject} and {n} (a number) are
 * filled in. */
static const char *const sentences[] = {
    "Members of {plan} can ask about {subject} by phone, by mail or through the member portal.",
    "{plan} must receive a request about {subject} within {n} calendar days of the notice.",
    "A provider may act on behalf of a member for {subject} with the member's written consent.",
    "Call {plan} member services at 1-800-555-01{n} for help with {subject}.",
    "Standard decisions on {subject} are made within {n} days; expedited decisions within 72 hours.",
    "If {plan} denies the request, the member can ask for a state fair hearing.",
    "Eligibility for {plan} is checked every month, so keep your address current.",
    "Providers submit claims to {plan} within {n} days of the date of service.",
    "Prior authorization from {plan} is needed for inpatient stays, imaging and some drugs.",
    "A grievance is a complaint to {plan} about the quality of care or service you received.",
    "An appeal asks {plan} to review a decision to deny, reduce or end a service.",
    "The member handbook of {plan} lists covered benefits and what needs {subject}.",
};

static void add_sentence(struct keel_buf *buf, const char *tmpl, const char *plan,
                         const char *subject, int number)
{
    for (const char *p = tmpl; *p;) {
        if (!strncmp(p, "{plan}", 6)) {
            keel_buf_adds(buf, plan);
            p += 6;
        } else if (!strncmp(p, "{subject}", 9)) {
            keel_buf_adds(buf, subject);
            p += 9;
        } else if (!strncmp(p, "{n}", 3)) {
            keel_buf_addf(buf, "%d", number);
            p += 3;
        } else {
            keel_buf_addc(buf, *p++);
        }
    }
}

/* Three to five chunks of about a kilobyte: sentences about the
 * document's plan and subject between runs of synthetic words. */
static size_t make_document(int d, char *title, size_t title_n, struct keel_buf *texts,
                            char sections[][96], struct store_chunk *chunks)
{
    const char *payer = PICK(payers);
    size_t subject = bench_rand() % N_SUBJECTS, n = 3 + bench_rand() % 3;

    snprintf(title, title_n, "%s %s: %s %s (%d)", payer, subjects[subject].title, PICK(states),
             PICK(programs), d);
    for (size_t c = 0; c < n; c++) {
        struct keel_buf *text = &texts[c];

        keel_buf_reset(text);
        snprintf(sections[c], 96, "%s > %s", subjects[subject].title, PICK(subsections));
        while (text->len < 900) {
            if (text->len)
                keel_buf_addc(text, ' ');
            add_sentence(text, PICK(sentences), payer, subjects[subject].noun,
                         10 + (int)(bench_rand() % 80));
            keel_buf_addc(text, ' ');
            bench_add_words(text, 8 + (int)(bench_rand() % 16));
            keel_buf_addc(text, '.');
        }
        chunks[c].section = sections[c];
        chunks[c].text = text->data;
    }
    return n;
}

static int fill(struct store *store, long *n_chunks)
{
    struct keel_buf title, abstract, texts[5];
    char doc_title[160], id[32], sections[5][96];
    struct store_chunk chunks[5];
    struct keel_error err;
    char source[] = "bench";
    int rc = 0;

    keel_buf_init(&title, 0);
    keel_buf_init(&abstract, 0);
    for (int c = 0; c < 5; c++)
        keel_buf_init(&texts[c], 0);
    *n_chunks = 0;
    for (int i = 0; i < N_PAPERS && !rc; i++) {
        struct store_paper paper = {0};
        char doi[32];
        make_paper(&title, &abstract);
        snprintf(doi, sizeof(doi), "10.9999/pipeline.%d", i);
        paper.title = title.data;
        paper.abstract = abstract.data;
        paper.year = bench_rand() % 10 ? 1995 + (int)(bench_rand() % 32) : 0;
        paper.doi = doi;
        paper.is_open_access = bench_rand() % 3 == 0;
        paper.source = source;
        rc = store_put_paper(store, &paper, NULL, &err);
    }
    for (int d = 0; d < N_DOCS && !rc; d++) {
        size_t n = make_document(d, doc_title, sizeof(doc_title), texts, sections, chunks);
        struct store_document doc = {id, doc_title, id, "en"};
        snprintf(id, sizeof(id), "plans/doc-%04d.md", d);
        rc = store_put_document(store, &doc, chunks, n, NULL, &err);
        *n_chunks += (long)n;
    }
    if (rc)
        fprintf(stderr, "keel-bench: filling the store: %s: %s\n", err.field, err.message);
    keel_buf_release(&title);
    keel_buf_release(&abstract);
    for (int c = 0; c < 5; c++)
        keel_buf_release(&texts[c]);
    return rc;
}

/* ---- conversations ------------------------------------------------------------- */

enum { SCHOLAR, PAYER };

struct script {
    int pack;
    const char *messages[6];   /* NULL-terminated */
};

static const struct script scripts[] = {
    {SCHOLAR, {"hi there",
               "Find 10 papers from the last 3 years about transformer models in healthcare",
               "What does the second paper say about sample size?",
               "Thanks, that was helpful!"}},
    {SCHOLAR, {"My research question is whether remote work affects productivity.",
               "Can you find me some recent papers on this topic?",
               "Only open access ones please",
               "Summarize these papers for me"}},
    {SCHOLAR, {"Search for open-access papers on CRISPR gene editing published since 2020",
               "papers on graph neural networks between 2018 and 2022",
               "What are the limitations of this study?"}},
    {SCHOLAR, {"Get me literature on soil carbon sequestration from 2015 to 2019",
               "Show me newest preprints about protein folding, open access only",
               "Could you pull up the top 20 articles on federated learning privacy?",
               "thanks"}},
    {SCHOLAR, {"I'm focusing on microplastics in drinking water",
               "I need up-to-date research on this",
               "Recommend several papers that examine social media use and adolescent sleep"}},
    {SCHOLAR, {"Are there any meta-analyses of mindfulness interventions for anxiety?",
               "Find papers in my library about sleep and memory",
               "hello"}},
    {PAYER, {"How do I file an appeal?",
             "Sunshine",
             "What is the deadline for a grievance?"}},
    {PAYER, {"What is the timeframe for prior authorization and also how do I file a grievance "
             "with Sunshine Health?",
             "thanks"}},
    {PAYER, {"What is the status of my prior authorization?",
             "How do I check eligibility?",
             "United Healthcare"}},
    {PAYER, {"How do I submit a claim as a provider?",
             "UHC",
             "what about Aetna?"}},
    {PAYER, {"hi",
             "Who do I call about eligibility for Molina Healthcare in Texas?",
             "What are the prior authorization rules as well as the appeal deadlines?"}},
    {PAYER, {"What is the dosage of ibuprofen?",
             "How do I file an appeal?",
             "Humana",
             "What about claims?"}},
};
#define N_SCRIPTS (sizeof(scripts) / sizeof(scripts[0]))

struct conversation {
    const struct script *script;   /* NULL: start a new one */
    int next;                      /* its next message */
    char id[160];
};

struct mix {
    long turns[2];
    long new_conversations;
    long clarifications;
    long tool_calls;
};

/* Per-stage time, between the stages' start events. */
#define N_STAGE_SLOTS 12
static const char *const stage_names[N_STAGE_SLOTS] = {
    "request", "load", "classify", "decide", "plan", "clarify",
    "resolve", "compose", "artifact", "remember", "publish", "free",
};

struct stage_clock {
    uint64_t ns[N_STAGE_SLOTS];
    int current;
    uint64_t since;
};

static void on_event(void *ctx, const struct pipeline_event *event)
{
    struct stage_clock *sc = ctx;
    const char *stage = event->stage;
    uint64_t now;

    if (strcmp(event->kind, "start"))
        return;
    now = bench_now_ns();
    sc->ns[sc->current] += now - sc->since;
    sc->since = now;
    for (int i = 1; i < N_STAGE_SLOTS; i++)
        if (!strcmp(stage_names[i], stage))
            sc->current = i;
}

struct run {
    struct pipeline *pl[2];
    struct conversation active[N_ACTIVE];
    struct mix mix;
    struct stage_clock *stages;   /* NULL: not measured */
    long turn_no;                 /* turns run, for the pinned clock */
    int events_list;              /* BENCH_EVENTS_LIST=1: results carry events[] */
};

/* One turn of a random conversation; *ns is its time. */
static int one_turn(struct run *r, uint64_t *ns)
{
    struct conversation *c = &r->active[bench_rand() % N_ACTIVE];
    struct keel_error err;
    struct turn_request req = {0};
    json_t *result = NULL;
    const char *message, *id;
    uint64_t t0, t1;
    int rc;

    if (!c->script) {
        c->script = &scripts[bench_rand() % N_SCRIPTS];
        c->next = 0;
        c->id[0] = '\0';
        r->mix.new_conversations++;
    }
    message = c->script->messages[c->next];
    req.conversation_id = c->id;
    req.message = message;
    req.message_len = strlen(message);
    req.now_ms = NOW_MS + 1000 * (int64_t)r->turn_no++;
    req.no_events_list = !r->events_list;
    if (r->stages) {
        req.on_event = on_event;
        req.event_ctx = r->stages;
        r->stages->current = 0;
    }
    t0 = bench_now_ns();
    if (r->stages)
        r->stages->since = t0;
    rc = pipeline_turn(r->pl[c->script->pack], &req, &result, &err);
    if (r->stages) {
        uint64_t now = bench_now_ns();
        r->stages->ns[r->stages->current] += now - r->stages->since;
        r->stages->since = now;
    }
    if (rc) {
        fprintf(stderr, "keel-bench: turn \"%s\": %s: %s\n", message, err.field, err.message);
        return rc;
    }
    r->mix.turns[c->script->pack]++;
    r->mix.clarifications += json_is_string(json_object_get(result, "clarification"));
    r->mix.tool_calls += (long)json_array_size(json_object_get(result, "tools_called"));
    id = json_string_value(json_object_get(result, "conversation_id"));
    snprintf(c->id, sizeof(c->id), "%s", id ? id : "");
    json_decref(result);
    t1 = bench_now_ns();
    if (r->stages)
        r->stages->ns[N_STAGE_SLOTS - 1] += t1 - r->stages->since;
    if (!c->script->messages[++c->next])
        c->script = NULL;
    *ns = t1 - t0;
    return KEEL_OK;
}

/* ---- memory ------------------------------------------------------------------- */

/* Resets the peak resident size to the current one (Linux 4.0+); 0 when
 * it was reset. */
static int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int ok;

    if (!f)
        return -1;
    ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* VmHWM in MB, or -1. */
static double peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double mb = -1;

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmHWM:", 6)) {
            mb = strtod(line + 6, NULL) / 1024.0;
            break;
        }
    fclose(f);
    return mb;
}

/* ---- one variant ---------------------------------------------------------------- */

struct variant {
    const char *bench;
    const char *sync;       /* KEEL_DB_SYNC, NULL: unset */
    const char *mode;
    const char *note;
    int parallel;           /* one thread per processor unless BENCH_THREADS says */
};

static const struct variant variants[] = {
    {"pipeline.turn", NULL, "NORMAL",
     "WAL, synchronous=NORMAL, one commit per turn: survives a process crash", 0},
    {"pipeline.turn_full", "full", "FULL",
     "WAL, synchronous=FULL, one commit per turn: survives power loss", 0},
    {"pipeline.turn_parallel", NULL, "NORMAL",
     "WAL, synchronous=NORMAL, one commit per turn, a thread per processor with a store "
     "connection each (as keel serve's workers)", 1},
};

/* One thread of turns: its own store connection (as a server worker has)
 * and pipelines, its own conversations and random sequence, its samples
 * in its own slice of the variant's array. */
struct worker {
    pthread_t thread;
    int index;
    const char *path;
    struct store *shared;           /* the store of every thread (NULL: its own) */
    struct run r;
    struct stage_clock stages;
    int want_stages;
    uint64_t *samples;              /* its slice */
    size_t max, n;                  /* slice size, turns timed */
    pthread_barrier_t *ready, *go;  /* warmed up; timing started (NULL: a lone worker) */
    uint64_t *start;                /* set by the main thread between the two */
    int *rss_reset;                 /* reset_peak_rss() of that moment */
    int rc;
    char failed[400];
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char packs[4096];
    struct store *store = NULL;
    struct keel_error err = {0};
    int ok = 0;

    snprintf(packs, sizeof(packs), "%s/packs", bench_root());
    if (w->shared)
        store = w->shared;
    if (store || !store_open(w->path, &store, &err)) {
        const char *cache = getenv("BENCH_STATE_CACHE"), *list = getenv("BENCH_EVENTS_LIST");
        int no_cache = cache && !strcmp(cache, "0");
        w->r.events_list = list && !strcmp(list, "1");
        struct pipeline_options scholar = {.packs_dir = packs, .pack = "scholar", .store = store,
                                           .llm = {"none", NULL, NULL}, .websearch_url = "none",
                                           .no_state_cache = no_cache};
        struct pipeline_options payer = {.packs_dir = packs, .pack = "payer", .store = store,
                                         .llm = {"none", NULL, NULL}, .websearch_url = "none",
                                         .no_state_cache = no_cache};
        ok = !pipeline_new(&scholar, &w->r.pl[SCHOLAR], &err) &&
             !pipeline_new(&payer, &w->r.pl[PAYER], &err);
    }
    if (!ok)
        snprintf(w->failed, sizeof(w->failed), "%.100s: %.250s", err.field, err.message);
    /* the same conversations for every variant; thread 0 as a lone thread */
    bench_seed(0x7475726eu + 7919u * (uint64_t)w->index);
    for (int i = 0; ok && i < WARMUP_TURNS; i++)
        ok = !one_turn(&w->r, &w->samples[0]);
    memset(&w->r.mix, 0, sizeof(w->r.mix));
    if (w->want_stages)
        w->r.stages = &w->stages;
    if (w->ready) {
        pthread_barrier_wait(w->ready);
        pthread_barrier_wait(w->go);
    } else {
        *w->rss_reset = reset_peak_rss();
        *w->start = bench_now_ns();
    }
    while (ok && w->n < w->max && bench_now_ns() - *w->start < BUDGET_NS) {
        if (one_turn(&w->r, &w->samples[w->n]))
            ok = 0;
        else
            w->n++;
    }
    w->rc = !ok;
    pipeline_free(w->r.pl[SCHOLAR]);
    pipeline_free(w->r.pl[PAYER]);
    if (!w->shared)
        store_close(store);
    return NULL;
}

/* BENCH_THREADS (1 to 8), else 1, or for a parallel variant the online
 * processors (at least 2). */
static int thread_count(const struct variant *v)
{
    const char *env = getenv("BENCH_THREADS");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long n = env && *env ? strtol(env, NULL, 10) : !v->parallel ? 1 : cpus > 2 ? cpus : 2;

    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

static int run_variant(const struct variant *v, const char *path, long n_chunks,
                       uint64_t *samples)
{
    const char *want_stages = getenv("BENCH_STAGES");
    const char *want_turns = getenv("BENCH_TURNS");
    size_t max_turns = want_turns && strtol(want_turns, NULL, 10) > 0 &&
                               strtol(want_turns, NULL, 10) < MAX_TURNS
                           ? (size_t)strtol(want_turns, NULL, 10)
                           : MAX_TURNS;
    int threads = thread_count(v), rc = 1, reset = -1;
    struct worker *workers = calloc((size_t)threads, sizeof(*workers));
    pthread_barrier_t ready, go;
    struct mix mix = {0};
    struct stage_clock stages = {0};
    uint64_t start = 0, wall;
    size_t n = 0;
    double rss, tps, p50, p99;

    if (!workers)
        return 1;
    if (v->sync)
        setenv("KEEL_DB_SYNC", v->sync, 1);
    else
        unsetenv("KEEL_DB_SYNC");
    /* What the variants before this one freed goes back to the system,
     * so its rss_mb is its own. */
    malloc_trim(0);
    for (int i = 0; i < threads; i++) {
        struct worker *w = &workers[i];
        w->index = i;
        w->path = path;
        w->want_stages = want_stages && !strcmp(want_stages, "1");
        w->max = max_turns / (size_t)threads;
        w->samples = samples + (size_t)i * w->max;
        w->ready = threads > 1 ? &ready : NULL;
        w->go = &go;
        w->start = &start;
        w->rss_reset = &reset;
    }
    if (threads == 1) {
        /* on this thread: its heap is the one the data was built in, as a
         * lone process's would be */
        worker_main(&workers[0]);
    } else {
        const char *own = getenv("BENCH_SHARED_STORE");
        struct store *shared = NULL;
        struct keel_error err;
        if ((!own || strcmp(own, "0")) &&
            (store_open(path, &shared, &err) || store_share_threads(shared, &err))) {
            fprintf(stderr, "keel-bench: %s: %s\n", v->bench, err.message);
            exit(1);
        }
        for (int i = 0; i < threads; i++)
            workers[i].shared = shared;
        pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
        pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
        for (int i = 0; i < threads; i++)
            if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i])) {
                /* the barriers wait for every thread: without them, give up */
                fprintf(stderr, "keel-bench: %s: could not start %d threads\n", v->bench, threads);
                exit(1);
            }
        pthread_barrier_wait(&ready);
        reset = reset_peak_rss();
        start = bench_now_ns();
        pthread_barrier_wait(&go);
        for (int i = 0; i < threads; i++)
            pthread_join(workers[i].thread, NULL);
        store_close(shared);
        pthread_barrier_destroy(&ready);
        pthread_barrier_destroy(&go);
    }
    wall = bench_now_ns() - start;
    rss = peak_rss_mb();
    rc = 0;
    for (int i = 0; i < threads; i++) {
        struct worker *w = &workers[i];
        if (w->rc) {
            fprintf(stderr, "keel-bench: %s: thread %d: %s\n", v->bench, i,
                    w->failed[0] ? w->failed : "a turn failed");
            rc = 1;
        }
        memmove(samples + n, w->samples, w->n * sizeof(*samples));
        n += w->n;
        mix.turns[SCHOLAR] += w->r.mix.turns[SCHOLAR];
        mix.turns[PAYER] += w->r.mix.turns[PAYER];
        mix.new_conversations += w->r.mix.new_conversations;
        mix.clarifications += w->r.mix.clarifications;
        mix.tool_calls += w->r.mix.tool_calls;
        for (int k = 0; k < N_STAGE_SLOTS; k++)
            stages.ns[k] += w->stages.ns[k];
    }
    free(workers);
    if (rc || !n)
        return 1;
    bench_sort(samples, n);
    tps = (double)n * 1e9 / (double)wall;
    p50 = (double)samples[n / 2] / 1000.0;
    p99 = (double)samples[n * 99 / 100] / 1000.0;
    printf("{\"bench\": \"%s\", \"turns_per_s\": %.0f, \"p50_us\": %.0f, \"p99_us\": %.0f, "
           "\"rss_mb\": %.1f, \"n\": %zu, \"threads\": %d, \"synchronous\": \"%s\", "
           "\"coalesce\": %s, "
           "\"note\": \"%s%s\", \"papers\": %d, \"documents\": %d, \"chunks\": %ld, "
           "\"scholar_turns\": %ld, \"payer_turns\": %ld, \"new_conversations\": %ld, "
           "\"clarifications\": %ld, \"tool_calls\": %ld, \"meets_target\": %s}\n",
           v->bench, tps, p50, p99, rss, n, threads, v->mode, coalesce ? "true" : "false", v->note,
           reset ? " (rss_mb: peak of the whole process, could not reset it)" : "", N_PAPERS,
           N_DOCS, n_chunks, mix.turns[SCHOLAR], mix.turns[PAYER], mix.new_conversations,
           mix.clarifications, mix.tool_calls,
           tps >= 5000 && p99 <= 2000 && rss >= 0 && rss <= 30 ? "true" : "false");
    if (want_stages && !strcmp(want_stages, "1")) {
        printf("{\"bench\": \"%s.stages\", \"unit\": \"mean_us\", \"n\": %zu", v->bench, n);
        for (int i = 0; i < N_STAGE_SLOTS; i++)
            printf(", \"%s\": %.1f", stage_names[i], (double)stages.ns[i] / 1000.0 / (double)n);
        printf("}\n");
    }
    fflush(stdout);
    return 0;
}

int bench_pipeline(void)
{
    char dir[] = "/tmp/keel-bench-XXXXXX", path[64] = "";
    char *saved_sync = getenv("KEEL_DB_SYNC") ? strdup(getenv("KEEL_DB_SYNC")) : NULL;
    uint64_t *samples = malloc(MAX_TURNS * sizeof(*samples));
    struct store *store = NULL;
    struct keel_error err;
    long n_chunks = 0;
    int rc = 1;

    if (!samples || !mkdtemp(dir))
        goto out;
    coalesce = !getenv("BENCH_COALESCE") || strcmp(getenv("BENCH_COALESCE"), "0");
    store_sqlite_wal_coalescing(coalesce);
    snprintf(path, sizeof(path), "%s/pipeline.db", dir);
    unsetenv("KEEL_DB_SYNC");   /* building the data: NORMAL */
    if (store_open(path, &store, &err)) {
        fprintf(stderr, "keel-bench: %s: %s\n", err.field, err.message);
        goto out;
    }
    bench_seed(0x6b65656cu);
    if (fill(store, &n_chunks))
        goto out;
    store_close(store);
    store = NULL;
    rc = 0;
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        const char *only = getenv("BENCH_VARIANT");
        if (only && *only && strcmp(variants[i].bench + strlen("pipeline."), only))
            continue;
        rc |= run_variant(&variants[i], path, n_chunks, samples);
    }
out:
    store_close(store);
    store_sqlite_wal_coalescing(1);
    if (saved_sync)
        setenv("KEEL_DB_SYNC", saved_sync, 1);
    else
        unsetenv("KEEL_DB_SYNC");
    free(saved_sync);
    bench_remove_db(path, dir);
    free(samples);
    return rc;
}
