use graph_partition::rng::SplitMix64;
use proptest::prelude::*;

use super::*;

/// Every assignment of `problem`, by enumeration (3^groups).
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
        if value < best.1 {
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
    Problem { workers, lambda, pairs }
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

#[test]
fn milp_matches_brute_force_up_to_eight_groups() {
    let shapes: [&[usize]; 5] = [&[1], &[3, 2], &[2, 2, 2, 2], &[1, 1, 1, 1, 1, 1, 1, 1], &[4, 0, 0, 4]];
    for (seed, groups) in shapes.iter().enumerate() {
        for lambda in [0.0, 0.25, 0.5, 0.9, 1.0] {
            let workers = if groups.len() > 6 { 4 } else { 3 };
            let problem = random_problem(seed as u64, workers, groups, lambda);
            let solved = solve(&problem, 60.0).unwrap();
            assert!(solved.optimal);
            let (_, best) = brute_force(&problem);
            let got = problem.objective(&solved.assignment);
            assert!(
                (got - best).abs() <= 1e-9 * best.abs().max(1.0),
                "shape {groups:?} lambda {lambda}: {got} vs {best}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn milp_is_never_worse_than_uniform_or_random(
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
            let random: Assignment = problem
                .pairs
                .iter()
                .map(|p| p.groups.iter().map(|_| WIDTHS[rng.below(3) as usize]).collect())
                .collect();
            prop_assert!(got <= problem.objective(&random) + 1e-9);
        }
    }
}
