//! Finite-difference checks of every layer's backward pass, for both exchange points.

use ndarray::Array2;

use super::*;
use crate::exchange::NoExchange;
use crate::norm::LayerNorm;
use crate::params::ParamLayout;
use crate::testkit::{check_gradient, project, random_array, random_graph};

// Small enough that LeakyReLU kinks in attention scores are rarely crossed; f32 rounding noise
// in the f64-accumulated loss stays well below the tolerance.
const EPS: f32 = 1e-3;
const TOL: f64 = 1e-2;

fn random_params(layout: &ParamLayout, seed: u64) -> Vec<f32> {
    random_array(1, layout.len(), 0.6, seed).iter().copied().collect()
}

/// Checks d(sum(out * proj)) w.r.t. every parameter and every input element, and that skipping
/// the input gradient leaves the parameter gradients unchanged.
fn check_conv(label: &str, conv: &mut dyn Conv, layout: &ParamLayout, ctx: ForwardCtx, seed: u64) {
    let graph = random_graph(12, 40, seed);
    let n = graph.num_local();
    let mut params = random_params(layout, seed + 1);
    let mut x = random_array(n, conv.in_dim(), 1.0, seed + 2);
    let proj = random_array(n, conv.out_dim(), 1.0, seed + 3);
    let mut out = Array2::zeros((0, 0));

    let mut run_backward = |conv: &mut dyn Conv, params: &[f32], x: &Array2<f32>, want_dx: bool| {
        let mut xc = x.clone();
        conv.forward(params, &graph, &mut xc, &mut out, &mut NoExchange, 0, ctx).unwrap();
        let mut grads = vec![0.0f32; params.len()];
        let mut dout = proj.clone();
        let mut dx = Array2::zeros((0, 0));
        conv.backward(params, &mut grads, &graph, &xc, &mut dout, want_dx.then_some(&mut dx), &mut NoExchange, 0)
            .unwrap();
        (grads, dx)
    };
    let (grads, dx) = run_backward(conv, &params, &x, true);
    let (grads_no_dx, _) = run_backward(conv, &params, &x, false);
    for (a, b) in grads.iter().zip(&grads_no_dx) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "parameter gradients must not depend on dx");
    }

    let loss = |conv: &mut dyn Conv, params: &[f32], x: &Array2<f32>| {
        let mut xc = x.clone();
        let mut out = Array2::zeros((0, 0));
        conv.forward(params, &graph, &mut xc, &mut out, &mut NoExchange, 0, ctx).unwrap();
        project(&out, &proj)
    };
    let xs = x.clone();
    check_gradient(&format!("{label} params"), &mut params, &grads, EPS, TOL, |p| loss(conv, p, &xs));
    let shape = x.dim();
    let dx_flat: Vec<f32> = dx.iter().copied().collect();
    let x_flat = x.as_slice_mut().unwrap();
    check_gradient(&format!("{label} x"), x_flat, &dx_flat, EPS, TOL, |xv| {
        loss(conv, &params, &Array2::from_shape_vec(shape, xv.to_vec()).unwrap())
    });
}

#[test]
fn gcn_backward_both_exchange_points() {
    for (din, dout, point) in [(7, 3, ExchangePoint::Transformed), (3, 5, ExchangePoint::Input)] {
        let mut layout = ParamLayout::new();
        let mut conv = AggConv::gcn(&mut layout, "gcn", din, dout);
        assert_eq!(conv.exchange_point(), point);
        check_conv(&format!("gcn {din}->{dout}"), &mut conv, &layout, ForwardCtx::eval(), 10 + din as u64);
    }
}

#[test]
fn sage_backward_both_exchange_points() {
    for (din, dout, point) in [(7, 3, ExchangePoint::Transformed), (3, 5, ExchangePoint::Input)] {
        let mut layout = ParamLayout::new();
        let mut conv = AggConv::sage(&mut layout, "sage", din, dout);
        assert_eq!(conv.exchange_point(), point);
        check_conv(&format!("sage {din}->{dout}"), &mut conv, &layout, ForwardCtx::eval(), 20 + din as u64);
    }
}

#[test]
fn gat_backward_heads_concat_mean_and_dropout() {
    // (in, heads, head_dim, concat, attention dropout, training)
    let cases = [
        (8, 3, 2, true, 0.0, false),  // concat, transformed exchange
        (2, 2, 3, false, 0.0, false), // mean, input exchange
        (5, 3, 2, true, 0.4, true),   // attention dropout active
        (4, 1, 3, false, 0.3, true),  // single head
    ];
    for (i, &(din, heads, hd, concat, p, training)) in cases.iter().enumerate() {
        let mut layout = ParamLayout::new();
        let mut conv = GatConv::new(&mut layout, "gat", din, heads, hd, concat, p);
        assert_eq!(conv.out_dim(), if concat { heads * hd } else { hd });
        let ctx = if training { ForwardCtx::train(5, 2) } else { ForwardCtx::eval() };
        check_conv(&format!("gat case {i}"), &mut conv, &layout, ctx, 30 + i as u64 * 10);
    }
}

#[test]
fn gat_matches_dense_reference() {
    // Single head, no dropout: out_v = sum over {u->v} + {v} of softmax(e) h_u + b.
    let graph = random_graph(9, 25, 3);
    let mut layout = ParamLayout::new();
    let mut conv = GatConv::new(&mut layout, "gat", 4, 1, 3, true, 0.0);
    let params = random_params(&layout, 4);
    let mut x = random_array(9, 4, 1.0, 5);
    let mut out = Array2::zeros((0, 0));
    conv.forward(&params, &graph, &mut x, &mut out, &mut NoExchange, 0, ForwardCtx::eval()).unwrap();
    let w = layout.infos()[0].slot.view(&params);
    let (a_src, a_dst, b) = (
        layout.infos()[1].slot.slice(&params),
        layout.infos()[2].slot.slice(&params),
        layout.infos()[3].slot.slice(&params),
    );
    let h = x.dot(&w);
    let score = |u: usize, v: usize| {
        let z: f32 = (0..3).map(|c| h[[u, c]] * a_src[c] + h[[v, c]] * a_dst[c]).sum();
        if z > 0.0 { z } else { 0.2 * z }
    };
    for v in 0..9 {
        let mut sources: Vec<usize> = graph.fwd().neighbors(v).iter().map(|&u| u as usize).collect();
        sources.push(v);
        let total: f32 = sources.iter().map(|&u| score(u, v).exp()).sum();
        for c in 0..3 {
            let want: f32 = sources.iter().map(|&u| score(u, v).exp() / total * h[[u, c]]).sum::<f32>() + b[c];
            assert!((out[[v, c]] - want).abs() < 1e-5, "row {v} col {c}: {} vs {want}", out[[v, c]]);
        }
    }
}

#[test]
fn gcn_matches_dense_reference() {
    let graph = random_graph(10, 30, 8);
    let mut layout = ParamLayout::new();
    let mut conv = AggConv::gcn(&mut layout, "gcn", 4, 2);
    let params = random_params(&layout, 9);
    let mut x = random_array(10, 4, 1.0, 10);
    let mut out = Array2::zeros((0, 0));
    conv.forward(&params, &graph, &mut x, &mut out, &mut NoExchange, 0, ForwardCtx::eval()).unwrap();
    let mut a_hat = Array2::<f32>::zeros((10, 10));
    for v in 0..10 {
        let din = graph.in_degree()[v];
        a_hat[[v, v]] = 1.0 / (din + 1.0);
        for &u in graph.fwd().neighbors(v) {
            a_hat[[v, u as usize]] = 1.0 / ((graph.out_degree()[u as usize] + 1.0) * (din + 1.0)).sqrt();
        }
    }
    let want = a_hat.dot(&x).dot(&layout.infos()[0].slot.view(&params)) + layout.infos()[1].slot.view(&params);
    assert!((&out - &want).iter().all(|d| d.abs() < 1e-5));
}

#[test]
fn layer_norm_backward() {
    let mut layout = ParamLayout::new();
    let mut norm = LayerNorm::new(&mut layout, "ln", 6);
    let mut params = random_params(&layout, 1);
    let mut x = random_array(5, 6, 2.0, 2);
    let proj = random_array(5, 6, 1.0, 3);
    let mut out = Array2::zeros((5, 6));
    norm.forward(&params, &x, &mut out);
    for row in out.rows() {
        assert!(row.iter().all(|v| v.is_finite()));
    }
    let mut grads = vec![0.0f32; params.len()];
    let mut dx = Array2::zeros((5, 6));
    norm.backward(&params, &mut grads, &proj, &mut dx);
    let mut loss = |p: &[f32], x: &Array2<f32>| {
        let mut o = Array2::zeros(x.dim());
        norm.forward(p, x, &mut o);
        project(&o, &proj)
    };
    let xs = x.clone();
    check_gradient("layer norm params", &mut params, &grads, EPS, TOL, |p| loss(p, &xs));
    let dx_flat: Vec<f32> = dx.iter().copied().collect();
    check_gradient("layer norm x", x.as_slice_mut().unwrap(), &dx_flat, EPS, TOL, |xv| {
        loss(&params, &Array2::from_shape_vec((5, 6), xv.to_vec()).unwrap())
    });
}
