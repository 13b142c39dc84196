//! Names of the message streams an exchange moves, and of the pass a message belongs to.
//!
//! A distributed layer exchanges rows at fixed points ([`Tag`]: layer, direction, step). Each
//! point moves rows along a [`Route`] between a worker and each peer; one (tag, route, peer,
//! side) is one [`Stream`], and a stateful codec lives on exactly one stream, so the encoder on
//! the sender and the decoder on the receiver see the same messages in the same order.
//!
//! Vocabulary: a vertex has one *primary* (the edge-cut owner, the vertex-cut master) and any
//! number of *copies* (edge-cut halo vertices, vertex-cut mirrors) on other workers.

use std::fmt;
use std::sync::Arc;

/// Whether a call belongs to the forward or the backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    Forward,
    Backward,
}

/// Which exchange of a layer a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// Halo rows: `pull_halo` (forward) and `push_halo_grad` (backward).
    Halo,
    /// Partial aggregates: `sum_replicas` (for GAT: softmax denominators and numerators).
    Aggregate,
    /// GAT's per-destination score maximum: `max_replicas`.
    AttentionMax,
}

/// Names one exchange call: conv layer index (0-based), direction and step.
///
/// [`Tag::phase`] is the coarse ledger label (`"fwd/1"`), `Display` the fine one (`"fwd/1/halo"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag {
    pub layer: usize,
    pub dir: Direction,
    pub step: Step,
}

impl Tag {
    pub fn new(layer: usize, dir: Direction, step: Step) -> Self {
        Self { layer, dir, step }
    }

    /// `"fwd/<layer>"` or `"bwd/<layer>"`: the traffic-ledger phase of this call.
    pub fn phase(&self) -> String {
        format!("{}/{}", self.dir, self.layer)
    }
}

/// Which way rows travel between a vertex's primary and its copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// Copies -> primary (edge-cut halo gradients, the first half of a vertex-cut sync:
    /// CDFGNN's mirror-to-master messages).
    ToPrimary,
    /// Primary -> copies (edge-cut halo rows, the second half of a vertex-cut sync).
    ToCopies,
}

/// The end of a stream a codec instance serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Encode,
    Decode,
}

/// Training or evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Train,
    Eval,
}

/// The pass a message belongs to: its mode, 1-based epoch and step within the epoch (0 for
/// full-batch training). Keys random draws and lets codecs tell training from evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pass {
    pub mode: Mode,
    pub epoch: u64,
    pub step: u64,
}

impl Pass {
    /// A training pass of `epoch`, step `step`.
    pub fn train(epoch: u64, step: u64) -> Self {
        Self { mode: Mode::Train, epoch, step }
    }

    /// An evaluation pass.
    pub fn eval() -> Self {
        Self { mode: Mode::Eval, epoch: 0, step: 0 }
    }
}

/// Which stream of one worker a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId {
    pub tag: Tag,
    pub route: Route,
    /// The other end's rank.
    pub peer: usize,
    pub side: Side,
}

/// One message stream of one worker: what a codec instance is built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    pub id: StreamId,
    /// Global ids of the rows every message of the stream carries, in message order.
    pub rows: Arc<[u32]>,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Forward => "fwd",
            Direction::Backward => "bwd",
        })
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Halo => "halo",
            Step::Aggregate => "agg",
            Step::AttentionMax => "attmax",
        })
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.dir, self.layer, self.step)
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Route::ToPrimary => "to-primary",
            Route::ToCopies => "to-copies",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_render_as_ledger_labels() {
        let t = Tag::new(1, Direction::Forward, Step::Halo);
        assert_eq!(t.phase(), "fwd/1");
        assert_eq!(t.to_string(), "fwd/1/halo");
        assert_eq!(Tag::new(0, Direction::Backward, Step::AttentionMax).to_string(), "bwd/0/attmax");
        assert_eq!(Route::ToPrimary.to_string(), "to-primary");
    }
}
