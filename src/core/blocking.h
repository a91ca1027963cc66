/*
 * blocking.h — a thread about to wait on something slow (the network: a
 * model, a paper provider, a web search) says so, and what it holds that
 * other threads need is let go of until it has finished waiting.
 *
 * A server's worker holds the shared store for a whole turn (one hand-
 * over per turn instead of one per store call) and sets hooks that give
 * it up and take it back (store_yield, store_resume): two workers then
 * run their turns' work one at a time, as fast as one, while a turn that
 * waits on a model does not hold up the other. Threads without hooks
 * (the CLI, tests, benches) are not affected.
 */
#ifndef KEEL_CORE_BLOCKING_H
#define KEEL_CORE_BLOCKING_H

/* This thread's hooks: `begin(ctx)` when it starts waiting, `end(ctx)`
 * when it is done. NULLs remove them. */
void keel_blocking_hooks(void (*begin)(void *ctx), void (*end)(void *ctx), void *ctx);

/* Around a wait. They nest: only the outermost pair calls the hooks. */
void keel_blocking_begin(void);
void keel_blocking_end(void);

#endif
