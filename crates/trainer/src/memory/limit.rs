//! The memory ceiling (`--max-memory`, or the machine's available memory) and the check of an
//! estimate against it, made before partitioning and again before training.
//!
//! The ceiling is `--max-memory` when given, else the kernel's `MemAvailable`.

use serde::{Deserialize, Serialize};

use super::format_bytes;
use crate::config::MemoryConfig;
use crate::error::MemoryError;

/// A ceiling and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    pub bytes: u64,
    /// `--max-memory` or `MemAvailable`.
    pub source: &'static str,
}

impl Limit {
    /// `config`'s ceiling, else the machine's available memory now; `None` where the platform
    /// reports none (then nothing is checked).
    pub fn of(config: &MemoryConfig) -> Option<Self> {
        match config.max_memory {
            Some(bytes) => Some(Self { bytes, source: "--max-memory" }),
            None => mem_available().map(|bytes| Self { bytes, source: "MemAvailable" }),
        }
    }

    /// Fails when `estimate` exceeds the ceiling; the error shows `breakdown` and `suggestion`.
    pub fn check(
        &self,
        estimate: u64,
        when: &'static str,
        breakdown: &str,
        suggestion: &str,
    ) -> Result<(), Box<MemoryError>> {
        if estimate <= self.bytes {
            return Ok(());
        }
        Err(Box::new(MemoryError::OverLimit {
            estimate: format_bytes(estimate),
            limit: format_bytes(self.bytes),
            source_: self.source,
            when,
            breakdown: breakdown.to_string(),
            suggestion: suggestion.to_string(),
        }))
    }
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
fn mem_available() -> Option<u64> {
    super::proc_kb("/proc/meminfo", "MemAvailable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   12000000 kB\n";
        assert_eq!(crate::memory::parse_kb(text, "MemAvailable"), Some(12_000_000 * 1024));
        assert_eq!(crate::memory::parse_kb("MemTotal: 1 kB\n", "MemAvailable"), None);
    }

    #[test]
    fn over_limit_names_the_source_and_shows_the_breakdown() {
        let limit = Limit { bytes: 1 << 20, source: "--max-memory" };
        assert!(limit.check(1 << 20, "before training", "x", "y").is_ok());
        let msg = limit.check(3 << 20, "before training", "  features  2.00 MiB", "try less").unwrap_err().to_string();
        for part in ["3.00 MiB", "1.00 MiB", "--max-memory", "before training", "features", "try less"] {
            assert!(msg.contains(part), "{part} missing from {msg}");
        }
    }
}
