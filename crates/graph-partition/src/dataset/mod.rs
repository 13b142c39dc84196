//! Node-classification datasets: loading the OGB node-property raw layout (with a validated
//! binary cache), writing it back, and summary statistics.
//!
//! Layout of a dataset directory:
//! - `raw/edge.csv.gz`: `src,dst` per line. The loaded graph is always symmetrised, with
//!   duplicate edges and self loops removed.
//! - `raw/node-feat.csv.gz`: one comma-separated float row per node. When it is absent but
//!   `raw/edge-feat.csv.gz` exists (ogbn-proteins), a node's features are the mean of the
//!   feature rows of the edge lines it appears in (zeros for isolated nodes).
//! - `raw/node-label.csv.gz`: one class per line (`nan` = unlabelled), or several
//!   comma-separated 0/1 targets per line (`nan` = unknown) for multi-label tasks; other values
//!   in several columns are refused unless `meta.json` says the task is multi-label.
//! - `raw/num-node-list.csv.gz` (required) and `raw/num-edge-list.csv.gz` (checked if present).
//! - `split/<name>/{train,valid,test}.csv.gz`: node ids, one per line (files may be empty).
//!   Every node of a split has a label, and lies in one of the three parts only.
//! - `meta.json` (optional): `name`, `num_classes` (may exceed the largest label), `task`
//!   (containing "multi-label" forces multi-label parsing), plus descriptive fields.
//! - `processed/halo-cache-v2.bin`: written by Halo after a CSV load, keyed by a hash of the
//!   raw files' contents (see `dataset::cache`); [`LoadOptions::cache_dir`] moves it elsewhere.

mod arrays;
mod cache;
mod error;
mod import;
mod layout;
mod lines;
mod meta;
pub mod npy;
mod numbers;
mod ogb;
mod summary;
#[cfg(test)]
mod tests;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndarray::Array2;

use crate::csr::Csr;

pub use arrays::{ArrayError, Arrays, LabelArray, SplitArray};
pub use error::{DatasetError, NpyError, ParseErrorKind};
pub use import::{ImportFormat, ImportOptions, ImportReport, SplitOrigin, import};
pub use summary::{DatasetSummary, DegreeStats};

/// A graph with node features, labels and one train/valid/test split.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub name: String,
    /// Symmetric adjacency without self loops for loaded datasets (see the module docs).
    /// Shared, so that a single-process `AggGraph` reads it instead of holding a copy.
    pub graph: Arc<Csr>,
    /// One row per node.
    pub features: Array2<f32>,
    pub labels: Labels,
    pub splits: Splits,
    /// Classes of a single-label task, label columns of a multi-label one.
    pub num_classes: usize,
}

/// Node labels.
#[derive(Debug, Clone, PartialEq)]
pub enum Labels {
    /// One class per node; `u32::MAX` marks an unlabelled node.
    Classes(Vec<u32>),
    /// One row of targets per node (usually 0/1; NaN = unknown).
    MultiLabel(Array2<f32>),
}

impl Labels {
    /// Marker for an unlabelled node in [`Labels::Classes`].
    pub const UNLABELLED: u32 = u32::MAX;

    /// Number of nodes the labels cover.
    pub fn len(&self) -> usize {
        match self {
            Self::Classes(c) => c.len(),
            Self::MultiLabel(m) => m.nrows(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_multi_label(&self) -> bool {
        matches!(self, Self::MultiLabel(_))
    }

    /// Whether `node` has a label: a class, or at least one known (non-NaN) target.
    pub fn has_label(&self, node: usize) -> bool {
        match self {
            Self::Classes(c) => c[node] != Self::UNLABELLED,
            Self::MultiLabel(m) => m.row(node).iter().any(|t| !t.is_nan()),
        }
    }
}

impl Labels {
    /// The labels of `rows` (node ids), in that order.
    pub fn select(&self, rows: &[usize]) -> Labels {
        match self {
            Labels::Classes(c) => Labels::Classes(rows.iter().map(|&g| c[g]).collect()),
            Labels::MultiLabel(t) => Labels::MultiLabel(t.select(ndarray::Axis(0), rows)),
        }
    }
}

/// A dataset without its node features, what partitioning holds ([`Dataset::load_structure`]):
/// the features are read afterwards in one streaming pass ([`Structure::stream_features`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Structure {
    pub name: String,
    /// As [`Dataset::graph`].
    pub graph: Csr,
    pub labels: Labels,
    pub splits: Splits,
    pub num_classes: usize,
    /// Width of a feature row.
    pub num_features: usize,
    dir: PathBuf,
    opts: LoadOptions,
}

impl Structure {
    /// Parses the node feature file block by block (always the raw file; the cache is neither
    /// read nor written), handing `sink` the first node id of each block and its rows
    /// (row-major, [`Structure::num_features`] values a row), holding a few blocks at most.
    /// Fails unless the file has one row per node of the width read with the structure.
    pub fn stream_features(
        &self,
        sink: impl FnMut(usize, &[f32]) -> Result<(), DatasetError>,
    ) -> Result<(), DatasetError> {
        self.feature_file().stream(sink)
    }

    /// The node feature file, to be streamed without this structure (its graph dropped).
    pub fn feature_file(&self) -> FeatureFile {
        FeatureFile {
            dir: self.dir.clone(),
            opts: self.opts.clone(),
            num_nodes: self.graph.num_nodes(),
            num_features: self.num_features,
        }
    }
}

/// A dataset's node feature file as [`Structure::feature_file`] found it: what
/// [`Structure::stream_features`] reads, without the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureFile {
    dir: PathBuf,
    opts: LoadOptions,
    num_nodes: usize,
    num_features: usize,
}

impl FeatureFile {
    /// As [`Structure::stream_features`].
    pub fn stream(&self, sink: impl FnMut(usize, &[f32]) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
        ogb::stream_features(&self.dir, &self.opts, self.num_nodes, self.num_features, sink)
    }
}

/// Node ids of a named train/valid/test split.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Splits {
    pub name: String,
    pub train: Vec<u32>,
    pub valid: Vec<u32>,
    pub test: Vec<u32>,
}

/// How [`Dataset::load`] reads a directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// The split directory under `split/`; `None` picks the only one present.
    pub split: Option<String>,
    /// Whether the binary cache is read and written.
    pub cache: CacheMode,
    /// Where the cache goes: `None` puts it in the dataset's own `processed/`; a directory
    /// (created if needed) holds one cache file per dataset directory, for dataset directories
    /// that are read-only or shared. See [`Dataset::cache_path`].
    pub cache_dir: Option<PathBuf>,
    /// Accept NaN and infinite input features (including decimals beyond the `f32` range).
    /// Without it the first one is an error naming its file, line and column.
    pub allow_nonfinite: bool,
    /// Show progress bars on stderr for large files.
    pub progress: bool,
}

/// What [`Dataset::load`] does with the binary cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// Read the cache when it was built from raw files with the current contents; otherwise
    /// parse them and write a fresh cache.
    #[default]
    Use,
    /// Parse the raw files and rewrite the cache, whatever it holds.
    Refresh,
    /// Neither read nor write the cache.
    Off,
}

/// Where [`Dataset::load_with_source`] found the graph, features and labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadSource {
    Csv,
    Cache,
}

/// Everything but the split: what the binary cache holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GraphData {
    pub name: String,
    pub graph: Csr,
    pub features: Array2<f32>,
    pub labels: Labels,
    pub num_classes: usize,
}

impl Dataset {
    /// Loads a dataset directory in the OGB raw layout (see the module docs), from the binary
    /// cache when it is valid and `opts.cache` allows it.
    pub fn load(dir: &Path, opts: &LoadOptions) -> Result<Self, DatasetError> {
        Self::load_with_source(dir, opts).map(|(dataset, _)| dataset)
    }

    /// [`Dataset::load`], also telling whether the CSV files or the cache were read.
    pub fn load_with_source(dir: &Path, opts: &LoadOptions) -> Result<(Self, LoadSource), DatasetError> {
        if !dir.is_dir() {
            return Err(DatasetError::NoDataset { path: dir.to_path_buf() });
        }
        let split = layout::choose_split(dir, opts.split.as_deref())?;
        let (data, source) = match opts.cache {
            CacheMode::Off => (ogb::read_graph_data(dir, opts)?, LoadSource::Csv),
            CacheMode::Use | CacheMode::Refresh => cache::load_or_build(dir, opts, || ogb::read_graph_data(dir, opts))?,
        };
        let splits = ogb::read_split(dir, &split, data.graph.num_nodes(), opts.progress)?;
        ogb::check_split(dir, &splits, &data.labels)?;
        let GraphData { name, graph, features, labels, num_classes } = data;
        Ok((Self { name, graph: Arc::new(graph), features, labels, splits, num_classes }, source))
    }

    /// Loads everything of dataset directory `dir` but its node features, always from the raw
    /// files (the cache holds the features too): the graph, labels and split `opts.split`.
    pub fn load_structure(dir: &Path, opts: &LoadOptions) -> Result<Structure, DatasetError> {
        if !dir.is_dir() {
            return Err(DatasetError::NoDataset { path: dir.to_path_buf() });
        }
        let split = layout::choose_split(dir, opts.split.as_deref())?;
        ogb::read_structure(dir, &split, opts)
    }

    /// This dataset, loaded from directory `dir` with `opts`, without its features (dropped
    /// here; [`Structure::stream_features`] reads them from `dir` again).
    pub fn into_structure(self, dir: &Path, opts: &LoadOptions) -> Structure {
        let num_features = self.num_features();
        Structure {
            name: self.name,
            graph: Arc::unwrap_or_clone(self.graph),
            labels: self.labels,
            splits: self.splits,
            num_classes: self.num_classes,
            num_features,
            dir: dir.to_path_buf(),
            opts: opts.clone(),
        }
    }

    /// The file the binary cache of dataset directory `dir` lives in: `dir/processed/...`, or
    /// with a `cache_dir` a file there named after `dir` (its name and a hash of its canonical
    /// path, so datasets sharing a cache directory do not collide).
    pub fn cache_path(dir: &Path, cache_dir: Option<&Path>) -> PathBuf {
        cache::cache_path(dir, cache_dir)
    }

    /// A 64-bit fingerprint of the contents of the raw files the graph, features and labels
    /// come from (the cache's key; the split files are not included).
    pub fn source_fingerprint(dir: &Path) -> Result<u64, DatasetError> {
        Ok(cache::fingerprint(&layout::source_stamps(dir)?))
    }

    /// Writes the dataset in the OGB raw layout under `dir` (created if needed), with the
    /// split under `split/<splits.name>` and a `meta.json`. Files are gzip members compressed
    /// in parallel. Symmetric graphs store each undirected edge once (`u < v`). A dataset
    /// already there is replaced: its files are overwritten, its other splits and its default
    /// cache removed.
    pub fn write_ogb(&self, dir: &Path) -> Result<(), DatasetError> {
        self.validate()?;
        writer::write_ogb(self, dir)
    }

    pub fn num_nodes(&self) -> usize {
        self.graph.num_nodes()
    }

    pub fn num_features(&self) -> usize {
        self.features.ncols()
    }

    /// Sizes, split and degree statistics.
    pub fn summary(&self) -> DatasetSummary {
        DatasetSummary::of(self)
    }

    /// Checks that every part agrees with the graph: one feature and label row per node,
    /// class ids below `num_classes`, split ids in range, a split name usable as a directory.
    pub fn validate(&self) -> Result<(), DatasetError> {
        let n = self.num_nodes();
        let fail = |message: String| Err(DatasetError::Inconsistent { name: self.name.clone(), message });
        if self.graph.num_cols() != n {
            return fail(format!("adjacency is {} x {}, not square", n, self.graph.num_cols()));
        }
        if self.features.nrows() != n {
            return fail(format!("{} feature rows for {n} nodes", self.features.nrows()));
        }
        if self.labels.len() != n {
            return fail(format!("{} label rows for {n} nodes", self.labels.len()));
        }
        match &self.labels {
            Labels::Classes(classes) => {
                if let Some(&c) = classes.iter().find(|&&c| c != Labels::UNLABELLED && c as usize >= self.num_classes) {
                    return fail(format!("class {c} is not below num_classes = {}", self.num_classes));
                }
            }
            Labels::MultiLabel(targets) if targets.ncols() != self.num_classes => {
                return fail(format!("{} label columns but num_classes = {}", targets.ncols(), self.num_classes));
            }
            Labels::MultiLabel(_) => {}
        }
        let split = &self.splits.name;
        if split.is_empty() || split == "." || split == ".." || split.contains(['/', '\\']) {
            return fail(format!("split name `{split}` is not a single directory name"));
        }
        let parts = [("train", &self.splits.train), ("valid", &self.splits.valid), ("test", &self.splits.test)];
        for (part, ids) in parts {
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= n) {
                return fail(format!("{part} split holds node {id} but there are {n} nodes"));
            }
        }
        Ok(())
    }
}
