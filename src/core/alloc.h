/*
 * alloc.h — the one allocation wrapper of keel.
 *
 * All library allocation goes through these functions (jansson is pointed
 * at them too by keel_json_init()), so tests can count live allocations and
 * make the Nth allocation fail, the way SQLite's and curl's torture tests do.
 * The library reports failure as NULL / KEEL_ENOMEM; only the binary's top
 * level may decide to abort.
 */
#ifndef KEEL_CORE_ALLOC_H
#define KEEL_CORE_ALLOC_H

#include <stddef.h>

/* malloc/calloc/realloc/free with failure injection. keel_malloc(0) returns a
 * unique pointer (never NULL on success). keel_realloc leaves `ptr` intact
 * when it fails. keel_free(NULL) is a no-op. */
void *keel_malloc(size_t size);
void *keel_calloc(size_t count, size_t size);
void *keel_realloc(void *ptr, size_t size);
void keel_free(void *ptr);

/* Copies of a string / the first `n` bytes of it, NUL-terminated. NULL on
 * allocation failure. The caller frees with keel_free. */
char *keel_strdup(const char *s);
char *keel_strndup(const char *s, size_t n);

/* Failure injection: after `n` more successful allocations the next one (and
 * every one after it while `sticky` is nonzero) fails. n < 0 switches
 * injection off. Thread-safe. */
void keel_alloc_fail_after(long n, int sticky);

/* Number of allocations made through the wrapper that have not been freed
 * yet (realloc counts as neither), counted while keel_alloc_count_live(1)
 * is in force (tests switch it on: the count costs an atomic add on every
 * allocation, shared by all threads). Compare two readings taken while it
 * is on. Thread-safe. */
void keel_alloc_count_live(int on);
long keel_alloc_live(void);

/* How many allocations have failed so far (injected or real). Code that
 * calls a library which may swallow an allocation failure (jansson's
 * parser drops a byte, its dumper a key) compares it before and after. */
long keel_alloc_failures(void);

#endif
