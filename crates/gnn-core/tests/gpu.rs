//! Every device kernel against its CPU reference (the CPU training path where one exists, else
//! `gnn_core::gpu::reference`): exact for integer and packing kernels, 1e-5 relative for
//! element-wise float kernels, 1e-4 for reductions. They need a GPU, so `cargo test` skips them;
//! `cargo xtask gpu-test` runs them.
#![cfg(feature = "cuda")]

use comm_hierarchy::{Communicator, LinkModel, LocalCluster, Topology};
use gnn_core::dropout::DropoutSite;
use gnn_core::exchange::edge_cut::EdgeCutExchange;
use gnn_core::exchange::part_view::agg_graph_of;
use gnn_core::exchange::row_store::RowStore;
use gnn_core::exchange::staging::Stager;
use gnn_core::exchange::vertex_cut::VertexCutExchange;
use gnn_core::exchange::{Exchange, ExchangeOptions, Put};
use gnn_core::gpu::{
    Device, DeviceCsr, DeviceIndex, DeviceLabels, DeviceModel, DeviceRows, RowCodes, RowLists, reference,
};
use gnn_core::params::ParamLayout;
use gnn_core::sparse::{self, Write};
use gnn_core::{Activation, Adam, AggGraph, ConvKind, ForwardCtx, LayerNorm, Model, ModelConfig, Optimizer, Sgd, loss};
use graph_partition::book::{CutKind, LocalGraph, PartitionBook};
use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};
use graph_partition::rng::SplitMix64;
use graph_partition::{Csr, EdgeListOptions, Labels};
use ndarray::Array2;

const FLOAT: f32 = 1e-5;
const REDUCTION: f32 = 1e-4;

fn device() -> Device {
    Device::new(0).expect("CUDA device 0")
}

fn graph(n: usize, m: usize, seed: u64) -> Csr {
    let mut r = SplitMix64::new(seed);
    let edges: Vec<(u32, u32)> = (0..m).map(|_| (r.below(n as u64) as u32, r.below(n as u64) as u32)).collect();
    Csr::from_edges(n, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: false }).unwrap()
}

fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..len).map(|_| r.next_f64() as f32 * 4.0 - 2.0).collect()
}

#[track_caller]
fn assert_close(got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rel * w.abs().max(1.0), "element {i}: device {g}, CPU {w} (tolerance {rel} relative)");
    }
}

fn array(rows: usize, cols: usize, v: &[f32]) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), v.to_vec()).unwrap()
}

/// Copies through the page-locked buffer: every length around its chunks (none, one value,
/// a chunk less one, a chunk, a chunk and one, several chunks and a tail) goes up and comes
/// back unchanged, also when uploads follow each other with their copies still queued (each
/// reuses a half only after its copy up has read it) and into existing buffers.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn copies_through_page_locked_memory_come_back_unchanged() {
    let dev = device();
    let per_chunk = gnn_core::gpu::CHUNK / 4;
    let lens = [0, 1, per_chunk - 1, per_chunk, per_chunk + 1, 3 * per_chunk + 5];
    let hosts: Vec<Vec<f32>> = lens.iter().enumerate().map(|(i, &n)| values(n, 90 + i as u64)).collect();
    let uploaded: Vec<_> = hosts.iter().map(|h| dev.upload(h).unwrap()).collect();
    for (host, buffer) in hosts.iter().zip(&uploaded) {
        assert_eq!(&dev.download(buffer).unwrap(), host, "{} values", host.len());
    }
    // Bytes of odd lengths, into a buffer already there, and back into a host slice.
    let odd: Vec<u8> = (0..2 * gnn_core::gpu::CHUNK + 3).map(|i| (i * 7 % 251) as u8).collect();
    let mut buffer = dev.zeros::<u8>(odd.len()).unwrap();
    dev.upload_into(&odd, &mut buffer).unwrap();
    let mut back = vec![0u8; odd.len()];
    dev.download_into(&buffer, &mut back).unwrap();
    assert!(back == odd, "bytes through upload_into and download_into");
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn spmm_and_its_transpose_match_the_cpu() {
    let dev = device();
    // A thread per output (8 columns), a warp per row with scalar (33, 300) and float4 (64)
    // loads.
    for f in [8, 33, 64, 300] {
        let csr = graph(500, 4000, 1);
        let vals = values(csr.num_edges(), 2);
        let x = values(csr.num_cols() * f, 3);
        let a = DeviceCsr::upload(&dev, &csr).unwrap();
        let (dv, dx) = (dev.upload(&vals).unwrap(), dev.upload(&x).unwrap());
        let mut want = Array2::zeros((csr.num_rows(), f));
        sparse::spmm(&csr, Some(&vals), &array(csr.num_cols(), f, &x).view(), &mut want, Write::Overwrite);
        let got = dev.download(&dev.spmm(&a, Some(&dv), &dx, f).unwrap()).unwrap();
        assert_close(&got, want.as_slice().unwrap(), REDUCTION);
        sparse::spmm(&csr, None, &array(csr.num_cols(), f, &x).view(), &mut want, Write::Overwrite);
        let got = dev.download(&dev.spmm(&a, None, &dx, f).unwrap()).unwrap();
        assert_close(&got, want.as_slice().unwrap(), REDUCTION);
        let want_t = reference::spmm_t(&csr, Some(&vals), &x, f);
        assert_close(&dev.download(&dev.spmm_t(&a, Some(&dv), &dx, f).unwrap()).unwrap(), &want_t, REDUCTION);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gat_edge_kernels_match_the_cpu() {
    let dev = device();
    let (csr, heads, dh) = (graph(300, 2500, 4), 4, 8);
    let a = DeviceCsr::upload(&dev, &csr).unwrap();
    let (xa, xb) = (values(csr.num_rows() * heads * dh, 5), values(csr.num_cols() * heads * dh, 6));
    let mut want = vec![0.0f32; csr.num_edges() * heads];
    sparse::sddmm(
        &csr,
        &array(csr.num_rows(), heads * dh, &xa).view(),
        &array(csr.num_cols(), heads * dh, &xb).view(),
        heads,
        &mut want,
    );
    let got = dev.sddmm(&a, heads, dh, &dev.upload(&xa).unwrap(), &dev.upload(&xb).unwrap()).unwrap();
    assert_close(&dev.download(&got).unwrap(), &want, REDUCTION);

    let (src, dst) = (values(csr.num_cols() * heads, 7), values(csr.num_rows() * heads, 8));
    let logits = reference::gat_logits(&csr, heads, 0.2, &src, &dst);
    let mut scores = dev.gat_logits(&a, heads, 0.2, &dev.upload(&src).unwrap(), &dev.upload(&dst).unwrap()).unwrap();
    assert_close(&dev.download(&scores).unwrap(), &logits, FLOAT);

    let mut w = logits.clone();
    sparse::edge_softmax(&csr, &mut w, heads);
    dev.edge_softmax(&a, heads, &mut scores).unwrap();
    assert_close(&dev.download(&scores).unwrap(), &w, REDUCTION);

    let g = values(w.len(), 9);
    let want = reference::edge_softmax_backward(&csr, heads, &w, &g);
    let got = dev.edge_softmax_backward(&a, heads, &dev.upload(&w).unwrap(), &dev.upload(&g).unwrap()).unwrap();
    assert_close(&dev.download(&got).unwrap(), &want, REDUCTION);
}

/// GAT's softmax on a part, split around the replica syncs: the row maximum with the self-loop
/// logit, the exponentials with their sums in a block's first columns, the per-head quotient
/// and the backwards of the last two, against their references (an empty row included).
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gat_part_softmax_kernels_match_the_cpu() {
    let dev = device();
    let (csr, heads, dh) = (graph(300, 1200, 31), 4, 8);
    let (n, width, stride) = (csr.num_rows(), heads * dh, heads + heads * dh);
    assert!((0..n).any(|r| csr.row_range(r).is_empty()), "an empty row");
    let a = DeviceCsr::upload(&dev, &csr).unwrap();
    let (src, dst) = (values(n * heads, 32), values(n * heads, 33));
    let scores = reference::gat_logits(&csr, heads, 0.2, &src, &dst);
    let up = |v: &[f32]| dev.upload(v).unwrap();
    let max = reference::gat_row_max(&csr, heads, 0.2, &scores, &src, &dst);
    let got = dev.gat_row_max(&a, heads, 0.2, &up(&scores), &up(&src), &up(&dst)).unwrap();
    assert_eq!(dev.download(&got).unwrap(), max, "a maximum is exact");

    let mut w = scores.clone();
    let mut block = values(n * stride, 34);
    reference::edge_exp_sums(&csr, heads, &max, &mut w, &mut block, stride);
    let (mut dw, mut dblock) = (up(&scores), up(&values(n * stride, 34)));
    dev.edge_exp_sums(&a, heads, &up(&max), &mut dw, &mut dblock, stride).unwrap();
    assert_close(&dev.download(&dw).unwrap(), &w, FLOAT);
    assert_close(&dev.download(&dblock).unwrap(), &block, REDUCTION);

    let quotient = reference::head_divide(heads, dh, &block);
    assert_close(&dev.download(&dev.head_divide(n, heads, dh, &up(&block)).unwrap()).unwrap(), &quotient, FLOAT);
    let g = values(n * width, 35);
    let d_block = reference::head_divide_backward(heads, dh, &block, &g);
    let got = dev.head_divide_backward(n, heads, dh, &up(&block), &up(&g)).unwrap();
    assert_close(&dev.download(&got).unwrap(), &d_block, REDUCTION);

    let gw = values(w.len(), 36);
    let dz = reference::edge_exp_backward(&csr, heads, &w, &gw, &d_block, stride);
    let got = dev.edge_exp_backward(&a, heads, &up(&w), &up(&gw), &up(&d_block), stride).unwrap();
    assert_close(&dev.download(&got).unwrap(), &dz, FLOAT);
    // Sums narrower than the heads are refused.
    assert!(dev.edge_exp_sums(&a, heads, &up(&max), &mut dw, &mut up(&block[..n * 2]), 2).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn bias_activation_and_bias_gradient_match_the_cpu() {
    let dev = device();
    let (n, f) = (700, 19);
    let (x, bias) = (values(n * f, 10), values(f, 11));
    let db = dev.upload(&bias).unwrap();
    for act in
        [None, Some(Activation::Relu), Some(Activation::Elu { alpha: 1.0 }), Some(Activation::LeakyRelu { slope: 0.2 })]
    {
        let mut want = x.clone();
        reference::bias_act(f, Some(&bias), act, &mut want);
        let mut dx = dev.upload(&x).unwrap();
        dev.bias_act(n, f, Some(&db), act, &mut dx).unwrap();
        assert_close(&dev.download(&dx).unwrap(), &want, FLOAT);
        if let Some(act) = act {
            let g = values(n * f, 12);
            let mut want_g = array(n, f, &g);
            act.backward_in_place(&mut want_g, &array(n, f, &want), 1.0, 1.0);
            let mut dg = dev.upload(&g).unwrap();
            dev.act_backward(act, &dev.upload(&want).unwrap(), &mut dg).unwrap();
            assert_close(&dev.download(&dg).unwrap(), want_g.as_slice().unwrap(), FLOAT);
        }
    }
}

/// Column sums, plain and of an element-wise product, over shapes that take one chunk, many
/// chunks of one column (the loss sums) and many column tiles; they add into what `out` held.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn column_sums_match_the_cpu() {
    let dev = device();
    for (n, f) in [(700, 19), (100_003, 1), (20_000, 300), (3, 70)] {
        let (x, y) = (values(n * f, 18), values(n * f, 19));
        let start = values(f, 20);
        let (dx, dy) = (dev.upload(&x).unwrap(), dev.upload(&y).unwrap());
        let mut sums = dev.upload(&start).unwrap();
        dev.column_sum(n, f, &dx, None, &mut sums.slice_mut(..)).unwrap();
        let want: Vec<f32> = reference::column_sum(f, &x).iter().zip(&start).map(|(s, b)| s + b).collect();
        assert_close(&dev.download(&sums).unwrap(), &want, REDUCTION);
        let mut products = dev.zeros::<f32>(f).unwrap();
        dev.column_sum(n, f, &dx, Some(&dy), &mut products.slice_mut(..)).unwrap();
        let xy: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
        assert_close(&dev.download(&products).unwrap(), &reference::column_sum(f, &xy), REDUCTION);
    }
}

/// GAT's attention dropout drawn on the device is the CPU's keyed mask, flag for flag, and
/// scales the kept weights as the CPU does.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn attention_dropout_flags_are_the_cpu_flags_exactly() {
    let dev = device();
    let mut r = SplitMix64::new(21);
    let edges: Vec<(u32, u32)> = (0..2400).map(|_| (r.below(300) as u32, r.below(300) as u32)).collect();
    let csr = Csr::from_edges(300, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: true }).unwrap();
    let graph = gnn_core::AggGraph::single(&csr).unwrap();
    let folded = gnn_core::gpu::plan::aggregation(&graph, gnn_core::ConvKind::Gat).unwrap();
    let csr = DeviceCsr::from_parts(&dev, 300, &folded.indptr, &folded.indices).unwrap();
    let gids = dev.upload(graph.global_ids()).unwrap();
    for (heads, site) in [(8, DropoutSite::new(0.6, 4, 9, 1)), (3, DropoutSite::new(0.1, 0, 1, 0))] {
        let want = gnn_core::gpu::plan::attention_keep(&graph, &folded, &site, heads);
        let w = values(want.len(), 22);
        let mut dw = dev.upload(&w).unwrap();
        let keep = dev.attention_dropout(&csr, heads, &gids, &site, &mut dw).unwrap();
        assert_eq!(dev.download(&keep).unwrap(), want);
        let scaled: Vec<f32> = w.iter().zip(&want).map(|(v, &k)| v * (f32::from(k) * site.scale())).collect();
        assert_eq!(dev.download(&dw).unwrap(), scaled);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn dropout_masks_are_the_cpu_masks_exactly() {
    let dev = device();
    let (n, f) = (333, 21);
    let gids: Vec<u32> = (0..n as u32).map(|i| i * 7 + 3).collect();
    let x = values(n * f, 13);
    for site in [DropoutSite::new(0.5, 1, 2, 0), DropoutSite::new(0.1, 9, 30, 2)] {
        let mut want = array(n, f, &x);
        site.apply_rows(&mut want, &gids);
        let mut mask = vec![0u8; n * f];
        for (keep, &gid) in mask.chunks_mut(f).zip(&gids) {
            site.feature_keep(gid, keep);
        }
        let (mut dx, mut dmask) = (dev.upload(&x).unwrap(), dev.zeros::<u8>(n * f).unwrap());
        dev.dropout_rows(&site, f, &dev.upload(&gids).unwrap(), &mut dx, Some(&mut dmask)).unwrap();
        assert_eq!(dev.download(&dmask).unwrap(), mask);
        assert_eq!(dev.download(&dx).unwrap(), want.as_slice().unwrap());

        let g = values(n * f, 14);
        // The CPU backward applies the same dropout to the gradient.
        let mut want_g = array(n, f, &g);
        site.apply_rows(&mut want_g, &gids);
        let mut dg = dev.upload(&g).unwrap();
        dev.dropout_backward(&dmask, site.scale(), &mut dg).unwrap();
        assert_eq!(dev.download(&dg).unwrap(), want_g.as_slice().unwrap());
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn layer_norm_matches_the_cpu_layer() {
    let dev = device();
    let (n, d) = (400, 48);
    let mut layout = ParamLayout::default();
    let mut norm = LayerNorm::new(&mut layout, "ln", d);
    let params = values(2 * d, 15);
    let (gamma, beta) = (&params[..d], &params[d..]);
    let x = values(n * d, 16);
    let mut want = Array2::zeros((n, d));
    norm.forward(&params, &array(n, d, &x), &mut want);
    let (dgamma_p, dbeta_p) = (dev.upload(gamma).unwrap(), dev.upload(beta).unwrap());
    let gnn_core::gpu::NormOut { out, xhat, rstd } =
        dev.layer_norm(n, d, gnn_core::norm::LAYER_NORM_EPS, &dev.upload(&x).unwrap(), &dgamma_p, &dbeta_p).unwrap();
    assert_close(&dev.download(&out).unwrap(), want.as_slice().unwrap(), REDUCTION);

    let dy = values(n * d, 17);
    let mut grads = vec![0.0f32; 2 * d];
    let mut want_dx = Array2::zeros((n, d));
    norm.backward(&params, &mut grads, &array(n, d, &dy), &mut want_dx);
    let (mut dg, mut db) = (dev.zeros::<f32>(d).unwrap(), dev.zeros::<f32>(d).unwrap());
    let dx =
        dev.layer_norm_backward(n, d, &dev.upload(&dy).unwrap(), &xhat, &rstd, &dgamma_p, &mut dg, &mut db).unwrap();
    assert_close(&dev.download(&dx).unwrap(), want_dx.as_slice().unwrap(), REDUCTION);
    assert_close(&dev.download(&dg).unwrap(), &grads[..d], REDUCTION);
    assert_close(&dev.download(&db).unwrap(), &grads[d..], REDUCTION);
}

/// Every third of `n` rows, in shuffled order: a split whose other rows' gradient must stay zero.
fn labelled_rows(n: usize) -> Vec<u32> {
    let mut rows: Vec<u32> = (0..n as u32).step_by(3).collect();
    rows.reverse();
    rows.swap(1, 40);
    rows
}

/// The device's loss of `labels` over `rows` of `logits`, gradient scaled by `scale`, against
/// the CPU's: `cpu_row(r)` is row `r`'s loss and hits, `cpu` the loss over `rows` and its
/// gradient already scaled.
fn check_labelled_loss(
    labels: Labels,
    rows: &[u32],
    logits: &Array2<f32>,
    scale: f32,
    cpu_row: impl Fn(u32) -> (f64, u64),
    cpu: (f64, Vec<f32>),
) {
    let dev = device();
    let (n, c) = logits.dim();
    let mut split = DeviceLabels::upload(&dev, &labels, rows, n, c).unwrap();
    let mut dlogits = dev.zeros::<f32>(n * c).unwrap();
    let flat = dev.upload(logits.as_slice().unwrap()).unwrap();
    let (mut loss_sum, mut hits) = (dev.zeros::<f32>(2).unwrap(), dev.zeros::<u64>(2).unwrap());
    let grad = Some((scale, &mut dlogits));
    dev.labelled_loss(&mut split, &flat, grad, &mut loss_sum.slice_mut(0..1), &mut hits.slice_mut(0..1)).unwrap();
    let (row_loss, hit) = split.last_rows();
    let (row_loss, hit) = (dev.download(row_loss).unwrap(), dev.download(hit).unwrap());
    let mut want_hits = 0;
    for (i, &r) in rows.iter().enumerate() {
        let (want, hits) = cpu_row(r);
        assert_close(&row_loss[i..=i], &[want as f32], FLOAT);
        assert_eq!(hit[i], hits as f32, "row {r}: hits");
        want_hits += hits;
    }
    let sums = dev.download(&loss_sum).unwrap();
    assert_close(&sums[..1], &[cpu.0 as f32], REDUCTION);
    assert_eq!(dev.download(&hits).unwrap()[0], want_hits);
    assert_close(&dev.download(&dlogits).unwrap(), &cpu.1, FLOAT);
    // Evaluation: the same sums without a gradient.
    dev.labelled_loss(&mut split, &flat, None, &mut loss_sum.slice_mut(1..2), &mut hits.slice_mut(1..2)).unwrap();
    let (sums, counts) = (dev.download(&loss_sum).unwrap(), dev.download(&hits).unwrap());
    assert_eq!((sums[1], counts[1]), (sums[0], counts[0]));
}

/// Only every third row is labelled (in shuffled order); one row ties for its maximum (the
/// first index wins, as `count_correct` decides) and one is large enough that an exponential
/// without the max shift would overflow.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn softmax_cross_entropy_matches_the_cpu_loss() {
    let (n, c) = (600, 7);
    let mut logits = values(n * c, 22);
    logits[..c].fill(0.25);
    logits[3 * c..4 * c].iter_mut().enumerate().for_each(|(j, v)| *v = 80.0 + j as f32);
    let labels: Vec<u32> = (0..n as u32).map(|r| (r * 5 + r / 7) % c as u32).collect();
    let rows = labelled_rows(n);
    let logits = array(n, c, &logits);
    let (total, grad) = loss::softmax_cross_entropy(&logits, &labels, &rows).unwrap();
    let scale = (rows.len() as f32).recip();
    let cpu_row = |r: u32| {
        let (loss, _) = loss::softmax_cross_entropy(&logits, &labels, &[r]).unwrap();
        (loss, loss::count_correct(&logits, &labels, &[r]).unwrap() as u64)
    };
    let want_grad = grad.iter().map(|g| g * scale).collect();
    check_labelled_loss(Labels::Classes(labels.clone()), &rows, &logits, scale, cpu_row, (total, want_grad));
}

/// Every third row labelled (shuffled); logits of both signs, zeros (predicted 0, as
/// `multilabel_counts` decides) and large magnitudes (where the loss without its stable form
/// would overflow); targets 0 and 1. The gradient is scaled by one over rows times columns, as
/// the CPU path divides it; hits are the true positives and negatives of the row.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn sigmoid_binary_cross_entropy_matches_the_cpu_loss() {
    let (n, c) = (600, 5);
    let mut logits = values(n * c, 25);
    logits[..c].fill(0.0);
    logits[3 * c..4 * c].iter_mut().enumerate().for_each(|(j, v)| *v = if j % 2 == 0 { 90.0 } else { -90.0 });
    let targets: Vec<f32> = values(n * c, 26).iter().map(|&v| if v > 0.0 { 1.0 } else { 0.0 }).collect();
    let rows = labelled_rows(n);
    let (logits, targets) = (array(n, c, &logits), array(n, c, &targets));
    let (total, grad) = loss::bce_with_logits(&logits, &targets, &rows).unwrap();
    let terms = rows.len() * c;
    let cpu_row = |r: u32| {
        let (loss, _) = loss::bce_with_logits(&logits, &targets, &[r]).unwrap();
        let counts = loss::multilabel_counts(&logits, &targets, &[r]).unwrap();
        (loss, counts.true_pos + counts.true_neg)
    };
    // The CPU divides its gradient by the term count; the device multiplies by its reciprocal.
    let want_grad = grad.iter().map(|g| g / terms as f32).collect();
    let scale = (terms as f32).recip();
    check_labelled_loss(Labels::MultiLabel(targets.clone()), &rows, &logits, scale, cpu_row, (total, want_grad));
}

/// The gradients flat in one device buffer (what NCCL sums) are the host's flat gradients, and
/// such a buffer sets them back tensor for tensor; a buffer of another length is refused.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn device_flat_gradients_are_the_host_flat_gradients() {
    let dev = device();
    let config = ModelConfig { layer_norm: true, heads: 2, layers: 3, ..ModelConfig::gat(6, 4, 3) };
    let model = Model::new(config).unwrap();
    let mut device = DeviceModel::from_model(&dev, &model).unwrap();
    let n = model.num_params();
    let grads = values(n, 41);
    device.set_grads(&grads).unwrap();
    assert_eq!(dev.download(&device.grads_on_device().unwrap()).unwrap(), grads);
    let other = values(n, 42);
    device.set_grads_on_device(&dev.upload(&other).unwrap()).unwrap();
    assert_eq!(device.grads().unwrap(), other);
    assert!(device.set_grads_on_device(&dev.upload(&other[1..]).unwrap()).is_err());
}

/// Four steps of Adam (coupled L2) and AdamW on the same start: parameters and both moments
/// after every step, so the bias corrections of t > 1 are covered.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn adam_steps_match_the_cpu_optimizer() {
    let dev = device();
    let len = 3001;
    for mut adam in [Adam::new(0.01, 5e-4), Adam::adamw(0.005, 0.01)] {
        let mut params = values(len, 23);
        let (mut p, mut m, mut v) = (dev.upload(&params).unwrap(), dev.zeros(len).unwrap(), dev.zeros(len).unwrap());
        for t in 1..=4u64 {
            let grads = values(len, 24 + t);
            adam.step(&mut params, &grads).unwrap();
            dev.adam_step(&adam, t, &mut p, &dev.upload(&grads).unwrap(), &mut m, &mut v).unwrap();
            let (want_m, want_v, steps) = adam.moments();
            assert_eq!(steps, t);
            assert_close(&dev.download(&m).unwrap(), want_m, FLOAT);
            assert_close(&dev.download(&v).unwrap(), want_v, FLOAT);
            assert_close(&dev.download(&p).unwrap(), &params, FLOAT);
        }
    }
}

/// The device's SGD step follows `Sgd::step` (the CPU optimizer) over four steps, so the
/// momentum buffer's first step and the later ones are covered: no momentum, heavy-ball and
/// Nesterov, each with weight decay.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn sgd_steps_match_the_cpu_optimizer() {
    let dev = device();
    let len = 3001;
    for mut sgd in [Sgd::new(0.1, 0.0, 5e-4), Sgd::new(0.05, 0.9, 5e-4), Sgd::nesterov(0.05, 0.9, 1e-3)] {
        let mut params = values(len, 31);
        let (mut p, mut buf) = (dev.upload(&params).unwrap(), dev.zeros(len).unwrap());
        for t in 1..=4u64 {
            let grads = values(len, 32 + t);
            sgd.step(&mut params, &grads).unwrap();
            dev.sgd_step(&sgd, t, &mut p, &dev.upload(&grads).unwrap(), &mut buf).unwrap();
            let (want_buf, steps) = sgd.state();
            assert_eq!(steps, t);
            assert_close(&dev.download(&buf).unwrap(), want_buf, FLOAT);
            assert_close(&dev.download(&p).unwrap(), &params, FLOAT);
        }
    }
}

fn download_row_codes(dev: &Device, q: &RowCodes) -> reference::RowQuant {
    reference::RowQuant {
        lo: dev.download(&q.lo).unwrap(),
        scale: dev.download(&q.scale).unwrap(),
        codes: dev.download(&q.codes).unwrap(),
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn quantization_codes_and_packing_are_exact() {
    let dev = device();
    let (n, d) = (257, 40);
    let mut x = values(n * d, 18);
    x[..d].fill(1.5); // a constant row
    let gids: Vec<u32> = (0..n as u32).map(|i| 1000 + i).collect();
    let dx = dev.upload(&x).unwrap();
    for bits in [1, 2, 3, 4, 8, 16] {
        let want = reference::linear_quantize(d, bits, &x);
        let q = dev.linear_quantize(d, bits, &dx).unwrap();
        assert_eq!(download_row_codes(&dev, &q), want, "linear {bits} bits");
        assert_eq!(dev.download(&dev.row_dequantize(d, &q).unwrap()).unwrap(), reference::row_dequantize(d, &want));

        let want = reference::stochastic_quantize(d, bits, &x, &gids, 0xfeed);
        let q = dev.stochastic_quantize(d, bits, &dx, &dev.upload(&gids).unwrap(), 0xfeed).unwrap();
        assert_eq!(download_row_codes(&dev, &q), want, "stochastic {bits} bits");

        let want = reference::bucket_quantize(bits, &x);
        let q = dev.bucket_quantize(bits, &dx).unwrap();
        assert_eq!(
            (dev.download(&q.lo).unwrap()[0], dev.download(&q.hi).unwrap()[0], dev.download(&q.codes).unwrap()),
            (want.lo, want.hi, want.codes.clone()),
            "bucket {bits} bits"
        );
        assert_eq!(
            dev.download(&dev.bucket_dequantize(bits, &q).unwrap()).unwrap(),
            reference::bucket_dequantize(bits, &want)
        );

        let packed = dev.pack_codes(bits, &q.codes).unwrap();
        assert_eq!(dev.download(&packed).unwrap(), reference::pack_codes(bits, &want.codes), "pack {bits} bits");
        assert_eq!(dev.download(&dev.unpack_codes(bits, &packed, x.len()).unwrap()).unwrap(), want.codes);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gather_and_scatter_add_match_the_cpu() {
    let dev = device();
    let (rows, f) = (90, 13);
    let src = values(rows * f, 19);
    let idx: Vec<u32> = (0..200u32).map(|i| (i * 37) % rows as u32).collect();
    let gathered = dev.gather_rows(f, &idx, &dev.upload(&src).unwrap(), rows).unwrap();
    let want = reference::gather_rows(f, &idx, &src);
    assert_eq!(dev.download(&gathered).unwrap(), want);
    let mut dst = dev.upload(&src).unwrap();
    dev.scatter_add_rows(f, &idx, &gathered, &mut dst, rows).unwrap();
    let mut want_dst = src.clone();
    reference::scatter_add_rows(f, &idx, &want, &mut want_dst);
    assert_close(&dev.download(&dst).unwrap(), &want_dst, REDUCTION);
    assert!(dev.gather_rows(f, &[rows as u32], &dev.upload(&src).unwrap(), rows).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn cublas_matmul_matches_ndarray_in_every_transpose() {
    let dev = device();
    let (m, k, n) = (37, 64, 29);
    let (a, b) = (array(m, k, &values(m * k, 20)), array(k, n, &values(k * n, 21)));
    let want = a.dot(&b);
    let (at, bt) = (a.t().as_standard_layout().to_owned(), b.t().as_standard_layout().to_owned());
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let da = dev.upload(if ta { at.as_slice().unwrap() } else { a.as_slice().unwrap() }).unwrap();
        let db = dev.upload(if tb { bt.as_slice().unwrap() } else { b.as_slice().unwrap() }).unwrap();
        let c = dev.matmul(&da, ta, &db, tb, m, k, n).unwrap();
        assert_close(&dev.download(&c).unwrap(), want.as_slice().unwrap(), REDUCTION);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn scatter_and_scaled_row_adds_match_the_cpu() {
    let dev = device();
    let (rows, f) = (90, 13);
    let src = values(rows * f, 22);
    // Distinct rows, out of order.
    let idx: Vec<u32> = (0..40u32).map(|i| (i * 37) % rows as u32).collect();
    let packed = values(idx.len() * f, 23);
    let at = DeviceIndex::upload(&dev, &idx, rows).unwrap();
    let mut dst = dev.upload(&src).unwrap();
    dev.scatter_rows_at(Put::Overwrite, f, &at, &dev.upload(&packed).unwrap(), &mut dst, rows).unwrap();
    let mut want = src.clone();
    reference::scatter_rows(f, &idx, &packed, &mut want);
    assert_eq!(dev.download(&dst).unwrap(), want);
    let coeff = values(rows, 24);
    let mut sum = dev.upload(&src).unwrap();
    dev.add_scaled_rows(rows, f, Some(&dev.upload(&coeff).unwrap()), &dev.upload(&want).unwrap(), &mut sum).unwrap();
    // A source of another shape is refused.
    assert!(dev.add_scaled_rows(rows, f, None, &dev.upload(&packed[..f]).unwrap(), &mut sum).is_err());
    let mut want_sum = src.clone();
    reference::add_scaled_rows(f, Some(&coeff), &want, &mut want_sum);
    assert_close(&dev.download(&sum).unwrap(), &want_sum, FLOAT);
    // Columns put around a kept range (featpart's fetched columns beside its own), exact.
    for kept in [0..4, 5..9, 9..13, 6..6] {
        let others = values(rows * (f - kept.len()), 27);
        let mut dst = dev.upload(&src).unwrap();
        dev.put_columns_around(rows, f, kept.clone(), &dev.upload(&others).unwrap(), &mut dst).unwrap();
        let mut want = src.clone();
        reference::put_columns_around(f, kept.clone(), &others, &mut want);
        assert_eq!(dev.download(&dst).unwrap(), want, "kept {kept:?}");
        // And taken back around it (GAT's numerators out of a part's synced block).
        let taken = dev.take_columns_around(rows, f, kept.clone(), &dst).unwrap();
        assert_eq!(dev.download(&taken).unwrap(), reference::take_columns_around(f, kept.clone(), &want));
    }
    assert!(
        dev.put_columns_around(rows, f, 4..14, &dev.upload(&src).unwrap(), &mut dev.upload(&src).unwrap()).is_err()
    );
    assert!(dev.take_columns_around(rows, f, 4..14, &dev.upload(&src).unwrap()).is_err());
}

/// The device block as a row store reads, puts and zeroes what the host array store does.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn the_device_row_store_equals_the_array_store() {
    let dev = device();
    let (rows, f) = (30, 5);
    let start = values(rows * f, 25);
    let mut host = array(rows, f, &start);
    let mut block = dev.upload(&start).unwrap();
    let mut lists = RowLists::default();
    let mut store = DeviceRows::new(&dev, &mut block, rows, f, &mut lists).unwrap();
    assert_eq!(store.dim(), host.dim());
    let (read, written) = ([3u32, 7, 8, 21], [0u32, 4, 29]);
    let (mut a, mut b) = (vec![0.0; read.len() * f], vec![0.0; read.len() * f]);
    store.read_rows(&read, &mut a).unwrap();
    host.read_rows(&read, &mut b).unwrap();
    assert_eq!(a, b);
    let values = values(written.len() * f, 26);
    for put in [Put::Overwrite, Put::Add] {
        store.write_rows(&written, &values, put).unwrap();
        host.write_rows(&written, &values, put).unwrap();
    }
    store.zero_rows_from(25).unwrap();
    host.zero_rows_from(25).unwrap();
    assert_close(&dev.download(&block).unwrap(), host.as_slice().unwrap(), FLOAT);
    let mut wrong = dev.zeros::<f32>(7).unwrap();
    assert!(DeviceRows::new(&dev, &mut wrong, 2, 3, &mut lists).is_err());
}

/// The device block as a row store encodes the bytes the CPU codecs write (`cache_quant`'s
/// `Encoding`, the array store's), bit for bit: exact rows, stochastic rows at mixed widths with
/// their keyed draws, linear rows at every width, whole messages in buckets at every width, on
/// rows with flat stretches, NaNs and odd widths; it
/// decodes a message onto its rows, over them and added to them, as the array store does; and
/// the stochastic error sums agree with the CPU's row-order sums to rounding.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn device_encoded_messages_are_the_cpu_codecs_bytes() {
    use cache_quant::codec::BUCKET_BITS;
    use cache_quant::{Encoding, LINEAR_BITS};
    let dev = device();
    for f in [1usize, 5, 16, 37] {
        let rows = 40;
        let mut start = values(rows * f, 31 + f as u64);
        start[f..2 * f].fill(0.25); // a flat row
        start[3 * f] = f32::NAN; // a NaN in a row
        let mut host = array(rows, f, &start);
        let mut block = dev.upload(&start).unwrap();
        let mut lists = RowLists::default();
        let mut store = DeviceRows::new(&dev, &mut block, rows, f, &mut lists).unwrap();
        let picked = [7u32, 1, 3, 0, 39, 12, 12 + 1, 25];
        let gids: std::sync::Arc<[u32]> = picked.iter().map(|&r| 1000 + 3 * r).collect();
        let mut encodings: Vec<Encoding> = vec![Encoding::Exact];
        encodings.extend(LINEAR_BITS.iter().map(|&bits| Encoding::Linear { bits }));
        encodings.extend(BUCKET_BITS.iter().map(|&bits| Encoding::Bucket { bits }));
        for widths in [[2u8; 8], [4; 8], [8; 8], [2, 8, 4, 4, 2, 8, 8, 2]] {
            encodings.push(Encoding::Stochastic { key: 0x5eed ^ f as u64, bits: widths.to_vec(), gids: gids.clone() });
        }
        for encoding in &encodings {
            let (mut on_device, mut on_host) = (Vec::new(), Vec::new());
            let measured = store.encode_rows(&picked, encoding, &mut on_device).unwrap();
            let expected = host.encode_rows(&picked, encoding, &mut on_host).unwrap();
            assert_eq!(on_device, on_host, "width {f}, {encoding:?}");
            for (got, want) in [(measured.err_sq, expected.err_sq), (measured.ref_sq, expected.ref_sq)] {
                let close = (got - want).abs() <= 1e-9 * want.abs().max(1.0) || (got.is_nan() && want.is_nan());
                assert!(close, "width {f}: sums {got} vs {want}");
            }
            let landing = [2u32, 5, 6, 9, 10, 11, 30, 31];
            for put in [Put::Overwrite, Put::Add] {
                store.decode_rows(&landing, encoding, &on_host, put).unwrap();
                host.decode_rows(&landing, encoding, &on_host, put).unwrap();
            }
            let short = &on_host[..on_host.len() - 1];
            assert!(store.decode_rows(&landing, encoding, short, Put::Overwrite).is_err(), "a short message");
        }
        let (got, want) = (dev.download(&block).unwrap(), host.as_slice().unwrap().to_vec());
        let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same, "width {f}: the decoded rows differ");
    }
}

const PART_IN: usize = 6;
const PART_CLASSES: usize = 3;
const PART_NODES: usize = 300;

/// How a worker runs its part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    EdgeCut,
    /// Edge-cut under an exchange that overlaps: split halo calls around the halves.
    Overlapped,
    /// Every replica computes; replica syncs.
    VertexCut,
    /// Vertex-cut, masters alone compute.
    MastersOnly,
}

fn part_graph() -> Csr {
    let mut r = SplitMix64::new(27);
    let n = PART_NODES as u64;
    let edges: Vec<(u32, u32)> = (0..1500).map(|_| (r.below(n) as u32, r.below(n) as u32)).collect();
    Csr::from_edges(PART_NODES, &edges, EdgeListOptions { symmetrize: true, remove_self_loops: true }).unwrap()
}

fn part_book(run: Run) -> PartitionBook {
    let graph = part_graph();
    let config = match run {
        Run::EdgeCut | Run::Overlapped => PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::Random, 4) },
        Run::VertexCut | Run::MastersOnly => {
            PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) }
        }
    };
    PartitionBook::build(&graph, &partition_graph(&graph, &config).unwrap()).unwrap()
}

/// A vertex's class; every third vertex is unlabelled for training.
fn class_of(gid: u32) -> u32 {
    (gid * 7 + gid / 5) % PART_CLASSES as u32
}

fn trains(gid: u32) -> bool {
    !gid.is_multiple_of(3)
}

/// A fresh exact exchange of the kind `run` uses.
fn make_exchange<'p>(
    run: Run,
    part: &'p LocalGraph,
    comm: &'p dyn Communicator,
) -> Result<Box<dyn Exchange + 'p>, String> {
    let options = ExchangeOptions { overlap: run == Run::Overlapped, ..ExchangeOptions::default() };
    let failed = |x: &dyn std::fmt::Display| format!("part {}: {x}", part.part());
    let made: Box<dyn Exchange + 'p> = match run {
        Run::VertexCut => Box::new(VertexCutExchange::new(part, comm, options).map_err(|x| failed(&x))?),
        Run::EdgeCut | Run::Overlapped | Run::MastersOnly => {
            Box::new(EdgeCutExchange::new(part, comm, options).map_err(|x| failed(&x))?)
        }
    };
    Ok(made)
}

/// One worker's CPU and device runs of one training pass and one evaluation on its part.
struct PartOutcome {
    logits: [Vec<f32>; 2],
    loss: [f64; 2],
    eval_loss: [f64; 2],
    /// The worker's gradient shares, and their sums over the workers.
    grads: [Vec<f32>; 2],
    reduced: [Vec<f32>; 2],
}

/// Every worker's CPU and device outcomes agree: logits, losses, the gradients summed over the
/// workers, and each worker's share where `shares` (GAT on a vertex-cut puts a vertex's self
/// loop in its primary's share whole).
fn assert_parts_agree(outcomes: &[PartOutcome], name: &str, shares: bool) {
    for (rank, o) in outcomes.iter().enumerate() {
        let name = format!("{name} rank {rank}");
        assert_close(&o.logits[1], &o.logits[0], REDUCTION);
        for (what, [cpu, dev]) in [("loss", o.loss), ("eval loss", o.eval_loss)] {
            assert!((cpu - dev).abs() <= 1e-4 * cpu.abs().max(1.0), "{name}: {what} CPU {cpu}, device {dev}");
        }
        assert_close(&o.reduced[1], &o.reduced[0], REDUCTION);
        if shares {
            assert_close(&o.grads[1], &o.grads[0], REDUCTION);
        }
    }
}

/// A training pass (forward, loss, backward) and an evaluation forward of `config` on one
/// worker's part, on the CPU and on the device, each with a fresh exchange of its own. The
/// logits' computed rows, the loss sums and the gradients (the worker's shares, and their sums
/// over the workers) come back.
fn part_pass(
    part: &LocalGraph,
    comm: &dyn Communicator,
    config: &ModelConfig,
    run: Run,
    held_first: bool,
) -> Result<PartOutcome, String> {
    let e = |e: &dyn std::fmt::Display| format!("part {}: {e}", part.part());
    let cut = if matches!(run, Run::EdgeCut | Run::Overlapped) { CutKind::EdgeCut } else { CutKind::VertexCut };
    let mut graph: AggGraph = agg_graph_of(part, cut).map_err(|x| e(&x))?;
    if run == Run::MastersOnly {
        graph = graph.with_primaries_computing();
    }
    let (n, m) = (graph.num_local(), graph.computed_rows());
    let gids = graph.global_ids().to_vec();
    // Layer 0's halo inputs held (the halo feature cache): its view pulls nothing, later ones do.
    let first = if held_first { graph.clone().with_held_halo().map_err(|x| e(&x))? } else { graph.clone() };
    let views = [first.clone(), graph.clone(), graph.clone()];
    let x = Array2::from_shape_fn((n, PART_IN), |(l, c)| ((gids[l] as usize * 7 + c * 3) % 11) as f32 / 11.0 - 0.4);
    let classes: Vec<u32> = gids.iter().map(|&g| class_of(g)).collect();
    let rows: Vec<u32> = (0..graph.num_primary() as u32).filter(|&l| trains(gids[l as usize])).collect();
    let global_terms = (0..PART_NODES as u32).filter(|&g| trains(g)).count();
    let ctx = ForwardCtx::train(5, 3);

    // The CPU worker.
    let mut model = Model::new(config.clone()).map_err(|x| e(&x))?;
    let start = Model::new(config.clone()).map_err(|x| e(&x))?;
    let mut exchange = make_exchange(run, part, comm)?;
    model.zero_grad();
    model.forward_layers(&views, &x, exchange.as_mut(), ctx).map_err(|x| e(&x))?;
    let mut dlogits = model.take_logits();
    let cpu_logits = dlogits.rows().into_iter().take(m).flatten().copied().collect();
    let cpu_loss = loss::softmax_cross_entropy_in_place(&mut dlogits, &classes, &rows).map_err(|x| e(&x))?;
    dlogits /= global_terms as f32;
    model.backward_layers(&views, dlogits, exchange.as_mut()).map_err(|x| e(&x))?;
    let cpu_grads = model.grads().to_vec();
    let eval = model.forward_layers(&views, &x, exchange.as_mut(), ForwardCtx::eval()).map_err(|x| e(&x))?;
    let mut eval = eval.clone();
    let cpu_eval = loss::softmax_cross_entropy_in_place(&mut eval, &classes, &rows).map_err(|x| e(&x))?;

    // The device worker, from the same initial parameters, on its own stream.
    let dev = Device::new(0).map_err(|x| e(&x))?;
    let mut device = DeviceModel::from_model(&dev, &start).map_err(|x| e(&x))?;
    let on_device = match run {
        Run::Overlapped => device.upload_overlapped_part_graph(&graph),
        _ => device.upload_part_graph(&graph),
    }
    .map_err(|x| e(&x))?;
    let held = if held_first { Some(device.upload_part_graph(&first).map_err(|x| e(&x))?) } else { None };
    let on_device = gnn_core::gpu::PartViews::of(&on_device, held.as_ref());
    let features = dev.upload(x.as_slice().unwrap()).map_err(|x| e(&x))?;
    let labels = Labels::Classes(classes.clone());
    let mut split = DeviceLabels::upload(&dev, &labels, &rows, n, PART_CLASSES).map_err(|x| e(&x))?;
    let (mut exchange, mut stager) = (make_exchange(run, part, comm)?, Stager::new(n));
    device.zero_grad().map_err(|x| e(&x))?;
    device.forward_part(on_device, &features, ctx, exchange.as_mut(), &mut stager).map_err(|x| e(&x))?;
    let logits = device.logits().map_err(|x| e(&x))?[..m * PART_CLASSES].to_vec();
    let dev_loss = device.loss(&mut split, global_terms).map_err(|x| e(&x))?.loss_sum;
    device.backward_part(on_device, exchange.as_mut(), &mut stager).map_err(|x| e(&x))?;
    let dev_grads = device.grads().map_err(|x| e(&x))?;
    device.forward_part(on_device, &features, ForwardCtx::eval(), exchange.as_mut(), &mut stager).map_err(|x| e(&x))?;
    let dev_eval = device.evaluate(std::slice::from_mut(&mut split)).map_err(|x| e(&x))?[0].loss_sum;
    // The whole-graph calls refuse a part.
    assert!(device.forward(on_device.rest, &features, ctx).is_err());
    // The host-reduced gradient goes back as it came.
    let mut reduced = dev_grads.clone();
    comm.all_reduce_sum_f32("grads", &mut reduced).map_err(|x| e(&x))?;
    device.set_grads(&reduced).map_err(|x| e(&x))?;
    assert_eq!(device.grads().map_err(|x| e(&x))?, reduced);
    let mut cpu_reduced = cpu_grads.clone();
    comm.all_reduce_sum_f32("grads", &mut cpu_reduced).map_err(|x| e(&x))?;
    Ok(PartOutcome {
        logits: [cpu_logits, logits],
        loss: [cpu_loss, dev_loss],
        eval_loss: [cpu_eval, dev_eval],
        grads: [cpu_grads, dev_grads],
        reduced: [cpu_reduced, reduced],
    })
}

/// A partitioned device forward and backward equal the CPU model's on the same part with the
/// same exchange, for GCN and GraphSAGE, each aggregating before and after its weight, on an
/// edge-cut (blocking, and overlapped: split halo calls around the aggregation's halves), a
/// vertex-cut and a masters-only vertex-cut, and for GAT (its softmax split around the replica
/// syncs) on the edge-cut (blocking and under an overlapping exchange, whose calls GAT makes
/// blocking) and the vertex-cut: four workers as threads sharing GPU 0, each with its own
/// device stream.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn partitioned_device_passes_equal_the_cpu_workers() {
    let topology = Topology::for_workers(4, 2, LinkModel::default()).unwrap();
    for run in [Run::EdgeCut, Run::Overlapped, Run::VertexCut, Run::MastersOnly] {
        let book = part_book(run);
        // Hidden 4 aggregates `x W` (narrower), hidden 8 aggregates the input.
        let kinds = if run == Run::MastersOnly {
            &[ConvKind::Gcn, ConvKind::Sage][..]
        } else {
            &[ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat]
        };
        for hidden in [4, 8] {
            for &kind in kinds {
                let config = match kind {
                    // Two heads of `hidden / 2`: as wide as the others' hidden rows.
                    ConvKind::Gat => {
                        ModelConfig { heads: 2, layers: 3, ..ModelConfig::gat(PART_IN, hidden / 2, PART_CLASSES) }
                    }
                    _ => ModelConfig { kind, layers: 3, ..ModelConfig::gcn(PART_IN, hidden, PART_CLASSES) },
                };
                let outcomes = LocalCluster::run(&topology, |comm| {
                    part_pass(&book.parts()[comm.rank()], comm, &config, run, false)
                })
                .unwrap();
                let shares = !(run == Run::VertexCut && kind == ConvKind::Gat);
                assert_parts_agree(&outcomes, &format!("{run:?} {kind:?} hidden {hidden}"), shares);
            }
        }
    }
}

/// The halo feature cache on the device: layer 0 runs on its held view (its halo rows' inputs
/// in the features, nothing pulled) and the later layers on the pulling view, against the CPU
/// model's per-layer views on the same edge-cut part, GCN, GraphSAGE and GAT.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn held_first_views_equal_the_cpu_workers() {
    let topology = Topology::for_workers(4, 2, LinkModel::default()).unwrap();
    let book = part_book(Run::EdgeCut);
    for kind in [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat] {
        let config = match kind {
            ConvKind::Gat => ModelConfig { heads: 2, layers: 3, ..ModelConfig::gat(PART_IN, 4, PART_CLASSES) },
            _ => ModelConfig { kind, layers: 3, ..ModelConfig::gcn(PART_IN, 8, PART_CLASSES) },
        };
        let outcomes = LocalCluster::run(&topology, |comm| {
            part_pass(&book.parts()[comm.rank()], comm, &config, Run::EdgeCut, true)
        })
        .unwrap();
        assert_parts_agree(&outcomes, &format!("{kind:?} held first view"), true);
    }
}

/// GAT's softmax spans every replica's edges: a part whose masters alone compute is refused at
/// upload.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn a_gat_masters_only_part_is_refused() {
    let dev = device();
    let book = part_book(Run::MastersOnly);
    let graph = agg_graph_of(&book.parts()[0], CutKind::VertexCut).unwrap().with_primaries_computing();
    let model = Model::new(ModelConfig::gat(PART_IN, 2, PART_CLASSES)).unwrap();
    let device = DeviceModel::from_model(&dev, &model).unwrap();
    let err = device.upload_part_graph(&graph).err().expect("GAT on a masters-only part is refused");
    assert!(err.to_string().contains("GAT"), "{err}");
}

/// A sampled batch's device passes equal the CPU model's over the same blocks, for GCN under
/// both normalisations, GraphSAGE and GAT (two heads, attention dropout), each aggregating
/// before and after its weight, with input and hidden dropout and LayerNorm in both layer
/// orders: the blocks and input indices go up on a copy stream's device (page-locked), the
/// passes run on the compute stream. The logits' seed rows, the loss sum and every gradient
/// agree; blocks of another depth are refused.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn block_passes_equal_the_cpu_model() {
    use gnn_core::gpu::{DeviceBlocks, DeviceIndex};
    use gnn_core::{BlockGraphs, GcnNorm, GraphDegrees, LayerOrder, NoExchange};
    use graph_partition::sample::{NeighborSampler, StepKey};

    let csr = part_graph();
    let degrees = GraphDegrees::of(&csr);
    let features: Vec<f32> = values(PART_NODES * PART_IN, 41);
    let all = array(PART_NODES, PART_IN, &features);
    let seeds: Vec<u32> = (0..PART_NODES as u32).filter(|&g| g % 7 == 2).collect();
    let sampler = NeighborSampler::new(&csr, "6,4,3".parse().unwrap(), 13).unwrap();
    let batch = sampler.sample(StepKey { epoch: 2, step: 5 }, &seeds).unwrap();
    let dev = device();
    let copy = dev.copy_device().unwrap();
    // The copy device has no cuBLAS handle: it uploads and refuses products.
    let one = copy.upload(&[1.0f32]).unwrap();
    let refused = copy.matmul(&one, false, &one, false, 1, 1, 1);
    assert!(matches!(refused, Err(gnn_core::gpu::GpuError::CopyOnly)), "{refused:?}");
    let cases = [
        (ConvKind::Gcn, GcnNorm::Global),
        (ConvKind::Gcn, GcnNorm::Sampled),
        (ConvKind::Sage, GcnNorm::Global),
        (ConvKind::Gat, GcnNorm::Global),
    ];
    for (kind, norm) in cases {
        for (hidden, layer_norm, order) in [(4, false, LayerOrder::DropoutLast), (8, true, LayerOrder::DropoutFirst)] {
            let name = format!("{kind:?} {norm:?} hidden {hidden} layer norm {layer_norm}");
            // GAT: two heads of `hidden / 2`, as wide as the others' hidden rows.
            let base = match kind {
                ConvKind::Gat => {
                    ModelConfig { heads: 2, attn_dropout: 0.2, ..ModelConfig::gat(PART_IN, hidden / 2, PART_CLASSES) }
                }
                _ => ModelConfig::gcn(PART_IN, hidden, PART_CLASSES),
            };
            let config = ModelConfig {
                kind,
                layers: 3,
                dropout: 0.3,
                input_dropout: 0.2,
                layer_norm,
                layer_order: order,
                ..base
            };
            let blocks = BlockGraphs::from_batch(&batch, &degrees, norm).unwrap();
            let out = blocks.layers().last().unwrap().num_local();
            let classes: Vec<u32> = blocks.layers().last().unwrap().global_ids().iter().map(|&g| class_of(g)).collect();
            let rows: Vec<u32> = (0..seeds.len() as u32).collect();
            let ctx = ForwardCtx::train_step(5, 2, 5);
            let terms = 3 * seeds.len();

            let mut cpu = Model::new(config.clone()).unwrap();
            let start = Model::new(config.clone()).unwrap();
            cpu.zero_grad();
            cpu.forward_blocks(&blocks, &all, &mut NoExchange, ctx).unwrap();
            let mut dlogits = cpu.take_logits();
            let cpu_logits: Vec<f32> = dlogits.rows().into_iter().take(seeds.len()).flatten().copied().collect();
            let cpu_loss = loss::softmax_cross_entropy_in_place(&mut dlogits, &classes, &rows).unwrap();
            dlogits /= terms as f32;
            cpu.backward_blocks(&blocks, dlogits, &mut NoExchange).unwrap();

            let mut model = DeviceModel::from_model(&dev, &start).unwrap();
            let on_device = DeviceBlocks::upload(&copy, &blocks, &model).unwrap();
            assert_eq!((on_device.input_rows(), on_device.output_rows()), (blocks.input_ids().len(), out), "{name}");
            let resident = dev.upload(&features).unwrap();
            let index = DeviceIndex::upload(&copy, blocks.input_ids(), PART_NODES).unwrap();
            let x = dev.gather_rows_at(PART_IN, &index, &resident, PART_NODES).unwrap();
            let labels = Labels::Classes(classes.clone());
            let mut split = DeviceLabels::upload(&copy, &labels, &rows, out, PART_CLASSES).unwrap();
            model.zero_grad().unwrap();
            model.forward_blocks(&on_device, &x, ctx).unwrap();
            let logits = model.logits().unwrap()[..seeds.len() * PART_CLASSES].to_vec();
            let dev_loss = model.loss(&mut split, terms).unwrap().loss_sum;
            model.backward_blocks(&on_device).unwrap();
            assert_close(&logits, &cpu_logits, REDUCTION);
            assert!(
                (cpu_loss - dev_loss).abs() <= 1e-4 * cpu_loss.abs().max(1.0),
                "{name}: loss {cpu_loss} vs {dev_loss}"
            );
            assert_close(&model.grads().unwrap(), cpu.grads(), REDUCTION);
            // The whole-graph calls refuse nothing here, but blocks of another depth are refused.
            let two = BlockGraphs::new(blocks.layers()[1..].to_vec()).unwrap();
            assert!(DeviceBlocks::upload(&copy, &two, &model).is_err(), "{name}");
        }
    }
}
