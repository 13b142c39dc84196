//! Importing the layouts users bring into Halo's own (the OGB raw layout of [`super`]).
//!
//! - **npz**: one `.npz` with `edge_index` (2, E), `x` (N, F), `y` (N,) and optionally the bool
//!   masks `train_mask`, `val_mask` (or `valid_mask`) and `test_mask`, as PyG and DGL users
//!   export them.
//! - **ogb-bin**: OGB's binary folder: `raw/data.npz` (`edge_index`, `node_feat`,
//!   `num_nodes_list`), `raw/node-label.npz` (`node_label`), `split/<name>/{train,valid,test}.csv.gz`.
//! - **edge-list**: a text file of `src dst` lines (comma, tab or spaces; gzip when the name ends
//!   in `.gz`; an optional header line) with features and labels from `.npy` or CSV files.
//!
//! Edges are made undirected, with duplicates and self loops dropped and counted, as the loader
//! does. Features stream from the array to the output in row chunks, so the import holds the
//! graph's structure but never the whole feature matrix. The output is written into a temporary
//! folder beside the target and renamed into place at the end: a failed or interrupted import
//! leaves no dataset behind.

use std::io::Read;
use std::path::{Path, PathBuf};

use ndarray::ArrayView2;

use super::error::{DatasetError, NpyError, ParseErrorKind};
use super::lines::{first_line, line_at, read_all, read_all_after};
use super::npy::{NpyReader, Npz, open_npy, shape_text};
use super::numbers::{parse_class, parse_f32, parse_u64};
use super::ogb::{Classes, Edges, FloatRows, NodeIds, column_count};
use super::writer::{GzLines, Parts, prepare, write_parts};
use super::{Labels, Splits, layout, summary};
use crate::csr::{Csr, EdgeListOptions};
use crate::fs::sync_dir;

/// Values converted per chunk while streaming features (16 MiB of `f32`).
const FEATURE_CHUNK_VALUES: usize = 1 << 22;
/// Elements read per call for ids, labels and masks.
const CHUNK: usize = 1 << 16;

/// The input layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    Npz,
    OgbBin,
    EdgeList,
}

impl ImportFormat {
    /// Tells the layout from the path: a `.npz` file, a folder with `raw/data.npz`, or any
    /// other file (an edge list).
    pub fn detect(path: &Path) -> Result<Self, DatasetError> {
        if path.is_dir() {
            if path.join(OGB_DATA).is_file() {
                return Ok(Self::OgbBin);
            }
            let message = format!("a folder without {OGB_DATA}; say the layout with --format");
            return Err(DatasetError::Import { path: path.to_path_buf(), message });
        }
        if !path.exists() {
            return Err(DatasetError::MissingFile { path: path.to_path_buf(), what: "input".into() });
        }
        Ok(if path.extension().is_some_and(|x| x == "npz") { Self::Npz } else { Self::EdgeList })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Npz => "npz",
            Self::OgbBin => "ogb-bin",
            Self::EdgeList => "edge-list",
        }
    }
}

const OGB_DATA: &str = "raw/data.npz";
const OGB_LABELS: &str = "raw/node-label.npz";

/// How [`import`] reads its input.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOptions {
    /// The layout; `None` tells it from the path.
    pub format: Option<ImportFormat>,
    /// Edge list only: a `.npy` (N, F) or CSV file of feature rows.
    pub features: Option<PathBuf>,
    /// Edge list only: a `.npy` (N,) or CSV file of classes.
    pub labels: Option<PathBuf>,
    /// A folder of `{train,valid,test}.csv[.gz]` node-id files (OGB's split folder).
    pub split: Option<PathBuf>,
    /// An `.npz` with `train_mask`, `val_mask` and `test_mask`.
    pub masks: Option<PathBuf>,
    /// The dataset's name; default the output folder's.
    pub name: Option<String>,
    /// Classes; default the largest label plus one. A larger label is an error.
    pub num_classes: Option<usize>,
    /// Seed, train and valid fractions of the random split made when none is given.
    pub split_seed: u64,
    pub train_fraction: f64,
    pub valid_fraction: f64,
    /// Accept NaN and infinite features.
    pub allow_nonfinite: bool,
    pub progress: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            format: None,
            features: None,
            labels: None,
            split: None,
            masks: None,
            name: None,
            num_classes: None,
            split_seed: 0,
            train_fraction: 0.6,
            valid_fraction: 0.2,
            allow_nonfinite: false,
            progress: false,
        }
    }
}

/// Where the split came from.
#[derive(Debug, Clone, PartialEq)]
pub enum SplitOrigin {
    Files { dir: PathBuf },
    Masks { file: PathBuf },
    Random { seed: u64, train_fraction: f64, valid_fraction: f64 },
}

/// What an import read and what it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportReport {
    pub format: ImportFormat,
    pub nodes: usize,
    /// Edges as given, self loops and duplicates included.
    pub input_edges: u64,
    pub self_loops: u64,
    /// Repeats of an edge already given in the same direction.
    pub duplicate_edges: u64,
    /// Distinct edges given in one direction only (their reverse is added).
    pub one_way_edges: u64,
    pub undirected_edges: u64,
    pub features: usize,
    pub classes: usize,
    pub labelled: usize,
    pub split: SplitOrigin,
    pub train: usize,
    pub valid: usize,
    pub test: usize,
}

impl ImportReport {
    /// What the import changed or chose, one sentence each, for the user to read.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.one_way_edges > 0 {
            notes.push(format!(
                "edges are made undirected: {} of them were given one way only, and their reverse is added",
                self.one_way_edges
            ));
        } else {
            notes.push("edges are undirected: every edge is given both ways".into());
        }
        if self.self_loops > 0 {
            notes.push(format!("{} self loops are dropped", self.self_loops));
        }
        if self.duplicate_edges > 0 {
            notes.push(format!("{} duplicate edges are dropped", self.duplicate_edges));
        }
        if let SplitOrigin::Random { seed, train_fraction, valid_fraction } = self.split {
            notes.push(format!(
                "no split given: a random split of the {} labelled nodes with seed {seed} \
                 (train {train_fraction}, valid {valid_fraction}, test the rest)",
                self.labelled
            ));
        }
        if self.labelled < self.nodes {
            notes.push(format!("{} nodes are unlabelled", self.nodes - self.labelled));
        }
        notes
    }
}

/// Imports `input` into a new dataset folder `out` (see the module docs).
pub fn import(input: &Path, out: &Path, opts: &ImportOptions) -> Result<ImportReport, DatasetError> {
    let format = match opts.format {
        Some(format) => format,
        None => ImportFormat::detect(input)?,
    };
    let (train, valid) = (opts.train_fraction, opts.valid_fraction);
    if !(0.0..=1.0).contains(&train) || !(0.0..=1.0).contains(&valid) || train + valid > 1.0 {
        let message = format!("split fractions train {train} and valid {valid} must be in [0, 1] and sum to at most 1");
        return Err(DatasetError::Import { path: input.to_path_buf(), message });
    }
    let staging = Staging::begin(out)?;
    let name = opts
        .name
        .clone()
        .unwrap_or_else(|| out.file_name().map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned()));
    let job = Job { opts, dir: &staging.tmp, name, format };
    let report = match format {
        ImportFormat::Npz => job.npz(input),
        ImportFormat::OgbBin => job.ogb_bin(input),
        ImportFormat::EdgeList => job.edge_list(input),
    }?;
    staging.commit()?;
    Ok(report)
}

/// A temporary folder beside the target, removed unless renamed into place.
struct Staging {
    tmp: PathBuf,
    out: PathBuf,
    committed: bool,
}

impl Staging {
    fn begin(out: &Path) -> Result<Self, DatasetError> {
        let taken = match std::fs::read_dir(out) {
            Ok(mut entries) => entries.next().is_some(),
            Err(_) => out.exists(),
        };
        if taken {
            let message = "already exists; remove it or choose another --out".into();
            return Err(DatasetError::Import { path: out.to_path_buf(), message });
        }
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
        let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = parent.join(format!(".{name}.halo-import-{}", std::process::id()));
        // A leftover of an earlier process with the same id is stale.
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir(&tmp).map_err(|e| DatasetError::io(&tmp, e))?;
        Ok(Self { tmp, out: out.to_path_buf(), committed: false })
    }

    /// Makes every file durable, then renames the folder into place.
    fn commit(mut self) -> Result<(), DatasetError> {
        sync_tree(&self.tmp)?;
        std::fs::rename(&self.tmp, &self.out).map_err(|e| DatasetError::io(&self.out, e))?;
        self.committed = true;
        let parent = self.out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        sync_dir(parent).map_err(|e| DatasetError::io(parent, e.source))
    }
}

/// Syncs every file under `dir`, and the folders themselves, so that a crash after the rename
/// cannot leave a dataset with files that never reached the disk.
fn sync_tree(dir: &Path) -> Result<(), DatasetError> {
    for entry in std::fs::read_dir(dir).map_err(|e| DatasetError::io(dir, e))? {
        let path = entry.map_err(|e| DatasetError::io(dir, e))?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            std::fs::File::open(&path).and_then(|f| f.sync_all()).map_err(|e| DatasetError::io(&path, e))?;
        }
    }
    sync_dir(dir).map_err(|e| DatasetError::io(dir, e.source))
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Where a split comes from, decided before anything is read.
enum SplitPlan {
    Files(PathBuf),
    /// Masks in this `.npz`.
    Masks(PathBuf),
    Random,
}

impl SplitPlan {
    fn name(&self) -> String {
        match self {
            Self::Files(dir) => dir.file_name().map_or_else(|| "given".into(), |n| n.to_string_lossy().into_owned()),
            Self::Masks(_) => "masks".into(),
            Self::Random => "random".into(),
        }
    }
}

/// Mask keys, in train, valid, test order, with the alternatives each may go by.
const MASKS: [&[&str]; 3] = [&["train_mask"], &["val_mask", "valid_mask"], &["test_mask"]];

/// The graph with the counts the report states.
struct Graph {
    csr: Csr,
    input_edges: u64,
    self_loops: u64,
    duplicates: u64,
    one_way: u64,
    undirected: u64,
}

struct Job<'a> {
    opts: &'a ImportOptions,
    dir: &'a Path,
    name: String,
    format: ImportFormat,
}

impl Job<'_> {
    fn npz(&self, input: &Path) -> Result<ImportReport, DatasetError> {
        let mut npz = Npz::open(input)?;
        let has_masks = MASKS.iter().flat_map(|keys| keys.iter()).any(|key| npz.contains(key));
        let plan = self.plan(has_masks.then(|| input.to_path_buf()))?;
        let nodes = rows_of(&npz.array("x")?, input, Some("x"))?;
        let graph = build_graph(
            nodes,
            read_edge_index(&mut npz.array("edge_index")?, input, Some("edge_index"), nodes)?,
            input,
        )?;
        let mut features = self.feature_file(&plan)?;
        let cols =
            stream_features(&mut npz.array("x")?, input, Some("x"), nodes, self.opts.allow_nonfinite, &mut features)?;
        features.finish()?;
        let labels = classes_from_array(&mut npz.array("y")?, input, Some("y"), nodes, self.opts.num_classes)?;
        let labels_from = input.to_path_buf();
        self.finish(graph, cols, labels, plan, &labels_from)
    }

    fn ogb_bin(&self, input: &Path) -> Result<ImportReport, DatasetError> {
        let plan = match (&self.opts.split, &self.opts.masks) {
            (None, None) => match layout::available_splits(input)?.as_slice() {
                [] => SplitPlan::Random,
                [only] => SplitPlan::Files(input.join(layout::SPLIT_DIR).join(only)),
                several => {
                    let message = format!(
                        "several splits ({}); choose one with --split {}/NAME",
                        several.join(", "),
                        input.join(layout::SPLIT_DIR).display()
                    );
                    return Err(DatasetError::Import { path: input.to_path_buf(), message });
                }
            },
            _ => self.plan(None)?,
        };
        let data_path = input.join(OGB_DATA);
        let mut data = Npz::open(&data_path)?;
        let nodes = ogb_num_nodes(&mut data)?;
        let edges = read_edge_index(&mut data.array("edge_index")?, &data_path, Some("edge_index"), nodes)?;
        let graph = build_graph(nodes, edges, &data_path)?;
        let mut features = self.feature_file(&plan)?;
        let (allow, key) = (self.opts.allow_nonfinite, Some("node_feat"));
        let cols = stream_features(&mut data.array("node_feat")?, &data_path, key, nodes, allow, &mut features)?;
        features.finish()?;
        let label_path = input.join(OGB_LABELS);
        let mut label_npz = Npz::open(&label_path)?;
        let mut reader = label_npz.array("node_label")?;
        let labels = classes_from_array(&mut reader, &label_path, Some("node_label"), nodes, self.opts.num_classes)?;
        let labels_from = label_path.clone();
        self.finish(graph, cols, labels, plan, &labels_from)
    }

    fn edge_list(&self, input: &Path) -> Result<ImportReport, DatasetError> {
        let need = |flag: &str, value: &Option<PathBuf>| {
            value.clone().ok_or_else(|| DatasetError::Import {
                path: input.to_path_buf(),
                message: format!("an edge list needs {flag} FILE (.npy or CSV)"),
            })
        };
        let (feature_path, label_path) =
            (need("--features", &self.opts.features)?, need("--labels", &self.opts.labels)?);
        let labels_from = label_path.clone();
        let plan = self.plan(None)?;
        let allow = self.opts.allow_nonfinite;
        if is_npy(&feature_path) {
            let mut reader = open_npy(&feature_path)?;
            let nodes = rows_of(&reader, &feature_path, None)?;
            let graph = build_graph(nodes, read_edge_list(input, nodes, self.opts.progress)?, input)?;
            let mut features = self.feature_file(&plan)?;
            let cols = stream_features(&mut reader, &feature_path, None, nodes, allow, &mut features)?;
            features.finish()?;
            let labels = self.labels_file(&label_path, nodes)?;
            self.finish(graph, cols, labels, plan, &labels_from)
        } else {
            let header = first_field_fails(&feature_path, |t| parse_f32(t).is_some())?;
            let cols = match line_at(&feature_path, u64::from(header))? {
                Some(line) => column_count(&line),
                None => return Err(DatasetError::EmptyFile { path: feature_path }),
            };
            let parser = FloatRows { cols, finite: !allow };
            let (values, lines) = read_all_after(&feature_path, header, self.opts.progress, 0, &parser)?;
            let nodes = (lines - u64::from(header)) as usize;
            let graph = build_graph(nodes, read_edge_list(input, nodes, self.opts.progress)?, input)?;
            let mut features = self.feature_file(&plan)?;
            let rows = ArrayView2::from_shape((nodes, cols), &values).expect("every row has `cols` values");
            features.write_rows(rows)?;
            features.finish()?;
            drop(values);
            let labels = self.labels_file(&label_path, nodes)?;
            self.finish(graph, cols, labels, plan, &labels_from)
        }
    }

    /// The split the options ask for; `masks_in` is the input itself when it holds masks.
    fn plan(&self, masks_in: Option<PathBuf>) -> Result<SplitPlan, DatasetError> {
        match (&self.opts.split, &self.opts.masks) {
            (Some(_), Some(masks)) => Err(DatasetError::Import {
                path: masks.clone(),
                message: "give either --split or --masks, not both".into(),
            }),
            (Some(dir), None) if !dir.is_dir() => {
                Err(DatasetError::MissingFile { path: dir.clone(), what: "split folder".into() })
            }
            (Some(dir), None) => Ok(SplitPlan::Files(dir.clone())),
            (None, Some(masks)) => Ok(SplitPlan::Masks(masks.clone())),
            (None, None) => Ok(masks_in.map_or(SplitPlan::Random, SplitPlan::Masks)),
        }
    }

    /// Prepares the output folder and opens its feature file.
    fn feature_file(&self, plan: &SplitPlan) -> Result<GzLines, DatasetError> {
        prepare(self.dir, &plan.name())?;
        GzLines::create(&self.dir.join(layout::NODE_FEAT))
    }

    /// Classes from a `.npy` or a CSV file of one class per line (`nan` for unlabelled).
    fn labels_file(&self, path: &Path, nodes: usize) -> Result<Vec<u32>, DatasetError> {
        if is_npy(path) {
            return classes_from_array(&mut open_npy(path)?, path, None, nodes, self.opts.num_classes);
        }
        let header = first_field_fails(path, |t| parse_class(t).is_some())?;
        let (classes, lines) = read_all_after(path, header, self.opts.progress, nodes, &Classes)?;
        let found = lines - u64::from(header);
        if found != nodes as u64 {
            let why = "one per feature row".into();
            return Err(DatasetError::CountMismatch {
                path: path.into(),
                unit: "labels",
                found,
                expected: nodes as u64,
                why,
            });
        }
        if let Some((at, kind)) = class_out_of_range(&classes, self.opts.num_classes) {
            return Err(DatasetError::Parse { path: path.into(), line: at as u64 + 1 + u64::from(header), kind });
        }
        Ok(classes)
    }

    fn finish(
        &self,
        graph: Graph,
        cols: usize,
        classes: Vec<u32>,
        plan: SplitPlan,
        labels_from: &Path,
    ) -> Result<ImportReport, DatasetError> {
        let nodes = graph.csr.num_nodes();
        let num_classes = self.opts.num_classes.unwrap_or_else(|| {
            classes.iter().filter(|&&c| c != Labels::UNLABELLED).max().map_or(0, |&m| m as usize + 1)
        });
        let labelled: Vec<u32> = (0..nodes as u32).filter(|&v| classes[v as usize] != Labels::UNLABELLED).collect();
        let name = plan.name();
        let (splits, origin) = match plan {
            SplitPlan::Files(dir) => (split_files(&dir, &name, nodes, self.opts.progress)?, SplitOrigin::Files { dir }),
            SplitPlan::Masks(file) => (split_masks(&file, nodes)?, SplitOrigin::Masks { file }),
            SplitPlan::Random => {
                let (seed, train_fraction, valid_fraction) =
                    (self.opts.split_seed, self.opts.train_fraction, self.opts.valid_fraction);
                let (train, valid, test) = crate::synth::random_split(&labelled, train_fraction, valid_fraction, seed);
                let splits = Splits { name, train, valid, test };
                (splits, SplitOrigin::Random { seed, train_fraction, valid_fraction })
            }
        };
        let labels = Labels::Classes(classes);
        // The loader's checks, so that what is imported loads: each split node labelled, and
        // in one part only.
        if let Some((part, _, kind)) = super::ogb::split_fault(&splits, &labels, &labels_from.display().to_string()) {
            let path = match &origin {
                SplitOrigin::Files { dir } => dir.clone(),
                SplitOrigin::Masks { file } => file.clone(),
                SplitOrigin::Random { .. } => labels_from.to_path_buf(),
            };
            return Err(DatasetError::Import { path, message: format!("{part} split: {kind}") });
        }
        let source = format!("imported by Halo ({})", self.format.name());
        let parts = Parts {
            name: &self.name,
            graph: &graph.csr,
            labels: &labels,
            num_classes,
            splits: &splits,
            num_features: cols,
            source,
        };
        write_parts(self.dir, &parts)?;
        Ok(ImportReport {
            format: self.format,
            nodes,
            input_edges: graph.input_edges,
            self_loops: graph.self_loops,
            duplicate_edges: graph.duplicates,
            one_way_edges: graph.one_way,
            undirected_edges: graph.undirected,
            features: cols,
            classes: num_classes,
            labelled: labelled.len(),
            split: origin,
            train: splits.train.len(),
            valid: splits.valid.len(),
            test: splits.test.len(),
        })
    }
}

fn is_npy(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "npy")
}

/// Whether the first line of a text file is a header: its first field is not a value `ok`
/// accepts.
fn first_field_fails(path: &Path, ok: impl Fn(&str) -> bool) -> Result<bool, DatasetError> {
    Ok(first_line(path)?.is_some_and(|line| {
        let field = line.split([',', '\t']).next().unwrap_or_default();
        let field = field.split_ascii_whitespace().next().unwrap_or_default();
        !ok(field)
    }))
}

fn npy_error<'a>(path: &'a Path, key: Option<&str>) -> impl Fn(NpyError) -> DatasetError + 'a {
    let key = key.map(str::to_string);
    move |error| DatasetError::Npy { path: path.to_path_buf(), array: key.clone(), error: Box::new(error) }
}

/// `[i, j]` of flat index `k` in an array of `shape`.
fn index_text(shape: &[u64], k: u64) -> String {
    let mut index = vec![0u64; shape.len()];
    let mut rest = k;
    for (slot, &dim) in index.iter_mut().zip(shape).rev() {
        *slot = rest % dim.max(1);
        rest /= dim.max(1);
    }
    format!("[{}]", index.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
}

fn element_error(path: &Path, key: Option<&str>, shape: &[u64], k: u64, kind: ParseErrorKind) -> DatasetError {
    let index = index_text(shape, k);
    let place = key.map_or_else(|| format!("at {index}"), |key| format!("array `{key}` at {index}"));
    DatasetError::Element { path: path.to_path_buf(), place, kind }
}

/// The rows of a 2-D feature array: the node count.
fn rows_of<R: Read>(r: &NpyReader<R>, path: &Path, key: Option<&str>) -> Result<usize, DatasetError> {
    match r.shape() {
        &[rows, cols] if cols > 0 && rows > 0 && rows < u32::MAX as u64 => Ok(rows as usize),
        shape => Err(npy_error(path, key)(NpyError::Shape {
            found: shape_text(shape),
            expected: "(N, F): one row of F > 0 features per node, 0 < N < 2^32 - 1".into(),
        })),
    }
}

/// The node count of OGB's `data.npz`: `num_nodes_list` (one graph) or `num_nodes`.
fn ogb_num_nodes(data: &mut Npz) -> Result<usize, DatasetError> {
    let key = if data.contains("num_nodes_list") { "num_nodes_list" } else { "num_nodes" };
    let path = data.path().to_path_buf();
    let counts = data.array(key)?.read_all_i64().map_err(npy_error(&path, Some(key)))?;
    match counts.as_slice() {
        &[n] if n > 0 && n < u32::MAX as i64 => Ok(n as usize),
        other => Err(DatasetError::Npy {
            path,
            array: Some(key.into()),
            error: Box::new(NpyError::Shape {
                found: format!("{other:?}"),
                expected: "one node count between 1 and 2^32 - 2 (a single graph)".into(),
            }),
        }),
    }
}

/// `edge_index` of shape (2, E) (sources, then targets) or (E, 2), every id below `nodes`.
fn read_edge_index<R: Read>(
    r: &mut NpyReader<R>,
    path: &Path,
    key: Option<&str>,
    nodes: usize,
) -> Result<Vec<(u32, u32)>, DatasetError> {
    let shape = r.shape().to_vec();
    let (edges, pairs) = match shape[..] {
        [2, e] => (e, false),
        [e, 2] => (e, true),
        _ => {
            let expected = "(2, E): a row of sources and a row of targets".into();
            return Err(npy_error(path, key)(NpyError::Shape { found: shape_text(&shape), expected }));
        }
    };
    let mut out: Vec<(u32, u32)> = Vec::new();
    out.try_reserve_exact(edges as usize).map_err(|_| DatasetError::Import {
        path: path.to_path_buf(),
        message: format!("no memory for {edges} edges"),
    })?;
    let mut buf = Vec::with_capacity(CHUNK);
    loop {
        buf.clear();
        let start = r.position();
        if r.read_i64(CHUNK, &mut buf).map_err(npy_error(path, key))? == 0 {
            break;
        }
        for (i, &id) in buf.iter().enumerate() {
            let k = start + i as u64;
            if id < 0 || id as u64 >= nodes as u64 {
                let kind = if id < 0 {
                    ParseErrorKind::malformed(&id.to_string(), "node id")
                } else {
                    ParseErrorKind::NodeOutOfRange { id: id as u64, num_nodes: nodes }
                };
                return Err(element_error(path, key, &shape, k, kind));
            }
            let id = id as u32;
            match (pairs, k < edges) {
                (false, true) => out.push((id, 0)),
                (false, false) => out[(k - edges) as usize].1 = id,
                (true, _) if k.is_multiple_of(2) => out.push((id, 0)),
                (true, _) => out[(k / 2) as usize].1 = id,
            }
        }
    }
    Ok(out)
}

/// `src dst` lines of a text file; a first line that is not two ids is a header.
fn read_edge_list(path: &Path, nodes: usize, progress: bool) -> Result<Vec<(u32, u32)>, DatasetError> {
    let header = first_field_fails(path, |t| parse_u64(t).is_some())?;
    let (edges, _) = read_all_after(path, header, progress, 0, &Edges { num_nodes: nodes })?;
    Ok(edges)
}

/// Builds the undirected graph and counts what symmetrising drops and adds.
fn build_graph(nodes: usize, edges: Vec<(u32, u32)>, path: &Path) -> Result<Graph, DatasetError> {
    let graph_error = |error| DatasetError::Graph { path: path.to_path_buf(), error };
    let self_loops = edges.iter().filter(|(s, d)| s == d).count() as u64;
    let directed = Csr::from_edges(nodes, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: true })
        .map_err(graph_error)?;
    let distinct = directed.num_edges() as u64;
    let (undirected, _) = summary::undirected_and_loops(&directed);
    drop(directed);
    let csr = Csr::from_edges(nodes, &edges, EdgeListOptions::default()).map_err(graph_error)?;
    let input_edges = edges.len() as u64;
    let undirected = undirected as u64;
    Ok(Graph {
        csr,
        input_edges,
        self_loops,
        duplicates: input_edges - self_loops - distinct,
        one_way: 2 * undirected - distinct,
        undirected,
    })
}

/// Streams an (N, F) array into the feature file in row chunks, checking that every value is
/// finite unless allowed. Returns F.
fn stream_features<R: Read>(
    r: &mut NpyReader<R>,
    path: &Path,
    key: Option<&str>,
    nodes: usize,
    allow_nonfinite: bool,
    out: &mut GzLines,
) -> Result<usize, DatasetError> {
    let shape = r.shape().to_vec();
    let cols = match shape[..] {
        [rows, cols] if rows == nodes as u64 && cols > 0 => cols as usize,
        _ => {
            let expected = format!("({nodes}, F): one row of F > 0 features per node");
            return Err(npy_error(path, key)(NpyError::Shape { found: shape_text(&shape), expected }));
        }
    };
    let rows_per_chunk = (FEATURE_CHUNK_VALUES / cols).max(1);
    let mut buf = Vec::with_capacity(rows_per_chunk * cols);
    loop {
        buf.clear();
        let start = r.position();
        let got = r.read_f32(rows_per_chunk * cols, &mut buf).map_err(npy_error(path, key))?;
        if got == 0 {
            return Ok(cols);
        }
        if !allow_nonfinite && let Some(i) = buf.iter().position(|x| !x.is_finite()) {
            let kind = ParseErrorKind::NonFiniteValue { value: buf[i].to_string() };
            return Err(element_error(path, key, &shape, start + i as u64, kind));
        }
        out.write_rows(ArrayView2::from_shape((got / cols, cols), &buf).expect("whole rows were read"))?;
    }
}

/// Classes from an (N,) or (N, 1) array of integers, or of floats with NaN for unlabelled.
fn classes_from_array<R: Read>(
    r: &mut NpyReader<R>,
    path: &Path,
    key: Option<&str>,
    nodes: usize,
    num_classes: Option<usize>,
) -> Result<Vec<u32>, DatasetError> {
    let shape = r.shape().to_vec();
    if !matches!(shape[..], [n] | [n, 1] if n == nodes as u64) {
        let expected = format!("({nodes},): one class per node");
        return Err(npy_error(path, key)(NpyError::Shape { found: shape_text(&shape), expected }));
    }
    let mut classes = Vec::with_capacity(nodes);
    let mut buf = Vec::with_capacity(CHUNK);
    loop {
        buf.clear();
        let start = r.position();
        if r.read_f64(CHUNK, &mut buf).map_err(npy_error(path, key))? == 0 {
            break;
        }
        for (i, &v) in buf.iter().enumerate() {
            let class = if v.is_nan() {
                Labels::UNLABELLED
            } else if v >= 0.0 && v.fract() == 0.0 && v < Labels::UNLABELLED as f64 {
                v as u32
            } else {
                let kind = ParseErrorKind::invalid_label(&v.to_string());
                return Err(element_error(path, key, &shape, start + i as u64, kind));
            };
            classes.push(class);
        }
    }
    if let Some((at, kind)) = class_out_of_range(&classes, num_classes) {
        return Err(element_error(path, key, &shape, at as u64, kind));
    }
    Ok(classes)
}

/// The first class not below a declared class count, and its index.
fn class_out_of_range(classes: &[u32], num_classes: Option<usize>) -> Option<(usize, ParseErrorKind)> {
    let limit = num_classes?;
    let at = classes.iter().position(|&c| c != Labels::UNLABELLED && c as usize >= limit)?;
    Some((at, ParseErrorKind::LabelOutOfRange { class: classes[at] as u64, num_classes: limit }))
}

/// `{train,valid,test}.csv.gz` (or `.csv`) in `dir`.
fn split_files(dir: &Path, name: &str, nodes: usize, progress: bool) -> Result<Splits, DatasetError> {
    let [train, valid, test] = layout::SPLIT_PARTS.map(|part| {
        let gz = dir.join(format!("{part}.csv.gz"));
        let path = if gz.exists() { gz } else { dir.join(format!("{part}.csv")) };
        read_all(&path, progress, 0, &NodeIds { num_nodes: nodes }).map(|(ids, _)| ids)
    });
    Ok(Splits { name: name.to_string(), train: train?, valid: valid?, test: test? })
}

/// The ids set in the three masks of an `.npz`.
fn split_masks(path: &Path, nodes: usize) -> Result<Splits, DatasetError> {
    let mut npz = Npz::open(path)?;
    let mut parts: Vec<Vec<u32>> = Vec::with_capacity(3);
    for keys in MASKS {
        let key = keys.iter().copied().find(|k| npz.contains(k)).unwrap_or(keys[0]);
        let mut r = npz.array(key)?;
        if r.shape() != [nodes as u64] {
            let expected = format!("({nodes},): one flag per node");
            return Err(npy_error(path, Some(key))(NpyError::Shape { found: shape_text(r.shape()), expected }));
        }
        let mut ids = Vec::new();
        let mut buf = Vec::with_capacity(CHUNK);
        loop {
            buf.clear();
            let start = r.position() as u32;
            if r.read_i64(CHUNK, &mut buf).map_err(npy_error(path, Some(key)))? == 0 {
                break;
            }
            ids.extend(buf.iter().enumerate().filter(|&(_, &flag)| flag != 0).map(|(i, _)| start + i as u32));
        }
        parts.push(ids);
    }
    let [train, valid, test]: [Vec<u32>; 3] = parts.try_into().expect("three masks");
    Ok(Splits { name: "masks".into(), train, valid, test })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::npy::NpzWriter;
    use crate::dataset::{CacheMode, Dataset, LoadOptions};

    fn load(dir: &Path) -> Dataset {
        Dataset::load(dir, &LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() }).unwrap()
    }

    /// A 5-node graph with a duplicate edge, a self loop and edges given one way.
    fn small_npz(path: &Path, edge_index: &[i64], x: &[f32], y: &[i64], masks: bool) {
        let mut w = NpzWriter::create(path, false).unwrap();
        w.add("edge_index", &[2, edge_index.len() as u64 / 2], edge_index).unwrap();
        w.add("x", &[5, 2], x).unwrap();
        w.add("y", &[5], y).unwrap();
        if masks {
            w.add("train_mask", &[5], &[true, true, false, false, false]).unwrap();
            w.add("val_mask", &[5], &[false, false, true, false, false]).unwrap();
            w.add("test_mask", &[5], &[false, false, false, true, true]).unwrap();
        }
        w.finish().unwrap();
    }

    const EDGES: [i64; 12] = [0, 1, 1, 2, 3, 0, 1, 0, 2, 3, 4, 4];
    const X: [f32; 10] = [0.5, 1.0, 2.0, -3.0, 0.25, 0.0, 1e-7, 8.0, 9.5, 1e30];

    #[test]
    fn npz_imports_and_counts_what_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("g.npz");
        // Sources 0 1 1 2 3 0, targets 1 0 2 3 4 4: 0-1 both ways, 1-2, 2-3, 3-4, 0-4 one way;
        // then a duplicate and a loop.
        let edge_index = [0, 1, 1, 2, 3, 0, 0, 4, 1, 0, 2, 3, 4, 4, 1, 4];
        small_npz(&input, &edge_index, &X, &[0, 1, 2, 1, 0], true);
        let out = dir.path().join("g");
        let report = import(&input, &out, &ImportOptions::default()).unwrap();
        assert_eq!((report.input_edges, report.self_loops, report.duplicate_edges), (8, 1, 1));
        assert_eq!((report.undirected_edges, report.one_way_edges), (5, 4));
        assert_eq!((report.train, report.valid, report.test), (2, 1, 2));
        let d = load(&out);
        assert_eq!(d.name, "g");
        assert_eq!(d.graph.num_edges(), 10);
        assert_eq!(d.features.as_slice().unwrap(), X);
        assert_eq!(d.labels, Labels::Classes(vec![0, 1, 2, 1, 0]));
        assert_eq!(d.num_classes, 3);
        assert_eq!(
            (d.splits.train.clone(), d.splits.valid.clone(), d.splits.test.clone()),
            (vec![0, 1], vec![2], vec![3, 4])
        );
        assert!(report.notes().iter().any(|n| n.contains("made undirected")), "{:?}", report.notes());
        // Nothing but the dataset beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_random_split_is_seeded_over_labelled_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("g.npz");
        let mut w = NpzWriter::create(&input, true).unwrap();
        w.add("edge_index", &[2, 6], &EDGES).unwrap();
        w.add("x", &[5, 2], &X).unwrap();
        w.add("y", &[5, 1], &[0.0, f64::NAN, 1.0, 1.0, 0.0]).unwrap();
        w.finish().unwrap();
        let opts = ImportOptions { split_seed: 3, train_fraction: 0.5, valid_fraction: 0.25, ..Default::default() };
        let report = import(&input, &dir.path().join("a"), &opts).unwrap();
        assert_eq!(report.labelled, 4);
        assert_eq!((report.train, report.valid, report.test), (2, 1, 1));
        let a = load(&dir.path().join("a"));
        import(&input, &dir.path().join("b"), &opts).unwrap();
        assert_eq!(a.splits, load(&dir.path().join("b")).splits);
        assert!(!a.splits.train.contains(&1) && !a.splits.test.contains(&1) && !a.splits.valid.contains(&1));
        assert!(report.notes().iter().any(|n| n.contains("random split") && n.contains("seed 3")));
    }

    /// An import that must fail with a message holding every one of `expected`, and leave
    /// nothing in `dir` but its input.
    fn refused(dir: &Path, input: &Path, opts: &ImportOptions, expected: &[&str]) {
        let before = std::fs::read_dir(dir).unwrap().count();
        let err = import(input, &dir.join("out"), opts).unwrap_err().to_string();
        for e in expected {
            assert!(err.contains(e), "`{e}` not in: {err}");
        }
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), before, "an import that failed left files: {err}");
    }

    #[test]
    fn bad_arrays_are_named_with_their_position() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("bad.npz");
        let opts = ImportOptions::default();
        let mut edges = EDGES;
        edges[7] = 5;
        small_npz(&input, &edges, &X, &[0, 1, 2, 1, 0], false);
        refused(dir.path(), &input, &opts, &["bad.npz: array `edge_index` at [1, 1]: node id 5 is out of range"]);
        edges[7] = -2;
        small_npz(&input, &edges, &X, &[0, 1, 2, 1, 0], false);
        refused(dir.path(), &input, &opts, &["`edge_index` at [1, 1]: malformed node id `-2`"]);
        let mut x = X;
        x[7] = f32::NAN;
        small_npz(&input, &EDGES, &x, &[0, 1, 2, 1, 0], false);
        refused(dir.path(), &input, &opts, &["array `x` at [3, 1]: `NaN` is not a finite"]);
        let lenient = ImportOptions { allow_nonfinite: true, ..Default::default() };
        import(&input, &dir.path().join("lenient"), &lenient).unwrap();
        std::fs::remove_dir_all(dir.path().join("lenient")).unwrap();
        small_npz(&input, &EDGES, &X, &[0, 1, -1, 1, 0], false);
        refused(dir.path(), &input, &opts, &["array `y` at [2]: invalid class label `-1`"]);
        small_npz(&input, &EDGES, &X, &[0, 1, 7, 1, 0], false);
        let capped = ImportOptions { num_classes: Some(3), ..Default::default() };
        refused(dir.path(), &input, &capped, &["array `y` at [2]: class 7 is out of range (--num-classes is 3)"]);

        let mut w = NpzWriter::create(&input, false).unwrap();
        w.add("edge_index", &[2, 6], &EDGES).unwrap();
        w.add("x", &[5, 2], &X).unwrap();
        w.add("y", &[4], &[0i64, 1, 1, 0]).unwrap();
        w.finish().unwrap();
        refused(dir.path(), &input, &opts, &["array `y`: has shape (4,), expected (5,)"]);

        let mut w = NpzWriter::create(&input, false).unwrap();
        w.add("edge_index", &[2, 6], &EDGES.map(|e| e as f64)).unwrap();
        w.add("x", &[5, 2], &X).unwrap();
        w.finish().unwrap();
        refused(dir.path(), &input, &opts, &["array `edge_index`: has dtype float64"]);

        let mut bytes = Vec::new();
        crate::dataset::npy::write_npy(&mut bytes, &[5, 2], &X).unwrap();
        let at = bytes.windows(3).position(|w| w == b"<f4").unwrap();
        bytes[at..at + 3].copy_from_slice(b"<f2");
        let features = dir.path().join("f.npy");
        std::fs::write(&features, &bytes).unwrap();
        let edges = dir.path().join("e.txt");
        std::fs::write(&edges, "0 1\n").unwrap();
        let opts = ImportOptions { features: Some(features), labels: Some(edges.clone()), ..Default::default() };
        refused(dir.path(), &edges, &opts, &["f.npy: unsupported dtype `<f2`"]);
    }

    #[test]
    fn edge_lists_with_headers_tabs_and_gzip() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let features = dir.path().join("f.csv");
        std::fs::write(&features, "a,b\n1,2\n3,4\n5,6\n").unwrap();
        let labels = dir.path().join("l.csv");
        std::fs::write(&labels, "0\n1\nnan\n").unwrap();
        let gz = dir.path().join("e.tsv.gz");
        let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
        enc.write_all(b"src\tdst\n0\t1\n1\t2\n2\t2\n").unwrap();
        enc.finish().unwrap();
        let opts =
            ImportOptions { features: Some(features.clone()), labels: Some(labels.clone()), ..Default::default() };
        let report = import(&gz, &dir.path().join("d"), &opts).unwrap();
        assert_eq!((report.nodes, report.undirected_edges, report.self_loops, report.labelled), (3, 2, 1, 2));
        let d = load(&dir.path().join("d"));
        assert_eq!(d.features.as_slice().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

        let spaces = dir.path().join("e.txt");
        std::fs::write(&spaces, "0  1\n1 3\n").unwrap();
        refused(dir.path(), &spaces, &opts, &["e.txt:2: node id 3 is out of range (the graph has 3 nodes)"]);
        std::fs::write(&spaces, "0 1\n").unwrap();
        std::fs::write(&labels, "0\n1\n").unwrap();
        refused(dir.path(), &spaces, &opts, &["l.csv: has 2 labels, expected 3"]);
        std::fs::write(&labels, "label\n0\n-1\n1\n").unwrap();
        refused(dir.path(), &spaces, &opts, &["l.csv:3: invalid class label `-1`"]);
        std::fs::write(&features, "1,2\n3,inf\n5,6\n").unwrap();
        refused(dir.path(), &spaces, &opts, &["f.csv:2: column 2: `inf`"]);
    }

    #[test]
    fn an_existing_output_is_not_touched() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("g.npz");
        small_npz(&input, &EDGES, &X, &[0, 1, 2, 1, 0], false);
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("keep"), "x").unwrap();
        let err = import(&input, &out, &ImportOptions::default()).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(std::fs::read_to_string(out.join("keep")).unwrap(), "x");
    }
}
