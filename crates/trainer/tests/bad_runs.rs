//! Runs that must stop cleanly: a diverging run at its first non-finite loss, gradient or
//! parameter (naming the epoch, the site and a hint), and a job with more workers than vertices
//! before any worker starts.

use std::path::Path;

use graph_partition::book::CutKind;
use trainer::config::{DistributedConfig, Method, MethodConfig, TrainConfig};
use trainer::error::Site;
use trainer::{LocalOptions, TrainError, data, run_on};

fn diverging(method: Method) -> TrainConfig {
    TrainConfig {
        epochs: 20,
        lr: 1e30,
        method: MethodConfig::named(method),
        distributed: DistributedConfig { cut: CutKind::EdgeCut, workers: 2, hosts: 1, ..DistributedConfig::default() },
        ..TrainConfig::default()
    }
}

#[test]
fn a_huge_learning_rate_stops_the_run_with_its_epoch_and_site() {
    let dataset = data::prepare_dataset(&TrainConfig::default(), Path::new("."), &Default::default()).unwrap();
    for method in [Method::Single, Method::Vanilla] {
        let err = run_on(&diverging(method), &dataset, LocalOptions::default(), &mut ()).unwrap_err();
        let message = err.to_string();
        let found = match &err {
            TrainError::NonFinite { epoch, site, .. } => Some((*epoch, site.clone())),
            TrainError::Distributed(_) => None,
            other => panic!("{method:?}: expected a non-finite error, got {other}"),
        };
        assert!(message.contains("non-finite value in") && message.contains("--lr 1e30"), "{method:?}: {message}");
        if let Some((epoch, site)) = found {
            assert!((1..=20).contains(&epoch), "{method:?}: epoch {epoch}");
            assert!(matches!(site, Site::Loss { .. } | Site::Gradient { .. } | Site::Parameter { .. }));
        }
    }
}

#[test]
fn more_workers_than_vertices_fail_before_any_worker_starts() {
    let dataset = data::prepare_dataset(&TrainConfig::default(), Path::new("."), &Default::default()).unwrap();
    let mut config = diverging(Method::Vanilla);
    config.lr = 0.01;
    config.distributed.workers = 3000;
    let err = run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("3000") && err.len() < 400, "one short message: {err}");
}

#[test]
fn a_saved_partition_book_trains_like_a_fresh_partition_and_must_fit_the_job() {
    use graph_partition::book::PartitionBook;
    use graph_partition::partition::{PartitionConfig, partition_graph};

    let dataset = data::prepare_dataset(&TrainConfig::default(), Path::new("."), &Default::default()).unwrap();
    let mut config = diverging(Method::Vanilla);
    (config.lr, config.epochs) = (0.01, 3);
    let d = &config.distributed;
    let pconfig = PartitionConfig {
        hosts: d.hosts,
        seed: config.seed,
        ..PartitionConfig::new(d.algorithm_for(d.cut), d.workers)
    };
    let book = PartitionBook::build(&dataset.graph, &partition_graph(&dataset.graph, &pconfig).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    book.save(dir.path()).unwrap();

    let fresh = run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap();
    config.distributed.partition_book = Some(dir.path().to_path_buf());
    let loaded = run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap();
    let losses = |r: &trainer::Report| r.epochs.iter().map(|e| e.loss).collect::<Vec<_>>();
    assert_eq!(losses(&loaded), losses(&fresh));
    assert!(loaded.partition.as_ref().unwrap().algorithm.starts_with("book "));

    config.distributed.workers = 4;
    let err = run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.starts_with("--partition-book ") || err.contains("--partition-book"), "{err}");
    config.distributed.workers = 2;
    config.distributed.cut = CutKind::VertexCut;
    config.distributed.partitioner = None;
    let err = run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("edge-cut, the run needs a vertex-cut"), "{err}");
}
