//! ResEC-BP (§IV-C, eq. 11-12): responding-end compensation of the backward halo gradients.
//!
//! The sender keeps the residual `e` of its stream, zero at the start. Each training round it
//! sends `C(g')` for `g' = g + e`, bucket-compressed over `g'`'s own minimum and maximum, and
//! keeps `e = g' - decode(C(g'))`: eq. 11, which carries the whole previous residual forward
//! (Alg. 6 line 7, `delta = G - M`, drops it). The receiver only decodes, so over any run the
//! decoded rows sum to the true rows minus the final residual. Evaluation passes (which have no
//! backward pass in training, but an exchange may be asked to send them through the codec) are
//! compressed without the residual and leave it alone.

use super::super::bucket::{self, Buckets};
use super::super::{Codec, CodecError, CodecStats, row_count};
use crate::knob::Knob;
use crate::state::{StateError, StateReader, put_f32s};
use crate::stream::{Mode, Pass};

const NAME: &str = "resec";

/// One end of a ResEC-BP stream.
pub struct ResEc {
    bits: Knob<u8>,
    /// The residual `e` (encoder side; empty before the first round).
    residual: Vec<f32>,
    /// `g'` of the message being encoded.
    compensated: Vec<f32>,
    stats: CodecStats,
}

impl ResEc {
    /// One end of a stream at the width `bits` holds.
    pub fn new(bits: Knob<u8>) -> Self {
        Self { bits, residual: Vec::new(), compensated: Vec::new(), stats: CodecStats::default() }
    }

    /// The residual after the last training round.
    pub fn residual(&self) -> &[f32] {
        &self.residual
    }
}

impl Codec for ResEc {
    fn name(&self) -> String {
        format!("{NAME}(bucket)")
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if rows.is_empty() {
            // A peer that reads none of our rows gets an empty message, as without a codec.
            return Ok(());
        }
        let n = row_count(NAME, rows.len(), width)?;
        let bits = bucket::check_bits(self.bits.get())
            .map_err(|e| CodecError::Malformed { codec: NAME, detail: e.to_string() })?;
        let train = pass.mode == Mode::Train;
        if self.residual.is_empty() {
            self.residual = vec![0.0; rows.len()];
        } else if self.residual.len() != rows.len() {
            return Err(CodecError::StreamShape { codec: NAME, expected: self.residual.len(), actual: rows.len() });
        }
        // `g'`, in a buffer the stream reuses from message to message.
        self.compensated.clear();
        if train {
            self.compensated.extend(rows.iter().zip(&self.residual).map(|(g, e)| g + e));
        } else {
            self.compensated.extend_from_slice(rows);
        }
        let (lo, hi) = bucket::bounds(&self.compensated);
        bucket::encode_block(Buckets::new(bits, lo, hi), &self.compensated, out, |i, c, decoded| {
            self.stats.err_sq += f64::from(decoded - rows[i]).powi(2);
            self.stats.ref_sq += f64::from(rows[i]).powi(2);
            if train {
                self.residual[i] = c - decoded;
            }
        });
        self.stats.bits[usize::from(bits)] += n as u64;
        Ok(())
    }

    fn decode(&mut self, _pass: Pass, bytes: &[u8], _width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        bucket::decode_message(NAME, bytes, out)
    }

    fn take_stats(&mut self) -> CodecStats {
        std::mem::take(&mut self.stats)
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        put_f32s(out, &self.residual);
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(NAME, bytes);
        self.residual = r.f32s("the residual")?;
        r.finish()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_residual_starts_at_zero_and_carries_the_previous_one() {
        let bits = Knob::new(1u8);
        let (mut enc, mut dec) = (ResEc::new(bits.clone()), ResEc::new(bits));
        let mut got = [0.0f32; 2];
        let mut bytes = Vec::new();
        // 1 bit over [0, 1]: midpoints 0.25 and 0.75.
        enc.encode(Pass::train(1, 0), &[0.0, 1.0], 1, &mut bytes).unwrap();
        dec.decode(Pass::train(1, 0), &bytes, 1, &mut got).unwrap();
        assert_eq!(got, [0.25, 0.75]);
        assert_eq!(enc.residual(), [-0.25, 0.25]);
        bytes.clear();
        // g' = [0, 1] + [-0.25, 0.25] = [-0.25, 1.25]: midpoints 0.125 and 0.875.
        enc.encode(Pass::train(2, 0), &[0.0, 1.0], 1, &mut bytes).unwrap();
        dec.decode(Pass::train(2, 0), &bytes, 1, &mut got).unwrap();
        assert_eq!(got, [0.125, 0.875]);
        // eq. 11: e = g' - decode(g') = [-0.375, 0.375]; Alg. 6 line 7 would give [-0.125, 0.125].
        assert_eq!(enc.residual(), [-0.375, 0.375]);
        let before = enc.residual().to_vec();
        enc.encode(Pass::eval(), &[3.0, 4.0], 1, &mut Vec::new()).unwrap();
        assert_eq!(enc.residual(), before, "evaluation leaves the residual alone");
        assert_eq!(bytes.len(), bucket::block_len(1, 2));
    }

    proptest! {
        /// Over 500 random rounds at any width: the decoded rows sum to the true rows minus the
        /// final residual, and the residual stays within the range of the gradients.
        #[test]
        fn decoded_sums_match_and_the_residual_stays_bounded(
            bits in prop::sample::select(bucket::BUCKET_BITS.to_vec()),
            seed in any::<u64>(),
        ) {
            let (n, rounds) = (8usize, 500usize);
            let knob = Knob::new(bits);
            let (mut enc, mut dec) = (ResEc::new(knob.clone()), ResEc::new(knob));
            let mut rng = graph_partition::rng::SplitMix64::new(seed);
            let (mut sent, mut truth) = (vec![0.0f64; n], vec![0.0f64; n]);
            let mut got = vec![0.0f32; n];
            for round in 0..rounds {
                let rows: Vec<f32> = (0..n).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect();
                let mut bytes = Vec::new();
                enc.encode(Pass::train(round as u64 + 1, 0), &rows, 2, &mut bytes).unwrap();
                dec.decode(Pass::train(round as u64 + 1, 0), &bytes, 2, &mut got).unwrap();
                for i in 0..n {
                    sent[i] += f64::from(got[i]);
                    truth[i] += f64::from(rows[i]);
                }
                // |e| <= (range of g') / 2^(B+1) and range(g') <= 2 + 2 max|e| give max|e| <= 1.
                prop_assert!(enc.residual().iter().all(|e| e.abs() <= 1.0 + 1e-5), "round {}: {:?}", round, enc.residual());
            }
            for i in 0..n {
                let expected = truth[i] - f64::from(enc.residual()[i]);
                prop_assert!((sent[i] - expected).abs() < 1e-3, "{}: {} vs {}", i, sent[i], expected);
            }
        }
    }
}
