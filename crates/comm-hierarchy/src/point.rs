//! The points of a run: the five stretches a fault fires at ([`crate::fault`]) and an error
//! about another worker names ([`crate::CommError`]), each recognised by the ledger phase of the
//! call that reaches it.

use std::fmt;

/// A named point of a run: where a fault fires, and what an error about another worker names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Point {
    Setup,
    ForwardExchange,
    BackwardExchange,
    AllReduce,
    Checkpoint,
}

impl Point {
    /// Every point, in the order of a run.
    pub const ALL: [Point; 5] =
        [Point::Setup, Point::ForwardExchange, Point::BackwardExchange, Point::AllReduce, Point::Checkpoint];

    pub fn as_str(self) -> &'static str {
        match self {
            Point::Setup => "setup",
            Point::ForwardExchange => "forward-exchange",
            Point::BackwardExchange => "backward-exchange",
            Point::AllReduce => "all-reduce",
            Point::Checkpoint => "checkpoint",
        }
    }

    /// The point a call under the ledger phase `phase` reaches: `setup`, `fwd/<layer>`,
    /// `bwd/<layer>`, `grads` (the gradient all-reduce) and `checkpoint` are the trainer's
    /// phase labels of the five points.
    pub fn of_phase(phase: &str) -> Option<Point> {
        match phase {
            "setup" => Some(Point::Setup),
            "grads" => Some(Point::AllReduce),
            "checkpoint" => Some(Point::Checkpoint),
            p if p.starts_with("fwd/") => Some(Point::ForwardExchange),
            p if p.starts_with("bwd/") => Some(Point::BackwardExchange),
            _ => None,
        }
    }

    /// The point of the run a call under `phase` is at, for naming it in messages: a fault
    /// point's own phase ([`Point::of_phase`]), or the stretch of the run around one. The
    /// collectives of the setup (the memory agreement, the message cap, the halo-feature fetch,
    /// the devices' agreement) are at `setup`; featpart's feature fetches at `forward-exchange`; the step's
    /// other collectives (loss, evaluation, statistics, the parameter servers, the methods'
    /// controllers) at `all-reduce`, where the step syncs. `None` for phases Halo does not use.
    pub fn during(phase: &str) -> Option<Point> {
        const SETUP: [&str; 5] = ["memory", "messages", "setup/", "nccl-", "ledger-setup"];
        const STEP: [&str; 9] = ["loss", "eval", "stats", "ledger", "ps/", "trial/", "bias/", "adaqp/", "ecgraph/"];
        Point::of_phase(phase).or_else(|| {
            if SETUP.iter().any(|s| phase.starts_with(s)) {
                Some(Point::Setup)
            } else if phase.starts_with("fetch/") && phase != "fetch/loss" {
                Some(Point::ForwardExchange)
            } else if phase == "fetch/loss" || STEP.iter().any(|s| phase.starts_with(s)) {
                Some(Point::AllReduce)
            } else {
                None
            }
        })
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// ` (point P)`: the point of the run a call under `phase` is at, for error messages.
pub(crate) fn point_suffix(phase: &str) -> String {
    Point::during(phase).map(|p| format!(" (point {p})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::CommError;

    #[test]
    fn phases_map_to_points() {
        assert_eq!(Point::of_phase("fwd/1"), Some(Point::ForwardExchange));
        assert_eq!(Point::of_phase("bwd/0"), Some(Point::BackwardExchange));
        assert_eq!(Point::of_phase("grads"), Some(Point::AllReduce));
        assert_eq!(Point::of_phase("loss"), None);
        assert_eq!(Point::of_phase("memory"), None, "faults fire only at the five points");
    }

    #[test]
    fn every_phase_halo_uses_is_named_by_its_point() {
        let cases = [
            ("setup", Point::Setup),
            ("memory", Point::Setup),
            ("setup/halo-features", Point::Setup),
            ("messages", Point::Setup),
            ("nccl-init", Point::Setup),
            ("fwd/0", Point::ForwardExchange),
            ("fetch/columns", Point::ForwardExchange),
            ("bwd/1", Point::BackwardExchange),
            ("grads", Point::AllReduce),
            ("loss", Point::AllReduce),
            ("eval", Point::AllReduce),
            ("stats", Point::AllReduce),
            ("ledger", Point::AllReduce),
            ("ps/pull", Point::AllReduce),
            ("fetch/loss", Point::AllReduce),
            ("adaqp/assign", Point::AllReduce),
            ("checkpoint", Point::Checkpoint),
        ];
        for (phase, point) in cases {
            assert_eq!(Point::during(phase), Some(point), "{phase}");
        }
        assert_eq!(Point::during("made-up"), None);
        let timeout = CommError::Timeout {
            observer: 0,
            peer: 2,
            host: String::new(),
            phase: "memory".into(),
            timeout: Duration::from_secs(1),
        };
        assert!(timeout.to_string().ends_with("in `memory` (point setup)"), "{timeout}");
        let exited = CommError::PeerExited { rank: 1, observer: 0, phase: "eval".into() };
        assert!(exited.to_string().ends_with("(point all-reduce)"), "{exited}");
    }
}
