//! Finding and preparing the dataset a run trains on.
//!
//! [`Source`] says where a run's dataset comes from (a directory to load, or one in memory); it
//! lives here, at the bottom of the trainer, because every runner takes it.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use graph_partition::dataset::{Dataset, DatasetError, LoadOptions};
use graph_partition::synth::{SynthConfig, SynthError};

use crate::config::TrainConfig;
use crate::features;

/// Where a run gets its dataset.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// Load (or generate) it as the configuration says, reading files with these options (their
    /// split is the configuration's); a bare dataset name is looked up under the directory.
    Load(&'a Path, &'a LoadOptions),
    /// Already in memory (normalised as the configuration says); distributed runs use
    /// in-process workers.
    Given(&'a Dataset),
}

impl<'a> Source<'a> {
    /// The dataset, loaded if need be; `progress` shows progress bars while large files load.
    pub(crate) fn dataset(self, config: &TrainConfig, progress: bool) -> Result<Cow<'a, Dataset>, DataError> {
        Ok(match self {
            Source::Load(root, load) => {
                let load = LoadOptions { progress, ..load.clone() };
                Cow::Owned(prepare_dataset(config, root, &load)?)
            }
            Source::Given(dataset) => Cow::Borrowed(dataset),
        })
    }
}

/// Why no dataset could be had. Messages quote the underlying error rather than chaining it
/// as a `source()`, so a printed chain shows each cause once.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// `--dataset` names neither a directory nor a dataset under `datasets/`.
    #[error(
        "dataset `{spec}` not found (tried {}); `cargo xtask download <ogb-name>` downloads OGB datasets into datasets/",
        .tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        /// The `--dataset` value.
        spec: String,
        /// Every path looked at.
        tried: Vec<PathBuf>,
    },
    /// The directory exists but does not hold a loadable dataset.
    #[error("cannot load dataset {}: {error}", .dir.display())]
    Load {
        /// The dataset directory.
        dir: PathBuf,
        /// What went wrong (it names the file at fault).
        error: DatasetError,
    },
    /// The built-in synthetic graph could not be generated.
    #[error("cannot generate the built-in synthetic dataset: {0}")]
    Synthetic(SynthError),
}

/// Turns a `--dataset` value into a directory: an existing directory as given, else a bare name
/// looked up under `datasets_root` (`datasets/` of the working directory for the CLI).
pub fn resolve_dataset_dir(spec: &str, datasets_root: &Path) -> Result<PathBuf, DataError> {
    let direct = PathBuf::from(spec);
    let mut tried = vec![direct.clone()];
    if direct.is_dir() {
        return Ok(direct);
    }
    let is_bare_name = direct.components().count() == 1 && !direct.is_absolute();
    if is_bare_name {
        let named = datasets_root.join(spec);
        if named.is_dir() {
            return Ok(named);
        }
        tried.push(named);
    }
    Err(DataError::NotFound { spec: spec.to_string(), tried })
}

/// Loads the configured dataset (or generates the built-in synthetic one) and applies the
/// feature normalisation. `load` says how: the cache mode and directory, whether non-finite
/// features are accepted, and whether progress bars show on stderr while large files load; the
/// split is `config.split` (whatever `load.split` holds).
pub fn prepare_dataset(config: &TrainConfig, datasets_root: &Path, load: &LoadOptions) -> Result<Dataset, DataError> {
    let mut dataset = match &config.dataset {
        Some(spec) => {
            let dir = resolve_dataset_dir(spec, datasets_root)?;
            let opts = LoadOptions { split: config.split.clone(), ..load.clone() };
            Dataset::load(&dir, &opts).map_err(|error| DataError::Load { dir, error })?
        }
        None => builtin_synthetic(config.seed)?,
    };
    features::normalize(&mut dataset.features, config.feature_norm);
    Ok(dataset)
}

/// The graph `halo train` uses without `--dataset`: small enough to train in seconds, large enough
/// that neighbours matter (features alone classify noisily).
pub fn builtin_synthetic(seed: u64) -> Result<Dataset, DataError> {
    let config =
        SynthConfig { nodes: 2000, avg_degree: 10.0, features: 64, classes: 8, seed, ..SynthConfig::default() };
    config.generate().map_err(DataError::Synthetic)
}

#[cfg(test)]
mod tests {
    use graph_partition::dataset::CacheMode;

    use super::*;

    #[test]
    fn resolves_existing_directory_then_name_under_root() {
        let root = tempfile::tempdir().unwrap();
        let named = root.path().join("toy");
        std::fs::create_dir(&named).unwrap();
        let direct = named.to_str().unwrap();
        assert_eq!(resolve_dataset_dir(direct, Path::new("/nonexistent")).unwrap(), named);
        assert_eq!(resolve_dataset_dir("toy", root.path()).unwrap(), named);
    }

    #[test]
    fn missing_dataset_lists_every_path_tried() {
        let root = tempfile::tempdir().unwrap();
        let msg = resolve_dataset_dir("nope", root.path()).unwrap_err().to_string();
        assert!(msg.contains("`nope`") && msg.contains(&root.path().join("nope").display().to_string()), "{msg}");
        assert!(msg.contains("cargo xtask download"), "{msg}");
        let msg = resolve_dataset_dir("/no/such/dir", root.path()).unwrap_err().to_string();
        assert!(msg.contains("/no/such/dir"), "{msg}");
    }

    #[test]
    fn a_directory_without_dataset_files_names_it() {
        let root = tempfile::tempdir().unwrap();
        let config = TrainConfig { dataset: Some(root.path().display().to_string()), ..TrainConfig::default() };
        let msg = prepare_dataset(&config, Path::new("datasets"), &LoadOptions::default()).unwrap_err().to_string();
        assert!(msg.contains(&root.path().display().to_string()), "{msg}");
    }

    #[test]
    fn load_options_reach_the_loader() {
        let dir = tempfile::tempdir().unwrap();
        let toy =
            graph_partition::SynthConfig { nodes: 50, avg_degree: 4.0, features: 3, classes: 2, ..Default::default() };
        let mut dataset = toy.generate().unwrap();
        dataset.features[[7, 1]] = f32::NAN;
        dataset.write_ogb(dir.path()).unwrap();
        let config = TrainConfig { dataset: Some(dir.path().display().to_string()), ..TrainConfig::default() };
        let strict = LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() };
        let msg = prepare_dataset(&config, Path::new("datasets"), &strict).unwrap_err().to_string();
        assert!(msg.contains("node-feat.csv.gz:8: column 2"), "{msg}");
        let lenient = LoadOptions { allow_nonfinite: true, ..strict };
        assert!(prepare_dataset(&config, Path::new("datasets"), &lenient).is_ok());
        assert!(!dir.path().join("processed").exists(), "CacheMode::Off writes no cache");
    }

    #[test]
    fn builtin_synthetic_is_seeded() {
        let a = builtin_synthetic(3).unwrap();
        assert_eq!(a.num_nodes(), 2000);
        assert_eq!(a, builtin_synthetic(3).unwrap());
        assert_ne!(a.features, builtin_synthetic(4).unwrap().features);
    }
}
