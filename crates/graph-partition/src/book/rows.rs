//! Part folders: a saved book whose every part also carries its worker's rows, so that worker
//! `r` of a job reads `book.json`, `part-<r>.bin` and `part-<r>.rows` and nothing else.
//!
//! `part-<i>.rows` (format version 1): magic `HALOROWS`, the format version (u32), the header
//! length (u32), a bincode [`RowsHeader`] and its xxh3 (u64); then, each starting at a multiple
//! of 64 bytes, little-endian arrays: the input features of every local vertex (`f32`,
//! `num_local x num_features`, row-major in local id order: primaries, then copies, so a
//! method that caches its halo rows finds them there too), the labels of every local vertex
//! (`u32` classes or `f32` rows), and the local ids of the part's training, validation and test
//! vertices (`u32`). Every array has its xxh3 in the header. The arrays are aligned raw data, so
//! the file can be memory-mapped; [`PartRows::read`] reads them in chunks instead, so a worker
//! holds one copy of its rows.
//!
//! `parts.json` ([`PartsManifest`]) says what the part files were made from: the dataset (its
//! name and the fingerprint of its raw files), the split, and the partition's quality. It is
//! written last, so a folder holding it holds every part; [`write_part_rows`] removes it first.
//! The features are written in one streaming pass over the dataset's feature file
//! ([`Structure::stream_features`]): partitioning never holds the feature matrix.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use super::local::LocalGraph;
use super::{BookError, BookMeta, CutKind, InvalidBook, PartitionBook};
use crate::dataset::{FeatureFile, Labels, Splits, Structure};
use crate::fs::Pending;
use crate::metrics::PartitionMetrics;

const MAGIC: [u8; 8] = *b"HALOROWS";
/// The format version of `part-<i>.rows`.
pub const ROWS_VERSION: u32 = 1;
const MANIFEST_FORMAT: &str = "halo-part-folder";
/// Where [`PartsManifest`] lives in a part folder.
pub const MANIFEST: &str = "parts.json";
const MAX_HEADER_BYTES: u32 = 1 << 16;
/// Arrays start at multiples of this many bytes.
const ALIGN: u64 = 64;
/// Bytes per read or hash step.
const CHUNK_BYTES: usize = 1 << 20;
/// Fixed-width integers: the header keeps its length when its checksums are filled in.
const HEADER_CONFIG: bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Fixint,
    bincode::config::Limit<{ MAX_HEADER_BYTES as usize }>,
> = bincode::config::standard().with_fixed_int_encoding().with_limit::<{ MAX_HEADER_BYTES as usize }>();
const SECTIONS: [&str; 5] = ["features", "labels", "train ids", "valid ids", "test ids"];

/// What a part folder was made from, common to its parts (`parts.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartsManifest {
    format: String,
    /// [`ROWS_VERSION`] of the part files.
    pub version: u32,
    /// The dataset's name.
    pub dataset: String,
    /// [`crate::Dataset::source_fingerprint`] of the dataset directory.
    pub dataset_fingerprint: u64,
    /// The split the part files' ids come from, and its sizes (train, valid, test).
    pub split: String,
    pub split_sizes: [usize; 3],
    pub num_classes: usize,
    pub num_features: usize,
    /// The partitioner's name.
    pub algorithm: String,
    pub metrics: PartitionMetrics,
}

impl PartsManifest {
    /// The manifest of a part folder made from `structure` (whose raw files have fingerprint
    /// `dataset_fingerprint`) by `algorithm`.
    pub fn new(structure: &Structure, dataset_fingerprint: u64, algorithm: &str, metrics: PartitionMetrics) -> Self {
        let source = Source { name: &structure.name, splits: &structure.splits, num_classes: structure.num_classes };
        Self::of(source, structure.num_features, dataset_fingerprint, algorithm, metrics)
    }

    /// [`PartsManifest::new`] from the parts of a structure.
    pub(super) fn of(
        source: Source<'_>,
        num_features: usize,
        dataset_fingerprint: u64,
        algorithm: &str,
        metrics: PartitionMetrics,
    ) -> Self {
        let s = source.splits;
        Self {
            format: MANIFEST_FORMAT.into(),
            version: ROWS_VERSION,
            dataset: source.name.to_string(),
            dataset_fingerprint,
            split: s.name.clone(),
            split_sizes: [s.train.len(), s.valid.len(), s.test.len()],
            num_classes: source.num_classes,
            num_features,
            algorithm: algorithm.into(),
            metrics,
        }
    }

    /// `None` when `dir` is a book without part rows; the manifest when it is a part folder.
    pub fn read(dir: &Path) -> Result<Option<Self>, BookError> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(BookError::Io { path, error }),
        };
        let manifest: Self =
            serde_json::from_slice(&text).map_err(|error| BookError::Json { path: path.clone(), error })?;
        if manifest.format != MANIFEST_FORMAT || manifest.version != ROWS_VERSION {
            return Err(BookError::Format {
                path,
                reason: format!(
                    "format {:?} version {}, expected {MANIFEST_FORMAT:?} version {ROWS_VERSION}",
                    manifest.format, manifest.version
                ),
            });
        }
        Ok(Some(manifest))
    }
}

/// What a manifest says of the dataset besides its features.
pub(super) struct Source<'a> {
    pub name: &'a str,
    pub splits: &'a Splits,
    pub num_classes: usize,
}

/// The header of `part-<i>.rows`: which part of which book and dataset it is, the array sizes
/// and their checksums.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
struct RowsHeader {
    part: u64,
    parts: u64,
    cut: String,
    graph_fingerprint: u64,
    dataset_fingerprint: u64,
    num_local: u64,
    num_features: u64,
    /// 0: single-label classes; else the width of the multi-label rows.
    label_cols: u64,
    split_lens: [u64; 3],
    /// The size of the whole training set (the loss is a mean over it).
    global_train: u64,
    /// xxh3 of every array, in [`SECTIONS`] order.
    checksums: [u64; 5],
}

impl RowsHeader {
    /// The byte ranges of the arrays, after a prefix of `prefix` bytes; `None` on overflow.
    fn sections(&self, prefix: u64) -> Option<[(u64, u64); 5]> {
        let label_width = self.label_cols.max(1);
        let lens = [
            self.num_local.checked_mul(self.num_features)?.checked_mul(4)?,
            self.num_local.checked_mul(label_width)?.checked_mul(4)?,
            self.split_lens[0].checked_mul(4)?,
            self.split_lens[1].checked_mul(4)?,
            self.split_lens[2].checked_mul(4)?,
        ];
        let mut at = prefix;
        let mut out = [(0, 0); 5];
        for (slot, len) in out.iter_mut().zip(lens) {
            at = at.checked_next_multiple_of(ALIGN)?;
            *slot = (at, len);
            at = at.checked_add(len)?;
        }
        Some(out)
    }
}

/// The bytes before the first array: magic, version, header length, header, header checksum.
fn prefix_bytes(header: &RowsHeader) -> Vec<u8> {
    let body = bincode::encode_to_vec(header, HEADER_CONFIG).expect("a header always encodes");
    let mut out = Vec::with_capacity(body.len() + 24);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&ROWS_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&xxh3_64(&body).to_le_bytes());
    out
}

/// Where [`write_part_rows`] puts part `part`'s rows inside `dir`.
pub fn rows_path(dir: &Path, part: usize) -> PathBuf {
    dir.join(format!("part-{part}.rows"))
}

/// For every part, the local ids of its primaries in each of `sets` (global ids below
/// `num_nodes`), in the order the sets list them.
pub fn split_rows(
    parts: &[LocalGraph],
    num_nodes: usize,
    sets: [&[u32]; 3],
) -> Result<Vec<[Vec<u32>; 3]>, InvalidBook> {
    let mut home = vec![None; num_nodes];
    for p in parts {
        for l in 0..p.num_primary() {
            home[p.local_to_global()[l] as usize] = Some((p.part(), l as u32));
        }
    }
    let mut out: Vec<[Vec<u32>; 3]> = (0..parts.len()).map(|_| Default::default()).collect();
    for (k, set) in sets.iter().enumerate() {
        for &g in set.iter() {
            let (p, l) = home.get(g as usize).copied().flatten().ok_or_else(|| InvalidBook {
                part: None,
                reason: format!("split vertex {g} has no primary in the partition book of {num_nodes} vertices"),
            })?;
            out[p][k].push(l);
        }
    }
    Ok(out)
}

/// One part's rows file while it is written.
pub(super) struct Writer {
    path: PathBuf,
    pending: Pending,
    file: File,
    header: RowsHeader,
    prefix: u64,
    sections: [(u64, u64); 5],
}

/// A part's local vertices in ascending global id: the order in which the feature stream
/// reaches its rows.
pub(super) trait RowOrder {
    /// The `i`-th local vertex by global id, as (global id, local id).
    fn nth(&self, i: usize) -> Option<(u32, u32)>;
}

impl RowOrder for LocalGraph {
    fn nth(&self, i: usize) -> Option<(u32, u32)> {
        self.by_global.get(i).map(|&l| (self.local_to_global[l as usize], l))
    }
}

impl RowOrder for Vec<(u32, u32)> {
    fn nth(&self, i: usize) -> Option<(u32, u32)> {
        self.get(i).copied()
    }
}

/// Part `lg`'s (global id, local id) pairs in ascending global id: what the feature stream
/// needs of a part that is no longer held (8 bytes per local vertex).
pub(super) fn row_order(lg: &LocalGraph) -> Vec<(u32, u32)> {
    (0..lg.num_local()).map_while(|i| lg.nth(i)).collect()
}

/// Removes `parts.json` from `dir`: a folder without it is no part folder.
pub(super) fn remove_manifest(dir: &Path) -> Result<(), BookError> {
    let path = dir.join(MANIFEST);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(BookError::Io { path, error: e }),
        _ => Ok(()),
    }
}

/// The refusal to write rows for a feature-cut book.
pub(super) fn no_rows_for_a_feature_cut(dir: &Path) -> BookError {
    BookError::Format {
        path: dir.join("book.json"),
        reason: "a feature-cut book has no parts to write rows for".into(),
    }
}

/// Writes every part's features in one streaming pass over `features` (rows of `cols`
/// values), each row into the writer of every part holding it, at its local id (`orders[i]`
/// is part `i`'s); then finishes the writers and writes `manifest` as `parts.json`, last.
pub(super) fn stream_rows<O: RowOrder>(
    dir: &Path,
    features: &FeatureFile,
    cols: usize,
    writers: Vec<Writer>,
    orders: &[O],
    manifest: &PartsManifest,
) -> Result<(), BookError> {
    // Each part's local ids in ascending global id, walked along the feature file.
    let mut cursors = vec![0usize; writers.len()];
    let mut row_bytes = vec![0u8; cols * 4];
    features
        .stream(|first, values| {
            let end = first + values.len() / cols.max(1);
            for ((order, w), at) in orders.iter().zip(&writers).zip(&mut cursors) {
                while let Some((g, l)) = order.nth(*at) {
                    let g = g as usize;
                    if g >= end {
                        break;
                    }
                    for (b, v) in row_bytes.chunks_exact_mut(4).zip(&values[(g - first) * cols..][..cols]) {
                        b.copy_from_slice(&v.to_le_bytes());
                    }
                    w.write_features(l as usize, &row_bytes)?;
                    *at += 1;
                }
            }
            Ok(())
        })
        .map_err(BookError::Dataset)?;
    for w in writers {
        w.finish()?;
    }
    let manifest_path = dir.join(MANIFEST);
    let json =
        serde_json::to_vec_pretty(manifest).map_err(|error| BookError::Json { path: manifest_path.clone(), error })?;
    crate::fs::write_atomic(&manifest_path, |tmp| std::fs::write(tmp, &json))
        .map_err(|e| BookError::Io { path: manifest_path, error: e.source })
}

/// Writes `part-<i>.rows` of every part of `book` (saved in `dir` already) from `structure`,
/// its features in one streaming pass, then `manifest` as `parts.json`. An earlier
/// `parts.json` is removed first, and each rows file is put in place whole, so an interrupted
/// write leaves no part folder (the book stays usable for a streamed scatter).
/// [`super::write_part_folder`] writes the same files without holding the whole book.
pub fn write_part_rows(
    dir: &Path,
    book: &PartitionBook,
    structure: &Structure,
    manifest: &PartsManifest,
) -> Result<(), BookError> {
    remove_manifest(dir)?;
    let meta = book.meta();
    if meta.cut == CutKind::FeatureCut {
        return Err(no_rows_for_a_feature_cut(dir));
    }
    let s = &structure.splits;
    let splits = split_rows(book.parts(), meta.num_nodes, [&s.train, &s.valid, &s.test])
        .map_err(|error| BookError::Invalid { path: dir.join("book.json"), error })?;
    let cols = structure.num_features;
    let mut writers = Vec::with_capacity(book.parts().len());
    for (lg, split) in book.parts().iter().zip(splits) {
        let rows: Vec<usize> = lg.local_to_global().iter().map(|&g| g as usize).collect();
        let labels = structure.labels.select(&rows);
        writers.push(Writer::create(dir, lg, meta, manifest.dataset_fingerprint, cols, labels, split, s.train.len())?);
    }
    stream_rows(dir, &structure.feature_file(), cols, writers, book.parts(), manifest)
}

impl Writer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn create(
        dir: &Path,
        lg: &LocalGraph,
        meta: &BookMeta,
        dataset_fingerprint: u64,
        num_features: usize,
        labels: Labels,
        split: [Vec<u32>; 3],
        global_train: usize,
    ) -> Result<Self, BookError> {
        let path = rows_path(dir, lg.part());
        let io_err = |error| BookError::Io { path: path.clone(), error };
        let (label_cols, label_bytes): (u64, Vec<u8>) = match &labels {
            Labels::Classes(c) => (0, c.iter().flat_map(|v| v.to_le_bytes()).collect()),
            Labels::MultiLabel(t) => (t.ncols() as u64, t.iter().flat_map(|v| v.to_le_bytes()).collect()),
        };
        let split_bytes = split.each_ref().map(|ids| ids.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
        let mut header = RowsHeader {
            part: lg.part() as u64,
            parts: meta.parts as u64,
            cut: meta.cut.as_str().into(),
            graph_fingerprint: meta.graph_fingerprint,
            dataset_fingerprint,
            num_local: lg.num_local() as u64,
            num_features: num_features as u64,
            label_cols,
            split_lens: split.each_ref().map(|ids| ids.len() as u64),
            global_train: global_train as u64,
            checksums: [0; 5],
        };
        let prefix = prefix_bytes(&header).len() as u64;
        let sections = header
            .sections(prefix)
            .ok_or_else(|| BookError::Format { path: path.clone(), reason: "array sizes overflow".into() })?;
        let pending = Pending::new(&path);
        // Read back too: the features are hashed as written ([`Writer::finish`]).
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(pending.tmp())
            .map_err(io_err)?;
        let (end, last) = sections[4];
        file.set_len(end + last).map_err(io_err)?;
        header.checksums[1] = xxh3_64(&label_bytes);
        file.write_all_at(&label_bytes, sections[1].0).map_err(io_err)?;
        for (k, bytes) in split_bytes.iter().enumerate() {
            header.checksums[2 + k] = xxh3_64(bytes);
            file.write_all_at(bytes, sections[2 + k].0).map_err(io_err)?;
        }
        Ok(Self { path, pending, file, header, prefix, sections })
    }

    fn write_features(&self, local: usize, row: &[u8]) -> Result<(), crate::DatasetError> {
        let at = self.sections[0].0 + (local * row.len()) as u64;
        self.file.write_all_at(row, at).map_err(|e| crate::DatasetError::io(self.pending.tmp(), e))
    }

    /// Hashes the features as written, writes the header and puts the file in place.
    fn finish(mut self) -> Result<(), BookError> {
        let path = self.path.clone();
        let tmp = self.pending.tmp().to_path_buf();
        let io_err = |error| BookError::Io { path: tmp.clone(), error };
        let (start, len) = self.sections[0];
        self.header.checksums[0] = hash_range(&self.file, start, len, |_| ()).map_err(io_err)?;
        let prefix = prefix_bytes(&self.header);
        if prefix.len() as u64 != self.prefix {
            return Err(BookError::Format { path, reason: "the header changed size while written".into() });
        }
        self.file.write_all_at(&prefix, 0).map_err(io_err)?;
        drop(self.file);
        self.pending.commit().map_err(|e| BookError::Io { path: e.path, error: e.source })
    }
}

/// xxh3 of `len` bytes of `file` from `start`, read in chunks, each also handed to `each`.
fn hash_range(file: &File, start: u64, len: u64, mut each: impl FnMut(&[u8])) -> io::Result<u64> {
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; CHUNK_BYTES.min(len as usize)];
    let mut done = 0u64;
    while done < len {
        let take = (len - done).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..take], start + done)?;
        hasher.update(&buf[..take]);
        each(&buf[..take]);
        done += take as u64;
    }
    Ok(hasher.digest())
}

/// What one worker reads from its part folder besides its local graph.
#[derive(Debug, Clone, PartialEq)]
pub struct PartRows {
    /// Input features of local ids `0..rows` (the `rows` asked of [`PartRows::read`]), row-major.
    pub features: Vec<f32>,
    pub num_features: usize,
    /// Labels of every local vertex.
    pub labels: Labels,
    /// Local ids of the part's primaries in the training, validation and test sets.
    pub splits: [Vec<u32>; 3],
    /// Size of the whole training set.
    pub global_train: usize,
}

impl PartRows {
    /// Reads `part-<lg.part()>.rows` of part folder `dir` for local graph `lg` of a book with
    /// `meta`, made from the dataset whose raw files have `dataset_fingerprint` and with
    /// `num_classes` classes, keeping the features of local ids `0..rows` only. Refuses a file
    /// of another part, book, cut or dataset, a truncated or corrupt one, naming the file and
    /// the field at fault.
    pub fn read(
        dir: &Path,
        lg: &LocalGraph,
        meta: &BookMeta,
        dataset_fingerprint: u64,
        num_classes: usize,
        rows: usize,
    ) -> Result<Self, BookError> {
        let path = rows_path(dir, lg.part());
        let format = |reason: String| BookError::Format { path: path.clone(), reason };
        let mismatch = |reason: String| BookError::Mismatch { path: path.clone(), reason };
        let io_err = |error| BookError::Io { path: path.clone(), error };
        let file = File::open(&path).map_err(io_err)?;
        let file_len = file.metadata().map_err(io_err)?.len();
        let mut head = [0u8; 16];
        file.read_exact_at(&mut head, 0).map_err(|_| format(format!("truncated: {file_len} bytes")))?;
        if head[..8] != MAGIC {
            return Err(format("not a Halo part rows file (bad magic bytes)".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != ROWS_VERSION {
            return Err(mismatch(format!("format version is {version}, this Halo reads version {ROWS_VERSION}")));
        }
        let header_len = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
        if header_len > MAX_HEADER_BYTES {
            return Err(format(format!("header of {header_len} bytes (corrupt)")));
        }
        let mut body = vec![0u8; header_len as usize + 8];
        file.read_exact_at(&mut body, 16).map_err(|_| format(format!("truncated: {file_len} bytes")))?;
        let (body, sum) = body.split_at(header_len as usize);
        if xxh3_64(body) != u64::from_le_bytes(sum.try_into().expect("8 bytes")) {
            return Err(format("header checksum mismatch (corrupt)".into()));
        }
        let (h, _): (RowsHeader, usize) =
            bincode::decode_from_slice(body, HEADER_CONFIG).map_err(|e| format(format!("header: {e}")))?;
        let expect = |field: &str, found: String, wanted: String| -> Result<(), BookError> {
            if found == wanted { Ok(()) } else { Err(mismatch(format!("{field} is {found}, expected {wanted}"))) }
        };
        if h.part != lg.part() as u64 {
            return Err(mismatch(format!("it holds part {}, read by rank {}", h.part, lg.part())));
        }
        expect("parts", h.parts.to_string(), meta.parts.to_string())?;
        expect("cut", h.cut.clone(), meta.cut.as_str().to_string())?;
        expect(
            "graph fingerprint",
            format!("{:016x}", h.graph_fingerprint),
            format!("{:016x}", meta.graph_fingerprint),
        )?;
        expect(
            "dataset fingerprint",
            format!("{:016x}", h.dataset_fingerprint),
            format!("{dataset_fingerprint:016x}"),
        )?;
        expect("local vertices", h.num_local.to_string(), lg.num_local().to_string())?;
        let sections = h.sections(16 + header_len as u64 + 8).ok_or_else(|| format("array sizes overflow".into()))?;
        let (end, last) = sections[4];
        if file_len != end + last {
            return Err(format(format!("{file_len} bytes, expected {} (truncated or overwritten)", end + last)));
        }
        let check = |k: usize, sum: u64| match sum == h.checksums[k] {
            true => Ok(()),
            false => Err(format(format!("{} checksum mismatch (corrupt)", SECTIONS[k]))),
        };
        let cols = h.num_features as usize;
        let keep = rows.min(lg.num_local()) * cols * 4;
        let (start, len) = sections[0];
        let mut features = Vec::with_capacity(keep / 4);
        let mut seen = 0usize;
        let sum = hash_range(&file, start, len, |chunk| {
            let take = keep.saturating_sub(seen).min(chunk.len());
            features.extend(chunk[..take].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))));
            seen += chunk.len();
        })
        .map_err(io_err)?;
        check(0, sum)?;
        let read_u32 = |k: usize| -> Result<Vec<u32>, BookError> {
            let (start, len) = sections[k];
            let mut out = Vec::with_capacity(len as usize / 4);
            let sum = hash_range(&file, start, len, |chunk| {
                out.extend(chunk.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))));
            })
            .map_err(io_err)?;
            check(k, sum)?;
            Ok(out)
        };
        let labels = match h.label_cols {
            0 => {
                let classes = read_u32(1)?;
                if let Some(&c) = classes.iter().find(|&&c| c != Labels::UNLABELLED && c as usize >= num_classes) {
                    return Err(mismatch(format!("class {c} is not below the dataset's {num_classes} classes")));
                }
                Labels::Classes(classes)
            }
            cols => {
                let values = read_u32(1)?.into_iter().map(f32::from_bits).collect();
                let shape = (lg.num_local(), cols as usize);
                Labels::MultiLabel(
                    ndarray::Array2::from_shape_vec(shape, values).map_err(|e| format(format!("labels: {e}")))?,
                )
            }
        };
        let splits = [read_u32(2)?, read_u32(3)?, read_u32(4)?];
        for (k, ids) in splits.iter().enumerate() {
            if let Some(&bad) = ids.iter().find(|&&l| !lg.is_primary(l as usize)) {
                return Err(format(format!(
                    "{} holds {bad}, not one of the {} primaries",
                    SECTIONS[2 + k],
                    lg.num_primary()
                )));
            }
        }
        Ok(Self { features, num_features: cols, labels, splits, global_train: h.global_train as usize })
    }
}
