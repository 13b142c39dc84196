//! `--checkpoint-dir`, `--checkpoint-every`, `--checkpoint-keep`, `--resume`, `--comm-timeout`:
//! checkpoints, resumption and how long a worker waits for a silent peer
//! (`docs/RELIABILITY.md`).

use std::path::PathBuf;

use trainer::config::TrainConfig;

#[derive(Debug, clap::Args)]
pub struct ReliabilityFlags {
    /// Write a checkpoint (one shard per worker and a manifest, atomically) under DIR
    /// [default: none].
    #[arg(long, value_name = "DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// Checkpoint after every N epochs [default: 1].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    checkpoint_every: Option<usize>,
    /// Complete checkpoints kept; older ones are deleted [default: 2].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    checkpoint_keep: Option<usize>,
    /// Continue from the newest complete checkpoint under DIR (same configuration but
    /// `--epochs`, `--patience`, `--report`, `--threads`, `--backend`); `--epochs` is the total.
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Seconds a worker waits for a peer that neither sends nor fails before the run fails,
    /// naming the peer [default: 300].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    comm_timeout: Option<f64>,
}

impl ReliabilityFlags {
    pub fn apply(&self, c: &mut TrainConfig) {
        let r = &mut c.reliability;
        if self.checkpoint_dir.is_some() {
            r.checkpoint_dir.clone_from(&self.checkpoint_dir);
        }
        if self.resume.is_some() {
            r.resume.clone_from(&self.resume);
        }
        if let Some(n) = self.checkpoint_every {
            r.checkpoint_every = n;
        }
        if let Some(n) = self.checkpoint_keep {
            r.checkpoint_keep = n;
        }
        if let Some(s) = self.comm_timeout {
            r.comm_timeout = s;
        }
    }
}
