//! A decorator that sends exact rows instead of its inner codec's, from the step a shared
//! [`Knob`] says so.
//!
//! Compression pays only where the CPU its codec takes costs less than the wire time its saved
//! bytes are worth. A controller weighs the two from the stats summed over every worker and, where
//! compression does not pay, sets the knob between steps, identically on every rank: the encoder
//! and its decoder on the peer then switch at the same message without a flag on the wire. From
//! then on the stream's messages are [`IdentityCodec`]'s, byte for byte, and the inner codec is
//! never called again. The switch is one-way: a stateful inner codec (error feedback, held
//! blocks) would resume from a stale state, so the controller never clears the knob.
//!
//! The decorator keeps no state of its own across messages; a checkpoint saves the switch with
//! the inner codec's state, and a restore checks it against the knob (which the controller
//! restores first), so a state saved on one side of the switch never resumes on the other.

use std::sync::Arc;

use super::kernel::KernelCodec;
use super::{Codec, CodecError, CodecFactory, CodecStats, IdentityCodec};
use crate::knob::Knob;
use crate::state::{StateError, StateReader, put_bytes};
use crate::stream::{Pass, Stream};

const NAME: &str = "pays-or-exact";

/// The inner codec's messages until `exact` is set, then exact rows (see the module docs).
pub struct PaysOrExact {
    inner: Box<dyn Codec>,
    exact: Knob<bool>,
    identity: IdentityCodec,
}

impl PaysOrExact {
    /// `inner`, until `exact` is set.
    pub fn new(inner: Box<dyn Codec>, exact: Knob<bool>) -> Self {
        Self { inner, exact, identity: IdentityCodec }
    }

    /// Wraps every codec `inner` makes, all reading `exact`.
    pub fn over(inner: CodecFactory, exact: Knob<bool>) -> CodecFactory {
        Arc::new(move |stream: &Stream| Box::new(Self::new(inner(stream), exact.clone())))
    }

    /// The codec the next message goes through.
    fn current(&mut self) -> &mut dyn Codec {
        match self.exact.get() {
            true => &mut self.identity,
            false => self.inner.as_mut(),
        }
    }
}

impl Codec for PaysOrExact {
    fn name(&self) -> String {
        format!("{NAME}({})", self.inner.name())
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        self.current().encode(pass, rows, width, out)
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        self.current().decode(pass, bytes, width, out)
    }

    fn take_stats(&mut self) -> CodecStats {
        self.inner.take_stats()
    }

    /// The inner codec's kernel until the switch (none where it has none), then the identity's.
    fn kernel(&mut self) -> Option<&mut dyn KernelCodec> {
        match self.exact.get() {
            true => Some(&mut self.identity),
            false => self.inner.kernel(),
        }
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        out.push(u8::from(self.exact.get()));
        let mut inner = Vec::new();
        self.inner.save_state(&mut inner)?;
        put_bytes(out, &inner);
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(NAME, bytes);
        let saved_exact = r.u8("whether the stream sent exact rows")? != 0;
        if saved_exact != self.exact.get() {
            let side = |exact: bool| if exact { "exact rows" } else { "the inner codec's" };
            return Err(StateError(format!(
                "{NAME}: the stream was saved sending {}, the run resumes sending {}",
                side(saved_exact),
                side(self.exact.get())
            )));
        }
        self.inner.restore_state(r.bytes("the inner codec's state")?)?;
        r.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SkipRepeats;
    use crate::codec::LinearQuant;
    use crate::stream::{Direction, Route, Side, Step, StreamId, Tag};

    const P: Pass = Pass { mode: crate::Mode::Train, epoch: 1, step: 0 };

    fn stream(side: Side) -> Stream {
        let tag = Tag::new(0, Direction::Forward, Step::Halo);
        Stream { id: StreamId { tag, route: Route::ToCopies, peer: 1, side }, rows: Arc::from(vec![0u32]) }
    }

    /// Skip-repeats over 8-bit quantization, behind `exact`: a stateful stack.
    fn stack(exact: &Knob<bool>) -> (Box<dyn Codec>, Box<dyn Codec>) {
        let inner: CodecFactory = Arc::new(|_: &Stream| Box::new(LinearQuant::new(8).unwrap()));
        let factory = PaysOrExact::over(SkipRepeats::over(inner), exact.clone());
        (factory(&stream(Side::Encode)), factory(&stream(Side::Decode)))
    }

    /// One row of width 4 whose middle values fall between 8-bit levels.
    const ROWS: [f32; 4] = [1.0, 2.1, 3.3, 4.5];

    #[test]
    fn it_sends_the_inner_codecs_bytes_until_the_switch_then_the_identitys() {
        let exact = Knob::new(false);
        let (mut enc, mut dec) = stack(&exact);
        assert_eq!(enc.name(), "pays-or-exact(skip-repeats(linear8))");
        let (mut lossy, mut out) = (Vec::new(), [0.0f32; 4]);
        enc.encode(P, &ROWS, 4, &mut lossy).unwrap();
        dec.decode(P, &lossy, 4, &mut out).unwrap();
        let inner: CodecFactory = Arc::new(|_: &Stream| Box::new(LinearQuant::new(8).unwrap()));
        let mut alone = Vec::new();
        SkipRepeats::over(inner)(&stream(Side::Encode)).encode(P, &ROWS, 4, &mut alone).unwrap();
        assert_eq!(lossy, alone, "before the switch the inner codec's bytes");
        assert!(out.iter().zip(&ROWS).any(|(a, b)| a != b), "8 bits lose something here");
        exact.set(true);
        let mut sent = Vec::new();
        enc.encode(P, &ROWS, 4, &mut sent).unwrap();
        let mut identity = Vec::new();
        IdentityCodec.encode(P, &ROWS, 4, &mut identity).unwrap();
        assert_eq!(sent, identity, "after the switch the identity's bytes, no flag");
        dec.decode(P, &sent, 4, &mut out).unwrap();
        assert_eq!(out, ROWS);
        assert!(matches!(enc.kernel().map(|k| k.encoding(P, 1)), Some(Ok(crate::Encoding::Exact))));
    }

    #[test]
    fn a_kernel_is_the_inner_codecs_until_the_switch() {
        let exact = Knob::new(false);
        let mut linear = PaysOrExact::new(Box::new(LinearQuant::new(4).unwrap()), exact.clone());
        let encoding = linear.kernel().map(|k| k.encoding(P, 3).unwrap());
        assert_eq!(encoding, Some(crate::Encoding::Linear { bits: 4 }));
        let (mut decorated, _) = stack(&exact);
        assert!(decorated.kernel().is_none(), "skip-repeats has no kernel");
        exact.set(true);
        assert!(decorated.kernel().is_some(), "exact rows have one");
    }

    #[test]
    fn a_state_restores_only_on_its_side_of_the_switch() {
        let exact = Knob::new(false);
        let (mut enc, _) = stack(&exact);
        enc.encode(P, &ROWS, 4, &mut Vec::new()).unwrap();
        let mut saved = Vec::new();
        enc.save_state(&mut saved).unwrap();
        let (mut same, _) = stack(&Knob::new(false));
        same.restore_state(&saved).unwrap();
        // The restored encoder holds the block: an unchanged block skips every row.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        enc.encode(P, &ROWS, 4, &mut a).unwrap();
        same.encode(P, &ROWS, 4, &mut b).unwrap();
        assert_eq!(a, b);
        let (mut switched, _) = stack(&Knob::new(true));
        let err = switched.restore_state(&saved).unwrap_err().to_string();
        assert!(err.contains("saved sending the inner codec's") && err.contains("resumes sending exact rows"), "{err}");
        let mut cut = saved.clone();
        cut.truncate(saved.len() - 1);
        assert!(stack(&Knob::new(false)).0.restore_state(&cut).is_err());
    }
}
