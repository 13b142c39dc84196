//! The acceptance checks on Cora (4 parts): EBV against random vertex-cut, METIS
//! against hash, and the hierarchy-aware EBV on 2 hosts.

mod common;

use graph_partition::Csr;
use graph_partition::book::PartitionBook;
use graph_partition::metrics::PartitionMetrics;
use graph_partition::partition::{Algorithm, EbvWeights, MasterRule, PartitionConfig, partition_graph};

fn metrics(graph: &Csr, cfg: &PartitionConfig) -> PartitionMetrics {
    let partition = partition_graph(graph, cfg).unwrap();
    let book = PartitionBook::build(graph, &partition).unwrap();
    book.validate().unwrap();
    let m = PartitionMetrics::of(&book, &cfg.layout().unwrap()).unwrap();
    println!(
        "{} gamma {} master {}: rf {:.4} edge-imb {:.4} vertex-imb {:.4} cut {:?} inner {} outer {}",
        cfg.algorithm,
        cfg.ebv.gamma,
        cfg.master,
        m.replication_factor,
        m.edge_imbalance,
        m.vertex_imbalance,
        m.edge_cut_fraction,
        m.max_inner_connections,
        m.max_outer_connections
    );
    m
}

#[test]
fn ebv_is_balanced_and_replicates_less_than_random_vertex_cut() {
    let cora = common::cora().graph;
    let ebv = metrics(&cora, &PartitionConfig::new(Algorithm::Ebv, 4));
    let random = metrics(&cora, &PartitionConfig::new(Algorithm::RandomVertexCut, 4));
    assert!(ebv.edge_imbalance <= 1.05, "EBV edge imbalance {}", ebv.edge_imbalance);
    assert!(
        ebv.replication_factor < random.replication_factor,
        "EBV RF {} vs random vertex-cut {}",
        ebv.replication_factor,
        random.replication_factor
    );
}

#[test]
fn metis_cuts_under_half_the_edges_hash_cuts() {
    let cora = common::cora().graph;
    let metis = metrics(&cora, &PartitionConfig::new(Algorithm::Metis, 4)).edge_cut_fraction.unwrap();
    let hash = metrics(&cora, &PartitionConfig::new(Algorithm::Hash, 4)).edge_cut_fraction.unwrap();
    let bdg = metrics(&cora, &PartitionConfig::new(Algorithm::Bdg, 4)).edge_cut_fraction.unwrap();
    assert!(metis < 0.5 * hash, "METIS cut fraction {metis} vs hash {hash}");
    assert!(bdg < hash, "BDG cut fraction {bdg} vs hash {hash}");
}

#[test]
fn hierarchy_aware_ebv_sends_fewer_messages_across_hosts() {
    let cora = common::cora().graph;
    let run = |gamma: f64, master: MasterRule| {
        let mut cfg = PartitionConfig::new(Algorithm::Ebv, 4);
        cfg.hosts = 2;
        cfg.ebv = EbvWeights { gamma, ..EbvWeights::default() };
        cfg.master = master;
        metrics(&cora, &cfg)
    };
    let flat = run(0.0, MasterRule::Hash);
    let aware = run(0.1, MasterRule::HostAware);
    assert!(aware.edge_imbalance <= 1.05, "edge imbalance {}", aware.edge_imbalance);
    assert!(
        aware.max_outer_connections < flat.max_outer_connections,
        "outer connections: hierarchical {} vs flat {}",
        aware.max_outer_connections,
        flat.max_outer_connections
    );
    for master in [MasterRule::Hash, MasterRule::HostAware] {
        let (g0, g1) = (run(0.0, master), run(0.1, master));
        assert!(
            g1.max_outer_connections <= g0.max_outer_connections,
            "{master} masters: gamma 0.1 sends {} outer, gamma 0 {}",
            g1.max_outer_connections,
            g0.max_outer_connections
        );
    }
}
