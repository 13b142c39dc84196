//! The link cost model: turns a (merged) ledger into modeled seconds per call on a
//! [`Topology`], so a run can be projected onto a cluster it is not running on.
//!
//! The model is named by [`MODEL`] ("concurrent flows, shared host links"), for reports to
//! state.
//!
//! A call's messages are in flight at once: the backends post every message of a call before
//! they wait for any (the MPI backend's progress thread moves them while the rank computes).
//! Each host has one uplink (out) and one downlink (in) of the inter-host bandwidth, used in
//! both directions at once; the flows through a link share it, and a call's inter-host part
//! lasts as long as the busiest link: `latency + max_h max(out_h, in_h) / bandwidth`, with
//! `out_h` the bytes leaving host `h` for other hosts and `in_h` those entering it. Inside a
//! host each rank copies its messages over the intra-host link one after another (sending and
//! receiving), at the intra-host bandwidth: `latency + max_r max(out_r, in_r) / bandwidth`. A
//! call lasts as long as the slower of the two parts. Per call:
//! - **all-to-all** and **barrier**: its recorded messages, as above (an empty message still
//!   costs its latency).
//! - **all-reduce**: its recorded messages (a reduce-scatter then an all-gather, each an
//!   all-to-all of chunks), as above, with the latency of each of the two phases.
//! - **broadcast, gather, scatter**: the root's messages, as above: the root's link is the
//!   bottleneck.
//! - **point-to-point**: each message alone.
//!
//! Calls are assumed not to overlap each other or computation: the total is an upper bound on
//! communication time for a run that overlaps. The model needs the snapshots of all ranks
//! merged; with only some ranks it sees only their messages ([`ModeledTime::complete`]).
//!
//! The links come from probes of single pairs (`probe.rs`, `halo bench comm`): a pair alone
//! fills its link each way, and the model divides the link among flows; no all-to-all's
//! measured time is fitted into it.
//!
//! Also here: AdaQP's per-pair `theta * MB + gamma` model and its least-squares fit, held to
//! `theta, gamma >= 0` (a free line through noisy fast-link timings can cross zero above the
//! origin); `probe.rs` times the sends it is fitted to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ledger::{CollectiveKind, CollectiveRecord, LedgerSnapshot};
use crate::topology::{LinkClass, Topology};

/// Modeled time of one recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeledCall {
    pub seq: Option<u64>,
    pub kind: CollectiveKind,
    pub phase: String,
    pub seconds: f64,
}

/// Modeled communication time of a ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeledTime {
    /// Sum over calls, in seconds.
    pub total_s: f64,
    /// Whether the ledger held every rank of the topology.
    pub complete: bool,
    /// One entry per call, in ledger order.
    pub calls: Vec<ModeledCall>,
}

impl ModeledTime {
    /// Seconds per phase label.
    pub fn by_phase(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for call in &self.calls {
            *out.entry(call.phase.clone()).or_insert(0.0) += call.seconds;
        }
        out
    }

    /// Seconds per kind of call.
    pub fn by_kind(&self) -> BTreeMap<CollectiveKind, f64> {
        let mut out = BTreeMap::new();
        for call in &self.calls {
            *out.entry(call.kind).or_insert(0.0) += call.seconds;
        }
        out
    }
}

/// The cost model [`model`] applies, as reports name it (see the module notes).
pub const MODEL: &str = "concurrent flows, shared host links";

/// Models every call of `ledger` on `topology` (see the module notes for the formulas).
pub fn model(topology: &Topology, ledger: &LedgerSnapshot) -> ModeledTime {
    let calls: Vec<ModeledCall> = ledger
        .collectives()
        .iter()
        .map(|record| ModeledCall {
            seq: record.seq,
            kind: record.kind,
            phase: record.phase.clone(),
            seconds: call_seconds(topology, record),
        })
        .collect();
    let complete = ledger.ranks().iter().copied().eq(0..topology.workers());
    ModeledTime { total_s: calls.iter().map(|c| c.seconds).sum(), complete, calls }
}

/// One message of a call: source rank, destination rank, bytes.
type Message = (usize, usize, f64);

/// Seconds of `messages` in flight at once, over `phases` latencies (see the module notes):
/// the busiest host link for the inter-host messages, the busiest rank for the intra-host ones,
/// whichever is slower.
fn concurrent_seconds(topology: &Topology, messages: &[Message], phases: usize) -> f64 {
    let links = topology.links();
    let mut host_out = vec![0.0f64; topology.hosts()];
    let mut host_in = vec![0.0f64; topology.hosts()];
    let mut rank_out = vec![0.0f64; topology.workers()];
    let mut rank_in = vec![0.0f64; topology.workers()];
    let (mut inter, mut intra) = (false, false);
    for &(src, dst, bytes) in messages {
        match topology.link_class(src, dst) {
            Some(LinkClass::Inter) => {
                inter = true;
                host_out[topology.host_of(src)] += bytes;
                host_in[topology.host_of(dst)] += bytes;
            }
            Some(LinkClass::Intra) => {
                intra = true;
                rank_out[src] += bytes;
                rank_in[dst] += bytes;
            }
            None => {}
        }
    }
    let busiest = |out: &[f64], into: &[f64]| out.iter().chain(into).copied().fold(0.0, f64::max);
    let part = |used: bool, link: &crate::topology::LinkSpec, bytes: f64| {
        if used { phases as f64 * link.latency_s + bytes / link.bandwidth_bytes_per_s } else { 0.0 }
    };
    let inter_s = part(inter, &links.inter, busiest(&host_out, &host_in));
    let intra_s = part(intra, &links.intra, busiest(&rank_out, &rank_in));
    inter_s.max(intra_s)
}

fn call_seconds(topology: &Topology, record: &CollectiveRecord) -> f64 {
    let messages: Vec<Message> = record.sends.iter().map(|s| (s.src, s.dst, s.bytes as f64)).collect();
    match record.kind {
        CollectiveKind::AllReduce => concurrent_seconds(topology, &messages, 2),
        CollectiveKind::AllToAll
        | CollectiveKind::Barrier
        | CollectiveKind::Broadcast
        | CollectiveKind::Gather
        | CollectiveKind::Scatter => concurrent_seconds(topology, &messages, 1),
        CollectiveKind::PointToPoint => messages
            .iter()
            .map(|&(src, dst, bytes)| topology.link(src, dst).map_or(0.0, |link| link.transfer_s(bytes)))
            .sum(),
    }
}

/// AdaQP's per-pair cost model `time = theta * MB + gamma`, with MB = 10^6 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinearFit {
    /// Seconds per 10^6 bytes.
    pub theta_s_per_mb: f64,
    /// Seconds per message.
    pub gamma_s: f64,
    /// Coefficient of determination of the fit (1 when the points are exactly linear).
    pub r_squared: f64,
}

/// Why a line could not be fitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    #[error("a line needs samples at two or more distinct sizes, got {distinct} distinct of {samples}")]
    TooFewSizes { samples: usize, distinct: usize },
    #[error("sample {index} is not finite")]
    NotFinite { index: usize },
}

/// Least-squares line through `(megabytes, seconds)` samples, with `theta >= 0` and
/// `gamma >= 0`: a message costs no less than nothing, yet on a fast link the free line through
/// noisy timings often crosses zero above the origin (a negative latency), which AdaQP's time
/// model would then reward with more messages.
pub fn fit_linear(samples: &[(f64, f64)]) -> Result<LinearFit, FitError> {
    if let Some(index) = samples.iter().position(|(x, y)| !x.is_finite() || !y.is_finite()) {
        return Err(FitError::NotFinite { index });
    }
    let n = samples.len() as f64;
    let mean_x = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let mean_y = samples.iter().map(|s| s.1).sum::<f64>() / n;
    let sxx: f64 = samples.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    if samples.is_empty() || sxx <= 0.0 {
        let mut xs: Vec<u64> = samples.iter().map(|s| s.0.to_bits()).collect();
        xs.sort_unstable();
        xs.dedup();
        return Err(FitError::TooFewSizes { samples: samples.len(), distinct: xs.len() });
    }
    let sxy: f64 = samples.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    let ss_res =
        |theta: f64, gamma: f64| -> f64 { samples.iter().map(|(x, y)| (y - (theta * x + gamma)).powi(2)).sum() };
    let free = (sxy / sxx, mean_y - sxy / sxx * mean_x);
    let (theta, gamma) = if free.0 >= 0.0 && free.1 >= 0.0 {
        free
    } else {
        // The squared error is convex, so with the free optimum outside the quadrant the
        // constrained one lies on an edge: the best of each edge's own optimum, clamped.
        let sxx0: f64 = samples.iter().map(|(x, _)| x * x).sum();
        let sxy0: f64 = samples.iter().map(|(x, y)| x * y).sum();
        let through_origin = ((sxy0 / sxx0).max(0.0), 0.0);
        let flat = (0.0, mean_y.max(0.0));
        if ss_res(through_origin.0, through_origin.1) <= ss_res(flat.0, flat.1) { through_origin } else { flat }
    };
    let ss_tot: f64 = samples.iter().map(|(_, y)| (y - mean_y).powi(2)).sum();
    let ss_res = ss_res(theta, gamma);
    let r_squared = if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 1.0 };
    Ok(LinearFit { theta_s_per_mb: theta, gamma_s: gamma, r_squared })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::PairBytes;
    use crate::topology::{LinkModel, LinkSpec};

    fn topo() -> Topology {
        let links = LinkModel { intra: LinkSpec::from_gb_s_us(20.0, 1.0), inter: LinkSpec::from_gb_s_us(5.0, 10.0) };
        Topology::new(2, 2, links).unwrap()
    }

    fn record(kind: CollectiveKind, payload_bytes: u64, sends: Vec<PairBytes>) -> CollectiveRecord {
        CollectiveRecord { seq: Some(0), kind, phase: "x".into(), payload_bytes, sends }
    }

    #[test]
    fn an_all_to_all_takes_its_busiest_host_link() {
        let t = topo();
        let n = 1_000_000u64;
        let sends = (0..4)
            .flat_map(|s| (0..4).filter(move |&d| d != s).map(move |d| PairBytes { src: s, dst: d, bytes: n }))
            .collect();
        let secs = call_seconds(&t, &record(CollectiveKind::AllToAll, 0, sends));
        // Each host's two ranks send 1 MB to each of the other host's two: 4 MB out of and
        // into each host, both ways at once. The intra-host pairs (1 MB each) take less.
        let expected = 10e-6 + 4e6 / 5e9;
        assert!((secs - expected).abs() < 1e-12, "{secs} vs {expected}");
    }

    #[test]
    fn an_unbalanced_all_to_all_waits_for_the_busiest_link_only() {
        let t = topo();
        // Rank 0 sends 3 MB to rank 2; rank 3 sends 1 MB to rank 1: host 0's uplink is the
        // busiest (3 MB), and the other flow runs beside it.
        let sends =
            vec![PairBytes { src: 0, dst: 2, bytes: 3_000_000 }, PairBytes { src: 3, dst: 1, bytes: 1_000_000 }];
        let secs = call_seconds(&t, &record(CollectiveKind::AllToAll, 0, sends));
        assert!((secs - (10e-6 + 3e6 / 5e9)).abs() < 1e-12, "{secs}");
    }

    /// 2 hosts of 4 devices, links as in [`topo`].
    fn two_by_four() -> Topology {
        let links = LinkModel { intra: LinkSpec::from_gb_s_us(20.0, 1.0), inter: LinkSpec::from_gb_s_us(5.0, 10.0) };
        Topology::new(2, 4, links).unwrap()
    }

    #[test]
    fn four_devices_crossing_at_once_each_get_a_quarter_of_the_link() {
        let t = two_by_four();
        let n = 1_000_000u64;
        // Every device sends to its counterpart on the other host.
        let sends: Vec<PairBytes> = (0..8).map(|s| PairBytes { src: s, dst: (s + 4) % 8, bytes: n }).collect();
        let secs = call_seconds(&t, &record(CollectiveKind::AllToAll, 0, sends.clone()));
        let quarter = 10e-6 + 1e6 / (5e9 / 4.0);
        assert!((secs - quarter).abs() < 1e-12, "{secs} vs {quarter}");

        // One device alone gets the whole link; two at once, half each.
        let secs = call_seconds(&t, &record(CollectiveKind::AllToAll, 0, sends[..1].to_vec()));
        assert!((secs - (10e-6 + 1e6 / 5e9)).abs() < 1e-12, "{secs}");
        let secs = call_seconds(&t, &record(CollectiveKind::AllToAll, 0, sends[..2].to_vec()));
        assert!((secs - (10e-6 + 2e6 / 5e9)).abs() < 1e-12, "{secs}");

        // The busier end counts: on 3 hosts of 2, 1->4 (host 0 to 2) and 2->5 (host 1 to 2)
        // each leave their host alone, but both enter host 2: half each.
        let links = LinkModel { intra: LinkSpec::from_gb_s_us(20.0, 1.0), inter: LinkSpec::from_gb_s_us(5.0, 10.0) };
        let three = Topology::new(3, 2, links).unwrap();
        let sends = vec![PairBytes { src: 1, dst: 4, bytes: n }, PairBytes { src: 2, dst: 5, bytes: n }];
        let secs = call_seconds(&three, &record(CollectiveKind::AllToAll, 0, sends));
        assert!((secs - (10e-6 + 2e6 / 5e9)).abs() < 1e-12, "{secs}");
    }

    #[test]
    fn intra_host_pairs_are_not_slowed_by_crossing_traffic() {
        let t = two_by_four();
        // On 2 x 4: 0->2, 1->3, 4->6, 5->7 stay home; 2->4, 3->5, 6->0, 7->1 cross, two out
        // of and two into each host.
        let pairs = [(0, 2), (1, 3), (4, 6), (5, 7), (2, 4), (3, 5), (6, 0), (7, 1)];
        let big = 100_000_000u64;
        let sends = pairs.iter().map(|&(src, dst)| PairBytes {
            src,
            dst,
            bytes: if t.host_of(src) == t.host_of(dst) { big } else { 1000 },
        });
        let secs = call_seconds(&t, &record(CollectiveKind::AllToAll, 0, sends.collect()));
        let intra = 1e-6 + 1e8 / 20e9;
        assert!((secs - intra).abs() < 1e-12, "the intra pairs, at full PCIe speed, are the slowest: {secs}");

        let inter_only: Vec<PairBytes> =
            pairs[4..].iter().map(|&(src, dst)| PairBytes { src, dst, bytes: big }).collect();
        let secs = call_seconds(&t, &record(CollectiveKind::AllToAll, 0, inter_only));
        assert!((secs - (10e-6 + 2e8 / 5e9)).abs() < 1e-12, "two per host share the link: {secs}");
    }

    #[test]
    fn intra_only_rounds_use_the_intra_link() {
        let t = topo();
        // Only 0 -> 1 (intra) sends.
        let secs =
            call_seconds(&t, &record(CollectiveKind::AllToAll, 0, vec![PairBytes { src: 0, dst: 1, bytes: 2_000 }]));
        assert!((secs - (1e-6 + 2e3 / 20e9)).abs() < 1e-15);
    }

    #[test]
    fn an_all_reduce_is_its_two_exchanges_of_chunks() {
        let t = topo();
        // 4 MB of f32 on 4 ranks: chunks of 1 MB. Each rank sends 2 chunks across in the
        // reduce-scatter and 2 in the all-gather: 8 MB out of each host over two phases.
        let sends = (0..4)
            .flat_map(|r| {
                crate::endpoint::all_reduce_sends(r, 4, 1_000_000).into_iter().map(move |(dst, bytes)| PairBytes {
                    src: r,
                    dst,
                    bytes: bytes as u64,
                })
            })
            .collect();
        let secs = call_seconds(&t, &record(CollectiveKind::AllReduce, 4_000_000, sends));
        let expected = 2.0 * 10e-6 + 8e6 / 5e9;
        assert!((secs - expected).abs() < 1e-12, "{secs} vs {expected}");
        let one = Topology::new(1, 1, LinkModel::default()).unwrap();
        assert_eq!(call_seconds(&one, &record(CollectiveKind::AllReduce, 4_000_000, Vec::new())), 0.0);
    }

    #[test]
    fn rooted_calls_share_the_root_link() {
        let t = topo();
        // Empty messages to rank 1 (same host) and rank 2 (the other): the inter-host latency.
        let sends = vec![PairBytes { src: 0, dst: 1, bytes: 0 }, PairBytes { src: 0, dst: 2, bytes: 0 }];
        let secs = call_seconds(&t, &record(CollectiveKind::Broadcast, 0, sends));
        assert!((secs - 10e-6).abs() < 1e-15);
        // The root's 2 MB to each of the other host's ranks leave through its one uplink.
        let sends =
            vec![PairBytes { src: 0, dst: 2, bytes: 2_000_000 }, PairBytes { src: 0, dst: 3, bytes: 2_000_000 }];
        let secs = call_seconds(&t, &record(CollectiveKind::Scatter, 0, sends));
        assert!((secs - (10e-6 + 4e6 / 5e9)).abs() < 1e-12, "{secs}");
    }

    #[test]
    fn point_to_point_messages_go_one_after_another() {
        let t = topo();
        let sends =
            vec![PairBytes { src: 0, dst: 2, bytes: 1_000_000 }, PairBytes { src: 0, dst: 2, bytes: 1_000_000 }];
        let secs = call_seconds(&t, &record(CollectiveKind::PointToPoint, 0, sends));
        assert!((secs - 2.0 * (10e-6 + 1e6 / 5e9)).abs() < 1e-12, "{secs}");
    }

    #[test]
    fn fit_recovers_an_exact_line() {
        let samples: Vec<(f64, f64)> = [0.5, 1.0, 2.0, 4.0].iter().map(|&mb| (mb, 0.002 * mb + 3e-5)).collect();
        let fit = fit_linear(&samples).unwrap();
        assert!((fit.theta_s_per_mb - 0.002).abs() < 1e-12);
        assert!((fit.gamma_s - 3e-5).abs() < 1e-12);
        assert!((fit.r_squared - 1.0).abs() < 1e-9);
    }

    #[test]
    fn fit_never_gives_a_negative_latency_or_slope() {
        // A line whose free fit crosses zero at a positive size: gamma would be -1e-5 s.
        let samples: Vec<(f64, f64)> = [0.001, 0.01, 1.0, 4.0].iter().map(|&mb| (mb, 1.4e-4 * mb - 1e-5)).collect();
        let fit = fit_linear(&samples).unwrap();
        assert_eq!(fit.gamma_s, 0.0);
        let through_origin =
            samples.iter().map(|(x, y)| x * y).sum::<f64>() / samples.iter().map(|(x, _)| x * x).sum::<f64>();
        assert_eq!(fit.theta_s_per_mb, through_origin);
        // Timings that fall with size (noise on a tiny range): the flat line at their mean.
        let fit = fit_linear(&[(1.0, 3e-5), (2.0, 2e-5)]).unwrap();
        assert_eq!((fit.theta_s_per_mb, fit.gamma_s), (0.0, 2.5e-5));
        assert!(fit.r_squared <= 1.0 && fit.r_squared >= 0.0);
    }

    #[test]
    fn fit_needs_two_sizes() {
        assert_eq!(fit_linear(&[(1.0, 1.0), (1.0, 2.0)]), Err(FitError::TooFewSizes { samples: 2, distinct: 1 }));
        assert_eq!(fit_linear(&[]), Err(FitError::TooFewSizes { samples: 0, distinct: 0 }));
        assert_eq!(fit_linear(&[(1.0, f64::NAN), (2.0, 1.0)]), Err(FitError::NotFinite { index: 0 }));
    }
}
