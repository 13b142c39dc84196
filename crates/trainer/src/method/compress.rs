//! Compression that pays or goes (`[distributed] compress = "auto"`): every method that cuts its
//! exchange's traffic runs its codec stack behind [`PaysOrExact`] and its controller inside a
//! `CostJudge` (`judged`, which the plan applies to every such method's stack).
//!
//! Compression spends CPU (the codec calls on both ends, a replica cache's bookkeeping: the
//! stats' `codec_s`) to save bytes (`exact_bytes - bytes`). The judge prices the saved bytes on
//! the run's modeled links, those of another host at the inter-host bandwidth and the rest at the
//! intra-host one, each message on a link of its own (a lower bound where a host's ranks share
//! its uplink; latency unchanged, the messages are the same), and weighs them against the codec
//! seconds, both per worker and step ([`Balance`]). It ignores the first [`WARM_UP_STEPS`] steps
//! and any before the method's controller settles ([`Controller::settled_after`]: AdaQP's first
//! bit-width assignment), sums the next [`JUDGED_STEPS`], and decides once: where the codecs
//! cost more than the wire seconds they save, by more than [`MARGIN`], the knob shared by every
//! stream's `PaysOrExact` and the replica cache's bypass is set, and the exchange sends exact
//! rows from the next step to the end of the run. The decision comes from stats summed over
//! every worker, so it is the same on every rank, and sender and receiver switch at the same
//! message without a flag on the wire.
//!
//! The switch is one-way: a stateful codec (error feedback, held blocks, a cache) is never read
//! again, and from the switch on the method's own controller no longer runs (its settings move
//! nothing). Within the model the margin keeps a kept codec's step within `1 + MARGIN` of the
//! exact exchange's: the codecs cost at most `(1 + MARGIN)` times the wire seconds they save,
//! which are at most the exact step. The codec seconds include what copying exact rows would
//! cost, so the judge leans to exact rows by that much.

use std::sync::Arc;

use cache_quant::state::{put_f64, put_optional};
use cache_quant::{CodecStats, Knob, PaysOrExact, StateError, StateReader, StatsTable};
use comm_hierarchy::LinkModel;
use gnn_core::exchange::ReplicaCacheOptions;
use serde_json::{Value, json};

use super::{ControlCtx, Controller, ExchangeStack, StackFactory};
use crate::error::TrainError;
use crate::train_loop::EvalStats;

/// Steps whose codec time is not judged: the first messages of a stream (allocations, a cache
/// or a predictor filling, EC-Graph's first full round).
pub const WARM_UP_STEPS: usize = 2;

/// Steps summed for the decision.
pub const JUDGED_STEPS: usize = 2;

/// How much more than the wire seconds they save the codecs may cost and stay.
pub const MARGIN: f64 = 0.05;

/// `make`'s stacks with compression judged: the codecs behind one shared switch to exact rows,
/// the replica cache bypassed by the same switch, the controller inside a [`CostJudge`].
pub(crate) fn judged(make: StackFactory) -> StackFactory {
    Arc::new(move || {
        let stack = make();
        let exact = Knob::new(false);
        let replica_cache = stack.replica_cache.map(|cache| ReplicaCacheOptions { bypass: exact.clone(), ..cache });
        ExchangeStack {
            codecs: PaysOrExact::over(stack.codecs, exact.clone()),
            controller: Some(Box::new(CostJudge::new(stack.controller, exact))),
            replica_cache,
        }
    })
}

/// What compression cost and saved, in seconds per worker (and per step, once divided by the
/// steps).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Balance {
    /// Seconds in the codecs.
    pub codec_s: f64,
    /// Wire seconds of the bytes they saved (negative where they sent more than exact rows).
    pub saved_s: f64,
}

impl Balance {
    /// Of stats summed over `workers` workers, on `links`.
    pub fn of(stats: &CodecStats, links: &LinkModel, workers: usize) -> Self {
        let saved = |exact: u64, sent: u64| exact as f64 - sent as f64;
        let inter = saved(stats.inter_exact_bytes, stats.inter_bytes);
        let intra = saved(stats.exact_bytes, stats.bytes) - inter;
        let wire_s = intra / links.intra.bandwidth_bytes_per_s + inter / links.inter.bandwidth_bytes_per_s;
        let workers = workers.max(1) as f64;
        Self { codec_s: stats.codec_s / workers, saved_s: wire_s / workers }
    }

    /// Whether compression pays: its codecs cost no more than [`MARGIN`] above the wire seconds
    /// they save.
    pub fn pays(&self) -> bool {
        self.codec_s <= self.saved_s * (1.0 + MARGIN)
    }

    fn add(&mut self, other: Balance) {
        self.codec_s += other.codec_s;
        self.saved_s += other.saved_s;
    }

    fn per_step(self, steps: usize) -> Self {
        let steps = steps.max(1) as f64;
        Self { codec_s: self.codec_s / steps, saved_s: self.saved_s / steps }
    }
}

/// The decision, after the step of `epoch`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub epoch: usize,
    /// Per step over the judged steps.
    pub balance: Balance,
}

impl Verdict {
    /// Whether the exchange sends exact rows from the next step on.
    pub fn exact(&self) -> bool {
        !self.balance.pays()
    }

    /// What the report and the summary line say.
    pub fn reason(&self) -> String {
        let (codec, saved) = (1e3 * self.balance.codec_s, 1e3 * self.balance.saved_s);
        match self.exact() {
            true => format!("exact rows from epoch {}: codec {codec:.3} ms a step > {saved:.3} ms of wire saved", {
                self.epoch + 1
            }),
            false => {
                format!("codecs kept after epoch {}: codec {codec:.3} ms a step <= {saved:.3} ms of wire saved", {
                    self.epoch
                })
            }
        }
    }
}

/// The judge's timeline: which steps it sums and when it decides (a pure function of the
/// epochs and their stats).
#[derive(Debug, Clone, PartialEq)]
pub struct Judgment {
    /// The last step not judged.
    start: usize,
    summed: Balance,
    steps: usize,
    verdict: Option<Verdict>,
}

impl Judgment {
    /// A judgment of the steps after `WARM_UP_STEPS` and `settled_after`.
    pub fn new(settled_after: usize) -> Self {
        Self { start: WARM_UP_STEPS.max(settled_after), summed: Balance::default(), steps: 0, verdict: None }
    }

    /// The epoch after whose step the judgment decides.
    pub fn decides_after(&self) -> usize {
        self.start + JUDGED_STEPS
    }

    /// Takes the step of `epoch` with its `balance`; returns the verdict when this step decides.
    pub fn step(&mut self, epoch: usize, balance: Balance) -> Option<Verdict> {
        if self.verdict.is_some() || epoch <= self.start {
            return None;
        }
        self.summed.add(balance);
        self.steps += 1;
        if epoch < self.decides_after() {
            return None;
        }
        let verdict = Verdict { epoch, balance: self.summed.per_step(self.steps) };
        self.verdict = Some(verdict);
        Some(verdict)
    }

    /// The verdict, once given.
    pub fn verdict(&self) -> Option<Verdict> {
        self.verdict
    }

    /// Whether the exchange sends exact rows.
    pub fn exact(&self) -> bool {
        self.verdict.is_some_and(|v| v.exact())
    }

    fn save_state(&self, out: &mut Vec<u8>) {
        out.extend((self.steps as u64).to_le_bytes());
        put_f64(out, self.summed.codec_s);
        put_f64(out, self.summed.saved_s);
        out.push(u8::from(self.verdict.is_some()));
        let verdict = self.verdict.unwrap_or(Verdict { epoch: 0, balance: Balance::default() });
        out.extend((verdict.epoch as u64).to_le_bytes());
        put_f64(out, verdict.balance.codec_s);
        put_f64(out, verdict.balance.saved_s);
    }

    fn restore_state(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        self.steps = r.u64("the judged steps")? as usize;
        self.summed =
            Balance { codec_s: r.f64("the judged codec seconds")?, saved_s: r.f64("the judged wire seconds")? };
        let decided = r.u8("whether the judge decided")? != 0;
        let epoch = r.u64("the epoch of the verdict")? as usize;
        let balance = Balance { codec_s: r.f64("the verdict's codec seconds")?, saved_s: r.f64("its wire seconds")? };
        self.verdict = decided.then_some(Verdict { epoch, balance });
        Ok(())
    }
}

/// The method's controller, with compression judged ([`Judgment`]) after each step.
pub(crate) struct CostJudge {
    inner: Option<Box<dyn Controller>>,
    exact: Knob<bool>,
    judgment: Judgment,
}

impl CostJudge {
    fn new(inner: Option<Box<dyn Controller>>, exact: Knob<bool>) -> Self {
        let settled_after = inner.as_ref().map_or(0, |c| c.settled_after());
        Self { inner, exact, judgment: Judgment::new(settled_after) }
    }

    /// The judge's fields: the verdict once given.
    fn fields(&self) -> Value {
        let mut fields =
            json!({ "exact": self.judgment.exact(), "decides_after_epoch": self.judgment.decides_after() });
        if let Some(verdict) = self.judgment.verdict() {
            fields["judged_after_epoch"] = json!(verdict.epoch);
            fields["exact_from_epoch"] = json!(verdict.exact().then_some(verdict.epoch + 1));
            fields["codec_s_per_step"] = json!(verdict.balance.codec_s);
            fields["wire_saved_s_per_step"] = json!(verdict.balance.saved_s);
            fields["reason"] = json!(verdict.reason());
        }
        fields
    }
}

/// `fields` (the method controller's, if any) with the judge's as `compress`.
fn with_judge(fields: Option<Value>, judge: Value) -> Value {
    let mut fields = match fields {
        Some(Value::Object(map)) => map,
        Some(other) => [("method".to_string(), other)].into_iter().collect(),
        None => serde_json::Map::new(),
    };
    fields.insert("compress".to_string(), judge);
    Value::Object(fields)
}

impl Controller for CostJudge {
    fn after_step_in(
        &mut self,
        epoch: usize,
        stats: &StatsTable,
        ctx: &ControlCtx<'_>,
    ) -> Result<Option<Value>, TrainError> {
        // Exact rows: the method's settings move nothing any more.
        let inner = match (self.judgment.exact(), self.inner.as_mut()) {
            (false, Some(inner)) => inner.after_step_in(epoch, stats, ctx)?,
            _ => None,
        };
        let topology = ctx.comm.topology();
        let balance = Balance::of(&stats.total(), topology.links(), topology.workers());
        if let Some(verdict) = self.judgment.step(epoch, balance) {
            self.exact.set(verdict.exact());
        }
        Ok(Some(with_judge(inner, self.fields())))
    }

    fn after_eval(&mut self, eval: &EvalStats) {
        if let (false, Some(inner)) = (self.judgment.exact(), self.inner.as_mut()) {
            inner.after_eval(eval);
        }
    }

    fn final_fields(&mut self) -> Option<Value> {
        let inner = self.inner.as_mut().and_then(|c| c.final_fields());
        Some(with_judge(inner, self.fields()))
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        self.judgment.save_state(out);
        put_optional(out, self.inner.as_deref(), |inner, out| inner.save_state(out))
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the compression judge", bytes);
        self.judgment.restore_state(&mut r)?;
        let inner = r.optional("the method's controller")?;
        r.finish()?;
        self.exact.set(self.judgment.exact());
        cache_quant::state::restore_optional("the method's controller", self.inner.as_deref_mut(), inner, |c, s| {
            c.restore_state(s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm_hierarchy::LinkSpec;

    /// 1 GB/s inside a host, 0.1 GB/s across.
    fn links() -> LinkModel {
        LinkModel { intra: LinkSpec::from_gb_s_us(1.0, 1.0), inter: LinkSpec::from_gb_s_us(0.1, 10.0) }
    }

    fn stats(exact: u64, bytes: u64, inter_exact: u64, inter: u64, codec_s: f64) -> CodecStats {
        CodecStats {
            rows: 1,
            exact_bytes: exact,
            bytes,
            inter_exact_bytes: inter_exact,
            inter_bytes: inter,
            codec_s,
            ..CodecStats::default()
        }
    }

    #[test]
    fn saved_bytes_are_priced_on_their_link_class_per_worker() {
        // 4 workers: 3 MB saved inside hosts (3 ms at 1 GB/s), 1 MB across (10 ms at 0.1 GB/s).
        let b = Balance::of(&stats(6_000_000, 2_000_000, 2_000_000, 1_000_000, 0.02), &links(), 4);
        assert!((b.saved_s - 0.013 / 4.0).abs() < 1e-12, "{b:?}");
        assert!((b.codec_s - 0.005).abs() < 1e-12);
        // Bytes over exact rows' cost wire time: a negative saving.
        let worse = Balance::of(&stats(100, 200, 0, 0, 0.0), &links(), 1);
        assert!(worse.saved_s < 0.0);
        assert!(!Balance { codec_s: 0.0, saved_s: -1e-9 }.pays(), "a codec that sends more never pays");
    }

    #[test]
    fn compression_pays_up_to_the_margin() {
        assert!(Balance { codec_s: 1.0, saved_s: 1.0 }.pays());
        assert!(Balance { codec_s: 1.0 + 0.9 * MARGIN, saved_s: 1.0 }.pays());
        assert!(!Balance { codec_s: 1.0 + 1.1 * MARGIN, saved_s: 1.0 }.pays());
        assert!(Balance::default().pays(), "nothing spent, nothing saved: the method's own exchange stays");
        let verdict = Verdict { epoch: 4, balance: Balance { codec_s: 0.0012, saved_s: 0.0001 } };
        assert!(verdict.exact());
        assert_eq!(verdict.reason(), "exact rows from epoch 5: codec 1.200 ms a step > 0.100 ms of wire saved");
        let kept = Verdict { epoch: 4, balance: Balance { codec_s: 0.0001, saved_s: 0.002 } };
        assert_eq!(kept.reason(), "codecs kept after epoch 4: codec 0.100 ms a step <= 2.000 ms of wire saved");
    }

    #[test]
    fn the_judgment_sums_the_steps_after_the_warm_up_and_decides_once() {
        let mut j = Judgment::new(0);
        assert_eq!(j.decides_after(), WARM_UP_STEPS + JUDGED_STEPS);
        let costly = |codec_s| Balance { codec_s, saved_s: 1.0 };
        // Warm-up steps count for nothing, however costly.
        assert_eq!(j.step(1, costly(100.0)), None);
        assert_eq!(j.step(2, costly(100.0)), None);
        assert_eq!(j.step(3, costly(0.5)), None);
        let verdict = j.step(4, costly(1.7)).expect("the fourth step decides");
        assert_eq!(verdict, Verdict { epoch: 4, balance: Balance { codec_s: 1.1, saved_s: 1.0 } });
        assert!(verdict.exact() && j.exact());
        // Decided once: later steps change nothing.
        assert_eq!(j.step(5, costly(0.0)), None);
        assert_eq!(j.verdict(), Some(verdict));
    }

    #[test]
    fn a_controller_that_settles_late_moves_the_judged_steps() {
        let mut j = Judgment::new(6);
        assert_eq!(j.decides_after(), 8);
        for epoch in 1..=6 {
            assert_eq!(j.step(epoch, Balance { codec_s: 9.0, saved_s: 0.0 }), None);
        }
        assert_eq!(j.step(7, Balance { codec_s: 0.1, saved_s: 1.0 }), None);
        let verdict = j.step(8, Balance { codec_s: 0.1, saved_s: 1.0 }).unwrap();
        assert!(!verdict.exact() && !j.exact());
    }

    #[test]
    fn a_judgment_resumes_where_it_was_saved() {
        for stop in 1..=5 {
            let step = |e: usize| Balance { codec_s: 0.3 * e as f64, saved_s: 0.9 };
            let mut straight = Judgment::new(0);
            let mut first = Judgment::new(0);
            (1..=stop).for_each(|e| {
                straight.step(e, step(e));
                first.step(e, step(e));
            });
            let mut saved = Vec::new();
            first.save_state(&mut saved);
            let mut resumed = Judgment::new(0);
            let mut r = StateReader::new("test", &saved);
            resumed.restore_state(&mut r).unwrap();
            r.finish().unwrap();
            assert_eq!(resumed, first, "after epoch {stop}");
            for e in stop + 1..=6 {
                assert_eq!(resumed.step(e, step(e)), straight.step(e, step(e)), "epoch {e}");
            }
            assert!(resumed.exact(), "0.3 x 3.5 > 0.9 x 1.05");
        }
        let mut cut = Vec::new();
        Judgment::new(0).save_state(&mut cut);
        cut.pop();
        assert!(Judgment::new(0).restore_state(&mut StateReader::new("test", &cut)).is_err());
    }

    #[test]
    fn the_judges_fields_sit_beside_the_methods() {
        let merged = with_judge(Some(json!({ "bits": "adaptive" })), json!({ "exact": false }));
        assert_eq!(merged, json!({ "bits": "adaptive", "compress": { "exact": false } }));
        assert_eq!(with_judge(None, json!(1)), json!({ "compress": 1 }));
    }
}
