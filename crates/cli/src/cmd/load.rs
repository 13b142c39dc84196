//! Dataset-loading flags shared by the subcommands that read a dataset directory, and the one
//! resolver of a `--dataset` value: a directory, else a name under [`DATASETS`].

use std::path::{Path, PathBuf};

use graph_partition::dataset::ParseErrorKind;
use graph_partition::{CacheMode, Dataset, DatasetError, LoadOptions, Structure};

/// Where a bare dataset name (`cora`) is looked up, relative to the working directory.
pub const DATASETS: &str = "datasets";

/// How a dataset directory is read: the binary cache and non-finite features.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Neither read nor write the dataset cache, the binary copy of the parsed dataset (by
    /// default DATASET/processed/).
    #[arg(long, conflicts_with_all = ["refresh_cache", "cache_dir"])]
    no_cache: bool,
    /// Parse the raw files and rewrite the dataset cache even when it is up to date.
    #[arg(long)]
    refresh_cache: bool,
    /// Keep the dataset cache in DIR (one file per dataset directory) instead of
    /// DATASET/processed/, for read-only or shared dataset directories.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Accept NaN and infinite feature values; by default the first one is an error naming its
    /// file, line and column.
    #[arg(long)]
    allow_nonfinite: bool,
}

impl LoadArgs {
    pub fn options(&self, split: Option<String>, progress: bool) -> LoadOptions {
        let cache = match (self.no_cache, self.refresh_cache) {
            (true, _) => CacheMode::Off,
            (false, true) => CacheMode::Refresh,
            (false, false) => CacheMode::Use,
        };
        LoadOptions { split, cache, cache_dir: self.cache_dir.clone(), allow_nonfinite: self.allow_nonfinite, progress }
    }

    /// Loads the dataset `spec` names (a directory, or a name under [`DATASETS`]); errors say
    /// which argument named it (`what`, e.g. `--dataset`) and, for a non-finite feature, how to
    /// accept it.
    pub fn load(&self, spec: &str, what: &str, split: Option<String>, progress: bool) -> anyhow::Result<Dataset> {
        let dir = resolve(spec)?;
        Dataset::load(&dir, &self.options(split, progress)).map_err(|err| {
            let hint = nonfinite_hint(&err);
            anyhow::Error::new(err).context(format!("cannot load {what} {}{hint}", dir.display()))
        })
    }

    /// Loads the directory `dir` without its node features ([`Dataset::load_structure`]; the
    /// cache is not used), with progress bars; errors as [`LoadArgs::load`]'s.
    pub fn load_structure(&self, dir: &Path, what: &str, split: Option<String>) -> anyhow::Result<Structure> {
        Dataset::load_structure(dir, &self.options(split, true)).map_err(|err| {
            let hint = nonfinite_hint(&err);
            anyhow::Error::new(err).context(format!("cannot load {what} {}{hint}", dir.display()))
        })
    }
}

/// The directory a dataset `spec` names: a directory, or a name under [`DATASETS`].
pub fn resolve(spec: &str) -> anyhow::Result<PathBuf> {
    Ok(trainer::data::resolve_dataset_dir(spec, Path::new(DATASETS))?)
}

/// How to accept the non-finite feature `err` names, if it names one.
pub fn nonfinite_hint(err: &DatasetError) -> &'static str {
    match err {
        DatasetError::Parse { kind: ParseErrorKind::NonFinite { .. }, .. } => {
            " (--allow-nonfinite accepts non-finite features)"
        }
        _ => "",
    }
}
