//! `backend = "nccl"` against the host-staged gradient all-reduce: cut-graph and mini-batch
//! workers, each on a GPU of its own, sum their gradients by NCCL on the GPUs (and the cut-graph
//! workers send their exchanges' messages GPU to GPU, where the codecs encode on the device),
//! and must train as the same workers summing and exchanging through the host: every epoch's loss within 1e-4 (NCCL sums in its own order, not
//! rank order), and the same bytes in the network ledger epoch by epoch and phase by phase (the
//! communicator records the device all-reduce as the host's of the same length). They need two
//! GPUs, so `cargo test` skips them; `cargo xtask gpu-test` runs them where two exist.
#![cfg(feature = "nccl")]

use std::path::Path;

use gnn_core::ConvKind;
use graph_partition::book::CutKind;
use trainer::config::{Backend, Compress, Device, DistributedConfig, FeatureNorm, Method, MethodConfig, TrainConfig};
use trainer::{LocalOptions, run_on};

const EPOCHS: usize = 10;

/// `method` on Cora (`HALO_CORA` in a GPU bundle) with 2 workers on GPUs 0 and 1, `cut`-cut.
fn cora(method: Method, model: ConvKind, cut: CutKind, backend: Backend) -> TrainConfig {
    let dir = std::env::var_os("HALO_CORA")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/cora"), Into::into);
    TrainConfig {
        dataset: Some(dir.display().to_string()),
        model,
        feature_norm: FeatureNorm::Row,
        epochs: EPOCHS,
        device: Device::Cuda(0),
        method: MethodConfig::named(method),
        distributed: DistributedConfig {
            cut,
            workers: 2,
            hosts: 1,
            backend,
            compress: Compress::Always,
            ..DistributedConfig::default()
        },
        ..TrainConfig::default()
    }
}

/// NCCL's runs follow the host-staged runs of the same workers, method by method: the
/// cut-graph runner's full batches, and data-parallel and ADGraph mini-batches (batch 16 a
/// worker, fanouts 10,10).
#[test]
#[ignore = "needs two CUDA GPUs: cargo xtask gpu-test"]
fn nccl_gradients_follow_the_host_staged_sum() {
    let runs = [
        (Method::Vanilla, ConvKind::Gcn, CutKind::EdgeCut),
        (Method::Vanilla, ConvKind::Gat, CutKind::VertexCut),
        (Method::Adaqp, ConvKind::Gcn, CutKind::EdgeCut),
        (Method::Cdfgnn, ConvKind::Sage, CutKind::VertexCut),
        (Method::DataParallel, ConvKind::Sage, CutKind::EdgeCut),
        (Method::Adgraph, ConvKind::Gcn, CutKind::EdgeCut),
    ];
    for (method, model, cut) in runs {
        let mut host = cora(method, model, cut, Backend::Local);
        if matches!(method, Method::DataParallel | Method::Adgraph) {
            host.minibatch.batch_size = Some(16);
            host.minibatch.fanouts = Some("10,10".parse().expect("fanouts parse"));
        }
        let dataset = trainer::data::prepare_dataset(&host, Path::new("datasets"), &Default::default()).unwrap();
        let run =
            |config: &TrainConfig| run_on(config, &dataset, LocalOptions::default(), &mut ()).expect("workers run");
        let staged = run(&host);
        let nccl = run(&TrainConfig {
            distributed: DistributedConfig { backend: Backend::Nccl, ..host.distributed.clone() },
            ..host.clone()
        });
        let name = format!("{} {} {}-cut", method.as_str(), model.as_str(), cut.as_str());
        assert_eq!(nccl.epochs.len(), EPOCHS, "{name}");
        for (h, n) in staged.epochs.iter().zip(&nccl.epochs) {
            let e = n.epoch;
            assert!((h.loss - n.loss).abs() <= 1e-4, "{name} epoch {e}: loss host {} nccl {}", h.loss, n.loss);
            assert_eq!(h.bytes_by_phase, n.bytes_by_phase, "{name} epoch {e}: ledger by phase");
            // The gradient no longer crosses the bus.
            let (hb, nb) = (h.device.expect("device epoch"), n.device.expect("device epoch"));
            assert!(nb.d2h_bytes < hb.d2h_bytes, "{name} epoch {e}: host {hb:?}, nccl {nb:?}");
            // The exchange's messages go GPU to GPU: vanilla's exact rows move nothing over the
            // bus, AdaQP's arrivals come down for its probe only (less than down and up).
            if let (Some(hx), Some(nx)) = (hb.exchange, nb.exchange) {
                let (host_bus, nccl_bus) = (hx.down_bytes + hx.up_bytes, nx.down_bytes + nx.up_bytes);
                match method {
                    Method::Vanilla if model != ConvKind::Gat => assert_eq!(nccl_bus, 0, "{name} epoch {e}: {nx:?}"),
                    Method::Adaqp => {
                        assert!(nccl_bus < host_bus && nx.up_bytes == 0, "{name} epoch {e}: host {hx:?}, nccl {nx:?}")
                    }
                    _ => assert!(nccl_bus <= host_bus, "{name} epoch {e}: host {hx:?}, nccl {nx:?}"),
                }
            }
        }
        assert_eq!(staged.final_.bytes_grad_sync, nccl.final_.bytes_grad_sync, "{name}");
        assert_eq!(nccl.config.distributed.backend, Backend::Nccl, "{name}: the report names the backend");
    }
}

/// Two workers on one GPU are refused before any upload, naming the backend and the way out.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn nccl_refuses_workers_sharing_a_gpu() {
    let mut config = cora(Method::Vanilla, ConvKind::Gcn, CutKind::EdgeCut, Backend::Nccl);
    config.distributed.workers = gnn_core::gpu::Device::count().unwrap() + 1;
    let dataset = trainer::data::prepare_dataset(&config, Path::new("datasets"), &Default::default()).unwrap();
    let err = run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("nccl needs a GPU per worker") && err.contains("--backend local"), "{err}");
}
