//! How a run with several workers measures each worker's compute, which the modeled epoch is
//! built on.
//!
//! In-process workers share the machine's cores. While there are at least as many cores as
//! workers, a worker's wall time outside communicator calls is its compute. With more workers
//! than cores, that wall time also counts the time a worker waited for a core, and every
//! modeled epoch grows with the number of workers. The run then serialises the workers' compute
//! (the harness's `ComputeGate`: one computes at a time, with the whole machine, as on
//! a cluster of one machine each) unless checkpoints are on (their agreement runs outside the
//! gate), in which case it keeps wall time and the report says so. Thread CPU time is no
//! remedy: the kernels hand their work to the shared compute pool, whose threads it does not
//! count. `--serialize-compute` asks for serialisation whatever the counts.

use crate::config::{Backend, TrainConfig};

/// The measure a run used, reported as `final.compute_measure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeMeasure {
    /// Wall time outside communicator calls: workers had a core each (or a process each).
    Wall,
    /// `--serialize-compute`: one worker computed at a time.
    Serialized,
    /// More in-process workers than cores: serialised without being asked.
    SerializedOversubscribed,
    /// More in-process workers than cores, but checkpoints rule out serialising: wall time, which
    /// counts the waits for a core (modeled epochs come out too long).
    WallOversubscribed,
}

impl ComputeMeasure {
    /// The measure for `config` on `backend` with `cores` cores; `serialize` is
    /// `--serialize-compute` from either the configuration or the caller.
    pub fn choose(config: &TrainConfig, backend: Backend, cores: usize, serialize: bool) -> Self {
        let oversubscribed = backend == Backend::Local && config.distributed.workers > cores;
        match (serialize, oversubscribed, config.reliability.uses_checkpoints()) {
            (true, _, _) => ComputeMeasure::Serialized,
            (false, true, false) => ComputeMeasure::SerializedOversubscribed,
            (false, true, true) => ComputeMeasure::WallOversubscribed,
            (false, false, _) => ComputeMeasure::Wall,
        }
    }

    /// Whether the workers' compute runs one at a time.
    pub fn serializes(self) -> bool {
        matches!(self, ComputeMeasure::Serialized | ComputeMeasure::SerializedOversubscribed)
    }

    /// The report's name of the measure.
    pub fn as_str(self) -> &'static str {
        match self {
            ComputeMeasure::Wall => "wall",
            ComputeMeasure::Serialized => "serialized",
            ComputeMeasure::SerializedOversubscribed => "serialized (more workers than cores)",
            ComputeMeasure::WallOversubscribed => "wall (more workers than cores; checkpoints rule out serializing)",
        }
    }
}

/// The cores this process may run on (1 where the platform does not say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_in_process_workers_than_cores_serialize_unless_checkpoints_are_on() {
        let mut config = TrainConfig::default();
        config.distributed.workers = 8;
        let choose = |c: &TrainConfig, backend, serialize| ComputeMeasure::choose(c, backend, 2, serialize);
        assert_eq!(choose(&config, Backend::Local, false), ComputeMeasure::SerializedOversubscribed);
        assert_eq!(choose(&config, Backend::Local, true), ComputeMeasure::Serialized);
        assert_eq!(choose(&config, Backend::Mpi, false), ComputeMeasure::Wall, "a process per worker");
        config.reliability.checkpoint_dir = Some("ck".into());
        assert_eq!(choose(&config, Backend::Local, false), ComputeMeasure::WallOversubscribed);
        assert!(!ComputeMeasure::WallOversubscribed.serializes());
        config.distributed.workers = 2;
        assert_eq!(choose(&config, Backend::Local, false), ComputeMeasure::Wall);
    }
}
