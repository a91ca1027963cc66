/*
 * export.c — the per-conversation JSONL export (seed 001's
 * sessions/artifacts/<session>.jsonl): one artifact per line, appended
 * after the turn's transaction committed. The store is the source of
 * truth; the export is a convenience copy for tools that read files, so
 * a failed append is logged by the caller and never fails a turn.
 *
 * File names come from conversation ids, which come from outside: only
 * [A-Za-z0-9_-] survive, every other byte becomes '_', and a name that
 * changed (or was longer than 100 bytes) gets a hash of the whole id, so
 * "a.b" and "a:b" do not share "a_b". No name can be "..", hold a slash
 * or start with a dot. The file is opened O_APPEND | O_NOFOLLOW.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact/artifact.h"
#include "core/json.h"

#define NAME_KEEP 100

void artifact_export_name(const char *conversation_id, char *out, size_t n)
{
    const char *id = conversation_id ? conversation_id : "";
    size_t len = strlen(id), o = 0;
    uint64_t hash = 1469598103934665603ULL;   /* FNV-1a 64 */
    int changed = len > NAME_KEEP || len == 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-';
        hash = (hash ^ c) * 1099511628211ULL;
        if (i < NAME_KEEP && o + 1 < n)
            out[o++] = keep ? (char)c : '_';
        changed |= !keep;
    }
    if (o == 0 && n > 1)
        out[o++] = '_';
    if (changed && o + 18 < n)
        o += (size_t)snprintf(out + o, n - o, "-%016llx", (unsigned long long)hash);
    snprintf(out + o, o < n ? n - o : 0, ".jsonl");
}

void artifact_export_default_dir(const char *db, char *out, size_t n)
{
    size_t len;

    out[0] = '\0';
    if (!db || !*db || !strcmp(db, "mem:"))
        return;
    if (!strncmp(db, "sqlite:", 7))
        db += 7;
    len = strlen(db);
    if (len > 3 && !strcmp(db + len - 3, ".db"))
        len -= 3;
    if (len + sizeof(".artifacts") > n)
        return;
    snprintf(out, n, "%.*s.artifacts", (int)len, db);
}

/* mkdir -p: `dir` and its missing parents, mode 0700. */
static int make_dirs(const char *dir, struct keel_error *err)
{
    char path[4096];
    size_t n = strlen(dir);

    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0700) && errno != EEXIST)
            return keel_error_set(err, KEEL_EIO, "artifacts_dir", "cannot create %s: %s", path,
                                  strerror(errno));
        path[i] = i < n ? '/' : '\0';
    }
    return KEEL_OK;
}

int artifact_export_append(const char *dir, const char *conversation_id, const json_t *artifact,
                           struct keel_error *err)
{
    char name[ARTIFACT_FILE_MAX], path[4096 + ARTIFACT_FILE_MAX];
    struct keel_buf line;
    ssize_t wrote;
    int fd, rc;

    if (!dir || !*dir)
        return keel_error_set(err, KEEL_EINVAL, "artifacts_dir", "no export directory");
    if (strlen(dir) >= 4096)
        return keel_error_set(err, KEEL_EINVAL, "artifacts_dir", "is longer than 4095 bytes");
    if ((rc = make_dirs(dir, err)))
        return rc;
    artifact_export_name(conversation_id, name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    keel_buf_init(&line, ARTIFACT_JSON_MAX + 2);
    if ((rc = keel_json_append(&line, artifact, JSON_COMPACT)) || (rc = keel_buf_addc(&line, '\n'))) {
        keel_buf_release(&line);
        return keel_error_set(err, rc == KEEL_ETOOBIG ? KEEL_ETOOBIG : KEEL_ENOMEM,
                              "artifacts_dir", "the artifact cannot be written as one line");
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        keel_buf_release(&line);
        return keel_error_set(err, KEEL_EIO, "artifacts_dir", "cannot open %s: %s", path,
                              strerror(errno));
    }
    wrote = write(fd, line.data, line.len);
    rc = wrote == (ssize_t)line.len ? KEEL_OK
                                    : keel_error_set(err, KEEL_EIO, "artifacts_dir",
                                                     "cannot append to %s: %s", path,
                                                     wrote < 0 ? strerror(errno) : "short write");
    if (close(fd) && !rc)
        rc = keel_error_set(err, KEEL_EIO, "artifacts_dir", "cannot close %s: %s", path,
                            strerror(errno));
    keel_buf_release(&line);
    return rc;
}

int artifact_export_remove(const char *dir, const char *conversation_id)
{
    char name[ARTIFACT_FILE_MAX], path[4096 + ARTIFACT_FILE_MAX];

    if (!dir || !*dir || strlen(dir) >= 4096)
        return KEEL_OK;
    artifact_export_name(conversation_id, name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return unlink(path) && errno != ENOENT ? KEEL_EIO : KEEL_OK;
}
