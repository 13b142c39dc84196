//! File names of the OGB node-property raw layout and split discovery.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use super::error::DatasetError;

pub(crate) const EDGE: &str = "raw/edge.csv.gz";
pub(crate) const NODE_FEAT: &str = "raw/node-feat.csv.gz";
pub(crate) const EDGE_FEAT: &str = "raw/edge-feat.csv.gz";
pub(crate) const NODE_LABEL: &str = "raw/node-label.csv.gz";
pub(crate) const NUM_NODES: &str = "raw/num-node-list.csv.gz";
pub(crate) const NUM_EDGES: &str = "raw/num-edge-list.csv.gz";
pub(crate) const META: &str = "meta.json";
pub(crate) const SPLIT_DIR: &str = "split";
pub(crate) const SPLIT_PARTS: [&str; 3] = ["train", "valid", "test"];
/// Bytes read per call while hashing a source file.
const HASH_BUFFER_BYTES: usize = 1 << 20;

/// Every file whose contents feed the graph, features and labels (splits are read separately);
/// the binary cache records their sizes and content hashes.
pub(crate) const CACHED_SOURCES: [&str; 7] = [EDGE, NODE_FEAT, EDGE_FEAT, NODE_LABEL, NUM_NODES, NUM_EDGES, META];

/// `split/<name>/<part>.csv.gz`.
pub(crate) fn split_file(dir: &Path, name: &str, part: &str) -> PathBuf {
    dir.join(SPLIT_DIR).join(name).join(format!("{part}.csv.gz"))
}

/// Names of the sub-directories of `split/`, sorted.
pub(crate) fn available_splits(dir: &Path) -> Result<Vec<String>, DatasetError> {
    let split_dir = dir.join(SPLIT_DIR);
    let entries = match std::fs::read_dir(&split_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DatasetError::io(split_dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| DatasetError::io(&split_dir, e))?;
        if entry.path().is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The split to load: the requested one if present, else the only one there is.
pub(crate) fn choose_split(dir: &Path, requested: Option<&str>) -> Result<String, DatasetError> {
    let available = available_splits(dir)?;
    let split_dir = dir.join(SPLIT_DIR);
    match requested {
        Some(name) if available.iter().any(|a| a == name) => Ok(name.to_string()),
        Some(name) => Err(DatasetError::UnknownSplit { path: split_dir, name: name.to_string(), available }),
        None => match available.as_slice() {
            [] => Err(DatasetError::NoSplit { path: dir.to_path_buf() }),
            [only] => Ok(only.clone()),
            _ => Err(DatasetError::AmbiguousSplit { path: split_dir, choices: available }),
        },
    }
}

/// Identity of one source file for cache invalidation: its size and a hash of its contents
/// (xxh3, 64 bits), or its absence. Contents rather than modification times: an edit that keeps
/// the size and the mtime (a restored backup, a coarse-clock file system) must not serve stale
/// data.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) struct SourceStamp {
    pub name: String,
    pub present: bool,
    pub size: u64,
    pub xxh3: u64,
}

/// Stamps of every cached source, in [`CACHED_SOURCES`] order; the files are hashed in parallel.
pub(crate) fn source_stamps(dir: &Path) -> Result<Vec<SourceStamp>, DatasetError> {
    CACHED_SOURCES.par_iter().map(|&name| stamp(dir, name)).collect()
}

fn stamp(dir: &Path, name: &str) -> Result<SourceStamp, DatasetError> {
    let path = dir.join(name);
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(SourceStamp { name: name.to_string(), present: false, size: 0, xxh3: 0 });
        }
        Err(e) => return Err(DatasetError::io(path, e)),
    };
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; HASH_BUFFER_BYTES];
    let mut size = 0u64;
    loop {
        let got = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(DatasetError::io(path, e)),
        };
        hasher.update(&buf[..got]);
        size += got as u64;
    }
    Ok(SourceStamp { name: name.to_string(), present: true, size, xxh3: hasher.digest() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_choice() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(choose_split(dir.path(), None), Err(DatasetError::NoSplit { .. })));
        std::fs::create_dir_all(dir.path().join("split/public")).unwrap();
        assert_eq!(choose_split(dir.path(), None).unwrap(), "public");
        std::fs::create_dir_all(dir.path().join("split/random")).unwrap();
        let err = choose_split(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("public, random"), "{err}");
        assert_eq!(choose_split(dir.path(), Some("random")).unwrap(), "random");
        let err = choose_split(dir.path(), Some("time")).unwrap_err();
        assert!(matches!(err, DatasetError::UnknownSplit { .. }));
        assert!(err.to_string().contains("`time`") && err.to_string().contains("public, random"), "{err}");
    }
}
