//! All parameters of a model live in one flat `Vec<f32>` (and their gradients in another of the
//! same layout), so a distributed trainer all-reduces gradients in a single call and an optimizer
//! steps over one slice. Layers address their tensors through [`ParamSlot`]s.

use graph_partition::rng::SplitMix64;
use ndarray::{ArrayView2, ArrayViewMut2};
use serde::{Deserialize, Serialize};

/// How a parameter tensor is initialised.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    /// Glorot/Xavier uniform, `U(-b, b)` with `b = sqrt(6 / (rows + cols))` (PyG's `glorot`).
    Glorot,
    /// `U(-bound, bound)` (PyTorch `Linear`'s default is `bound = 1/sqrt(fan_in)`).
    Uniform {
        bound: f32,
    },
    Zeros,
    Ones,
}

/// A `rows x cols` row-major tensor at `offset` in the flat parameter (and gradient) buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSlot {
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
}

impl ParamSlot {
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len()
    }

    /// This tensor's values in a flat buffer.
    pub fn slice<'a>(&self, flat: &'a [f32]) -> &'a [f32] {
        &flat[self.range()]
    }

    /// Mutable counterpart of [`ParamSlot::slice`].
    pub fn slice_mut<'a>(&self, flat: &'a mut [f32]) -> &'a mut [f32] {
        &mut flat[self.range()]
    }

    /// This tensor as a matrix view.
    pub fn view<'a>(&self, flat: &'a [f32]) -> ArrayView2<'a, f32> {
        ArrayView2::from_shape((self.rows, self.cols), self.slice(flat)).expect("slot length is rows * cols")
    }

    /// Mutable counterpart of [`ParamSlot::view`].
    pub fn view_mut<'a>(&self, flat: &'a mut [f32]) -> ArrayViewMut2<'a, f32> {
        ArrayViewMut2::from_shape((self.rows, self.cols), self.slice_mut(flat)).expect("slot length is rows * cols")
    }
}

/// Name, place and initialiser of one parameter tensor (names look like `conv1.weight`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamInfo {
    pub name: String,
    pub slot: ParamSlot,
    pub init: Init,
}

/// Hands out consecutive slots of a flat buffer while layers are built.
#[derive(Debug, Clone, Default)]
pub struct ParamLayout {
    infos: Vec<ParamInfo>,
    len: usize,
}

impl ParamLayout {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves a `rows x cols` tensor after the previous ones.
    pub fn add(&mut self, name: impl Into<String>, rows: usize, cols: usize, init: Init) -> ParamSlot {
        let slot = ParamSlot { offset: self.len, rows, cols };
        self.len += slot.len();
        self.infos.push(ParamInfo { name: name.into(), slot, init });
        slot
    }

    /// Total number of parameters.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn infos(&self) -> &[ParamInfo] {
        &self.infos
    }

    /// Initial values: tensors in layout order, elements row-major, all drawn from one
    /// `SplitMix64` stream seeded with `seed` (identical on every worker).
    pub fn init_values(&self, seed: u64) -> Vec<f32> {
        let mut rng = SplitMix64::new(seed);
        let mut values = Vec::with_capacity(self.len);
        for info in &self.infos {
            let ParamSlot { rows, cols, .. } = info.slot;
            let bound = match info.init {
                Init::Glorot => (6.0 / (rows + cols) as f64).sqrt(),
                Init::Uniform { bound } => f64::from(bound),
                Init::Zeros | Init::Ones => 0.0,
            };
            values.extend((0..info.slot.len()).map(|_| match info.init {
                Init::Zeros => 0.0,
                Init::Ones => 1.0,
                Init::Glorot | Init::Uniform { .. } => ((2.0 * rng.next_f64() - 1.0) * bound) as f32,
            }));
        }
        values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_init() {
        let mut layout = ParamLayout::new();
        let w = layout.add("w", 30, 20, Init::Glorot);
        let b = layout.add("b", 1, 20, Init::Zeros);
        let g = layout.add("g", 1, 4, Init::Ones);
        assert_eq!((w.offset, b.offset, g.offset, layout.len()), (0, 600, 620, 624));
        let v = layout.init_values(5);
        let bound = (6.0f32 / 50.0).sqrt();
        assert!(w.slice(&v).iter().all(|x| x.abs() <= bound));
        let mean_abs = w.slice(&v).iter().map(|x| x.abs()).sum::<f32>() / 600.0;
        assert!((mean_abs - bound / 2.0).abs() < 0.05 * bound, "uniform mean |x| = b/2");
        assert!(b.slice(&v).iter().all(|&x| x == 0.0));
        assert!(g.slice(&v).iter().all(|&x| x == 1.0));
        assert_eq!(v, layout.init_values(5));
        assert_ne!(v, layout.init_values(6));
        assert_eq!(w.view(&v)[[1, 2]], v[22]);
    }
}
