//! Binary cache of a parsed dataset, `DIR/processed/halo-cache-v1.bin`, so a second load reads
//! raw little-endian arrays instead of parsing gzip CSV.
//!
//! Format: magic `HALOCSH\0`, format version (u32), header length (u64), a bincode header
//! (the size and mtime of every source file, array sizes, per-array checksums), then the
//! arrays: `indptr` (u64), `indices` (u32), features (f32, row-major), labels (u32 classes or
//! f32 rows). A cache whose sources changed is silently rebuilt; one that is truncated, fails
//! a checksum or holds an invalid graph is reported with `tracing::warn` and rebuilt. The
//! split is not cached: split files are small and any of them can be chosen per load.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use ndarray::Array2;
use rayon::prelude::*;

use super::error::DatasetError;
use super::layout::{self, SourceStamp};
use super::{GraphData, Labels, LoadSource};
use crate::csr::Csr;
use crate::rng::mix64;

/// Where the cache lives, relative to the dataset directory.
pub(crate) const CACHE_FILE: &str = "processed/halo-cache-v1.bin";
const MAGIC: [u8; 8] = *b"HALOCSH\0";
const VERSION: u32 = 1;
const MAX_HEADER_BYTES: u64 = 1 << 20;
/// Elements converted per I/O call.
const CHUNK: usize = 1 << 16;

/// Why a cache file was not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("corrupt cache: {0}")]
    Corrupt(String),
    #[error("the dataset directory is read-only")]
    ReadOnly,
}

#[derive(Debug, bincode::Encode, bincode::Decode)]
struct Header {
    sources: Vec<SourceStamp>,
    name: String,
    num_nodes: u64,
    num_entries: u64,
    num_features: u64,
    num_classes: u64,
    /// 0 for single-label classes, else the width of the multi-label rows.
    label_cols: u64,
    /// Checksums of indptr, indices, features and labels.
    checksums: [u64; 4],
}

impl Header {
    fn payload_bytes(&self) -> Option<u64> {
        let n = self.num_nodes;
        let label_bytes =
            if self.label_cols == 0 { n.checked_mul(4)? } else { n.checked_mul(self.label_cols)?.checked_mul(4)? };
        (n.checked_add(1)?.checked_mul(8)?)
            .checked_add(self.num_entries.checked_mul(4)?)?
            .checked_add(n.checked_mul(self.num_features)?.checked_mul(4)?)?
            .checked_add(label_bytes)
    }
}

/// Reads the cache if it is valid for the current sources; otherwise calls `build` (the CSV
/// path) and writes a fresh cache, warning instead of failing when that is impossible.
pub(crate) fn load_or_build(
    dir: &Path,
    build: impl FnOnce() -> Result<GraphData, DatasetError>,
) -> Result<(GraphData, LoadSource), DatasetError> {
    let stamps = layout::source_stamps(dir)?;
    let path = dir.join(CACHE_FILE);
    match read(&path, &stamps) {
        Ok(Some(data)) => {
            tracing::info!(path = %path.display(), "loaded dataset from the binary cache");
            return Ok((data, LoadSource::Cache));
        }
        Ok(None) => tracing::debug!(path = %path.display(), "no up-to-date dataset cache"),
        Err(err) => tracing::warn!("{}: ignoring dataset cache ({err}); re-reading the CSV files", path.display()),
    }
    let data = build()?;
    if let Err(err) = write(dir, &path, &stamps, &data) {
        tracing::warn!("{}: not writing the dataset cache: {err}", path.display());
    }
    Ok((data, LoadSource::Csv))
}

/// `Ok(None)` when there is no cache or it belongs to other sources or another format version.
fn read(path: &Path, stamps: &[SourceStamp]) -> Result<Option<GraphData>, CacheError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let file_len = file.metadata()?.len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut magic = [0u8; 8];
    let mut version = [0u8; 4];
    let mut header_len = [0u8; 8];
    read_or_truncated(&mut r, &mut magic)?;
    if magic != MAGIC {
        return Err(CacheError::Corrupt("bad magic bytes".into()));
    }
    read_or_truncated(&mut r, &mut version)?;
    if u32::from_le_bytes(version) != VERSION {
        return Ok(None);
    }
    read_or_truncated(&mut r, &mut header_len)?;
    let header_len = u64::from_le_bytes(header_len);
    if header_len > MAX_HEADER_BYTES {
        return Err(CacheError::Corrupt(format!("header of {header_len} bytes")));
    }
    let mut header_bytes = vec![0u8; header_len as usize];
    read_or_truncated(&mut r, &mut header_bytes)?;
    let (header, _): (Header, usize) = bincode::decode_from_slice(&header_bytes, bincode::config::standard())
        .map_err(|e| CacheError::Corrupt(format!("header: {e}")))?;
    if header.sources != stamps {
        return Ok(None);
    }
    let expected = header
        .payload_bytes()
        .and_then(|p| p.checked_add(20 + header_len))
        .ok_or_else(|| CacheError::Corrupt("array sizes overflow".into()))?;
    if file_len != expected {
        return Err(CacheError::Corrupt(format!("{file_len} bytes, expected {expected} (truncated or overwritten)")));
    }
    // Every size below was checked against the file length, so allocations are bounded by it.
    let n = header.num_nodes as usize;
    let indptr: Vec<u64> = read_array(&mut r, n + 1)?;
    let indices: Vec<u32> = read_array(&mut r, header.num_entries as usize)?;
    let features: Vec<f32> = read_array(&mut r, n * header.num_features as usize)?;
    let labels = if header.label_cols == 0 {
        let classes: Vec<u32> = read_array(&mut r, n)?;
        verify(checksum(&classes), header.checksums[3], "labels")?;
        if let Some(&c) = classes.iter().find(|&&c| c != Labels::UNLABELLED && c as u64 >= header.num_classes) {
            return Err(CacheError::Corrupt(format!("class {c} >= num_classes {}", header.num_classes)));
        }
        Labels::Classes(classes)
    } else {
        let cols = header.label_cols as usize;
        let values: Vec<f32> = read_array(&mut r, n * cols)?;
        verify(checksum(&values), header.checksums[3], "labels")?;
        Labels::MultiLabel(Array2::from_shape_vec((n, cols), values).expect("length read for this shape"))
    };
    verify(checksum(&indptr), header.checksums[0], "indptr")?;
    verify(checksum(&indices), header.checksums[1], "indices")?;
    verify(checksum(&features), header.checksums[2], "features")?;
    let graph = Csr::try_new(n, n, indptr, indices).map_err(|e| CacheError::Corrupt(format!("graph: {e}")))?;
    let features = Array2::from_shape_vec((n, header.num_features as usize), features).expect("length read for shape");
    Ok(Some(GraphData { name: header.name, graph, features, labels, num_classes: header.num_classes as usize }))
}

fn read_or_truncated(r: &mut impl Read, buf: &mut [u8]) -> Result<(), CacheError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => CacheError::Corrupt("truncated".into()),
        _ => CacheError::Io(e),
    })
}

fn verify(actual: u64, expected: u64, what: &str) -> Result<(), CacheError> {
    if actual != expected {
        return Err(CacheError::Corrupt(format!("{what} checksum mismatch")));
    }
    Ok(())
}

/// Writes the cache atomically (temporary file, then rename).
fn write(dir: &Path, path: &Path, stamps: &[SourceStamp], data: &GraphData) -> Result<(), CacheError> {
    // Root ignores permission bits, so honour a directory marked read-only explicitly.
    if std::fs::metadata(dir)?.permissions().readonly() {
        return Err(CacheError::ReadOnly);
    }
    std::fs::create_dir_all(path.parent().expect("cache path has a parent"))?;
    let tmp = PathBuf::from(format!("{}.tmp{}", path.display(), std::process::id()));
    let result = write_file(&tmp, stamps, data).and_then(|()| Ok(std::fs::rename(&tmp, path)?));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_file(tmp: &Path, stamps: &[SourceStamp], data: &GraphData) -> Result<(), CacheError> {
    let features = data.features.as_standard_layout();
    let features = features.as_slice().expect("standard layout is contiguous");
    let multi = match &data.labels {
        Labels::MultiLabel(targets) => Some(targets.as_standard_layout()),
        Labels::Classes(_) => None,
    };
    let label_values: &[f32] = multi.as_ref().map_or(&[], |m| m.as_slice().expect("standard layout is contiguous"));
    let label_classes: &[u32] = match &data.labels {
        Labels::Classes(classes) => classes,
        Labels::MultiLabel(_) => &[],
    };
    let label_cols = multi.as_ref().map_or(0, |m| m.ncols() as u64);
    let header = Header {
        sources: stamps.to_vec(),
        name: data.name.clone(),
        num_nodes: data.graph.num_nodes() as u64,
        num_entries: data.graph.num_edges() as u64,
        num_features: data.features.ncols() as u64,
        num_classes: data.num_classes as u64,
        label_cols,
        checksums: [
            checksum(data.graph.indptr()),
            checksum(data.graph.indices()),
            checksum(features),
            if label_cols == 0 { checksum(label_classes) } else { checksum(label_values) },
        ],
    };
    let header_bytes = bincode::encode_to_vec(&header, bincode::config::standard())
        .map_err(|e| CacheError::Io(io::Error::other(e)))?;
    let mut w = BufWriter::with_capacity(1 << 20, File::create(tmp)?);
    w.write_all(&MAGIC)?;
    w.write_all(&VERSION.to_le_bytes())?;
    w.write_all(&(header_bytes.len() as u64).to_le_bytes())?;
    w.write_all(&header_bytes)?;
    write_array(&mut w, data.graph.indptr())?;
    write_array(&mut w, data.graph.indices())?;
    write_array(&mut w, features)?;
    write_array(&mut w, label_classes)?;
    write_array(&mut w, label_values)?;
    // No fsync: a cache torn by a crash fails validation and is rebuilt.
    w.into_inner().map_err(|e| e.into_error())?;
    Ok(())
}

/// Plain little-endian numbers the cache stores.
trait LeNumber: Copy + Send + Sync {
    const SIZE: usize;
    fn put(self, out: &mut [u8]);
    fn get(bytes: &[u8]) -> Self;
    fn bits(self) -> u64;
}

macro_rules! le_number {
    ($t:ty, $size:expr, $bits:expr) => {
        impl LeNumber for $t {
            const SIZE: usize = $size;
            fn put(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("exact chunk"))
            }
            fn bits(self) -> u64 {
                $bits(self)
            }
        }
    };
}

le_number!(u32, 4, |x: u32| x as u64);
le_number!(u64, 8, |x: u64| x);
le_number!(f32, 4, |x: f32| x.to_bits() as u64);

fn write_array<T: LeNumber>(w: &mut impl Write, values: &[T]) -> io::Result<()> {
    let mut buf = vec![0u8; CHUNK.min(values.len()) * T::SIZE];
    for chunk in values.chunks(CHUNK) {
        let bytes = &mut buf[..chunk.len() * T::SIZE];
        for (v, out) in chunk.iter().zip(bytes.chunks_exact_mut(T::SIZE)) {
            v.put(out);
        }
        w.write_all(bytes)?;
    }
    Ok(())
}

fn read_array<T: LeNumber>(r: &mut impl Read, len: usize) -> Result<Vec<T>, CacheError> {
    let mut out = Vec::with_capacity(len);
    let mut buf = vec![0u8; CHUNK.min(len) * T::SIZE];
    while out.len() < len {
        let take = (len - out.len()).min(CHUNK);
        let bytes = &mut buf[..take * T::SIZE];
        read_or_truncated(r, bytes)?;
        out.extend(bytes.chunks_exact(T::SIZE).map(T::get));
    }
    Ok(out)
}

/// A fast 64-bit checksum (four independent multiply-xor lanes per chunk, chunks in parallel)
/// that catches flipped or overwritten bytes; not cryptographic.
fn checksum<T: LeNumber>(values: &[T]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let chunk_sums: Vec<u64> = values
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut lanes = [1u64, 2, 3, 4];
            let quads = chunk.chunks_exact(4);
            let tail = quads.remainder();
            for quad in quads {
                for (lane, v) in lanes.iter_mut().zip(quad) {
                    *lane = (*lane ^ v.bits()).wrapping_mul(K).rotate_left(31);
                }
            }
            for (lane, v) in lanes.iter_mut().zip(tail) {
                *lane = (*lane ^ v.bits()).wrapping_mul(K).rotate_left(31);
            }
            lanes.iter().fold(chunk.len() as u64, |h, &l| mix64(h ^ l))
        })
        .collect();
    chunk_sums.iter().fold(values.len() as u64, |h, &c| mix64(h.rotate_left(7) ^ c))
}
