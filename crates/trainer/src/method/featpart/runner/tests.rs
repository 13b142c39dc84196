//! Featpart workers against one process on the same global batches: with tau = 0 every
//! iteration fetches the full rows, so K workers equal one process averaging the gradients of
//! the K shares; with tau = inf they train on their own columns only and drift away from it.

use comm_hierarchy::{Communicator, LedgerSnapshot, LocalCluster, Topology};
use gnn_core::ConvKind;
use graph_partition::Dataset;
use graph_partition::sample::Share;

use super::super::FetchSpec;
use super::ColumnFactory;
use super::shard::{FETCH_COLUMNS, FETCH_IDS};
use crate::config::{BiasEstimate, Eq20Step, LrScaling, Tau, TauRule, TrainConfig};
use crate::harness::CommClock;
use crate::minibatch::data_parallel::HooksFactory;
use crate::minibatch::tests::{BATCH, EPOCHS, WORKERS, assert_close, config, dataset, sampling, single_process};
use crate::minibatch::trainer::BatchTrainer;

/// Per worker: the parameters after each epoch, the final-report fields and the ledger.
type WorkerRun = (Vec<Vec<f32>>, serde_json::Value, LedgerSnapshot);

fn spec(tau: Tau) -> FetchSpec {
    FetchSpec {
        tau,
        tau_max: 4,
        tau_rule: TauRule::Eq20,
        bias_estimate: BiasEstimate::Trials,
        eq20_step: Eq20Step::Lr,
        trials: 3,
    }
}

fn featpart(config: &TrainConfig, dataset: &Dataset, tau: Tau) -> Vec<WorkerRun> {
    featpart_with(config, dataset, spec(tau))
}

fn featpart_with(config: &TrainConfig, dataset: &Dataset, spec: FetchSpec) -> Vec<WorkerRun> {
    let topology = Topology::for_workers(WORKERS, 1, Default::default()).unwrap();
    let factory = ColumnFactory { spec, target_acc: None };
    LocalCluster::run(&topology, |comm| {
        let clock = CommClock::new(None);
        let mut trainer = BatchTrainer::new(config, &sampling(BATCH, LrScaling::None), dataset, WORKERS)?;
        let mut hooks = factory.make(comm, &clock, dataset)?;
        hooks.before_training(&mut trainer)?;
        let share = Share::new(comm.rank(), comm.size())?;
        let mut params = Vec::new();
        for epoch in 1..=EPOCHS {
            let totals = trainer.train_epoch(epoch, share, &mut *hooks)?;
            assert_eq!(totals.steps, 7, "every worker takes every step");
            params.push(trainer.host_model().unwrap().params().to_vec());
        }
        let fields = hooks.final_fields(&[]).unwrap();
        Ok::<_, crate::TrainError>((params, fields, comm.ledger()))
    })
    .unwrap()
}

#[test]
fn tau_zero_equals_one_process_averaging_the_workers_batches() {
    let dataset = dataset();
    for model in [ConvKind::Sage, ConvKind::Gat] {
        let config = config(model);
        let single = single_process(&config, &dataset);
        let workers = featpart(&config, &dataset, Tau::Fixed(0));
        for (rank, (epochs, fields, _)) in workers.iter().enumerate() {
            for (epoch, (fp, sp)) in epochs.iter().zip(&single).enumerate() {
                assert_close(&format!("{model:?} rank {rank} epoch {}", epoch + 1), fp, sp, 1e-4);
            }
            assert_eq!((fields["fetch_iterations"].as_u64(), fields["local_iterations"].as_u64()), (Some(21), Some(0)));
        }
    }
}

#[test]
fn tau_inf_never_fetches_and_leaves_the_full_feature_path() {
    let dataset = dataset();
    let config = config(ConvKind::Sage);
    let single = single_process(&config, &dataset);
    let workers = featpart(&config, &dataset, Tau::Never);
    let (params, fields, ledger) = &workers[0];
    assert!(ledger.phases().iter().all(|p| !p.starts_with("fetch/")), "{:?}", ledger.phases());
    assert_eq!((fields["fetch_iterations"].as_u64(), fields["local_iterations"].as_u64()), (Some(0), Some(21)));
    let drift = params[0].iter().zip(&single[0]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(drift > 1e-3, "own columns only must change the updates (largest difference {drift})");
    assert_eq!(workers[1].0, workers[0].0, "the all-reduce keeps the workers in step");
}

#[test]
fn tau_auto_estimates_remark_1_terms_and_follows_eq_20() {
    let dataset = dataset();
    let config = config(ConvKind::Sage);
    let workers = featpart(&config, &dataset, Tau::Auto);
    let (_, fields, ledger) = &workers[0];
    let est = &fields["estimates"];
    for key in ["sampled_vertices", "compute_s", "fetch_s", "sigma_var", "sigma_hat", "sigma_bias", "lipschitz"] {
        let v = est[key].as_f64().unwrap_or(-1.0);
        assert!(v.is_finite() && v > 0.0, "{key} = {v}");
    }
    let fetches = fields["fetch_iterations"].as_u64().unwrap() as usize;
    assert_eq!(fetches + fields["local_iterations"].as_u64().unwrap() as usize, 21);
    let schedule = fields["tau_schedule"].as_array().unwrap();
    assert_eq!(schedule.len(), fetches, "one decision per fetch");
    assert!(schedule.iter().all(|d| d["tau"].as_u64().unwrap() <= 4), "capped at tau-max");
    assert!(ledger.phase_totals(FETCH_IDS).bytes() > 0 && ledger.phase_totals(FETCH_COLUMNS).bytes() > 0);
    for (rank, w) in workers.iter().enumerate() {
        assert_eq!(w.1["tau_schedule"], fields["tau_schedule"], "rank {rank} decides the same taus");
    }
    // Eq. 20 as printed reads the learning rate and the trials' sigma_bias at every fetch.
    let lr = f64::from(config.lr);
    for d in schedule {
        assert_eq!((d["eta"].as_f64(), d["sigma_bias"].as_f64()), (Some(lr), est["sigma_bias"].as_f64()), "{d}");
    }
    assert!(ledger.phase_totals(super::BIAS_GRADS).bytes() == 0);
}

#[test]
fn tau_auto_with_a_running_bias_and_the_effective_step_decides_alike_on_every_rank() {
    let dataset = dataset();
    let config = config(ConvKind::Sage);
    let spec = FetchSpec {
        tau_max: 2,
        bias_estimate: BiasEstimate::RunningMax,
        eq20_step: Eq20Step::Effective,
        ..spec(Tau::Auto)
    };
    let workers = featpart_with(&config, &dataset, spec);
    let (_, fields, ledger) = &workers[0];
    assert_eq!(
        (fields["bias_estimate"].as_str(), fields["eq20_step"].as_str()),
        (Some("running-max"), Some("effective"))
    );
    for (rank, w) in workers.iter().enumerate() {
        assert_eq!(w.1["tau_schedule"], fields["tau_schedule"], "rank {rank} decides the same taus");
    }
    let schedule = fields["tau_schedule"].as_array().unwrap();
    assert!(schedule.len() >= 3, "{schedule:?}");
    let read = |key: &str| schedule.iter().map(|d| d[key].as_f64().unwrap()).collect::<Vec<_>>();
    let (bias, eta) = (read("sigma_bias"), read("eta"));
    // The maximum starts at or above the trials' estimate and never decreases.
    assert!(bias[0] >= fields["estimates"]["sigma_bias"].as_f64().unwrap(), "{bias:?}");
    assert!(bias.windows(2).all(|w| w[1] >= w[0]), "{bias:?}");
    // The first fetch has no step behind it: the learning rate; Adam's steps then differ.
    let lr = f64::from(config.lr);
    assert_eq!(eta[0], lr);
    assert!(eta[1..].iter().all(|&e| e > 0.0 && e.is_finite() && e != lr), "{eta:?}");
    // One own-column gradient all-reduce per fetch, under its own phase.
    let fetches = fields["fetch_iterations"].as_u64().unwrap();
    let grads = ledger.phase_totals("grads").bytes();
    assert_eq!(ledger.phase_totals(super::BIAS_GRADS).bytes() * 21, grads * fetches);
}

/// The whole path: `--method featpart` through `run_on` reports the feature cut, the epochs'
/// fetch counts and the final fetch-plan fields.
#[test]
fn a_featpart_run_reports_its_plan_bytes_and_memory() {
    let dataset = dataset();
    let mut config = config(ConvKind::Sage);
    config.method.name = crate::config::Method::Featpart;
    config.method.featpart.tau = Tau::Fixed(2);
    config.method.featpart.target_acc = Some(0.0);
    config.minibatch.batch_size = Some(BATCH);
    config.minibatch.fanouts = Some("4,3".parse().unwrap());
    config.distributed.workers = WORKERS;
    config.epochs = 2;
    let report = crate::run_on(&config, &dataset, Default::default(), &mut ()).unwrap();
    assert_eq!((report.method.as_str(), report.cut.as_str(), report.workers), ("featpart", "feature", WORKERS));
    let fetches: u64 =
        report.epochs.iter().map(|e| e.method.as_ref().unwrap()["fetch_iterations"].as_u64().unwrap()).sum();
    let m = report.final_.method.as_ref().unwrap();
    // 14 iterations, a fetch every third: 0, 3, 6, 9, 12.
    assert_eq!((fetches, m["fetch_iterations"].as_u64(), m["local_iterations"].as_u64()), (5, Some(5), Some(9)));
    assert!(report.epochs.iter().all(|e| e.bytes_by_phase.contains_key(FETCH_COLUMNS)));
    let held = &m["held_bytes"];
    assert_eq!(held["feature_columns_per_worker"], serde_json::json!([400 * 4 * 4, 400 * 4 * 4, 400 * 4 * 4]));
    assert_eq!(held["features_replicated"].as_u64(), Some(400 * 12 * 4));
    assert!(m["fetch_bytes_per_iteration"].as_f64().unwrap() > 0.0);
    // Target 0 is held by any 30-epoch window; two epochs have none.
    assert!(m["time_to_target"].is_null());
}

/// The factories say before their hooks exist whether those hold columns resident (a device
/// worker's memory check counts them).
#[test]
fn factories_declare_the_columns_their_hooks_hold() {
    let dataset = dataset();
    let topology = Topology::for_workers(WORKERS, 1, Default::default()).unwrap();
    let factories: [&dyn HooksFactory; 2] =
        [&ColumnFactory { spec: spec(Tau::Fixed(0)), target_acc: None }, &crate::minibatch::data_parallel::Replicated];
    for factory in factories {
        let held = LocalCluster::run(&topology, |comm| {
            let clock = CommClock::new(None);
            let hooks = factory.make(comm, &clock, &dataset)?;
            Ok::<_, crate::TrainError>(hooks.resident_columns().is_some())
        })
        .unwrap();
        assert!(held.iter().all(|&h| h == factory.holds_columns()), "{}: {held:?}", factory.cut());
    }
}
