//! Reliability settings (`[reliability]` in the TOML config; `--checkpoint-dir`,
//! `--checkpoint-every`, `--checkpoint-keep`, `--resume` and `--peer-timeout` on the command
//! line). See `docs/RELIABILITY.md`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Checkpoints, resumption and how long a worker waits for a silent peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct ReliabilityConfig {
    /// Write a checkpoint (one shard per worker and a manifest, atomically) under DIR
    /// [default: none].
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub checkpoint_dir: Option<PathBuf>,
    /// Checkpoint after every N epochs.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub checkpoint_every: usize,
    /// Complete checkpoints kept; older ones are deleted once a newer one is committed.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub checkpoint_keep: usize,
    /// Continue from the newest complete checkpoint under DIR (same configuration but
    /// `epochs`, `patience`, `report`, `threads`, `backend`); `epochs` is the total.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub resume: Option<PathBuf>,
    /// Seconds a worker waits for a peer that moves nothing (no message arrives, no send
    /// completes) before the run fails, naming the peer and its host (`comm-timeout` is an alias).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SECONDS", alias = "comm-timeout"))]
    #[serde(alias = "comm-timeout")]
    pub peer_timeout: f64,
}

impl Default for ReliabilityConfig {
    fn default() -> Self {
        Self {
            checkpoint_dir: None,
            checkpoint_every: 1,
            checkpoint_keep: 2,
            resume: None,
            peer_timeout: comm_hierarchy::local::DEFAULT_TIMEOUT.as_secs_f64(),
        }
    }
}

impl ReliabilityConfig {
    /// Checks the ranges; the error names the key (= flag).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message| Err(ConfigError::Invalid { key, message });
        if self.checkpoint_every == 0 {
            return invalid("checkpoint-every", "must be at least 1, got 0".to_string());
        }
        if self.checkpoint_keep == 0 {
            return invalid("checkpoint-keep", "must be at least 1, got 0".to_string());
        }
        if !(self.peer_timeout.is_finite() && self.peer_timeout > 0.0 && self.peer_timeout < 1e9) {
            return invalid("peer-timeout", format!("must be a number of seconds above 0, got {}", self.peer_timeout));
        }
        Ok(())
    }

    /// [`ReliabilityConfig::peer_timeout`] as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.peer_timeout)
    }

    /// Whether the run writes or reads checkpoints.
    pub fn uses_checkpoints(&self) -> bool {
        self.checkpoint_dir.is_some() || self.resume.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::super::TrainConfig;

    #[test]
    fn keys_parse_and_ranges_name_the_key() {
        let text =
            "[reliability]\ncheckpoint-dir = \"ck\"\ncheckpoint-every = 5\nresume = \"ck\"\npeer-timeout = 2.5\n";
        let c = TrainConfig::from_toml_str(text, "run.toml").unwrap();
        assert_eq!(c.reliability.checkpoint_every, 5);
        assert_eq!(c.reliability.timeout(), std::time::Duration::from_millis(2500));
        assert!(c.reliability.uses_checkpoints());
        for (bad, key) in [("checkpoint-every = 0", "checkpoint-every"), ("peer-timeout = -1.0", "peer-timeout")] {
            let msg = TrainConfig::from_toml_str(&format!("[reliability]\n{bad}\n"), "run.toml").unwrap_err();
            assert!(msg.to_string().contains(&format!("key `{key}`")), "{msg}");
        }
    }
}
