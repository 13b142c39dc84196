//! Partitioning time on a 1M-node synthetic graph (average degree 10, i.e. ~10M stored edges,
//! 1000 communities): hierarchical EBV (8 parts on 2 hosts, with master placement), METIS
//! k-way (8 parts), and building the partition book of the EBV result.
//!
//! Run: `cargo bench -p halo-benches --bench partition -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use graph_partition::book::PartitionBook;
use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};
use graph_partition::synth::SynthConfig;

fn partition_1m(c: &mut Criterion) {
    let synth = SynthConfig {
        nodes: 1_000_000,
        avg_degree: 10.0,
        features: 1,
        classes: 2,
        communities: Some(1000),
        intra_community: 0.8,
        seed: 1,
        ..SynthConfig::default()
    };
    let graph = synth.generate().expect("valid synthetic parameters").graph;
    eprintln!("graph: {} nodes, {} stored edges", graph.num_nodes(), graph.num_edges());
    let mut ebv = PartitionConfig::new(Algorithm::Ebv, 8);
    ebv.hosts = 2;
    let metis = PartitionConfig::new(Algorithm::Metis, 8);

    let mut group = c.benchmark_group("partition_1m");
    // One run takes seconds: the minimum number of samples is plenty.
    group.sample_size(10);
    group.bench_function("ebv_8parts_2hosts", |b| b.iter(|| partition_graph(black_box(&graph), &ebv).unwrap()));
    group.bench_function("metis_8parts", |b| b.iter(|| partition_graph(black_box(&graph), &metis).unwrap()));
    let partition = partition_graph(&graph, &ebv).unwrap();
    group
        .bench_function("book_ebv_8parts", |b| b.iter(|| PartitionBook::build(black_box(&graph), &partition).unwrap()));
    group.finish();
}

criterion_group!(benches, partition_1m);
criterion_main!(benches);
