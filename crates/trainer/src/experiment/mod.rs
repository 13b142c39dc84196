//! Experiments: a grid of variants x seeds of `halo train`, run in process, summarised over seeds
//! and compared with a baseline variant (`halo experiment FILE.toml --out DIR`).
//!
//! # The experiment file
//!
//! ```toml
//! name = "smoke"                       # echoed in the results
//! seeds = [0, 1, 2]                    # every variant runs once per seed; distinct
//! base = ["--dataset", "cora", "--epochs", "10"]   # `halo train` flags of every variant (optional)
//! baseline = "vanilla"                 # the variant the others are compared with
//!
//! [[variant]]
//! name = "single"                      # [A-Za-z0-9._-], not starting with `.` or `-`; distinct
//!                                      # `flags` is optional: this variant runs `base` alone
//! [[variant]]
//! name = "vanilla"
//! flags = ["--method", "vanilla", "--workers", "2"]   # after `base`, so they override it
//! ```
//!
//! A variant's flags are parsed exactly as `halo train` parses them (`--config FILE.toml`
//! included), before any run starts. The runner sets `--seed` and `--report` itself, so the file
//! may not; the compute threads belong to the process, so no variant may set `threads`. Every
//! error names the file, the line and the key.
//!
//! # The output directory
//!
//! - `runs/<variant>-seed<k>.json`: each run's full report (the `halo train --report` contract).
//!   A rerun skips a run whose report is there, parses, and was made with the same settings.
//! - `results.json`: `{experiment, baseline, seeds, runs, variants}`.
//!   - `runs[]`: `{variant, seed, test_acc, best_val_acc, best_epoch, bytes_total, bytes_exchange,
//!     bytes_grad_sync, modeled_train_s, train_wall_s, report}`, read from the report's `final`
//!     (`test_acc` is `test_acc_at_best_val`); a field the report lacks is `null`.
//!   - `variants[]`: `{name, flags, runs, figures, test_acc_diff, ratios}`. `figures` maps each
//!     metric above to `{mean, stderr}` over the seeds (`null` unless every run has it; `stderr`
//!     is `null` for one seed). `test_acc_diff` is `{mean, stderr, by_seed: [{seed, diff}]}`, the
//!     test-accuracy difference from the baseline paired by seed. `ratios` maps `bytes_total`,
//!     `bytes_exchange`, `bytes_grad_sync` and `modeled_train_s` to the variant's mean over the
//!     baseline's (`null` when either is missing or the baseline's is 0).
//! - `results.csv`: the same as one table, described at [`Table::to_csv`].
//!
//! Parts: [`spec`] reads the file, [`stats`] holds the estimators, [`table`] builds the results,
//! and [`run`] drives the grid.

mod error;
mod grid;
pub mod spec;
pub mod stats;
pub mod table;

pub use error::ExperimentError;
pub use grid::{GridObserver, Outcome, Plan, RESULTS_CSV, RESULTS_JSON, RUNS_DIR, RunId, run};
pub use spec::{ExperimentSpec, Variant};
pub use table::{Metric, RunRow, Table};
