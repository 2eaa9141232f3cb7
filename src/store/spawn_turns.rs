//! Which requester turn spawned each sub-agent run (`spawn_turns`, migration 10): 2026.9's
//! `sessions_yield` claims only the children of the turn that yields. Records and reads; the
//! claim itself is the orchestration's.

use super::Db;
use crate::args;
use crate::error::Result;

impl Db<'_> {
    /// Records that the turn `turn_run_id` spawned the run `run_id` (once; a repeat is ignored).
    pub fn record_spawn_turn(&self, run_id: &str, turn_run_id: &str) -> Result<()> {
        self.exec(
            "INSERT INTO spawn_turns (run_id, turn_run_id) VALUES (?1, ?2) ON CONFLICT (run_id) DO NOTHING",
            args![run_id, turn_run_id],
        )?;
        Ok(())
    }

    /// The turn that spawned `run_id`, when recorded.
    pub fn spawn_turn(&self, run_id: &str) -> Result<Option<String>> {
        self.row("SELECT turn_run_id FROM spawn_turns WHERE run_id = ?1", args![run_id], |r| r.get::<String>(0))
    }
}

#[cfg(test)]
mod tests {
    use crate::store::pg::testdb;

    #[test]
    fn a_spawn_turn_is_recorded_once_and_read_back() {
        for s in testdb::stores() {
            s.write(|db| {
                db.record_spawn_turn("run-1", "turn-a")?;
                db.record_spawn_turn("run-1", "turn-b")?;
                assert_eq!(db.spawn_turn("run-1")?.as_deref(), Some("turn-a"));
                assert_eq!(db.spawn_turn("run-2")?, None);
                Ok(())
            })
            .unwrap();
        }
    }
}
