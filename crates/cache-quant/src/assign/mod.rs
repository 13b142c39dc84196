//! AdaQP's bit-width assignment (§3.3, problem (12)) for one layer and direction.
//!
//! Each directed pair (src -> dst) carries rows of `width` values. A row's *weight* is its
//! aggregation score times its variance trace `(D / 6)(max - min)^2`; at `b` bits its decoded
//! error adds `weight / (2^b - 1)^2` to the variance objective. Rows are sorted by weight and cut
//! into groups of `group_size`, one width per group. A pair's message takes
//! `t = theta * MB + gamma`; the all-to-all runs in ring rounds (round `r` sends `s -> s + r`),
//! a round lasts as long as its slowest pair, and the time objective is the sum of the rounds.
//! Both objectives are normalised between the all-2-bit and all-8-bit extremes and weighted by
//! `lambda` (variance) and `1 - lambda` (time); [`solve`] minimises their sum exactly: by a
//! combinatorial sweep without a byte budget ([`solve_exact`]), as a MILP under a cap on the
//! problem's bytes ([`Problem::budget_bytes`], [`solve_milp`]).

mod milp;
mod sweep;

pub use milp::{SolveError, solve_milp};
pub use sweep::solve_exact;

/// Which solver produced an assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// [`solve_exact`]: the per-pair frontiers swept per ring round.
    ExactSweep,
    /// [`solve_milp`]: microlp's branch and bound.
    Milp,
}

impl Solver {
    /// The name reports give the solver.
    pub fn name(self) -> &'static str {
        match self {
            Self::ExactSweep => "exact-sweep",
            Self::Milp => "milp",
        }
    }
}

/// A solved assignment, whether the solver proved it optimal (the MILP may stop at its time
/// limit with its best assignment, or with the best uniform width within the budget where it had
/// found none), and which solver ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Solved {
    pub assignment: Assignment,
    pub optimal: bool,
    pub solver: Solver,
}

/// Minimises [`Problem::objective`]: exactly by [`solve_exact`] without a byte budget (in time
/// polynomial in the groups), by [`solve_milp`] with one, `time_limit_s` bounding the MILP.
pub fn solve(problem: &Problem, time_limit_s: f64) -> Result<Solved, SolveError> {
    match problem.budget_bytes {
        None => Ok(Solved { assignment: solve_exact(problem), optimal: true, solver: Solver::ExactSweep }),
        Some(_) => solve_milp(problem, time_limit_s),
    }
}

use crate::codec::stochastic::{WIDTHS, row_bytes};

/// `t = theta * MB + gamma` for one directed pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeModel {
    /// Seconds per megabyte (10^6 bytes).
    pub theta_s_per_mb: f64,
    /// Seconds per message.
    pub gamma_s: f64,
}

impl TimeModel {
    /// Seconds to move `bytes`.
    pub fn seconds(&self, bytes: f64) -> f64 {
        self.theta_s_per_mb * bytes * 1e-6 + self.gamma_s
    }
}

/// The rows one directed pair carries, grouped.
#[derive(Debug, Clone, PartialEq)]
pub struct PairGroups {
    pub src: usize,
    pub dst: usize,
    /// Values per row.
    pub width: usize,
    pub time: TimeModel,
    /// Per group: its rows (indices into the pair's message order).
    pub groups: Vec<Vec<usize>>,
    /// Per group: the sum of its rows' weights.
    pub weights: Vec<f64>,
}

impl PairGroups {
    /// Sorts the rows of a pair by `weights` (heaviest first, ties by row) and cuts them into
    /// groups of `group_size` (the last group may be smaller).
    pub fn new(src: usize, dst: usize, width: usize, time: TimeModel, weights: &[f64], group_size: usize) -> Self {
        let mut order: Vec<usize> = (0..weights.len()).collect();
        order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
        let groups: Vec<Vec<usize>> = order.chunks(group_size.max(1)).map(<[usize]>::to_vec).collect();
        let weights = groups.iter().map(|g| g.iter().map(|&r| weights[r]).sum()).collect();
        Self { src, dst, width, time, groups, weights }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.groups.iter().map(Vec::len).sum()
    }

    /// Bytes of the message (rows and their headers) when group `g` travels at `bits[g]`.
    pub fn bytes(&self, bits: &[u8]) -> usize {
        self.groups.iter().zip(bits).map(|(g, &b)| g.len() * row_bytes(self.width, b)).sum()
    }

    /// Modeled seconds of the message when group `g` travels at `bits[g]`.
    fn seconds(&self, bits: &[u8]) -> f64 {
        self.time.seconds(self.bytes(bits) as f64)
    }

    /// The width of every row in message order, from one width per group.
    pub fn row_bits(&self, bits: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; self.rows()];
        for (group, &b) in self.groups.iter().zip(bits) {
            group.iter().for_each(|&r| out[r] = b);
        }
        out
    }
}

/// The error variance a row of weight 1 gets at `bits` bits: `1 / (2^b - 1)^2`.
pub fn variance_factor(bits: u8) -> f64 {
    let levels = f64::from((1u32 << bits) - 1);
    1.0 / (levels * levels)
}

/// Problem (12) for one layer and direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub workers: usize,
    /// Weight of the variance objective; the time objective gets `1 - lambda`.
    pub lambda: f64,
    /// Pairs with at least one row.
    pub pairs: Vec<PairGroups>,
    /// At most this many bytes over all pairs (the paper's Table 6 compares widths at equal
    /// traffic); `None` leaves the bytes to the time objective alone. A cap below the all-2-bit
    /// bytes is infeasible.
    pub budget_bytes: Option<usize>,
}

/// One width per group of every pair, in [`Problem::pairs`] order.
pub type Assignment = Vec<Vec<u8>>;

/// The two raw objectives of an assignment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// Sum over groups of weight times [`variance_factor`].
    pub variance: f64,
    /// Sum over ring rounds of the slowest pair's modeled seconds.
    pub seconds: f64,
}

impl Problem {
    /// Every group at `bits`.
    pub fn uniform(&self, bits: u8) -> Assignment {
        self.pairs.iter().map(|p| vec![bits; p.groups.len()]).collect()
    }

    /// Bytes of `assignment` over all pairs.
    pub fn bytes(&self, assignment: &Assignment) -> usize {
        self.pairs.iter().zip(assignment).map(|(p, bits)| p.bytes(bits)).sum()
    }

    /// The ring round of a pair.
    fn round(&self, pair: &PairGroups) -> usize {
        (pair.dst + self.workers - pair.src % self.workers) % self.workers
    }

    /// The raw objectives of `assignment`.
    pub fn costs(&self, assignment: &Assignment) -> Costs {
        let variance = self
            .pairs
            .iter()
            .zip(assignment)
            .map(|(p, bits)| p.weights.iter().zip(bits).map(|(w, &b)| w * variance_factor(b)).sum::<f64>())
            .sum();
        let mut rounds = vec![0.0f64; self.workers];
        for (p, bits) in self.pairs.iter().zip(assignment) {
            let r = self.round(p);
            rounds[r] = rounds[r].max(p.seconds(bits));
        }
        Costs { variance, seconds: rounds.iter().sum() }
    }

    /// The normalisation of each objective: (value at its best extreme, span to its worst),
    /// spans of zero replaced by 1 so that a flat objective contributes nothing.
    fn scales(&self) -> (Costs, Costs) {
        let (low, high) = (self.costs(&self.uniform(WIDTHS[0])), self.costs(&self.uniform(WIDTHS[2])));
        let span = |a: f64, b: f64| if (a - b).abs() > 0.0 { (a - b).abs() } else { 1.0 };
        let best = Costs { variance: high.variance, seconds: low.seconds };
        (best, Costs { variance: span(low.variance, high.variance), seconds: span(high.seconds, low.seconds) })
    }

    /// Problem (12)'s objective: `lambda` times the normalised variance plus `1 - lambda` times
    /// the normalised time; 0 is each objective at its best extreme, 1 at its worst.
    pub fn objective(&self, assignment: &Assignment) -> f64 {
        let (best, span) = self.scales();
        let c = self.costs(assignment);
        self.lambda * (c.variance - best.variance) / span.variance
            + (1.0 - self.lambda) * (c.seconds - best.seconds) / span.seconds
    }
}

#[cfg(test)]
mod tests;
