//! Progress of a training run on stderr: a bar on a terminal; off a terminal (a log file, a batch
//! job, a notebook) one plain line per epoch, at most one every 5 s (`LINE_EVERY`); nothing when
//! quiet. `halo train` and the Python package show it.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{Best, EpochRecord};
use crate::train_loop::EpochObserver;

/// The least time between two log lines off a terminal. Epochs of a small graph take
/// milliseconds, and a line each would bury the log; 5 s still shows a live run every few seconds.
/// The first and the last epoch always get a line.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// An epoch observer that shows the run's progress.
pub struct Progress {
    bar: ProgressBar,
    /// Set off a terminal when not quiet: log lines in place of the bar.
    lines: Option<Lines>,
}

/// When the last log line was written.
struct Lines {
    epochs: usize,
    started: Instant,
    last: Option<Instant>,
}

impl Lines {
    /// Whether `epoch`, finishing at `now`, gets a line.
    fn due(&self, epoch: usize, now: Instant) -> bool {
        epoch == self.epochs || self.last.is_none_or(|last| now.duration_since(last) >= LINE_EVERY)
    }
}

impl Progress {
    /// Progress over `epochs` epochs; `terminal`: whether stderr is one.
    pub fn new(epochs: usize, quiet: bool, terminal: bool) -> Self {
        let bar = ProgressBar::with_draw_target(
            Some(epochs as u64),
            if quiet || !terminal { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() },
        );
        bar.set_style(
            ProgressStyle::with_template("epoch {pos}/{len} {bar:25} {elapsed_precise} eta {eta} {msg}")
                .expect("the template is a valid constant"),
        );
        let lines = (!quiet && !terminal).then(|| Lines { epochs, started: Instant::now(), last: None });
        Self { bar, lines }
    }

    /// Removes the bar (before the summary prints, or an error).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Loss, accuracies, the best epoch so far and the epoch's traffic: the bar's message and the
/// log line's tail.
fn describe(r: &EpochRecord, best: &Best) -> String {
    let traffic = r.bytes_intra + r.bytes_inter;
    format!(
        "loss {:.4} | train {:.3} val {:.3} test {:.3}{} | best val {:.3} @ {}{}",
        r.loss,
        r.train_acc,
        r.val_acc,
        r.test_acc,
        r.eval_epoch.map(|at| format!(" (evaluated @ {at})")).unwrap_or_default(),
        best.val_acc,
        best.epoch,
        if traffic > 0 { format!(" | {} sent", bytes(traffic as f64)) } else { String::new() }
    )
}

impl EpochObserver for Progress {
    fn on_epoch(&mut self, r: &EpochRecord, best: &Best) {
        self.bar.set_position(r.epoch as u64);
        match &mut self.lines {
            None => self.bar.set_message(describe(r, best)),
            Some(lines) => {
                let now = Instant::now();
                if lines.due(r.epoch, now) {
                    lines.last = Some(now);
                    let elapsed = now.duration_since(lines.started).as_secs_f64();
                    let eta = elapsed / r.epoch as f64 * (lines.epochs - r.epoch) as f64;
                    eprintln!(
                        "epoch {}/{} [{elapsed:.1} s, eta {eta:.0} s]: {}",
                        r.epoch,
                        lines.epochs,
                        describe(r, best)
                    );
                }
            }
        }
    }

    fn shows_progress(&self) -> bool {
        !self.bar.is_hidden()
    }
}

/// A byte count in binary units, three significant figures or so.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = b;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{value:.0} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(quiet: bool, terminal: bool) -> Progress {
        Progress::new(10, quiet, terminal)
    }

    #[test]
    fn bytes_take_the_largest_unit_below_the_value() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(1023.0), "1023 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
    }

    #[test]
    fn quiet_runs_show_no_loading_progress_either() {
        assert!(!progress(true, true).shows_progress());
        assert!(progress(true, false).lines.is_none());
    }

    #[test]
    fn off_a_terminal_lines_replace_the_bar() {
        let p = progress(false, false);
        assert!(!p.shows_progress() && p.lines.is_some());
        // (Whether the bar then draws is indicatif's call: it checks stderr again.)
        assert!(progress(false, true).lines.is_none());
    }

    #[test]
    fn fast_epochs_get_a_line_every_few_seconds_and_the_last_one_always() {
        let start = Instant::now();
        let mut lines = Lines { epochs: 10, started: start, last: None };
        assert!(lines.due(1, start), "the first epoch");
        lines.last = Some(start);
        assert!(!lines.due(2, start + LINE_EVERY / 2));
        assert!(lines.due(3, start + LINE_EVERY));
        assert!(lines.due(10, start + LINE_EVERY / 2), "the last epoch");
    }
}
