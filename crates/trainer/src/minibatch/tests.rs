//! Data-parallel workers against one process on the same global batches, parameter for
//! parameter after every epoch.

use comm_hierarchy::{Communicator, LocalCluster, Topology};
use gnn_core::{ConvKind, GcnNorm};
use graph_partition::sample::Share;
use graph_partition::{Dataset, SynthConfig};

use super::trainer::{BatchTrainer, NoSync, SyncOnly};
use crate::config::{LrScaling, OptimizerKind, TrainConfig};
use crate::method::Sampling;

pub(crate) const WORKERS: usize = 3;
pub(crate) const BATCH: usize = 8;
/// Six full global batches of 24 and a last one of 2 seeds, so one worker's last share is empty.
const TRAIN: usize = WORKERS * BATCH * 6 + 2;
pub(crate) const EPOCHS: usize = 3;

pub(crate) fn dataset() -> Dataset {
    let synth = SynthConfig { nodes: 400, avg_degree: 6.0, features: 12, classes: 4, seed: 2, ..Default::default() };
    let mut dataset = synth.generate().unwrap();
    dataset.splits.train = (0..TRAIN as u32).collect();
    dataset
}

pub(crate) fn config(model: ConvKind) -> TrainConfig {
    TrainConfig { model, hidden: 8, heads: 2, seed: 9, ..TrainConfig::default() }
}

pub(crate) fn sampling(batch_size: usize, lr_scaling: LrScaling) -> Sampling {
    warmed(batch_size, lr_scaling, 0)
}

fn warmed(batch_size: usize, lr_scaling: LrScaling, lr_warmup_epochs: usize) -> Sampling {
    Sampling {
        batch_size,
        fanouts: "4,3".parse().unwrap(),
        gcn_norm: GcnNorm::Global,
        eval_batch_size: 64,
        lr_scaling,
        lr_warmup_epochs,
        // Several sampling threads: the equalities below hold whatever the number.
        sampler_threads: std::num::NonZeroUsize::new(3).unwrap(),
    }
}

/// Parameters after each epoch of one process on global batches of `WORKERS x BATCH`.
pub(crate) fn single_process(config: &TrainConfig, dataset: &Dataset) -> Vec<Vec<f32>> {
    let mut trainer = BatchTrainer::new(config, &sampling(WORKERS * BATCH, LrScaling::None), dataset, 1).unwrap();
    (1..=EPOCHS)
        .map(|epoch| {
            let totals = trainer.train_epoch(epoch, Share::whole(), &mut NoSync).unwrap();
            assert_eq!(totals.steps, 7);
            trainer.host_model().unwrap().params().to_vec()
        })
        .collect()
}

/// Parameters after each epoch of every one of `WORKERS` data-parallel workers.
fn data_parallel(config: &TrainConfig, dataset: &Dataset, lr_scaling: LrScaling) -> Vec<Vec<Vec<f32>>> {
    data_parallel_warmed(config, dataset, lr_scaling, 0)
}

fn data_parallel_warmed(
    config: &TrainConfig,
    dataset: &Dataset,
    lr_scaling: LrScaling,
    warmup: usize,
) -> Vec<Vec<Vec<f32>>> {
    let topology = Topology::for_workers(WORKERS, 1, Default::default()).unwrap();
    LocalCluster::run(&topology, |comm| {
        let mut trainer = BatchTrainer::new(config, &warmed(BATCH, lr_scaling, warmup), dataset, WORKERS)?;
        let share = Share::new(comm.rank(), comm.size())?;
        let mut sync = SyncOnly::new(|grads: &mut [f32]| {
            comm.all_reduce_sum_f32("grads", grads).map_err(crate::error::DistError::from)?;
            Ok(0.0)
        });
        let mut params = Vec::new();
        for epoch in 1..=EPOCHS {
            let totals = trainer.train_epoch(epoch, share, &mut sync)?;
            assert_eq!(totals.steps, 7, "every worker takes every step");
            params.push(trainer.host_model().unwrap().params().to_vec());
        }
        Ok::<_, crate::TrainError>(params)
    })
    .unwrap()
}

pub(crate) fn assert_close(what: &str, a: &[f32], b: &[f32], tol: f32) {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}: parameter {i} is {x}, expected {y}");
    }
}

/// 21 steps (7 per epoch, the last one with an empty share on worker 2).
#[test]
fn workers_on_shares_of_a_global_batch_equal_one_process_on_it() {
    let dataset = dataset();
    for model in [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat] {
        let config = config(model);
        let single = single_process(&config, &dataset);
        let workers = data_parallel(&config, &dataset, LrScaling::None);
        for (rank, epochs) in workers.iter().enumerate() {
            for (epoch, (dp, sp)) in epochs.iter().zip(&single).enumerate() {
                assert_close(&format!("{model:?} rank {rank} epoch {}", epoch + 1), dp, sp, 1e-4);
            }
            assert_eq!(epochs.last(), workers[0].last(), "{model:?}: every rank applies the same update");
        }
    }
}

/// The same equality under SGD with Nesterov momentum.
#[test]
fn workers_equal_one_process_under_sgd() {
    let dataset = dataset();
    let mut config = config(ConvKind::Sage);
    (config.optimizer, config.lr, config.momentum, config.nesterov) = (OptimizerKind::Sgd, 0.2, 0.9, true);
    let single = single_process(&config, &dataset);
    let workers = data_parallel(&config, &dataset, LrScaling::None);
    for (rank, epochs) in workers.iter().enumerate() {
        for (epoch, (dp, sp)) in epochs.iter().zip(&single).enumerate() {
            assert_close(&format!("sgd rank {rank} epoch {}", epoch + 1), dp, sp, 1e-4);
        }
    }
    let adam = single_process(&self::config(ConvKind::Sage), &dataset);
    assert_ne!(adam.last(), single.last(), "sgd steps otherwise than adam");
}

#[test]
fn linear_lr_scaling_multiplies_the_rate_by_the_workers() {
    let dataset = dataset();
    let config = config(ConvKind::Sage);
    let scaled = BatchTrainer::new(&config, &sampling(BATCH, LrScaling::Linear), &dataset, WORKERS).unwrap();
    assert_eq!(scaled.lr(), config.lr * WORKERS as f32);
    let workers = data_parallel(&config, &dataset, LrScaling::Linear);
    let unscaled = data_parallel(&config, &dataset, LrScaling::None);
    assert_ne!(workers[0][0], unscaled[0][0], "a larger rate takes larger steps");
}

#[test]
fn lr_warmup_changes_only_a_scaled_rate_and_only_during_the_warmup() {
    let dataset = dataset();
    let config = config(ConvKind::Sage);
    // Without scaling there is nothing to warm up: bit for bit the run without a warm-up.
    let unscaled = data_parallel(&config, &dataset, LrScaling::None);
    assert_eq!(data_parallel_warmed(&config, &dataset, LrScaling::None, 2), unscaled);
    // With scaling the warm-up's rates lie between the two, so its run is neither.
    let warm = data_parallel_warmed(&config, &dataset, LrScaling::Linear, 2);
    let linear = data_parallel(&config, &dataset, LrScaling::Linear);
    assert_ne!(warm[0][0], linear[0][0]);
    assert_ne!(warm[0][0], unscaled[0][0]);
    let trainer = BatchTrainer::new(&config, &warmed(BATCH, LrScaling::Linear, 2), &dataset, WORKERS).unwrap();
    assert_eq!(trainer.lr(), config.lr * WORKERS as f32, "the rate after the warm-up");
}

/// A CPU model that takes the next step's blocks ahead, as a device model does, and records
/// what the loop hands it.
#[derive(Debug)]
struct Ahead<'d> {
    cpu: super::compute::OnBlocks<'d, gnn_core::Model>,
    /// The steps prepared, and the steps whose gradient was asked with their prepared key.
    prepared: std::rc::Rc<std::cell::RefCell<(Vec<graph_partition::sample::StepKey>, Vec<bool>)>>,
}

impl super::compute::BatchModel for Ahead<'_> {
    fn zero_grad(&mut self) -> Result<(), crate::TrainError> {
        self.cpu.zero_grad()
    }

    fn add_gradient(&mut self, pass: super::compute::BatchPass<'_>) -> Result<f64, crate::TrainError> {
        let mut log = self.prepared.borrow_mut();
        let hit = log.0.last() == Some(&pass.key);
        log.1.push(hit);
        drop(log);
        self.cpu.add_gradient(pass)
    }

    fn grads(&mut self) -> Result<&mut [f32], crate::TrainError> {
        self.cpu.grads()
    }

    fn step(&mut self, optimizer: &mut gnn_core::Optim, epoch: usize, lr: f32) -> Result<(), crate::TrainError> {
        self.cpu.step(optimizer, epoch, lr)
    }

    fn params(&mut self) -> Result<std::borrow::Cow<'_, [f32]>, crate::TrainError> {
        self.cpu.params()
    }

    fn model(&self) -> Option<&gnn_core::Model> {
        self.cpu.model()
    }

    fn set_params(&mut self, params: &[f32]) -> Result<(), crate::TrainError> {
        self.cpu.set_params(params)
    }

    fn evaluate(
        &mut self,
        graph: &super::full_graph::FullGraph<'_>,
        eval_batch_size: usize,
    ) -> Result<crate::train_loop::EvalStats, crate::TrainError> {
        self.cpu.evaluate(graph, eval_batch_size)
    }

    fn snapshot(&mut self, epoch: usize) -> Result<crate::report::TrainedModel, crate::TrainError> {
        self.cpu.snapshot(epoch)
    }

    fn state(&self, optimizer: &gnn_core::Optim, method: Vec<u8>) -> Result<crate::checkpoint::WorkerState, String> {
        self.cpu.state(optimizer, method)
    }

    fn restore(
        &mut self,
        state: crate::checkpoint::WorkerState,
        optimizer: &mut gnn_core::Optim,
    ) -> Result<Vec<u8>, String> {
        self.cpu.restore(state, optimizer)
    }

    fn prepares(&self) -> bool {
        true
    }

    fn prepare(
        &mut self,
        key: graph_partition::sample::StepKey,
        blocks: &gnn_core::BlockGraphs,
        rows: Option<&[u32]>,
    ) -> Result<(), crate::TrainError> {
        assert_eq!(rows, Some(blocks.input_ids()), "the rows of a whole graph's features are the input ids");
        self.prepared.borrow_mut().0.push(key);
        Ok(())
    }
}

/// A model that takes blocks ahead gets every step's but the first's, keyed by its step, each
/// before that step's gradient; the loop's results do not change: bit for bit the plain
/// model's parameters, epoch after epoch.
#[test]
fn blocks_taken_ahead_are_each_next_step_and_change_nothing() {
    let dataset = dataset();
    let config = config(ConvKind::Sage);
    let plain = single_process(&config, &dataset);
    let mut trainer = BatchTrainer::new(&config, &sampling(WORKERS * BATCH, LrScaling::None), &dataset, 1).unwrap();
    let prepared = std::rc::Rc::default();
    let log = std::rc::Rc::clone(&prepared);
    trainer
        .place_model(|host| {
            Ok(Box::new(Ahead { cpu: super::compute::OnBlocks::new(host, None, &dataset.features), prepared }))
        })
        .unwrap();
    for (epoch, want) in (1..=EPOCHS).zip(&plain) {
        trainer.train_epoch(epoch, Share::whole(), &mut NoSync).unwrap();
        assert_eq!(trainer.host_model().unwrap().params(), &want[..], "epoch {epoch}");
    }
    let (keys, hits) = &*log.borrow();
    let want: Vec<_> = (1..=EPOCHS as u64)
        .flat_map(|epoch| (1..7).map(move |step| graph_partition::sample::StepKey { epoch, step }))
        .collect();
    assert_eq!(keys, &want, "every step but an epoch's first is prepared, in order");
    let hits_want: Vec<bool> = (0..EPOCHS).flat_map(|_| (0..7).map(|step| step > 0)).collect();
    assert_eq!(hits, &hits_want, "each step's gradient comes after its own blocks were prepared");
}
