/*
 * auth.h — API keys: tokens, their hashes, and the roles they carry.
 *
 * A token is "keel_" and 40 base-32 characters from getrandom() (200
 * bits); only its SHA-256 (hex) is stored. A key has an id ("key_…"),
 * the user it acts for and a role: owner, editor or viewer. In a pack
 * whose roles have other names, owner and editor act as the pack's
 * default role and viewer as its first read-only role
 * (pipeline_role_for).
 */
#ifndef KEEL_SERVER_AUTH_H
#define KEEL_SERVER_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

#define AUTH_TOKEN_MAX 64
#define AUTH_HASH_MAX  65   /* 64 hex digits and NUL */

/* Writes a new token into `token` (n >= AUTH_TOKEN_MAX). KEEL_EIO when
 * the system has no randomness to give. */
int auth_token_new(char *token, size_t n, struct keel_error *err);

/* The hex SHA-256 of `token` into `out` (AUTH_HASH_MAX bytes). */
void auth_token_hash(const char *token, char out[AUTH_HASH_MAX]);

/* Creates a key for `user` with `role` at `now_ms` and stores it; the
 * token (shown once) goes to `token`, the key's id to `id` (n >= 48). */
int auth_key_create(struct store *store, const char *user, const char *role, int64_t now_ms,
                    char *token, size_t token_n, char *id, size_t id_n, struct keel_error *err);

#endif
