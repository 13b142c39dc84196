//! Optimizers over the flat parameter and gradient buffers, matching PyTorch's update rules
//! exactly (sequential, element by element, so deterministic).
//!
//! Weight decay: [`Adam`] with `decoupled == false` is `torch.optim.Adam` (L2 penalty coupled
//! into the gradient: `g += wd * w`), with `decoupled == true` it is `torch.optim.AdamW`
//! (`w *= 1 - lr * wd` before the step). [`Sgd`] couples it into the gradient, like
//! `torch.optim.SGD`. [`Optim`] is either, chosen at run time.

use serde::{Deserialize, Serialize};

/// Why a step was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptimError {
    #[error("{what} has {got} values, expected {expected} (one per parameter)")]
    Length { what: &'static str, got: usize, expected: usize },
}

/// A first-order optimizer over one flat parameter buffer.
pub trait Optimizer {
    /// Updates `params` in place from `grads` (same length; the same length on every call).
    fn step(&mut self, params: &mut [f32], grads: &[f32]) -> Result<(), OptimError>;

    fn learning_rate(&self) -> f32;

    /// Changes the learning rate for later steps (schedules, linear scaling with workers).
    fn set_learning_rate(&mut self, lr: f32);
}

/// Checks lengths and sizes the state on the first step.
fn prepare(state: &mut [&mut Vec<f32>], params: &[f32], grads: &[f32]) -> Result<(), OptimError> {
    let n = params.len();
    if grads.len() != n {
        return Err(OptimError::Length { what: "gradient buffer", got: grads.len(), expected: n });
    }
    for s in state.iter_mut() {
        if s.is_empty() {
            s.resize(n, 0.0);
        } else if s.len() != n {
            return Err(OptimError::Length { what: "parameter buffer (optimizer state)", got: n, expected: s.len() });
        }
    }
    Ok(())
}

/// Adam / AdamW (see the module docs for the weight-decay variants).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adam {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    /// `true`: AdamW's decoupled decay; `false`: L2 added to the gradient (torch `Adam`).
    pub decoupled: bool,
    m: Vec<f32>,
    v: Vec<f32>,
    t: u64,
}

impl Adam {
    /// `torch.optim.Adam(lr, weight_decay)` defaults: betas (0.9, 0.999), eps 1e-8, coupled L2.
    pub fn new(lr: f32, weight_decay: f32) -> Self {
        Self {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
            decoupled: false,
            m: Vec::new(),
            v: Vec::new(),
            t: 0,
        }
    }

    /// `torch.optim.AdamW(lr, weight_decay)`: as [`Adam::new`] with decoupled decay.
    pub fn adamw(lr: f32, weight_decay: f32) -> Self {
        Self { decoupled: true, ..Self::new(lr, weight_decay) }
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// The first and second moments and the step count: what a checkpoint keeps.
    pub fn moments(&self) -> (&[f32], &[f32], u64) {
        (&self.m, &self.v, self.t)
    }

    /// Puts back moments and a step count [`Adam::moments`] returned (the next step checks
    /// their length against the parameters).
    pub fn set_moments(&mut self, m: Vec<f32>, v: Vec<f32>, t: u64) {
        (self.m, self.v, self.t) = (m, v, t);
    }

    /// The scalars of step `t` (1-based) of this rule, shared by [`Adam::step`] and the
    /// device's `adam_step` kernel so both update from the same rounded values.
    pub fn step_scalars(&self, t: u64) -> AdamScalars {
        let t = i32::try_from(t).unwrap_or(i32::MAX);
        let (coupled, shrink) =
            if self.decoupled { (0.0, 1.0 - self.lr * self.weight_decay) } else { (self.weight_decay, 1.0) };
        AdamScalars {
            coupled,
            shrink,
            step_size: self.lr / (1.0 - self.beta1.powi(t)),
            bc2_sqrt: (1.0 - self.beta2.powi(t)).sqrt(),
        }
    }
}

/// One Adam step's scalars: `g += coupled * p; p *= shrink;` then the moment updates and
/// `p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamScalars {
    /// Coupled L2 weight (torch `Adam`; 0 for AdamW).
    pub coupled: f32,
    /// Decoupled decay factor `1 - lr * wd` (AdamW; 1 for Adam).
    pub shrink: f32,
    /// `lr / (1 - beta1^t)`.
    pub step_size: f32,
    /// `sqrt(1 - beta2^t)`.
    pub bc2_sqrt: f32,
}

impl Optimizer for Adam {
    fn step(&mut self, params: &mut [f32], grads: &[f32]) -> Result<(), OptimError> {
        prepare(&mut [&mut self.m, &mut self.v], params, grads)?;
        self.t += 1;
        let AdamScalars { coupled, shrink, step_size, bc2_sqrt } = self.step_scalars(self.t);
        for (((p, &g), m), v) in params.iter_mut().zip(grads).zip(&mut self.m).zip(&mut self.v) {
            let g = g + coupled * *p;
            *p *= shrink;
            *m += (1.0 - self.beta1) * (g - *m);
            *v = self.beta2 * *v + (1.0 - self.beta2) * g * g;
            *p -= step_size * *m / (v.sqrt() / bc2_sqrt + self.eps);
        }
        Ok(())
    }

    fn learning_rate(&self) -> f32 {
        self.lr
    }

    fn set_learning_rate(&mut self, lr: f32) {
        self.lr = lr;
    }
}

/// SGD with momentum (heavy-ball, or Nesterov's) and coupled weight decay, as
/// `torch.optim.SGD` with `dampening = 0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sgd {
    pub lr: f32,
    pub momentum: f32,
    /// Nesterov's momentum: the step follows `g + momentum * buf` instead of `buf`.
    pub nesterov: bool,
    pub weight_decay: f32,
    buf: Vec<f32>,
    t: u64,
}

impl Sgd {
    /// `torch.optim.SGD(lr, momentum, weight_decay=weight_decay)` (heavy-ball momentum).
    pub fn new(lr: f32, momentum: f32, weight_decay: f32) -> Self {
        Self { lr, momentum, nesterov: false, weight_decay, buf: Vec::new(), t: 0 }
    }

    /// As [`Sgd::new`] with `nesterov=True`.
    pub fn nesterov(lr: f32, momentum: f32, weight_decay: f32) -> Self {
        Self { nesterov: true, ..Self::new(lr, momentum, weight_decay) }
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// The momentum buffer and the step count: what a checkpoint keeps.
    pub fn state(&self) -> (&[f32], u64) {
        (&self.buf, self.t)
    }

    /// Puts back a buffer and step count [`Sgd::state`] returned.
    pub fn set_state(&mut self, buf: Vec<f32>, t: u64) {
        (self.buf, self.t) = (buf, t);
    }
}

impl Optimizer for Sgd {
    fn step(&mut self, params: &mut [f32], grads: &[f32]) -> Result<(), OptimError> {
        prepare(&mut [&mut self.buf], params, grads)?;
        let first = self.t == 0;
        self.t += 1;
        let (momentum, nesterov) = (self.momentum, self.nesterov);
        for ((p, &g), b) in params.iter_mut().zip(grads).zip(&mut self.buf) {
            let g = g + self.weight_decay * *p;
            let d = if momentum == 0.0 {
                g
            } else {
                // torch starts the momentum buffer at the first gradient itself.
                *b = if first { g } else { momentum * *b + g };
                if nesterov { g + momentum * *b } else { *b }
            };
            *p -= self.lr * d;
        }
        Ok(())
    }

    fn learning_rate(&self) -> f32 {
        self.lr
    }

    fn set_learning_rate(&mut self, lr: f32) {
        self.lr = lr;
    }
}

/// An optimizer chosen at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Optim {
    Adam(Adam),
    Sgd(Sgd),
}

impl Optim {
    /// The optimizer's state as a checkpoint keeps it: Adam's first and second moments and
    /// step count; SGD's momentum buffer (as the first), no second, and its step count.
    pub fn state(&self) -> (&[f32], &[f32], u64) {
        match self {
            Optim::Adam(adam) => adam.moments(),
            Optim::Sgd(sgd) => {
                let (buf, t) = sgd.state();
                (buf, &[], t)
            }
        }
    }

    /// Puts back what [`Optim::state`] returned (SGD takes no second vector).
    pub fn set_state(&mut self, first: Vec<f32>, second: Vec<f32>, t: u64) -> Result<(), OptimError> {
        match self {
            Optim::Adam(_) if first.len() != second.len() => {
                return Err(OptimError::Length {
                    what: "Adam's second moment",
                    got: second.len(),
                    expected: first.len(),
                });
            }
            Optim::Adam(adam) => adam.set_moments(first, second, t),
            Optim::Sgd(_) if !second.is_empty() => {
                return Err(OptimError::Length { what: "SGD's second state vector", got: second.len(), expected: 0 });
            }
            Optim::Sgd(sgd) => sgd.set_state(first, t),
        }
        Ok(())
    }

    /// The Adam inside, for the device path, whose kernels step Adam only.
    pub fn adam(&self) -> Option<&Adam> {
        match self {
            Optim::Adam(adam) => Some(adam),
            Optim::Sgd(_) => None,
        }
    }
}

impl Optimizer for Optim {
    fn step(&mut self, params: &mut [f32], grads: &[f32]) -> Result<(), OptimError> {
        match self {
            Optim::Adam(adam) => adam.step(params, grads),
            Optim::Sgd(sgd) => sgd.step(params, grads),
        }
    }

    fn learning_rate(&self) -> f32 {
        match self {
            Optim::Adam(adam) => adam.learning_rate(),
            Optim::Sgd(sgd) => sgd.learning_rate(),
        }
    }

    fn set_learning_rate(&mut self, lr: f32) {
        match self {
            Optim::Adam(adam) => adam.set_learning_rate(lr),
            Optim::Sgd(sgd) => sgd.set_learning_rate(lr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three steps on p = [1, -2] with gradients g_t = [0.5, 0.25] * t; the references below
    /// write PyTorch's documented update rules out in f64.
    fn run(opt: &mut dyn Optimizer) -> Vec<f32> {
        let mut p = vec![1.0f32, -2.0];
        for t in 1..=3 {
            let g = [0.5 * t as f32, 0.25 * t as f32];
            opt.step(&mut p, &g).unwrap();
        }
        p
    }

    fn adam_reference(wd: f64, decoupled: bool) -> Vec<f64> {
        let (lr, b1, b2, eps) = (0.1f64, 0.9f64, 0.999f64, 1e-8f64);
        let mut p = [1.0f64, -2.0];
        let (mut m, mut v) = ([0.0f64; 2], [0.0f64; 2]);
        for t in 1..=3 {
            for i in 0..2 {
                let mut g = [0.5, 0.25][i] * t as f64;
                if decoupled {
                    p[i] *= 1.0 - lr * wd;
                } else {
                    g += wd * p[i];
                }
                m[i] = b1 * m[i] + (1.0 - b1) * g;
                v[i] = b2 * v[i] + (1.0 - b2) * g * g;
                let mhat = m[i] / (1.0 - b1.powi(t));
                let vhat = v[i] / (1.0 - b2.powi(t));
                p[i] -= lr * mhat / (vhat.sqrt() + eps);
            }
        }
        p.to_vec()
    }

    #[test]
    fn adam_coupled_and_decoupled_match_reference() {
        for decoupled in [false, true] {
            let mut opt = if decoupled { Adam::adamw(0.1, 0.3) } else { Adam::new(0.1, 0.3) };
            let got = run(&mut opt);
            for (g, w) in got.iter().zip(adam_reference(0.3, decoupled)) {
                assert!((f64::from(*g) - w).abs() < 1e-5, "decoupled={decoupled}: {g} vs {w}");
            }
            assert_eq!(opt.steps(), 3);
        }
    }

    #[test]
    fn sgd_momentum_matches_reference() {
        let mut opt = Sgd::new(0.1, 0.9, 0.01);
        let got = run(&mut opt);
        let mut p = [1.0f64, -2.0];
        let mut buf = [0.0f64; 2];
        for t in 1..=3 {
            for i in 0..2 {
                let g = [0.5, 0.25][i] * t as f64 + 0.01 * p[i];
                buf[i] = if t == 1 { g } else { 0.9 * buf[i] + g };
                p[i] -= 0.1 * buf[i];
            }
        }
        for (g, w) in got.iter().zip(p) {
            assert!((f64::from(*g) - w).abs() < 1e-6);
        }
    }

    /// torch's SGD update rules, written out in f64: plain (momentum 0), heavy-ball and
    /// Nesterov, with coupled weight decay.
    fn sgd_reference(momentum: f64, nesterov: bool) -> Vec<f64> {
        let (lr, wd) = (0.1f64, 0.01f64);
        let mut p = [1.0f64, -2.0];
        let mut buf = [0.0f64; 2];
        for t in 1..=3 {
            for i in 0..2 {
                let g = [0.5, 0.25][i] * t as f64 + wd * p[i];
                let d = if momentum == 0.0 {
                    g
                } else {
                    buf[i] = if t == 1 { g } else { momentum * buf[i] + g };
                    if nesterov { g + momentum * buf[i] } else { buf[i] }
                };
                p[i] -= lr * d;
            }
        }
        p.to_vec()
    }

    #[test]
    fn sgd_plain_heavy_ball_and_nesterov_match_reference() {
        for (momentum, nesterov) in [(0.0, false), (0.9, false), (0.9, true)] {
            let mut opt = if nesterov { Sgd::nesterov(0.1, 0.9, 0.01) } else { Sgd::new(0.1, momentum, 0.01) };
            let got = run(&mut opt);
            for (g, w) in got.iter().zip(sgd_reference(f64::from(momentum), nesterov)) {
                assert!((f64::from(*g) - w).abs() < 1e-6, "momentum {momentum} nesterov {nesterov}: {g} vs {w}");
            }
            assert_eq!(opt.steps(), 3);
        }
    }

    /// Stopping after a step, keeping the state and going on in a fresh optimizer gives the
    /// bits of an uninterrupted run, for either optimizer.
    #[test]
    fn state_round_trips_through_a_restart() {
        for fresh in [|| Optim::Adam(Adam::new(0.1, 0.01)), || Optim::Sgd(Sgd::nesterov(0.1, 0.9, 0.01))] {
            let mut whole = fresh();
            let whole_params = run(&mut whole);
            let mut first = fresh();
            let mut p = vec![1.0f32, -2.0];
            first.step(&mut p, &[0.5, 0.25]).unwrap();
            let (a, b, t) = first.state();
            let mut resumed = fresh();
            resumed.set_state(a.to_vec(), b.to_vec(), t).unwrap();
            for t in 2..=3 {
                resumed.step(&mut p, &[0.5 * t as f32, 0.25 * t as f32]).unwrap();
            }
            assert_eq!(p, whole_params);
            assert_eq!(resumed.state(), whole.state());
        }
        let mut sgd = Optim::Sgd(Sgd::new(0.1, 0.9, 0.0));
        assert!(sgd.set_state(vec![0.0; 2], vec![0.0; 2], 1).is_err(), "SGD keeps one vector");
        let mut adam = Optim::Adam(Adam::new(0.1, 0.0));
        assert!(adam.set_state(vec![0.0; 2], vec![], 1).is_err(), "Adam keeps two of one length");
    }

    #[test]
    fn length_mismatch_is_an_error() {
        let mut opt = Adam::new(0.01, 0.0);
        let mut p = vec![0.0f32; 3];
        assert_eq!(
            opt.step(&mut p, &[0.0; 2]),
            Err(OptimError::Length { what: "gradient buffer", got: 2, expected: 3 })
        );
        opt.step(&mut p, &[0.0; 3]).unwrap();
        let mut q = vec![0.0f32; 4];
        assert!(opt.step(&mut q, &[0.0; 4]).is_err());
        opt.set_learning_rate(0.5);
        assert_eq!(opt.learning_rate(), 0.5);
    }
}
