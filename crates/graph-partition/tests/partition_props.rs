//! Property tests of the partitioners, the partition book and the metrics on random graphs
//! (directed or not, with isolated vertices and self-loops).

mod common;

use graph_partition::book::{CutKind, PartitionBook};
use graph_partition::metrics::PartitionMetrics;
use graph_partition::partition::{Algorithm, EbvWeights, MasterRule, Partition, PartitionConfig, partition_graph};
use graph_partition::{Csr, EdgeListOptions};
use proptest::prelude::*;

/// A random graph, its parts, hosts dividing them, an algorithm and a seed.
fn case() -> impl Strategy<Value = (Csr, PartitionConfig)> {
    (2usize..60, any::<bool>(), any::<bool>())
        .prop_flat_map(|(n, symmetrize, loops)| {
            let edges = prop::collection::vec((0..n as u32, 0..n as u32), 0..n * 4);
            let parts = 1..=n.min(8);
            (Just(n), edges, Just(symmetrize), Just(loops), parts, 0..Algorithm::ALL.len(), any::<u64>(), any::<bool>())
        })
        .prop_flat_map(|(n, edges, symmetrize, loops, parts, algo, seed, host_aware)| {
            let divisors: Vec<usize> = (1..=parts).filter(|h| parts % h == 0).collect();
            let opts = EdgeListOptions { symmetrize, remove_self_loops: !loops };
            let graph = Csr::from_edges(n, &edges, opts).unwrap();
            (
                Just(graph),
                Just(parts),
                prop::sample::select(divisors),
                Just(algo),
                Just(seed),
                Just(host_aware),
                0.0..=1.0f64,
            )
        })
        .prop_map(|(graph, parts, hosts, algo, seed, host_aware, gamma)| {
            let mut cfg = PartitionConfig::new(Algorithm::ALL[algo], parts);
            cfg.hosts = hosts;
            cfg.seed = seed;
            cfg.master = if host_aware { MasterRule::HostAware } else { MasterRule::Hash };
            cfg.ebv = EbvWeights { gamma, ..EbvWeights::default() };
            (graph, cfg)
        })
}

/// Global `(dst, src)` edges a part stores, from its local CSR.
fn global_edges(book: &PartitionBook, part: usize) -> Vec<(u32, u32)> {
    let lg = &book.parts()[part];
    let g = lg.local_to_global();
    (0..lg.num_local()).flat_map(|v| lg.csr().neighbors(v).iter().map(move |&u| (g[v], g[u as usize]))).collect()
}

fn all_entries(graph: &Csr) -> Vec<(u32, u32)> {
    (0..graph.num_nodes()).flat_map(|v| graph.neighbors(v).iter().map(move |&u| (v as u32, u))).collect()
}

/// Runs one aggregation `h_v = sum over in-neighbours u of x_u` distributed over the book's
/// parts, exchanging only through the send/recv lists, and returns `h` per global vertex as
/// computed at each vertex's primary. Integer values keep sums exact whatever the order.
fn distributed_aggregate(book: &PartitionBook, x: &[u64]) -> Vec<u64> {
    let parts = book.parts();
    let mut h = vec![u64::MAX; x.len()];
    match book.meta().cut {
        CutKind::EdgeCut => {
            // Owners supply halo rows (forward exchange); copies start unknown.
            let mut local: Vec<Vec<Option<u64>>> = parts
                .iter()
                .map(|lg| {
                    (0..lg.num_local()).map(|l| lg.is_primary(l).then(|| x[lg.local_to_global()[l] as usize])).collect()
                })
                .collect();
            for a in parts {
                for b in parts {
                    for (&from, &to) in a.send(b.part()).iter().zip(b.recv(a.part())) {
                        local[b.part()][to as usize] = local[a.part()][from as usize];
                    }
                }
            }
            for lg in parts {
                for v in 0..lg.num_primary() {
                    let sum = lg.csr().neighbors(v).iter().map(|&u| local[lg.part()][u as usize].expect("halo filled"));
                    h[lg.local_to_global()[v] as usize] = sum.sum();
                }
            }
        }
        CutKind::VertexCut => {
            // Partial sums over each part's edges, gathered from mirrors at the masters.
            let mut partial: Vec<Vec<u64>> = parts
                .iter()
                .map(|lg| {
                    let g = lg.local_to_global();
                    (0..lg.num_local())
                        .map(|v| lg.csr().neighbors(v).iter().map(|&u| x[g[u as usize] as usize]).sum())
                        .collect()
                })
                .collect();
            for a in parts {
                for b in parts {
                    for (&mirror, &master) in b.recv(a.part()).iter().zip(a.send(b.part())) {
                        partial[a.part()][master as usize] += partial[b.part()][mirror as usize];
                    }
                }
            }
            for lg in parts {
                for v in 0..lg.num_primary() {
                    h[lg.local_to_global()[v] as usize] = partial[lg.part()][v];
                }
            }
        }
        CutKind::FeatureCut => unreachable!(),
    }
    h
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn partitions_books_and_metrics_agree((graph, cfg) in case()) {
        let partition = partition_graph(&graph, &cfg).unwrap();
        partition.validate(&graph).unwrap();
        prop_assert_eq!(&partition, &partition_graph(&graph, &cfg).unwrap(), "deterministic");
        let book = PartitionBook::build(&graph, &partition).unwrap();
        book.validate().unwrap();
        let n = graph.num_nodes();
        let holders = common::holders(&graph, &partition);

        // Every vertex is primary exactly once, on the part the partition says.
        let mut primary_of = vec![u32::MAX; n];
        for lg in book.parts() {
            for &g in &lg.local_to_global()[..lg.num_primary()] {
                prop_assert_eq!(primary_of[g as usize], u32::MAX);
                primary_of[g as usize] = lg.part() as u32;
            }
            // Local vertices are exactly the vertices this part holds.
            let mut expected: Vec<u32> = (0..n as u32).filter(|&v| holders[v as usize].contains(&(lg.part() as u32))).collect();
            let mut got = lg.local_to_global().to_vec();
            got.sort_unstable();
            expected.sort_unstable();
            prop_assert_eq!(got, expected);
            for l in 0..lg.num_local() {
                let g = lg.local_to_global()[l] as usize;
                prop_assert_eq!(lg.local_of(g as u32), Some(l as u32));
                prop_assert_eq!(lg.global_in_degree()[l] as usize, graph.degree(g));
            }
        }
        let mut stored: Vec<(u32, u32)> = (0..cfg.parts).flat_map(|p| global_edges(&book, p)).collect();
        stored.sort_unstable();
        // Every edge is stored exactly once across the parts.
        prop_assert_eq!(stored, all_entries(&graph));
        match &partition {
            Partition::EdgeCut { owner, .. } => {
                prop_assert_eq!(book.meta().cut, CutKind::EdgeCut);
                prop_assert_eq!(&primary_of, owner);
                for lg in book.parts() {
                    // Owned rows are full in-neighbour lists; the halo is the non-owned in-neighbours.
                    let mut halo: Vec<u32> = lg.local_to_global()[..lg.num_primary()]
                        .iter()
                        .flat_map(|&v| graph.neighbors(v as usize).iter().copied())
                        .filter(|&u| owner[u as usize] != lg.part() as u32)
                        .collect();
                    halo.sort_unstable();
                    halo.dedup();
                    let mut copies = lg.local_to_global()[lg.num_primary()..].to_vec();
                    copies.sort_unstable();
                    prop_assert_eq!(copies, halo);
                    for (p, e) in global_edges(&book, lg.part()).iter().enumerate() {
                        prop_assert_eq!(owner[e.0 as usize], lg.part() as u32, "edge {} stored by a non-owner", p);
                    }
                }
            }
            Partition::VertexCut { edge_part, master, .. } => {
                prop_assert_eq!(&primary_of, master);
                for (k, (dst, src)) in all_entries(&graph).into_iter().enumerate() {
                    prop_assert!(global_edges(&book, edge_part[k] as usize).contains(&(dst, src)));
                }
            }
            Partition::FeatureCut { .. } => unreachable!(),
        }

        // A distributed aggregation through the exchange lists equals the global one.
        let x: Vec<u64> = (0..n as u64).map(|v| v * v + 7).collect();
        let global: Vec<u64> = (0..n).map(|v| graph.neighbors(v).iter().map(|&u| x[u as usize]).sum()).collect();
        prop_assert_eq!(distributed_aggregate(&book, &x), global);

        // Metrics from the book equal an independent count from the partition arrays.
        let layout = cfg.layout().unwrap();
        let m = PartitionMetrics::of(&book, &layout).unwrap();
        let x = common::expected_metrics(&graph, &partition, &layout);
        prop_assert!(close(m.replication_factor, x.replication_factor), "{} {}", m.replication_factor, x.replication_factor);
        prop_assert!(close(m.edge_imbalance, x.edge_imbalance), "{} {}", m.edge_imbalance, x.edge_imbalance);
        prop_assert!(close(m.vertex_imbalance, x.vertex_imbalance), "{} {}", m.vertex_imbalance, x.vertex_imbalance);
        prop_assert!(close(m.remote_neighbor_ratio, x.remote_neighbor_ratio));
        prop_assert_eq!(m.edge_cut_fraction.is_some(), x.edge_cut_fraction.is_some());
        if let (Some(a), Some(b)) = (m.edge_cut_fraction, x.edge_cut_fraction) {
            prop_assert!(close(a, b), "{} {}", a, b);
        }
        prop_assert_eq!((m.max_inner_connections, m.max_outer_connections), (x.max_inner, x.max_outer));

        // Save and load round-trip.
        let dir = tempfile::tempdir().unwrap();
        book.save(dir.path()).unwrap();
        prop_assert_eq!(PartitionBook::load(dir.path()).unwrap(), book);
    }
}
