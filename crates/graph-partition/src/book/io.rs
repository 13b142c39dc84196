//! On-disk layout of a partition book: `book.json` (metadata and a summary of every part)
//! and `part-<i>.bin` (bincode of one [`LocalGraph`] and its l-hop set, if any).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::local::LocalGraph;
use super::validate::check_part;
use super::{BookError, BookMeta, CutKind, LHopSets, PartitionBook};
use crate::Csr;

const FORMAT: &str = "halo-partition-book";
/// Version 2 added the graph's fingerprint to the metadata.
const VERSION: u32 = 2;
/// Leads every part file, so that a stray file is recognised as such.
const PART_MAGIC: u64 = 0x4841_4c4f_5041_5254; // "HALOPART"

/// `book.json`.
#[derive(Debug, Serialize, Deserialize)]
struct BookFile {
    format: String,
    version: u32,
    meta: BookMeta,
    /// The `hops` of the l-hop sets stored in the part files, if any.
    l_hop: Option<usize>,
    part_files: Vec<PartSummary>,
}

/// What `book.json` promises about a part file, checked against its contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PartSummary {
    file: String,
    num_local: usize,
    num_primary: usize,
    num_edges: usize,
}

impl PartSummary {
    fn of(lg: &LocalGraph) -> Self {
        Self {
            file: part_file_name(lg.part()),
            num_local: lg.num_local(),
            num_primary: lg.num_primary(),
            num_edges: lg.num_edges(),
        }
    }
}

fn part_file_name(part: usize) -> String {
    format!("part-{part}.bin")
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BookError + '_ {
    move |error| BookError::Io { path: path.to_path_buf(), error }
}

impl PartitionBook {
    /// Writes `book.json` and `part-<i>.bin` into `dir` (created if missing), and removes the
    /// part files (and rows) of an earlier book there that this one does not have, and its
    /// part folder manifest (`parts.json`).
    pub fn save(&self, dir: &Path) -> Result<(), BookError> {
        prepare_dir(dir)?;
        let mut summaries = Vec::with_capacity(self.parts.len());
        for (i, lg) in self.parts.iter().enumerate() {
            summaries.push(write_part(dir, lg, self.l_hop.as_ref().map(|l| l.nodes[i].as_slice()))?);
        }
        finish_book(dir, &self.meta, self.l_hop.as_ref().map(|l| l.hops), summaries)
    }

    /// [`PartitionBook::load`], then checks that the book was made for `graph` (vertex and
    /// edge counts, then [`Csr::fingerprint`]) and for `workers` workers (its number of parts;
    /// a feature-cut book's number of column ranges). Errors name `dir/book.json` and what
    /// differs.
    pub fn load_for(dir: &Path, graph: &Csr, workers: usize) -> Result<Self, BookError> {
        let book = Self::load(dir)?;
        let meta = &book.meta;
        let mismatch = |reason: String| Err(BookError::Mismatch { path: dir.join("book.json"), reason });
        if meta.num_nodes != graph.num_nodes() {
            return mismatch(format!("it is for {} vertices, the graph has {}", meta.num_nodes, graph.num_nodes()));
        }
        if meta.num_edges != graph.num_edges() {
            return mismatch(format!("it is for {} stored edges, the graph has {}", meta.num_edges, graph.num_edges()));
        }
        let fingerprint = graph.fingerprint();
        if meta.graph_fingerprint != fingerprint {
            return mismatch(format!(
                "it is for a graph with fingerprint {:016x}, this graph's is {fingerprint:016x} (same sizes, other edges)",
                meta.graph_fingerprint
            ));
        }
        if meta.parts != workers {
            return mismatch(format!("it has {} parts, the run has {workers} workers", meta.parts));
        }
        Ok(book)
    }

    /// Reads a book written by [`PartitionBook::save`] and validates it completely; errors
    /// name the file at fault.
    pub fn load(dir: &Path) -> Result<Self, BookError> {
        let meta_path = dir.join("book.json");
        let file = read_book_file(dir)?;
        let mut parts = Vec::with_capacity(file.part_files.len());
        let mut l_hop_nodes = Vec::new();
        for i in 0..file.part_files.len() {
            let (lg, l_hop) = read_part(dir, i, &file)?;
            parts.push(lg);
            l_hop_nodes.extend(l_hop);
        }
        let l_hop = file.l_hop.map(|hops| LHopSets { hops, nodes: l_hop_nodes });
        let book = Self { meta: file.meta, parts, l_hop };
        book.validate().map_err(|error| BookError::Invalid {
            path: error.part.map_or(meta_path.clone(), |p| dir.join(part_file_name(p))),
            error,
        })?;
        Ok(book)
    }

    /// Reads `book.json` of `dir` and part `part`'s file alone, for a worker that holds no
    /// other part (a part folder's rank `part`): the part is checked on its own, not against the
    /// others ([`PartitionBook::load`] checks the whole book).
    pub fn load_part(dir: &Path, part: usize) -> Result<(BookMeta, LocalGraph), BookError> {
        let file = read_book_file(dir)?;
        if part >= file.part_files.len() {
            return Err(BookError::Mismatch {
                path: dir.join("book.json"),
                reason: format!("it has {} part files, rank {part} has none to read", file.part_files.len()),
            });
        }
        let (lg, _) = read_part(dir, part, &file)?;
        Ok((file.meta, lg))
    }
}

/// Creates `dir` if missing and removes its part folder manifest (`parts.json`): a part
/// folder's rows belong to the book they were written with.
pub(super) fn prepare_dir(dir: &Path) -> Result<(), BookError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    super::rows::remove_manifest(dir)
}

/// Writes `part-<i>.bin` of part `lg` (with its l-hop set, if any) into `dir`; returns what
/// `book.json` says of it.
pub(super) fn write_part(dir: &Path, lg: &LocalGraph, l_hop: Option<&[u32]>) -> Result<PartSummary, BookError> {
    let path = dir.join(part_file_name(lg.part()));
    let mut out = BufWriter::new(File::create(&path).map_err(io_err(&path))?);
    bincode::encode_into_std_write((PART_MAGIC, lg, l_hop), &mut out, bincode::config::standard())
        .map_err(|error| BookError::Encode { path: path.clone(), error })?;
    out.flush().map_err(io_err(&path))?;
    Ok(PartSummary::of(lg))
}

/// Writes `book.json` (the book's `meta`, the `hops` of its l-hop sets, and the summaries of
/// its part files, in part order) into `dir`, then removes the part files of an earlier book
/// there that this one does not have.
pub(super) fn finish_book(
    dir: &Path,
    meta: &BookMeta,
    hops: Option<usize>,
    part_files: Vec<PartSummary>,
) -> Result<(), BookError> {
    let parts = part_files.len();
    let file = BookFile { format: FORMAT.into(), version: VERSION, meta: meta.clone(), l_hop: hops, part_files };
    let path = dir.join("book.json");
    let json = serde_json::to_vec_pretty(&file).map_err(|error| BookError::Json { path: path.clone(), error })?;
    std::fs::write(&path, json).map_err(io_err(&path))?;
    remove_parts_from(dir, parts)
}

/// Reads and checks `book.json` of `dir`: format, version, and a part file per part.
fn read_book_file(dir: &Path) -> Result<BookFile, BookError> {
    let meta_path = dir.join("book.json");
    let text = std::fs::read(&meta_path).map_err(io_err(&meta_path))?;
    let file: BookFile =
        serde_json::from_slice(&text).map_err(|error| BookError::Json { path: meta_path.clone(), error })?;
    let format_error = |reason: String| BookError::Format { path: meta_path.clone(), reason };
    if file.format != FORMAT || file.version != VERSION {
        return Err(format_error(format!(
            "format {:?} version {}, expected {FORMAT:?} version {VERSION}",
            file.format, file.version
        )));
    }
    let expected_files = if file.meta.cut == CutKind::FeatureCut { 0 } else { file.meta.parts };
    if file.part_files.len() != expected_files {
        return Err(format_error(format!("lists {} part files for {expected_files}", file.part_files.len())));
    }
    if let Some((i, summary)) = file.part_files.iter().enumerate().find(|(i, s)| s.file != part_file_name(*i)) {
        return Err(format_error(format!("part {i} is listed as {:?}", summary.file)));
    }
    Ok(file)
}

/// Decodes part `index` of `dir` and checks it against its summary in `book.json`.
fn read_part(dir: &Path, index: usize, file: &BookFile) -> Result<(LocalGraph, Option<Vec<u32>>), BookError> {
    let path = &dir.join(&file.part_files[index].file);
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let format_error = |reason: String| BookError::Format { path: path.to_path_buf(), reason };
    let ((magic, lg, l_hop), used): ((u64, LocalGraph, Option<Vec<u32>>), usize) =
        decode_bounded(&bytes).map_err(|error| BookError::Decode { path: path.to_path_buf(), error })?;
    if magic != PART_MAGIC {
        return Err(format_error("not a Halo partition-book part file".into()));
    }
    if used != bytes.len() {
        return Err(format_error(format!("{} trailing bytes", bytes.len() - used)));
    }
    if PartSummary::of(&lg) != file.part_files[index] {
        return Err(format_error(format!("contents do not match book.json's summary {:?}", file.part_files[index])));
    }
    if l_hop.is_some() != file.l_hop.is_some() {
        return Err(format_error("l-hop set presence disagrees with book.json".into()));
    }
    check_part(&lg, index, file.meta.cut, file.meta.parts, file.meta.num_nodes)
        .map_err(|error| BookError::Invalid { path: path.to_path_buf(), error })?;
    Ok((lg, l_hop))
}

/// Decodes with bincode's allocation limit set from the input size: a decoded part takes at
/// most a small multiple of its encoded size, so a corrupt length prefix fails cleanly instead
/// of attempting a huge allocation. bincode takes the limit as a const parameter, hence the
/// dispatch over powers of four.
fn decode_bounded<T: bincode::Decode<()>>(bytes: &[u8]) -> Result<(T, usize), bincode::error::DecodeError> {
    fn with_limit<T: bincode::Decode<()>, const LIMIT: usize>(
        bytes: &[u8],
    ) -> Result<(T, usize), bincode::error::DecodeError> {
        bincode::decode_from_slice(bytes, bincode::config::standard().with_limit::<LIMIT>())
    }
    // Varints shrink a u64 to one byte and an empty Vec header (24 bytes in memory) to one.
    let budget = bytes.len().saturating_mul(32).max(1 << 20);
    let bits = usize::BITS - (budget - 1).leading_zeros();
    macro_rules! dispatch {
        ($($b:literal)*) => {
            match bits.div_ceil(2) * 2 {
                $($b => with_limit::<T, { 1usize << $b }>(bytes),)*
                _ => Err(bincode::error::DecodeError::LimitExceeded),
            }
        };
    }
    dispatch!(20 22 24 26 28 30 32 34 36 38 40 42 44 46 48)
}

/// Removes `part-<i>.bin` and `part-<i>.rows` files with `i >= parts` from `dir`; other files
/// are left alone.
fn remove_parts_from(dir: &Path, parts: usize) -> Result<(), BookError> {
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let index = name.to_str().and_then(|n| {
            let n = n.strip_prefix("part-")?;
            n.strip_suffix(".bin").or_else(|| n.strip_suffix(".rows"))?.parse::<usize>().ok()
        });
        let ours = |i: usize| [part_file_name(i), format!("part-{i}.rows")].iter().any(|f| name.to_str() == Some(f));
        if index.is_some_and(|i| i >= parts && ours(i)) {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(io_err(&path))?;
        }
    }
    Ok(())
}

/// Where [`PartitionBook::save`] puts part `part` inside `dir`.
pub fn part_path(dir: &Path, part: usize) -> PathBuf {
    dir.join(part_file_name(part))
}
