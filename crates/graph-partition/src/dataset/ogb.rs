//! Reading the OGB node-property raw layout (see [`super::layout`]) into memory.
//!
//! Features are parsed in parallel (`numbers`); a non-finite feature is an error naming its file,
//! line and column unless [`LoadOptions::allow_nonfinite`] allows it.

use std::path::Path;

use ndarray::Array2;

use super::error::{DatasetError, ParseErrorKind};
use super::lines::{LineParser, first_line, for_each_chunk, read_all};
use super::meta::Meta;
use super::numbers::{parse_class, parse_f32, parse_u64};
use super::{GraphData, Labels, LoadOptions, Splits, Structure, layout};
use crate::csr::{Csr, EdgeListOptions};

/// Reads the graph, node features and labels (everything but the split).
pub(crate) fn read_graph_data(dir: &Path, opts: &LoadOptions) -> Result<GraphData, DatasetError> {
    let progress = opts.progress;
    let meta = Meta::read(dir)?;
    let num_nodes = read_num_nodes(dir)?;
    meta.check(dir, "num_nodes", meta.num_nodes, num_nodes as u64)?;
    let edges = read_edges(dir, num_nodes, progress)?;
    let parser = |cols| FloatRows { cols, finite: !opts.allow_nonfinite };
    let features = read_features(dir, num_nodes, &edges, progress, parser)?;
    meta.check(dir, "num_features", meta.num_features, features.ncols() as u64)?;
    let (labels, num_classes) = read_labels(dir, num_nodes, &meta, progress)?;
    let graph = graph_of(dir, num_nodes, edges)?;
    let name = meta.name.clone().unwrap_or_else(|| default_name(dir));
    Ok(GraphData { name, graph, features, labels, num_classes })
}

/// Reads everything but the node features: the graph, labels and split `split`, and the width of
/// the feature rows (from the first line of the feature file, which must exist: features derived
/// from edge features cannot be streamed).
pub(crate) fn read_structure(dir: &Path, split: &str, opts: &LoadOptions) -> Result<Structure, DatasetError> {
    let meta = Meta::read(dir)?;
    let num_nodes = read_num_nodes(dir)?;
    meta.check(dir, "num_nodes", meta.num_nodes, num_nodes as u64)?;
    let num_features = streamable_width(dir)?;
    meta.check(dir, "num_features", meta.num_features, num_features as u64)?;
    let edges = read_edges(dir, num_nodes, opts.progress)?;
    let (labels, num_classes) = read_labels(dir, num_nodes, &meta, opts.progress)?;
    let graph = graph_of(dir, num_nodes, edges)?;
    let splits = read_split(dir, split, num_nodes, opts.progress)?;
    let name = meta.name.clone().unwrap_or_else(|| default_name(dir));
    Ok(Structure { name, graph, labels, splits, num_classes, num_features, dir: dir.to_path_buf(), opts: opts.clone() })
}

/// Parses the node feature file of `dir` block by block, handing `sink` each block's first row
/// and its rows (row-major, `cols` values a row), without holding more than a few blocks.
/// Fails unless the file has exactly `num_nodes` rows of `cols` values.
pub(crate) fn stream_features(
    dir: &Path,
    opts: &LoadOptions,
    num_nodes: usize,
    cols: usize,
    mut sink: impl FnMut(usize, &[f32]) -> Result<(), DatasetError>,
) -> Result<(), DatasetError> {
    let found = streamable_width(dir)?;
    let path = dir.join(layout::NODE_FEAT);
    if found != cols {
        return Err(DatasetError::CountMismatch {
            path,
            unit: "columns",
            found: found as u64,
            expected: cols as u64,
            why: "the file changed since its structure was read".into(),
        });
    }
    let parser = FloatRows { cols, finite: !opts.allow_nonfinite };
    let lines = for_each_chunk(&path, opts.progress, &parser, |values, first| {
        let rows = values.len() / cols.max(1);
        if first as usize + rows > num_nodes {
            let found = first + rows as u64;
            return check_rows(&path, found, num_nodes as u64, "rows", || per_node(num_nodes));
        }
        sink(first as usize, &values)
    })?;
    check_rows(&path, lines, num_nodes as u64, "rows", || per_node(num_nodes))
}

/// The width of the node feature file, which must exist to be streamed.
fn streamable_width(dir: &Path) -> Result<usize, DatasetError> {
    let path = dir.join(layout::NODE_FEAT);
    if !path.exists() {
        let what = "node features (features derived from edge features cannot be streamed)".to_string();
        return Err(DatasetError::MissingFile { path, what });
    }
    first_width(&path)
}

/// The symmetric graph of `edges`.
fn graph_of(dir: &Path, num_nodes: usize, edges: Vec<(u32, u32)>) -> Result<Csr, DatasetError> {
    Csr::from_edges(num_nodes, &edges, EdgeListOptions::default())
        .map_err(|error| DatasetError::Graph { path: dir.join(layout::EDGE), error })
}

/// The directory's own name (after resolving `.` and the like).
fn default_name(dir: &Path) -> String {
    let resolved = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    resolved.file_name().map_or_else(|| "dataset".to_string(), |n| n.to_string_lossy().into_owned())
}

/// Reads `split/<name>/{train,valid,test}.csv.gz`, checking every id against `num_nodes`.
/// Empty split files are allowed (a tiny dataset may have no validation nodes).
pub(crate) fn read_split(dir: &Path, name: &str, num_nodes: usize, progress: bool) -> Result<Splits, DatasetError> {
    let [train, valid, test] = layout::SPLIT_PARTS.map(|part| {
        let path = layout::split_file(dir, name, part);
        read_all(&path, progress, 0, &NodeIds { num_nodes }).map(|(ids, _)| ids)
    });
    Ok(Splits { name: name.to_string(), train: train?, valid: valid?, test: test? })
}

/// Checks that every node of `splits` has a label and lies in one part of the split; errors
/// name the part's file and line.
pub(crate) fn check_split(dir: &Path, splits: &Splits, labels: &Labels) -> Result<(), DatasetError> {
    let labels_file = dir.join(layout::NODE_LABEL).display().to_string();
    match split_fault(splits, labels, &labels_file) {
        None => Ok(()),
        Some((part, position, kind)) => {
            let path = layout::split_file(dir, &splits.name, part);
            Err(DatasetError::Parse { path, line: position as u64 + 1, kind })
        }
    }
}

/// The first node of `splits` without a label (in `labels_file`) or in a second part, as its
/// part, its position in that part, and what is wrong.
pub(crate) fn split_fault(
    splits: &Splits,
    labels: &Labels,
    labels_file: &str,
) -> Option<(&'static str, usize, ParseErrorKind)> {
    const NONE: u8 = u8::MAX;
    let mut part_of = vec![NONE; labels.len()];
    let parts = [&splits.train, &splits.valid, &splits.test];
    for (index, (part, ids)) in layout::SPLIT_PARTS.into_iter().zip(parts).enumerate() {
        for (position, &id) in ids.iter().enumerate() {
            let kind = if !labels.has_label(id as usize) {
                ParseErrorKind::Unlabelled { id, labels: labels_file.to_owned() }
            } else if part_of[id as usize] != NONE {
                ParseErrorKind::InTwoSplits { id, split: layout::SPLIT_PARTS[part_of[id as usize] as usize] }
            } else {
                part_of[id as usize] = index as u8;
                continue;
            };
            return Some((part, position, kind));
        }
    }
    None
}

/// The single count in a `num-*-list.csv.gz` file.
fn read_single_count(dir: &Path, file: &str) -> Result<u64, DatasetError> {
    let path = dir.join(file);
    let (counts, lines) = read_all(&path, false, 1, &Counts)?;
    match counts.as_slice() {
        [] => Err(DatasetError::EmptyFile { path }),
        [count] => Ok(*count),
        _ => Err(DatasetError::CountMismatch {
            path,
            unit: "lines",
            found: lines,
            expected: 1,
            why: "a node-property dataset holds a single graph".into(),
        }),
    }
}

fn read_num_nodes(dir: &Path) -> Result<usize, DatasetError> {
    let count = read_single_count(dir, layout::NUM_NODES)?;
    if count == 0 || count > u32::MAX as u64 {
        let kind = ParseErrorKind::malformed(&count.to_string(), "node count (1 to 2^32 - 1)");
        return Err(DatasetError::Parse { path: dir.join(layout::NUM_NODES), line: 1, kind });
    }
    Ok(count as usize)
}

/// Why a file must have one row per node, for error messages.
fn per_node(num_nodes: usize) -> String {
    format!("one per node; {} says {num_nodes}", layout::NUM_NODES)
}

fn read_edges(dir: &Path, num_nodes: usize, progress: bool) -> Result<Vec<(u32, u32)>, DatasetError> {
    let path = dir.join(layout::EDGE);
    let (edges, lines) = read_all(&path, progress, 0, &Edges { num_nodes })?;
    if dir.join(layout::NUM_EDGES).exists() {
        let declared = read_single_count(dir, layout::NUM_EDGES)?;
        if declared != lines {
            return Err(DatasetError::CountMismatch {
                path,
                unit: "lines",
                found: lines,
                expected: declared,
                why: format!("{} says {declared}", layout::NUM_EDGES),
            });
        }
    }
    Ok(edges)
}

/// `parser` makes the row parser for a given width (it decides whether non-finite values pass).
fn read_features(
    dir: &Path,
    num_nodes: usize,
    edges: &[(u32, u32)],
    progress: bool,
    parser: impl Fn(usize) -> FloatRows,
) -> Result<Array2<f32>, DatasetError> {
    let path = dir.join(layout::NODE_FEAT);
    if !path.exists() && dir.join(layout::EDGE_FEAT).exists() {
        return features_from_edge_features(dir, num_nodes, edges, progress, parser);
    }
    if !path.exists() {
        return Err(DatasetError::MissingFile {
            path,
            what: format!("node features (and no {} to derive them from)", layout::EDGE_FEAT),
        });
    }
    let cols = first_width(&path)?;
    let (values, lines) = read_all(&path, progress, num_nodes * cols, &parser(cols))?;
    check_rows(&path, lines, num_nodes as u64, "rows", || per_node(num_nodes))?;
    Ok(Array2::from_shape_vec((num_nodes, cols), values).expect("row count and width were checked"))
}

/// ogbn-proteins ships edge features only. A node's feature vector is then the mean of the
/// features of the edge lines it appears in (each line counts for both endpoints, once for a
/// self loop; duplicate lines count as often as they occur). Isolated nodes get zeros.
fn features_from_edge_features(
    dir: &Path,
    num_nodes: usize,
    edges: &[(u32, u32)],
    progress: bool,
    parser: impl Fn(usize) -> FloatRows,
) -> Result<Array2<f32>, DatasetError> {
    let path = dir.join(layout::EDGE_FEAT);
    let width = first_width(&path)?;
    let mut sums = vec![0.0f64; num_nodes * width];
    let mut counts = vec![0u32; num_nodes];
    let lines = for_each_chunk(&path, progress, &parser(width), |values, first_line| {
        for (j, row) in values.chunks_exact(width).enumerate() {
            let Some(&(s, d)) = edges.get(first_line as usize + j) else {
                return Err(DatasetError::CountMismatch {
                    path: path.clone(),
                    unit: "rows",
                    found: first_line + j as u64 + 1,
                    expected: edges.len() as u64,
                    why: format!("one per line of {}", layout::EDGE),
                });
            };
            let ends: &[u32] = if s == d { &[s] } else { &[s, d] };
            for &v in ends {
                counts[v as usize] += 1;
                let acc = &mut sums[v as usize * width..(v as usize + 1) * width];
                acc.iter_mut().zip(row).for_each(|(a, &x)| *a += x as f64);
            }
        }
        Ok(())
    })?;
    check_rows(&path, lines, edges.len() as u64, "rows", || format!("one per line of {}", layout::EDGE))?;
    let mut features = Array2::<f32>::zeros((num_nodes, width));
    for (v, mut row) in features.rows_mut().into_iter().enumerate() {
        if counts[v] > 0 {
            let acc = &sums[v * width..(v + 1) * width];
            row.iter_mut().zip(acc).for_each(|(x, &a)| *x = (a / counts[v] as f64) as f32);
        }
    }
    Ok(features)
}

fn read_labels(dir: &Path, num_nodes: usize, meta: &Meta, progress: bool) -> Result<(Labels, usize), DatasetError> {
    let path = dir.join(layout::NODE_LABEL);
    let cols = first_width(&path)?;
    if cols > 1 || meta.is_multi_label() {
        // NaN marks an unknown target, so labels accept non-finite values.
        let (values, lines) = read_all(&path, progress, num_nodes * cols, &FloatRows { cols, finite: false })?;
        check_rows(&path, lines, num_nodes as u64, "rows", || per_node(num_nodes))?;
        let not_binary = |v: &f32| !(v.is_nan() || *v == 0.0 || *v == 1.0);
        if let Some(at) = values.iter().position(not_binary).filter(|_| !meta.is_multi_label()) {
            let kind = ParseErrorKind::NotMultiLabel { token: values[at].to_string(), columns: cols };
            return Err(DatasetError::Parse { path, line: (at / cols) as u64 + 1, kind });
        }
        meta.check(dir, "num_classes", meta.num_classes, cols as u64)?;
        let labels = Array2::from_shape_vec((num_nodes, cols), values).expect("rows and width were checked");
        return Ok((Labels::MultiLabel(labels), cols));
    }
    let (classes, lines) = read_all(&path, progress, num_nodes, &Classes)?;
    check_rows(&path, lines, num_nodes as u64, "labels", || per_node(num_nodes))?;
    let needed = classes.iter().filter(|&&c| c != u32::MAX).max().map_or(0, |&m| m as u64 + 1);
    let num_classes = match meta.num_classes {
        Some(declared) if declared < needed => {
            return Err(DatasetError::InvalidMeta {
                path: dir.join(layout::META),
                message: format!("`num_classes` is {declared} but {} uses class {}", path.display(), needed - 1),
            });
        }
        Some(declared) => declared,
        None => needed,
    };
    Ok((Labels::Classes(classes), num_classes as usize))
}

/// Columns of the first line; an empty file is an error (every caller needs one row per node
/// or per edge).
fn first_width(path: &Path) -> Result<usize, DatasetError> {
    match first_line(path)? {
        Some(line) => Ok(column_count(&line)),
        None => Err(DatasetError::EmptyFile { path: path.to_path_buf() }),
    }
}

fn check_rows(
    path: &Path,
    found: u64,
    expected: u64,
    unit: &'static str,
    why: impl FnOnce() -> String,
) -> Result<(), DatasetError> {
    if found == 0 && expected > 0 {
        return Err(DatasetError::EmptyFile { path: path.to_path_buf() });
    }
    if found != expected {
        return Err(DatasetError::CountMismatch { path: path.to_path_buf(), unit, found, expected, why: why() });
    }
    Ok(())
}

pub(crate) fn column_count(line: &str) -> usize {
    line.split(',').count()
}

/// One count per line.
struct Counts;

impl LineParser for Counts {
    type Item = u64;
    fn parse_line(&self, line: &str, out: &mut Vec<u64>) -> Result<(), ParseErrorKind> {
        out.push(parse_u64(line).ok_or_else(|| ParseErrorKind::malformed(line, "count"))?);
        Ok(())
    }
}

fn node_id(token: &str, num_nodes: usize) -> Result<u32, ParseErrorKind> {
    let id = parse_u64(token).ok_or_else(|| ParseErrorKind::malformed(token, "node id"))?;
    if id >= num_nodes as u64 {
        return Err(ParseErrorKind::NodeOutOfRange { id, num_nodes });
    }
    Ok(id as u32)
}

/// `src,dst` per line; a tab also separates, and so do runs of spaces on a line with neither.
pub(crate) struct Edges {
    pub num_nodes: usize,
}

impl LineParser for Edges {
    type Item = (u32, u32);
    fn parse_line(&self, line: &str, out: &mut Vec<(u32, u32)>) -> Result<(), ParseErrorKind> {
        let fields = || -> Box<dyn Iterator<Item = &str>> {
            if line.contains([',', '\t']) {
                Box::new(line.split([',', '\t']))
            } else {
                Box::new(line.split_ascii_whitespace())
            }
        };
        let mut tokens = fields();
        match (tokens.next(), tokens.next(), tokens.next()) {
            (Some(src), Some(dst), None) => {
                out.push((node_id(src, self.num_nodes)?, node_id(dst, self.num_nodes)?));
                Ok(())
            }
            _ => Err(ParseErrorKind::RaggedRow { expected: 2, found: fields().count() }),
        }
    }
}

/// One node id per line.
pub(crate) struct NodeIds {
    pub num_nodes: usize,
}

impl LineParser for NodeIds {
    type Item = u32;
    fn parse_line(&self, line: &str, out: &mut Vec<u32>) -> Result<(), ParseErrorKind> {
        out.push(node_id(line, self.num_nodes)?);
        Ok(())
    }
}

/// Exactly `cols` comma-separated floats per line; with `finite`, NaN and infinities (also
/// decimals that overflow `f32`) are errors naming their column.
pub(crate) struct FloatRows {
    pub cols: usize,
    pub finite: bool,
}

impl LineParser for FloatRows {
    type Item = f32;
    fn parse_line(&self, line: &str, out: &mut Vec<f32>) -> Result<(), ParseErrorKind> {
        let start = out.len();
        let mut found = 0;
        for token in line.split(',') {
            found += 1;
            if found <= self.cols {
                let value = parse_f32(token).ok_or_else(|| ParseErrorKind::malformed(token, "float"))?;
                if self.finite && !value.is_finite() {
                    return Err(ParseErrorKind::non_finite(token, found));
                }
                out.push(value);
            }
        }
        if found != self.cols {
            out.truncate(start);
            return Err(ParseErrorKind::RaggedRow { expected: self.cols, found });
        }
        Ok(())
    }
}

/// One class label per line (`nan` for unlabelled).
pub(crate) struct Classes;

impl LineParser for Classes {
    type Item = u32;
    fn parse_line(&self, line: &str, out: &mut Vec<u32>) -> Result<(), ParseErrorKind> {
        if line.contains(',') {
            return Err(ParseErrorKind::RaggedRow { expected: 1, found: column_count(line) });
        }
        out.push(parse_class(line).ok_or_else(|| ParseErrorKind::invalid_label(line))?);
        Ok(())
    }
}
