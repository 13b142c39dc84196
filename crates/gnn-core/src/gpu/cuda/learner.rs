//! The device backend of [`Learner`]: the model's parameters, gradients and Adam's moments,
//! its graph views, features and labelled rows all resident on one GPU. A part's exchange calls
//! stage only the rows their footprint names through the host ([`Stager`]). Each phase is
//! timed by CUDA events ([`Learner::mark`]); the loss and hit counts come down as scalars.

use std::borrow::Cow;

use graph_partition::Labels;
use ndarray::Array2;

use super::{CudaSlice, DeviceGraph, DeviceLabels, DeviceModel, PartViews};
use crate::exchange::Exchange;
use crate::exchange::staging::Stager;
use crate::layers::ForwardCtx;
use crate::learner::{LearnError, Learner, Phase, PhaseTimes, State, Traffic, Views};
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

    fn features<'x>(&self, x: &'x Array2<f32>, rows: usize) -> Result<CudaSlice<f32>, LearnError> {
        let x = x.as_standard_layout();
        let values = x.as_slice().unwrap_or_default();
        let padded;
        let values = match x.nrows() < rows {
            true => {
                padded = [values, &vec![0.0; (rows - x.nrows()) * x.ncols()]].concat();
                &padded[..]
            }
            false => values,
        };
        Ok(self.dev.upload(values)?)
    }

    fn targets<'t>(&self, labels: &'t Labels, rows: &'t [u32], logit_rows: usize) -> Result<DeviceLabels, LearnError> {
        Ok(DeviceLabels::upload(self.dev, labels, rows, logit_rows, self.cfg.out_dim)?)
    }

    fn zero_grad(&mut self) -> Result<(), LearnError> {
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
        Ok(DeviceModel::step(self, optimizer)?)
    }

    fn with_grads<R>(&mut self, f: impl FnOnce(&mut [f32]) -> R) -> Result<R, LearnError> {
        let mut grads = DeviceModel::grads(self)?;
        let out = f(&mut grads);
        self.set_grads(&grads)?;
        Ok(out)
    }

    fn grads(&self) -> Result<Cow<'_, [f32]>, LearnError> {
        Ok(Cow::Owned(DeviceModel::grads(self)?))
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

    fn traffic(&mut self, graph: &mut DeviceViews) -> Option<Traffic> {
        let now = self.dev.transfers();
        let moved = now.since(self.transfers);
        self.transfers = now;
        let staged = graph.stager.as_mut().map(Stager::take_bytes).unwrap_or_default();
        Some(Traffic {
            host_to_device: moved.host_to_device,
            device_to_host: moved.device_to_host,
            staged_down: staged.down,
            staged_up: staged.up,
        })
    }

    fn joined(&self) -> bool {
        self.dev.joined()
    }

    fn sum_grads_on_peers(&mut self, phase: &str) -> Result<usize, LearnError> {
        let mut flat = self.grads_on_device()?;
        self.dev.sum_on_peers(phase, &mut flat)?;
        self.set_grads_on_device(&flat)?;
        Ok(flat.len())
    }
}
