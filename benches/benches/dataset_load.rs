//! Loading a synthetic dataset (average degree 10, 128 features) from the OGB CSV layout
//! (gzip text, parsed in parallel; no cache) versus from Halo's binary cache, and the part of a
//! cached load spent hashing the raw files the cache is keyed by.
//!
//! The node count defaults to 1,000,000 (about 1.4 GB of feature text); set
//! `HALO_BENCH_NODES` to use fewer on a shared machine. The dataset is generated and written
//! once to a temporary directory before measuring.
//!
//! Run: `HALO_BENCH_NODES=200000 cargo bench -p halo-benches --bench dataset_load -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use graph_partition::dataset::{CacheMode, Dataset, LoadOptions, LoadSource};
use graph_partition::synth::SynthConfig;

fn bench_nodes() -> usize {
    match std::env::var("HALO_BENCH_NODES") {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("HALO_BENCH_NODES={v} is not a node count")),
        Err(_) => 1_000_000,
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| if e.path().is_dir() { dir_bytes(&e.path()) } else { e.metadata().map_or(0, |m| m.len()) })
                .sum()
        })
        .unwrap_or(0)
}

fn dataset_load(c: &mut Criterion) {
    let nodes = bench_nodes();
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = SynthConfig { nodes, avg_degree: 10.0, features: 128, classes: 16, seed: 7, ..SynthConfig::default() };
    let start = Instant::now();
    let dataset = config.generate().expect("valid synthetic parameters");
    eprintln!("generated {} nodes, {} stored edges in {:.2?}", nodes, dataset.graph.num_edges(), start.elapsed());
    let start = Instant::now();
    dataset.write_ogb(dir.path()).expect("writable temporary directory");
    eprintln!("wrote {} MB of gzip CSV in {:.2?}", dir_bytes(dir.path()) / 1_000_000, start.elapsed());
    drop(dataset);

    let csv = LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() };
    let cached = LoadOptions::default();
    // Prime the cache (this load parses the CSV files and writes the cache file).
    Dataset::load(dir.path(), &cached).expect("the written dataset loads");
    let cache_file = Dataset::cache_path(dir.path(), None);
    eprintln!("cache file: {} MB", std::fs::metadata(&cache_file).map_or(0, |m| m.len()) / 1_000_000);

    let mut group = c.benchmark_group("dataset_load");
    group.sample_size(10);
    group.bench_function(format!("csv/{nodes}"), |b| {
        b.iter(|| black_box(Dataset::load(dir.path(), &csv).expect("loads")));
    });
    group.bench_function(format!("hash_raw_files/{nodes}"), |b| {
        b.iter(|| black_box(Dataset::source_fingerprint(dir.path()).expect("hashes")));
    });
    group.bench_function(format!("cache/{nodes}"), |b| {
        b.iter(|| {
            let (dataset, source) = Dataset::load_with_source(dir.path(), &cached).expect("loads");
            assert_eq!(source, LoadSource::Cache);
            black_box(dataset)
        });
    });
    group.finish();
}

criterion_group!(benches, dataset_load);
criterion_main!(benches);
