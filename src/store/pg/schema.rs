//! The PostgreSQL schema: the same tables, columns and indexes as the SQLite store's latest
//! schema, in PostgreSQL's types, and its numbered migrations.
//!
//! The tables live in the connection's current schema (`search_path`), so several stores can
//! share one database in different schemas. Text is `COLLATE "C"` (bytewise, as SQLite orders
//! it, whatever the database's locale); integers are 64-bit; the tables the engine reads "in
//! insertion order" carry a `rowid` of their own, and `instr` is defined, so the engine's
//! statements read the same on both servers. `session_tools_meta` marks a database (schema) as
//! ours and holds its version. A SQLite migration that changes what the engine's statements can
//! see needs its counterpart appended here.

/// The PostgreSQL migrations, in order; the version of a store is how many of them it has run.
/// Never edit a shipped one: append.
pub const MIGRATIONS: &[&str] = &[
    // 1: everything up to SQLite schema 9.
    r#"
    CREATE TABLE session_tools_meta (
        key   TEXT COLLATE "C" PRIMARY KEY,
        value TEXT COLLATE "C" NOT NULL
    );
    CREATE OR REPLACE FUNCTION instr(haystack TEXT, needle TEXT) RETURNS INTEGER
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT strpos(haystack, needle)';

    CREATE TABLE sessions (
        rowid         BIGSERIAL,
        key           TEXT COLLATE "C" PRIMARY KEY,
        session_id    TEXT COLLATE "C" NOT NULL,
        agent_id      TEXT COLLATE "C",
        rest          TEXT COLLATE "C",
        updated_at    BIGINT NOT NULL,
        spawned_by    TEXT COLLATE "C",
        label         TEXT COLLATE "C",
        base_kind     TEXT COLLATE "C" NOT NULL,
        search        TEXT COLLATE "C" NOT NULL,
        entry         TEXT COLLATE "C" NOT NULL,
        archived      BIGINT NOT NULL DEFAULT 0,
        pinned        BIGINT NOT NULL DEFAULT 0,
        owner_id      TEXT COLLATE "C",
        creator_id    TEXT COLLATE "C",
        project_id    TEXT COLLATE "C",
        workspace_dir TEXT COLLATE "C",
        grp           TEXT COLLATE "C",
        parent_key    TEXT COLLATE "C",
        owner_key     TEXT COLLATE "C"
    );
    CREATE INDEX sessions_by_updated ON sessions (updated_at DESC);
    CREATE INDEX sessions_by_session_id ON sessions (session_id);
    CREATE INDEX sessions_by_spawned_by ON sessions (spawned_by, updated_at DESC) WHERE spawned_by IS NOT NULL;
    CREATE INDEX sessions_by_label ON sessions (label, updated_at DESC) WHERE label IS NOT NULL;
    CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC);
    CREATE INDEX sessions_by_archived ON sessions (archived, updated_at DESC, key);
    CREATE INDEX sessions_by_pinned ON sessions (pinned, updated_at DESC) WHERE pinned = 1;
    CREATE INDEX sessions_by_owner_id ON sessions (owner_id, updated_at DESC) WHERE owner_id IS NOT NULL;
    CREATE INDEX sessions_by_creator_id ON sessions (creator_id, updated_at DESC) WHERE creator_id IS NOT NULL;
    CREATE INDEX sessions_by_project_id ON sessions (project_id, updated_at DESC) WHERE project_id IS NOT NULL;
    CREATE INDEX sessions_by_workspace_dir ON sessions (workspace_dir, updated_at DESC) WHERE workspace_dir IS NOT NULL;
    CREATE INDEX sessions_by_grp ON sessions (grp, updated_at DESC) WHERE grp IS NOT NULL;
    CREATE INDEX sessions_by_parent_key ON sessions (parent_key) WHERE parent_key IS NOT NULL;
    CREATE INDEX sessions_by_owner_key ON sessions (owner_key) WHERE owner_key IS NOT NULL;

    CREATE TABLE messages (
        session_id TEXT COLLATE "C" NOT NULL,
        seq        BIGINT NOT NULL,
        role       TEXT COLLATE "C",
        message    TEXT COLLATE "C" NOT NULL,
        entry_id   TEXT COLLATE "C",
        parent_id  TEXT COLLATE "C",
        envelope   TEXT COLLATE "C",
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX messages_by_read_id ON messages (session_id, entry_id) WHERE envelope IS NOT NULL;
    CREATE INDEX messages_by_entry_id ON messages (session_id, entry_id) WHERE entry_id IS NOT NULL;

    CREATE TABLE transcript_entries (
        session_id TEXT COLLATE "C" NOT NULL,
        seq        BIGINT NOT NULL,
        entry_id   TEXT COLLATE "C",
        parent_id  TEXT COLLATE "C",
        type       TEXT COLLATE "C",
        entry      TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX transcript_entries_by_id ON transcript_entries (session_id, entry_id);

    CREATE TABLE runs (
        run_id      TEXT COLLATE "C" PRIMARY KEY,
        session_key TEXT COLLATE "C" NOT NULL,
        lane        TEXT COLLATE "C" NOT NULL,
        chain_id    TEXT COLLATE "C",
        status      TEXT COLLATE "C" NOT NULL,
        started_at  BIGINT,
        ended_at    BIGINT,
        error       TEXT COLLATE "C",
        owner       TEXT COLLATE "C"
    );
    CREATE INDEX runs_by_session ON runs (session_key, status);
    CREATE INDEX runs_by_status ON runs (status);
    CREATE INDEX runs_by_chain ON runs (chain_id) WHERE chain_id IS NOT NULL;

    CREATE TABLE subagent_runs (
        rowid           BIGSERIAL,
        run_id          TEXT COLLATE "C" PRIMARY KEY,
        requester_key   TEXT COLLATE "C" NOT NULL,
        child_key       TEXT COLLATE "C" NOT NULL,
        ended           BIGINT NOT NULL DEFAULT 0,
        announce_status TEXT COLLATE "C" NOT NULL DEFAULT 'pending',
        archive_at      BIGINT,
        record          TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX subagent_runs_by_requester ON subagent_runs (requester_key);
    CREATE INDEX subagent_runs_by_archive ON subagent_runs (archive_at) WHERE archive_at IS NOT NULL;

    CREATE TABLE outbox (
        id              BIGSERIAL PRIMARY KEY,
        idempotency_key TEXT COLLATE "C" NOT NULL UNIQUE,
        kind            TEXT COLLATE "C" NOT NULL,
        payload         TEXT COLLATE "C" NOT NULL,
        status          TEXT COLLATE "C" NOT NULL,
        attempts        BIGINT NOT NULL DEFAULT 0,
        next_attempt_at BIGINT NOT NULL,
        last_error      TEXT COLLATE "C",
        created_at      BIGINT NOT NULL,
        updated_at      BIGINT NOT NULL,
        owner           TEXT COLLATE "C",
        lease_until     BIGINT,
        session_key     TEXT COLLATE "C"
    );
    CREATE INDEX outbox_due ON outbox (status, next_attempt_at);

    CREATE TABLE task_runs_2026_9 (
        rowid                 BIGSERIAL,
        task_id               TEXT COLLATE "C" PRIMARY KEY,
        run_id                TEXT COLLATE "C",
        runtime               TEXT COLLATE "C" NOT NULL,
        status                TEXT COLLATE "C" NOT NULL,
        delivery_status       TEXT COLLATE "C" NOT NULL,
        owner_key             TEXT COLLATE "C" NOT NULL,
        requester_session_key TEXT COLLATE "C",
        child_session_key     TEXT COLLATE "C",
        agent_id              TEXT COLLATE "C",
        created_at            BIGINT NOT NULL,
        ended_at              BIGINT,
        record                TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX task_runs_2026_9_by_run ON task_runs_2026_9 (run_id) WHERE run_id IS NOT NULL;
    CREATE INDEX task_runs_2026_9_by_owner ON task_runs_2026_9 (owner_key, created_at DESC);
    CREATE INDEX task_runs_2026_9_by_child ON task_runs_2026_9 (child_session_key) WHERE child_session_key IS NOT NULL;

    CREATE TABLE owners (
        owner_id   TEXT COLLATE "C" PRIMARY KEY,
        host_id    TEXT COLLATE "C" NOT NULL,
        host_name  TEXT COLLATE "C" NOT NULL,
        pid        BIGINT NOT NULL,
        started_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
    );

    CREATE TABLE task_runs (
        rowid                 BIGSERIAL,
        task_id               TEXT COLLATE "C" PRIMARY KEY,
        run_id                TEXT COLLATE "C",
        runtime               TEXT COLLATE "C" NOT NULL,
        status                TEXT COLLATE "C" NOT NULL,
        delivery_status       TEXT COLLATE "C",
        owner_key             TEXT COLLATE "C" NOT NULL,
        requester_session_key TEXT COLLATE "C",
        child_session_key     TEXT COLLATE "C",
        agent_id              TEXT COLLATE "C",
        created_at            BIGINT NOT NULL,
        ended_at              BIGINT,
        record                TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX task_runs_by_run ON task_runs (run_id);
    CREATE INDEX task_runs_by_owner ON task_runs (owner_key, created_at DESC);
    CREATE INDEX task_runs_by_child ON task_runs (child_session_key);

    CREATE TABLE yields (
        rowid          BIGSERIAL,
        yield_id       TEXT COLLATE "C" PRIMARY KEY,
        session_key    TEXT COLLATE "C" NOT NULL,
        turn_run_id    TEXT COLLATE "C",
        message        TEXT COLLATE "C" NOT NULL,
        acknowledgment TEXT COLLATE "C",
        origin         TEXT COLLATE "C",
        wait_for       TEXT COLLATE "C" NOT NULL,
        children       TEXT COLLATE "C" NOT NULL,
        status         TEXT COLLATE "C" NOT NULL,
        resume_run_id  TEXT COLLATE "C",
        created_at     BIGINT NOT NULL,
        resumed_at     BIGINT
    );
    CREATE INDEX yields_by_session ON yields (session_key, status);
    CREATE INDEX yields_open ON yields (status) WHERE status <> 'resumed';
    "#,
    // 2 (orch9b, issue 14): SQLite migration 10: session watches, their sequence, spawn turns.
    r#"
    CREATE TABLE IF NOT EXISTS session_watches (
        watcher_key   TEXT COLLATE "C" NOT NULL,
        target_key    TEXT COLLATE "C" NOT NULL,
        last_seen_seq BIGINT NOT NULL,
        notified_seq  BIGINT NOT NULL,
        material_seq  BIGINT NOT NULL,
        updated_at    BIGINT NOT NULL,
        PRIMARY KEY (watcher_key, target_key)
    );
    CREATE INDEX IF NOT EXISTS session_watches_by_target ON session_watches (target_key);
    CREATE TABLE IF NOT EXISTS session_state_heads (
        session_key TEXT COLLATE "C" PRIMARY KEY NOT NULL,
        last_seq    BIGINT NOT NULL,
        updated_at  BIGINT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS spawn_turns (
        run_id      TEXT COLLATE "C" PRIMARY KEY NOT NULL,
        turn_run_id TEXT COLLATE "C" NOT NULL
    );
    "#,
    // (tasks1) the counterpart of SQLite's task-ledger merge: the imported 2026.9 task rows join
    // `task_runs` (a task id in both keeps its `task_runs` row) and `task_runs_2026_9` goes. It
    // touches only those two tables, so its place among the migrations does not matter.
    r#"
    INSERT INTO task_runs (task_id, run_id, runtime, status, delivery_status, owner_key,
        requester_session_key, child_session_key, agent_id, created_at, ended_at, record)
    SELECT task_id, run_id, runtime, status, delivery_status, owner_key,
        requester_session_key, child_session_key, agent_id, created_at, ended_at, record
    FROM task_runs_2026_9 ORDER BY created_at, task_id, rowid
    ON CONFLICT (task_id) DO NOTHING;
    DROP TABLE IF EXISTS task_runs_2026_9;
    "#,
    // 4 (yieldpause, issue 14): SQLite migration 13: a child session's records by its key, in
    // registration order (SQLite's index carries the rowid itself).
    r#"
    CREATE INDEX IF NOT EXISTS subagent_runs_by_child ON subagent_runs (child_key, rowid);
    "#,
];

/// The version this build writes.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

/// The tables of the store; one of them in a schema without `session_tools_meta` means the
/// schema holds someone else's tables of the same name, and the store refuses it.
pub const TABLES: &[&str] = &[
    "sessions",
    "messages",
    "transcript_entries",
    "runs",
    "subagent_runs",
    "outbox",
    "owners",
    "task_runs",
    "yields",
    "session_watches",
    "session_state_heads",
    "spawn_turns",
];
