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
//!
//! That sum lets a worker's fast stretches make up for its slow ones. On a wire they do not:
//! every call needs every worker's messages, so each call starts when the last worker reaches
//! it. Where the clock kept the step's events, [`played_step_s`] plays them out: worker `w`
//! computes `l_we` before event `e`; a blocking call `k` ends for all at
//! `max_w t_w + c_k`; a split call's start posts at `max_w t_w` and its wait lets a worker go on
//! at the later of its own time and that post plus `c_k`. The step ends with the slowest
//! worker's last compute. It is never shorter than `max_w T_w`.
//!
//! Ranks that share a machine share its cores. A step cannot end before each machine has run
//! the CPU its ranks used in it ([`Machines::floor_s`]): four ranks on two cores wait for a core
//! as well as for the wire. Under MPI the modeled step is at least that floor.

use gnn_core::exchange::CallKind;

/// One worker's share of a step: its compute, and per call of the step the compute that
/// overlapped it (zero for blocking calls).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WorkerStep {
    pub compute_s: f64,
    pub overlaps: Vec<f64>,
}

/// Which machine each rank runs on and how many cores each machine has (ranks in network
/// namespaces of one machine share its cores whatever their host names).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Machines {
    of_rank: Vec<usize>,
    cores: Vec<f64>,
}

impl Machines {
    /// Groups ranks by machine id (`ids[r]`, equal ids one machine), each machine with the
    /// cores its ranks report (`cores[r]`, the largest where they differ; a CPU quota's
    /// fraction of a core counts as such).
    pub(crate) fn new(ids: &[u64], cores: &[f64]) -> Self {
        let mut seen: Vec<u64> = Vec::new();
        let mut of_rank = Vec::with_capacity(ids.len());
        let mut machine_cores: Vec<f64> = Vec::new();
        for (&id, &c) in ids.iter().zip(cores) {
            let m = seen.iter().position(|&s| s == id).unwrap_or_else(|| {
                seen.push(id);
                machine_cores.push(0.0);
                seen.len() - 1
            });
            // A rank that reports no cores counts one.
            machine_cores[m] = machine_cores[m].max(if c > 0.0 { c } else { 1.0 });
            of_rank.push(m);
        }
        Self { of_rank, cores: machine_cores }
    }

    /// The shortest the step can be on these machines: the most CPU seconds any machine's ranks
    /// used (`cpu_s[r]`, each rank's process) over its cores.
    pub(crate) fn floor_s(&self, cpu_s: &[f64]) -> f64 {
        let mut used = vec![0.0f64; self.cores.len()];
        for (&m, cpu) in self.of_rank.iter().zip(cpu_s) {
            used[m] += cpu;
        }
        used.iter().zip(&self.cores).map(|(u, c)| u / c).fold(0.0, f64::max)
    }
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

/// The step as the workers' events play out on the modeled links (see the module notes):
/// `kinds` are the events' kinds in order (every worker's), `leads[w][e]` worker `w`'s compute
/// before event `e`, `computes[w]` its compute in the whole step (the rest comes after its last
/// event). `blocking` plays every split call as a blocking one at its start. `None` where the
/// events do not line up with the `calls` (a wait with no split call in flight, another count of
/// calls, or a worker with another count of events).
pub(crate) fn played_step_s(
    calls: &[f64],
    kinds: &[CallKind],
    leads: &[Vec<f64>],
    computes: &[f64],
    blocking: bool,
) -> Option<f64> {
    if leads.iter().any(|l| l.len() != kinds.len()) || leads.len() != computes.len() {
        return None;
    }
    let mut t = vec![0.0f64; leads.len()];
    let mut next = 0;
    // The split call in flight: when its messages are all in.
    let mut in_flight: Option<f64> = None;
    let latest = |t: &[f64]| t.iter().copied().fold(0.0, f64::max);
    for (e, kind) in kinds.iter().enumerate() {
        for (time, lead) in t.iter_mut().zip(leads) {
            *time += lead[e];
        }
        match kind {
            CallKind::Wait if blocking => {}
            CallKind::Wait => {
                let done = in_flight.take()?;
                t.iter_mut().for_each(|time| *time = time.max(done));
            }
            CallKind::Start if !blocking => {
                in_flight = Some(latest(&t) + calls.get(next)?);
                next += 1;
            }
            CallKind::Blocking | CallKind::Start => {
                let done = latest(&t) + calls.get(next)?;
                t.fill(done);
                next += 1;
            }
        }
    }
    if next != calls.len() || in_flight.is_some() {
        return None;
    }
    let ends = t.iter().zip(leads).zip(computes).map(|((time, lead), compute)| {
        let rest = (compute - lead.iter().sum::<f64>()).max(0.0);
        time + rest
    });
    Some(ends.fold(0.0, f64::max))
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

    #[test]
    fn ranks_sharing_a_machine_share_its_cores() {
        // Four ranks in namespaces of one 2-core machine: 4 x 0.1 s of CPU takes 0.2 s.
        let one = Machines::new(&[7, 7, 7, 7], &[2.0; 4]);
        assert!((one.floor_s(&[0.1, 0.1, 0.1, 0.1]) - 0.2).abs() < 1e-12);
        // Two machines of 2 cores, two ranks each: the busier machine sets the floor.
        let two = Machines::new(&[1, 1, 2, 2], &[2.0; 4]);
        assert!((two.floor_s(&[0.1, 0.3, 0.1, 0.1]) - 0.2).abs() < 1e-12);
        // Hosts of half a core each (CPU quotas): each host's CPU over its own half core.
        let halves = Machines::new(&[1, 2, 3, 4], &[0.5; 4]);
        assert!((halves.floor_s(&[0.1, 0.2, 0.1, 0.1]) - 0.4).abs() < 1e-12);
        // A machine's cores are the most its ranks report; zero counts as one.
        let odd = Machines::new(&[3, 3], &[0.0, 4.0]);
        assert!((odd.floor_s(&[0.4, 0.4]) - 0.2).abs() < 1e-12);
        assert_eq!(Machines::new(&[], &[]).floor_s(&[]), 0.0);
    }

    fn worker(compute_s: f64, overlaps: &[f64]) -> WorkerStep {
        WorkerStep { compute_s, overlaps: overlaps.to_vec() }
    }

    #[test]
    fn without_overlap_a_step_is_compute_plus_communication_of_the_slowest_worker() {
        let calls = [0.5, 0.25];
        let step = modeled_step_s(&calls, &[worker(1.0, &[0.0, 0.0]), worker(2.0, &[0.0, 0.0])]);
        assert_eq!(step, 2.75);
    }

    use CallKind::{Blocking, Start, Wait};

    #[test]
    fn each_call_waits_for_the_last_worker_to_reach_it() {
        // Two workers, two blocking calls of 0.5 s; each worker is slow before a different call.
        let calls = [0.5, 0.5];
        let leads = [vec![1.0, 0.0], vec![0.0, 1.0]];
        let played = played_step_s(&calls, &[Blocking, Blocking], &leads, &[1.0, 1.0], false).unwrap();
        assert_eq!(played, 3.0, "1 + 0.5, then 1 + 0.5");
        let summed = modeled_step_s(&calls, &[worker(1.0, &[0.0, 0.0]), worker(1.0, &[0.0, 0.0])]);
        assert_eq!(summed, 2.0, "the sum lets the slow stretches cancel");
        // Balanced workers play out to the sum: compute plus communication, the tail after.
        let even = [vec![0.5, 0.25], vec![0.5, 0.25]];
        assert_eq!(played_step_s(&calls, &[Blocking, Blocking], &even, &[1.0, 1.0], false), Some(2.0));
    }

    #[test]
    fn a_split_call_runs_under_the_compute_between_its_start_and_its_wait() {
        let calls = [0.5];
        // 0.2 s of compute before the start, 0.3 s in flight, 0.1 s after the wait.
        let leads = [vec![0.2, 0.3]];
        let kinds = [Start, Wait];
        assert_eq!(played_step_s(&calls, &kinds, &leads, &[0.6], false), Some(0.2 + 0.5 + 0.1));
        assert_eq!(played_step_s(&calls, &kinds, &leads, &[0.6], true), Some(0.2 + 0.5 + 0.3 + 0.1));
        // Compute longer than the call hides it whole.
        let long = [vec![0.2, 0.9]];
        assert_eq!(played_step_s(&calls, &kinds, &long, &[1.2], false), Some(1.2));
    }

    #[test]
    fn events_that_do_not_line_up_play_nothing() {
        let one = [vec![0.1]];
        assert_eq!(played_step_s(&[0.5], &[Wait], &one, &[0.1], false), None, "a wait with nothing in flight");
        assert_eq!(played_step_s(&[0.5, 0.5], &[Blocking], &one, &[0.1], false), None, "a call without an event");
        assert_eq!(played_step_s(&[0.5], &[Blocking], &[vec![0.1, 0.2]], &[0.3], false), None);
        assert_eq!(played_step_s(&[0.5], &[Start], &one, &[0.1], false), None, "a start never waited for");
    }

    #[test]
    fn playing_out_is_never_shorter_than_the_sum() {
        let calls = [0.3, 0.1, 0.4];
        let kinds = [Blocking, Start, Wait, Blocking];
        let leads = [vec![0.2, 0.1, 0.3, 0.0], vec![0.05, 0.4, 0.0, 0.2], vec![0.3, 0.0, 0.1, 0.1]];
        let computes = [0.7, 0.8, 0.6];
        let overlaps = [[0.0, 0.3, 0.0], [0.0, 0.0, 0.0], [0.0, 0.1, 0.0]];
        let workers: Vec<WorkerStep> = computes.iter().zip(&overlaps).map(|(&c, o)| worker(c, o)).collect();
        let played = played_step_s(&calls, &kinds, &leads, &computes, false).unwrap();
        assert!(played >= modeled_step_s(&calls, &workers) - 1e-12, "{played}");
        let blocking = played_step_s(&calls, &kinds, &leads, &computes, true).unwrap();
        assert!(played <= blocking + 1e-12, "{played} {blocking}");
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
