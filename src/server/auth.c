/*
 * auth.c — API key tokens and hashes (auth.h). SHA-256 comes from
 * OpenSSL's libcrypto; randomness from getrandom().
 */
#include "server/auth.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/id.h"

int auth_token_new(char *token, size_t n, struct keel_error *err)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
    unsigned char bytes[40];
    size_t got = 0;

    if (n < AUTH_TOKEN_MAX)
        return keel_error_set(err, KEEL_EINVAL, "token", "buffer too small");
    while (got < sizeof(bytes)) {
        ssize_t r = getrandom(bytes + got, sizeof(bytes) - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return keel_error_set(err, KEEL_EIO, "token", "no randomness from the system");
        got += (size_t)r;
    }
    memcpy(token, "keel_", 5);
    for (size_t i = 0; i < sizeof(bytes); i++)
        token[5 + i] = alphabet[bytes[i] & 31];   /* 5 bits of each byte: 200 bits */
    token[5 + sizeof(bytes)] = '\0';
    return KEEL_OK;
}

void auth_token_hash(const char *token, char out[AUTH_HASH_MAX])
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;

    out[0] = '\0';
    if (!EVP_Digest(token, strlen(token), digest, &len, EVP_sha256(), NULL))
        return;   /* an empty hash matches no key */
    for (unsigned int i = 0; i < len && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

int auth_key_create(struct store *store, const char *user, const char *role, int64_t now_ms,
                    char *token, size_t token_n, char *id, size_t id_n, struct keel_error *err)
{
    char hash[AUTH_HASH_MAX];
    struct store_key key;
    int rc;

    if (id_n < KEEL_ID_MAX)
        return keel_error_set(err, KEEL_EINVAL, "id", "buffer too small");
    if ((rc = auth_token_new(token, token_n, err)))
        return rc;
    auth_token_hash(token, hash);
    if (!hash[0])
        return keel_error_set(err, KEEL_EIO, "token", "cannot hash the token");
    keel_id_new("key", id, id_n);
    key.id = id;
    key.user = (char *)user;
    key.role = (char *)role;
    key.created_ms = now_ms;
    key.revoked_ms = 0;
    return store_key_put(store, &key, hash, err);
}
