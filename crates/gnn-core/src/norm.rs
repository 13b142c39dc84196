//! LayerNorm over the feature dimension of each row, with learned scale and shift
//! (`torch.nn.LayerNorm(dim)`, eps 1e-5). Purely per-vertex, so it needs no exchange.

use ndarray::{Array2, ArrayBase, Data, DataMut, Ix2};
use rayon::prelude::*;

use crate::dense::{Growth, MIN_PAR_ROWS, ensure_shape, row_reduce, slice, slice_mut};
use crate::params::{Init, ParamLayout, ParamSlot};

/// Added to the variance before the square root.
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// A LayerNorm layer; forward caches the normalised rows and their inverse deviations.
#[derive(Debug)]
pub struct LayerNorm {
    gamma: ParamSlot,
    beta: ParamSlot,
    xhat: Array2<f32>,
    rstd: Vec<f32>,
}

impl LayerNorm {
    /// Parameters `{name}.gamma` (ones) and `{name}.beta` (zeros).
    pub fn new(layout: &mut ParamLayout, name: &str, dim: usize) -> Self {
        let gamma = layout.add(format!("{name}.gamma"), 1, dim, Init::Ones);
        let beta = layout.add(format!("{name}.beta"), 1, dim, Init::Zeros);
        Self { gamma, beta, xhat: Array2::zeros((0, 0)), rstd: Vec::new() }
    }

    pub fn dim(&self) -> usize {
        self.gamma.cols
    }

    /// `out <- gamma * (x - mean) / sqrt(var + eps) + beta`, row by row.
    ///
    /// # Panics
    /// If `x` is not `dim` wide or `out` not the shape of `x`.
    pub fn forward<S: Data<Elem = f32>, T: DataMut<Elem = f32>>(
        &mut self,
        params: &[f32],
        x: &ArrayBase<S, Ix2>,
        out: &mut ArrayBase<T, Ix2>,
    ) {
        let d = self.dim();
        assert_eq!(x.ncols(), d, "layer norm width");
        assert_eq!(out.dim(), x.dim(), "layer norm output shape");
        let n = x.nrows();
        ensure_shape(&mut self.xhat, n, d, Growth::Written);
        self.rstd.resize(n, 0.0);
        let (gamma, beta, xs) = (self.gamma.slice(params), self.beta.slice(params), slice(x));
        slice_mut(&mut self.xhat)
            .par_chunks_mut(d)
            .zip(slice_mut(out).par_chunks_mut(d))
            .zip(self.rstd.par_iter_mut())
            .enumerate()
            .with_min_len(MIN_PAR_ROWS)
            .for_each(|(r, ((xh, o), rs))| {
                let row = &xs[r * d..][..d];
                let mean = row.iter().sum::<f32>() / d as f32;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
                *rs = (var + LAYER_NORM_EPS).sqrt().recip();
                for ((((h, o), &v), g), b) in xh.iter_mut().zip(o.iter_mut()).zip(row).zip(gamma).zip(beta) {
                    *h = (v - mean) * *rs;
                    *o = g * *h + b;
                }
            });
    }

    /// Adds `d gamma`, `d beta` into `grads` and writes the input gradient into `dx`.
    pub fn backward<S: Data<Elem = f32>, T: DataMut<Elem = f32>>(
        &mut self,
        params: &[f32],
        grads: &mut [f32],
        dy: &ArrayBase<S, Ix2>,
        dx: &mut ArrayBase<T, Ix2>,
    ) {
        let (n, d) = self.xhat.dim();
        assert_eq!(dy.dim(), (n, d), "layer norm backward shape");
        assert_eq!(dx.dim(), (n, d), "layer norm backward shape");
        let (gamma, xhat, dys, rstd) = (self.gamma.slice(params), slice(&self.xhat), slice(dy), &self.rstd);
        let mut acc = vec![0.0f32; 2 * d];
        row_reduce(n, &mut acc, |rows, a| {
            let (dg, db) = a.split_at_mut(d);
            for r in rows {
                for (((g, b), &y), &h) in
                    dg.iter_mut().zip(db.iter_mut()).zip(&dys[r * d..][..d]).zip(&xhat[r * d..][..d])
                {
                    *g += y * h;
                    *b += y;
                }
            }
        });
        self.gamma.slice_mut(grads).iter_mut().zip(&acc[..d]).for_each(|(g, a)| *g += a);
        self.beta.slice_mut(grads).iter_mut().zip(&acc[d..]).for_each(|(g, a)| *g += a);
        slice_mut(dx).par_chunks_mut(d).enumerate().with_min_len(MIN_PAR_ROWS).for_each(|(r, out)| {
            let (y, h) = (&dys[r * d..][..d], &xhat[r * d..][..d]);
            // dxhat = dy * gamma; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
            let (mut m1, mut m2) = (0.0f32, 0.0f32);
            for ((&yv, &hv), &g) in y.iter().zip(h).zip(gamma) {
                m1 += yv * g;
                m2 += yv * g * hv;
            }
            let (m1, m2) = (m1 / d as f32, m2 / d as f32);
            for (((o, &yv), &hv), &g) in out.iter_mut().zip(y).zip(h).zip(gamma) {
                *o = rstd[r] * (yv * g - m1 - hv * m2);
            }
        });
    }
}
