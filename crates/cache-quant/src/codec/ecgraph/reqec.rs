//! ReqEC-FP (§IV-B, Alg. 3-4): requesting-end compensation of the forward halo rows.
//!
//! Training messages of a stream are counted `t = 0, 1, ...`. Rounds `t = 0` and every `t` with
//! `(t + 1) mod T_tr = 0` (a trend-group boundary) are *full*: the rows travel exactly, and both
//! ends set the change rate `M_cr = (H_now - H_last) / T_tr` (zero at `t = 0`, which has no
//! `H_last`) and `H_last = H_now`. Every other round is *selective*: the sender compresses the
//! whole block with bucket compression, predicts each row as `H_last + M_cr (t mod T_tr + 1)`,
//! and picks per row, by L1 error against the true row, the compressed row (selector 0), the
//! prediction (1, no payload) or their average (2). The message holds the 2-bit selector ids
//! packed 16 per little-endian `u32`, then one bucket block of the rows not predicted, scaled by
//! the whole block's minimum and maximum (Alg. 4 compresses, then filters).
//!
//! The receiver derives `M_cr` from the two full rounds it holds, so full rounds cost the rows
//! only; with `send_change_rate` the sender also ships `M_cr` with every full round after the
//! first (the paper's accounting, twice the full round's bytes) and the receiver reads it from
//! the message. Either way both ends compute the same state from exact values: the state is a
//! function of the full rounds alone, so sender and receiver stay bit-identical whatever the
//! bucket width of each selective round. Evaluation passes are encoded against the current
//! state and advance none of it.

use super::super::bucket::{self, Buckets};
use super::super::le::{extend_le, read_le};
use super::super::{Codec, CodecError, CodecStats, row_count};
use super::SelectorTally;
use crate::knob::Knob;
use crate::state::{StateError, StateReader, put_f32s};
use crate::stream::{Mode, Pass};

const NAME: &str = "reqec";

/// Message kinds (first byte).
const FULL: u8 = 0;
const FULL_WITH_RATE: u8 = 1;
const SELECTIVE: u8 = 2;

/// What a row of a selective round decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Selector {
    Compressed = 0,
    Predicted = 1,
    Average = 2,
}

/// Bytes of the packed selector ids of `rows` rows: 16 per `u32`.
pub fn selector_bytes(rows: usize) -> usize {
    4 * rows.div_ceil(16)
}

/// Bytes of a message of `rows` rows of `width` values: a full round (`rate`: with `M_cr`), or
/// a selective round that sends `sent` rows (compressed or averaged) at `bits` bits.
pub fn message_len(rows: usize, width: usize, round: Round) -> usize {
    match round {
        Round::Full { rate } => 1 + 4 * rows * width * if rate { 2 } else { 1 },
        Round::Selective { sent, bits } => {
            1 + selector_bytes(rows) + if sent > 0 { bucket::block_len(bits, sent * width) } else { 0 }
        }
    }
}

/// A round's shape, for [`message_len`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    Full { rate: bool },
    Selective { sent: usize, bits: u8 },
}

/// The trend state both ends of a stream keep.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrendState {
    /// Training rounds seen.
    pub t: u64,
    /// The block of the last full round (`None` before the first).
    pub last: Option<Vec<f32>>,
    /// `M_cr`, the change rate per round.
    pub rate: Vec<f32>,
}

/// One end of a ReqEC-FP stream.
pub struct ReqEc {
    trend: u64,
    bits: Knob<u8>,
    send_rate: bool,
    state: TrendState,
    /// The encoder's tally of selector ids (per layer, shared with the controller).
    tally: Option<(SelectorTally, usize)>,
    /// A selective round's values through their buckets, and the values of the rows it sends.
    compressed: Vec<f32>,
    sent: Vec<f32>,
    stats: CodecStats,
}

impl ReqEc {
    /// One end of a stream with trend groups of `trend` rounds, selective rounds at the width
    /// `bits` holds, `M_cr` shipped with full rounds when `send_rate`; an encoder counts its
    /// selectors under `layer` in `tally`.
    pub fn new(trend: u64, bits: Knob<u8>, send_rate: bool, tally: Option<(SelectorTally, usize)>) -> Self {
        Self {
            trend: trend.max(1),
            bits,
            send_rate,
            state: TrendState::default(),
            tally,
            compressed: Vec::new(),
            sent: Vec::new(),
            stats: CodecStats::default(),
        }
    }

    /// The trend state (equal on both ends of a stream).
    pub fn state(&self) -> &TrendState {
        &self.state
    }

    fn full_round(&self) -> bool {
        let t = self.state.t;
        t == 0 || (t + 1).is_multiple_of(self.trend)
    }

    /// Sets the state after a full round of `now` (with the sent rate, if any).
    fn commit_full(&mut self, now: &[f32], sent_rate: Option<Vec<f32>>) {
        let trend = self.trend as f32;
        self.state.rate = match (sent_rate, &self.state.last) {
            (Some(rate), _) => rate,
            (None, Some(last)) => now.iter().zip(last).map(|(n, l)| (n - l) / trend).collect(),
            (None, None) => vec![0.0; now.len()],
        };
        self.state.last = Some(now.to_vec());
    }

    fn check_shape(&self, len: usize) -> Result<(), CodecError> {
        match &self.state.last {
            Some(last) if last.len() != len => {
                Err(CodecError::StreamShape { codec: NAME, expected: last.len(), actual: len })
            }
            _ => Ok(()),
        }
    }

    fn count(&mut self, pass: Pass, counts: [u64; 4]) {
        if let (Some((tally, layer)), Mode::Train) = (&self.tally, pass.mode) {
            tally.add(*layer, counts);
        }
    }
}

/// The predictions of a selective round: value `i` is `H_last + M_cr (t mod T_tr + 1)`.
struct Predictor<'a> {
    last: &'a [f32],
    rate: &'a [f32],
    steps: f32,
}

impl<'a> Predictor<'a> {
    /// The predictions at the current round of `state`, which follows a full round.
    fn new(state: &'a TrendState, trend: u64) -> Self {
        let last = state.last.as_deref().expect("a selective round follows a full one");
        Self { last, rate: &state.rate, steps: (state.t % trend + 1) as f32 }
    }

    fn at(&self, i: usize) -> f32 {
        self.last[i] + self.rate[i] * self.steps
    }
}

/// Appends the 2-bit ids, 16 per little-endian `u32`.
fn write_selectors(ids: &[Selector], out: &mut Vec<u8>) {
    for chunk in ids.chunks(16) {
        let word = chunk.iter().enumerate().fold(0u32, |w, (i, &s)| w | (s as u32) << (2 * i));
        out.extend_from_slice(&word.to_le_bytes());
    }
}

fn read_selectors(bytes: &[u8], rows: usize) -> Result<Vec<Selector>, CodecError> {
    (0..rows)
        .map(|r| {
            let at = 4 * (r / 16);
            let word = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            match word >> (2 * (r % 16)) & 3 {
                0 => Ok(Selector::Compressed),
                1 => Ok(Selector::Predicted),
                2 => Ok(Selector::Average),
                _ => Err(CodecError::Malformed { codec: NAME, detail: format!("selector id 3 at row {r}") }),
            }
        })
        .collect()
}

/// Row `r` of the average of the prediction and the compressed row.
fn average(pred: f32, comp: f32) -> f32 {
    (pred + comp) * 0.5
}

impl Codec for ReqEc {
    fn name(&self) -> String {
        format!("{NAME}(bucket)")
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if rows.is_empty() {
            // A peer that reads none of our rows gets an empty message, as without a codec.
            return Ok(());
        }
        let n = row_count(NAME, rows.len(), width)?;
        self.check_shape(rows.len())?;
        if self.full_round() {
            let rate = self.send_rate && self.state.last.is_some();
            out.push(if rate { FULL_WITH_RATE } else { FULL });
            extend_le(out, rows);
            if pass.mode == Mode::Train {
                self.commit_full(rows, None);
                if rate {
                    extend_le(out, &self.state.rate);
                }
                self.state.t += 1;
            } else if rate {
                let last = self.state.last.as_deref().expect("rate implies a last round");
                let trend = self.trend as f32;
                let fresh: Vec<f32> = rows.iter().zip(last).map(|(n, l)| (n - l) / trend).collect();
                extend_le(out, &fresh);
            }
            self.stats.bits[32] += n as u64;
            self.stats.ref_sq += rows.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>();
            self.count(pass, [n as u64, 0, 0, 0]);
            return Ok(());
        }
        let bits = bucket::check_bits(self.bits.get())
            .map_err(|e| CodecError::Malformed { codec: NAME, detail: e.to_string() })?;
        let (lo, hi) = bucket::bounds(rows);
        let scale = Buckets::new(bits, lo, hi);
        // Every value through its bucket, and the values of the rows sent, in buffers the
        // stream reuses from message to message.
        let (comp, sent) = (&mut self.compressed, &mut self.sent);
        comp.resize(rows.len(), 0.0);
        scale.round_trip_all(rows, comp);
        sent.clear();
        let predict = Predictor::new(&self.state, self.trend);
        let mut ids = Vec::with_capacity(n);
        let mut counts = [0u64; 4];
        for r in 0..n {
            let span = r * width..(r + 1) * width;
            let mut err = [0.0f64; 3];
            for (i, (&truth, &comp)) in rows[span.clone()].iter().zip(&comp[span.clone()]).enumerate() {
                let pred = predict.at(r * width + i);
                err[0] += f64::from((comp - truth).abs());
                err[1] += f64::from((pred - truth).abs());
                err[2] += f64::from((average(pred, comp) - truth).abs());
            }
            // Ties go to the lowest id: compressed, then predicted.
            let pick = (0..3).fold(0, |best, k| if err[k] < err[best] { k } else { best });
            let id = [Selector::Compressed, Selector::Predicted, Selector::Average][pick];
            counts[1 + pick] += 1;
            for (i, (&truth, &comp)) in rows[span.clone()].iter().zip(&comp[span.clone()]).enumerate() {
                let got = match id {
                    Selector::Compressed => comp,
                    Selector::Predicted => predict.at(r * width + i),
                    Selector::Average => average(predict.at(r * width + i), comp),
                };
                self.stats.err_sq += f64::from(got - truth).powi(2);
                self.stats.ref_sq += f64::from(truth).powi(2);
            }
            if id != Selector::Predicted {
                sent.extend_from_slice(&rows[span]);
            }
            ids.push(id);
        }
        out.push(SELECTIVE);
        write_selectors(&ids, out);
        if !sent.is_empty() {
            bucket::encode_block(scale, sent, out, |_, _, _| {});
        }
        let sent = sent.len() / width;
        self.stats.rows_skipped += counts[2];
        self.stats.bits[usize::from(bits)] += sent as u64;
        self.count(pass, counts);
        if pass.mode == Mode::Train {
            self.state.t += 1;
        }
        Ok(())
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        if out.is_empty() {
            return bucket::expect_empty(NAME, bytes);
        }
        let n = row_count(NAME, out.len(), width)?;
        self.check_shape(out.len())?;
        let malformed = |detail: String| CodecError::Malformed { codec: NAME, detail };
        let (&kind, body) = bytes.split_first().ok_or_else(|| malformed("empty message".to_string()))?;
        let full = self.full_round();
        match kind {
            FULL | FULL_WITH_RATE if full => {
                let values = out.len() * if kind == FULL_WITH_RATE { 2 } else { 1 };
                if body.len() != 4 * values {
                    let expected = 1 + 4 * values;
                    return Err(CodecError::Length { codec: NAME, rows: n, width, expected, actual: bytes.len() });
                }
                read_le(&body[..4 * out.len()], out);
                if kind == FULL_WITH_RATE && self.state.last.is_none() {
                    return Err(malformed("a change rate before any full round".to_string()));
                }
                let rate = (kind == FULL_WITH_RATE).then(|| {
                    let mut rate = vec![0.0; out.len()];
                    read_le(&body[4 * out.len()..], &mut rate);
                    rate
                });
                if pass.mode == Mode::Train {
                    self.commit_full(out, rate);
                    self.state.t += 1;
                }
                Ok(())
            }
            SELECTIVE if !full => {
                let sel = selector_bytes(n);
                if body.len() < sel {
                    return Err(malformed(format!("{} bytes cannot hold {n} selector ids", body.len())));
                }
                let ids = read_selectors(&body[..sel], n)?;
                let sent = ids.iter().filter(|&&s| s != Selector::Predicted).count();
                let decoded = &mut self.compressed;
                decoded.resize(sent * width, 0.0);
                if sent > 0 {
                    let (_, used) = bucket::decode_block(NAME, &body[sel..], decoded)?;
                    if sel + used != body.len() {
                        return Err(malformed(format!("{} bytes after the block", body.len() - sel - used)));
                    }
                } else if body.len() != sel {
                    return Err(malformed("payload after a message that predicts every row".to_string()));
                }
                let predict = Predictor::new(&self.state, self.trend);
                let mut comp = decoded.chunks_exact(width.max(1));
                for (r, (id, row)) in ids.iter().zip(out.chunks_exact_mut(width.max(1))).enumerate() {
                    let at = r * width;
                    match (id, (*id != Selector::Predicted).then(|| comp.next()).flatten()) {
                        (Selector::Compressed, Some(c)) => row.copy_from_slice(c),
                        (Selector::Average, Some(c)) => row
                            .iter_mut()
                            .zip(c)
                            .enumerate()
                            .for_each(|(j, (v, &c))| *v = average(predict.at(at + j), c)),
                        _ => row.iter_mut().enumerate().for_each(|(j, v)| *v = predict.at(at + j)),
                    }
                }
                if pass.mode == Mode::Train {
                    self.state.t += 1;
                }
                Ok(())
            }
            other => Err(malformed(format!(
                "message kind {other} at round {} (expected a {} round)",
                self.state.t,
                if full { "full" } else { "selective" }
            ))),
        }
    }

    fn take_stats(&mut self) -> CodecStats {
        std::mem::take(&mut self.stats)
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        let TrendState { t, last, rate } = &self.state;
        out.extend(t.to_le_bytes());
        out.push(last.is_some() as u8);
        put_f32s(out, last.as_deref().unwrap_or_default());
        put_f32s(out, rate);
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(NAME, bytes);
        let t = r.u64("the round counter")?;
        let has_last = r.u8("whether a full round was seen")? != 0;
        let last = r.f32s("the last full round")?;
        let rate = r.f32s_of("the change rate", if has_last { last.len() } else { 0 })?;
        r.finish()?;
        self.state = TrendState { t, last: has_last.then_some(last), rate };
        Ok(())
    }
}

/// The codec pair of one stream for tests: an encoder with a tally and its decoder.
#[cfg(test)]
pub(crate) fn pair(trend: u64, bits: &Knob<u8>, send_rate: bool, tally: &SelectorTally) -> (ReqEc, ReqEc) {
    let enc = ReqEc::new(trend, bits.clone(), send_rate, Some((tally.clone(), 0)));
    (enc, ReqEc::new(trend, bits.clone(), send_rate, None))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const W: usize = 3;

    fn train(t: u64) -> Pass {
        Pass::train(t + 1, 0)
    }

    #[test]
    fn rounds_follow_the_trend_groups_and_predicted_rows_cost_nothing() {
        let (bits, tally) = (Knob::new(2u8), SelectorTally::default());
        let (mut enc, mut dec) = pair(4, &bits, false, &tally);
        let mut got = vec![0.0f32; 2 * W];
        let mut kinds = Vec::new();
        for t in 0..8u64 {
            // Row 0 moves linearly (predicted exactly after the second full round), row 1 jumps.
            let rows: Vec<f32> = (0..2 * W)
                .map(|i| if i < W { t as f32 + i as f32 } else { ((t * 7 + i as u64) % 5) as f32 * 3.0 })
                .collect();
            let mut bytes = Vec::new();
            enc.encode(train(t), &rows, W, &mut bytes).unwrap();
            dec.decode(train(t), &bytes, W, &mut got).unwrap();
            kinds.push(bytes[0]);
            if bytes[0] == SELECTIVE {
                let ids = read_selectors(&bytes[1..5], 2).unwrap();
                let sent = ids.iter().filter(|&&s| s != Selector::Predicted).count();
                let round = Round::Selective { sent, bits: 2 };
                assert_eq!(bytes.len(), message_len(2, W, round), "round {t}");
            } else {
                assert_eq!(bytes.len(), message_len(2, W, Round::Full { rate: false }));
                assert_eq!(got, rows);
            }
            assert_eq!(enc.state(), dec.state());
        }
        // Full at t = 0 and where (t + 1) % 4 == 0.
        assert_eq!(kinds, [FULL, SELECTIVE, SELECTIVE, FULL, SELECTIVE, SELECTIVE, SELECTIVE, FULL]);
        // Row 0's value is t: after the full rounds at t = 3 and 7 its rate is (7 - 3) / 4.
        assert_eq!(enc.state().rate[0], 1.0);
        assert_eq!(enc.state().last.as_ref().unwrap()[0], 7.0);
        let counts = tally.take();
        assert_eq!(counts[&0][0], 3 * 2, "three full rounds of two rows");
        assert_eq!(counts[&0][1..].iter().sum::<u64>(), 5 * 2);
    }

    #[test]
    fn a_stream_that_predicts_every_row_sends_only_selectors() {
        let (bits, tally) = (Knob::new(1u8), SelectorTally::default());
        let (mut enc, mut dec) = pair(10, &bits, true, &tally);
        let rows = vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 0.25];
        let mut got = vec![0.0; 6];
        for t in 0..3 {
            let mut bytes = Vec::new();
            enc.encode(train(t), &rows, W, &mut bytes).unwrap();
            dec.decode(train(t), &bytes, W, &mut got).unwrap();
            if t > 0 {
                // Constant rows: the prediction is exact, the message is the kind and one word.
                assert_eq!(bytes.len(), 1 + 4);
                assert_eq!(got, rows);
            }
        }
        assert_eq!(tally.take()[&0], [2, 0, 4, 0]);
    }

    #[test]
    fn evaluation_advances_no_state_and_bad_messages_are_errors() {
        let (bits, tally) = (Knob::new(4u8), SelectorTally::default());
        let (mut enc, mut dec) = pair(3, &bits, false, &tally);
        let rows = vec![1.0f32, 2.0, 3.0];
        let mut got = vec![0.0; 3];
        let mut bytes = Vec::new();
        enc.encode(train(0), &rows, W, &mut bytes).unwrap();
        dec.decode(train(0), &bytes, W, &mut got).unwrap();
        let before = enc.state().clone();
        for _ in 0..3 {
            let mut eval = Vec::new();
            enc.encode(Pass::eval(), &[5.0, 5.0, 5.0], W, &mut eval).unwrap();
            dec.decode(Pass::eval(), &eval, W, &mut got).unwrap();
        }
        assert_eq!((enc.state(), dec.state()), (&before, &before));
        let err = dec.decode(train(1), &bytes, W, &mut got).unwrap_err();
        assert!(err.to_string().contains("expected a selective round"), "{err}");
        let err = dec.decode(train(1), &[SELECTIVE, 3, 0, 0, 0], W, &mut got).unwrap_err();
        assert!(err.to_string().contains("selector id 3"), "{err}");
        let err = dec.decode(train(1), &[], W, &mut got).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }

    proptest! {
        /// Over any sequence of training and evaluation rounds, with the bucket width changing
        /// between rounds, both ends hold the same state bit for bit, the receiver decodes
        /// exactly what the encoder's stats assume, and the message bytes are analytic.
        #[test]
        fn both_ends_keep_the_same_state(
            trend in 1u64..6,
            send_rate in any::<bool>(),
            steps in prop::collection::vec(
                (prop::sample::select(bucket::BUCKET_BITS.to_vec()), any::<bool>(), prop::collection::vec(-50i16..50, 2 * W)),
                1..30,
            ),
        ) {
            let (bits, tally) = (Knob::new(2u8), SelectorTally::default());
            let (mut enc, mut dec) = pair(trend, &bits, send_rate, &tally);
            let mut got = vec![0.0f32; 2 * W];
            for (t, (b, eval, raw)) in steps.into_iter().enumerate() {
                bits.set(b);
                let rows: Vec<f32> = raw.iter().map(|&v| f32::from(v) * 0.37).collect();
                let pass = if eval { Pass::eval() } else { train(t as u64) };
                let mut bytes = Vec::new();
                enc.encode(pass, &rows, W, &mut bytes).unwrap();
                dec.decode(pass, &bytes, W, &mut got).unwrap();
                prop_assert_eq!(enc.state(), dec.state());
                let stats = enc.take_stats();
                let err: f64 = got.iter().zip(&rows).map(|(g, r)| f64::from(g - r).powi(2)).sum();
                prop_assert!((stats.err_sq - err).abs() <= 1e-9 * (1.0 + err), "{} vs {}", stats.err_sq, err);
                let round = if bytes[0] == SELECTIVE {
                    let ids = read_selectors(&bytes[1..5], 2).unwrap();
                    Round::Selective { sent: ids.iter().filter(|&&s| s != Selector::Predicted).count(), bits: b }
                } else {
                    Round::Full { rate: bytes[0] == FULL_WITH_RATE }
                };
                prop_assert_eq!(bytes.len(), message_len(2, W, round));
            }
        }
    }
}
