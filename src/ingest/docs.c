/*
 * docs.c — a folder of documents into the store: markdown (with YAML
 * front matter for title and language), plain text and HTML, chunked by
 * chunk.c. Files are taken in name order so runs are reproducible.
 */
#include "ingest/ingest.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/file.h"
#include "pack/yaml_json.h"
#include "core/utf8.h"

#define MAX_FILES 100000
#define MAX_DEPTH 16

struct file_list {
    char **paths;
    size_t n, cap;
};

static int has_suffix(const char *name, const char *suffix)
{
    size_t a = strlen(name), b = strlen(suffix);

    return a > b && !strcasecmp(name + a - b, suffix);
}

static int is_document(const char *name)
{
    return has_suffix(name, ".md") || has_suffix(name, ".markdown") || has_suffix(name, ".txt") ||
           has_suffix(name, ".html") || has_suffix(name, ".htm");
}

/* Collects document paths below `dir` in name order. */
static int collect(const char *dir, int depth, struct file_list *list, struct keel_error *err)
{
    struct dirent **entries;
    int n = scandir(dir, &entries, NULL, alphasort), rc = KEEL_OK;

    if (n < 0)
        return keel_error_set(err, KEEL_EIO, dir, "cannot read directory: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
        const char *name = entries[i]->d_name;
        char path[4096];
        if (!rc && name[0] != '.' && snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path)) {
            struct stat st;
            if (lstat(path, &st) != 0) {
                /* vanished since scandir: nothing to ingest */
            } else if (S_ISDIR(st.st_mode)) {
                if (depth < MAX_DEPTH)
                    rc = collect(path, depth + 1, list, err);
            } else if (S_ISLNK(st.st_mode) && keel_is_dir(path)) {
                /* A link to a folder is not followed: it could loop. */
            } else if (is_document(name)) {
                if (list->n == MAX_FILES) {
                    rc = keel_error_set(err, KEEL_ETOOBIG, dir, "more than %d documents", MAX_FILES);
                } else {
                    if (list->n == list->cap) {
                        size_t cap = list->cap ? list->cap * 2 : 256;
                        char **paths = keel_realloc(list->paths, cap * sizeof(*paths));
                        if (!paths)
                            rc = keel_error_set(err, KEEL_ENOMEM, dir, "out of memory");
                        else {
                            list->paths = paths;
                            list->cap = cap;
                        }
                    }
                    if (!rc && !(list->paths[list->n++] = keel_strdup(path)))
                        rc = keel_error_set(err, KEEL_ENOMEM, dir, "out of memory");
                }
            }
        }
        free(entries[i]);
    }
    free(entries);
    return rc;
}

/* Splits off front matter: a first line "---", then YAML, then a line
 * that is exactly "---" or "..." (a trailing \r allowed). Without such a
 * closing line, or when the block is not a YAML mapping, there is no
 * front matter and the whole file is the body.
 * Reads title and lang; returns the offset where the body starts. */
static size_t front_matter(const char *text, size_t n, const char *path, json_t **meta)
{
    size_t start, line;

    *meta = NULL;
    if (n < 4 || strncmp(text, "---", 3) || (text[3] != '\n' && text[3] != '\r'))
        return 0;
    start = text[3] == '\r' && n > 4 && text[4] == '\n' ? 5 : 4;
    for (line = start; line < n;) {
        const char *nl = memchr(text + line, '\n', n - line);
        size_t len = nl ? (size_t)(nl - (text + line)) : n - line;
        size_t bare = len && text[line + len - 1] == '\r' ? len - 1 : len;
        if (bare == 3 && (!strncmp(text + line, "---", 3) || !strncmp(text + line, "...", 3))) {
            struct keel_error ignored;
            json_t *value = NULL;
            if (line == start)
                return nl ? (size_t)(nl - text) + 1 : n;  /* "---\n---": empty */
            if (yaml_json_load(text + start, line - start, path, NULL, &value, NULL, &ignored) ||
                !json_is_object(value)) {
                /* Not YAML after all ("---" then prose, then a rule):
                 * keep the whole file as text. */
                json_decref(value);
                return 0;
            }
            *meta = value;
            return nl ? (size_t)(nl - text) + 1 : n;
        }
        if (!nl)
            break;
        line += len + 1;
    }
    return 0;
}

static const char *meta_string(const json_t *meta, const char *key)
{
    json_t *value = meta ? json_object_get(meta, key) : NULL;

    return json_is_string(value) && json_string_length(value) ? json_string_value(value) : NULL;
}

/* Writes "base/rest" into `out` (sized by the caller). */
static void join_id(char *out, const char *base, const char *rest)
{
    size_t a = strlen(base), b = strlen(rest);

    memcpy(out, base, a);
    out[a] = '/';
    memcpy(out + a + 1, rest, b + 1);
}

/* Ingests one file; a file that yields no text is skipped with a warning. */
static int ingest_one(struct store *store, const char *root, const char *path,
                      const struct ingest_output *out, struct ingest_stats *stats,
                      struct keel_error *err)
{
    struct keel_buf text;
    struct keel_error file_err;
    struct ingest_chunks chunks = {0};
    struct store_chunk *items = NULL;
    struct store_document doc;
    enum store_outcome outcome;
    json_t *meta = NULL;
    char *html_text = NULL, *html_title = NULL, *heading = NULL, *id = NULL;
    const char *body, *title, *below;
    size_t body_n, start;
    int rc;

    keel_buf_init(&text, INGEST_FILE_MAX + 1);
    rc = keel_file_read(path, INGEST_FILE_MAX, &text, &file_err);
    if (rc == KEEL_ENOMEM) {
        *err = file_err;
        goto out;
    }
    if (rc) {
        rc = KEEL_OK;
        stats->skipped++;
        ingest_warning(out, "%s: skipped: %s", path, file_err.message);
        goto out;
    }
    /* Text goes into the store, and from there into JSON: repair bytes
     * that are not UTF-8 (a Latin-1 file) and drop a byte-order mark. */
    if (utf8_valid_prefix(text.data, text.len) != text.len) {
        struct keel_buf repaired;
        keel_buf_init(&repaired, 0);
        if ((rc = utf8_repair(text.data, text.len, &repaired))) {
            keel_buf_release(&repaired);
            keel_error_set(err, rc, path, "out of memory");
            goto out;
        }
        keel_buf_release(&text);
        text = repaired;
        ingest_warning(out, "%s: " "bytes that are not UTF-8 were replaced by U+FFFD", path);
    }
    if (text.len >= 3 && !memcmp(text.data, "\xef\xbb\xbf", 3)) {
        memmove(text.data, text.data + 3, text.len - 2);
        text.len -= 3;
    }
    if (has_suffix(path, ".html") || has_suffix(path, ".htm")) {
        if ((rc = ingest_html_to_text(text.data, text.len, &html_text, &html_title))) {
            keel_error_set(err, rc, path, "out of memory");
            goto out;
        }
        body = html_text;
        body_n = strlen(html_text);
    } else {
        start = front_matter(text.data, text.len, path, &meta);
        body = text.data + start;
        body_n = text.len - start;
    }
    if ((rc = ingest_chunk_markdown(body, body_n, &chunks))) {
        keel_error_set(err, rc, path, "out of memory");
        goto out;
    }
    if (!chunks.n) {
        stats->skipped++;
        ingest_warning(out, "%s: " "skipped: no text", path);
        goto out;
    }
    if (chunks.truncated)
        ingest_warning(out, "%s: " "only the first 4096 chunks were kept (INGEST_MAX_CHUNKS)", path);
    items = keel_calloc(chunks.n, sizeof(*items));
    if (!items) {
        rc = keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < chunks.n; i++) {
        items[i].section = chunks.items[i].section;
        items[i].text = chunks.items[i].text;
    }
    title = meta_string(meta, "title");
    if (!title)
        title = html_title;
    if (!title && chunks.items[0].section) {
        /* The first heading, without the " > …" path. */
        const char *cut = strstr(chunks.items[0].section, " > ");
        heading = cut ? keel_strndup(chunks.items[0].section, (size_t)(cut - chunks.items[0].section))
                      : keel_strdup(chunks.items[0].section);
        title = heading;
    }
    /* The id is the folder's own name and the path below it
     * ("corpus/articles/appeal.md"), so two folders with a README do not
     * overwrite each other; the source is the path below the folder
     * ("articles/appeal.md"): it is shown in answers and share links, so
     * it never names the server's directories, and "./corpus", "corpus"
     * and the same folder moved elsewhere give the same record. */
    {
        const char *base = strrchr(root, '/');
        base = base && base[1] ? base + 1 : root;
        below = path + strlen(root) + (path[strlen(root)] == '/');
        if (!(id = keel_malloc(strlen(base) + strlen(below) + 2))) {
            rc = keel_error_set(err, KEEL_ENOMEM, path, "out of memory");
            goto out;
        }
        join_id(id, base, below);
    }
    doc.id = id;
    doc.title = title ? title : doc.id;
    doc.source = below;
    doc.lang = meta_string(meta, "lang");
    rc = store_put_document(store, &doc, items, chunks.n, &outcome, err);
    if (!rc) {
        stats->added += outcome == STORE_ADDED;
        stats->updated += outcome == STORE_UPDATED;
        stats->unchanged += outcome == STORE_UNCHANGED;
    }
out:
    keel_free(id);
    keel_free(items);
    ingest_chunks_release(&chunks);
    keel_free(html_text);
    keel_free(html_title);
    keel_free(heading);
    json_decref(meta);
    keel_buf_release(&text);
    return rc;
}

int ingest_docs_dir(struct store *store, const char *dir, const struct ingest_output *out,
                    struct ingest_stats *stats, struct keel_error *err)
{
    struct file_list list = {0};
    struct ingest_progress bar;
    int rc;

    char root[4096];
    size_t len = strlen(dir);

    if (!keel_is_dir(dir))
        return keel_error_set(err, KEEL_ENOTFOUND, dir, "is not a directory");
    while (len > 1 && dir[len - 1] == '/')
        len--;  /* "corpus/" and "corpus" give the same document ids */
    if (len >= sizeof(root))
        return keel_error_set(err, KEEL_ETOOBIG, "dir", "path is too long");
    memcpy(root, dir, len);
    root[len] = '\0';
    dir = root;
    rc = collect(dir, 0, &list, err);
    if (!rc) {
        progress_start(&bar, out ? out->progress : NULL, "documents", (long)list.n);
        for (size_t i = 0; i < list.n && !rc; i++) {
            rc = ingest_one(store, dir, list.paths[i], out, stats, err);
            progress_step(&bar);
        }
        progress_done(&bar);
    }
    for (size_t i = 0; i < list.n; i++)
        keel_free(list.paths[i]);
    keel_free(list.paths);
    return rc;
}
