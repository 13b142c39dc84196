//! ADGraph against one process: with hops at least the number of layers, workers sampling in
//! their extended parts train exactly as one process on the union of their batches, parameter
//! for parameter after every epoch (full and sampled fanouts, dropout on); with hop 0 they
//! do not.

use comm_hierarchy::{Communicator, LocalCluster, Topology};
use gnn_core::{ConvKind, GcnNorm};
use graph_partition::partition::{Algorithm, PartitionConfig};
use graph_partition::{Dataset, SynthConfig};

use super::plan::{self, PartData};
use crate::config::{LrScaling, TrainConfig};
use crate::error::DistError;
use crate::harness::CommClock;
use crate::method::Sampling;
use crate::minibatch::trainer::{BatchTrainer, StepSeeds, Subgraph, SyncOnly};

const WORKERS: usize = 3;
const BATCH: usize = 6;
const EPOCHS: usize = 3;

fn dataset() -> Dataset {
    let synth = SynthConfig { nodes: 300, avg_degree: 5.0, features: 10, classes: 4, seed: 5, ..Default::default() };
    let mut dataset = synth.generate().unwrap();
    dataset.splits.train = (0..300).step_by(5).collect();
    dataset
}

fn config(model: ConvKind) -> TrainConfig {
    TrainConfig { model, hidden: 8, heads: 2, seed: 4, dropout: 0.3, ..TrainConfig::default() }
}

fn sampling(fanouts: &str) -> Sampling {
    let fanouts = fanouts.parse().unwrap();
    Sampling {
        batch_size: BATCH,
        fanouts,
        gcn_norm: GcnNorm::Global,
        eval_batch_size: 64,
        lr_scaling: LrScaling::None,
        lr_warmup_epochs: 0,
        sampler_threads: std::num::NonZeroUsize::MIN,
    }
}

fn parts(dataset: &Dataset, hops: usize) -> Vec<PartData> {
    let pconfig = PartitionConfig { seed: 1, ..PartitionConfig::new(Algorithm::Random, WORKERS) };
    plan::plan(dataset, &pconfig, hops).unwrap().parts
}

/// Parameters after every epoch of every worker, the parts shipped through the communicator.
fn adgraph(config: &TrainConfig, sampling: &Sampling, parts: Vec<PartData>) -> Vec<Vec<Vec<f32>>> {
    let topology = Topology::for_workers(WORKERS, 1, Default::default()).unwrap();
    let parts = std::sync::Mutex::new(Some(parts));
    LocalCluster::run(&topology, |comm| {
        let clock = CommClock::new(None);
        let outgoing = if comm.rank() == 0 { parts.lock().unwrap().take() } else { None };
        let part = plan::ship(comm, &clock, outgoing)?;
        let subgraph = Subgraph { dataset: &part.dataset, keys: &part.keys, degrees: part.degrees() };
        let mut trainer = BatchTrainer::on_subgraph(config, sampling, subgraph, WORKERS)?;
        let mut sync = SyncOnly::new(|grads: &mut [f32]| {
            comm.all_reduce_sum_f32("grads", grads).map_err(DistError::from)?;
            Ok(0.0)
        });
        let mut params = Vec::new();
        for epoch in 1..=EPOCHS {
            let steps = part.steps(comm.rank(), BATCH, config.seed, epoch);
            trainer.train_steps(epoch, &steps, &mut sync)?;
            params.push(trainer.host_model().unwrap().params().to_vec());
        }
        Ok::<_, crate::TrainError>(params)
    })
    .unwrap()
}

/// Parameters after every epoch of one process on the whole graph, each step's batch the
/// workers' batches of that step (global ids, in rank order).
fn single_process(config: &TrainConfig, sampling: &Sampling, dataset: &Dataset, parts: &[PartData]) -> Vec<Vec<f32>> {
    let mut trainer = BatchTrainer::new(config, sampling, dataset, 1).unwrap();
    (1..=EPOCHS)
        .map(|epoch| {
            let per_worker: Vec<Vec<StepSeeds>> =
                parts.iter().enumerate().map(|(rank, p)| p.steps(rank, BATCH, config.seed, epoch)).collect();
            let steps: Vec<StepSeeds> = (0..per_worker[0].len())
                .map(|step| {
                    let seeds = per_worker
                        .iter()
                        .zip(parts)
                        .flat_map(|(steps, part)| steps[step].seeds.iter().map(|&l| part.keys[l as usize]))
                        .collect();
                    StepSeeds { seeds, global_rows: per_worker[0][step].global_rows }
                })
                .collect();
            trainer.train_steps(epoch, &steps, &mut SyncOnly::new(|_: &mut [f32]| Ok(0.0))).unwrap();
            trainer.host_model().unwrap().params().to_vec()
        })
        .collect()
}

fn max_relative_gap(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f32::max)
}

#[test]
fn hops_at_least_the_layers_train_as_one_process_step_by_step() {
    let dataset = dataset();
    for (fanouts, hops) in [("-1,-1", 2), ("4,3", 2), ("3,2", 3)] {
        let parts_for = || parts(&dataset, hops);
        let reference_parts = parts_for();
        let steps = reference_parts[0].steps(0, BATCH, 4, 1).len();
        assert!(steps >= 2, "several steps per epoch");
        for (rank, part) in reference_parts.iter().enumerate() {
            assert_eq!(part.steps(rank, BATCH, 4, 1).len(), steps, "every worker takes the same steps");
        }
        for model in [ConvKind::Sage, ConvKind::Gat, ConvKind::Gcn] {
            let (config, sampling) = (config(model), sampling(fanouts));
            let single = single_process(&config, &sampling, &dataset, &reference_parts);
            let workers = adgraph(&config, &sampling, parts_for());
            for (rank, epochs) in workers.iter().enumerate() {
                for (epoch, (w, s)) in epochs.iter().zip(&single).enumerate() {
                    let gap = max_relative_gap(w, s);
                    assert!(
                        gap <= 1e-4,
                        "{model:?} fanouts {fanouts} hops {hops} rank {rank} epoch {}: {gap}",
                        epoch + 1
                    );
                }
            }
        }
    }
}

#[test]
fn hop_zero_loses_neighbours_and_training_departs_from_one_process() {
    let dataset = dataset();
    let (config, sampling) = (config(ConvKind::Sage), sampling("-1,-1"));
    let reference = parts(&dataset, 0);
    let single = single_process(&config, &sampling, &dataset, &reference);
    let workers = adgraph(&config, &sampling, parts(&dataset, 0));
    assert!(max_relative_gap(&workers[0][0], &single[0]) > 1e-3, "a random part at hop 0 misses neighbours");
    let held: u64 = reference.iter().map(PartData::held_bytes).sum();
    let extended: u64 = parts(&dataset, 2).iter().map(PartData::held_bytes).sum();
    assert!(held < extended, "hops add vertices to hold");
}
