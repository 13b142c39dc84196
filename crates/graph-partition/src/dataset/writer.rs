//! Writing a [`Dataset`] in the OGB raw layout. Text is formatted and gzip-compressed in
//! parallel chunks, each its own gzip member (a multi-member file every gzip reader accepts).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use ndarray::ArrayView2;
use rayon::prelude::*;

use super::error::DatasetError;
use super::meta::Meta;
use super::{Dataset, Labels, Splits, cache, layout};
use crate::csr::Csr;

/// Removes the split files of every split but `keep`, and their directories once empty (a
/// directory that holds anything else is left).
fn remove_other_splits(dir: &Path, keep: &str) -> Result<(), DatasetError> {
    for name in layout::available_splits(dir)?.into_iter().filter(|name| name != keep) {
        for part in layout::SPLIT_PARTS {
            remove_if_present(&layout::split_file(dir, &name, part))?;
        }
        let _ = std::fs::remove_dir(dir.join(layout::SPLIT_DIR).join(&name));
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<(), DatasetError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(DatasetError::io(path, e)),
        _ => Ok(()),
    }
}

/// Uncompressed text per gzip member.
const CHUNK_TEXT_BYTES: usize = 1 << 20;

/// Everything of a dataset but its features, for writing.
pub(crate) struct Parts<'a> {
    pub name: &'a str,
    pub graph: &'a Csr,
    pub labels: &'a Labels,
    pub num_classes: usize,
    pub splits: &'a Splits,
    pub num_features: usize,
    /// Where the data came from, for `meta.json`.
    pub source: String,
}

pub(crate) fn write_ogb(d: &Dataset, dir: &Path) -> Result<(), DatasetError> {
    prepare(dir, &d.splits.name)?;
    let mut features = GzLines::create(&dir.join(layout::NODE_FEAT))?;
    features.write_rows(d.features.view())?;
    features.finish()?;
    let parts = Parts {
        name: &d.name,
        graph: &d.graph,
        labels: &d.labels,
        num_classes: d.num_classes,
        splits: &d.splits,
        num_features: d.num_features(),
        source: "written by Halo".into(),
    };
    write_parts(dir, &parts)
}

/// Creates the directories of a dataset with split `split` under `dir`, and removes what an
/// earlier dataset there left that the new one would not overwrite.
pub(crate) fn prepare(dir: &Path, split: &str) -> Result<(), DatasetError> {
    let split_dir = dir.join(layout::SPLIT_DIR).join(split);
    for sub in [dir.join("raw"), split_dir] {
        std::fs::create_dir_all(&sub).map_err(|e| DatasetError::io(sub, e))?;
    }
    // An earlier dataset here is replaced: its cache would be detected as stale anyway (removing
    // it frees the space), and its other splits would make loading ask for --split.
    remove_if_present(&dir.join(cache::CACHE_FILE))?;
    remove_other_splits(dir, split)
}

/// Writes everything but the features (edges, labels, counts, split, `meta.json`) into a
/// directory made by [`prepare`].
pub(crate) fn write_parts(dir: &Path, p: &Parts) -> Result<(), DatasetError> {
    let graph = p.graph;
    let n = graph.num_nodes();
    let symmetric = graph.is_symmetric();
    let avg_row_bytes = 16 * graph.num_edges() / n.max(1) + 1;
    let edge_lines = write_gz(&dir.join(layout::EDGE), n, avg_row_bytes, |rows, out| {
        let mut lines = 0;
        for v in rows {
            for &u in graph.neighbors(v) {
                // Row v lists the sources u of edges u -> v; a symmetric graph stores each
                // undirected edge once, as `smaller,larger`.
                let (src, dst) = if symmetric { (v as u32, u) } else { (u, v as u32) };
                if !symmetric || u as usize >= v {
                    let _ = writeln!(out, "{src},{dst}");
                    lines += 1;
                }
            }
        }
        lines
    })?;
    match p.labels {
        Labels::Classes(classes) => write_gz(&dir.join(layout::NODE_LABEL), n, 4, |rows, out| {
            for &c in &classes[rows.clone()] {
                if c == Labels::UNLABELLED {
                    out.push_str("nan\n");
                } else {
                    let _ = writeln!(out, "{c}");
                }
            }
            rows.len() as u64
        })?,
        Labels::MultiLabel(targets) => write_gz(&dir.join(layout::NODE_LABEL), n, targets.ncols() * 2, |rows, out| {
            let lines = rows.len() as u64;
            for v in rows {
                write_row(out, targets.row(v).iter().copied());
            }
            lines
        })?,
    };
    write_lines(&dir.join(layout::NUM_NODES), &[n as u64])?;
    write_lines(&dir.join(layout::NUM_EDGES), &[edge_lines])?;
    let splits = p.splits;
    for (part, ids) in layout::SPLIT_PARTS.iter().zip([&splits.train, &splits.valid, &splits.test]) {
        write_gz(&layout::split_file(dir, &splits.name, part), ids.len(), 8, |range, out| {
            for &id in &ids[range.clone()] {
                let _ = writeln!(out, "{id}");
            }
            range.len() as u64
        })?;
    }
    let multi = p.labels.is_multi_label();
    Meta {
        name: Some(p.name.to_string()),
        num_nodes: Some(n as u64),
        num_edges_stored: Some(edge_lines),
        edges: Some(if symmetric {
            "undirected, each stored once (u <= v): add the reverse edge".into()
        } else {
            "directed src,dst".into()
        }),
        num_features: Some(p.num_features as u64),
        num_classes: Some(p.num_classes as u64),
        task: Some(if multi { "multi-label node classification" } else { "single-label node classification" }.into()),
        split: Some(splits.name.clone()),
        layout: Some("OGB node-property-prediction raw layout (raw/*.csv.gz, split/<name>/*.csv.gz)".into()),
        source: Some(p.source.clone()),
    }
    .write(dir)
}

/// One comma-separated row of floats.
fn write_row(out: &mut String, values: impl Iterator<Item = f32>) {
    for (j, x) in values.enumerate() {
        if j > 0 {
            out.push(',');
        }
        write_f32(out, x);
    }
    out.push('\n');
}

/// Shortest text that parses back to the same `f32`: positional for ordinary magnitudes,
/// exponent form for tiny or huge ones (positional would spell out dozens of zeros).
fn write_f32(out: &mut String, x: f32) {
    let a = x.abs();
    if a == 0.0 || (1e-5..1e16).contains(&a) || !x.is_finite() {
        let _ = write!(out, "{x}");
    } else {
        let _ = write!(out, "{x:e}");
    }
}

fn write_lines(path: &Path, values: &[u64]) -> Result<(), DatasetError> {
    write_gz(path, values.len(), 21, |range, out| {
        for v in &values[range.clone()] {
            let _ = writeln!(out, "{v}");
        }
        range.len() as u64
    })
    .map(|_| ())
}

/// Writes `units` items (rows, ids...) formatted by `format` into a gzip file, in parallel
/// chunks of about [`CHUNK_TEXT_BYTES`] of text. `format` appends the text for a range of
/// units and returns how many lines it wrote. Returns the number of lines written.
fn write_gz(
    path: &Path,
    units: usize,
    bytes_per_unit: usize,
    format: impl Fn(Range<usize>, &mut String) -> u64 + Sync,
) -> Result<u64, DatasetError> {
    let mut file = GzLines::create(path)?;
    file.write(units, bytes_per_unit, format)?;
    file.finish()
}

/// A gzip text file written in pieces, each formatted and compressed in parallel.
pub(crate) struct GzLines {
    path: PathBuf,
    w: BufWriter<File>,
    lines: u64,
}

impl GzLines {
    pub fn create(path: &Path) -> Result<Self, DatasetError> {
        let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
        Ok(Self { path: path.to_path_buf(), w: BufWriter::new(file), lines: 0 })
    }

    /// Appends comma-separated float rows, one line each.
    pub fn write_rows(&mut self, rows: ArrayView2<f32>) -> Result<(), DatasetError> {
        self.write(rows.nrows(), rows.ncols() * 11 + 1, |range, out| {
            for v in range.clone() {
                write_row(out, rows.row(v).iter().copied());
            }
            range.len() as u64
        })
    }

    /// Appends `units` items formatted by `format` (see [`write_gz`]).
    fn write(
        &mut self,
        units: usize,
        bytes_per_unit: usize,
        format: impl Fn(Range<usize>, &mut String) -> u64 + Sync,
    ) -> Result<(), DatasetError> {
        let per_chunk = (CHUNK_TEXT_BYTES / bytes_per_unit.max(1)).max(1);
        let chunks: Vec<Range<usize>> =
            (0..units.div_ceil(per_chunk)).map(|c| c * per_chunk..((c + 1) * per_chunk).min(units)).collect();
        // Batches bound the memory held by compressed chunks waiting to be written in order.
        for batch in chunks.chunks(rayon::current_num_threads() * 4) {
            let members: Vec<(Vec<u8>, u64)> = batch
                .par_iter()
                .map(|range| {
                    let mut text = String::with_capacity(range.len() * bytes_per_unit + 64);
                    let counted = format(range.clone(), &mut text);
                    let mut enc = GzEncoder::new(Vec::with_capacity(text.len() / 2), Compression::fast());
                    enc.write_all(text.as_bytes()).expect("writing to a Vec cannot fail");
                    let gz = enc.finish().expect("writing to a Vec cannot fail");
                    (gz, counted)
                })
                .collect();
            for (gz, count) in members {
                self.w.write_all(&gz).map_err(|e| DatasetError::io(&self.path, e))?;
                self.lines += count;
            }
        }
        Ok(())
    }

    /// Flushes the file; returns the number of lines written. A file with no line is one
    /// empty gzip member, so every reader sees a valid, empty gzip file.
    pub fn finish(mut self) -> Result<u64, DatasetError> {
        if self.lines == 0 {
            let empty = GzEncoder::new(Vec::new(), Compression::fast()).finish().expect("writing to a Vec cannot fail");
            self.w.write_all(&empty).map_err(|e| DatasetError::io(&self.path, e))?;
        }
        self.w.flush().map_err(|e| DatasetError::io(&self.path, e))?;
        Ok(self.lines)
    }
}
