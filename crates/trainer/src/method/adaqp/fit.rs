//! Per-pair time models measured under MPI: the `link_fits` of a `halo bench comm --backend mpi
//! --report FILE` report (every ordered pair's ping-pong fitted to `t = theta * MB + gamma`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cache_quant::assign::TimeModel;
use comm_hierarchy::{LinkFitError, parse_link_fits};

/// Why a fit file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum FitError {
    #[error("adaqp time-fit {}: {source}", path.display())]
    File { path: PathBuf, source: LinkFitError },
    #[error("adaqp time-fit {}: no fit for the pair {src} -> {dst} (measured on another world size?)", path.display())]
    MissingPair { path: PathBuf, src: usize, dst: usize },
}

/// Measured time models by ordered pair.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct MeasuredFits {
    path: PathBuf,
    pairs: BTreeMap<(usize, usize), TimeModel>,
}

impl MeasuredFits {
    pub(super) fn load(path: &Path) -> Result<Self, FitError> {
        let text = std::fs::read(path)
            .map_err(|source| FitError::File { path: path.to_path_buf(), source: LinkFitError::Read(source) })?;
        Self::parse(path, &text)
    }

    pub(super) fn parse(path: &Path, text: &[u8]) -> Result<Self, FitError> {
        let fits = parse_link_fits(text).map_err(|source| FitError::File { path: path.to_path_buf(), source })?;
        let pairs = fits
            .into_iter()
            .map(|f| ((f.src, f.dst), TimeModel { theta_s_per_mb: f.fit.theta_s_per_mb, gamma_s: f.fit.gamma_s }))
            .collect();
        Ok(Self { path: path.to_path_buf(), pairs })
    }

    /// The measured model of `src -> dst`.
    pub(super) fn pair(&self, src: usize, dst: usize) -> Result<TimeModel, FitError> {
        self.pairs.get(&(src, dst)).copied().ok_or(FitError::MissingPair { path: self.path.clone(), src, dst })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_report_gives_every_pairs_fit_and_names_the_file_otherwise() {
        let text = br#"{"backend": "mpi", "link_fits": [
            {"src": 0, "dst": 1, "link": "intra", "fit": {"theta_s_per_mb": 0.5, "gamma_s": 1e-5, "r_squared": 0.99}, "samples": 21},
            {"src": 1, "dst": 0, "link": "intra", "fit": {"theta_s_per_mb": 0.25, "gamma_s": 2e-5, "r_squared": 0.98}, "samples": 21}
        ]}"#;
        let fits = MeasuredFits::parse(Path::new("b.json"), text).unwrap();
        assert_eq!(fits.pair(1, 0).unwrap(), TimeModel { theta_s_per_mb: 0.25, gamma_s: 2e-5 });
        let missing = fits.pair(0, 2).unwrap_err().to_string();
        assert!(missing.starts_with("adaqp time-fit b.json: no fit for the pair 0 -> 2"), "{missing}");
        let local = MeasuredFits::parse(Path::new("b.json"), br#"{"backend": "local", "link_fits": null}"#);
        assert!(matches!(local, Err(FitError::File { source: LinkFitError::NoFits, .. })));
        let broken = MeasuredFits::parse(Path::new("b.json"), b"{").unwrap_err().to_string();
        assert!(broken.starts_with("adaqp time-fit b.json: not a `halo bench comm` report"), "{broken}");
        let unread = MeasuredFits::load(Path::new("/nonexistent/b.json")).unwrap_err().to_string();
        assert!(unread.starts_with("adaqp time-fit /nonexistent/b.json: cannot read it"), "{unread}");
    }
}
