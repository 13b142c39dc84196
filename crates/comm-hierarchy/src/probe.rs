//! Measures AdaQP's per-pair cost model `time = theta * MB + gamma` on the running backend:
//! every ordered pair in turn times ping-pongs of several sizes and fits a line.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::communicator::Communicator;
use crate::cost::{LinearFit, fit_linear};
use crate::error::CommError;
use crate::topology::LinkClass;

const BYTES_PER_MB: f64 = 1e6;

/// The fitted cost of sending from `src` to `dst`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairFit {
    pub src: usize,
    pub dst: usize,
    pub link: LinkClass,
    pub fit: LinearFit,
    /// Timed sends behind the fit.
    pub samples: usize,
}

/// Collective. For each ordered pair `(src, dst)` (one pair at a time, separated by
/// barriers), `src` sends each size `repetitions` times (after one untimed warm-up) and
/// waits for an empty acknowledgement; the round-trip times are fitted against the size. The
/// acknowledgement's latency is therefore part of `gamma`. Rank 0 returns every pair's fit;
/// the others return `None`. The probe's own traffic is recorded under `phase`.
pub fn probe_links<C: Communicator + ?Sized>(
    comm: &C,
    phase: &str,
    sizes: &[usize],
    repetitions: usize,
) -> Result<Option<Vec<PairFit>>, CommError> {
    let mut distinct = sizes.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 2 || repetitions == 0 {
        return Err(CommError::invalid(
            phase,
            format!(
                "probing needs two or more distinct sizes and one or more repetitions, got sizes {sizes:?} and {repetitions} repetitions"
            ),
        ));
    }
    let (rank, size) = (comm.rank(), comm.size());
    let mut fits = Vec::new();
    for src in 0..size {
        for dst in (0..size).filter(|&d| d != src) {
            if rank == src {
                let samples = time_pair(comm, phase, dst, sizes, repetitions)?;
                let fit = fit_linear(&samples).map_err(|e| CommError::invalid(phase, e.to_string()))?;
                // src != dst, so a link class always exists.
                let link = comm.topology().link_class(src, dst).unwrap_or(LinkClass::Intra);
                fits.push(PairFit { src, dst, link, fit, samples: samples.len() });
            } else if rank == dst {
                echo_pair(comm, phase, src, sizes, repetitions)?;
            }
            comm.barrier(phase)?;
        }
    }
    let encoded =
        serde_json::to_vec(&fits).map_err(|e| CommError::invalid(phase, format!("cannot encode fits: {e}")))?;
    let Some(all) = comm.gather(phase, 0, encoded)? else {
        return Ok(None);
    };
    let mut merged = Vec::new();
    for (src, bytes) in all.iter().enumerate() {
        let part: Vec<PairFit> = serde_json::from_slice(bytes)
            .map_err(|e| CommError::malformed(phase, src, format!("not a list of pair fits: {e}")))?;
        merged.extend(part);
    }
    Ok(Some(merged))
}

fn time_pair<C: Communicator + ?Sized>(
    comm: &C,
    phase: &str,
    dst: usize,
    sizes: &[usize],
    repetitions: usize,
) -> Result<Vec<(f64, f64)>, CommError> {
    let mut samples = Vec::with_capacity(sizes.len() * repetitions);
    for &bytes in sizes {
        for rep in 0..=repetitions {
            let message = vec![0u8; bytes];
            let start = Instant::now();
            comm.send(phase, dst, message)?;
            comm.recv(phase, dst)?;
            let seconds = start.elapsed().as_secs_f64();
            if rep > 0 {
                samples.push((bytes as f64 / BYTES_PER_MB, seconds));
            }
        }
    }
    Ok(samples)
}

fn echo_pair<C: Communicator + ?Sized>(
    comm: &C,
    phase: &str,
    src: usize,
    sizes: &[usize],
    repetitions: usize,
) -> Result<(), CommError> {
    for &bytes in sizes {
        for _ in 0..=repetitions {
            let message = comm.recv(phase, src)?;
            if message.len() != bytes {
                return Err(CommError::malformed(
                    phase,
                    src,
                    format!("expected {bytes} probe bytes, got {}", message.len()),
                ));
            }
            comm.send(phase, src, Vec::new())?;
        }
    }
    Ok(())
}
