//! Hierarchy-aware placement pays on a graph with community structure: 100k nodes, average
//! degree 20, 1000 communities, 80% of edges inside a community, 2 hosts x 4 devices.

use std::time::Instant;

use graph_partition::book::PartitionBook;
use graph_partition::metrics::PartitionMetrics;
use graph_partition::partition::{Algorithm, EbvWeights, MasterRule, PartitionConfig, partition_graph};
use graph_partition::{Csr, SynthConfig};

fn run(graph: &Csr, gamma: f64, master: MasterRule) -> PartitionMetrics {
    let mut cfg = PartitionConfig::new(Algorithm::Ebv, 8);
    cfg.hosts = 2;
    cfg.ebv = EbvWeights { gamma, ..EbvWeights::default() };
    cfg.master = master;
    let start = Instant::now();
    let partition = partition_graph(graph, &cfg).unwrap();
    let took = start.elapsed().as_secs_f64();
    let book = PartitionBook::build(graph, &partition).unwrap();
    let m = PartitionMetrics::of(&book, &cfg.layout().unwrap()).unwrap();
    println!(
        "gamma {gamma} master {master}: {took:.2}s rf {:.4} edge-imb {:.4} inner {} outer {}",
        m.replication_factor, m.edge_imbalance, m.max_inner_connections, m.max_outer_connections
    );
    m
}

#[test]
fn hierarchical_ebv_cuts_outer_connections_on_communities() {
    let start = Instant::now();
    let synth = SynthConfig {
        nodes: 100_000,
        avg_degree: 20.0,
        features: 1,
        // One class, always shared: the edges follow the communities alone.
        classes: 1,
        homophily: 1.0,
        communities: Some(1000),
        intra_community: 0.8,
        signal_blocks: None,
        seed: 5,
    };
    let graph = synth.generate().unwrap().graph;
    println!(
        "graph: {} nodes, {} entries in {:.2}s",
        graph.num_nodes(),
        graph.num_edges(),
        start.elapsed().as_secs_f64()
    );
    let flat = run(&graph, 0.0, MasterRule::Hash);
    let aware = run(&graph, 0.1, MasterRule::HostAware);
    let reduction = 1.0 - aware.max_outer_connections as f64 / flat.max_outer_connections as f64;
    println!("max outer connections: {:.1}% fewer", 100.0 * reduction);
    assert!(aware.edge_imbalance <= 1.05, "edge imbalance {}", aware.edge_imbalance);
    assert!(reduction >= 0.12, "only {:.1}% fewer outer connections", 100.0 * reduction);
    // The gamma term alone, under either master rule, never sends more across hosts.
    let pairs = [(flat, run(&graph, 0.1, MasterRule::Hash)), (run(&graph, 0.0, MasterRule::HostAware), aware)];
    for (gamma0, gamma1) in pairs {
        assert!(gamma1.max_outer_connections <= gamma0.max_outer_connections);
    }
}
