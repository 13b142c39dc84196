//! Keeping a run's report when the run does not finish.
//!
//! The keeper holds every epoch record as it arrives. When training fails, or SIGINT or SIGTERM
//! arrives, it writes what it holds to the report path with `"incomplete": true` and the reason
//! (no `final` record: the run has none), so hours of epochs survive a failure at the end. The
//! complete report goes through the keeper too, under the same lock, so a signal arriving while
//! it is written cannot replace it with a partial one.
//!
//! Signals are taken by `signal-hook` on a thread of their own: the handler itself only wakes
//! that thread, which writes the partial report and exits with 128 + the signal's number (130 for
//! SIGINT, 143 for SIGTERM), as a shell reports a process killed by it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use trainer::config::TrainConfig;
use trainer::report::{EpochRecord, PartialReport, Report, to_json};

use crate::cmd::output::write_atomically;

/// A handle on the run's report; clones share it.
#[derive(Clone)]
pub struct Keeper {
    shared: Arc<Mutex<Kept>>,
}

struct Kept {
    /// Where the report goes, and the flag (or config key) that said so; `None`: no report.
    target: Option<(PathBuf, String)>,
    config: TrainConfig,
    epochs: Vec<EpochRecord>,
    /// The complete report is written (or the run ended without one); nothing more to keep.
    closed: bool,
}

impl Keeper {
    /// A keeper of the report `config` describes, written to `target` (path, and the flag that
    /// named it for errors); with `None` it keeps nothing.
    pub fn new(config: &TrainConfig, target: Option<(PathBuf, String)>) -> Self {
        let kept = Kept { target, config: config.clone(), epochs: Vec::new(), closed: false };
        Self { shared: Arc::new(Mutex::new(kept)) }
    }

    /// Keeps one finished epoch.
    pub fn record(&self, record: &EpochRecord) {
        let mut kept = self.lock();
        if kept.target.is_some() {
            kept.epochs.push(record.clone());
        }
    }

    /// Writes the complete report; from then on nothing partial replaces it.
    pub fn complete(&self, report: &Report) -> anyhow::Result<()> {
        let mut kept = self.lock();
        kept.closed = true;
        match &kept.target {
            Some((path, flag)) => write_atomically(path, &to_json(report)?, flag),
            None => Ok(()),
        }
    }

    /// Writes the epochs so far as an incomplete report saying `reason`; returns where, if it did.
    fn abandon(&self, reason: &str) -> anyhow::Result<Option<PathBuf>> {
        let mut kept = self.lock();
        if kept.closed {
            return Ok(None);
        }
        kept.closed = true;
        let Some((path, flag)) = &kept.target else { return Ok(None) };
        let partial = PartialReport::new(&kept.config, &kept.epochs, reason);
        write_atomically(path, &to_json(&partial)?, flag)?;
        Ok(Some(path.clone()))
    }

    /// Keeps the report so far for a run that failed with `err`, says where on stderr, and hands
    /// the error back.
    pub fn fail(&self, err: anyhow::Error) -> anyhow::Error {
        self.abandon_and_say(&crate::causes_once(&err));
        err
    }

    /// [`Self::abandon`], telling stderr where the report went or why it is lost.
    fn abandon_and_say(&self, reason: &str) {
        match self.abandon(reason) {
            Ok(Some(path)) => eprintln!("the report so far is in {}, marked incomplete", path.display()),
            Ok(None) => {}
            Err(lost) => eprintln!("the report so far is lost: {}", crate::causes_once(&lost)),
        }
    }

    /// From now on SIGINT and SIGTERM keep the report so far and exit (see the module notes).
    /// Without a report to keep, signals keep their default effect, except on a rank of an MPI
    /// job (`ranked`), which says why it stops and what it was waiting for.
    #[cfg(unix)]
    pub fn keep_on_signals(&self, ranked: bool) -> anyhow::Result<()> {
        use anyhow::Context;
        use signal_hook::consts::{SIGINT, SIGTERM};
        if self.lock().target.is_none() && !ranked {
            return Ok(());
        }
        let mut signals =
            signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("cannot install signal handlers")?;
        let keeper = self.clone();
        std::thread::Builder::new()
            .name("halo-signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    let name = signal_hook::low_level::signal_name(signal).unwrap_or("a signal");
                    let reason = interrupted(name);
                    eprintln!("{reason}");
                    keeper.abandon_and_say(&reason);
                    std::process::exit(128 + signal);
                }
            })
            .context("cannot start the signal thread")?;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        // A panic elsewhere while holding the lock leaves plain data behind; keeping it is right.
        self.shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Why a run stopped on signal `name`. Under mpirun a SIGTERM usually means the launcher lost a
/// host, so the reason also says what this rank was waiting for, or else how far it got.
fn interrupted(name: &str) -> String {
    let reason = format!("interrupted by {name}");
    #[cfg(feature = "mpi")]
    {
        use comm_hierarchy::waiting;
        if let Some(wait) = waiting::describe() {
            return format!(
                "{reason} ({wait}); the launcher may have lost that host: check it and its link, then \
                 resume from the last checkpoint with --resume"
            );
        }
        if let Some(stage) = waiting::stage() {
            return format!("{reason} ({stage})");
        }
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn epoch(epoch: usize) -> EpochRecord {
        EpochRecord {
            epoch,
            loss: 1.0 / epoch as f64,
            train_acc: 0.5,
            val_acc: 0.4,
            test_acc: 0.3,
            wall_s: 0.01,
            eval_s: 0.005,
            eval_epoch: None,
            compute_s: 0.01,
            bytes_intra: 0,
            bytes_inter: 0,
            messages: 0,
            modeled_comm_s: 0.0,
            bytes_by_phase: BTreeMap::new(),
            modeled_epoch_s: 0.01,
            method: None,
            device: None,
        }
    }

    #[test]
    fn an_abandoned_run_leaves_its_epochs_marked_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let keeper = Keeper::new(&TrainConfig::default(), Some((path.clone(), "--report".into())));
        keeper.record(&epoch(1));
        keeper.record(&epoch(2));
        assert_eq!(keeper.abandon("diverged at epoch 3").unwrap(), Some(path.clone()));
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(report["incomplete"], true);
        assert_eq!(report["reason"], "diverged at epoch 3");
        assert_eq!(report["epochs"].as_array().unwrap().len(), 2);
        assert_eq!(report["config"]["lr"], serde_json::json!(0.01), "f32 settings print as written");
        assert!(report.get("final").is_none());
        assert_eq!(keeper.abandon("again").unwrap(), None, "only the first reason is kept");
    }

    #[test]
    fn without_a_report_path_nothing_is_kept() {
        let keeper = Keeper::new(&TrainConfig::default(), None);
        keeper.record(&epoch(1));
        assert_eq!(keeper.abandon("failed").unwrap(), None);
        assert!(keeper.lock().epochs.is_empty());
    }
}
