//! Sampler and prefetch behaviour on small graphs whose samples can be checked by hand.

use std::num::NonZeroUsize;

use super::*;
use crate::csr::{Csr, EdgeListOptions};

/// A star: vertex 0 joined to 1..=5, plus the edge 1-2.
fn star() -> Csr {
    let edges = [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 2)];
    Csr::from_edges(6, &edges, EdgeListOptions::default()).unwrap()
}

fn fanouts(text: &str) -> Fanouts {
    text.parse().unwrap()
}

const KEY: StepKey = StepKey { epoch: 0, step: 0 };

#[test]
fn two_layer_sample_by_hand() {
    let graph = star();
    let sampler = NeighborSampler::new(&graph, fanouts("-1,2"), 5).unwrap();
    let batch = sampler.sample(KEY, &[0]).unwrap();
    let [input, output] = batch.blocks() else { panic!("two blocks") };
    // Output block: vertex 0 keeps 2 of its 5 neighbours.
    assert_eq!(output.dst_ids(), &[0]);
    assert_eq!(output.num_src(), 3);
    assert_eq!(output.adj().neighbors(0), &[1, 2]);
    let picked = &output.src_ids()[1..];
    assert!(picked[0] != picked[1] && picked.iter().all(|&v| (1..=5).contains(&v)));
    // Input block: its destinations are the output block's sources, each with every neighbour.
    assert_eq!(input.dst_ids(), output.src_ids());
    for (i, &dst) in input.dst_ids().iter().enumerate() {
        let srcs: Vec<u32> = input.adj().neighbors(i).iter().map(|&c| input.src_ids()[c as usize]).collect();
        let mut sorted = srcs.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, graph.neighbors(dst as usize));
    }
    assert_eq!(batch.num_edges(), 2 + input.num_edges());
    assert_eq!(batch.counts()[1], BlockCounts { src_vertices: 3, dst_vertices: 1, edges: 2 });
    // Same key, same sample; another step, another draw somewhere in a few tries.
    assert_eq!(sampler.sample(KEY, &[0]).unwrap(), batch);
    let other = (1..20).any(|step| {
        let b = sampler.sample(StepKey { epoch: 0, step }, &[0]).unwrap();
        b.blocks()[1].src_ids() != output.src_ids()
    });
    assert!(other, "20 steps drew the same 2 of 5 neighbours");
}

#[test]
fn bad_input_is_rejected_and_the_sampler_recovers() {
    let graph = star();
    let rect = Csr::try_new(2, 3, vec![0, 0, 0], vec![]).unwrap();
    assert_eq!(NeighborSampler::new(&rect, fanouts("2"), 0).err(), Some(SampleError::NotSquare { rows: 2, cols: 3 }));
    let sampler = NeighborSampler::new(&graph, fanouts("2,2"), 0).unwrap();
    assert_eq!(sampler.sample(KEY, &[1, 6]), Err(SampleError::SeedOutOfRange { seed: 6, num_nodes: 6 }));
    assert_eq!(sampler.sample(KEY, &[3, 1, 3]), Err(SampleError::DuplicateSeed { seed: 3 }));
    // The failed call's id map went back to the pool reset: results match a fresh sampler's.
    let fresh = NeighborSampler::new(&graph, fanouts("2,2"), 0).unwrap();
    assert_eq!(sampler.sample(KEY, &[3, 1]), fresh.sample(KEY, &[3, 1]));
}

#[test]
fn empty_batch_gives_empty_blocks() {
    let graph = star();
    let sampler = NeighborSampler::new(&graph, fanouts("3,3"), 0).unwrap();
    let batch = sampler.sample(KEY, &[]).unwrap();
    assert_eq!(batch.counts(), vec![BlockCounts::default(); 2]);
    assert!(batch.seeds().is_empty() && batch.input_ids().is_empty());
}

/// A 2000-vertex ring with chords, so blocks are large enough for several parallel tasks.
fn ring() -> Csr {
    let edges: Vec<(u32, u32)> = (0..2000u32).flat_map(|v| [(v, (v + 1) % 2000), (v, (v * 7 + 3) % 2000)]).collect();
    Csr::from_edges(2000, &edges, EdgeListOptions::default()).unwrap()
}

#[test]
fn prefetch_yields_the_serial_batches() {
    let graph = ring();
    let sampler = NeighborSampler::new(&graph, fanouts("3,2"), 11).unwrap();
    let train: Vec<u32> = (0..2000).step_by(3).collect();
    let plan = BatchPlan::shuffled(&train, 100, 11, 4, Remainder::Keep).unwrap();
    let share = Share::new(1, 2).unwrap();
    let serial: Vec<MiniBatch> = plan.steps(share).map(|s| sampler.sample(s.key, s.seeds).unwrap()).collect();
    assert_eq!(serial.len(), 7);
    for ahead in [1, 3] {
        let prefetched: Vec<MiniBatch> = std::thread::scope(|scope| {
            let ahead = NonZeroUsize::new(ahead).unwrap();
            let options = PrefetchOptions { ahead, ..PrefetchOptions::default() };
            let mut batches = Prefetch::with_options(scope, &sampler, plan.steps(share), options);
            let all = batches.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
            assert!(batches.sampling_time() > std::time::Duration::ZERO);
            all
        });
        assert_eq!(prefetched, serial);
    }
    for threads in [2, 3, 8] {
        let prefetched: Vec<MiniBatch> = std::thread::scope(|scope| {
            let options =
                PrefetchOptions { threads: NonZeroUsize::new(threads).unwrap(), ..PrefetchOptions::default() };
            let mut batches = Prefetch::with_options(scope, &sampler, plan.steps(share), options);
            batches.by_ref().collect::<Result<Vec<_>, _>>().unwrap()
        });
        assert_eq!(prefetched, serial, "{threads} threads hand over the serial batches, in order");
    }
}

#[test]
fn prefetch_on_threads_hands_over_an_error_in_its_turn_and_stops() {
    let graph = ring();
    let sampler = NeighborSampler::new(&graph, fanouts("2"), 0).unwrap();
    let (good, bad) = ([1u32, 2, 3], [4u32, 5, 4]);
    for failing in 0..4 {
        let steps: Vec<Step> =
            (0..6).map(|i| Step { key: KEY, seeds: if i == failing { &bad[..] } else { &good[..] } }).collect();
        let results: Vec<_> = std::thread::scope(|scope| {
            let options = PrefetchOptions { threads: NonZeroUsize::new(3).unwrap(), ..PrefetchOptions::default() };
            Prefetch::with_options(scope, &sampler, steps.iter().copied(), options).collect()
        });
        assert_eq!(results.len(), failing + 1, "the steps before it, then the error");
        assert!(results[..failing].iter().all(Result::is_ok));
        assert_eq!(results[failing], Err(SampleError::DuplicateSeed { seed: 4 }));
    }
}

/// A function finishing each batch on its sampling thread: the items are its results in step
/// order, whatever the threads; its error ends the iterator in its step's turn, as a sampling
/// error does, and a sampling error still comes through it converted.
#[test]
fn prefetch_finishes_each_batch_on_its_thread_in_step_order() {
    #[derive(Debug, PartialEq)]
    enum Finished {
        Sampling(SampleError),
        TooFew(usize),
    }
    impl From<SampleError> for Finished {
        fn from(e: SampleError) -> Self {
            Finished::Sampling(e)
        }
    }
    let graph = ring();
    let sampler = NeighborSampler::new(&graph, fanouts("3,2"), 11).unwrap();
    let (few, many, bad) = ([7u32], [1u32, 2, 3, 4], [4u32, 5, 4]);
    // The seed count and the batch's input count, or an error for a batch of one seed.
    let finish = |batch: MiniBatch| match batch.seeds().len() {
        1 => Err(Finished::TooFew(1)),
        n => Ok((n, batch.input_ids().len())),
    };
    for threads in [1, 3] {
        let options = PrefetchOptions { threads: NonZeroUsize::new(threads).unwrap(), ..PrefetchOptions::default() };
        let run = |steps: Vec<Step>| -> Vec<Result<(usize, usize), Finished>> {
            std::thread::scope(|scope| Prefetch::finishing(scope, &sampler, steps, options, &finish).collect())
        };
        let serial: Vec<_> = (0..5).map(|_| finish(sampler.sample(KEY, &many).unwrap())).collect();
        let steps: Vec<Step> = (0..5).map(|_| Step { key: KEY, seeds: &many[..] }).collect();
        assert_eq!(run(steps), serial, "{threads} threads");
        for (i, (seeds, error)) in
            [(&few[..], Finished::TooFew(1)), (&bad[..], SampleError::DuplicateSeed { seed: 4 }.into())]
                .into_iter()
                .enumerate()
        {
            let steps: Vec<Step> =
                (0..6).map(|s| Step { key: KEY, seeds: if s == 2 + i { seeds } else { &many[..] } }).collect();
            let results = run(steps);
            assert_eq!(results.len(), 3 + i, "{threads} threads: the steps before it, then the error");
            assert_eq!(results[2 + i], Err(error), "{threads} threads");
        }
    }
}

#[test]
fn prefetch_hands_over_an_error_and_stops() {
    let graph = ring();
    let sampler = NeighborSampler::new(&graph, fanouts("2"), 0).unwrap();
    let good = [1, 2, 3];
    let bad = [4, 5, 4];
    let steps = [&good[..], &bad, &good].map(|seeds| Step { key: KEY, seeds });
    let results: Vec<_> = std::thread::scope(|scope| Prefetch::spawn(scope, &sampler, steps).collect());
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    assert_eq!(results[1], Err(SampleError::DuplicateSeed { seed: 4 }));
}

#[test]
fn prefetch_reports_a_panicking_thread() {
    let graph = ring();
    let sampler = NeighborSampler::new(&graph, fanouts("2"), 0).unwrap();
    let seeds = [1u32, 2];
    // The steps iterator runs on the sampling thread, so its panic is the thread's.
    let steps = (0..3).map(|i| if i < 1 { Step { key: KEY, seeds: &seeds } } else { panic!("step source failed") });
    let results: Vec<_> = std::thread::scope(|scope| Prefetch::spawn(scope, &sampler, steps).collect());
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    assert_eq!(results[1], Err(SampleError::PrefetchPanicked { message: "step source failed".into() }));
}

#[test]
fn dropping_prefetch_early_stops_the_thread() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let graph = ring();
    let sampler = NeighborSampler::new(&graph, fanouts("2,2"), 0).unwrap();
    let seeds: Vec<u32> = (0..500).collect();
    let pulled = AtomicUsize::new(0);
    let steps = (0..1000u64).map(|step| {
        pulled.fetch_add(1, Ordering::Relaxed);
        Step { key: StepKey { epoch: 0, step }, seeds: &seeds }
    });
    std::thread::scope(|scope| {
        let mut batches = Prefetch::spawn(scope, &sampler, steps);
        assert!(batches.next().unwrap().is_ok());
        drop(batches);
        // Joined in `drop`: the thread took at most the step in hand and the one after.
        assert!(pulled.load(Ordering::Relaxed) <= 3, "{} steps pulled", pulled.load(Ordering::Relaxed));
    });
}

/// Blocks of thousands of destinations span many parallel tasks; the proptests' small graphs
/// fit in one.
#[test]
fn many_parallel_tasks_match_the_serial_path() {
    let graph = ring();
    let seeds: Vec<u32> = (0..2000).rev().step_by(2).collect();
    let serial = NeighborSampler::new(&graph, fanouts("-1,3,2"), 1).unwrap().with_parallel_threshold(usize::MAX);
    let parallel = NeighborSampler::new(&graph, fanouts("-1,3,2"), 1).unwrap().with_parallel_threshold(0);
    let expected = serial.sample(KEY, &seeds).unwrap();
    assert!(expected.blocks()[0].num_dst() > 4 * 256, "the input block spans several tasks");
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        assert_eq!(pool.install(|| parallel.sample(KEY, &seeds)).unwrap(), expected, "{threads} threads");
    }
}
