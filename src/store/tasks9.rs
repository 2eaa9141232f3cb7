//! The task ledger rows of a 2026.9 state folder as read (its `task_runs`, kept here in
//! `task_runs_2026_9`, migration 3): the columns one filters on beside the whole row as JSON, so
//! that an export writes back exactly what was imported.
//!
//! It never interprets a row (status words, delivery states): callers hand it finished rows.

use rusqlite::params;

use super::{sql, Db};
use crate::error::Result;

/// One `task_runs_2026_9` row; `record` is the whole 2026.9 row as a JSON object (camelCase names).
#[derive(Debug, Clone, PartialEq)]
pub struct Task9Row {
    pub task_id: String,
    pub run_id: Option<String>,
    pub runtime: String,
    pub status: String,
    pub delivery_status: String,
    pub owner_key: String,
    pub requester_session_key: Option<String>,
    pub child_session_key: Option<String>,
    pub agent_id: Option<String>,
    pub created_at: i64,
    pub ended_at: Option<i64>,
    pub record: String,
}

fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Task9Row> {
    Ok(Task9Row {
        task_id: r.get(0)?,
        run_id: r.get(1)?,
        runtime: r.get(2)?,
        status: r.get(3)?,
        delivery_status: r.get(4)?,
        owner_key: r.get(5)?,
        requester_session_key: r.get(6)?,
        child_session_key: r.get(7)?,
        agent_id: r.get(8)?,
        created_at: r.get(9)?,
        ended_at: r.get(10)?,
        record: r.get(11)?,
    })
}

impl Db<'_> {
    /// Adds a task row unless one with its task id is stored; whether it was added.
    pub fn insert_task9_if_absent(&self, t: &Task9Row) -> Result<bool> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "INSERT OR IGNORE INTO task_runs_2026_9 (task_id, run_id, runtime, status, delivery_status, owner_key,
                     requester_session_key, child_session_key, agent_id, created_at, ended_at, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .map_err(sql)?;
        let n = st
            .execute(params![
                t.task_id,
                t.run_id,
                t.runtime,
                t.status,
                t.delivery_status,
                t.owner_key,
                t.requester_session_key,
                t.child_session_key,
                t.agent_id,
                t.created_at,
                t.ended_at,
                t.record
            ])
            .map_err(sql)?;
        Ok(n > 0)
    }

    /// Every task row, oldest first.
    pub fn all_tasks9(&self) -> Result<Vec<Task9Row>> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "SELECT task_id, run_id, runtime, status, delivery_status, owner_key, requester_session_key,
                        child_session_key, agent_id, created_at, ended_at, record
                 FROM task_runs_2026_9 ORDER BY created_at, task_id",
            )
            .map_err(sql)?;
        let rows = st.query_map([], task_row).map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// The task rows an owner (a requester session key) holds, newest first.
    pub fn tasks9_of_owner(&self, owner_key: &str) -> Result<Vec<Task9Row>> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "SELECT task_id, run_id, runtime, status, delivery_status, owner_key, requester_session_key,
                        child_session_key, agent_id, created_at, ended_at, record
                 FROM task_runs_2026_9 WHERE owner_key = ?1 ORDER BY created_at DESC, task_id",
            )
            .map_err(sql)?;
        let rows = st.query_map([owner_key], task_row).map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// The task row of a run, if any.
    pub fn task9_by_run(&self, run_id: &str) -> Result<Option<Task9Row>> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "SELECT task_id, run_id, runtime, status, delivery_status, owner_key, requester_session_key,
                        child_session_key, agent_id, created_at, ended_at, record
                 FROM task_runs_2026_9 WHERE run_id = ?1 ORDER BY created_at DESC, task_id LIMIT 1",
            )
            .map_err(sql)?;
        let mut rows = st.query_map([run_id], task_row).map_err(sql)?;
        rows.next().transpose().map_err(sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_task_row_is_added_once_and_found_by_owner_and_run() {
        let st = Store::open(":memory:").unwrap();
        let row = Task9Row {
            task_id: "t1".into(),
            run_id: Some("r1".into()),
            runtime: "subagent".into(),
            status: "running".into(),
            delivery_status: "pending".into(),
            owner_key: "agent:main:main".into(),
            requester_session_key: Some("agent:main:main".into()),
            child_session_key: Some("agent:main:subagent:x".into()),
            agent_id: Some("main".into()),
            created_at: 5,
            ended_at: None,
            record: "{\"taskId\":\"t1\"}".into(),
        };
        assert!(st.write(|db| db.insert_task9_if_absent(&row)).unwrap());
        assert!(!st.write(|db| db.insert_task9_if_absent(&row)).unwrap());
        assert_eq!(st.read(|db| db.tasks9_of_owner("agent:main:main")).unwrap(), vec![row.clone()]);
        assert_eq!(st.read(|db| db.task9_by_run("r1")).unwrap(), Some(row.clone()));
        assert_eq!(st.read(|db| db.task9_by_run("r2")).unwrap(), None);
        assert_eq!(st.read(|db| db.all_tasks9()).unwrap().len(), 1);
    }
}
