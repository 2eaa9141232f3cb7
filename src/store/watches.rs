//! Session watches (2026.9 `sessions_send` `watch`, migration 10): a watcher's cursor on a
//! target session (`session_watches`) and the target's sequence of watched changes
//! (`session_state_heads`). Recording a change moves the cursors of the target's watchers and
//! says whom to notify, with the change each one last caught up to. Never decides what counts
//! as a change or how a watcher is told: that is the orchestration's.

use super::Db;
use crate::args;
use crate::error::Result;

/// One watcher to tell about a change of its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchNotice {
    pub watcher_key: String,
    pub target_key: String,
    /// the change this one stands at
    pub sequence: i64,
    /// the change the watcher last caught up to
    pub last_seen: i64,
}

impl Db<'_> {
    /// The target's latest change (0 before the first).
    pub fn session_state_head(&self, target: &str) -> Result<i64> {
        Ok(self.count("SELECT last_seq FROM session_state_heads WHERE session_key = ?1", args![target])? as i64)
    }

    /// `watcher` watches `target` from its latest change on; a watch already there is kept as
    /// it stands.
    pub fn watch_session(&self, watcher: &str, target: &str, now: i64) -> Result<()> {
        let head = self.session_state_head(target)?;
        self.exec(
            "INSERT INTO session_watches (watcher_key, target_key, last_seen_seq, notified_seq, material_seq, updated_at)
             VALUES (?1, ?2, ?3, ?3, ?3, ?4) ON CONFLICT (watcher_key, target_key) DO NOTHING",
            args![watcher, target, head, now],
        )?;
        Ok(())
    }

    /// Whether anyone watches `target`.
    pub fn is_watched(&self, target: &str) -> Result<bool> {
        Ok(self.count("SELECT count(*) FROM session_watches WHERE target_key = ?1", args![target])? > 0)
    }

    /// Records one change of `target`: its sequence moves on, and each watcher (those with a
    /// cursor on it, plus `implicit`, its owner) is to be told, except `actor` itself.
    pub fn record_session_change(
        &self,
        target: &str,
        implicit: Option<&str>,
        actor: Option<&str>,
        now: i64,
    ) -> Result<Vec<WatchNotice>> {
        let sequence = self.session_state_head(target)? + 1;
        self.exec(
            "INSERT INTO session_state_heads (session_key, last_seq, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_key) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at",
            args![target, sequence, now],
        )?;
        let mut watchers: Vec<(String, i64, i64)> = self.rows(
            "SELECT watcher_key, last_seen_seq, notified_seq FROM session_watches WHERE target_key = ?1 ORDER BY watcher_key",
            args![target],
            |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?, r.get::<i64>(2)?)),
        )?;
        if let Some(owner) = implicit.filter(|o| *o != target && !watchers.iter().any(|w| w.0 == *o)) {
            watchers.push((owner.to_owned(), 0, 0));
        }
        let mut out = Vec::new();
        for (watcher, last_seen, notified) in watchers {
            if actor == Some(watcher.as_str()) {
                continue;
            }
            // a notice still pending keeps the change it first reported
            let frozen = if notified == last_seen { sequence } else { notified };
            self.exec(
                "INSERT INTO session_watches (watcher_key, target_key, last_seen_seq, notified_seq, material_seq, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (watcher_key, target_key) DO UPDATE SET notified_seq = excluded.notified_seq,
                   material_seq = excluded.material_seq, updated_at = excluded.updated_at",
                args![&watcher, target, last_seen, frozen, sequence, now],
            )?;
            out.push(WatchNotice { watcher_key: watcher, target_key: target.to_owned(), sequence, last_seen });
        }
        Ok(out)
    }

    /// The watcher's turn took in its notices about `targets` (2026.9 acknowledges only the
    /// change each notice reported, never the head, so that a change in between is not lost):
    /// each cursor's `last_seen` moves to the change it was told of; where a later change is
    /// already recorded, it becomes the one told, and a follow-up notice for it is returned.
    /// Targets the watcher has no cursor on are skipped. The number of cursors moved and the
    /// follow-ups.
    pub fn acknowledge_session_notices(
        &self,
        watcher: &str,
        targets: &[String],
        now: i64,
    ) -> Result<(usize, Vec<WatchNotice>)> {
        let (mut moved, mut follow) = (0, Vec::new());
        let mut seen = std::collections::HashSet::new();
        for target in targets.iter().filter(|t| seen.insert(t.as_str())) {
            let cursor = self.row(
                "SELECT notified_seq, material_seq FROM session_watches WHERE watcher_key = ?1 AND target_key = ?2",
                args![watcher, target],
                |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)),
            )?;
            let Some((notified, material)) = cursor else { continue };
            self.exec(
                "UPDATE session_watches SET last_seen_seq = ?3, notified_seq = ?4, updated_at = ?5
                 WHERE watcher_key = ?1 AND target_key = ?2",
                args![watcher, target, notified, material.max(notified), now],
            )?;
            moved += 1;
            if material > notified {
                follow.push(WatchNotice {
                    watcher_key: watcher.to_owned(),
                    target_key: target.clone(),
                    sequence: material,
                    last_seen: notified,
                });
            }
        }
        Ok((moved, follow))
    }

    /// A deleted session watches nothing and is watched by no one.
    pub fn forget_session_watches(&self, key: &str) -> Result<()> {
        self.exec("DELETE FROM session_watches WHERE watcher_key = ?1 OR target_key = ?1", args![key])?;
        self.exec("DELETE FROM session_state_heads WHERE session_key = ?1", args![key])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pg::testdb;

    #[test]
    fn a_change_tells_every_watcher_but_the_actor_and_a_pending_notice_keeps_its_first_change() {
        for s in testdb::stores() {
            s.write(|db| {
                db.watch_session("agent:main:main", "agent:main:dm", 1)?;
                db.watch_session("agent:ops:main", "agent:main:dm", 1)?;
                assert!(db.is_watched("agent:main:dm")? && !db.is_watched("agent:main:main")?);
                let first = db.record_session_change("agent:main:dm", None, Some("agent:ops:main"), 2)?;
                assert_eq!(
                    first,
                    vec![WatchNotice {
                        watcher_key: "agent:main:main".into(),
                        target_key: "agent:main:dm".into(),
                        sequence: 1,
                        last_seen: 0
                    }]
                );
                let second = db.record_session_change("agent:main:dm", Some("agent:main:owner"), None, 3)?;
                let who: Vec<(&str, i64, i64)> =
                    second.iter().map(|n| (n.watcher_key.as_str(), n.sequence, n.last_seen)).collect();
                assert_eq!(who, [("agent:main:main", 2, 0), ("agent:ops:main", 2, 0), ("agent:main:owner", 2, 0)]);
                let pending: i64 = db
                    .count("SELECT notified_seq FROM session_watches WHERE watcher_key = 'agent:main:main'", args![])?
                    as i64;
                assert_eq!(pending, 1, "the notice still pending stands at the first change");
                // a watch registered later starts from the head
                db.watch_session("agent:qa:main", "agent:main:dm", 4)?;
                let third = db.record_session_change("agent:main:dm", None, None, 5)?;
                assert!(third.iter().any(|n| n.watcher_key == "agent:qa:main" && n.last_seen == 2));
                db.forget_session_watches("agent:main:dm")?;
                assert!(!db.is_watched("agent:main:dm")?);
                assert_eq!(db.session_state_head("agent:main:dm")?, 0);
                Ok(())
            })
            .unwrap();
        }
    }
}
