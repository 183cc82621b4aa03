//! The running node's integrity check (`node.integrity_check_secs`): every
//! period, `PRAGMA quick_check` (read-only, `db::quick_check`) on each
//! database of the state directory, on a blocking thread. Damage found is
//! kept for `/health` (503 `damaged`, each file named with the way out),
//! counted in `/metrics` (`grove_databases_damaged`) and published as
//! `database_damaged`; a database found whole again after damage (restored,
//! or moved aside) as `database_recovered`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::events::Events;
use crate::api::dto;
use crate::db::{Damaged, DbKind};
use crate::store::Store;

/// The damage the latest check found, by file; cheap to clone.
#[derive(Clone, Default)]
pub struct Integrity(Arc<Mutex<BTreeMap<PathBuf, Damaged>>>);

impl Integrity {
    /// Each damaged database in words: the file, what the check found,
    /// the way out.
    pub fn damage(&self) -> Vec<String> {
        self.lock().values().map(|d| d.to_string()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Damaged>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one round's findings: publishes what became damaged and what
    /// recovered, and keeps the damage for `/health`.
    fn record(&self, found: Vec<(PathBuf, DbKind, Option<Damaged>)>, events: &Events) {
        let mut damaged = self.lock();
        let now = crate::now_ms();
        for (path, kind, problem) in found {
            let file = path.display().to_string();
            match problem {
                Some(d) => {
                    if !damaged.contains_key(&path) {
                        tracing::error!(file = %file, problem = %d, "a database is damaged");
                        events.publish(dto::DatabaseEvent {
                            event: "database_damaged".into(),
                            at: now,
                            file: file.clone(),
                            kind: kind.to_string(),
                            problem: Some(d.to_string()),
                            detail: format!("{file} is damaged"),
                        });
                    }
                    damaged.insert(path, d);
                }
                None => {
                    if damaged.remove(&path).is_some() {
                        tracing::info!(file = %file, "a database found damaged is whole again");
                        events.publish(dto::DatabaseEvent {
                            event: "database_recovered".into(),
                            at: now,
                            file: file.clone(),
                            kind: kind.to_string(),
                            problem: None,
                            detail: format!("{file} is whole again"),
                        });
                    }
                }
            }
        }
        // A file no longer there (a shard moved aside) is no longer damage.
        damaged.retain(|path, _| path.is_file());
    }
}

/// Checks each database that exists, every one (damage in one does not
/// stop the others' checks).
fn check_each(state_dir: &Path) -> Vec<(PathBuf, DbKind, Option<Damaged>)> {
    let files = match Store::new(state_dir).databases() {
        Ok(files) => files,
        Err(e) => {
            tracing::warn!(error = %e, "the integrity check could not list the shards");
            return Vec::new();
        }
    };
    files
        .into_iter()
        .filter(|(path, _)| path.is_file())
        .map(|(path, kind)| {
            let problem = crate::db::quick_check(&path, kind).err();
            (path, kind, problem)
        })
        .collect()
}

/// Checks every `every` until the task is stopped (aborted at shutdown:
/// the check only reads).
pub async fn run(state_dir: PathBuf, every: Duration, integrity: Integrity, events: Events) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let dir = state_dir.clone();
        let started = std::time::Instant::now();
        match tokio::task::spawn_blocking(move || check_each(&dir)).await {
            Ok(found) => {
                tracing::debug!(
                    databases = found.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "integrity check"
                );
                integrity.record(found, &events);
            }
            Err(e) => tracing::warn!(error = %e, "the integrity check stopped"),
        }
    }
}
