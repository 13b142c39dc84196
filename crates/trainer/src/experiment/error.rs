//! Why an experiment could not run to the end.

use std::path::PathBuf;

use crate::TrainError;
use crate::config::ConfigError;

/// Why an experiment stopped. Runs that finished before it stopped keep their reports.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A variant's flags give an invalid configuration.
    #[error("variant `{variant}`")]
    Variant {
        /// The variant's name.
        variant: String,
        /// What is wrong with its configuration.
        #[source]
        source: ConfigError,
    },
    /// A variant sets the compute threads, which belong to the process, not to one run.
    #[error(
        "variant `{variant}` sets `threads`, but every run of an experiment shares one process and its thread \
         pool; set RAYON_NUM_THREADS for the whole experiment instead"
    )]
    Threads {
        /// The variant's name.
        variant: String,
    },
    /// An output directory or file could not be created or written.
    #[error("cannot write {path}")]
    Output {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A path the experiment writes a file to is a directory.
    #[error("{path} is a directory, but the experiment writes a file there")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A run failed; the grid stops there.
    #[error("run of variant `{variant}` with seed {seed} failed")]
    Run {
        /// The variant's name.
        variant: String,
        /// The run's seed.
        seed: u64,
        /// The trainer's error.
        #[source]
        source: Box<TrainError>,
    },
    /// The trainer returned no report: this process is an MPI rank other than the root.
    #[error(
        "run of variant `{variant}` with seed {seed} gave no report (an MPI rank other than 0); an experiment \
         runs every run inside its own process, so its variants need the local backend"
    )]
    NoReport {
        /// The variant's name.
        variant: String,
        /// The run's seed.
        seed: u64,
    },
    /// A report could not be turned into JSON.
    #[error("cannot serialise the report of variant `{variant}` with seed {seed}")]
    Serialise {
        /// The variant's name.
        variant: String,
        /// The run's seed.
        seed: u64,
        /// The serialiser's error.
        #[source]
        source: serde_json::Error,
    },
}
