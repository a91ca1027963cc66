/*
 * test_store_vfs.c — the VFS that writes a commit's WAL frames as one
 * write (src/store/store_sqlite_vfs.c).
 *
 * Raw connections open through the VFS (sqlite_vfs_name()) so each test
 * controls the page cache, the sync mode and the locking mode. After each
 * commit the tests look at what is *in the files*, not only at what SQLite
 * answers: a second connection reads the rows, and a copy of the database
 * and its WAL taken right after COMMIT — what a process killed at that
 * moment leaves behind — is opened and must hold every committed row.
 * A connection in exclusive locking mode keeps its wal-index in heap
 * memory and calls no shared-memory method, so there only the
 * commit-frame rule can have written the frames before COMMIT returned.
 * The last tests make a flush fail and check that the COMMIT fails and
 * leaves nothing of its transaction, through a raw connection and through
 * a keel store.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "store/store.h"
#include "store/store_sqlite_int.h"
#include "unit.h"

static char dir[64];

static void dir_make(void)
{
    unit_temp_dir(dir, sizeof(dir), "vfs", 1);
}

static void dir_remove(void)
{
    unit_temp_dir_remove(dir);
}

static sqlite3_int64 query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 value;

    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(stmt), SQLITE_ROW);
    value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return value;
}

/* A connection through keel's VFS (or SQLite's own, `vfs` NULL) in WAL
 * mode that never checkpoints, so the WAL keeps every frame. */
static sqlite3 *open_db(const char *path, const char *vfs, const char *sync, int exclusive)
{
    sqlite3 *db = NULL;
    char sql[160];

    ck_assert_int_eq(sqlite3_open_v2(path, &db,
                                     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                         SQLITE_OPEN_NOMUTEX,
                                     vfs),
                     SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    if (exclusive)   /* before WAL mode: the wal-index lives in heap memory */
        unit_sql_exec(db, "PRAGMA locking_mode = EXCLUSIVE");
    snprintf(sql, sizeof(sql),
             "PRAGMA journal_mode = WAL; PRAGMA synchronous = %s; PRAGMA wal_autocheckpoint = 0;",
             sync);
    unit_sql_exec(db, sql);
    return db;
}

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY), out;
    ssize_t n;

    unlink(to);
    if (in < 0)
        return;   /* no WAL yet */
    out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(out, 0);
    while ((n = read(in, buf, sizeof(buf))) > 0)
        ck_assert_int_eq(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

/* What a process killed now would leave: copies of the database and its
 * WAL (no wal-index: the copy recovers from the WAL, checksums and all),
 * opened through SQLite's own VFS. Returns the sum of t.n there. */
static sqlite3_int64 crash_copy_sum(const char *path)
{
    char copy[224], from[224], to[240];
    sqlite3 *db = NULL;
    sqlite3_int64 sum;

    snprintf(copy, sizeof(copy), "%s.copy", path);
    snprintf(to, sizeof(to), "%s-shm", copy);
    unlink(to);
    copy_file(path, copy);
    snprintf(from, sizeof(from), "%s-wal", path);
    snprintf(to, sizeof(to), "%s-wal", copy);
    copy_file(from, to);
    ck_assert_int_eq(sqlite3_open_v2(copy, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sum = query_int(db, "SELECT coalesce(sum(n), 0) FROM t");
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM pragma_integrity_check"
                                   " WHERE integrity_check <> 'ok'"),
                     0);
    sqlite3_close(db);
    return sum;
}

static void path_of(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s-%ld.db", dir, name, (long)getpid());
}

/* Commits one row of `n` with a blob of `size` bytes. */
static void insert_row(sqlite3 *db, int n, int size)
{
    char sql[128];

    snprintf(sql, sizeof(sql), "INSERT INTO t (n, pad) VALUES (%d, zeroblob(%d))", n, size);
    unit_sql_exec(db, sql);
}

/* Many commits through the VFS, each read by a second connection of the
 * same process (through the VFS and through SQLite's own) and found in a
 * crash copy of the files. */
static void commits_visible(const char *name, const char *sync, int exclusive)
{
    char path[192];
    sqlite3 *writer, *reader = NULL, *plain = NULL;
    const char *vfs = sqlite_vfs_name();
    sqlite3_int64 sum = 0;

    ck_assert_ptr_nonnull(vfs);
    path_of(path, sizeof(path), name);
    writer = open_db(path, vfs, sync, exclusive);
    unit_sql_exec(writer, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, pad BLOB)");
    if (!exclusive) {
        reader = open_db(path, vfs, "NORMAL", 0);
        plain = open_db(path, NULL, "NORMAL", 0);
    }
    for (int i = 1; i <= 120; i++) {
        insert_row(writer, i, 500 + (i * 397) % 9000);   /* one to four pages */
        sum += i;
        if (reader) {
            ck_assert_int_eq(query_int(reader, "SELECT sum(n) FROM t"), sum);
            ck_assert_int_eq(query_int(plain, "SELECT count(*) FROM t"), i);
        }
        if (i % 10 == 0 || exclusive)
            ck_assert_int_eq(crash_copy_sum(path), sum);
    }
    sqlite3_close(reader);
    sqlite3_close(plain);
    sqlite3_close(writer);
}

START_TEST(test_commits_visible)
{
    commits_visible("visible", "NORMAL", 0);
}
END_TEST

START_TEST(test_commits_durable_exclusive)
{
    commits_visible("exclusive", "NORMAL", 1);
}
END_TEST

START_TEST(test_commits_full_sync)
{
    commits_visible("full", "FULL", 0);
}
END_TEST

/* A transaction bigger than the page cache writes frames before its
 * commit (spills); pages spilled and changed again are rewritten in place
 * (each pass of the UPDATE touches every page), and the commit then
 * rewrites the checksums of the frames after the first of them
 * (walRewriteChecksums), the commit frame's header last. */
static void spill_and_rewrite(const char *name, int exclusive)
{
    char path[192];
    const char *vfs = sqlite_vfs_name();
    sqlite3 *writer, *reader = NULL;

    path_of(path, sizeof(path), name);
    writer = open_db(path, vfs, "NORMAL", exclusive);
    unit_sql_exec(writer, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);"
                          "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c"
                          " WHERE x < 300)"
                          " INSERT INTO t (n, pad) SELECT x, zeroblob(1500) FROM c;"
                          "PRAGMA cache_size = 10;");
    if (!exclusive)
        reader = open_db(path, vfs, "NORMAL", 0);
    unit_sql_exec(writer, "BEGIN");
    for (int pass = 0; pass < 3; pass++)
        unit_sql_exec(writer, "UPDATE t SET n = n + 1");
    for (int i = 301; i <= 400; i++)
        insert_row(writer, i, 1500);
    unit_sql_exec(writer, "COMMIT");
    /* 1..400, and 3 more for each of the first 300 */
    if (reader) {
        ck_assert_int_eq(query_int(reader, "SELECT sum(n) FROM t"), 80200 + 900);
        ck_assert_int_eq(query_int(reader, "SELECT count(*) FROM t"), 400);
    }
    ck_assert_int_eq(crash_copy_sum(path), 80200 + 900);
    sqlite3_close(reader);
    sqlite3_close(writer);
}

START_TEST(test_spill_then_commit)
{
    spill_and_rewrite("spill", 0);
}
END_TEST

START_TEST(test_spill_then_commit_exclusive)
{
    spill_and_rewrite("spillx", 1);
}
END_TEST

/* A transaction that spilled frames and rolled back leaves nothing in
 * the buffer that could later land on another connection's frames. */
START_TEST(test_rollback_after_spill)
{
    char path[192];
    const char *vfs = sqlite_vfs_name();
    sqlite3 *first, *second;

    path_of(path, sizeof(path), "rollback");
    first = open_db(path, vfs, "NORMAL", 0);
    second = open_db(path, vfs, "NORMAL", 0);
    unit_sql_exec(first, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);"
                         "PRAGMA cache_size = 10;");
    for (int round = 0; round < 5; round++) {
        char sql[192];
        /* appends only: the last spilled frames are still buffered */
        snprintf(sql, sizeof(sql),
                 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)"
                 " INSERT INTO t (n, pad) SELECT 1000, zeroblob(1500) FROM c",
                 60 + 7 * round);
        /* an empty WAL: the rollback then reads page 1 from the database
         * file, and nothing else touches the WAL file before the unlock */
        unit_sql_exec(second, "PRAGMA wal_checkpoint(TRUNCATE)");
        unit_sql_exec(first, "BEGIN");
        unit_sql_exec(first, sql);
        unit_sql_exec(first, "ROLLBACK");
        for (int i = 1; i <= 20; i++)
            insert_row(second, i, 3000);
        insert_row(first, 1, 10);
    }
    ck_assert_int_eq(query_int(second, "SELECT sum(n) FROM t"), 5 * 211);
    ck_assert_int_eq(query_int(first, "SELECT count(*) FROM t"), 5 * 21);
    ck_assert_int_eq(query_int(first, "SELECT count(*) FROM pragma_integrity_check"
                                      " WHERE integrity_check <> 'ok'"),
                     0);
    ck_assert_int_eq(crash_copy_sum(path), 5 * 211);
    sqlite3_close(first);
    sqlite3_close(second);
}
END_TEST

/* A connection that leaves exclusive locking mode gives the file back to
 * other writers without calling xShmLock on the write lock (it never took
 * it through shared memory): frames of a transaction that spilled and
 * rolled back meanwhile must not wait in its buffer while another
 * connection commits over the same offsets. */
START_TEST(test_rollback_leaving_exclusive)
{
    char path[192];
    const char *vfs = sqlite_vfs_name();
    sqlite3 *first, *second;

    path_of(path, sizeof(path), "leavex");
    first = open_db(path, vfs, "NORMAL", 0);
    unit_sql_exec(first, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);"
                         "PRAGMA cache_size = 10;");
    for (int round = 0; round < 3; round++) {
        /* no other connection while it takes the file exclusively; an
         * empty WAL, so the rollback reads nothing back from it */
        unit_sql_exec(first, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA locking_mode = EXCLUSIVE");
        unit_sql_exec(first, "BEGIN");
        /* the first write takes the file exclusively; appends spill */
        unit_sql_exec(first, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 80)"
                             " INSERT INTO t (n, pad) SELECT 1000, zeroblob(1500) FROM c");
        unit_sql_exec(first, "PRAGMA locking_mode = NORMAL");
        unit_sql_exec(first, "ROLLBACK");   /* ends exclusive mode: the file is shared again */
        second = open_db(path, vfs, "NORMAL", 0);
        for (int i = 1; i <= 20; i++)
            insert_row(second, i, 3000);
        insert_row(first, 1, 10);
        if (round < 2)
            sqlite3_close(second);
    }
    ck_assert_int_eq(query_int(second, "SELECT sum(n) FROM t"), 3 * 211);
    ck_assert_int_eq(query_int(first, "SELECT count(*) FROM t"), 3 * 21);
    ck_assert_int_eq(query_int(first, "SELECT count(*) FROM pragma_integrity_check"
                                      " WHERE integrity_check <> 'ok'"),
                     0);
    ck_assert_int_eq(crash_copy_sum(path), 3 * 211);
    sqlite3_close(first);
    sqlite3_close(second);
}
END_TEST

/* SQLite pads a commit to the sector and syncs inside the padding when
 * the *database* file lacks powersafe overwrite (a psow=0 URI;
 * sqlite3WalOpen asks the database file, not the WAL): its WAL must write
 * through. From an emptied WAL, commits of one page each take frames
 * 0 and 1, 2 and 3...: the page, then one frame of padding across a 4 KiB
 * sector boundary, and in frame 169 that boundary cuts the 24-byte frame
 * header, so what SQLite writes after the sync is no whole header. In
 * exclusive locking mode no barrier flushes late, so after each COMMIT
 * the WAL must hold whole frames, as SQLite's own writes leave it. */
START_TEST(test_no_powersafe_overwrite_writes_through)
{
    char path[192], uri[224], wal[208];
    sqlite3 *db = NULL;
    struct stat st;
    sqlite3_int64 frame;

    path_of(path, sizeof(path), "psow");
    snprintf(uri, sizeof(uri), "file:%s?psow=0", path);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    ck_assert_int_eq(sqlite3_open_v2(uri, &db,
                                     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                         SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI,
                                     sqlite_vfs_name()),
                     SQLITE_OK);
    unit_sql_exec(db, "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL;"
                      "PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 0;"
                      "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);"
                      "INSERT INTO t (n) VALUES (0); PRAGMA wal_checkpoint(TRUNCATE);");
    frame = query_int(db, "PRAGMA page_size") + 24;
    for (int i = 1; i <= 100; i++) {
        unit_sql_exec(db, "UPDATE t SET n = n + 1");
        ck_assert_int_eq(stat(wal, &st), 0);
        ck_assert_msg((st.st_size - 32) % frame == 0, "commit %d: WAL of %lld bytes", i,
                      (long long)st.st_size);
    }
    ck_assert_int_eq(crash_copy_sum(path), 100);
    sqlite3_close(db);
}
END_TEST

/* Checkpoints inside COMMIT every few commits: the next writer starts the
 * WAL over (its header at offset 0 again, frames over the old ones) and
 * journal_size_limit = 0 truncates it after that first commit; every
 * commit is still read by the other connections and in a crash copy. */
START_TEST(test_wal_restart_and_truncate)
{
    char path[192];
    const char *vfs = sqlite_vfs_name();
    sqlite3 *writer, *reader, *plain;
    sqlite3_int64 sum = 0;

    path_of(path, sizeof(path), "restart");
    writer = open_db(path, vfs, "NORMAL", 0);
    unit_sql_exec(writer, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);"
                          "PRAGMA wal_autocheckpoint = 8; PRAGMA journal_size_limit = 0;");
    reader = open_db(path, vfs, "NORMAL", 0);
    plain = open_db(path, NULL, "NORMAL", 0);
    for (int i = 1; i <= 150; i++) {
        insert_row(writer, i, 500 + (i * 397) % 9000);
        sum += i;
        ck_assert_int_eq(query_int(reader, "SELECT sum(n) FROM t"), sum);
        ck_assert_int_eq(query_int(plain, "SELECT count(*) FROM t"), i);
        if (i % 5 == 0)
            ck_assert_int_eq(crash_copy_sum(path), sum);
    }
    sqlite3_close(reader);
    sqlite3_close(plain);
    sqlite3_close(writer);
}
END_TEST

/* A flush that fails fails the COMMIT; the transaction is not in the
 * database, for this connection, another one, nor after a crash; the
 * connection then commits again. */
START_TEST(test_failed_flush_fails_commit)
{
    char path[192];
    const char *vfs = sqlite_vfs_name();
    sqlite3 *writer, *reader;
    int rc;

    path_of(path, sizeof(path), "fail");
    writer = open_db(path, vfs, "NORMAL", 0);
    reader = open_db(path, vfs, "NORMAL", 0);
    unit_sql_exec(writer, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, pad BLOB)");
    insert_row(writer, 1, 100);
    sqlite_vfs_fail_flushes(1);
    unit_sql_exec(writer, "BEGIN");
    insert_row(writer, 50, 5000);
    rc = sqlite3_exec(writer, "COMMIT", NULL, NULL, NULL);
    sqlite_vfs_fail_flushes(0);
    ck_assert_msg((rc & 0xff) == SQLITE_IOERR, "COMMIT gave %d", rc);
    if (!sqlite3_get_autocommit(writer))
        unit_sql_exec(writer, "ROLLBACK");
    ck_assert_int_eq(query_int(writer, "SELECT sum(n) FROM t"), 1);
    ck_assert_int_eq(query_int(reader, "SELECT sum(n) FROM t"), 1);
    ck_assert_int_eq(crash_copy_sum(path), 1);
    insert_row(writer, 2, 5000);
    ck_assert_int_eq(query_int(reader, "SELECT sum(n) FROM t"), 3);
    ck_assert_int_eq(crash_copy_sum(path), 3);
    sqlite3_close(reader);
    sqlite3_close(writer);
}
END_TEST

/* The same through a keel store: the put reports an I/O error naming the
 * file, the paper is absent, and the store's next put succeeds. */
START_TEST(test_failed_flush_fails_store_put)
{
    char path[192], result[64];
    struct store *store = NULL;
    struct keel_error err;
    enum store_outcome outcome;
    char id1[] = "p1", id2[] = "p2", title1[] = "First paper", title2[] = "Second paper";
    struct store_paper first = {.id = id1, .title = title1, .year = 2020};
    struct store_paper second = {.id = id2, .title = title2, .year = 2021};

    path_of(path, sizeof(path), "store");
    keel_error_clear(&err);
    ck_assert_int_eq(store_open(path, &store, &err), KEEL_OK);
    ck_assert_int_eq(store_put_paper(store, &first, &outcome, &err), KEEL_OK);
    sqlite_vfs_fail_flushes(1);
    ck_assert_int_eq(store_put_paper(store, &second, &outcome, &err), KEEL_EIO);
    sqlite_vfs_fail_flushes(0);
    ck_assert_str_eq(err.field, path);
    unit_sql_text(path, "SELECT group_concat(id) FROM papers", result, sizeof(result));
    ck_assert_str_eq(result, "p1");
    ck_assert_int_eq(store_put_paper(store, &second, &outcome, &err), KEEL_OK);
    unit_sql_text(path, "SELECT group_concat(id) FROM (SELECT id FROM papers ORDER BY id)",
                  result, sizeof(result));
    ck_assert_str_eq(result, "p1,p2");
    store_close(store);
}
END_TEST

Suite *suite_store_vfs(void)
{
    Suite *s = suite_create("store_vfs");
    TCase *tc = tcase_create("wal_writes");

    tcase_add_unchecked_fixture(tc, dir_make, dir_remove);
    unit_leak_fixture(tc);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_commits_visible);
    tcase_add_test(tc, test_commits_durable_exclusive);
    tcase_add_test(tc, test_commits_full_sync);
    tcase_add_test(tc, test_spill_then_commit);
    tcase_add_test(tc, test_spill_then_commit_exclusive);
    tcase_add_test(tc, test_rollback_after_spill);
    tcase_add_test(tc, test_rollback_leaving_exclusive);
    tcase_add_test(tc, test_no_powersafe_overwrite_writes_through);
    tcase_add_test(tc, test_wal_restart_and_truncate);
    tcase_add_test(tc, test_failed_flush_fails_commit);
    tcase_add_test(tc, test_failed_flush_fails_store_put);
    suite_add_tcase(s, tc);
    return s;
}
