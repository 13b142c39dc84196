//! Element-wise activations, applied in place. Backward passes read the activation's *output*
//! (all three are invertible enough for that), so no input copy is kept.

use ndarray::{ArrayBase, Data, DataMut, Ix2};
use serde::{Deserialize, Serialize};

use crate::dense::{par_rows_mut, slice};

/// An element-wise non-linearity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `max(x, 0)`.
    Relu,
    /// `x` for `x > 0`, else `alpha * (exp(x) - 1)`; `alpha > 0`.
    Elu { alpha: f32 },
    /// `x` for `x > 0`, else `slope * x`; `slope > 0`.
    LeakyRelu { slope: f32 },
}

impl Activation {
    /// Applies the activation to one value.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::Elu { alpha } => {
                if x > 0.0 {
                    x
                } else {
                    alpha * x.exp_m1()
                }
            }
            Activation::LeakyRelu { slope } => {
                if x > 0.0 {
                    x
                } else {
                    slope * x
                }
            }
        }
    }

    /// Derivative expressed through the output `y = apply(x)`.
    #[inline]
    pub fn derivative_from_output(self, y: f32) -> f32 {
        match self {
            Activation::Relu => {
                if y > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            // y = alpha (e^x - 1)  =>  dy/dx = alpha e^x = y + alpha.
            Activation::Elu { alpha } => {
                if y > 0.0 {
                    1.0
                } else {
                    y + alpha
                }
            }
            Activation::LeakyRelu { slope } => {
                if y > 0.0 {
                    1.0
                } else {
                    slope
                }
            }
        }
    }

    /// Whether an output of zero has a zero derivative (ReLU). A dropout after the activation
    /// then needs no mask in backward: a dropped output is zero, and
    /// [`Activation::backward_in_place`] with `grad_scale` the dropout's scale is the adjoint of
    /// both.
    pub fn zero_output_has_zero_derivative(self) -> bool {
        matches!(self, Activation::Relu)
    }

    /// `x <- act(x)` in place.
    pub fn forward_in_place<S: DataMut<Elem = f32>>(self, x: &mut ArrayBase<S, Ix2>) {
        par_rows_mut(x, |_, row| row.iter_mut().for_each(|v| *v = self.apply(*v)));
    }

    /// `grad <- grad * (act'(x) * grad_scale)` in place, given `out = out_scale * act(x)`
    /// wherever `grad` is non-zero (dropout after the activation scales kept outputs by
    /// `out_scale` and zeroes both the output and the gradient of dropped ones, so the saved
    /// dropped output serves). Under [`Activation::zero_output_has_zero_derivative`], `grad`
    /// may instead be the undropped gradient with `grad_scale` the dropout's scale: the dropped
    /// outputs are zero, so their derivative zeroes their gradient, and the kept ones are
    /// scaled, as the dropout's own adjoint would.
    ///
    /// # Panics
    /// If the shapes differ.
    pub fn backward_in_place<S: DataMut<Elem = f32>, T: Data<Elem = f32>>(
        self,
        grad: &mut ArrayBase<S, Ix2>,
        out: &ArrayBase<T, Ix2>,
        out_scale: f32,
        grad_scale: f32,
    ) {
        assert_eq!(grad.dim(), out.dim(), "activation backward shapes");
        let width = out.ncols();
        let out = slice(out);
        let inv = out_scale.recip();
        par_rows_mut(grad, |r, g| {
            for (gv, &y) in g.iter_mut().zip(&out[r * width..][..width]) {
                *gv *= self.derivative_from_output(y * inv) * grad_scale;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    const ALL: [Activation; 3] =
        [Activation::Relu, Activation::Elu { alpha: 1.0 }, Activation::LeakyRelu { slope: 0.2 }];

    #[test]
    fn derivative_from_output_matches_finite_differences() {
        for act in ALL {
            for i in -20..20 {
                let x = i as f64 * 0.173 + 0.05; // never exactly at the kink
                let eps = 1e-4;
                let fd = (act.apply((x + eps) as f32) as f64 - act.apply((x - eps) as f32) as f64) / (2.0 * eps);
                let an = act.derivative_from_output(act.apply(x as f32)) as f64;
                assert!((fd - an).abs() < 2e-2 * (1.0 + an.abs()), "{act:?} at {x}: fd {fd} vs {an}");
            }
        }
    }

    #[test]
    fn backward_reads_scaled_output() {
        for act in ALL {
            let x = Array2::from_shape_fn((3, 4), |(i, j)| (i as f32 - 1.0) * 0.7 + j as f32 * 0.3 - 0.4);
            let mut y = x.clone();
            act.forward_in_place(&mut y);
            let scaled = y.mapv(|v| v * 2.5);
            let mut g = Array2::from_elem((3, 4), 1.0f32);
            act.backward_in_place(&mut g, &scaled, 2.5, 1.0);
            for (gv, xv) in g.iter().zip(x.iter()) {
                let want = act.derivative_from_output(act.apply(*xv));
                assert!((gv - want).abs() < 1e-6, "{act:?}");
            }
        }
    }

    #[test]
    fn relu_backward_through_dropout_needs_no_mask() {
        use crate::dropout::DropoutSite;
        let site = DropoutSite::new(0.5, 2, 3, 1);
        let ids = [4, 9, 1];
        let x = Array2::from_shape_fn((3, 37), |(i, j)| (i as f32 - 1.0) * 0.7 + j as f32 * 0.05 - 0.9);
        let mut out = x.clone();
        site.apply_rows_after(&mut out, &ids, |v| Activation::Relu.apply(v));
        let g = Array2::from_shape_fn((3, 37), |(i, j)| ((i * 5 + j) % 11) as f32 - 5.0);
        // The mask drawn again, then the derivative.
        let mut masked = g.clone();
        site.apply_rows(&mut masked, &ids);
        Activation::Relu.backward_in_place(&mut masked, &out, site.scale(), 1.0);
        // No mask: the dropped outputs are zero.
        let mut unmasked = g.clone();
        assert!(Activation::Relu.zero_output_has_zero_derivative());
        Activation::Relu.backward_in_place(&mut unmasked, &out, site.scale(), site.scale());
        let bits = |a: &Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&masked), bits(&unmasked));
        assert!(masked.iter().any(|&v| v != 0.0) && masked.iter().any(|&v| v == 0.0));
    }

    #[test]
    fn serde_names() {
        let s = serde_json::to_string(&Activation::LeakyRelu { slope: 0.2 }).unwrap();
        assert_eq!(s, r#"{"leaky_relu":{"slope":0.2}}"#);
        let a: Activation = serde_json::from_str(r#""relu""#).unwrap();
        assert_eq!(a, Activation::Relu);
    }
}
