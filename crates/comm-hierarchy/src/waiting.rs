//! What this process's rank is waiting for right now, for a process that is told to stop (the
//! launcher's SIGTERM after it lost a host) to say where it stood. Set by the MPI transport,
//! one rank per process; in-process workers leave it empty. The caller adds where its own work
//! stands ([`set_stage`]: the trainer's epochs), which the transport cannot know.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A wait in progress.
#[derive(Debug, Clone, PartialEq)]
struct Wait {
    observer: usize,
    peer: usize,
    host: String,
    phase: String,
    since: Instant,
}

static CURRENT: Mutex<Option<Wait>> = Mutex::new(None);
static STAGE: Mutex<String> = Mutex::new(String::new());

/// Records where this process's work stands (`"after epoch 3"`), for [`describe`] to add.
pub fn set_stage(stage: &str) {
    let mut current = STAGE.lock().unwrap_or_else(|e| e.into_inner());
    current.clear();
    current.push_str(stage);
}

/// Clears the record when the wait it stands for ends.
#[must_use]
pub(crate) struct Waiting(());

impl Drop for Waiting {
    fn drop(&mut self) {
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Records that rank `observer` waits for rank `peer` on `host` in `phase`, until the guard drops.
pub(crate) fn start(observer: usize, peer: usize, host: &str, phase: &str) -> Waiting {
    let wait = Wait { observer, peer, host: host.to_owned(), phase: phase.to_owned(), since: Instant::now() };
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(wait);
    Waiting(())
}

/// Where this process's work stands, if anyone said ([`set_stage`]).
pub fn stage() -> Option<String> {
    let stage = STAGE.lock().unwrap_or_else(|e| e.into_inner());
    (!stage.is_empty()).then(|| stage.clone())
}

/// `rank R had waited S s for rank P on host H in `phase`, STAGE`, when a wait is in progress.
pub fn describe() -> Option<String> {
    let current = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    let text = describe_wait(&current, current.since.elapsed());
    let stage = STAGE.lock().unwrap_or_else(|e| e.into_inner());
    Some(if stage.is_empty() { text } else { format!("{text}, {stage}") })
}

fn describe_wait(wait: &Wait, waited: Duration) -> String {
    let host = if wait.host.is_empty() { String::new() } else { format!(" on host {}", wait.host) };
    format!(
        "rank {} had waited {:.1} s for rank {}{host} in `{}`{}",
        wait.observer,
        waited.as_secs_f64(),
        wait.peer,
        wait.phase,
        crate::point::point_suffix(&wait.phase)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_described_while_it_lasts() {
        assert_eq!(describe(), None);
        let guard = start(0, 2, "halo-h2", "fwd/0");
        let text = describe().expect("a wait in progress");
        assert!(
            text.starts_with("rank 0 had waited ") && text.contains(" s for rank 2 on host halo-h2 in `fwd/0`"),
            "{text}"
        );
        set_stage("after epoch 3");
        assert!(describe().unwrap().ends_with(", after epoch 3"), "{:?}", describe());
        assert_eq!(stage().as_deref(), Some("after epoch 3"));
        set_stage("");
        assert_eq!(stage(), None);
        drop(guard);
        assert_eq!(describe(), None);
        let wait = Wait { observer: 1, peer: 0, host: String::new(), phase: "grads".into(), since: Instant::now() };
        assert!(
            describe_wait(&wait, Duration::from_millis(1500))
                .starts_with("rank 1 had waited 1.5 s for rank 0 in `grads`")
        );
    }
}
