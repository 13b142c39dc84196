//! `halo train`'s epoch observer: the trainer's progress display ([`trainer::progress::Progress`]),
//! and every epoch to the [`Keeper`], which holds the report until the run ends.

use trainer::report::{Best, EpochRecord};
use trainer::train_loop::EpochObserver;

use super::keeper::Keeper;

/// The epoch observer of `halo train`.
pub struct Progress {
    display: trainer::progress::Progress,
    keeper: Keeper,
}

impl Progress {
    /// Progress over `epochs` epochs; `terminal`: whether stderr is one.
    pub fn new(epochs: usize, quiet: bool, terminal: bool, keeper: Keeper) -> Self {
        Self { display: trainer::progress::Progress::new(epochs, quiet, terminal), keeper }
    }

    /// Removes the bar (before the summary prints, or an error).
    pub fn finish(&self) {
        self.display.finish();
    }
}

impl EpochObserver for Progress {
    fn on_epoch(&mut self, r: &EpochRecord, best: &Best) {
        self.keeper.record(r);
        self.display.on_epoch(r, best);
    }

    fn shows_progress(&self) -> bool {
        self.display.shows_progress()
    }
}
