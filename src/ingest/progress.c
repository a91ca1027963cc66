/*
 * progress.c — what ingestion shows a person: a one-line progress bar for
 * long runs on a terminal, and warnings that do not run into it. It reads the real monotonic clock: pinning keel's clock must
 * not freeze the bar.
 */
#include "ingest/ingest.h"

#include <stdarg.h>
#include <time.h>

void ingest_warning(const struct ingest_output *out, const char *fmt, ...)
{
    va_list ap;

    if (!out || !out->warnings)
        return;
    if (out->progress)
        fputc('\n', out->progress);
    fputs("keel: ", out->warnings);
    va_start(ap, fmt);
    vfprintf(out->warnings, fmt, ap);
    va_end(ap);
    fputc('\n', out->warnings);
}

static long long monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void draw(struct ingest_progress *bar)
{
    int width = 30, filled = bar->total > 0 ? (int)(bar->done * width / bar->total) : 0;

    fprintf(bar->stream, "\r%s [", bar->label);
    for (int i = 0; i < width; i++)
        fputc(i < filled ? '=' : (i == filled ? '>' : ' '), bar->stream);
    fprintf(bar->stream, "] %ld/%ld", bar->done, bar->total);
    fflush(bar->stream);
}

void progress_start(struct ingest_progress *bar, FILE *stream, const char *label, long total)
{
    bar->stream = stream;
    bar->label = label;
    bar->total = total;
    bar->done = 0;
    bar->last_ms = 0;
    if (stream)
        draw(bar);
}

void progress_step(struct ingest_progress *bar)
{
    long long now;

    bar->done++;
    if (!bar->stream)
        return;
    now = monotonic_ms();
    if (now - bar->last_ms >= 100 || bar->done == bar->total) {
        bar->last_ms = now;
        draw(bar);
    }
}

void progress_done(struct ingest_progress *bar)
{
    if (!bar->stream)
        return;
    draw(bar);
    fputc('\n', bar->stream);
    fflush(bar->stream);
}
