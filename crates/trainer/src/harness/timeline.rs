//! The modeled timeline of one step: what the step would take on the modeled cluster.
//!
//! Per worker `w`, its measured compute `C_w` runs back to back with the step's communicator
//! calls, each costing its modeled time `c_k` (the link cost model over the merged ledger). A
//! split call `k` overlaps the compute `o_wk` the worker did while it was in flight, and costs
//! `max(c_k, o_wk)` instead of `c_k + o_wk`:
//!
//! `T_w = C_w + sum_k c_k - sum_k min(c_k, o_wk)`,
//!
//! and the step lasts as long as its slowest worker, `max_w T_w`. With nothing overlapped it is
//! compute plus communication; overlap never makes it longer.

/// One worker's share of a step: its compute, and per call of the step the compute that
/// overlapped it (zero for blocking calls).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WorkerStep {
    pub compute_s: f64,
    pub overlaps: Vec<f64>,
}

/// The modeled step: `calls` holds each call's modeled seconds, in call order.
pub(crate) fn modeled_step_s(calls: &[f64], workers: &[WorkerStep]) -> f64 {
    let comm: f64 = calls.iter().sum();
    workers
        .iter()
        .map(|w| {
            let hidden: f64 = calls.iter().zip(&w.overlaps).map(|(c, o)| c.min(*o)).sum();
            w.compute_s + comm - hidden
        })
        .fold(0.0, f64::max)
}

/// Per call that some worker overlapped, `(c_k, central_k)`: its modeled seconds and the
/// compute every worker did while it was in flight (the least over workers: the central
/// aggregation of a split pull, or the primaries' gradients of a split push).
pub(crate) fn overlapped_calls(calls: &[f64], workers: &[WorkerStep]) -> Vec<(f64, f64)> {
    let least =
        |k: usize| workers.iter().map(|w| w.overlaps.get(k).copied().unwrap_or(0.0)).fold(f64::INFINITY, f64::min);
    let any = |k: usize| workers.iter().any(|w| w.overlaps.get(k).is_some_and(|&o| o > 0.0));
    calls.iter().enumerate().filter(|&(k, _)| any(k)).map(|(k, &c)| (c, least(k))).collect()
}

/// `sum_k min(c_k, central_k)` over [`overlapped_calls`]: every worker hides at least this much
/// communication, so the overlapped step is at most the blocking step minus it.
pub(crate) fn overlap_bound_s(calls: &[f64], workers: &[WorkerStep]) -> f64 {
    overlapped_calls(calls, workers).iter().map(|&(c, o)| c.min(o)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(compute_s: f64, overlaps: &[f64]) -> WorkerStep {
        WorkerStep { compute_s, overlaps: overlaps.to_vec() }
    }

    #[test]
    fn without_overlap_a_step_is_compute_plus_communication_of_the_slowest_worker() {
        let calls = [0.5, 0.25];
        let step = modeled_step_s(&calls, &[worker(1.0, &[0.0, 0.0]), worker(2.0, &[0.0, 0.0])]);
        assert_eq!(step, 2.75);
    }

    #[test]
    fn an_overlapped_call_costs_the_larger_of_its_communication_and_its_compute() {
        let calls = [0.5, 0.25];
        // 0.2 s of compute hides under the 0.5 s call; 0.4 s under the 0.25 s call hides only it.
        assert!((modeled_step_s(&calls, &[worker(1.0, &[0.2, 0.4])]) - (1.75 - 0.2 - 0.25)).abs() < 1e-12);
        for overlaps in [[0.0, 0.0], [0.1, 0.0], [0.7, 0.3], [1.0, 1.0]] {
            let with = modeled_step_s(&calls, &[worker(1.0, &overlaps)]);
            assert!((1.0..=1.75).contains(&with), "{overlaps:?}: {with}");
        }
    }

    #[test]
    fn calls_without_an_overlap_record_cost_in_full() {
        assert_eq!(modeled_step_s(&[0.5, 0.5], &[worker(1.0, &[0.25])]), 1.75);
        assert_eq!(modeled_step_s(&[], &[worker(1.0, &[])]), 1.0);
    }

    #[test]
    fn the_overlapped_step_saves_at_least_the_least_overlap_of_each_call() {
        let calls = [0.4, 0.2, 0.5];
        let workers = [worker(1.0, &[0.0, 0.1, 0.3]), worker(1.2, &[0.0, 0.3, 0.6]), worker(0.9, &[0.0, 0.0, 0.2])];
        assert_eq!(overlapped_calls(&calls, &workers), [(0.2, 0.0), (0.5, 0.2)]);
        let bound = overlap_bound_s(&calls, &workers);
        assert!((bound - 0.2).abs() < 1e-12, "{bound}");
        let blocking: Vec<WorkerStep> = workers.iter().map(|w| worker(w.compute_s, &[])).collect();
        assert!(modeled_step_s(&calls, &workers) <= modeled_step_s(&calls, &blocking) - bound + 1e-12);
    }
}
