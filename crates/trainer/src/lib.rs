//! Training runs: the composition point that turns a method's parts (data plan, batch source,
//! exchange, gradient sync) into a training run over the layers below, and the JSON report.
//!
//! - [`config`]: every setting of `halo train`, TOML loading and validation, once, into a typed
//!   value.
//! - [`method`]: the parts every method is made of, and each method's folder.
//! - [`plan`]: one checked plan per run (the configuration, the method's parts, the runner, the
//!   backend), and the built-in methods' lookup.
//! - [`train_loop`]: the epoch loop shared by all methods, generic over a [`train_loop::Strategy`].
//! - [`single`]: the single-process strategy; [`distributed`]: the runner of every method
//!   that splits the graph across workers; [`minibatch`]: the runners of sampled mini-batches
//!   (one process, or data-parallel workers that each hold the whole graph).
//! - `harness` (internal): what every runner stands on, written once: the cluster of workers
//!   (backend, compute gate, starting them), each rank's dataset, clock and checkpoints, and the
//!   one place a report is put together.
//! - [`report`]: the report contract of `docs/ARCHITECTURE.md`.
//! - [`progress`]: the progress display of a run on stderr.
//! - [`data`], [`features`], [`memory`]: dataset lookup, feature preprocessing, peak memory;
//!   [`measure`]: how workers' compute is measured.
//!
//! [`run`] is the whole of `halo train` but the command line, for every method
//! (`examples/method.rs` runs single-process and vanilla training on Cora):
//! ```
//! use trainer::{LocalOptions, TrainConfig};
//!
//! // Vanilla training on the built-in synthetic graph with 2 in-process workers.
//! let mut config = TrainConfig::from_toml_str("method = \"vanilla\"\nepochs = 2\n", "example")?;
//! config.distributed.workers = 2;
//! let dataset = trainer::data::prepare_dataset(&config, std::path::Path::new("datasets"), &Default::default())?;
//! let report = trainer::run_on(&config, &dataset, LocalOptions::default(), &mut ())?;
//! assert_eq!((report.workers, report.epochs.len()), (2, 2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod checkpoint;
pub mod config;
pub mod data;
pub mod distributed;
pub mod error;
pub mod experiment;
pub mod export;
pub mod features;
pub mod guard;
mod harness;
pub mod measure;
pub mod memory;
pub mod method;
pub mod minibatch;
pub mod plan;
pub mod progress;
pub mod report;
mod run;
pub mod single;
pub mod train_loop;

pub use config::TrainConfig;
pub use data::Source;
pub use error::TrainError;
pub use harness::LocalOptions;
pub use report::Report;
pub use run::{run, run_method, run_on};
pub use train_loop::EpochObserver;
