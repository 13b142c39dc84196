//! Training strategies that compose the layers below (graphs, partitions, communication, codecs,
//! models) into training runs, and the JSON report of a run.
//!
//! - [`config`]: every setting of `halo train`, TOML loading and validation.
//! - [`train_loop`]: the epoch loop shared by all methods, generic over a [`train_loop::Strategy`].
//! - [`single`]: the single-process strategy.
//! - [`objective`]: loss and accuracy as sums and counts (they add up across workers).
//! - [`report`]: the report contract of DESIGN.md.
//! - [`data`], [`features`], [`memory`]: dataset lookup, feature preprocessing, peak memory.
//!
//! [`run`] is the whole of `halo train` but the command line: it loads the data, picks the
//! strategy for `config.method` and returns the report.

pub mod config;
pub mod data;
pub mod distributed;
pub mod error;
pub mod features;
pub mod memory;
pub mod objective;
pub mod report;
pub mod single;
pub mod train_loop;

use std::path::Path;

pub use config::TrainConfig;
pub use error::TrainError;
pub use report::Report;
pub use train_loop::EpochObserver;

/// Runs the training `config` describes; a bare `dataset` name is looked up under
/// `datasets_root`. `observer` sees every epoch as it finishes.
pub fn run(config: &TrainConfig, datasets_root: &Path, observer: &mut dyn EpochObserver) -> Result<Report, TrainError> {
    config.validate()?;
    match config.method {
        config::Method::Single => {
            let load = graph_partition::LoadOptions { progress: observer.shows_progress(), ..Default::default() };
            let dataset = data::prepare_dataset(config, datasets_root, &load)?;
            single::run(config, &dataset, observer)
        }
        config::Method::Vanilla => {
            distributed::run(config, datasets_root, observer)?.ok_or_else(|| distributed::DistError::NotRoot.into())
        }
    }
}
