//! Test helpers: tiny random graphs and arrays, and a central-difference gradient checker.

use graph_partition::rng::SplitMix64;
use graph_partition::{Csr, EdgeListOptions};
use ndarray::Array2;

use crate::graph::AggGraph;

/// A directed random graph on `n` vertices (in- and out-degrees differ; some vertices isolated).
pub fn random_graph(n: usize, edges: usize, seed: u64) -> AggGraph {
    let mut r = SplitMix64::new(seed);
    // Leave the last vertex isolated so empty rows are always covered.
    let m = (n - 1) as u64;
    let list: Vec<(u32, u32)> = (0..edges).map(|_| (r.below(m) as u32, r.below(m) as u32)).collect();
    let csr = Csr::from_edges(n, &list, EdgeListOptions { symmetrize: false, remove_self_loops: true }).unwrap();
    AggGraph::single(&csr).unwrap()
}

/// Uniform values in `[-scale, scale)`.
pub fn random_array(rows: usize, cols: usize, scale: f32, seed: u64) -> Array2<f32> {
    let mut r = SplitMix64::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || (2.0 * r.next_f64() as f32 - 1.0) * scale)
}

/// Compares `analytic[i]` with the central difference of `loss` (evaluated in f64 from an f32
/// computation) when entry `i` of `point` moves by `+-eps`.
pub fn check_gradient(
    what: &str,
    point: &mut [f32],
    analytic: &[f32],
    eps: f32,
    tol: f64,
    mut loss: impl FnMut(&[f32]) -> f64,
) {
    assert_eq!(point.len(), analytic.len(), "{what}: gradient length");
    let mut worst = 0.0f64;
    for i in 0..point.len() {
        let orig = point[i];
        point[i] = orig + eps;
        let up = loss(point);
        point[i] = orig - eps;
        let down = loss(point);
        point[i] = orig;
        let fd = (up - down) / (2.0 * f64::from(eps));
        let an = f64::from(analytic[i]);
        let err = (fd - an).abs() / (1.0 + an.abs());
        worst = worst.max(err);
        assert!(err < tol, "{what}[{i}]: finite difference {fd:.6} vs analytic {an:.6}");
    }
    assert!(worst.is_finite());
}

/// `sum(out * proj)` in f64: a loss whose gradient w.r.t. `out` is `proj`.
pub fn project(out: &Array2<f32>, proj: &Array2<f32>) -> f64 {
    out.iter().zip(proj.iter()).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum()
}
