/*
 * embed.c — the built-in embedder: feature hashing (the "hashing
 * trick"). Each feature of a text — a word, a pair of neighbouring
 * words, a character trigram of a word — is hashed (64-bit FNV-1a with
 * a seed per kind) to one of MEMORY_DIM positions and a sign, and adds
 * its weight there; the vector is then L2-normalised, so the dot
 * product of two is their cosine similarity. Words are case-folded
 * (ASCII) and lightly stemmed (plural and -ing/-ed endings), so
 * "queries" and "query", "generated" and "generate" meet.
 */
#include <math.h>
#include <string.h>

#include "memory/memory.h"

#define WORD_MAX 48
#define W_WORD 1.0f
#define W_PAIR 0.6f
#define W_GRAM 0.25f
#define W_TASK 2.0f     /* the task weighs twice the summary */

enum feature { F_WORD = 1, F_PAIR = 2, F_GRAM = 3 };

#define FNV_PRIME 1099511628211ull

/* The hash a feature of `kind` starts from. */
#define SEED(kind) (14695981039346656037ull ^ (uint64_t)(kind) * 0x9e3779b97f4a7c15ull)

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
    return h;
}

/* Adds `weight` at the position and with the sign of hash `h`. */
static void add_hashed(float *v, uint64_t h, float weight)
{
    h ^= h >> 29;   /* mix the high bits into the position */
    v[h % MEMORY_DIM] += (h >> 63) ? -weight : weight;
}

/* A feature: the words `a` and, for a pair, `b` after a space. */
static void add(float *v, enum feature kind, const char *a, size_t na, const char *b, size_t nb,
                float weight)
{
    uint64_t h = fnv(SEED(kind), a, na);

    if (b)
        h = fnv(fnv(h, " ", 1), b, nb);
    add_hashed(v, h, weight);
}

/* The character trigram at `g`: fnv() of its 3 bytes, unrolled (a run's
 * trigrams are most of its features). */
static void add_gram(float *v, const char *g, float weight)
{
    uint64_t h = (SEED(F_GRAM) ^ (unsigned char)g[0]) * FNV_PRIME;

    h = (h ^ (unsigned char)g[1]) * FNV_PRIME;
    add_hashed(v, (h ^ (unsigned char)g[2]) * FNV_PRIME, weight);
}

/* Strips a plural or -ing/-ed ending from a lower-case word, then a
 * final e, so "generate", "generated" and "generating" all become
 * "generat". */
static size_t stem(char *w, size_t n)
{
    if (n > 4 && !memcmp(w + n - 3, "ies", 3)) {
        w[n - 3] = 'y';
        n -= 2;
    } else if (n > 5 && !memcmp(w + n - 3, "ing", 3)) {
        n -= 3;
    } else if (n > 4 && !memcmp(w + n - 2, "ed", 2)) {
        n -= 2;
    } else if (n > 4 && !memcmp(w + n - 4, "sses", 4)) {
        n -= 2;
    } else if (n > 3 && w[n - 1] == 's' && w[n - 2] != 's' && w[n - 2] != 'u') {
        n -= 1;
    }
    if (n > 4 && w[n - 1] == 'e')
        n -= 1;
    return n;
}

/* The next word of `*p`: ASCII letters and digits, case-folded, and any
 * bytes of UTF-8 characters. Returns its length (0 at the end). */
static size_t next_word(const char **p, char *out)
{
    const unsigned char *s = (const unsigned char *)*p;
    size_t n = 0;

    while (*s && !(((*s | 32) >= 'a' && (*s | 32) <= 'z') || (*s >= '0' && *s <= '9') || *s >= 0x80))
        s++;
    while (*s && (((*s | 32) >= 'a' && (*s | 32) <= 'z') || (*s >= '0' && *s <= '9') || *s >= 0x80)) {
        if (n < WORD_MAX)
            out[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
        s++;
    }
    *p = (const char *)s;
    return n;
}

static void add_text(float *v, const char *text, float scale)
{
    char prev[WORD_MAX], word[WORD_MAX + 2];
    size_t prev_n = 0, n;
    const char *p = text;

    while ((n = next_word(&p, word + 1))) {
        n = stem(word + 1, n);
        add(v, F_WORD, word + 1, n, NULL, 0, W_WORD * scale);
        if (prev_n)
            add(v, F_PAIR, prev, prev_n, word + 1, n, W_PAIR * scale);
        word[0] = '#';   /* trigrams see the word's edges: "#qu", "ry#" */
        word[n + 1] = '#';
        for (size_t i = 0; i + 3 <= n + 2; i++)
            add_gram(v, word + i, W_GRAM * scale);
        memcpy(prev, word + 1, n);
        prev_n = n;
    }
}

void memory_embed(const char *task, const char *summary, float out[MEMORY_DIM])
{
    double norm = 0;

    memset(out, 0, MEMORY_DIM * sizeof(float));
    add_text(out, task ? task : "", W_TASK);
    add_text(out, summary ? summary : "", 1.0f);
    for (int i = 0; i < MEMORY_DIM; i++)
        norm += (double)out[i] * out[i];
    if (norm > 0) {
        float inv = (float)(1.0 / sqrt(norm));
        for (int i = 0; i < MEMORY_DIM; i++)
            out[i] *= inv;
    }
}

float memory_dot(const float *a, const float *b, int dim)
{
    /* 16 partial sums in four 4-float vectors (GCC/clang vector
     * extensions: SSE on any x86-64), so the loop runs at memory speed
     * (../shared/DEPENDENCIES.md) without -O3 or -march. */
    typedef float v4 __attribute__((vector_size(16)));
    v4 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    float sum = 0;
    int i = 0;

    for (; i + 16 <= dim; i += 16) {
        v4 a0, a1, a2, a3, b0, b1, b2, b3;
        memcpy(&a0, a + i, 16), memcpy(&a1, a + i + 4, 16);
        memcpy(&a2, a + i + 8, 16), memcpy(&a3, a + i + 12, 16);
        memcpy(&b0, b + i, 16), memcpy(&b1, b + i + 4, 16);
        memcpy(&b2, b + i + 8, 16), memcpy(&b3, b + i + 12, 16);
        s0 += a0 * b0;
        s1 += a1 * b1;
        s2 += a2 * b2;
        s3 += a3 * b3;
    }
    s0 += s1 + s2 + s3;
    for (; i < dim; i++)
        sum += a[i] * b[i];
    return sum + s0[0] + s0[1] + s0[2] + s0[3];
}
