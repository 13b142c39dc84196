//! The device backend of [`Learner`]: the model's parameters, gradients and Adam's moments,
//! its graph views, features and labelled rows all resident on one GPU. A part's exchange calls
//! stage only the rows their footprint names through the host ([`Stager`]). Each phase is
//! timed by CUDA events ([`Learner::mark`]); the loss and hit counts come down as scalars.

use std::borrow::Cow;

use std::sync::Arc;

use graph_partition::{Dataset, Labels};
use ndarray::Array2;

use super::{
    CudaSlice, Device, DeviceBlocks, DeviceGraph, DeviceIndex, DeviceLabels, DeviceModel, GpuError, PartViews,
};
use crate::block::BlockGraphs;
use crate::exchange::Exchange;
use crate::exchange::staging::Stager;
use crate::graph::{AggGraph, GraphDegrees};
use crate::layers::ForwardCtx;
use crate::learner::{BatchInput, LearnError, Learner, Phase, PhaseTimes, State, Traffic, Views};
use crate::model::{Model, ModelConfig};
use crate::objective::Hits;
use crate::optim::Optim;

/// A graph's views on the device: a whole graph, or a worker's part with layer 0's view apart
/// and the stager of its exchange calls.
pub struct DeviceViews {
    rest: DeviceGraph,
    first: Option<DeviceGraph>,
    /// A part's: the host blocks its exchange calls stage rows through.
    stager: Option<Stager>,
}

/// A matrix resident on the device, row-major.
pub struct Resident {
    values: CudaSlice<f32>,
    rows: usize,
}

/// A batch's blocks on the device, with the indices of the resident rows their inputs read.
pub struct PlacedBlocks {
    blocks: DeviceBlocks,
    rows: Option<DeviceIndex>,
}

/// A whole graph on the device for inference: its splits, and its features where they are not
/// the worker's resident matrix.
pub struct DeviceWhole {
    graph: DeviceGraph,
    features: Option<Resident>,
    splits: [DeviceLabels; 3],
}

impl DeviceModel<'_> {
    /// The copy stream, made on first use.
    fn copy(&self) -> Result<&Device, GpuError> {
        if let Some(copy) = self.copy.get() {
            return Ok(copy);
        }
        let copy = self.dev.copy_device()?;
        Ok(self.copy.get_or_init(|| copy))
    }

    /// Takes the gradients brought down back up.
    fn flush_grads(&mut self) -> Result<(), GpuError> {
        match self.host_grads.take() {
            Some(grads) => self.set_grads(&grads),
            None => Ok(()),
        }
    }

    /// `x` uploaded through `dev`, row-major.
    fn upload_matrix(dev: &Device, x: &Array2<f32>) -> Result<Resident, GpuError> {
        Self::upload_padded(dev, x, x.nrows())
    }

    /// `x` uploaded through `dev`, row-major, padded with zero rows to `rows` rows.
    fn upload_padded(dev: &Device, x: &Array2<f32>, rows: usize) -> Result<Resident, GpuError> {
        let x = x.as_standard_layout();
        let values = x.as_slice().unwrap_or_default();
        let values = match x.nrows() < rows {
            true => dev.upload(&[values, &vec![0.0; (rows - x.nrows()) * x.ncols()]].concat())?,
            false => dev.upload(values)?,
        };
        Ok(Resident { values, rows: rows.max(x.nrows()) })
    }

    /// The targets of `rows` of `dataset`'s labels, for logits of a row per vertex.
    fn splits(&self, dataset: &Dataset) -> Result<[DeviceLabels; 3], LearnError> {
        let (n, s) = (dataset.graph.num_rows(), &dataset.splits);
        let target = |rows: &[u32]| self.targets(&dataset.labels, rows, n);
        Ok([target(&s.train)?, target(&s.valid)?, target(&s.test)?])
    }
}

/// The name a phase's events carry; `GAP` for work that counts in no phase.
fn name(phase: Phase) -> &'static str {
    match phase {
        Phase::Forward => "forward",
        Phase::Loss => "loss",
        Phase::Backward => "backward",
        Phase::Optimizer => "optimizer",
        Phase::Eval => "eval",
    }
}

const GAP: &str = "gap";

impl<'d> Learner for DeviceModel<'d> {
    type Graph = DeviceViews;
    type Features<'x> = CudaSlice<f32>;
    type Targets<'t> = DeviceLabels;
    type LogitsGrad = ();
    type Blocks = PlacedBlocks;
    type Resident = Resident;
    type Whole = DeviceWhole;

    fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    fn host(&self) -> Option<&Model> {
        None
    }

    fn graph(&self, views: Views<'_>) -> Result<DeviceViews, LearnError> {
        Ok(match views {
            Views::Whole(graph) => DeviceViews { rest: self.upload_graph(graph)?, first: None, stager: None },
            Views::Part { first, rest, overlapped } => DeviceViews {
                rest: match overlapped {
                    true => self.upload_overlapped_part_graph(rest)?,
                    false => self.upload_part_graph(rest)?,
                },
                first: first.map(|g| self.upload_part_graph(g)).transpose()?,
                stager: Some(Stager::new(rest.num_local())),
            },
            Views::Layers(_) => {
                return Err(LearnError::Unsupported { backend: "a GPU", what: "per-layer sampled views" });
            }
        })
    }

    fn features(&self, x: &Array2<f32>, rows: usize) -> Result<CudaSlice<f32>, LearnError> {
        Ok(Self::upload_padded(self.dev, x, rows)?.values)
    }

    fn targets<'t>(&self, labels: &'t Labels, rows: &'t [u32], logit_rows: usize) -> Result<DeviceLabels, LearnError> {
        Ok(DeviceLabels::upload(self.dev, labels, rows, logit_rows, self.cfg.out_dim)?)
    }

    fn zero_grad(&mut self) -> Result<(), LearnError> {
        self.host_grads = None;
        Ok(DeviceModel::zero_grad(self)?)
    }

    fn forward(
        &mut self,
        graph: &mut DeviceViews,
        x: &CudaSlice<f32>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<(), LearnError> {
        let DeviceViews { rest, first, stager } = graph;
        match stager {
            Some(stager) => self.forward_part(PartViews::of(rest, first.as_ref()), x, ctx, exchange, stager)?,
            None => DeviceModel::forward(self, rest, x, ctx)?,
        }
        Ok(())
    }

    fn loss(&mut self, targets: &mut DeviceLabels, terms: f64) -> Result<(f64, ()), LearnError> {
        Ok((DeviceModel::loss(self, targets, terms as usize)?.loss_sum, ()))
    }

    fn backward(&mut self, graph: &mut DeviceViews, _grad: (), exchange: &mut dyn Exchange) -> Result<(), LearnError> {
        self.flush_grads()?;
        let DeviceViews { rest, first, stager } = graph;
        match stager {
            Some(stager) => self.backward_part(PartViews::of(rest, first.as_ref()), exchange, stager)?,
            None => DeviceModel::backward(self, rest)?,
        }
        Ok(())
    }

    fn hits(&mut self, splits: &mut [DeviceLabels]) -> Result<Vec<Hits>, LearnError> {
        let totals = self.evaluate(splits)?;
        Ok(splits
            .iter()
            .zip(totals)
            .map(|(split, out)| Hits {
                correct: out.correct as u64,
                total: (split.len() * split.terms_per_row()) as u64,
            })
            .collect())
    }

    fn step(&mut self, optimizer: &mut Optim) -> Result<(), LearnError> {
        self.flush_grads()?;
        Ok(DeviceModel::step(self, optimizer)?)
    }

    fn grads_mut(&mut self) -> Result<&mut [f32], LearnError> {
        let grads = match self.host_grads.take() {
            Some(grads) => grads,
            None => DeviceModel::grads(self)?,
        };
        Ok(self.host_grads.insert(grads))
    }

    /// Gradients on the host are checked there; on the device by their sum, one value down.
    /// `false` where a gradient is not finite or the finite ones overflowed the sum: read them
    /// ([`Learner::grads_mut`]) to tell.
    fn grads_finite(&mut self) -> Result<bool, LearnError> {
        Ok(match &self.host_grads {
            Some(grads) => grads.iter().all(|g| g.is_finite()),
            None => self.grads_sum_finite()?,
        })
    }

    fn blocks(&self, blocks: &BlockGraphs, rows: Option<&[u32]>, bound: usize) -> Result<PlacedBlocks, LearnError> {
        let copy = self.copy()?;
        Ok(PlacedBlocks {
            blocks: DeviceBlocks::upload(copy, blocks, self)?,
            rows: rows.map(|r| DeviceIndex::upload(copy, r, bound)).transpose()?,
        })
    }

    fn places_ahead(&self) -> bool {
        true
    }

    fn resident(&self, x: &Array2<f32>) -> Result<Option<Resident>, LearnError> {
        Ok(Some(Self::upload_matrix(self.dev, x)?))
    }

    fn forward_blocks(
        &mut self,
        placed: &PlacedBlocks,
        _blocks: &BlockGraphs,
        input: BatchInput<'_, Resident>,
        ctx: ForwardCtx,
    ) -> Result<(), LearnError> {
        let (dev, in_dim) = (self.dev, self.cfg.in_dim);
        let x = match input {
            BatchInput::Rows(rows) => Self::upload_matrix(self.copy()?, rows)?.values,
            BatchInput::Held { resident: Some(x), ids, .. } => match &placed.rows {
                Some(index) => dev.gather_rows_at(in_dim, index, &x.values, x.rows)?,
                None => dev.gather_rows(in_dim, ids, &x.values, x.rows)?,
            },
            BatchInput::Held { host, resident: None, ids } => {
                let x = Self::upload_matrix(dev, host)?;
                dev.gather_rows(in_dim, ids, &x.values, x.rows)?
            }
            BatchInput::Resident { resident, ids } => dev.gather_rows(in_dim, ids, &resident.values, resident.rows)?,
            // The resident columns gathered on the device; only the others go up.
            BatchInput::Around { rows, resident, ids, keep } => {
                let mut x = dev.gather_rows(in_dim, ids, &resident.values, resident.rows)?;
                let rows = rows.as_standard_layout();
                let mut others = Vec::with_capacity(rows.nrows() * (in_dim - keep.len()));
                for row in rows.as_slice().unwrap_or_default().chunks_exact(in_dim) {
                    others.extend_from_slice(&row[..keep.start]);
                    others.extend_from_slice(&row[keep.end..]);
                }
                let others = self.copy()?.upload(&others)?;
                dev.put_columns_around(rows.nrows(), in_dim, keep, &others, &mut x)?;
                x
            }
        };
        // Assembling the input counts in no phase.
        if let Some(clock) = self.clock.as_mut() {
            clock.mark(GAP)?;
        }
        Ok(DeviceModel::forward_blocks(self, &placed.blocks, &x, ctx)?)
    }

    fn backward_blocks(&mut self, placed: &PlacedBlocks, _blocks: &BlockGraphs, _grad: ()) -> Result<(), LearnError> {
        self.flush_grads()?;
        Ok(DeviceModel::backward_blocks(self, &placed.blocks)?)
    }

    fn whole(&self, dataset: &Dataset, features: bool) -> Result<DeviceWhole, LearnError> {
        let whole = AggGraph::single_shared(Arc::clone(&dataset.graph))?;
        Ok(DeviceWhole {
            graph: self.upload_graph(&whole)?,
            features: features.then(|| Self::upload_matrix(self.dev, &dataset.features)).transpose()?,
            splits: self.splits(dataset)?,
        })
    }

    fn infer(
        &mut self,
        whole: &mut DeviceWhole,
        _dataset: &Dataset,
        _degrees: &GraphDegrees,
        x: Option<&Resident>,
        _batch: usize,
    ) -> Result<[Hits; 3], LearnError> {
        let x = whole.features.as_ref().or(x).ok_or(LearnError::Unsupported {
            backend: "a GPU",
            what: "inference without the graph's features on the device",
        })?;
        DeviceModel::forward(self, &whole.graph, &x.values, ForwardCtx::eval())?;
        let hits = self.hits(&mut whole.splits)?;
        Ok([hits[0], hits[1], hits[2]])
    }

    fn params(&self) -> Result<Cow<'_, [f32]>, LearnError> {
        Ok(Cow::Owned(DeviceModel::params(self)?))
    }

    fn set_params(&mut self, params: &[f32]) -> Result<(), LearnError> {
        Ok(DeviceModel::set_params(self, params)?)
    }

    /// Downloaded into the CPU model's flat layout: what a CPU worker's checkpoint holds (SGD:
    /// its momentum buffer in `m`, `v` empty).
    fn state(&self, optimizer: &Optim) -> Result<State, LearnError> {
        let (m, mut v, t) = self.moments()?;
        if matches!(optimizer, Optim::Sgd(_)) {
            v.clear();
        }
        Ok(State { params: DeviceModel::params(self)?, m, v, t })
    }

    fn restore(&mut self, _optimizer: &mut Optim, state: State) -> Result<(), LearnError> {
        Ok(self.set_state(&state.params, &state.m, &state.v, state.t)?)
    }

    fn begin(&mut self) -> Result<(), LearnError> {
        match self.clock.as_mut() {
            Some(clock) => clock.mark(GAP)?,
            None => self.clock = Some(self.dev.clock()?),
        }
        Ok(())
    }

    fn mark(&mut self, phase: Phase) -> Result<(), LearnError> {
        match self.clock.as_mut() {
            Some(clock) => clock.mark(name(phase))?,
            None => {
                // Nothing began: the phase runs from here, empty.
                let mut clock = self.dev.clock()?;
                clock.mark(name(phase))?;
                self.clock = Some(clock);
            }
        }
        Ok(())
    }

    fn read_phases(&mut self) -> Result<Option<PhaseTimes>, LearnError> {
        let mut times = PhaseTimes::default();
        if let Some(clock) = self.clock.take() {
            for (phase, seconds) in clock.read()? {
                let phase = [Phase::Forward, Phase::Loss, Phase::Backward, Phase::Optimizer, Phase::Eval]
                    .into_iter()
                    .find(|&p| name(p) == phase);
                if let Some(phase) = phase {
                    times.add(phase, seconds);
                }
            }
        }
        times.exchange_s = self.dev.take_exchange_s()?;
        Ok(Some(times))
    }

    /// Both streams' transfers.
    fn traffic(&mut self, graph: Option<&mut DeviceViews>) -> Option<Traffic> {
        let now = self.dev.transfers();
        let moved = now.since(self.transfers);
        self.transfers = now;
        let copied = match self.copy.get() {
            Some(copy) => {
                let now = copy.transfers();
                now.since(std::mem::replace(&mut self.copy_transfers, now))
            }
            None => Default::default(),
        };
        let staged = graph.and_then(|g| g.stager.as_mut()).map(Stager::take_bytes).unwrap_or_default();
        Some(Traffic {
            host_to_device: moved.host_to_device + copied.host_to_device,
            device_to_host: moved.device_to_host + copied.device_to_host,
            staged_down: staged.down,
            staged_up: staged.up,
        })
    }

    fn joined(&self) -> bool {
        self.dev.joined()
    }

    fn sum_grads_on_peers(&mut self, phase: &str) -> Result<usize, LearnError> {
        self.flush_grads()?;
        let mut flat = self.grads_on_device()?;
        self.dev.sum_on_peers(phase, &mut flat)?;
        self.set_grads_on_device(&flat)?;
        Ok(flat.len())
    }
}
