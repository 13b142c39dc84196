//! A deadline on MPI's own set-up. `MPI_Init` and the exchange of processor names block inside
//! MPI, where no timeout of Halo's reaches: a host or link lost while the job starts would hold
//! every rank there for as long as the launcher waits. A rank whose set-up has not finished
//! within the peer timeout says so, naming itself and its host, and ends its process.

use std::ffi::c_int;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::local_rank::WORLD_RANK_VARIABLES;

/// A running deadline; [`Watch::finish`] stops it.
pub(super) struct Watch {
    stop: mpsc::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    /// Ends this process with exit code `code` unless [`Watch::finish`] is called within
    /// `timeout`.
    pub(super) fn start(timeout: Duration, code: c_int) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let who = whoami(|name| std::env::var(name).ok());
        let thread = std::thread::Builder::new()
            .name("halo-mpi-setup".into())
            .spawn(move || {
                if let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(timeout) {
                    eprintln!(
                        "halo: {who}: MPI set-up (MPI_Init, the ranks' host names) did not finish within \
                         {timeout:?}: a host of the job or its link is down; check the hosts and their links, \
                         then start the job again (--peer-timeout sets this deadline)"
                    );
                    // SAFETY: `_exit` takes no pointers and never returns. It is called instead of
                    // `exit` because the main thread is blocked inside MPI, whose exit handlers and
                    // progress threads may wait on the very link that is down; nothing of this
                    // process needs its destructors once it ends. Tested by
                    // `a_stuck_setup_ends_the_process_naming_the_rank`.
                    unsafe { libc::_exit(code) }
                }
            })
            .ok();
        Self { stop, thread }
    }

    /// Stops the deadline: set-up finished in time.
    pub(super) fn finish(self) {
        let Self { stop, thread } = self;
        drop(stop);
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// `rank R on host H`, as far as the launcher's variables (read through `var`) and the kernel say
/// before MPI runs.
fn whoami(var: impl Fn(&str) -> Option<String>) -> String {
    let rank = WORLD_RANK_VARIABLES.into_iter().find_map(&var).map(|r| r.trim().to_owned());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned());
    format!(
        "rank {} on host {}",
        rank.as_deref().unwrap_or("?"),
        host.as_deref().ok().filter(|h| !h.is_empty()).unwrap_or("?")
    )
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::Instant;

    use super::*;

    /// Set in the child process of the test below.
    const CHILD: &str = "HALO_TEST_SETUP_WATCH_CHILD";

    #[test]
    fn a_stuck_setup_ends_the_process_naming_the_rank() {
        if std::env::var_os(CHILD).is_some() {
            let _watch = Watch::start(Duration::from_millis(200), 7);
            std::thread::sleep(Duration::from_secs(60));
            panic!("the watch did not end the process");
        }
        let started = Instant::now();
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "mpi_backend::watch::tests::a_stuck_setup_ends_the_process_naming_the_rank"])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("OMPI_COMM_WORLD_RANK", "5")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(stderr.contains("halo: rank 5 on host ") && stderr.contains("did not finish within 200ms"), "{stderr}");
        assert!(stderr.contains("--peer-timeout"), "{stderr}");
    }

    #[test]
    fn a_finished_setup_stops_the_watch() {
        let started = Instant::now();
        Watch::start(Duration::from_secs(600), 7).finish();
        assert!(started.elapsed() < Duration::from_secs(5), "finish waited for the deadline");
    }

    #[test]
    fn the_rank_comes_from_the_launchers_variables() {
        let says = whoami(|name| (name == "PMI_RANK").then(|| " 3 ".to_string()));
        assert!(says.starts_with("rank 3 on host "), "{says}");
        assert!(whoami(|_| None).starts_with("rank ? on host "));
    }
}
