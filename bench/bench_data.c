/*
 * bench_data.c — the seeded generator and synthetic vocabulary of
 * bench_data.h.
 */
#include "bench_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N_WORDS 8000

static const char *const syllables[] = {"ka", "lo", "mi", "ne", "ru", "ta", "so", "vi",
                                        "pe", "da", "gu", "ri", "zo", "ba", "fe", "hu",
                                        "jo", "qi", "we", "xa"};
static char vocabulary[N_WORDS][8];
static int vocabulary_ready;

/* Per thread: the pipeline group runs turns on several threads. */
static _Thread_local uint64_t rng = 0x6b65656cu;

void bench_seed(uint64_t seed)
{
    rng = seed;
}

uint32_t bench_rand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static void make_vocabulary(void)
{
    for (int i = 0; i < N_WORDS; i++)
        snprintf(vocabulary[i], sizeof(vocabulary[i]), "%s%s%s", syllables[i % 20],
                 syllables[(i / 20) % 20], syllables[(i / 400) % 20]);
    vocabulary_ready = 1;
}

/* Index i drawn with probability falling off like 1/i. */
const char *bench_word(void)
{
    double u = (bench_rand() + 1.0) / 4294967297.0;
    int i = (int)(N_WORDS * u * u * u);

    if (!vocabulary_ready)
        make_vocabulary();
    return vocabulary[i < N_WORDS ? i : N_WORDS - 1];
}

void bench_add_words(struct keel_buf *buf, int words)
{
    for (int i = 0; i < words; i++)
        keel_buf_addf(buf, "%s%s", buf->len ? " " : "", bench_word());
}

void bench_sentence(struct keel_buf *buf, int words)
{
    keel_buf_reset(buf);
    bench_add_words(buf, words);
}

void bench_remove_db(const char *path, const char *dir)
{
    char file[4200];

    if (!path[0])
        return;
    if (getenv("BENCH_KEEP_DB")) {
        fprintf(stderr, "keel-bench: kept %s\n", path);
        return;
    }
    snprintf(file, sizeof(file), "%s-wal", path);
    unlink(file);
    snprintf(file, sizeof(file), "%s-shm", path);
    unlink(file);
    unlink(path);
    rmdir(dir);
}
