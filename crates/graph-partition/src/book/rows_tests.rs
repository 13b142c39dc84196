//! Part folders: what `write_part_rows` writes is what the scatter cuts from the whole dataset,
//! and every damaged or misplaced part file is refused, naming the file and the field.

use super::*;
use crate::partition::{Algorithm, PartitionConfig};
use crate::{Dataset, LoadOptions, SynthConfig};

/// A synthetic dataset written in the OGB layout, and a part folder of it in 3 edge-cut parts.
struct Folder {
    data: tempfile::TempDir,
    out: tempfile::TempDir,
    dataset: Dataset,
    book: PartitionBook,
    manifest: PartsManifest,
}

fn folder() -> Folder {
    let data = tempfile::tempdir().unwrap();
    let synth = SynthConfig { nodes: 300, avg_degree: 6.0, features: 5, classes: 3, seed: 7, ..Default::default() };
    synth.generate().unwrap().write_ogb(data.path()).unwrap();
    let opts = LoadOptions { cache: crate::CacheMode::Off, ..Default::default() };
    let dataset = Dataset::load(data.path(), &opts).unwrap();
    let structure = Dataset::load_structure(data.path(), &opts).unwrap();
    assert_eq!(structure.graph, *dataset.graph);
    assert_eq!((&structure.labels, &structure.splits), (&dataset.labels, &dataset.splits));
    assert_eq!(structure.num_features, 5);
    let owner = (0..300u32).map(|v| (v * 7 + v / 11) % 3).collect();
    let book = PartitionBook::build(&structure.graph, &Partition::EdgeCut { parts: 3, owner }).unwrap();
    let layout = PartitionConfig::new(Algorithm::Hash, 3).layout().unwrap();
    let metrics = crate::metrics::PartitionMetrics::of(&book, &layout).unwrap();
    let fingerprint = Dataset::source_fingerprint(data.path()).unwrap();
    let manifest = PartsManifest::new(&structure, fingerprint, "hash", metrics);
    let out = tempfile::tempdir().unwrap();
    book.save(out.path()).unwrap();
    write_part_rows(out.path(), &book, &structure, &manifest).unwrap();
    Folder { data, out, dataset, book, manifest }
}

impl Folder {
    fn read(&self, part: usize, rows: usize) -> Result<PartRows, BookError> {
        let (meta, lg) = PartitionBook::load_part(self.out.path(), part).unwrap();
        PartRows::read(self.out.path(), &lg, &meta, self.manifest.dataset_fingerprint, 3, rows)
    }

    fn error(&self, part: usize) -> String {
        self.read(part, usize::MAX).unwrap_err().to_string()
    }
}

#[test]
fn each_part_holds_the_rows_the_scatter_cuts_from_the_whole_dataset() {
    let f = folder();
    assert_eq!(PartsManifest::read(f.out.path()).unwrap().as_ref(), Some(&f.manifest));
    let s = &f.dataset.splits;
    let splits = split_rows(f.book.parts(), 300, [&s.train, &s.valid, &s.test]).unwrap();
    for (p, lg) in f.book.parts().iter().enumerate() {
        let (meta, alone) = PartitionBook::load_part(f.out.path(), p).unwrap();
        assert_eq!((&meta, &alone), (f.book.meta(), lg));
        let rows: Vec<usize> = lg.local_to_global().iter().map(|&g| g as usize).collect();
        let all = f.read(p, lg.num_local()).unwrap();
        let whole = f.dataset.features.select(ndarray::Axis(0), &rows);
        assert_eq!(all.features, whole.iter().copied().collect::<Vec<f32>>(), "part {p}");
        assert_eq!(all.labels, f.dataset.labels.select(&rows), "part {p}");
        assert_eq!(all.splits, splits[p], "part {p}");
        assert_eq!(all.global_train, s.train.len());
        let primaries = f.read(p, lg.num_primary()).unwrap();
        assert_eq!(primaries.features[..], all.features[..lg.num_primary() * 5]);
    }
}

#[test]
fn misplaced_truncated_and_corrupt_parts_are_refused_naming_file_and_field() {
    let f = folder();
    let path = |i| rows_path(f.out.path(), i);
    let keep = std::fs::read(path(1)).unwrap();
    std::fs::copy(path(2), path(1)).unwrap();
    let err = f.error(1);
    assert!(err.contains("part-1.rows") && err.contains("it holds part 2, read by rank 1"), "{err}");
    std::fs::write(path(1), &keep[..keep.len() - 3]).unwrap();
    let err = f.error(1);
    assert!(err.contains("part-1.rows") && err.contains("truncated"), "{err}");
    for (at, what) in [(keep.len() - 2, "test ids checksum"), (20, "header checksum")] {
        let mut bad = keep.clone();
        bad[at] ^= 1;
        std::fs::write(path(1), &bad).unwrap();
        let err = f.error(1);
        assert!(err.contains("part-1.rows") && err.contains(what), "{what}: {err}");
    }
    std::fs::write(path(1), &keep).unwrap();
    let (meta, lg) = PartitionBook::load_part(f.out.path(), 1).unwrap();
    let err = PartRows::read(f.out.path(), &lg, &meta, 1, 3, usize::MAX).unwrap_err().to_string();
    assert!(err.contains("dataset fingerprint is"), "{err}");
    let err = PartRows::read(f.out.path(), &lg, &meta, f.manifest.dataset_fingerprint, 2, usize::MAX).unwrap_err();
    assert!(err.to_string().contains("not below the dataset's 2 classes"), "{err}");
    std::fs::remove_file(path(1)).unwrap();
    let err = f.error(1);
    assert!(err.contains("part-1.rows"), "{err}");
}

#[test]
fn saving_a_book_over_a_part_folder_unmakes_it() {
    let f = folder();
    let (_, two) = {
        let structure = Dataset::load_structure(f.data.path(), &LoadOptions::default()).unwrap();
        let owner = (0..300u32).map(|v| v % 2).collect();
        (structure.clone(), PartitionBook::build(&structure.graph, &Partition::EdgeCut { parts: 2, owner }).unwrap())
    };
    two.save(f.out.path()).unwrap();
    assert_eq!(PartsManifest::read(f.out.path()).unwrap(), None);
    assert!(!rows_path(f.out.path(), 2).exists() && rows_path(f.out.path(), 1).exists());
}

#[test]
fn a_feature_file_that_changed_since_the_structure_was_read_fails_the_write() {
    let f = folder();
    let structure = Dataset::load_structure(f.data.path(), &LoadOptions::default()).unwrap();
    // Half the feature rows: the stream ends early, and no manifest is written.
    let feat = f.data.path().join("raw/node-feat.csv.gz");
    let text = {
        let mut s = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::MultiGzDecoder::new(std::fs::File::open(&feat).unwrap()),
            &mut s,
        )
        .unwrap();
        s.lines().take(150).map(|l| format!("{l}\n")).collect::<String>()
    };
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&feat).unwrap(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, text.as_bytes()).unwrap();
    gz.finish().unwrap();
    let err = write_part_rows(f.out.path(), &f.book, &structure, &f.manifest).unwrap_err().to_string();
    assert!(err.contains("node-feat.csv.gz") && err.contains("150"), "{err}");
    assert_eq!(PartsManifest::read(f.out.path()).unwrap(), None);
    let leftovers: Vec<_> = std::fs::read_dir(f.out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".halo-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Writing a part folder one part at a time gives the files of the whole book saved and its
/// rows written, byte for byte: edge-cut with l-hop sets, and vertex-cut.
#[test]
fn a_folder_written_part_by_part_equals_the_whole_book_written() {
    let f = folder();
    let opts = LoadOptions { cache: crate::CacheMode::Off, ..Default::default() };
    let structure = Dataset::load_structure(f.data.path(), &opts).unwrap();
    let owner: Vec<u32> = (0..300u32).map(|v| (v * 7 + v / 11) % 3).collect();
    let nodes = crate::partition::expand_l_hop(&structure.graph, 3, &owner, &structure.splits.train, 2).unwrap();
    let l_hop = LHopSets { hops: 2, nodes };
    let vertex_cut = PartitionConfig { hosts: 1, ..PartitionConfig::new(Algorithm::Ebv, 3) };
    let vertex_cut = crate::partition::partition_graph(&structure.graph, &vertex_cut).unwrap();
    for (partition, l_hop) in [(Partition::EdgeCut { parts: 3, owner }, Some(l_hop)), (vertex_cut, None)] {
        let layout = PartitionConfig::new(Algorithm::Hash, 3).layout().unwrap();
        let mut book = PartitionBook::build(&structure.graph, &partition).unwrap();
        if let Some(l_hop) = &l_hop {
            book = book.with_l_hop(l_hop.clone()).unwrap();
        }
        let metrics = crate::metrics::PartitionMetrics::of(&book, &layout).unwrap();
        let manifest = PartsManifest::new(&structure, f.manifest.dataset_fingerprint, "x", metrics.clone());
        let (whole, by_part) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        book.save(whole.path()).unwrap();
        write_part_rows(whole.path(), &book, &structure, &manifest).unwrap();
        let fingerprint = f.manifest.dataset_fingerprint;
        let written =
            write_part_folder(by_part.path(), structure.clone(), &partition, &layout, l_hop.as_ref(), fingerprint, "x")
                .unwrap();
        assert_eq!(written.metrics, metrics);
        let names = |dir: &std::path::Path| {
            let mut names: Vec<_> =
                std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            names.sort();
            names
        };
        assert_eq!(names(whole.path()), names(by_part.path()));
        for name in names(whole.path()) {
            let read = |dir: &std::path::Path| std::fs::read(dir.join(&name)).unwrap();
            assert!(read(whole.path()) == read(by_part.path()), "{name} differs");
        }
    }
}

/// A partition that does not fit the graph, or a layout that does not fit the partition, is
/// refused before anything is written.
#[test]
fn a_folder_of_a_misfit_partition_is_refused_before_writing() {
    let f = folder();
    let structure = Dataset::load_structure(f.data.path(), &LoadOptions::default()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("folder");
    let layout = PartitionConfig::new(Algorithm::Hash, 2).layout().unwrap();
    let short = Partition::EdgeCut { parts: 2, owner: vec![0; 10] };
    let err = write_part_folder(&dir, structure.clone(), &short, &layout, None, 1, "x").unwrap_err();
    assert!(matches!(err, FolderError::Partition(_)), "{err}");
    let three = Partition::EdgeCut { parts: 3, owner: (0..300u32).map(|v| v % 3).collect() };
    let err = write_part_folder(&dir, structure, &three, &layout, None, 1, "x").unwrap_err();
    assert!(matches!(err, FolderError::Metrics(_)), "{err}");
    assert!(!dir.exists());
}
