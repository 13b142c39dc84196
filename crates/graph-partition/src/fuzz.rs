//! Fuzzing of every file this crate parses, on stable Rust: proptest mutates valid files
//! (byte overwrites, then a cut) and the loader must answer with the data or an error that
//! names the file, never a panic or an allocation the file's size does not justify. Targets:
//! the OGB CSV files, the binary dataset cache, partition-book files and `.npz` imports. 5k inputs per target
//! by default; `HALO_FUZZ_CASES=100000` is the long run (`docs/RELIABILITY.md`).

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::Index;

use crate::book::PartitionBook;
use crate::dataset::npy::NpzWriter;
use crate::dataset::{CacheMode, ImportOptions, LoadOptions, import};
use crate::partition::Partition;
use crate::{Dataset, SynthConfig};

fn cases() -> u32 {
    std::env::var("HALO_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
}

/// Overwrites bytes of `bytes` at the given places, then keeps a prefix of it when `cut` asks.
fn mutate(mut bytes: Vec<u8>, edits: &[(Index, u8)], cut: Option<Index>) -> Vec<u8> {
    if !bytes.is_empty() {
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = *value;
        }
    }
    if let Some(cut) = cut {
        bytes.truncate(cut.index(bytes.len() + 1));
    }
    bytes
}

fn edits() -> impl Strategy<Value = (Vec<(Index, u8)>, Option<Index>)> {
    (proptest::collection::vec((any::<Index>(), any::<u8>()), 0..6), proptest::option::of(any::<Index>()))
}

/// A small dataset written in the OGB raw layout under a fresh directory.
fn ogb_dir() -> (tempfile::TempDir, Dataset) {
    let dataset =
        SynthConfig { nodes: 40, avg_degree: 4.0, features: 3, classes: 3, ..Default::default() }.generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    dataset.write_ogb(dir.path()).unwrap();
    (dir, dataset)
}

/// Every file under `dir`, recursively, in a stable order.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { out.extend(files_under(&path)) } else { out.push(path) }
    }
    out.sort();
    out
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut out).unwrap();
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut encoder, bytes).unwrap();
    encoder.finish().unwrap()
}

/// A 4-node graph as PyG users export it, stored or deflated.
fn npz_bytes(compressed: bool) -> Vec<u8> {
    let mut w = NpzWriter::new(std::io::Cursor::new(Vec::new()), compressed);
    w.add("edge_index", &[2, 4], &[0i64, 1, 2, 3, 1, 2, 3, 0]).unwrap();
    w.add("x", &[4, 2], &[0.5f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
    w.add("y", &[4], &[0i64, 1, 0, 1]).unwrap();
    w.add("train_mask", &[4], &[true, true, false, false]).unwrap();
    w.add("val_mask", &[4], &[false, false, true, false]).unwrap();
    w.add("test_mask", &[4], &[false, false, false, true]).unwrap();
    w.finish().unwrap().into_inner()
}

/// Writes `contents` to `path` for one load, then puts the original back.
fn with_file<T>(path: &Path, contents: &[u8], f: impl FnOnce() -> T) -> T {
    let original = std::fs::read(path).unwrap();
    std::fs::write(path, contents).unwrap();
    let out = f();
    std::fs::write(path, original).unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated CSV text inside a raw file (decompressed, mutated, compressed again, so the
    /// parser sees it) or a mutated gzip stream itself.
    #[test]
    fn ogb_files_load_or_name_the_file(file in any::<Index>(), (e, cut) in edits(), raw_gzip in any::<bool>()) {
        thread_local! { static DIR: (tempfile::TempDir, Dataset) = ogb_dir(); }
        DIR.with(|(dir, _)| {
            let files = files_under(dir.path());
            let path = &files[file.index(files.len())];
            let original = std::fs::read(path).unwrap();
            let gz = path.extension().is_some_and(|x| x == "gz");
            let contents = if gz && !raw_gzip { gzip(&mutate(gunzip(&original), &e, cut)) } else { mutate(original, &e, cut) };
            let opts = LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() };
            let loaded = with_file(path, &contents, || Dataset::load(dir.path(), &opts));
            if let Err(err) = loaded {
                let msg = err.to_string();
                prop_assert!(msg.contains(&dir.path().display().to_string()), "{}: {msg}", path.display());
            }
            Ok(())
        })?;
    }

    /// A mutated binary cache is either read back exactly or ignored for the CSV files: the
    /// dataset is the same either way.
    #[test]
    fn a_mutated_cache_never_changes_the_dataset((e, cut) in edits()) {
        thread_local! {
            static CACHED: (tempfile::TempDir, tempfile::TempDir, Dataset, PathBuf) = {
                let (dir, _) = ogb_dir();
                let cache = tempfile::tempdir().unwrap();
                let opts = LoadOptions { cache_dir: Some(cache.path().to_path_buf()), ..LoadOptions::default() };
                let dataset = Dataset::load(dir.path(), &opts).unwrap();
                let file = files_under(cache.path()).pop().expect("a cache file");
                (dir, cache, dataset, file)
            };
        }
        CACHED.with(|(dir, cache, dataset, file)| {
            let contents = mutate(std::fs::read(file).unwrap(), &e, cut);
            let opts = LoadOptions { cache_dir: Some(cache.path().to_path_buf()), ..LoadOptions::default() };
            // A rejected cache is rewritten by the load; put the mutation back each time.
            let loaded = with_file(file, &contents, || Dataset::load(dir.path(), &opts)).unwrap();
            prop_assert!(loaded == *dataset);
            Ok(())
        })?;
    }

    /// A mutated `.npz` imports into a dataset that loads, or fails naming the file and leaves
    /// no dataset.
    #[test]
    fn npz_imports_or_names_the_file(compressed in any::<bool>(), (e, cut) in edits()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.npz");
        std::fs::write(&path, mutate(npz_bytes(compressed), &e, cut)).unwrap();
        let out = dir.path().join("out");
        match import(&path, &out, &ImportOptions::default()) {
            Ok(_) => {
                let opts = LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() };
                prop_assert!(Dataset::load(&out, &opts).is_ok());
            }
            Err(err) => {
                let msg = err.to_string();
                prop_assert!(msg.contains(&path.display().to_string()), "{msg}");
                prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "{}", msg);
            }
        }
    }

    /// Mutated `book.json` or part files.
    #[test]
    fn partition_books_load_or_name_the_file(file in any::<Index>(), (e, cut) in edits()) {
        thread_local! {
            static BOOK: tempfile::TempDir = {
                let dataset = SynthConfig { nodes: 30, avg_degree: 4.0, ..Default::default() }.generate().unwrap();
                let owner = (0..30u32).map(|v| v % 3).collect();
                let book = PartitionBook::build(&dataset.graph, &Partition::EdgeCut { parts: 3, owner }).unwrap();
                let dir = tempfile::tempdir().unwrap();
                book.save(dir.path()).unwrap();
                dir
            };
        }
        BOOK.with(|dir| {
            let files = files_under(dir.path());
            let path = &files[file.index(files.len())];
            let contents = mutate(std::fs::read(path).unwrap(), &e, cut);
            if let Err(err) = with_file(path, &contents, || PartitionBook::load(dir.path())) {
                let msg = err.to_string();
                prop_assert!(msg.contains(&dir.path().display().to_string()), "{}: {msg}", path.display());
            }
            Ok(())
        })?;
    }
}

/// Regression of the fuzzer's first find: a byte of the cache header's dataset name (or class
/// count), which no checksum covered, changed the loaded dataset. The header has its own
/// checksum since cache version 3.
#[test]
fn a_cache_header_edit_is_caught() {
    let (dir, _) = ogb_dir();
    let cache = tempfile::tempdir().unwrap();
    let opts = LoadOptions { cache_dir: Some(cache.path().to_path_buf()), ..LoadOptions::default() };
    let dataset = Dataset::load(dir.path(), &opts).unwrap();
    let file = files_under(cache.path()).pop().expect("a cache file");
    let mut bytes = std::fs::read(&file).unwrap();
    let name = dataset.name.as_bytes();
    let at = bytes.windows(name.len()).position(|w| w == name).expect("the name is in the header");
    bytes[at] ^= 0x20;
    std::fs::write(&file, bytes).unwrap();
    assert_eq!(Dataset::load(dir.path(), &opts).unwrap(), dataset);
}
