//! The schema and its numbered migrations (`PRAGMA user_version`), and the check that a file is
//! ours before anything is written to it (`PRAGMA application_id`).

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Error, Result};

/// `STS1` in ASCII: marks a database as a session-tools store.
pub const APPLICATION_ID: i32 = 0x5354_5331;

/// Migration N (1-based) brings `user_version` from N-1 to N. Never edit a shipped one: append.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, transcripts, runs, sub-agent registry, outbox.
    r#"
    CREATE TABLE sessions (
        key         TEXT PRIMARY KEY NOT NULL,  -- canonical session key
        session_id  TEXT NOT NULL,              -- transcript id (entry.sessionId)
        agent_id    TEXT,                       -- agent of an agent:<id>:… key, NULL otherwise
        rest        TEXT,                       -- the key after agent:<id>:, NULL otherwise
        updated_at  INTEGER NOT NULL,           -- entry.updatedAt (ms)
        spawned_by  TEXT,                       -- entry.spawnedBy when a string
        label       TEXT,                       -- entry.label when a string
        base_kind   TEXT NOT NULL,              -- group|cron|hook|node|other: the kind short of `main`
        search      TEXT NOT NULL,              -- lower-cased displayName/label/subject/sessionId/key
        entry       TEXT NOT NULL               -- the whole entry as JSON
    );
    CREATE INDEX sessions_by_updated ON sessions (updated_at DESC);
    CREATE INDEX sessions_by_session_id ON sessions (session_id);
    CREATE INDEX sessions_by_spawned_by ON sessions (spawned_by, updated_at DESC) WHERE spawned_by IS NOT NULL;
    CREATE INDEX sessions_by_label ON sessions (label, updated_at DESC) WHERE label IS NOT NULL;
    CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC);

    CREATE TABLE messages (
        session_id  TEXT NOT NULL,
        seq         INTEGER NOT NULL,            -- 1, 2, … per transcript, in append order
        role        TEXT,                        -- message.role, for filtering without parsing
        message     TEXT NOT NULL,               -- the message object as JSON
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;

    CREATE TABLE runs (
        run_id      TEXT PRIMARY KEY NOT NULL,
        session_key TEXT NOT NULL,
        lane        TEXT NOT NULL,               -- nested|subagent|announce
        chain_id    TEXT,
        status      TEXT NOT NULL,               -- running|ok|error|timeout
        started_at  INTEGER,
        ended_at    INTEGER,
        error       TEXT,
        owner       TEXT                         -- the process instance running it
    );
    CREATE INDEX runs_by_session ON runs (session_key, status);
    CREATE INDEX runs_by_status ON runs (status);

    CREATE TABLE subagent_runs (
        run_id          TEXT PRIMARY KEY NOT NULL,
        requester_key   TEXT NOT NULL,
        child_key       TEXT NOT NULL,
        ended           INTEGER NOT NULL DEFAULT 0,
        announce_status TEXT NOT NULL DEFAULT 'pending',
        archive_at      INTEGER,
        record          TEXT NOT NULL            -- the SubagentRun as JSON
    );
    CREATE INDEX subagent_runs_by_requester ON subagent_runs (requester_key);
    CREATE INDEX subagent_runs_by_archive ON subagent_runs (archive_at) WHERE archive_at IS NOT NULL;

    CREATE TABLE outbox (
        id              INTEGER PRIMARY KEY,
        idempotency_key TEXT NOT NULL UNIQUE,
        kind            TEXT NOT NULL,            -- a2a_announce|subagent_announce
        payload         TEXT NOT NULL,            -- JSON
        status          TEXT NOT NULL,            -- pending|delivered|failed|skipped
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        last_error      TEXT,
        created_at      INTEGER NOT NULL,
        updated_at      INTEGER NOT NULL
    );
    CREATE INDEX outbox_due ON outbox (status, next_attempt_at);
    "#,
    // 2: chain budgets count runs by chain; outbox items are claimed by one process at a time.
    r#"
    CREATE INDEX runs_by_chain ON runs (chain_id) WHERE chain_id IS NOT NULL;
    ALTER TABLE outbox ADD COLUMN owner TEXT;          -- the process instance attempting it
    ALTER TABLE outbox ADD COLUMN lease_until INTEGER; -- its claim lapses after this (ms)
    ALTER TABLE outbox ADD COLUMN session_key TEXT;    -- the session the item announces to
    "#,
    // 3: transcript entries keep their id, parent link and envelope; the entries that are not
    // messages (compaction, branch summaries, model changes, custom entries, …) are kept too,
    // numbered in the same sequence as the messages of their transcript.
    r#"
    ALTER TABLE messages ADD COLUMN entry_id TEXT;   -- the entry's id; NULL: %08x of seq
    ALTER TABLE messages ADD COLUMN parent_id TEXT;  -- its parentId (NULL: a root, or seq-1 when entry_id is NULL)
    ALTER TABLE messages ADD COLUMN envelope TEXT;   -- the entry as JSON without its message; NULL: a plain message entry
    CREATE TABLE transcript_entries (
        session_id  TEXT NOT NULL,
        seq         INTEGER NOT NULL,            -- shares the numbering of the transcript's messages
        entry_id    TEXT,
        parent_id   TEXT,
        type        TEXT,                        -- the entry's type, NULL when it had none
        entry       TEXT NOT NULL,               -- the whole entry as JSON
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    "#,
    // 4 (import9, issue 15): the task ledger rows of a 2026.9 state folder (its `task_runs`), kept as
    // read for the export back; IF NOT EXISTS, so its place among the migrations does not matter.
    r#"
    CREATE TABLE IF NOT EXISTS task_runs_2026_9 (
        task_id               TEXT PRIMARY KEY NOT NULL,
        run_id                TEXT,
        runtime               TEXT NOT NULL,
        status                TEXT NOT NULL,
        delivery_status       TEXT NOT NULL,
        owner_key             TEXT NOT NULL,
        requester_session_key TEXT,
        child_session_key     TEXT,
        agent_id              TEXT,
        created_at            INTEGER NOT NULL,
        ended_at              INTEGER,
        record                TEXT NOT NULL    -- the whole row as JSON (camelCase field names)
    );
    CREATE INDEX IF NOT EXISTS task_runs_2026_9_by_run ON task_runs_2026_9 (run_id) WHERE run_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS task_runs_2026_9_by_owner ON task_runs_2026_9 (owner_key, created_at DESC);
    CREATE INDEX IF NOT EXISTS task_runs_2026_9_by_child ON task_runs_2026_9 (child_session_key) WHERE child_session_key IS NOT NULL;
    "#,
    // 5 (fidelity, issue 12): the ids read from transcript files, so that an id given to an
    // appended entry is never one of them (appended messages, envelope NULL, stay out of the
    // index); IF NOT EXISTS, so its place among the migrations does not matter.
    r#"
    CREATE INDEX IF NOT EXISTS messages_by_read_id ON messages (session_id, entry_id) WHERE envelope IS NOT NULL;
    CREATE INDEX IF NOT EXISTS transcript_entries_by_id ON transcript_entries (session_id, entry_id);
    "#,
    // 6 (contract9, issue 13): the 2026.9 inventory facts of a session, projected from its entry so that the
    // sessions_list filters of 2026.9 run on indexes (store/inventory.rs writes them).
    r#"
    ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0; -- entry.archivedAt is set
    ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;   -- entry.pinnedAt is set
    ALTER TABLE sessions ADD COLUMN owner_id TEXT;      -- entry.owner.actor.id
    ALTER TABLE sessions ADD COLUMN creator_id TEXT;    -- entry.createdActor.id
    ALTER TABLE sessions ADD COLUMN project_id TEXT;    -- entry.projectId
    ALTER TABLE sessions ADD COLUMN workspace_dir TEXT; -- entry.spawnedCwd, else entry.spawnedWorkspaceDir
    ALTER TABLE sessions ADD COLUMN grp TEXT;           -- entry.category (the sidebar group)
    ALTER TABLE sessions ADD COLUMN parent_key TEXT;    -- entry.parentSessionKey
    ALTER TABLE sessions ADD COLUMN owner_key TEXT;     -- entry.ownerSessionKey
    UPDATE sessions SET
        archived = json_type(entry, '$.archivedAt') IS NOT NULL AND json_type(entry, '$.archivedAt') <> 'null',
        pinned = json_type(entry, '$.pinnedAt') IS NOT NULL AND json_type(entry, '$.pinnedAt') <> 'null',
        owner_id = CASE json_type(entry, '$.owner.actor.id') WHEN 'text' THEN json_extract(entry, '$.owner.actor.id') END,
        creator_id = CASE json_type(entry, '$.createdActor.id') WHEN 'text' THEN json_extract(entry, '$.createdActor.id') END,
        project_id = CASE json_type(entry, '$.projectId') WHEN 'text' THEN json_extract(entry, '$.projectId') END,
        workspace_dir = CASE WHEN json_type(entry, '$.spawnedCwd') = 'text' THEN json_extract(entry, '$.spawnedCwd')
                             WHEN json_type(entry, '$.spawnedWorkspaceDir') = 'text' THEN json_extract(entry, '$.spawnedWorkspaceDir') END,
        grp = CASE json_type(entry, '$.category') WHEN 'text' THEN json_extract(entry, '$.category') END,
        parent_key = CASE json_type(entry, '$.parentSessionKey') WHEN 'text' THEN json_extract(entry, '$.parentSessionKey') END,
        owner_key = CASE json_type(entry, '$.ownerSessionKey') WHEN 'text' THEN json_extract(entry, '$.ownerSessionKey') END;
    CREATE INDEX sessions_by_archived ON sessions (archived, updated_at DESC, key); -- key: offsets skip in the index
    CREATE INDEX sessions_by_pinned ON sessions (pinned, updated_at DESC) WHERE pinned = 1;
    CREATE INDEX sessions_by_owner_id ON sessions (owner_id, updated_at DESC) WHERE owner_id IS NOT NULL;
    CREATE INDEX sessions_by_creator_id ON sessions (creator_id, updated_at DESC) WHERE creator_id IS NOT NULL;
    CREATE INDEX sessions_by_project_id ON sessions (project_id, updated_at DESC) WHERE project_id IS NOT NULL;
    CREATE INDEX sessions_by_workspace_dir ON sessions (workspace_dir, updated_at DESC) WHERE workspace_dir IS NOT NULL;
    CREATE INDEX sessions_by_grp ON sessions (grp, updated_at DESC) WHERE grp IS NOT NULL;
    CREATE INDEX sessions_by_parent_key ON sessions (parent_key) WHERE parent_key IS NOT NULL;
    CREATE INDEX sessions_by_owner_key ON sessions (owner_key) WHERE owner_key IS NOT NULL;
    CREATE INDEX messages_by_entry_id ON messages (session_id, entry_id) WHERE entry_id IS NOT NULL; -- the messageId anchor
    "#,
    // 7: ownership by lease (API.md §1.7): runs.owner and outbox.owner name a row here; work is
    // held while its owner's lease has not expired. It touches only its own table.
    r#"
    CREATE TABLE IF NOT EXISTS owners (
        owner_id    TEXT PRIMARY KEY NOT NULL,   -- a fresh uuid per open store
        host_id     TEXT NOT NULL,               -- processes with one host id see each other's pids
        host_name   TEXT NOT NULL,               -- for people reading the table
        pid         INTEGER NOT NULL,
        started_at  INTEGER NOT NULL,            -- ms
        expires_at  INTEGER NOT NULL             -- ms; the lease ends then unless renewed
    );
    "#,
    // 8 (orch9, issue 14): the live task ledger behind the `subagents` tool: the columns are
    // projections of `record`, the whole 2026.9 task row as camelCase JSON. IF NOT EXISTS, so its
    // place among the migrations does not matter.
    r#"
    CREATE TABLE IF NOT EXISTS task_runs (
        task_id               TEXT PRIMARY KEY NOT NULL, -- the stable id the `subagents` tool shows
        run_id                TEXT,                      -- the run it tracks (subagent_runs.run_id)
        runtime               TEXT NOT NULL,             -- subagent|acp|cron|cli
        status                TEXT NOT NULL,             -- queued|running|succeeded|failed|timed_out|cancelled|lost
        delivery_status       TEXT,                      -- pending|delivered|failed|not_applicable|…
        owner_key             TEXT NOT NULL,             -- canonical key of the owning session
        requester_session_key TEXT,
        child_session_key     TEXT,
        agent_id              TEXT,
        created_at            INTEGER NOT NULL,
        ended_at              INTEGER,
        record                TEXT NOT NULL              -- the task as JSON (camelCase)
    );
    CREATE INDEX IF NOT EXISTS task_runs_by_run ON task_runs (run_id);
    CREATE INDEX IF NOT EXISTS task_runs_by_owner ON task_runs (owner_key, created_at DESC);
    CREATE INDEX IF NOT EXISTS task_runs_by_child ON task_runs (child_session_key);
    "#,
    // 9 (orch9, issue 14): persisted `sessions_yield` waits.
    r#"
    CREATE TABLE IF NOT EXISTS yields (
        yield_id       TEXT PRIMARY KEY NOT NULL,
        session_key    TEXT NOT NULL,                 -- canonical key of the session that yielded
        turn_run_id    TEXT,                          -- ctx.runId of the yielding turn, when given
        message        TEXT NOT NULL,                 -- private context for the resumed turn
        acknowledgment TEXT,
        origin         TEXT,                          -- JSON {channel,to,accountId,threadId} of the yielding turn
        wait_for       TEXT NOT NULL,                 -- children|message
        children       TEXT NOT NULL,                 -- JSON array of the claimed child run ids
        status         TEXT NOT NULL,                 -- waiting|resuming|resumed
        resume_run_id  TEXT,
        created_at     INTEGER NOT NULL,
        resumed_at     INTEGER
    );
    CREATE INDEX IF NOT EXISTS yields_by_session ON yields (session_key, status);
    CREATE INDEX IF NOT EXISTS yields_open ON yields (status) WHERE status <> 'resumed';
    "#,
    // 10 (orch9b, issue 14): 2026.9 `sessions_send` `watch`: who watches which session, and a
    // per-session sequence of the changes watchers are told about; the turn that spawned each
    // sub-agent run (`sessions_yield` claims per turn).
    r#"
    CREATE TABLE IF NOT EXISTS session_watches (
        watcher_key   TEXT NOT NULL,                 -- canonical key of the watching session
        target_key    TEXT NOT NULL,                 -- canonical key of the watched session
        last_seen_seq INTEGER NOT NULL,              -- the change the watcher has caught up to
        notified_seq  INTEGER NOT NULL,              -- the change its pending notice stands at
        material_seq  INTEGER NOT NULL,              -- the latest change it was told about
        updated_at    INTEGER NOT NULL,
        PRIMARY KEY (watcher_key, target_key)
    );
    CREATE INDEX IF NOT EXISTS session_watches_by_target ON session_watches (target_key);
    CREATE TABLE IF NOT EXISTS session_state_heads (
        session_key TEXT PRIMARY KEY NOT NULL,
        last_seq    INTEGER NOT NULL,                -- the session's latest watched change
        updated_at  INTEGER NOT NULL
    );
    -- the requester turn (ctx.runId) that spawned a sub-agent run: a yield claims its own turn's
    CREATE TABLE IF NOT EXISTS spawn_turns (
        run_id      TEXT PRIMARY KEY NOT NULL,       -- the child's run
        turn_run_id TEXT NOT NULL
    );
    "#,
    // 11 (perf, issue 17): the read-id check of appends looks ids up in `messages_by_entry_id`
    // (and checks the envelope on the row), so the second index on (session_id, entry_id) that
    // every imported message paid for goes. It touches only that index.
    r#"
    DROP INDEX IF EXISTS messages_by_read_id;
    "#,
    // (tasks1) one task ledger: the rows imported from a 2026.9 folder (`task_runs_2026_9`, 4)
    // join the engine's (`task_runs`, 8), oldest first; a task id in both keeps its `task_runs`
    // row (the subagents tool's copy of the imported one, as the engine has brought it in step
    // since). It touches only those two tables, so its place among the migrations does not matter.
    r#"
    INSERT INTO task_runs (task_id, run_id, runtime, status, delivery_status, owner_key,
        requester_session_key, child_session_key, agent_id, created_at, ended_at, record)
    SELECT task_id, run_id, runtime, status, delivery_status, owner_key,
        requester_session_key, child_session_key, agent_id, created_at, ended_at, record
    FROM task_runs_2026_9 WHERE true ORDER BY created_at, task_id
    ON CONFLICT (task_id) DO NOTHING;
    DROP TABLE IF EXISTS task_runs_2026_9;
    "#,
    // 13 (yieldpause, issue 14): a child session's records by its key (a paused child is found
    // by its session, `Db::subagent_runs_of_child`). It touches only that index; IF NOT EXISTS,
    // so its place among the migrations does not matter.
    r#"
    CREATE INDEX IF NOT EXISTS subagent_runs_by_child ON subagent_runs (child_key);
    "#,
    // 14 (writefast, perf, issue 17): every upsert rewrote the entries of each index holding
    // `updated_at`; `sessions_by_updated` goes, as the unfiltered list and inventory page read the
    // two halves of `sessions_by_archived` (archived, updated_at DESC, key) merged instead. It
    // touches only that index (SQLite only: PostgreSQL keeps its own and plans its lists itself).
    r#"
    DROP INDEX IF EXISTS sessions_by_updated;
    "#,
    // 15 (frames, perf, issue 17): one index holding `updated_at` instead of two. An upsert
    // rewrote its entry in `sessions_by_agent` and in `sessions_by_archived` (two log pages
    // each); the list of an agent with many rows now walks `sessions_by_archived`, which carries
    // `agent_id` so that the rows of other agents are passed over in the index without reading
    // them, and `sessions_by_agent_id` (no `updated_at`: an upsert leaves it alone) serves the
    // distinct agents and the lists of agents with few rows (sorted). `updated_at` ascends and the live rows (`archived` 0) come last, so the newest
    // entry goes to the index's last page: SQLite rebalanced the first three leaves on almost
    // every insert at the front of a descending index (read backwards, the order is the same).
    // It touches only these indexes (SQLite only: PostgreSQL plans its own lists).
    r#"
    DROP INDEX IF EXISTS sessions_by_agent;
    DROP INDEX IF EXISTS sessions_by_archived;
    CREATE INDEX IF NOT EXISTS sessions_by_archived ON sessions (archived DESC, updated_at, key DESC, agent_id);
    CREATE INDEX IF NOT EXISTS sessions_by_agent_id ON sessions (agent_id);
    "#,
];

/// The schema version this build writes.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

fn refuse(path: &str, why: impl std::fmt::Display) -> Error {
    Error::store(format!("cannot open the store at {path}: {why}"))
}

/// Runs one step of opening, again while another connection holds a lock that SQLite does not
/// wait for itself (switching to WAL needs an exclusive lock, and SQLite answers BUSY at once
/// while another connection opening the same new file holds one): up to about 10 s.
fn retry_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut waited = 0u64;
    loop {
        match step() {
            Err(e)
                if waited < 10_000
                    && matches!(
                        e.sqlite_error_code(),
                        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked)
                    ) =>
            {
                let pause = (5 + waited / 10).min(100);
                std::thread::sleep(std::time::Duration::from_millis(pause));
                waited += pause;
            }
            other => return other,
        }
    }
}

/// Checks that the database is empty or ours, turns WAL on, and brings the schema up to date.
pub fn prepare(conn: &Connection, path: &str) -> Result<()> {
    // Reading first: a file that is not a database fails here, before anything is written.
    let (tables, app_id, version) = retry_busy(|| read_identity(conn)).map_err(|e| refuse(path, e))?;
    if tables > 0 && app_id != APPLICATION_ID {
        return Err(refuse(path, "it is a SQLite database with tables that are not a session-tools store"));
    }
    if version > LATEST {
        return Err(refuse(
            path,
            format!("it was written by a newer session-tools (schema {version}, this build knows {LATEST})"),
        ));
    }
    if path != ":memory:" {
        retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL")).map_err(|e| refuse(path, e))?;
    }
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(|e| refuse(path, e))?;
    migrate(conn, path)
}

fn read_identity(conn: &Connection) -> rusqlite::Result<(i64, i32, i64)> {
    let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0))?;
    let app_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    Ok((tables, app_id, version))
}

fn migrate(conn: &Connection, path: &str) -> Result<()> {
    // IMMEDIATE: two processes opening a new file at once migrate it once.
    let tx = retry_busy(|| rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate))
        .map_err(|e| refuse(path, e))?;
    let (tables, app_id, version) = read_identity(&tx).map_err(|e| refuse(path, e))?;
    if tables > 0 && app_id != APPLICATION_ID {
        return Err(refuse(path, "it is a SQLite database with tables that are not a session-tools store"));
    }
    if version < LATEST {
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
            tx.execute_batch(sql).map_err(|e| refuse(path, format!("migration {} failed: {e}", i + 1)))?;
        }
        tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(|e| refuse(path, e))?;
        tx.pragma_update(None, "user_version", LATEST).map_err(|e| refuse(path, e))?;
    }
    tx.commit().map_err(|e| refuse(path, e))?;
    Ok(())
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
