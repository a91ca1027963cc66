/*
 * blocking.c — this thread's hooks around its waits (blocking.h).
 */
#include "core/blocking.h"

#include <stddef.h>

static _Thread_local void (*hook_begin)(void *);
static _Thread_local void (*hook_end)(void *);
static _Thread_local void *hook_ctx;
static _Thread_local int depth;

void keel_blocking_hooks(void (*begin)(void *ctx), void (*end)(void *ctx), void *ctx)
{
    hook_begin = begin;
    hook_end = end;
    hook_ctx = ctx;
    depth = 0;
}

void keel_blocking_begin(void)
{
    if (depth++ == 0 && hook_begin)
        hook_begin(hook_ctx);
}

void keel_blocking_end(void)
{
    if (depth > 0 && --depth == 0 && hook_end)
        hook_end(hook_ctx);
}
