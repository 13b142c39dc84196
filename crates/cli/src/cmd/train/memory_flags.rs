//! `--max-memory`: the ceiling the estimated peak is checked against before partitioning and
//! before training (`docs/RELIABILITY.md`, Memory).

use trainer::config::{TrainConfig, parse_size};

#[derive(Debug, clap::Args)]
pub struct MemoryFlags {
    /// Fail before partitioning or training when the estimated peak memory exceeds SIZE
    /// (bytes, or with K, M, G, T: powers of 1024, e.g. 8G, 512M) [default: the machine's
    /// available memory, MemAvailable].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u64>,
}

impl MemoryFlags {
    pub fn apply(&self, c: &mut TrainConfig) {
        if self.max_memory.is_some() {
            c.memory.max_memory = self.max_memory;
        }
    }
}
