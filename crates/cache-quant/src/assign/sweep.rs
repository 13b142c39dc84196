//! Problem (12) without a byte budget, solved exactly by a combinatorial sweep.
//!
//! The objective is `lv * sum_p V_p + lt * sum_r Z_r` (less constants), `V_p` the variance of
//! pair `p`, `Z_r` the duration of ring round `r`, at least the time of each of its pairs. Pairs
//! interact only through their round's `Z_r`, so the rounds are independent problems.
//!
//! **Per pair**, the only thing the rest of the problem sees is the message's bytes (its time is
//! `theta * MB + gamma`, non-decreasing in the bytes), so only the Pareto frontier of
//! (bytes, least variance at those bytes) matters. Within a *class* of groups of equal size `n`
//! the bytes depend only on how many groups take each width (`k8`, `k4`, the rest 2 bits), and
//! for given counts the least variance gives the `k8` heaviest groups 8 bits, the next `k4` 4
//! bits, the rest 2 bits: `variance_factor` falls with the width, so swapping the widths of a
//! heavier group and a lighter one that holds the larger width never lowers the variance
//! (rearrangement inequality) and leaves the bytes as they are. So a class's candidate points
//! are the `O(m^2)` count pairs, each priced in O(1) from prefix sums of the sorted weights and
//! kept in the slot of its bytes when it has the least variance there (the bytes take at most
//! `3m + 1` values where the rows' width is a multiple of 8, see [`class_frontier`], so the slots
//! in order are the points sorted by bytes, without a sort); the classes of a pair (groups of `group_size` rows and a shorter last group) combine by an
//! exact Pareto merge, dominated points dropped (a point with no fewer bytes and no less
//! variance than another can always be replaced by it).
//!
//! **Per round**, at an optimum `Z_r` equals the time of some pair's chosen point (lowering it
//! to the largest pair time changes no pair's choice and does not raise the cost), so it is one
//! of the distinct times on the round's frontiers. For each candidate `Z` (ascending), each pair
//! takes its least-variance point with time `<= Z`: on a frontier sorted by bytes the variance
//! falls, so that is the last point within `Z`, found by a pointer that only moves forward. The
//! round takes the candidate of least `lt * Z + lv * sum V_p`. Every assignment is dominated by
//! one this sweep evaluates, so the minimum is exact.

use super::{Assignment, PairGroups, Problem, variance_factor};
use crate::codec::stochastic::{WIDTHS, row_bytes};

/// One point of a pair's frontier: its bytes, its variance, and per class `(k8, k4)`.
#[derive(Debug, Clone)]
struct Point {
    bytes: usize,
    variance: f64,
    counts: Vec<(usize, usize)>,
}

/// The groups of one size within a pair, heaviest first.
struct Class {
    /// Indices of the groups, heaviest first (ties by index).
    groups: Vec<usize>,
    /// `prefix[i]`: the summed weight of the `i` heaviest groups.
    prefix: Vec<f64>,
    /// Bytes of one group at each of [`WIDTHS`].
    bytes: [usize; 3],
}

impl Class {
    /// The least variance and the bytes of `k8` groups at 8 bits, `k4` at 4, the rest at 2.
    fn point(&self, k8: usize, k4: usize) -> (usize, f64) {
        let (m, p) = (self.groups.len(), &self.prefix);
        let k2 = m - k8 - k4;
        let bytes = k2 * self.bytes[0] + k4 * self.bytes[1] + k8 * self.bytes[2];
        let variance = p[k8] * variance_factor(WIDTHS[2])
            + (p[k8 + k4] - p[k8]) * variance_factor(WIDTHS[1])
            + (p[m] - p[k8 + k4]) * variance_factor(WIDTHS[0]);
        (bytes, variance)
    }
}

/// The classes of `pair`'s groups, by group size.
fn classes(pair: &PairGroups) -> Vec<Class> {
    let mut sizes: Vec<usize> = pair.groups.iter().map(Vec::len).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|size| {
            let mut groups: Vec<usize> = (0..pair.groups.len()).filter(|&g| pair.groups[g].len() == size).collect();
            groups.sort_by(|&a, &b| pair.weights[b].total_cmp(&pair.weights[a]).then(a.cmp(&b)));
            let mut prefix = vec![0.0];
            for &g in &groups {
                prefix.push(prefix[prefix.len() - 1] + pair.weights[g]);
            }
            Class { groups, prefix, bytes: WIDTHS.map(|b| size * row_bytes(pair.width, b)) }
        })
        .collect()
}

/// Keeps the points no other point dominates, sorted by bytes (ascending) with the variance
/// strictly falling; of points with equal bytes and variance, the first.
fn pareto(mut points: Vec<Point>) -> Vec<Point> {
    points.sort_by(|a, b| a.bytes.cmp(&b.bytes).then(a.variance.total_cmp(&b.variance)));
    staircase(points)
}

/// The points of a list sorted by bytes whose variance falls below every point before them.
fn staircase(points: impl IntoIterator<Item = Point>) -> Vec<Point> {
    let mut kept: Vec<Point> = Vec::new();
    for p in points {
        if kept.last().is_none_or(|last| p.variance < last.variance) {
            kept.push(p);
        }
    }
    kept
}

/// The frontier of one class alone: [`pareto`] of its `O(m^2)` count pairs, without sorting
/// them. A point's bytes are `m b2 + g (t a + k8 d)` for `t = k8 + k4`, `g = gcd(b4 - b2,
/// b8 - b4)`, `a = (b4 - b2) / g` and `d = (b8 - b4) / g`, so one slot per value of `t a + k8 d`
/// (at most `m (a + d)`) keeps the least variance at those bytes (by `total_cmp`, the first count
/// pair in `(k8, k4)` order on a tie, as the stable sort of [`pareto`] keeps), and the slots in
/// order are the points sorted by bytes. A class of rows whose width is a multiple of 8 has
/// `a = 1`, `d = 2`: `3m + 1` slots.
fn class_frontier(class: &Class) -> Vec<Point> {
    let m = class.groups.len();
    let [b2, b4, b8] = class.bytes;
    let g = gcd(b4 - b2, b8 - b4).max(1);
    let (a, d) = ((b4 - b2) / g, (b8 - b4) / g);
    // Per slot: the least variance and its count pair; `EMPTY` before any.
    const EMPTY: u32 = u32::MAX;
    let mut slots = vec![(f64::INFINITY, EMPTY, EMPTY); m * (a + d) + 1];
    for k8 in 0..=m {
        for k4 in 0..=m - k8 {
            let variance = class.point(k8, k4).1;
            let slot = &mut slots[(k8 + k4) * a + k8 * d];
            if slot.1 == EMPTY || variance.total_cmp(&slot.0).is_lt() {
                *slot = (variance, k8 as u32, k4 as u32);
            }
        }
    }
    staircase(slots.into_iter().filter(|s| s.1 != EMPTY).map(|(variance, k8, k4)| {
        let (k8, k4) = (k8 as usize, k4 as usize);
        Point { bytes: class.point(k8, k4).0, variance, counts: vec![(k8, k4)] }
    }))
}

/// The greatest common divisor of `a` and `b` (0 when both are).
fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The frontier of a class by enumerating and sorting its count pairs: [`class_frontier`]'s
/// reference.
#[cfg(test)]
fn enumerated_frontier(class: &Class) -> Vec<Point> {
    let m = class.groups.len();
    pareto(
        (0..=m)
            .flat_map(|k8| (0..=m - k8).map(move |k4| (k8, k4)))
            .map(|(k8, k4)| {
                let (bytes, variance) = class.point(k8, k4);
                Point { bytes, variance, counts: vec![(k8, k4)] }
            })
            .collect(),
    )
}

/// The frontier of a pair over its classes, each class's frontier made by `class_front`.
fn frontier(classes: &[Class], class_front: fn(&Class) -> Vec<Point>) -> Vec<Point> {
    let mut front = vec![Point { bytes: 0, variance: 0.0, counts: Vec::new() }];
    for class in classes {
        let own = class_front(class);
        let merged = front
            .iter()
            .flat_map(|a| {
                own.iter().map(move |b| Point {
                    bytes: a.bytes + b.bytes,
                    variance: a.variance + b.variance,
                    counts: [a.counts.as_slice(), b.counts.as_slice()].concat(),
                })
            })
            .collect();
        front = pareto(merged);
    }
    front
}

/// The widths of `pair`'s groups at frontier point `point`.
fn widths(pair: &PairGroups, classes: &[Class], point: &Point) -> Vec<u8> {
    let mut bits = vec![WIDTHS[0]; pair.groups.len()];
    for (class, &(k8, k4)) in classes.iter().zip(&point.counts) {
        for (rank, &g) in class.groups.iter().enumerate() {
            bits[g] = if rank < k8 {
                WIDTHS[2]
            } else if rank < k8 + k4 {
                WIDTHS[1]
            } else {
                WIDTHS[0]
            };
        }
    }
    bits
}

/// Minimises [`Problem::objective`] over every assignment, ignoring [`Problem::budget_bytes`]
/// (the caller routes budgeted problems to the MILP).
pub fn solve_exact(problem: &Problem) -> Assignment {
    sweep(problem, class_frontier)
}

/// [`solve_exact`] with every class frontier enumerated and sorted ([`enumerated_frontier`]):
/// the sweep as it was before [`class_frontier`], the reference the tests compare it with.
#[cfg(test)]
pub(super) fn solve_enumerated(problem: &Problem) -> Assignment {
    sweep(problem, enumerated_frontier)
}

/// The sweep over the pairs' frontiers, each class's frontier made by `class_front`.
fn sweep(problem: &Problem, class_front: fn(&Class) -> Vec<Point>) -> Assignment {
    let (_, span) = problem.scales();
    let (lv, lt) = (problem.lambda / span.variance, (1.0 - problem.lambda) / span.seconds);
    let classes: Vec<Vec<Class>> = problem.pairs.iter().map(classes).collect();
    let fronts: Vec<Vec<Point>> = classes.iter().map(|c| frontier(c, class_front)).collect();
    // Each point's modeled time, computed as `Problem::costs` computes it.
    let times: Vec<Vec<f64>> = problem
        .pairs
        .iter()
        .zip(&fronts)
        .map(|(p, f)| f.iter().map(|pt| p.time.seconds(pt.bytes as f64)).collect())
        .collect();
    let mut chosen = vec![0usize; problem.pairs.len()];
    for round in 0..problem.workers {
        let members: Vec<usize> =
            (0..problem.pairs.len()).filter(|&i| problem.round(&problem.pairs[i]) == round).collect();
        if members.is_empty() {
            continue;
        }
        let mut candidates: Vec<f64> = members.iter().flat_map(|&i| times[i].iter().copied()).collect();
        candidates.sort_by(f64::total_cmp);
        candidates.dedup();
        // The round cannot be shorter than its slowest pair at its fewest bytes.
        let floor = members.iter().map(|&i| times[i][0]).fold(f64::NEG_INFINITY, f64::max);
        let mut at: Vec<usize> = vec![0; members.len()];
        let mut best: Option<(f64, Vec<usize>)> = None;
        for &z in candidates.iter().filter(|&&z| z >= floor) {
            for (slot, &i) in at.iter_mut().zip(&members) {
                while *slot + 1 < times[i].len() && times[i][*slot + 1] <= z {
                    *slot += 1;
                }
            }
            let variance: f64 = at.iter().zip(&members).map(|(&k, &i)| fronts[i][k].variance).sum();
            let cost = lt * z + lv * variance;
            if best.as_ref().is_none_or(|(b, _)| cost < *b) {
                best = Some((cost, at.clone()));
            }
        }
        if let Some((_, picks)) = best {
            members.iter().zip(picks).for_each(|(&i, k)| chosen[i] = k);
        }
    }
    problem.pairs.iter().zip(&classes).zip(&fronts).zip(chosen).map(|(((p, c), f), k)| widths(p, c, &f[k])).collect()
}
