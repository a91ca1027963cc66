/*
 * store_sqlite_schema.c — the SQLite backend's schema as data: numbered
 * migrations and the SQL of every prepared statement. The mechanism that
 * runs them is store_sqlite.c; the design notes (external-content FTS5,
 * the seq row ids, content hashes) are at the top of that file.
 */
#include "store/store_sqlite_int.h"

/* store_sqlite_index.c creates the same tokenizer: change both together. */
#define TOKENIZE "tokenize = 'unicode61 remove_diacritics 2'"

/* ---- migrations ---------------------------------------------------------- */

const struct migration sqlite_migrations[] = {
    {1,
     "CREATE TABLE papers ("
     " seq INTEGER PRIMARY KEY,"
     " id TEXT NOT NULL UNIQUE,"
     " title TEXT NOT NULL,"
     " abstract TEXT,"
     " year INTEGER NOT NULL DEFAULT 0,"
     " venue TEXT,"
     " authors TEXT,"            /* JSON array of strings */
     " doi TEXT,"
     " url TEXT,"
     " pdf_url TEXT,"
     " is_open_access INTEGER NOT NULL DEFAULT 0,"
     " source TEXT,"
     " content_hash TEXT NOT NULL);"
     "CREATE VIRTUAL TABLE papers_fts USING fts5(title, abstract,"
     " content = 'papers', content_rowid = 'seq', " TOKENIZE ");"
     "CREATE TRIGGER papers_fts_insert AFTER INSERT ON papers BEGIN"
     " INSERT INTO papers_fts(rowid, title, abstract) VALUES (new.seq, new.title, new.abstract);"
     " END;"
     "CREATE TRIGGER papers_fts_delete AFTER DELETE ON papers BEGIN"
     " INSERT INTO papers_fts(papers_fts, rowid, title, abstract)"
     " VALUES ('delete', old.seq, old.title, old.abstract);"
     " END;"
     "CREATE TRIGGER papers_fts_update AFTER UPDATE ON papers BEGIN"
     " INSERT INTO papers_fts(papers_fts, rowid, title, abstract)"
     " VALUES ('delete', old.seq, old.title, old.abstract);"
     " INSERT INTO papers_fts(rowid, title, abstract) VALUES (new.seq, new.title, new.abstract);"
     " END;"
     "CREATE TABLE documents ("
     " id TEXT PRIMARY KEY,"
     " title TEXT,"
     " source TEXT,"
     " lang TEXT,"
     " content_hash TEXT NOT NULL);"
     "CREATE TABLE chunks ("
     " seq INTEGER PRIMARY KEY,"
     " document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
     " ordinal INTEGER NOT NULL,"
     " section TEXT,"
     " text TEXT NOT NULL,"
     " UNIQUE (document_id, ordinal));"
     "CREATE VIRTUAL TABLE chunks_fts USING fts5(section, text,"
     " content = 'chunks', content_rowid = 'seq', " TOKENIZE ");"
     "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN"
     " INSERT INTO chunks_fts(rowid, section, text) VALUES (new.seq, new.section, new.text);"
     " END;"
     "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN"
     " INSERT INTO chunks_fts(chunks_fts, rowid, section, text)"
     " VALUES ('delete', old.seq, old.section, old.text);"
     " END;"
     "CREATE TRIGGER chunks_fts_update AFTER UPDATE ON chunks BEGIN"
     " INSERT INTO chunks_fts(chunks_fts, rowid, section, text)"
     " VALUES ('delete', old.seq, old.section, old.text);"
     " INSERT INTO chunks_fts(rowid, section, text) VALUES (new.seq, new.section, new.text);"
     " END;"},
    /* 2: covering indexes, so ranking reads the few columns it needs
     * without walking each row's title and abstract. */
    {2,
     "CREATE INDEX papers_rank ON papers(seq, year, is_open_access, id);"
     "CREATE INDEX chunks_rank ON chunks(seq, document_id, ordinal);"},
    /* 3: conversations and their turns. A turn's rows (turn, two messages,
     * decision) and the conversation's state are written in one
     * transaction; events, deltas and sources are JSON arrays on the turn
     * row, so a turn is one row plus three, however many events it has. */
    {3,
     "CREATE TABLE conversations ("
     " id TEXT PRIMARY KEY,"
     " pack TEXT NOT NULL,"
     " state TEXT NOT NULL,"
     " turns INTEGER NOT NULL,"
     " created_at INTEGER NOT NULL,"
     " updated_at INTEGER NOT NULL) WITHOUT ROWID;"
     "CREATE TABLE turns ("
     " conversation_id TEXT NOT NULL REFERENCES conversations(id),"
     " seq INTEGER NOT NULL,"
     " correlation_id TEXT NOT NULL,"
     " created_at INTEGER NOT NULL,"
     " clarification INTEGER NOT NULL,"
     " state_after TEXT NOT NULL,"
     " deltas TEXT NOT NULL,"
     " events TEXT NOT NULL,"
     " sources TEXT NOT NULL,"
     " PRIMARY KEY (conversation_id, seq)) WITHOUT ROWID;"
     "CREATE TABLE messages ("
     " conversation_id TEXT NOT NULL,"
     " turn_seq INTEGER NOT NULL,"
     " role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),"
     " text TEXT NOT NULL,"
     " created_at INTEGER NOT NULL,"
     " PRIMARY KEY (conversation_id, turn_seq, role),"
     " FOREIGN KEY (conversation_id, turn_seq) REFERENCES turns(conversation_id, seq))"
     " WITHOUT ROWID;"
     "CREATE TABLE decisions ("
     " conversation_id TEXT NOT NULL,"
     " turn_seq INTEGER NOT NULL,"
     " intent TEXT,"
     " route TEXT,"
     " tool TEXT,"
     " arguments TEXT,"
     " stage_from TEXT,"
     " stage_to TEXT,"
     " reasons TEXT NOT NULL,"
     " decision TEXT NOT NULL,"
     " PRIMARY KEY (conversation_id, turn_seq),"
     " FOREIGN KEY (conversation_id, turn_seq) REFERENCES turns(conversation_id, seq))"
     " WITHOUT ROWID;"
     "CREATE TABLE metrics (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"},
    /* 4: a turn found by its correlation id (the HTTP API's handle). */
    {4, "CREATE UNIQUE INDEX turns_correlation ON turns(correlation_id);"},
    /* 5: API keys (only token hashes), conversation owners, share links. */
    {5,
     "ALTER TABLE conversations ADD COLUMN owner TEXT;"
     "CREATE TABLE api_keys ("
     " id TEXT PRIMARY KEY,"
     " user TEXT NOT NULL,"
     " role TEXT NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),"
     " hash TEXT NOT NULL UNIQUE,"
     " created_at INTEGER NOT NULL,"
     " revoked_at INTEGER) WITHOUT ROWID;"
     "CREATE TABLE shares ("
     " hash TEXT PRIMARY KEY,"
     " conversation_id TEXT NOT NULL REFERENCES conversations(id),"
     " created_by TEXT,"
     " created_at INTEGER NOT NULL) WITHOUT ROWID;"},
    /* 6: the quality counters per minute, for their history. */
    {6, "CREATE TABLE metrics_minutes ("
        " minute INTEGER NOT NULL,"
        " name TEXT NOT NULL,"
        " value INTEGER NOT NULL,"
        " PRIMARY KEY (minute, name)) WITHOUT ROWID;"},
    /* 7: long-term memory of runs and every admission decision. */
    {7, "CREATE TABLE memory_runs ("
        " seq INTEGER PRIMARY KEY,"
        " id TEXT NOT NULL UNIQUE,"
        " task TEXT NOT NULL,"
        " summary TEXT NOT NULL,"
        " outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure', 'partial')),"
        " refs TEXT NOT NULL,"
        " artifacts TEXT NOT NULL,"
        " conversation_id TEXT,"
        " created_at INTEGER NOT NULL,"
        " status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'superseded')),"
        " superseded_by TEXT,"
        " canonical INTEGER NOT NULL DEFAULT 1,"
        " uses INTEGER NOT NULL DEFAULT 1,"
        " embedder TEXT NOT NULL,"
        " dim INTEGER NOT NULL,"
        " vector BLOB NOT NULL);"
        "CREATE TABLE memory_decisions ("
        " seq INTEGER PRIMARY KEY,"
        " run_id TEXT NOT NULL,"
        " decision TEXT NOT NULL CHECK (decision IN ('ADD', 'NOT', 'REPLACE', 'MERGE')),"
        " target_run_id TEXT,"
        " reason TEXT NOT NULL,"
        " similarity REAL,"
        " judge TEXT NOT NULL,"
        " task TEXT NOT NULL,"
        " created_at INTEGER NOT NULL);"},
    /* 8: the active scenario (seed 004) of a conversation, with a version
     * that each change counts, and on each turn the scenario after it and
     * the turn's changes. */
    {8, "ALTER TABLE conversations ADD COLUMN scenario TEXT;"
        "ALTER TABLE conversations ADD COLUMN scenario_version INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE turns ADD COLUMN scenario_after TEXT;"
        "ALTER TABLE turns ADD COLUMN scenario_delta TEXT;"},
    /* 9: artifacts (seed 001) and the facts distilled from them; both
     * written in their turn's transaction. */
    {9, "CREATE TABLE artifacts ("
        " seq INTEGER PRIMARY KEY,"
        " id TEXT NOT NULL UNIQUE,"
        " conversation_id TEXT NOT NULL,"
        " turn_seq INTEGER NOT NULL,"
        " type TEXT NOT NULL CHECK (type IN ('research_brief', 'doc_extract', 'plan')),"
        " title TEXT NOT NULL,"
        " body TEXT NOT NULL,"
        " created_at INTEGER NOT NULL);"
        "CREATE INDEX artifacts_conversation ON artifacts(conversation_id, type, seq);"
        "CREATE TABLE facts ("
        " seq INTEGER PRIMARY KEY,"
        " id TEXT NOT NULL UNIQUE,"
        " artifact_id TEXT NOT NULL REFERENCES artifacts(id),"
        " conversation_id TEXT NOT NULL,"
        " store TEXT NOT NULL CHECK (store IN ('verified', 'researched')),"
        " topic TEXT NOT NULL,"
        " fact TEXT NOT NULL,"
        " source TEXT NOT NULL,"
        " confidence REAL NOT NULL,"
        " domain TEXT NOT NULL,"
        " tags TEXT NOT NULL,"
        " evidence_snippet TEXT NOT NULL,"
        " created_at INTEGER NOT NULL);"
        "CREATE INDEX facts_conversation ON facts(conversation_id);"
        "CREATE INDEX facts_artifact ON facts(artifact_id);"},
    /* 10: personal facts the assistant pack stores per user. */
    {10, "CREATE TABLE personal_facts ("
         " user TEXT NOT NULL,"
         " key TEXT NOT NULL,"
         " value TEXT NOT NULL,"
         " kind TEXT NOT NULL CHECK (kind IN ('fact', 'note')),"
         " conversation_id TEXT,"
         " created_at INTEGER NOT NULL,"
         " updated_at INTEGER NOT NULL,"
         " PRIMARY KEY (user, key)) WITHOUT ROWID;"},
    /* 11: a generation per searchable table, bumped by every write of a
     * paper or a chunk (any connection, any process), so the in-memory
     * search index (store_sqlite_index.c) knows when it is stale. */
    {11, "CREATE TABLE search_generation ("
         " name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
         "INSERT INTO search_generation (name, value) VALUES ('papers', 0), ('chunks', 0);"
         "CREATE TRIGGER papers_generation_insert AFTER INSERT ON papers BEGIN"
         " UPDATE search_generation SET value = value + 1 WHERE name = 'papers'; END;"
         "CREATE TRIGGER papers_generation_update AFTER UPDATE ON papers BEGIN"
         " UPDATE search_generation SET value = value + 1 WHERE name = 'papers'; END;"
         "CREATE TRIGGER papers_generation_delete AFTER DELETE ON papers BEGIN"
         " UPDATE search_generation SET value = value + 1 WHERE name = 'papers'; END;"
         "CREATE TRIGGER chunks_generation_insert AFTER INSERT ON chunks BEGIN"
         " UPDATE search_generation SET value = value + 1 WHERE name = 'chunks'; END;"
         "CREATE TRIGGER chunks_generation_update AFTER UPDATE ON chunks BEGIN"
         " UPDATE search_generation SET value = value + 1 WHERE name = 'chunks'; END;"
         "CREATE TRIGGER chunks_generation_delete AFTER DELETE ON chunks BEGIN"
         " UPDATE search_generation SET value = value + 1 WHERE name = 'chunks'; END;"
         /* documents: a hit reads its title and source from the row */},
    /* 12: memory belongs to a user: a run's owner (the API user of its
     * conversation or of the key that posted it; NULL: none, the local
     * user), taken for existing runs from their conversation; a run
     * erased with its conversation (erased_at, its texts and vector
     * emptied); decisions carry their run's owner and may be ERASE.
     * memory_decisions is rebuilt for its CHECK. */
    {12, "ALTER TABLE memory_runs ADD COLUMN owner TEXT;"
         "ALTER TABLE memory_runs ADD COLUMN erased_at INTEGER;"
         "UPDATE memory_runs SET owner = (SELECT c.owner FROM conversations AS c"
         " WHERE c.id = memory_runs.conversation_id) WHERE conversation_id IS NOT NULL;"
         "CREATE INDEX memory_runs_conversation ON memory_runs (conversation_id);"
         "CREATE TABLE memory_decisions_12 ("
         " seq INTEGER PRIMARY KEY,"
         " run_id TEXT NOT NULL,"
         " decision TEXT NOT NULL"
         "  CHECK (decision IN ('ADD', 'NOT', 'REPLACE', 'MERGE', 'ERASE')),"
         " target_run_id TEXT,"
         " reason TEXT NOT NULL,"
         " similarity REAL,"
         " judge TEXT NOT NULL,"
         " task TEXT NOT NULL,"
         " created_at INTEGER NOT NULL,"
         " owner TEXT,"
         " conversation_id TEXT);"
         "INSERT INTO memory_decisions_12 (seq, run_id, decision, target_run_id, reason,"
         " similarity, judge, task, created_at, owner, conversation_id)"
         " SELECT d.seq, d.run_id, d.decision, d.target_run_id, d.reason, d.similarity, d.judge,"
         " d.task, d.created_at, coalesce((SELECT r.owner FROM memory_runs AS r"
         " WHERE r.id = d.run_id), (SELECT r.owner FROM memory_runs AS r"
         " WHERE r.id = d.target_run_id)), (SELECT r.conversation_id FROM memory_runs AS r"
         " WHERE r.id = d.run_id) FROM memory_decisions AS d;"
         "DROP TABLE memory_decisions;"
         "ALTER TABLE memory_decisions_12 RENAME TO memory_decisions;"
         "CREATE INDEX memory_decisions_owner ON memory_decisions (owner, seq);"
         "CREATE INDEX memory_decisions_conversation ON memory_decisions (conversation_id);"},
    /* 13: a turn is one row. turns, messages and decisions were WITHOUT
     * ROWID tables keyed by (conversation_id, seq): each turn split leaves
     * of all three at the place of its conversation and spilled its big
     * JSON into overflow pages from a ~1 KB local payload, some 20 pages
     * per commit. Now turns has a rowid that grows in commit order, so
     * consecutive turns share the rightmost leaf, and holds both texts
     * and the decision log; (conversation_id, seq) and correlation_id
     * are unique indexes. The big columns come last, so listing a
     * conversation's turns reads no overflow page. events_compact 1: the
     * events lack the correlation_id each one repeats (the row's; see
     * store_events_text.h); copied rows keep theirs. messages and decisions
     * stay as views with their old columns for ad-hoc SQL. Existing rows
     * are copied in the old key order (no sort of the whole table, and an
     * old conversation's turns stay together); a turn without a decision
     * row (none is written without one) keeps NULL decision columns, as
     * the LEFT JOIN that read it gave. */
    {13, "CREATE TABLE turns_13 ("
         " id INTEGER PRIMARY KEY,"
         " conversation_id TEXT NOT NULL REFERENCES conversations(id),"
         " seq INTEGER NOT NULL,"
         " correlation_id TEXT NOT NULL,"
         " created_at INTEGER NOT NULL,"
         " clarification INTEGER NOT NULL,"
         " events_compact INTEGER NOT NULL DEFAULT 0,"
         " user_text TEXT NOT NULL,"
         " assistant_text TEXT NOT NULL,"
         " intent TEXT,"
         " route TEXT,"
         " tool TEXT,"
         " stage_from TEXT,"
         " stage_to TEXT,"
         " arguments TEXT,"
         " reasons TEXT,"
         " state_after TEXT NOT NULL,"
         " deltas TEXT NOT NULL,"
         " sources TEXT NOT NULL,"
         " scenario_after TEXT,"
         " scenario_delta TEXT,"
         " decision TEXT,"
         " events TEXT NOT NULL);"
         "INSERT INTO turns_13 (conversation_id, seq, correlation_id, created_at, clarification,"
         " user_text, assistant_text, intent, route, tool, stage_from, stage_to, arguments,"
         " reasons, state_after, deltas, sources, scenario_after, scenario_delta, decision,"
         " events)"
         " SELECT t.conversation_id, t.seq, t.correlation_id, t.created_at, t.clarification,"
         " coalesce(u.text, ''), coalesce(a.text, ''), d.intent, d.route, d.tool, d.stage_from,"
         " d.stage_to, d.arguments, d.reasons, t.state_after, t.deltas, t.sources,"
         " t.scenario_after, t.scenario_delta, d.decision, t.events"
         " FROM turns AS t"
         " LEFT JOIN messages AS u ON u.conversation_id = t.conversation_id"
         "  AND u.turn_seq = t.seq AND u.role = 'user'"
         " LEFT JOIN messages AS a ON a.conversation_id = t.conversation_id"
         "  AND a.turn_seq = t.seq AND a.role = 'assistant'"
         " LEFT JOIN decisions AS d ON d.conversation_id = t.conversation_id"
         "  AND d.turn_seq = t.seq"
         " ORDER BY t.conversation_id, t.seq;"
         "DROP TABLE messages;"
         "DROP TABLE decisions;"
         "DROP TABLE turns;"
         "ALTER TABLE turns_13 RENAME TO turns;"
         "CREATE UNIQUE INDEX turns_conversation ON turns (conversation_id, seq);"
         "CREATE UNIQUE INDEX turns_correlation ON turns (correlation_id);"
         "CREATE VIEW messages (conversation_id, turn_seq, role, text, created_at) AS"
         " SELECT conversation_id, seq, 'user', user_text, created_at FROM turns"
         " UNION ALL"
         " SELECT conversation_id, seq, 'assistant', assistant_text, created_at FROM turns;"
         "CREATE VIEW decisions (conversation_id, turn_seq, intent, route, tool, arguments,"
         " stage_from, stage_to, reasons, decision) AS"
         " SELECT conversation_id, seq, intent, route, tool, arguments, stage_from, stage_to,"
         " reasons, decision FROM turns WHERE decision IS NOT NULL;"},
};

const size_t sqlite_n_migrations = sizeof(sqlite_migrations) / sizeof(sqlite_migrations[0]);

/* ---- statements ---------------------------------------------------------- */



/* The METRIC_SLOTS (store_sqlite_int.h) counter rows of ST_METRIC_ADD
 * and ST_METRIC_MINUTE_ADD. */
#define METRIC_VALUES "(?1, ?2), (?3, ?4), (?5, ?6), (?7, ?8), (?9, ?10), (?11, ?12)," \
                      " (?13, ?14), (?15, ?16), (?17, ?18), (?19, ?20)"

/* Paper columns in one order for insert (?1..?12), update and select. */
#define PAPER_COLUMNS "id, title, abstract, year, venue, authors, doi, url, pdf_url, is_open_access, source"

const char *const sqlite_stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_BEGIN_READ] = "BEGIN",
    /* Changes nothing, but as a write statement it takes SQLite's write
     * lock: a read snapshot's transaction becomes a write one in place. */
    [ST_TAKE_WRITE] = "UPDATE schema_migrations SET version = version WHERE 0",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    /* one turn of a batch (store_sqlite_batch.c) */
    [ST_SAVEPOINT] = "SAVEPOINT turn",
    [ST_RELEASE] = "RELEASE turn",
    [ST_ROLLBACK_TO] = "ROLLBACK TO turn",
    [ST_PAPER_HASH] = "SELECT content_hash FROM papers WHERE id = ?1",
    [ST_PAPER_INSERT] = "INSERT INTO papers (" PAPER_COLUMNS ", content_hash)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_PAPER_UPDATE] = "UPDATE papers SET title = ?2, abstract = ?3, year = ?4, venue = ?5,"
                        " authors = ?6, doi = ?7, url = ?8, pdf_url = ?9, is_open_access = ?10,"
                        " source = ?11, content_hash = ?12 WHERE id = ?1",
    /* ?2/?3 year range (0: open), ?4 open access only. With a year filter
     * a paper of unknown year (0) is dropped. bm25() is lower for better
     * matches, so the score is its negation. Columns weigh the same: the
     * mem backend computes this very bm25(), so both rank alike; a short
     * title already outscores a long abstract through BM25's length
     * normalisation. */
    [ST_PAPER_SEARCH] =
        /* Rank over the covering index first; fetch whole rows only for
         * the top ?5. */
        "SELECT p.id, p.title, p.abstract, p.year, p.venue, p.authors, p.doi, p.url,"
        " p.pdf_url, p.is_open_access, p.source, top.score"
        " FROM (SELECT q.seq AS seq, q.id AS id, -bm25(papers_fts) AS score"
        "       FROM papers_fts JOIN papers AS q INDEXED BY papers_rank"
        "         ON q.seq = papers_fts.rowid"
        "       WHERE papers_fts MATCH ?1"
        "       AND (?2 = 0 OR q.year >= ?2) AND (?3 = 0 OR q.year <= ?3)"
        "       AND (?2 = 0 AND ?3 = 0 OR q.year > 0)"
        "       AND (?4 = 0 OR q.is_open_access <> 0)"
        "       ORDER BY score DESC, q.id ASC LIMIT ?5) AS top"
        " JOIN papers AS p ON p.seq = top.seq"
        " ORDER BY top.score DESC, top.id ASC",
    [ST_DOC_HASH] = "SELECT content_hash FROM documents WHERE id = ?1",
    [ST_DOC_INSERT] = "INSERT INTO documents (id, title, source, lang, content_hash)"
                      " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_DOC_UPDATE] = "UPDATE documents SET title = ?2, source = ?3, lang = ?4, content_hash = ?5"
                      " WHERE id = ?1",
    [ST_CHUNKS_DELETE] = "DELETE FROM chunks WHERE document_id = ?1",
    [ST_CHUNK_INSERT] = "INSERT INTO chunks (document_id, ordinal, section, text)"
                        " VALUES (?1, ?2, ?3, ?4)",
    [ST_CHUNK_SEARCH] =
        "SELECT c.document_id, d.title, d.source, c.section, c.text, c.ordinal, top.score"
        " FROM (SELECT k.seq AS seq, k.document_id AS document_id, k.ordinal AS ordinal,"
        "              -bm25(chunks_fts) AS score"
        "       FROM chunks_fts JOIN chunks AS k INDEXED BY chunks_rank"
        "         ON k.seq = chunks_fts.rowid"
        "       WHERE chunks_fts MATCH ?1"
        "       ORDER BY score DESC, k.document_id ASC, k.ordinal ASC LIMIT ?2) AS top"
        " JOIN chunks AS c ON c.seq = top.seq"
        " JOIN documents AS d ON d.id = c.document_id"
        " ORDER BY top.score DESC, top.document_id ASC, top.ordinal ASC",
    [ST_COUNTS] = "SELECT (SELECT count(*) FROM papers), (SELECT count(*) FROM documents),"
                  " (SELECT count(*) FROM chunks)",
    [ST_CONV_GET] = "SELECT pack, state, turns, created_at, updated_at, owner, scenario,"
                    " scenario_version FROM conversations WHERE id = ?1",
    [ST_CONV_INSERT] = "INSERT INTO conversations (id, pack, state, turns, created_at, updated_at,"
                       " owner) VALUES (?1, ?2, ?3, 1, ?4, ?4, ?5)",
    /* Guarded by the turn count: a turn saved from a stale read changes
     * no row, and the save reports a conflict. */
    [ST_CONV_UPDATE] = "UPDATE conversations SET state = ?2, turns = ?3, updated_at = ?4"
                       " WHERE id = ?1 AND turns = ?3 - 1 AND pack = ?5",
    /* A turn is one row (migration 13): the turn, both texts, the
     * decision log and the scenario after it. */
    [ST_TURN_INSERT] = "INSERT INTO turns (conversation_id, seq, correlation_id, created_at,"
                       " clarification, user_text, assistant_text, intent, route, tool,"
                       " stage_from, stage_to, arguments, reasons, state_after, deltas, sources,"
                       " scenario_after, scenario_delta, decision, events, events_compact)"
                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
                       " ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
    /* Up to METRIC_SLOTS counters in one statement per table: slot k is
     * name ?(2k+1), delta ?(2k+2); a NULL name is an unused slot. A name
     * twice adds both deltas (the rows are upserted one by one). */
    [ST_METRIC_ADD] = "INSERT INTO metrics (name, value) SELECT column1, column2 FROM"
                      " (VALUES " METRIC_VALUES ") WHERE column1 IS NOT NULL"
                      " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
    [ST_METRICS] = "SELECT name, value FROM metrics ORDER BY name",
    [ST_TURNS_LIST] = "SELECT seq, created_at, clarification, user_text, assistant_text, sources"
                      " FROM turns WHERE conversation_id = ?1 ORDER BY seq",
    [ST_TURN_GET] = "SELECT conversation_id, seq, created_at, clarification, user_text,"
                    " assistant_text, state_after, events, sources, decision, correlation_id,"
                    " scenario_after, scenario_delta, events_compact FROM turns"
                    " WHERE correlation_id = ?1",
    [ST_KEY_INSERT] = "INSERT INTO api_keys (id, user, role, hash, created_at) VALUES (?1, ?2, ?3,"
                      " ?4, ?5)",
    [ST_KEY_FIND] = "SELECT id, user, role, created_at, coalesce(revoked_at, 0) FROM api_keys"
                    " WHERE hash = ?1",
    [ST_KEY_LIST] = "SELECT id, user, role, created_at, coalesce(revoked_at, 0) FROM api_keys"
                    " ORDER BY created_at, id",
    [ST_KEY_REVOKE] = "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?2) WHERE id = ?1",
    [ST_SHARE_INSERT] = "INSERT INTO shares (hash, conversation_id, created_by, created_at)"
                        " SELECT ?1, id, ?3, ?4 FROM conversations WHERE id = ?2",
    [ST_SHARE_FIND] = "SELECT conversation_id FROM shares WHERE hash = ?1",
    [ST_CONV_LIST] = "SELECT id, pack, turns, created_at, updated_at FROM conversations"
                     " WHERE ?1 IS NULL OR owner = ?1"
                     " ORDER BY updated_at DESC, id DESC LIMIT ?2 OFFSET ?3",
    [ST_CONV_DELETE_SHARES] = "DELETE FROM shares WHERE conversation_id = ?1",
    [ST_CONV_DELETE_TURNS] = "DELETE FROM turns WHERE conversation_id = ?1",
    [ST_CONV_DELETE] = "DELETE FROM conversations WHERE id = ?1",
    [ST_METRICS_RESET] = "UPDATE metrics SET value = 0",
    /* The same slots as ST_METRIC_ADD; ?21 the minute. */
    [ST_METRIC_MINUTE_ADD] = "INSERT INTO metrics_minutes (minute, name, value)"
                             " SELECT ?21, column1, column2 FROM (VALUES " METRIC_VALUES ")"
                             " WHERE column1 IS NOT NULL ON CONFLICT (minute, name) DO UPDATE"
                             " SET value = value + excluded.value",
    /* ?1 minutes per period, ?2 periods: the newest ones. */
    [ST_MEM_RUN_INSERT] = "INSERT INTO memory_runs (id, task, summary, outcome, refs, artifacts,"
                          " conversation_id, created_at, embedder, dim, vector, owner)"
                          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_MEM_SUPERSEDE] = "UPDATE memory_runs SET status = 'superseded', superseded_by = ?2,"
                         " canonical = 0 WHERE id = ?1 AND status = 'active' AND erased_at IS NULL",
    /* MERGE: ?3 1 = the new run ?2 is canonical; it or the target ?1 gets
     * the union of references ?4 and both runs' uses. */
    [ST_MEM_MERGE] = "UPDATE memory_runs SET"
                     " canonical = CASE WHEN (id = ?2) = (?3 = 1) THEN 1 ELSE 0 END,"
                     " refs = CASE WHEN (id = ?2) = (?3 = 1) THEN ?4 ELSE refs END,"
                     " uses = CASE WHEN (id = ?2) = (?3 = 1)"
                     "   THEN (SELECT sum(uses) FROM memory_runs WHERE id IN (?1, ?2)) ELSE uses END"
                     " WHERE id IN (?1, ?2) AND (id = ?2 OR (status = 'active' AND erased_at IS NULL))",
    [ST_MEM_DECISION_INSERT] = "INSERT INTO memory_decisions (run_id, decision, target_run_id,"
                               " reason, similarity, judge, task, created_at, owner, conversation_id)"
                               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_MEM_SYNC] = "SELECT d.seq, d.decision, d.run_id, d.target_run_id, r.embedder, r.dim,"
                    " r.vector, r.owner, r.erased_at FROM memory_decisions AS d"
                    " LEFT JOIN memory_runs AS r ON r.id = d.run_id"
                    " WHERE d.seq > ?1 ORDER BY d.seq",
    [ST_MEM_GET] = "SELECT id, task, summary, outcome, refs, artifacts, conversation_id,"
                   " created_at, CASE WHEN erased_at IS NULL THEN status ELSE 'erased' END,"
                   " superseded_by, canonical, uses, owner FROM memory_runs WHERE id = ?1",
    [ST_MEM_DECISIONS] = "SELECT seq, run_id, decision, target_run_id, reason, similarity, judge,"
                         " task, created_at FROM memory_decisions WHERE owner IS ?3"
                         " ORDER BY seq DESC LIMIT ?1 OFFSET ?2",
    /* Artifacts and facts (migration 9). */
    [ST_ART_INSERT] = "INSERT INTO artifacts (id, conversation_id, turn_seq, type, title, body,"
                      " created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_FACT_INSERT] = "INSERT INTO facts (id, artifact_id, conversation_id, store, topic, fact,"
                       " source, confidence, tags, evidence_snippet, created_at, domain)"
                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    /* The newest ?3 of a conversation (of type ?2 unless NULL). */
    [ST_ART_LIST] = "SELECT id, type, title, turn_seq, created_at, body FROM artifacts"
                    " WHERE conversation_id = ?1 AND (?2 IS NULL OR type = ?2)"
                    " ORDER BY seq DESC LIMIT ?3",
    [ST_ART_GET] = "SELECT id, type, title, turn_seq, created_at, body, conversation_id"
                   " FROM artifacts WHERE id = ?1",
    [ST_FACTS_LIST] = "SELECT id, artifact_id, conversation_id, store, topic, fact, source,"
                      " confidence, tags, evidence_snippet, created_at, domain FROM facts"
                      " WHERE (?1 IS NULL OR conversation_id IN"
                      "        (SELECT id FROM conversations WHERE owner = ?1))"
                      " AND (?2 IS NULL OR store = ?2)"
                      " AND (?3 IS NULL OR conversation_id = ?3)"
                      " AND (?4 IS NULL OR artifact_id = ?4)"
                      " AND (?5 IS NULL OR instr(lower(topic), lower(?5)) > 0"
                      "      OR instr(lower(fact), lower(?5)) > 0)"
                      " ORDER BY seq DESC LIMIT ?6 OFFSET ?7",
    [ST_CONV_DELETE_FACTS] = "DELETE FROM facts WHERE conversation_id = ?1",
    [ST_CONV_DELETE_ARTIFACTS] = "DELETE FROM artifacts WHERE conversation_id = ?1",
    /* The scenario (seed 004): replaced only when its version is still
     * the one the writer read. */
    [ST_SCENARIO_SET] = "UPDATE conversations SET scenario = ?2,"
                        " scenario_version = scenario_version + 1"
                        " WHERE id = ?1 AND scenario_version = ?3",
    /* Personal facts (migration 10): one row per user and key. */
    [ST_PERSONAL_UPSERT] =
        "INSERT INTO personal_facts (user, key, value, kind, conversation_id, created_at,"
        " updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)"
        " ON CONFLICT (user, key) DO UPDATE SET value = excluded.value, kind = excluded.kind,"
        " conversation_id = excluded.conversation_id, updated_at = excluded.updated_at",
    [ST_PERSONAL_DELETE] = "DELETE FROM personal_facts WHERE user = ?1 AND key = ?2",
    [ST_PERSONAL_LIST] = "SELECT key, value, kind, created_at, updated_at, conversation_id"
                         " FROM personal_facts WHERE user = ?1 ORDER BY key LIMIT ?2",
    [ST_PERSONAL_STATS] = "SELECT count(DISTINCT user), coalesce(sum(kind = 'fact'), 0),"
                          " coalesce(sum(kind = 'note'), 0) FROM personal_facts",
    [ST_METRICS_HISTORY] =
        "SELECT period, name, sum(value) FROM"
        " (SELECT (minute / ?1) * ?1 AS period, name, value FROM metrics_minutes)"
        " WHERE period >= (SELECT coalesce(max((minute / ?1) * ?1), 0) FROM metrics_minutes)"
        "                 - (?2 - 1) * ?1"
        " GROUP BY period, name ORDER BY period, name",
};
