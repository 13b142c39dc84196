//! Property tests of the sampler over random graphs: every structural promise of a
//! [`MiniBatch`], and independence from thread count, seed order and seed partitioning.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::sync::LazyLock;

use proptest::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};

use super::{Fanout, Fanouts, MiniBatch, NeighborSampler, StepKey};
use crate::csr::{Csr, EdgeListOptions};

static POOLS: LazyLock<[ThreadPool; 2]> =
    LazyLock::new(|| [1, 4].map(|threads| ThreadPoolBuilder::new().num_threads(threads).build().unwrap()));

/// A graph (directed or symmetric, self loops or not), per-layer fanouts, distinct seeds and
/// a step key.
#[derive(Debug, Clone)]
struct Case {
    graph: Csr,
    fanouts: Fanouts,
    seeds: Vec<u32>,
    key: StepKey,
    seed: u64,
}

fn fanout() -> impl Strategy<Value = Fanout> {
    prop_oneof![1 => Just(Fanout::All), 3 => (1u32..6).prop_map(|k| Fanout::Take(NonZeroU32::new(k).unwrap()))]
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..50)
        .prop_flat_map(|n| {
            let edges = prop::collection::vec((0..n as u32, 0..n as u32), 0..n * 6);
            let seeds = Just((0..n as u32).collect::<Vec<_>>()).prop_shuffle();
            (Just(n), edges, any::<(bool, bool)>(), seeds, 0..=n)
        })
        .prop_flat_map(|(n, edges, (symmetrize, remove_self_loops), seeds, batch)| {
            let graph = Csr::from_edges(n, &edges, EdgeListOptions { symmetrize, remove_self_loops }).unwrap();
            let fanouts = prop::collection::vec(fanout(), 1..4).prop_map(|f| Fanouts::new(f).unwrap());
            (Just(graph), fanouts, Just(seeds[..batch].to_vec()), any::<(u8, u8, u64)>())
        })
        .prop_map(|(graph, fanouts, seeds, (epoch, step, seed))| Case {
            graph,
            fanouts,
            seeds,
            key: StepKey { epoch: u64::from(epoch), step: u64::from(step) },
            seed,
        })
}

fn sample(case: &Case, seeds: &[u32], parallel_min_dst: usize) -> MiniBatch {
    NeighborSampler::new(&case.graph, case.fanouts.clone(), case.seed)
        .unwrap()
        .with_parallel_threshold(parallel_min_dst)
        .sample(case.key, seeds)
        .unwrap()
}

/// Global sampled in-neighbours of every destination, per layer: `(layer, dst) -> sources`.
fn neighbourhoods(batch: &MiniBatch) -> BTreeMap<(usize, u32), Vec<u32>> {
    let mut out = BTreeMap::new();
    for (layer, block) in batch.blocks().iter().enumerate() {
        for (i, &dst) in block.dst_ids().iter().enumerate() {
            let mut srcs: Vec<u32> = block.adj().neighbors(i).iter().map(|&c| block.src_ids()[c as usize]).collect();
            srcs.sort_unstable();
            out.insert((layer, dst), srcs);
        }
    }
    out
}

/// Checks every structural promise of a sample of `seeds`.
fn check_structure(case: &Case, seeds: &[u32], batch: &MiniBatch) -> Result<(), TestCaseError> {
    let blocks = batch.blocks();
    prop_assert_eq!(blocks.len(), case.fanouts.num_layers());
    prop_assert_eq!(batch.seeds(), seeds);
    for pair in blocks.windows(2) {
        prop_assert_eq!(pair[0].dst_ids(), pair[1].src_ids(), "block l's destinations are block l+1's sources");
    }
    for (block, &fanout) in blocks.iter().zip(case.fanouts.as_slice()) {
        let src = block.src_ids();
        prop_assert_eq!(&src[..block.num_dst()], block.dst_ids());
        prop_assert_eq!(src.iter().collect::<BTreeSet<_>>().len(), src.len(), "source ids are distinct");
        prop_assert_eq!((block.adj().num_rows(), block.adj().num_cols()), (block.num_dst(), block.num_src()));
        // Sources past the destinations are numbered in order of first appearance, scanning
        // destinations in order (each one's neighbours in draw order, which the sorted rows
        // hide): the first row that reaches a source never decreases along the local ids.
        let mut first_row = vec![usize::MAX; src.len()];
        for (i, &dst) in block.dst_ids().iter().enumerate() {
            let all = case.graph.neighbors(dst as usize);
            let local = block.adj().neighbors(i);
            let mut global: Vec<u32> = local.iter().map(|&c| src[c as usize]).collect();
            global.sort_unstable();
            prop_assert_eq!(global.len(), fanout.limit(all.len()), "row of {} has min(fanout, in-degree) edges", dst);
            prop_assert!(global.windows(2).all(|w| w[0] < w[1]), "no duplicate edges into {}", dst);
            prop_assert!(global.iter().all(|s| all.binary_search(s).is_ok()), "every edge into {} exists", dst);
            if fanout == Fanout::All {
                prop_assert_eq!(&global[..], all, "fanout -1 keeps every in-edge of {}", dst);
            }
            for &c in local {
                first_row[c as usize] = first_row[c as usize].min(i);
            }
        }
        let new_sources = &first_row[block.num_dst()..];
        prop_assert!(new_sources.iter().all(|&r| r != usize::MAX), "every source past the destinations is sampled");
        prop_assert!(new_sources.windows(2).all(|w| w[0] <= w[1]), "sources in order of first appearance");
    }
    let counts = batch.counts();
    prop_assert_eq!(counts.iter().map(|c| c.edges).sum::<usize>(), batch.num_edges());
    prop_assert_eq!(counts[0].src_vertices, batch.input_ids().len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn blocks_keep_their_promises(case in case()) {
        let batch = sample(&case, &case.seeds, usize::MAX);
        check_structure(&case, &case.seeds, &batch)?;
    }

    #[test]
    fn identical_across_thread_counts(case in case()) {
        let serial = sample(&case, &case.seeds, usize::MAX);
        for pool in POOLS.iter() {
            let parallel = pool.install(|| sample(&case, &case.seeds, 0));
            prop_assert_eq!(&parallel, &serial, "{} threads", pool.current_num_threads());
        }
    }

    /// A vertex's sample depends only on its key: cutting the seeds into shares (as
    /// data-parallel workers do) or reordering them changes the numbering, never a
    /// destination's sampled neighbours, and the shares together reach exactly the vertices
    /// the whole batch reaches.
    #[test]
    fn independent_of_seed_order_and_partition(case in case(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4)) {
        let whole = neighbourhoods(&sample(&case, &case.seeds, usize::MAX));
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c.index(case.seeds.len() + 1)).collect();
        bounds.extend([0, case.seeds.len()]);
        bounds.sort_unstable();
        let mut union = BTreeMap::new();
        for w in bounds.windows(2) {
            let mut share = case.seeds[w[0]..w[1]].to_vec();
            share.reverse();
            let batch = sample(&case, &share, 0);
            check_structure(&case, &share, &batch)?;
            for (dst, srcs) in neighbourhoods(&batch) {
                prop_assert_eq!(whole.get(&dst), Some(&srcs), "layer {} vertex {}", dst.0, dst.1);
                union.insert(dst, srcs);
            }
        }
        prop_assert_eq!(union, whole);
    }
}
