//! `ecgraph`: distributed full-batch edge-cut training whose forward halo rows travel through
//! bucket compression with ReqEC-FP and whose backward halo gradients travel through bucket
//! compression with ResEC-BP (`cache_quant::codec::ecgraph`), each part switchable, whose
//! forward widths follow the bit tuner (Alg. 3, [`BitTuner`]), and whose workers fetch their
//! halo rows' input features once at setup (the halo feature cache, [`HaloFeatures::Cached`]),
//! so that layer 0 exchanges nothing.

pub(crate) mod rules;
pub(crate) mod settings;

use std::sync::Arc;

use cache_quant::codec::ecgraph::{Compression, EcGraphCodecs, SelectorTally};
use cache_quant::{Knob, StateError, StateReader, StatsTable};
use graph_partition::book::CutKind;
use serde_json::{Value, json};

use super::{BatchSource, ControlCtx, Controller, DataPlan, ExchangeStack, HaloFeatures, MethodDef, Parts};
use crate::config::{EcgraphSettings, TrainConfig};
use crate::error::TrainError;

/// Ledger phase of the tuner's all-reduce (outside every step's counts).
const PHASE: &str = "ecgraph/tune";

/// Selector counts per layer: full, compressed, predicted, average.
const WAYS: [&str; 4] = ["full", "compressed", "predicted", "average"];

/// The `ecgraph` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "ecgraph"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        // With fanouts (no batch size): EC-Graph-S, every layer on in-edges sampled per epoch,
        // through the same exchange.
        let mut parts =
            Parts { batches: BatchSource::from_config(config), ..Parts::exact(DataPlan::Cut(CutKind::EdgeCut)) };
        if config.method.ecgraph.halo_cache {
            parts.halo_features = HaloFeatures::Cached;
        }
        let (settings, layers) = (config.method.ecgraph.clone(), config.layers);
        parts.exchange = Some(Arc::new(move || {
            let fwd: Vec<Knob<u8>> = (0..layers).map(|_| Knob::new(settings.fp_bits)).collect();
            let direction = |bits: &[Knob<u8>], exact: bool, compensated: bool| {
                bits.iter()
                    .map(|b| match (exact, compensated) {
                        (true, _) => Compression::Exact,
                        (false, true) => Compression::Compensated(b.clone()),
                        (false, false) => Compression::Bucket(b.clone()),
                    })
                    .collect()
            };
            let bwd: Vec<Knob<u8>> = (0..layers).map(|_| Knob::new(settings.bp_bits)).collect();
            let tally = SelectorTally::default();
            let codecs = EcGraphCodecs {
                forward: direction(&fwd, settings.fp_bits == 32, settings.reqec),
                backward: direction(&bwd, settings.bp_bits == 32, settings.resec),
                trend: settings.trend as u64,
                send_change_rate: settings.send_change_rate,
                tally: tally.clone(),
            };
            ExchangeStack {
                codecs: codecs.factory(),
                controller: Some(Box::new(BitTuner::new(settings.clone(), fwd, tally))),
                replica_cache: None,
            }
        }));
        parts
    }
}

/// Alg. 3's bit tuner, one width per forward layer, and the method's per-epoch report.
///
/// After every step it sums the workers' selector counts (an all-reduce, so every rank derives
/// the same widths) and, for each layer whose step was a selective round, doubles the width
/// when the predicted share exceeds `tuner-up` and halves it below `tuner-down`, within
/// 1..=16 bits. The paper tunes one width from the last layer's share; each layer has its own
/// rows and share here.
pub(super) struct BitTuner {
    settings: EcgraphSettings,
    fwd_bits: Vec<Knob<u8>>,
    tally: SelectorTally,
    /// Selector counts per layer over the run.
    totals: Vec<[u64; 4]>,
    /// Per layer, training epochs spent at each forward width (index = bits; 32: exact).
    epochs_at: Vec<[u64; 33]>,
}

impl BitTuner {
    fn new(settings: EcgraphSettings, fwd_bits: Vec<Knob<u8>>, tally: SelectorTally) -> Self {
        let layers = fwd_bits.len();
        Self { settings, fwd_bits, tally, totals: vec![[0; 4]; layers], epochs_at: vec![[0; 33]; layers] }
    }

    /// The next width of a layer at `bits` whose predicted share is `share`.
    fn tune(&self, bits: u8, share: f64) -> u8 {
        if share > self.settings.tuner_up {
            (bits * 2).min(16)
        } else if share < self.settings.tuner_down {
            (bits / 2).max(1)
        } else {
            bits
        }
    }
}

/// Shares of each way in `counts` (zeros when empty).
fn shares(counts: &[u64; 4]) -> Value {
    let total: u64 = counts.iter().sum();
    let share = |k: usize| if total > 0 { counts[k] as f64 / total as f64 } else { 0.0 };
    WAYS.iter().enumerate().map(|(k, way)| (way.to_string(), json!(share(k)))).collect::<serde_json::Map<_, _>>().into()
}

impl Controller for BitTuner {
    fn after_step_in(
        &mut self,
        _epoch: usize,
        _stats: &StatsTable,
        ctx: &ControlCtx<'_>,
    ) -> Result<Option<Value>, TrainError> {
        let layers = self.fwd_bits.len();
        let local = self.tally.take();
        let mut summed: Vec<f64> =
            (0..layers).flat_map(|l| local.get(&l).copied().unwrap_or_default().map(|c| c as f64)).collect();
        ctx.call(|| ctx.comm.all_reduce_sum_f64(PHASE, &mut summed))
            .map_err(|e| TrainError::Controller(Box::new(e)))?;
        let (mut selector, mut used, mut next) = (Vec::new(), Vec::new(), Vec::new());
        for (l, knob) in self.fwd_bits.iter().enumerate() {
            let counts: [u64; 4] = std::array::from_fn(|k| summed[4 * l + k] as u64);
            self.totals[l].iter_mut().zip(counts).for_each(|(a, b)| *a += b);
            let bits = knob.get();
            self.epochs_at[l][usize::from(bits.min(32))] += 1;
            let selective: u64 = counts[1..].iter().sum();
            let after = if self.settings.bit_tuner && selective > 0 {
                self.tune(bits, counts[2] as f64 / selective as f64)
            } else {
                bits
            };
            knob.set(after);
            selector.push(shares(&counts));
            used.push(bits);
            next.push(after);
        }
        Ok(Some(json!({
            "fwd_bits": used,
            "bwd_bits": vec![self.settings.bp_bits; layers],
            "next_fwd_bits": next,
            "selector": selector,
        })))
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        // The selector tally is drained by every step, so between epochs it is empty.
        out.extend((self.fwd_bits.len() as u64).to_le_bytes());
        for ((knob, totals), at) in self.fwd_bits.iter().zip(&self.totals).zip(&self.epochs_at) {
            out.push(knob.get());
            out.extend(totals.iter().chain(at).flat_map(|n| n.to_le_bytes()));
        }
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the bit tuner", bytes);
        let layers = r.u64("the layer count")?;
        if layers != self.fwd_bits.len() as u64 {
            let detail = format!("saved for {layers} layers, this run has {}", self.fwd_bits.len());
            return Err(StateError(format!("the bit tuner: {detail}")));
        }
        let mut bits = Vec::with_capacity(self.fwd_bits.len());
        for l in 0..self.fwd_bits.len() {
            bits.push(r.u8("a layer's forward width")?);
            for n in self.totals[l].iter_mut().chain(self.epochs_at[l].iter_mut()) {
                *n = r.u64("a selector or epoch count")?;
            }
        }
        r.finish()?;
        self.fwd_bits.iter().zip(bits).for_each(|(knob, b)| knob.set(b));
        Ok(())
    }

    fn final_fields(&mut self) -> Option<Value> {
        let histogram: Vec<Value> = self
            .epochs_at
            .iter()
            .map(|at| {
                at.iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(b, n)| (b.to_string(), json!(n)))
                    .collect::<serde_json::Map<_, _>>()
                    .into()
            })
            .collect();
        let counts: Vec<Value> = self
            .totals
            .iter()
            .map(|c| {
                WAYS.iter().zip(c).map(|(w, n)| (w.to_string(), json!(n))).collect::<serde_json::Map<_, _>>().into()
            })
            .collect();
        Some(json!({
            "selector_rows": counts,
            "selector_shares": self.totals.iter().map(shares).collect::<Vec<_>>(),
            "fwd_bits_epochs": histogram,
            "bwd_bits": self.settings.bp_bits,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tuner_doubles_above_up_halves_below_down_within_1_to_16() {
        let tuner = BitTuner::new(EcgraphSettings::default(), Vec::new(), SelectorTally::default());
        assert_eq!(tuner.tune(2, 0.61), 4);
        assert_eq!(tuner.tune(16, 0.9), 16);
        assert_eq!(tuner.tune(2, 0.39), 1);
        assert_eq!(tuner.tune(1, 0.0), 1);
        assert_eq!(tuner.tune(4, 0.5), 4);
        let strict = EcgraphSettings { tuner_up: 0.9, tuner_down: 0.1, ..EcgraphSettings::default() };
        let tuner = BitTuner::new(strict, Vec::new(), SelectorTally::default());
        assert_eq!((tuner.tune(4, 0.61), tuner.tune(4, 0.39)), (4, 4), "the thresholds are keys");
        assert_eq!(shares(&[0, 1, 2, 1]), json!({"full": 0.0, "compressed": 0.25, "predicted": 0.5, "average": 0.25}));
    }
}
