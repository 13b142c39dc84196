//! gnn-core kernels on a 100k-node synthetic graph (average degree 20, 128 features, 16 classes):
//! dense matmul (gnn-core's `gemm` against ndarray's `dot`), CSR SpMM and its transpose, one GCN
//! layer forward + backward, and a full training epoch of a 3-layer GCN (hidden 256, forward +
//! backward + Adam), the shape PyG's CPU baseline is timed on.
//!
//! Throughput is reported in elements/s where one element is one floating-point operation, so
//! `Gelem/s` reads as GFLOP/s.
//!
//! Run: `cargo bench -p halo-benches --bench gnn_ops -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gnn_core::dense::gemm;
use gnn_core::layers::{AggConv, Conv};
use gnn_core::sparse::{Write, spmm, spmm_transpose};
use gnn_core::{Adam, AggGraph, ForwardCtx, Model, ModelConfig, NoExchange, ParamLayout, softmax_cross_entropy};
use graph_partition::rng::SplitMix64;
use graph_partition::synth::SynthConfig;
use ndarray::Array2;

const NODES: usize = 100_000;
const FEATURES: usize = 128;
const CLASSES: usize = 16;
const HIDDEN: usize = 256;

fn random_matrix(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut r = SplitMix64::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || r.next_f64() as f32 - 0.5)
}

fn synthetic() -> graph_partition::dataset::Dataset {
    let cfg = SynthConfig {
        nodes: NODES,
        avg_degree: 20.0,
        features: FEATURES,
        classes: CLASSES,
        seed: 1,
        ..Default::default()
    };
    let data = cfg.generate().expect("valid synthetic parameters");
    eprintln!("graph: {} nodes, {} stored edges", data.graph.num_nodes(), data.graph.num_edges());
    data
}

fn matmul(c: &mut Criterion) {
    let x = random_matrix(NODES, HIDDEN, 1);
    let w = random_matrix(HIDDEN, HIDDEN, 2);
    let dy = random_matrix(NODES, HIDDEN, 3);
    let flops = 2 * NODES as u64 * HIDDEN as u64 * HIDDEN as u64;
    let mut group = c.benchmark_group("matmul_100k_x_256_x_256");
    group.throughput(Throughput::Elements(flops));
    let mut out = Array2::<f32>::zeros((NODES, HIDDEN));
    group.bench_function("gemm_xw", |b| b.iter(|| gemm(1.0, &x.view(), &w.view(), 0.0, &mut out.view_mut())));
    group.bench_function("ndarray_dot_xw", |b| b.iter(|| black_box(x.dot(&w))));
    let mut dw = Array2::<f32>::zeros((HIDDEN, HIDDEN));
    group.bench_function("gemm_xt_dy", |b| b.iter(|| gemm(1.0, &x.t(), &dy.view(), 0.0, &mut dw.view_mut())));
    group.bench_function("gemm_dy_wt", |b| b.iter(|| gemm(1.0, &dy.view(), &w.t(), 0.0, &mut out.view_mut())));
    group.finish();
}

fn sparse(c: &mut Criterion) {
    let data = synthetic();
    let graph = AggGraph::single(&data.graph).expect("no self loops");
    let mut group = c.benchmark_group("spmm_100k_deg20");
    for width in [16, 128, 256] {
        let x = random_matrix(NODES, width, 4);
        let mut out = Array2::<f32>::zeros((NODES, width));
        let values: Vec<f32> = (0..graph.fwd().num_edges()).map(|k| 1.0 / (1 + k % 7) as f32).collect();
        group.throughput(Throughput::Elements(2 * graph.fwd().num_edges() as u64 * width as u64));
        group.bench_with_input(BenchmarkId::new("spmm", width), &width, |b, _| {
            b.iter(|| spmm(graph.fwd(), Some(&values), &x.view(), &mut out, Write::Overwrite))
        });
        group.bench_with_input(BenchmarkId::new("spmm_transpose", width), &width, |b, _| {
            b.iter(|| spmm_transpose(graph.bwd(), graph.perm(), Some(&values), &x.view(), &mut out, Write::Overwrite))
        });
    }
    group.finish();
}

fn gcn_layer(c: &mut Criterion) {
    let data = synthetic();
    let graph = AggGraph::single(&data.graph).expect("no self loops");
    let mut layout = ParamLayout::new();
    let mut conv = AggConv::gcn(&mut layout, "gcn", HIDDEN, HIDDEN);
    let params = layout.init_values(0);
    let mut grads = vec![0.0f32; params.len()];
    let mut x = random_matrix(NODES, HIDDEN, 5);
    let (mut out, mut dx) = (Array2::zeros((0, 0)), Array2::zeros((0, 0)));
    let dout = random_matrix(NODES, HIDDEN, 6);
    let matmul_flops = 3 * 2 * NODES as u64 * HIDDEN as u64 * HIDDEN as u64;
    let spmm_flops = 2 * 2 * graph.fwd().num_edges() as u64 * HIDDEN as u64;
    let mut group = c.benchmark_group("gcn_layer_100k_256_to_256");
    group.throughput(Throughput::Elements(matmul_flops + spmm_flops));
    group.bench_function("forward_backward", |b| {
        b.iter(|| {
            conv.forward(&params, &graph, &mut x, &mut out, &mut NoExchange, 0, ForwardCtx::eval()).unwrap();
            let mut d = dout.clone();
            conv.backward(&params, &mut grads, &graph, &x, &mut d, Some(&mut dx), &mut NoExchange, 0).unwrap();
        })
    });
    group.finish();
}

fn gcn3_epoch(c: &mut Criterion) {
    let data = synthetic();
    let graph = AggGraph::single(&data.graph).expect("no self loops");
    let labels = match &data.labels {
        graph_partition::dataset::Labels::Classes(l) => l.clone(),
        other => panic!("single-label synthetic data expected, got {other:?}"),
    };
    let train = data.splits.train.clone();
    let cfg = ModelConfig { layers: 3, ..ModelConfig::gcn(FEATURES, HIDDEN, CLASSES) };
    let mut model = Model::new(cfg).unwrap();
    let mut adam = Adam::new(0.01, 0.0);
    let mut epoch = 0;
    let mut group = c.benchmark_group("gcn3_hidden256_epoch_100k");
    group.sample_size(10);
    group.bench_function("forward_backward_adam", |b| {
        b.iter(|| {
            epoch += 1;
            model.zero_grad();
            let logits = model.forward(&graph, &data.features, &mut NoExchange, ForwardCtx::train(0, epoch)).unwrap();
            let (loss, mut d) = softmax_cross_entropy(logits, &labels, &train).unwrap();
            d /= train.len() as f32;
            model.backward(&graph, d, &mut NoExchange).unwrap();
            model.step(&mut adam).unwrap();
            black_box(loss)
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = matmul, sparse, gcn_layer, gcn3_epoch
}
criterion_main!(benches);
