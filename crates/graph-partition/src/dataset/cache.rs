//! Binary cache of a parsed dataset, `DIR/processed/halo-cache-v2.bin` (or a file in the
//! configured cache directory), so a second load reads raw little-endian arrays instead of
//! parsing gzip CSV.
//!
//! Format (version 3): magic `HALOCSH\0`, format version (u32), header length (u64), a bincode
//! header (the size and xxh3 content hash of every source file, array sizes, per-array
//! checksums, whether any feature is non-finite) and its xxh3 (u64), then the arrays: `indptr` (u64), `indices` (u32),
//! features (f32, row-major), labels (u32 classes or f32 rows). A cache whose sources changed
//! is silently rebuilt; one that is truncated, fails a checksum or holds an invalid graph is
//! reported with `tracing::warn` and rebuilt. The split is not cached: split files are small
//! and any of them can be chosen per load.
//!
//! Every load hashes the raw files (they are read once, compressed, at memory speed), which
//! costs a fraction of reading the cache itself; `docs/BENCHMARKS.md` has the figures.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use ndarray::Array2;
use rayon::prelude::*;
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use super::error::DatasetError;
use super::layout::{self, SourceStamp};
use super::{CacheMode, GraphData, Labels, LoadOptions, LoadSource};
use crate::csr::Csr;
use crate::rng::mix64;

/// Where the cache lives by default, relative to the dataset directory.
pub(crate) const CACHE_FILE: &str = "processed/halo-cache-v2.bin";
const MAGIC: [u8; 8] = *b"HALOCSH\0";
/// 3: the header carries its own checksum (the name and class count were unchecked in 2).
const VERSION: u32 = 3;
const MAX_HEADER_BYTES: u64 = 1 << 20;
/// Elements converted per I/O call.
const CHUNK: usize = 1 << 16;

/// Why a cache file was not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("corrupt cache: {0}")]
    Corrupt(String),
    #[error("the directory is read-only")]
    ReadOnly,
    #[error("{}: {}", .0, .0.source)]
    Write(#[from] crate::fs::WriteError),
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
    /// Whether a feature is NaN or infinite (only a load that allows them may use the cache).
    nonfinite_features: bool,
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

/// The cache file of dataset directory `dir` (see [`super::Dataset::cache_path`]).
pub(crate) fn cache_path(dir: &Path, cache_dir: Option<&Path>) -> PathBuf {
    let Some(cache_dir) = cache_dir else { return dir.join(CACHE_FILE) };
    let resolved = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let name = resolved.file_name().map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
    let key = xxh3_64(resolved.as_os_str().as_encoded_bytes());
    cache_dir.join(format!("{name}-{key:016x}-v{VERSION}.halo-cache"))
}

/// One hash over every stamp (see [`super::Dataset::source_fingerprint`]).
pub(crate) fn fingerprint(stamps: &[SourceStamp]) -> u64 {
    let mut hasher = Xxh3::new();
    for stamp in stamps {
        hasher.update(stamp.name.as_bytes());
        hasher.update(&[u8::from(stamp.present)]);
        hasher.update(&stamp.size.to_le_bytes());
        hasher.update(&stamp.xxh3.to_le_bytes());
    }
    hasher.digest()
}

/// With [`CacheMode::Use`], reads the cache if it is valid for the current sources (and holds
/// no non-finite feature the load would refuse); otherwise calls `build` (the CSV path) and
/// writes a fresh cache, warning instead of failing when that is impossible.
pub(crate) fn load_or_build(
    dir: &Path,
    opts: &LoadOptions,
    build: impl FnOnce() -> Result<GraphData, DatasetError>,
) -> Result<(GraphData, LoadSource), DatasetError> {
    let start = std::time::Instant::now();
    let stamps = layout::source_stamps(dir)?;
    let hashed: u64 = stamps.iter().map(|s| s.size).sum();
    tracing::debug!("hashed {hashed} bytes of raw files in {:.3?}", start.elapsed());
    let path = cache_path(dir, opts.cache_dir.as_deref());
    if opts.cache == CacheMode::Use {
        match read(&path, &stamps) {
            // The CSV path finds the first non-finite value and names its file and line.
            Ok(Some((_, true))) if !opts.allow_nonfinite => {
                tracing::debug!(path = %path.display(), "the cache holds non-finite features; re-reading the CSV files");
            }
            Ok(Some((data, _))) => {
                tracing::info!(path = %path.display(), "loaded dataset from the binary cache");
                return Ok((data, LoadSource::Cache));
            }
            Ok(None) => tracing::debug!(path = %path.display(), "no up-to-date dataset cache"),
            Err(err) => tracing::warn!("{}: ignoring dataset cache ({err}); re-reading the CSV files", path.display()),
        }
    }
    let data = build()?;
    // The directory that must be writable: the dataset's own, or the configured cache directory.
    let owner = opts.cache_dir.as_deref().unwrap_or(dir);
    if let Err(err) = write(owner, &path, &stamps, &data) {
        tracing::warn!("{}: not writing the dataset cache: {err}", path.display());
    }
    Ok((data, LoadSource::Csv))
}

/// `Ok(None)` when there is no cache or it belongs to other sources or another format version;
/// otherwise the data and whether any feature is non-finite.
fn read(path: &Path, stamps: &[SourceStamp]) -> Result<Option<(GraphData, bool)>, CacheError> {
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
    let mut header_sum = [0u8; 8];
    read_or_truncated(&mut r, &mut header_sum)?;
    verify(xxh3_64(&header_bytes), u64::from_le_bytes(header_sum), "header")?;
    let config = bincode::config::standard().with_limit::<{ MAX_HEADER_BYTES as usize }>();
    let (header, _): (Header, usize) =
        bincode::decode_from_slice(&header_bytes, config).map_err(|e| CacheError::Corrupt(format!("header: {e}")))?;
    if header.sources != stamps {
        return Ok(None);
    }
    let expected = header
        .payload_bytes()
        .and_then(|p| p.checked_add(28 + header_len))
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
    let data = GraphData { name: header.name, graph, features, labels, num_classes: header.num_classes as usize };
    Ok(Some((data, header.nonfinite_features)))
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

/// Writes the cache atomically ([`crate::fs::write_atomic`]), unless `owner`, the directory the
/// cache belongs in, is marked read-only.
fn write(owner: &Path, path: &Path, stamps: &[SourceStamp], data: &GraphData) -> Result<(), CacheError> {
    // Root ignores permission bits, so honour a directory marked read-only explicitly.
    match std::fs::metadata(owner) {
        Ok(meta) if meta.permissions().readonly() => return Err(CacheError::ReadOnly),
        // A cache directory that does not exist yet is created below.
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    std::fs::create_dir_all(path.parent().expect("cache path has a parent"))?;
    Ok(crate::fs::write_atomic(path, |tmp| write_file(tmp, stamps, data))?)
}

fn write_file(tmp: &Path, stamps: &[SourceStamp], data: &GraphData) -> io::Result<()> {
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
        nonfinite_features: features.par_iter().any(|x| !x.is_finite()),
    };
    let header_bytes = bincode::encode_to_vec(&header, bincode::config::standard()).map_err(io::Error::other)?;
    let mut w = BufWriter::with_capacity(1 << 20, File::create(tmp)?);
    w.write_all(&MAGIC)?;
    w.write_all(&VERSION.to_le_bytes())?;
    w.write_all(&(header_bytes.len() as u64).to_le_bytes())?;
    w.write_all(&header_bytes)?;
    w.write_all(&xxh3_64(&header_bytes).to_le_bytes())?;
    write_array(&mut w, data.graph.indptr())?;
    write_array(&mut w, data.graph.indices())?;
    write_array(&mut w, features)?;
    write_array(&mut w, label_classes)?;
    write_array(&mut w, label_values)?;
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
    // Features and adjacency are read at random rows: huge pages where they are large.
    let mut out = crate::pages::huge_capacity(len);
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
