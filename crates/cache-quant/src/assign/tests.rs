use graph_partition::rng::SplitMix64;
use proptest::prelude::*;

use super::*;

/// The best assignment of `problem` within its budget, by enumeration (3^groups).
/// Fails, naming `context`, unless `assignment`'s objective equals the best of every assignment
/// within the problem's budget.
fn assert_as_good_as_brute_force(problem: &Problem, assignment: &Assignment, context: &str) {
    let (_, best) = brute_force(problem);
    let got = problem.objective(assignment);
    assert!((got - best).abs() <= 1e-9 * best.abs().max(1.0), "{context}: {got} vs {best}");
}

fn brute_force(problem: &Problem) -> (Assignment, f64) {
    let sizes: Vec<usize> = problem.pairs.iter().map(|p| p.groups.len()).collect();
    let total: usize = sizes.iter().sum();
    let mut best = (problem.uniform(8), f64::INFINITY);
    for code in 0..3usize.pow(total as u32) {
        let mut c = code;
        let assignment: Assignment = sizes
            .iter()
            .map(|&n| {
                (0..n)
                    .map(|_| {
                        let b = WIDTHS[c % 3];
                        c /= 3;
                        b
                    })
                    .collect()
            })
            .collect();
        let value = problem.objective(&assignment);
        let within = problem.budget_bytes.is_none_or(|budget| problem.bytes(&assignment) <= budget);
        if within && value < best.1 {
            best = (assignment, value);
        }
    }
    best
}

/// A problem on `workers` ranks with `groups[i]` groups on the i-th pair of the ring, rows of
/// random weight spread over six orders of magnitude, and links of two speeds.
fn random_problem(seed: u64, workers: usize, groups: &[usize], lambda: f64) -> Problem {
    let mut rng = SplitMix64::new(seed);
    let all_pairs = (0..workers).flat_map(|s| (0..workers).filter(move |&d| d != s).map(move |d| (s, d)));
    let pairs = all_pairs
        .zip(groups)
        .filter(|(_, n)| **n > 0)
        .map(|((src, dst), &n)| {
            let size = 1 + rng.below(30) as usize;
            let weights: Vec<f64> = (0..n * size).map(|_| 10f64.powf(rng.next_f64() * 6.0 - 3.0)).collect();
            let theta = if (src + dst) % 2 == 0 { 1.0 / 12.5e3 } else { 1.0 / 22.7e3 } * 1e6;
            let time = TimeModel { theta_s_per_mb: theta, gamma_s: 5e-6 * (1 + rng.below(3)) as f64 };
            PairGroups::new(src, dst, 64 + rng.below(1400) as usize, time, &weights, size)
        })
        .collect();
    Problem { workers, lambda, pairs, budget_bytes: None }
}

/// One width drawn uniformly from {2, 4, 8} per group.
fn random_assignment(problem: &Problem, rng: &mut SplitMix64) -> Assignment {
    problem.pairs.iter().map(|p| p.groups.iter().map(|_| WIDTHS[rng.below(3) as usize]).collect()).collect()
}

#[test]
fn groups_hold_the_heaviest_rows_first() {
    let time = TimeModel { theta_s_per_mb: 1.0, gamma_s: 0.0 };
    let p = PairGroups::new(0, 1, 4, time, &[1.0, 5.0, 3.0, 5.0, 0.5], 2);
    assert_eq!(p.groups, vec![vec![1, 3], vec![2, 0], vec![4]]);
    assert_eq!(p.weights, vec![10.0, 4.0, 0.5]);
    assert_eq!(p.row_bits(&[8, 4, 2]), vec![4, 8, 4, 8, 2]);
}

#[test]
fn extremes_normalise_to_zero_and_one() {
    let problem = random_problem(3, 4, &[2, 1, 3, 0, 2, 1, 1, 1, 2, 1, 1, 1], 0.5);
    // All-8 bits: best variance (0), worst time (1); all-2 the reverse.
    assert!((problem.objective(&problem.uniform(8)) - 0.5).abs() < 1e-12);
    assert!((problem.objective(&problem.uniform(2)) - 0.5).abs() < 1e-12);
}

/// `groups` as in [`random_problem`], each pair holding `extra` more rows than whole groups, so
/// that its last group is shorter (a second class of group size).
fn ragged_problem(seed: u64, workers: usize, groups: &[usize], lambda: f64, extra: usize) -> Problem {
    let mut problem = random_problem(seed, workers, groups, lambda);
    let mut rng = SplitMix64::new(seed ^ 7);
    for p in &mut problem.pairs {
        let size = p.groups[0].len();
        let rows = (p.rows() - size + extra).max(1);
        let weights: Vec<f64> = (0..rows).map(|_| 10f64.powf(rng.next_f64() * 6.0 - 3.0)).collect();
        *p = PairGroups::new(p.src, p.dst, p.width, p.time, &weights, size);
    }
    problem
}

#[test]
fn both_solvers_match_brute_force_up_to_eight_groups() {
    let shapes: [&[usize]; 5] = [&[1], &[3, 2], &[2, 2, 2, 2], &[1, 1, 1, 1, 1, 1, 1, 1], &[4, 0, 0, 4]];
    for (seed, groups) in shapes.iter().enumerate() {
        for lambda in [0.0, 0.25, 0.5, 0.9, 1.0] {
            let workers = if groups.len() > 6 { 4 } else { 3 };
            for problem in [
                random_problem(seed as u64, workers, groups, lambda),
                ragged_problem(seed as u64, workers, groups, lambda, 1),
            ] {
                let milp = solve_milp(&problem, 60.0).unwrap();
                let exact = solve(&problem, 60.0).unwrap();
                assert!(milp.optimal && milp.solver == Solver::Milp);
                assert!(exact.optimal && exact.solver == Solver::ExactSweep);
                for (name, got) in [("milp", &milp), ("exact", &exact)] {
                    assert_as_good_as_brute_force(
                        &problem,
                        &got.assignment,
                        &format!("{name}, shape {groups:?} lambda {lambda}"),
                    );
                }
            }
        }
    }
}

#[test]
fn a_pair_with_no_link_cost_gets_eight_bits_everywhere() {
    let mut problem = random_problem(6, 3, &[3, 2], 0.3);
    problem.pairs.iter_mut().for_each(|p| p.time = TimeModel { theta_s_per_mb: 0.0, gamma_s: 1e-3 });
    assert_eq!(solve_exact(&problem), problem.uniform(8));
}

#[test]
fn milp_under_a_byte_budget_matches_brute_force() {
    let shapes: [&[usize]; 3] = [&[3, 2], &[2, 2, 2, 2], &[1, 1, 1, 1, 1, 1, 1, 1]];
    for (seed, groups) in shapes.iter().enumerate() {
        for lambda in [0.25, 0.5, 1.0] {
            let workers = if groups.len() > 6 { 4 } else { 3 };
            let mut problem = random_problem(seed as u64 + 10, workers, groups, lambda);
            let (low, high) = (problem.bytes(&problem.uniform(2)), problem.bytes(&problem.uniform(8)));
            for budget in [low, (2 * low + high) / 3, (low + 2 * high) / 3] {
                problem.budget_bytes = Some(budget);
                let solved = solve(&problem, 60.0).unwrap();
                assert!(solved.optimal);
                assert!(problem.bytes(&solved.assignment) <= budget, "shape {groups:?} budget {budget}");
                let context = format!("shape {groups:?} lambda {lambda} budget {budget}");
                assert_as_good_as_brute_force(&problem, &solved.assignment, &context);
            }
        }
    }
}

#[test]
fn a_budget_below_all_two_bits_is_an_error() {
    let mut problem = random_problem(4, 3, &[2, 1], 0.5);
    problem.budget_bytes = Some(problem.bytes(&problem.uniform(2)) - 1);
    assert!(solve(&problem, 60.0).is_err());
}

#[test]
fn a_time_limit_before_any_feasible_point_gives_the_best_uniform_width_within_the_budget() {
    let mut problem = random_problem(5, 4, &[5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5], 0.5);
    let (low, high) = (problem.bytes(&problem.uniform(2)), problem.bytes(&problem.uniform(8)));
    for budget in [None, Some((low + high) / 2)] {
        problem.budget_bytes = budget;
        let solved = solve_milp(&problem, 1e-9).expect("a time limit is not an error");
        let uniform = WIDTHS
            .iter()
            .map(|&b| problem.uniform(b))
            .filter(|a| budget.is_none_or(|cap| problem.bytes(a) <= cap))
            .map(|a| problem.objective(&a))
            .fold(f64::INFINITY, f64::min);
        assert!(problem.objective(&solved.assignment) <= uniform + 1e-9);
        assert!(budget.is_none_or(|cap| problem.bytes(&solved.assignment) <= cap));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn solve_is_never_worse_than_uniform_or_random(
        seed in any::<u64>(),
        groups in prop::collection::vec(0usize..5, 6),
        lambda in 0.0f64..=1.0,
    ) {
        let problem = random_problem(seed, 3, &groups, lambda);
        let solved = solve(&problem, 60.0).unwrap();
        let got = problem.objective(&solved.assignment);
        for bits in WIDTHS {
            prop_assert!(got <= problem.objective(&problem.uniform(bits)) + 1e-9);
        }
        let mut rng = SplitMix64::new(seed ^ 1);
        for _ in 0..20 {
            prop_assert!(got <= problem.objective(&random_assignment(&problem, &mut rng)) + 1e-9);
        }
    }

    /// The sweep's objective equals the MILP's optimum on instances too large to enumerate,
    /// with ragged last groups.
    #[test]
    fn exact_sweep_equals_the_milp(
        seed in any::<u64>(),
        groups in prop::collection::vec(0usize..6, 6),
        lambda in 0.0f64..=1.0,
        extra in 0usize..3,
    ) {
        let problem = ragged_problem(seed, 3, &groups, lambda, extra);
        let milp = solve_milp(&problem, 60.0).unwrap();
        prop_assume!(milp.optimal);
        let (exact, milp) = (problem.objective(&solve_exact(&problem)), problem.objective(&milp.assignment));
        prop_assert!((exact - milp).abs() <= 1e-7 * milp.abs().max(1.0), "exact {exact} vs milp {milp}");
    }

    /// The bucketed class frontiers give the sweep that enumerated and sorted every count
    /// pair the same assignment, so the same objective, on problems with many groups per pair
    /// (widths of every residue mod 8, ragged last groups).
    #[test]
    fn bucketed_frontiers_give_the_enumerated_sweeps_assignment(
        seed in any::<u64>(),
        groups in prop::collection::vec(0usize..60, 6),
        lambda in 0.0f64..=1.0,
        extra in 0usize..3,
    ) {
        let problem = ragged_problem(seed, 3, &groups, lambda, extra);
        let (fast, reference) = (solve_exact(&problem), sweep::solve_enumerated(&problem));
        prop_assert_eq!(problem.objective(&fast).to_bits(), problem.objective(&reference).to_bits());
        prop_assert_eq!(fast, reference);
    }

    /// Table 6's setting: given a random assignment's bytes as its budget, the MILP moves no
    /// more bytes and is never worse on the objective.
    #[test]
    fn milp_within_a_random_assignments_bytes_is_never_worse_than_it(
        seed in any::<u64>(),
        groups in prop::collection::vec(0usize..5, 6),
        lambda in 0.0f64..=1.0,
    ) {
        let mut problem = random_problem(seed, 3, &groups, lambda);
        let random = random_assignment(&problem, &mut SplitMix64::new(seed ^ 2));
        problem.budget_bytes = Some(problem.bytes(&random));
        let solved = solve(&problem, 60.0).unwrap();
        prop_assert!(problem.bytes(&solved.assignment) <= problem.bytes(&random));
        prop_assert!(problem.objective(&solved.assignment) <= problem.objective(&random) + 1e-9);
    }
}
