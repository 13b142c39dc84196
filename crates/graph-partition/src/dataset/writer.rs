//! Writing a [`Dataset`] in the OGB raw layout. Text is formatted and gzip-compressed in
//! parallel chunks, each its own gzip member (a multi-member file every gzip reader accepts).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;
use rayon::prelude::*;

use super::error::DatasetError;
use super::meta::Meta;
use super::{Dataset, Labels, cache, layout};

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

pub(crate) fn write_ogb(d: &Dataset, dir: &Path) -> Result<(), DatasetError> {
    let split_dir = dir.join(layout::SPLIT_DIR).join(&d.splits.name);
    for sub in [dir.join("raw"), split_dir] {
        std::fs::create_dir_all(&sub).map_err(|e| DatasetError::io(sub, e))?;
    }
    // An earlier dataset here is replaced: its cache would be detected as stale anyway (removing
    // it frees the space), and its other splits would make loading ask for --split.
    remove_if_present(&dir.join(cache::CACHE_FILE))?;
    remove_other_splits(dir, &d.splits.name)?;

    let n = d.num_nodes();
    let symmetric = d.graph.is_symmetric();
    let avg_row_bytes = 16 * d.graph.num_edges() / n.max(1) + 1;
    let edge_lines = write_gz(&dir.join(layout::EDGE), n, avg_row_bytes, |rows, out| {
        let mut lines = 0;
        for v in rows {
            for &u in d.graph.neighbors(v) {
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

    let cols = d.num_features();
    write_gz(&dir.join(layout::NODE_FEAT), n, cols * 11 + 1, |rows, out| {
        let lines = rows.len() as u64;
        for v in rows {
            write_row(out, d.features.row(v).iter().copied());
        }
        lines
    })?;
    match &d.labels {
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
    for (part, ids) in layout::SPLIT_PARTS.iter().zip([&d.splits.train, &d.splits.valid, &d.splits.test]) {
        write_gz(&layout::split_file(dir, &d.splits.name, part), ids.len(), 8, |range, out| {
            for &id in &ids[range.clone()] {
                let _ = writeln!(out, "{id}");
            }
            range.len() as u64
        })?;
    }
    let multi = d.labels.is_multi_label();
    Meta {
        name: Some(d.name.clone()),
        num_nodes: Some(n as u64),
        num_edges_stored: Some(edge_lines),
        edges: Some(if symmetric {
            "undirected, each stored once (u <= v): add the reverse edge".into()
        } else {
            "directed src,dst".into()
        }),
        num_features: Some(cols as u64),
        num_classes: Some(d.num_classes as u64),
        task: Some(if multi { "multi-label node classification" } else { "single-label node classification" }.into()),
        split: Some(d.splits.name.clone()),
        layout: Some("OGB node-property-prediction raw layout (raw/*.csv.gz, split/<name>/*.csv.gz)".into()),
        source: Some("written by Halo".into()),
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
    let per_chunk = (CHUNK_TEXT_BYTES / bytes_per_unit.max(1)).max(1);
    let chunks: Vec<Range<usize>> =
        (0..units.div_ceil(per_chunk).max(1)).map(|c| c * per_chunk..((c + 1) * per_chunk).min(units)).collect();
    let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
    let mut w = BufWriter::new(file);
    let mut lines = 0u64;
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
            w.write_all(&gz).map_err(|e| DatasetError::io(path, e))?;
            lines += count;
        }
    }
    w.flush().map_err(|e| DatasetError::io(path, e))?;
    Ok(lines)
}
