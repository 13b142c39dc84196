//! A decorator that sends only the rows the receiver does not already hold.
//!
//! Both ends keep the block the receiver currently holds. The encoder sends a row when its bits
//! differ from the held row, through the inner codec, framed by a row mask ([`super::mask`]);
//! the decoder fills the rows not sent from the held block. With a lossy inner codec the held
//! block is what the receiver *decoded*, not what was sent: the encoder decodes its own payload
//! with a shadow of the receiver's decoder, so both ends hold bit-identical blocks (the drift
//! CDFGNN's Alg. 2 has when it stores the sent value instead).

use std::sync::Arc;

use super::mask::{read_mask, write_mask};
use super::{Codec, CodecError, CodecFactory, CodecStats, row_count};
use crate::state::{StateError, StateReader, put_bytes, put_f32s, put_optional, restore_optional};
use crate::stream::{Pass, Side, Stream};

const NAME: &str = "skip-repeats";

/// Skips rows equal to what the receiver holds (see the module docs).
pub struct SkipRepeats {
    inner: Box<dyn Codec>,
    /// Encoder side: the receiver's decoder, run on our own payload.
    shadow: Option<Box<dyn Codec>>,
    /// The block the receiver holds; `None` before the first message.
    held: Option<Vec<f32>>,
    /// Rows decoded from one message.
    scratch: Vec<f32>,
    /// The encoder's flags of the rows it sends, and their values, for one message.
    sent: Vec<bool>,
    picked: Vec<f32>,
    stats: CodecStats,
}

impl SkipRepeats {
    /// The encoder of a stream: `inner` encodes, `shadow` (the same kind of codec as the
    /// receiver's, built for the decode side) tracks what the receiver decodes.
    pub fn encoder(inner: Box<dyn Codec>, shadow: Box<dyn Codec>) -> Self {
        Self { shadow: Some(shadow), ..Self::decoder(inner) }
    }

    /// The decoder of a stream.
    pub fn decoder(inner: Box<dyn Codec>) -> Self {
        Self {
            inner,
            shadow: None,
            held: None,
            scratch: Vec::new(),
            sent: Vec::new(),
            picked: Vec::new(),
            stats: CodecStats::default(),
        }
    }

    /// Wraps every codec `inner` makes.
    pub fn over(inner: CodecFactory) -> CodecFactory {
        Arc::new(move |stream: &Stream| {
            Box::new(match stream.id.side {
                Side::Encode => {
                    let mut receiver = stream.clone();
                    receiver.id.side = Side::Decode;
                    Self::encoder(inner(stream), inner(&receiver))
                }
                Side::Decode => Self::decoder(inner(stream)),
            })
        })
    }

    /// The held block, sized for `len` values on the stream's first message.
    fn held(&mut self, len: usize) -> Result<(&mut Vec<f32>, bool), CodecError> {
        let first = self.held.is_none();
        let held = self.held.get_or_insert_with(|| vec![0.0; len]);
        if held.len() != len {
            return Err(CodecError::StreamShape { codec: NAME, expected: held.len(), actual: len });
        }
        Ok((held, first))
    }
}

impl Codec for SkipRepeats {
    fn name(&self) -> String {
        format!("{NAME}({})", self.inner.name())
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let n = row_count(NAME, rows.len(), width)?;
        let (_, first) = self.held(rows.len())?;
        let held = self.held.as_deref().expect("held was set above");
        self.sent.clear();
        self.picked.clear();
        for (now, before) in rows.chunks_exact(width.max(1)).zip(held.chunks_exact(width.max(1))).take(n) {
            let changed = first || now.iter().zip(before).any(|(a, b)| a.to_bits() != b.to_bits());
            self.sent.push(changed);
            if changed {
                self.picked.extend_from_slice(now);
            }
        }
        let (sent, picked) = (&self.sent, &self.picked);
        write_mask(sent, out);
        let start = out.len();
        self.inner.encode(pass, picked, width, out)?;
        let shadow = self
            .shadow
            .as_mut()
            .ok_or(CodecError::Malformed { codec: NAME, detail: "a decode-side instance cannot encode".to_string() })?;
        self.scratch.resize(picked.len(), 0.0);
        shadow.decode(pass, &out[start..], width, &mut self.scratch)?;
        let held = self.held.as_mut().expect("held was set above");
        land(held, sent, &self.scratch, width);
        let sent_rows = picked.len() / width.max(1);
        self.stats.rows_skipped += (n - sent_rows) as u64;
        for (truth, got) in rows.iter().zip(held.iter()) {
            self.stats.err_sq += f64::from(truth - got).powi(2);
            self.stats.ref_sq += f64::from(*truth).powi(2);
        }
        let inner = self.inner.take_stats();
        self.stats.bits.iter_mut().zip(&inner.bits).for_each(|(a, b)| *a += b);
        Ok(())
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        let n = row_count(NAME, out.len(), width)?;
        let (sent, payload) = read_mask(NAME, bytes, n)?;
        let (_, first) = self.held(out.len())?;
        if first && sent.iter().any(|s| !s) {
            return Err(CodecError::Malformed {
                codec: NAME,
                detail: "the stream's first message skips rows the receiver never held".to_string(),
            });
        }
        let count = sent.iter().filter(|&&s| s).count();
        self.scratch.resize(count * width, 0.0);
        self.inner.decode(pass, payload, width, &mut self.scratch)?;
        let held = self.held.as_mut().expect("held was set above");
        land(held, &sent, &self.scratch, width);
        out.copy_from_slice(held);
        Ok(())
    }

    fn take_stats(&mut self) -> CodecStats {
        std::mem::take(&mut self.stats)
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        out.push(self.held.is_some() as u8);
        put_f32s(out, self.held.as_deref().unwrap_or_default());
        let mut inner = Vec::new();
        self.inner.save_state(&mut inner)?;
        put_bytes(out, &inner);
        put_optional(out, self.shadow.as_deref(), |shadow, out| shadow.save_state(out))?;
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(NAME, bytes);
        let has_held = r.u8("whether a block is held")? != 0;
        let held = r.f32s("the held block")?;
        self.held = has_held.then_some(held);
        self.inner.restore_state(r.bytes("the inner codec's state")?)?;
        let shadow = r.optional("the encoder's shadow decoder")?;
        restore_optional("the encoder's shadow decoder", self.shadow.as_deref_mut(), shadow, |mine, saved| {
            mine.restore_state(saved)
        })?;
        r.finish()
    }
}

/// Writes the decoded rows of a message into the held block, at the rows `sent` flags.
fn land(held: &mut [f32], sent: &[bool], decoded: &[f32], width: usize) {
    let targets = sent.iter().enumerate().filter(|(_, s)| **s).map(|(r, _)| r);
    for (r, row) in targets.zip(decoded.chunks_exact(width.max(1))) {
        held[r * width..][..width].copy_from_slice(row);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::IdentityCodec;
    use crate::stream::{Direction, Route, Step, StreamId, Tag};

    /// Rounds every value to a multiple of 1/4: lossy, stateless.
    struct Quarter;

    impl Codec for Quarter {
        fn name(&self) -> String {
            "quarter".into()
        }
        fn encode(&mut self, p: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
            let rounded: Vec<f32> = rows.iter().map(|v| (v * 4.0).round() / 4.0).collect();
            IdentityCodec.encode(p, &rounded, width, out)
        }
        fn decode(&mut self, p: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
            IdentityCodec.decode(p, bytes, width, out)
        }
    }

    fn pair(inner: CodecFactory) -> (Box<dyn Codec>, Box<dyn Codec>) {
        let tag = Tag::new(0, Direction::Forward, Step::Halo);
        let id = StreamId { tag, route: Route::ToCopies, peer: 1, side: Side::Encode };
        let stream = Stream { id, rows: Arc::from(vec![0u32, 1, 2]) };
        let factory = SkipRepeats::over(inner);
        let mut decode_side = stream.clone();
        decode_side.id.side = Side::Decode;
        (factory(&stream), factory(&decode_side))
    }

    const P: Pass = Pass { mode: crate::Mode::Train, epoch: 1, step: 0 };

    #[test]
    fn repeated_rows_cost_one_bit_and_decode_exactly() {
        let (mut enc, mut dec) = pair(Arc::new(|_: &Stream| Box::new(IdentityCodec)));
        assert_eq!(enc.name(), "skip-repeats(identity)");
        let mut first = Vec::new();
        enc.encode(P, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, &mut first).unwrap();
        assert_eq!(first.len(), 1 + 24);
        let mut out = [0.0f32; 6];
        dec.decode(P, &first, 2, &mut out).unwrap();
        assert_eq!(out, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut second = Vec::new();
        enc.encode(P, &[1.0, 2.0, 3.5, 4.0, 5.0, 6.0], 2, &mut second).unwrap();
        assert_eq!(second, [0b010, 0, 0, 0x60, 0x40, 0, 0, 0x80, 0x40]);
        dec.decode(P, &second, 2, &mut out).unwrap();
        assert_eq!(out, [1.0, 2.0, 3.5, 4.0, 5.0, 6.0]);
        let stats = enc.take_stats();
        assert_eq!((stats.rows_skipped, stats.err_sq), (2, 0.0));
    }

    #[test]
    fn a_first_message_that_skips_rows_is_refused() {
        let (_, mut dec) = pair(Arc::new(|_: &Stream| Box::new(IdentityCodec)));
        let mut out = [0.0f32; 2];
        let err = dec.decode(P, &[0b01, 0, 0, 0x80, 0x3f], 1, &mut out).unwrap_err();
        assert!(matches!(err, CodecError::Malformed { .. }), "{err}");
    }

    proptest! {
        /// Over any sequence of messages, with a lossy inner codec, the encoder's record of what
        /// the receiver holds equals what the receiver decodes, bit for bit.
        #[test]
        fn both_ends_hold_the_same_block(steps in proptest::collection::vec(proptest::collection::vec(-4i8..4, 6), 1..12)) {
            let (mut enc, mut dec) = pair(Arc::new(|_: &Stream| Box::new(Quarter)));
            let mut got = [0.0f32; 6];
            for step in steps {
                let rows: Vec<f32> = step.iter().map(|&v| f32::from(v) * 0.3).collect();
                let mut bytes = Vec::new();
                enc.encode(P, &rows, 3, &mut bytes).unwrap();
                dec.decode(P, &bytes, 3, &mut got).unwrap();
                for (g, r) in got.iter().zip(&rows) {
                    prop_assert!((g - r).abs() <= 0.125 + 1e-6, "{g} vs {r}");
                }
                let stats = enc.take_stats();
                let err: f64 = got.iter().zip(&rows).map(|(g, r)| f64::from(g - r).powi(2)).sum();
                prop_assert!((stats.err_sq - err).abs() < 1e-9, "the encoder's error is the receiver's");
            }
        }
    }
}
