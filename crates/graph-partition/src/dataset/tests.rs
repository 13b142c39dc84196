//! Loader, cache and writer tests on small generated fixtures, plus Cora.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use ndarray::array;

use super::*;
use crate::csr::EdgeListOptions;

/// A valid 4-node dataset in a temporary directory; tests break one file at a time.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let f = Self { dir: tempfile::tempdir().unwrap() };
        // A duplicate edge and a self loop that loading must clean away.
        f.write("raw/edge.csv.gz", "0,1\n1,2\n2,3\n3,3\n1,0\n");
        f.write("raw/num-edge-list.csv.gz", "5\n");
        f.write("raw/node-feat.csv.gz", "0.5,1,2\n1.5,-1,0\n0,0,0\n3,2.25,1e-3\n");
        f.write("raw/node-label.csv.gz", "0\n1\nnan\n2\n");
        f.write("raw/num-node-list.csv.gz", "4\n");
        f.write("split/main/train.csv.gz", "0\n1\n");
        f.write("split/main/valid.csv.gz", "");
        f.write("split/main/test.csv.gz", "3\n");
        f
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, text: &str) {
        write_gz(&self.path().join(rel), text.as_bytes());
    }

    fn remove(&self, rel: &str) {
        std::fs::remove_file(self.path().join(rel)).unwrap();
    }

    fn load(&self) -> Result<Dataset, DatasetError> {
        Dataset::load(self.path(), &no_cache())
    }

    /// Loads, expecting failure, and checks the message names `file` (and `line` if given).
    fn expect_error(&self, file: &str, line: Option<u64>) -> DatasetError {
        let err = self.load().expect_err("loading should fail");
        let message = err.to_string();
        assert!(message.contains(file), "`{message}` does not name {file}");
        if let Some(line) = line {
            assert!(message.contains(&format!("{file}:{line}:")), "`{message}` does not name line {line}");
        }
        err
    }
}

fn write_gz(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut enc = GzEncoder::new(std::fs::File::create(path).unwrap(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap();
}

fn no_cache() -> LoadOptions {
    LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() }
}

#[test]
fn fixture_loads_cleaned_and_symmetrised() {
    let d = Fixture::new().load().unwrap();
    assert_eq!(d.num_nodes(), 4);
    assert_eq!(d.graph.neighbors(0), &[1]);
    assert_eq!(d.graph.neighbors(1), &[0, 2]);
    assert_eq!(d.graph.neighbors(3), &[2]);
    assert!(d.graph.is_symmetric());
    assert_eq!(d.features, array![[0.5, 1.0, 2.0], [1.5, -1.0, 0.0], [0.0, 0.0, 0.0], [3.0, 2.25, 1e-3]]);
    assert_eq!(d.labels, Labels::Classes(vec![0, 1, Labels::UNLABELLED, 2]));
    assert_eq!(d.num_classes, 3);
    assert_eq!(d.splits, Splits { name: "main".into(), train: vec![0, 1], valid: vec![], test: vec![3] });
    let s = d.summary();
    assert_eq!((s.nodes, s.directed_edges, s.undirected_edges, s.labelled_nodes), (4, 6, 3, 3));
    assert_eq!((s.degree.min, s.degree.max, s.degree.median), (1, 2, 1.5));
    d.validate().unwrap();
}

#[test]
fn missing_files() {
    let f = Fixture::new();
    f.remove("raw/node-label.csv.gz");
    assert!(matches!(f.expect_error("node-label.csv.gz", None), DatasetError::MissingFile { .. }));

    let f = Fixture::new();
    f.remove("raw/node-feat.csv.gz");
    let err = f.expect_error("node-feat.csv.gz", None);
    assert!(err.to_string().contains("edge-feat.csv.gz"), "{err}");

    let f = Fixture::new();
    f.remove("split/main/test.csv.gz");
    assert!(matches!(f.expect_error("split/main/test.csv.gz", None), DatasetError::MissingFile { .. }));

    let err = Dataset::load(Path::new("/nonexistent/halo-data"), &no_cache()).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/halo-data"), "{err}");
}

#[test]
fn empty_files() {
    for file in ["raw/node-label.csv.gz", "raw/node-feat.csv.gz", "raw/num-node-list.csv.gz"] {
        let f = Fixture::new();
        f.write(file, "");
        assert!(matches!(f.expect_error(file, None), DatasetError::EmptyFile { .. }), "{file}");
    }
}

#[test]
fn malformed_numbers() {
    let f = Fixture::new();
    f.write("raw/node-feat.csv.gz", "0.5,1,2\n1.5,-1,0\n0,zero,0\n3,2.25,1e-3\n");
    let err = f.expect_error("node-feat.csv.gz", Some(3));
    assert!(err.to_string().ends_with("malformed float `zero`"), "{err}");

    let f = Fixture::new();
    f.write("raw/edge.csv.gz", "0,1\n1,x2\n");
    f.expect_error("edge.csv.gz", Some(2));

    let f = Fixture::new();
    f.write("raw/num-node-list.csv.gz", "four\n");
    f.expect_error("num-node-list.csv.gz", Some(1));

    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0\n-1\nnan\n2\n");
    let err = f.expect_error("node-label.csv.gz", Some(2));
    assert!(matches!(err, DatasetError::Parse { kind: ParseErrorKind::InvalidLabel { .. }, .. }));

    let f = Fixture::new();
    f.write("raw/node-feat.csv.gz", "0.5,1,2\n\n0,0,0\n3,2,1\n");
    let err = f.expect_error("node-feat.csv.gz", Some(2));
    assert!(matches!(err, DatasetError::Parse { kind: ParseErrorKind::EmptyLine, .. }));
}

#[test]
fn ragged_rows() {
    let f = Fixture::new();
    f.write("raw/node-feat.csv.gz", "0.5,1,2\n1.5,-1\n0,0,0\n3,2.25,1e-3\n");
    let err = f.expect_error("node-feat.csv.gz", Some(2));
    assert!(err.to_string().ends_with("expected 3 columns, found 2"), "{err}");

    let f = Fixture::new();
    f.write("raw/edge.csv.gz", "0,1\n1,2,3\n");
    let err = f.expect_error("edge.csv.gz", Some(2));
    assert!(err.to_string().ends_with("expected 2 columns, found 3"), "{err}");

    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0,1\n1,0\n1\n0,0\n");
    let err = f.expect_error("node-label.csv.gz", Some(3));
    assert!(err.to_string().ends_with("expected 2 columns, found 1"), "{err}");
}

#[test]
fn node_ids_out_of_range() {
    let f = Fixture::new();
    f.write("raw/edge.csv.gz", "0,1\n1,2\n2,4\n");
    let err = f.expect_error("edge.csv.gz", Some(3));
    assert!(err.to_string().ends_with("node id 4 is out of range (the graph has 4 nodes)"), "{err}");

    let f = Fixture::new();
    f.write("split/main/valid.csv.gz", "3\n9\n");
    let err = f.expect_error("split/main/valid.csv.gz", Some(2));
    assert!(matches!(err, DatasetError::Parse { kind: ParseErrorKind::NodeOutOfRange { id: 9, .. }, .. }));
}

#[test]
fn counts_disagree() {
    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0\n1\n2\n");
    let err = f.expect_error("node-label.csv.gz", None);
    assert!(err.to_string().contains("has 3 labels, expected 4"), "{err}");

    let f = Fixture::new();
    f.write("raw/num-node-list.csv.gz", "5\n");
    let err = f.expect_error("node-feat.csv.gz", None);
    assert!(err.to_string().contains("has 4 rows, expected 5") && err.to_string().contains("num-node-list"), "{err}");

    let f = Fixture::new();
    f.write("raw/num-edge-list.csv.gz", "7\n");
    let err = f.expect_error("edge.csv.gz", None);
    assert!(err.to_string().contains("has 5 lines, expected 7") && err.to_string().contains("num-edge-list"), "{err}");

    let f = Fixture::new();
    f.write("raw/num-node-list.csv.gz", "4\n4\n");
    f.expect_error("num-node-list.csv.gz", None);

    let f = Fixture::new();
    f.write("raw/num-node-list.csv.gz", "0\n");
    f.expect_error("num-node-list.csv.gz", Some(1));
}

#[test]
fn meta_json_is_checked() {
    let f = Fixture::new();
    std::fs::write(f.path().join("meta.json"), "{ not json").unwrap();
    assert!(matches!(f.expect_error("meta.json", None), DatasetError::InvalidMeta { .. }));

    std::fs::write(f.path().join("meta.json"), r#"{"num_classes": 2}"#).unwrap();
    let err = f.expect_error("meta.json", None);
    assert!(err.to_string().contains("uses class 2"), "{err}");

    std::fs::write(f.path().join("meta.json"), r#"{"num_nodes": 3}"#).unwrap();
    f.expect_error("meta.json", None);

    // A larger class count than the labels use is fine (some classes may be absent), and the
    // name comes from meta.json.
    std::fs::write(f.path().join("meta.json"), r#"{"name": "tiny", "num_classes": 5, "extra": [1]}"#).unwrap();
    let d = f.load().unwrap();
    assert_eq!((d.name.as_str(), d.num_classes), ("tiny", 5));
}

#[test]
fn not_gzip_is_reported() {
    let f = Fixture::new();
    std::fs::write(f.path().join("raw/node-feat.csv.gz"), "0.5,1,2\n").unwrap();
    assert!(matches!(f.expect_error("node-feat.csv.gz", None), DatasetError::Io { .. }));
}

#[test]
fn several_splits_need_a_choice() {
    let f = Fixture::new();
    f.write("split/other/train.csv.gz", "3\n");
    f.write("split/other/valid.csv.gz", "");
    f.write("split/other/test.csv.gz", "0\n1\n");
    let err = f.load().unwrap_err();
    assert!(err.to_string().contains("main, other"), "{err}");
    let opts = LoadOptions { split: Some("other".into()), ..no_cache() };
    let d = Dataset::load(f.path(), &opts).unwrap();
    assert_eq!(d.splits, Splits { name: "other".into(), train: vec![3], valid: vec![], test: vec![0, 1] });
}

#[test]
fn crlf_and_missing_final_newline() {
    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0\r\n1\r\nnan\r\n2");
    assert_eq!(f.load().unwrap().labels, Labels::Classes(vec![0, 1, Labels::UNLABELLED, 2]));
}

#[test]
fn multi_label_rows() {
    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0,1\n1,0\n1,1\n0,0\n");
    let d = f.load().unwrap();
    assert_eq!(d.labels, Labels::MultiLabel(array![[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]));
    assert_eq!(d.num_classes, 2);
}

#[test]
fn node_features_from_edge_features() {
    let f = Fixture::new();
    f.remove("raw/node-feat.csv.gz");
    // Edge lines: 0-1, 1-2, 2-3, 3-3 (loop counts once), 1-0.
    f.write("raw/edge-feat.csv.gz", "1,10\n2,20\n3,30\n4,40\n5,50\n");
    let d = f.load().unwrap();
    let expected = array![[3.0, 30.0], [8.0 / 3.0, 80.0 / 3.0], [2.5, 25.0], [3.5, 35.0]];
    let worst = (&d.features - &expected).iter().fold(0.0f32, |m, x| m.max(x.abs()));
    assert!(worst < 1e-5, "{}", d.features);

    f.write("raw/edge-feat.csv.gz", "1,10\n2,20\n");
    let err = f.expect_error("edge-feat.csv.gz", None);
    assert!(err.to_string().contains("has 2 rows, expected 5"), "{err}");
}

fn cached() -> LoadOptions {
    LoadOptions::default()
}

#[test]
fn cache_round_trip_and_split_choice() {
    let f = Fixture::new();
    let (first, source) = Dataset::load_with_source(f.path(), &cached()).unwrap();
    assert_eq!(source, LoadSource::Csv);
    assert!(f.path().join(cache::CACHE_FILE).is_file());
    let (second, source) = Dataset::load_with_source(f.path(), &cached()).unwrap();
    assert_eq!(source, LoadSource::Cache);
    assert_eq!(first, second);

    // Splits are read per load, so another split still uses the cache.
    f.write("split/other/train.csv.gz", "3\n");
    f.write("split/other/valid.csv.gz", "0\n");
    f.write("split/other/test.csv.gz", "1\n");
    let opts = LoadOptions { split: Some("other".into()), ..cached() };
    let (d, source) = Dataset::load_with_source(f.path(), &opts).unwrap();
    assert_eq!(source, LoadSource::Cache);
    assert_eq!(d.splits.train, vec![3]);
}

#[test]
fn corrupt_or_truncated_cache_is_rebuilt() {
    let f = Fixture::new();
    let reference = Dataset::load(f.path(), &cached()).unwrap();
    let cache_path = f.path().join(cache::CACHE_FILE);
    let bytes = std::fs::read(&cache_path).unwrap();

    let corruptions: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", bytes[..bytes.len() - 3].to_vec()),
        ("extended", [bytes.as_slice(), &[0u8; 4]].concat()),
        ("flipped feature byte", flip(&bytes, bytes.len() - 4 * 4 - 10)),
        ("flipped label byte", flip(&bytes, bytes.len() - 1)),
        ("bad magic", flip(&bytes, 0)),
        ("empty", Vec::new()),
    ];
    for (what, corrupted) in corruptions {
        std::fs::write(&cache_path, corrupted).unwrap();
        let (d, source) = Dataset::load_with_source(f.path(), &cached()).unwrap();
        assert_eq!(source, LoadSource::Csv, "{what}");
        assert_eq!(d, reference, "{what}");
        // The re-read rewrote a valid cache.
        assert_eq!(Dataset::load_with_source(f.path(), &cached()).unwrap().1, LoadSource::Cache, "{what}");
    }
}

fn flip(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at] ^= 0x40;
    out
}

#[test]
fn changed_source_invalidates_cache() {
    let f = Fixture::new();
    Dataset::load(f.path(), &cached()).unwrap();
    f.write("raw/node-feat.csv.gz", "9,9,9\n1.5,-1,0\n0,0,0\n3,2.25,1e-3\n");
    let (d, source) = Dataset::load_with_source(f.path(), &cached()).unwrap();
    assert_eq!(source, LoadSource::Csv);
    assert_eq!(d.features[[0, 0]], 9.0);
}

#[test]
fn read_only_directory_skips_caching() {
    let f = Fixture::new();
    let mut perms = std::fs::metadata(f.path()).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(f.path(), perms.clone()).unwrap();
    let (_, source) = Dataset::load_with_source(f.path(), &cached()).unwrap();
    let (_, again) = Dataset::load_with_source(f.path(), &cached()).unwrap();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(f.path(), perms).unwrap();
    assert_eq!((source, again), (LoadSource::Csv, LoadSource::Csv));
    assert!(!f.path().join("processed").exists());
}

#[test]
fn unwritable_cache_location_is_not_fatal() {
    let f = Fixture::new();
    // A file where the cache directory should be makes creating it fail.
    std::fs::write(f.path().join("processed"), "not a directory").unwrap();
    let (d, source) = Dataset::load_with_source(f.path(), &cached()).unwrap();
    assert_eq!((source, d.num_nodes()), (LoadSource::Csv, 4));
}

#[test]
fn write_ogb_round_trips() {
    let f = Fixture::new();
    let d = f.load().unwrap();
    let out = tempfile::tempdir().unwrap();
    d.write_ogb(out.path()).unwrap();
    let back = Dataset::load(out.path(), &no_cache()).unwrap();
    // The name now comes from the written meta.json.
    assert_eq!(back, d);

    // Multi-label targets, extreme floats and a directed graph (loaded back symmetrised).
    let raw = EdgeListOptions { symmetrize: false, remove_self_loops: true };
    let directed = Dataset {
        name: "directed".into(),
        graph: Csr::from_edges(3, &[(0, 1), (2, 1)], raw).unwrap().into(),
        features: array![[1e-30, -3.5e20], [f32::MIN_POSITIVE, 0.1], [-0.0, 123456.79]],
        labels: Labels::MultiLabel(array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
        splits: Splits { name: "s".into(), train: vec![0], valid: vec![1], test: vec![2] },
        num_classes: 2,
    };
    let out = tempfile::tempdir().unwrap();
    directed.write_ogb(out.path()).unwrap();
    let back = Dataset::load(out.path(), &no_cache()).unwrap();
    let symmetric = Csr::from_edges(3, &[(0, 1), (2, 1)], EdgeListOptions::default()).unwrap();
    assert_eq!(*back.graph, symmetric);
    assert_eq!(back.features.mapv(f32::to_bits), directed.features.mapv(f32::to_bits));
    assert_eq!((back.labels, back.splits), (directed.labels, directed.splits));
}

#[test]
fn write_ogb_rejects_inconsistent_datasets() {
    let mut d = Fixture::new().load().unwrap();
    d.splits.test.push(10);
    let out = tempfile::tempdir().unwrap();
    let err = d.write_ogb(out.path()).unwrap_err();
    assert!(err.to_string().contains("test split holds node 10"), "{err}");
    d.splits.test.pop();
    d.splits.name = "../escape".into();
    let err = d.write_ogb(out.path()).unwrap_err();
    assert!(err.to_string().contains("not a single directory name"), "{err}");
    d.splits.name = "ok".into();
    d.labels = Labels::Classes(vec![0, 1, 7, 2]);
    assert!(d.write_ogb(out.path()).unwrap_err().to_string().contains("class 7"));
}

/// Cora as vendored under `datasets/cora`; tests fail loudly when it is absent.
pub(crate) fn cora_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.join("raw/edge.csv.gz").is_file(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir
}

#[test]
fn cora_loads_with_published_sizes_and_round_trips() {
    let d = Dataset::load(&cora_dir(), &no_cache()).unwrap();
    let s = d.summary();
    assert_eq!(s.name, "cora");
    assert_eq!((s.nodes, s.directed_edges, s.undirected_edges, s.self_loops), (2708, 10556, 5278, 0));
    assert_eq!((s.features, s.classes, s.multi_label), (1433, 7, false));
    assert_eq!((s.train, s.valid, s.test), (140, 500, 1000));
    assert_eq!((s.degree.min, s.degree.max), (1, 168));
    assert!(d.graph.is_symmetric());
    d.validate().unwrap();

    let out = tempfile::tempdir().unwrap();
    d.write_ogb(out.path()).unwrap();
    assert_eq!(Dataset::load(out.path(), &no_cache()).unwrap(), d);
    assert_eq!(Dataset::load(out.path(), &cached()).unwrap(), d);
    assert_eq!(Dataset::load_with_source(out.path(), &cached()).unwrap(), (d, LoadSource::Cache));
}

#[test]
fn same_size_and_mtime_edit_invalidates_cache() {
    // The issue's case: relabel a node without changing the file's size or modification time.
    let f = Fixture::new();
    let labels = f.path().join("raw/node-label.csv.gz");
    f.write("raw/node-label.csv.gz", "0\n1\nnan\n2\n");
    Dataset::load(f.path(), &cached()).unwrap();
    let before = std::fs::metadata(&labels).unwrap();
    f.write("raw/node-label.csv.gz", "2\n1\nnan\n0\n");
    let file = std::fs::File::options().write(true).open(&labels).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    let after = std::fs::metadata(&labels).unwrap();
    assert_eq!((after.len(), after.modified().unwrap()), (before.len(), before.modified().unwrap()));
    let (d, source) = Dataset::load_with_source(f.path(), &cached()).unwrap();
    assert_eq!(source, LoadSource::Csv);
    assert_eq!(d.labels, Labels::Classes(vec![2, 1, Labels::UNLABELLED, 0]));
}

#[test]
fn refresh_rebuilds_a_valid_cache_and_off_leaves_none() {
    let f = Fixture::new();
    Dataset::load(f.path(), &LoadOptions { cache: CacheMode::Off, ..cached() }).unwrap();
    assert!(!f.path().join("processed").exists());
    Dataset::load(f.path(), &cached()).unwrap();
    let refresh = LoadOptions { cache: CacheMode::Refresh, ..cached() };
    assert_eq!(Dataset::load_with_source(f.path(), &refresh).unwrap().1, LoadSource::Csv);
    assert_eq!(Dataset::load_with_source(f.path(), &cached()).unwrap().1, LoadSource::Cache);
}

#[test]
fn cache_dir_serves_a_read_only_dataset_directory() {
    let f = Fixture::new();
    let caches = tempfile::tempdir().unwrap();
    let cache_dir = caches.path().join("halo-caches");
    let opts = LoadOptions { cache_dir: Some(cache_dir.clone()), ..cached() };
    let mut perms = std::fs::metadata(f.path()).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(f.path(), perms.clone()).unwrap();
    let first = Dataset::load_with_source(f.path(), &opts);
    let second = Dataset::load_with_source(f.path(), &opts);
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(f.path(), perms).unwrap();
    assert_eq!((first.unwrap().1, second.unwrap().1), (LoadSource::Csv, LoadSource::Cache));
    assert!(!f.path().join("processed").exists(), "nothing written into the dataset directory");
    let file = Dataset::cache_path(f.path(), Some(&cache_dir));
    assert!(file.is_file() && file.parent() == Some(cache_dir.as_path()), "{}", file.display());

    // Two dataset directories with the same name do not share a cache file.
    let other = tempfile::tempdir().unwrap();
    let twin = other.path().join(f.path().file_name().unwrap());
    assert_ne!(Dataset::cache_path(&twin, Some(&cache_dir)), file);
}

#[test]
fn non_finite_features_name_file_line_and_column() {
    for (token, row) in [("nan", 2), ("inf", 3), ("-inf", 1), ("1e39", 4), ("-3.5e38", 2)] {
        let f = Fixture::new();
        let mut rows =
            vec!["0.5,1,2", "1.5,-1,0", "0,0,0", "3,2.25,1e-3"].into_iter().map(String::from).collect::<Vec<_>>();
        rows[row - 1] = format!("0.5,{token},2");
        f.write("raw/node-feat.csv.gz", &(rows.join("\n") + "\n"));
        let err = f.expect_error("node-feat.csv.gz", Some(row as u64));
        assert!(matches!(err, DatasetError::Parse { kind: ParseErrorKind::NonFinite { column: 2, .. }, .. }), "{err}");
        assert!(err.to_string().contains(&format!("column 2: `{token}`")), "{err}");

        let allow = LoadOptions { allow_nonfinite: true, ..no_cache() };
        let d = Dataset::load(f.path(), &allow).unwrap();
        assert!(!d.features[[row - 1, 1]].is_finite(), "{token}");
    }
    // Derived features are checked in the edge-feature file.
    let f = Fixture::new();
    f.remove("raw/node-feat.csv.gz");
    f.write("raw/edge-feat.csv.gz", "1,10\n2,20\n3,nan\n4,40\n5,50\n");
    let err = f.expect_error("edge-feat.csv.gz", Some(3));
    assert!(err.to_string().contains("column 2: `nan`"), "{err}");
    // Multi-label targets keep NaN as "unknown".
    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0,1\nnan,0\n1,1\n0,0\n");
    assert!(f.load().is_ok());
}

#[test]
fn a_cache_with_non_finite_features_does_not_bypass_the_check() {
    let f = Fixture::new();
    f.write("raw/node-feat.csv.gz", "0.5,1,2\n1.5,-1,0\n0,nan,0\n3,2.25,1e-3\n");
    let allow = LoadOptions { allow_nonfinite: true, ..cached() };
    Dataset::load(f.path(), &allow).unwrap();
    assert_eq!(Dataset::load_with_source(f.path(), &allow).unwrap().1, LoadSource::Cache);
    let err = Dataset::load(f.path(), &cached()).unwrap_err();
    assert!(err.to_string().contains("node-feat.csv.gz:3: column 2"), "{err}");
}

#[test]
fn missing_dataset_directory_says_how_to_download() {
    let err = Dataset::load(Path::new("/nonexistent/ogbn-arxiv"), &no_cache()).unwrap_err();
    assert!(matches!(err, DatasetError::NoDataset { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("/nonexistent/ogbn-arxiv") && message.contains("cargo xtask download"), "{message}");
}

#[test]
fn io_errors_quote_their_cause_once() {
    // A truncated gzip member: the message names the file and the cause, and chains nothing
    // further, so a printer walking `source()` shows the cause once.
    let f = Fixture::new();
    let path = f.path().join("raw/edge.csv.gz");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 12]).unwrap();
    let err = f.expect_error("edge.csv.gz", None);
    assert!(matches!(err, DatasetError::Io { .. }), "{err}");
    assert!(std::error::Error::source(&err).is_none(), "{err}");
}

#[test]
fn write_ogb_over_another_dataset_leaves_no_old_split() {
    let f = Fixture::new();
    assert_eq!(f.load().unwrap().splits.name, "main");
    let mut d = f.load().unwrap();
    d.splits = Splits { name: "random".into(), train: vec![3], valid: vec![0], test: vec![1] };
    d.write_ogb(f.path()).unwrap();
    assert!(!f.path().join("split/main").exists());
    assert_eq!(f.load().unwrap(), d, "loads without naming a split");

    // A split directory holding other files keeps them.
    f.write("split/main/train.csv.gz", "0\n");
    std::fs::write(f.path().join("split/main/notes.txt"), "mine").unwrap();
    d.write_ogb(f.path()).unwrap();
    assert!(f.path().join("split/main/notes.txt").is_file());
    assert!(!f.path().join("split/main/train.csv.gz").exists());
}

/// A label file of several columns is multi-label only with 0/1 targets (or `nan`), or when
/// meta.json says so; a `node,label` file is refused naming the file and line.
#[test]
fn several_label_columns_need_zero_one_targets_or_a_multi_label_task() {
    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0,0\n1,1\n2,nan\n3,2\n");
    // Checked before meta.json's class count, which a `node,label` file would contradict.
    std::fs::write(f.path().join("meta.json"), r#"{"num_classes": 3}"#).unwrap();
    let err = f.expect_error("node-label.csv.gz", Some(3));
    let message = err.to_string();
    assert!(message.contains("`2` is not 0 or 1") && message.contains("multi-label"), "{message}");
    std::fs::write(f.path().join("meta.json"), r#"{"task": "multi-label classification", "num_classes": 2}"#).unwrap();
    assert!(matches!(f.load().unwrap().labels, Labels::MultiLabel(_)), "meta.json says multi-label");
}

/// Every node of every split has a label, and no node sits in two splits; errors name the
/// split's file and the node.
#[test]
fn split_nodes_need_a_label_and_one_split_each() {
    let f = Fixture::new();
    f.write("split/main/train.csv.gz", "0\n1\n2\n");
    let message = f.expect_error("split/main/train.csv.gz", Some(3)).to_string();
    assert!(message.contains("node 2 has no label") && message.contains("node-label.csv.gz"), "{message}");
    let f = Fixture::new();
    f.write("split/main/valid.csv.gz", "3\n");
    let message = f.expect_error("split/main/test.csv.gz", Some(1)).to_string();
    assert!(message.contains("node 3 is already in the valid split"), "{message}");
    f.write("split/main/valid.csv.gz", "");
    f.write("split/main/train.csv.gz", "0\n1\n0\n");
    let message = f.expect_error("split/main/train.csv.gz", Some(3)).to_string();
    assert!(message.contains("node 0 is already in the train split"), "{message}");
    let f = Fixture::new();
    f.write("raw/node-label.csv.gz", "0,1\nnan,nan\n1,1\n0,0\n");
    let message = f.expect_error("split/main/train.csv.gz", Some(2)).to_string();
    assert!(message.contains("node 1 has no label"), "{message}");
}
