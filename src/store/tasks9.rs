//! The task ledger rows of a 2026.9 state folder as read (its `task_runs`, kept here in
//! `task_runs_2026_9`, migration 3): the columns one filters on beside the whole row as JSON, so
//! that an export writes back exactly what was imported.
//!
//! It never interprets a row (status words, delivery states): callers hand it finished rows.

use super::{Db, Row};
use crate::args;
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

/// The columns [`task_row`] reads, in its order.
macro_rules! task9_columns {
    () => {
        "task_id, run_id, runtime, status, delivery_status, owner_key, requester_session_key, \
         child_session_key, agent_id, created_at, ended_at, record"
    };
}

fn task_row(r: &Row<'_>) -> Result<Task9Row> {
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
        let n = self.exec(
            concat!(
                "INSERT INTO task_runs_2026_9 (",
                task9_columns!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT (task_id) DO NOTHING"
            ),
            args![
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
            ],
        )?;
        Ok(n > 0)
    }

    /// Every task row, oldest first.
    pub fn all_tasks9(&self) -> Result<Vec<Task9Row>> {
        self.rows(
            concat!("SELECT ", task9_columns!(), " FROM task_runs_2026_9 ORDER BY created_at, task_id"),
            args![],
            task_row,
        )
    }

    /// The task rows an owner (a requester session key) holds, newest first.
    pub fn tasks9_of_owner(&self, owner_key: &str) -> Result<Vec<Task9Row>> {
        self.rows(
            concat!(
                "SELECT ",
                task9_columns!(),
                " FROM task_runs_2026_9 WHERE owner_key = ?1 ORDER BY created_at DESC, task_id"
            ),
            args![owner_key],
            task_row,
        )
    }

    /// The task row of a run, if any.
    pub fn task9_by_run(&self, run_id: &str) -> Result<Option<Task9Row>> {
        self.row(
            concat!(
                "SELECT ",
                task9_columns!(),
                " FROM task_runs_2026_9 WHERE run_id = ?1 ORDER BY created_at DESC, task_id LIMIT 1"
            ),
            args![run_id],
            task_row,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pg::testdb;
    use crate::store::subagents::tests::reopenable_urls;
    use crate::store::Store;

    fn row(id: &str, run: &str, created: i64) -> Task9Row {
        Task9Row {
            task_id: id.into(),
            run_id: Some(run.into()),
            runtime: "subagent".into(),
            status: "succeeded".into(),
            delivery_status: "delivered".into(),
            owner_key: "agent:main:main".into(),
            requester_session_key: None,
            child_session_key: None,
            agent_id: None,
            created_at: created,
            ended_at: Some(created + 1),
            record: format!("{{\"taskId\":\"{id}\"}}"),
        }
    }

    #[test]
    fn a_task_row_is_added_once_and_found_by_owner_and_run() {
        for st in testdb::stores() {
            let on = format!("{:?}", st.dialect());
            let one = Task9Row {
                status: "running".into(),
                delivery_status: "pending".into(),
                requester_session_key: Some("agent:main:main".into()),
                child_session_key: Some("agent:main:subagent:x".into()),
                agent_id: Some("main".into()),
                ended_at: None,
                ..row("t1", "r1", 5)
            };
            assert!(st.write(|db| db.insert_task9_if_absent(&one)).unwrap(), "{on}");
            let changed = Task9Row { status: "lost".into(), ..one.clone() };
            assert!(!st.write(|db| db.insert_task9_if_absent(&changed)).unwrap(), "{on}");
            assert_eq!(st.read(|db| db.tasks9_of_owner("agent:main:main")).unwrap(), vec![one.clone()], "{on}");
            assert_eq!(st.read(|db| db.task9_by_run("r1")).unwrap(), Some(one.clone()), "{on}");
            assert_eq!(st.read(|db| db.task9_by_run("r2")).unwrap(), None, "{on}");
            assert_eq!(st.read(|db| db.all_tasks9()).unwrap(), vec![one], "{on}");
        }
    }

    #[test]
    fn rows_come_back_by_time_then_id_and_survive_a_restart() {
        for url in reopenable_urls() {
            let st = Store::open(&url).unwrap();
            st.write(|db| {
                for r in [row("b", "r", 2), row("c", "r", 1), row("a", "r", 2), row("d", "q", 3)] {
                    db.insert_task9_if_absent(&r)?;
                }
                Ok(())
            })
            .unwrap();
            st.close();
            let st = Store::open(&url).unwrap();
            let ids = |v: Vec<Task9Row>| v.into_iter().map(|t| t.task_id).collect::<Vec<_>>();
            assert_eq!(ids(st.read(|db| db.all_tasks9()).unwrap()), ["c", "a", "b", "d"], "{url}");
            assert_eq!(
                ids(st.read(|db| db.tasks9_of_owner("agent:main:main")).unwrap()),
                ["d", "a", "b", "c"],
                "{url}"
            );
            assert_eq!(st.read(|db| db.task9_by_run("r")).unwrap().map(|t| t.task_id), Some("a".into()), "{url}");
        }
    }
}
