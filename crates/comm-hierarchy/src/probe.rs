//! Measures AdaQP's per-pair cost model `time = theta * MB + gamma` on the running backend:
//! every ordered pair in turn times ping-pongs of several sizes and fits a line.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::communicator::Communicator;
use crate::cost::{LinearFit, fit_linear};
use crate::error::CommError;
use crate::topology::{LinkClass, LinkModel, LinkSpec};

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

/// Why the link fits of a `halo bench comm` report cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LinkFitError {
    #[error("cannot read it: {0}")]
    Read(#[from] std::io::Error),
    #[error("not a `halo bench comm` report: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("it has no link fits (they are measured with `halo bench comm --backend mpi --report FILE`)")]
    NoFits,
}

/// The part of a `halo bench comm` report read here.
#[derive(Deserialize)]
struct BenchReport {
    link_fits: Option<Vec<PairFit>>,
}

/// What a `halo bench comm --backend mpi --report` file tells the time model: every pair's fit,
/// each measured alone. A pair alone fills its link; the cost model shares the links among the
/// flows of a call (`cost.rs`), so nothing else of the report is fitted into it.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkReport {
    pub fits: Vec<PairFit>,
}

impl LinkReport {
    /// Parses the JSON text of a report.
    pub fn parse(text: &[u8]) -> Result<Self, LinkFitError> {
        let report: BenchReport = serde_json::from_slice(text)?;
        let fits = report.link_fits.filter(|fits| !fits.is_empty()).ok_or(LinkFitError::NoFits)?;
        Ok(Self { fits })
    }

    /// [`LinkReport::parse`] of a file.
    pub fn read(path: &std::path::Path) -> Result<Self, LinkFitError> {
        Self::parse(&std::fs::read(path)?)
    }

    /// The links a run's epoch is priced on: [`measured_links`] over `base`'s classes.
    pub fn links(&self, base: LinkModel) -> LinkModel {
        measured_links(base, &self.fits)
    }
}

/// Every pair's fit in the JSON text of a `halo bench comm --backend mpi --report` file.
pub fn parse_link_fits(text: &[u8]) -> Result<Vec<PairFit>, LinkFitError> {
    LinkReport::parse(text).map(|report| report.fits)
}

/// The link classes [`probe_links`] measured: per class, the median over its pairs of the
/// bandwidth (10^6 / theta bytes per second) and of the latency (half of gamma, which holds the
/// acknowledgement's trip back too). A class no pair measured keeps `base`'s link.
pub fn measured_links(base: LinkModel, fits: &[PairFit]) -> LinkModel {
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let class = |class: LinkClass, base: LinkSpec| {
        let of_class: Vec<&LinearFit> = fits.iter().filter(|f| f.link == class).map(|f| &f.fit).collect();
        let bandwidth =
            median(of_class.iter().filter(|f| f.theta_s_per_mb > 0.0).map(|f| 1e6 / f.theta_s_per_mb).collect());
        let latency = median(of_class.iter().map(|f| (f.gamma_s / 2.0).max(0.0)).collect());
        match (bandwidth, latency) {
            (Some(bandwidth_bytes_per_s), Some(latency_s)) => LinkSpec { bandwidth_bytes_per_s, latency_s },
            _ => base,
        }
    };
    LinkModel { intra: class(LinkClass::Intra, base.intra), inter: class(LinkClass::Inter, base.inter) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_links_take_each_classes_median_and_keep_unmeasured_classes() {
        let fit = |src, dst, link, theta_s_per_mb, gamma_s| PairFit {
            src,
            dst,
            link,
            fit: LinearFit { theta_s_per_mb, gamma_s, r_squared: 1.0 },
            samples: 4,
        };
        let fits = [
            fit(0, 1, LinkClass::Inter, 0.008, 2e-4),
            fit(1, 0, LinkClass::Inter, 0.010, 4e-4),
            fit(0, 2, LinkClass::Inter, 0.009, 0.0),
        ];
        let base = LinkModel::default();
        let links = measured_links(base, &fits);
        assert!((links.inter.bandwidth_bytes_per_s - 1e6 / 0.009).abs() < 1e-6, "{links:?}");
        assert!((links.inter.latency_s - 1e-4).abs() < 1e-12, "{links:?}");
        assert_eq!(links.intra, base.intra);
        let text = serde_json::json!({ "link_fits": fits }).to_string();
        assert_eq!(parse_link_fits(text.as_bytes()).unwrap(), fits);
        assert!(matches!(parse_link_fits(br#"{"link_fits": null}"#), Err(LinkFitError::NoFits)));
        assert!(matches!(parse_link_fits(b"[1,"), Err(LinkFitError::Parse(_))));
    }

    #[test]
    fn a_reports_links_are_its_pairs_fits_whatever_its_all_to_all_took() {
        let fit = |src, dst, link| PairFit {
            src,
            dst,
            link,
            fit: LinearFit { theta_s_per_mb: 0.008, gamma_s: 2e-4, r_squared: 1.0 },
            samples: 4,
        };
        let fits = vec![fit(0, 1, LinkClass::Inter), fit(1, 0, LinkClass::Inter)];
        let base = LinkModel::default();
        for all_to_all in
            [serde_json::json!({"measured": {"mean_s": 0.15}, "modeled_on_fits_s": 0.1}), serde_json::Value::Null]
        {
            let text = serde_json::json!({ "link_fits": fits, "all_to_all": all_to_all }).to_string();
            let links = LinkReport::parse(text.as_bytes()).unwrap().links(base);
            assert_eq!(links, measured_links(base, &fits));
            assert!((links.inter.bandwidth_bytes_per_s - 1e6 / 0.008).abs() < 1e-6, "{links:?}");
        }
    }
}
