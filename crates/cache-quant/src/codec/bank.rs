//! One codec instance per message stream, created on first use.
//!
//! Stateful codecs (caches, error feedback, predictors) must see exactly one stream of
//! messages: the encoder of (tag, route, peer) and the matching decoder on the peer evolve in
//! lock step. The bank owns those instances so exchanges stay generic over the codec.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Codec, CodecStats, IdentityCodec};
use crate::state::{StateError, StateReader, put_bytes, put_stream};
use crate::stream::{Stream, StreamId};

/// Makes the codec of a new message stream; it learns the stream's tag, route, peer, side and
/// the global ids of the rows it carries.
pub type CodecFactory = Arc<dyn Fn(&Stream) -> Box<dyn Codec> + Send + Sync>;

/// Codecs keyed by stream.
pub struct CodecBank {
    factory: CodecFactory,
    codecs: HashMap<StreamId, Box<dyn Codec>>,
}

impl CodecBank {
    /// A bank that creates its codecs with `factory`.
    pub fn new(factory: CodecFactory) -> Self {
        Self { factory, codecs: HashMap::new() }
    }

    /// A bank of [`IdentityCodec`]s: exact transport.
    pub fn identity() -> Self {
        Self::new(Arc::new(|_: &Stream| Box::new(IdentityCodec)))
    }

    /// The codec of stream `id`, created on first use with the rows `rows()` names.
    pub fn get(&mut self, id: StreamId, rows: impl FnOnce() -> Arc<[u32]>) -> &mut dyn Codec {
        let factory = &self.factory;
        self.codecs.entry(id).or_insert_with(|| factory(&Stream { id, rows: rows() })).as_mut()
    }

    /// Drains every codec's stats, with the stream each came from.
    pub fn take_stats(&mut self) -> impl Iterator<Item = (StreamId, CodecStats)> + '_ {
        self.codecs.iter_mut().map(|(id, codec)| (*id, codec.take_stats()))
    }

    /// A throw-away codec of the stack this bank makes.
    fn probe(&self) -> Box<dyn Codec> {
        let probe = crate::stream::Tag::new(0, crate::Direction::Forward, crate::Step::Halo);
        let id = StreamId { tag: probe, route: crate::Route::ToCopies, peer: 0, side: crate::Side::Encode };
        (self.factory)(&Stream { id, rows: Arc::from(Vec::new()) })
    }

    /// Name of the codec stack this bank makes: of the first stream in key order seen so far
    /// (the same on every run, where streams' stacks differ), or of a fresh one.
    pub fn codec_name(&self) -> String {
        match self.codecs.iter().min_by_key(|(id, _)| **id).map(|(_, codec)| codec) {
            Some(codec) => codec.name(),
            None => self.probe().name(),
        }
    }

    /// Appends every stream's codec state, streams in key order. Before the first message it
    /// asks a fresh codec, so that a stack whose state cannot be saved is refused up front.
    pub fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        if self.codecs.is_empty() {
            self.probe().save_state(&mut Vec::new())?;
        }
        let mut ids: Vec<&StreamId> = self.codecs.keys().collect();
        ids.sort();
        out.extend((ids.len() as u64).to_le_bytes());
        let mut state = Vec::new();
        for id in ids {
            put_stream(out, *id);
            state.clear();
            self.codecs[id].save_state(&mut state)?;
            put_bytes(out, &state);
        }
        Ok(())
    }

    /// Replaces the bank's codecs with those a [`CodecBank::save_state`] saved, each made
    /// afresh for its stream (whose rows `rows` gives, as on first use) and then restored.
    pub fn restore_state(
        &mut self,
        bytes: &[u8],
        mut rows: impl FnMut(StreamId) -> Result<Arc<[u32]>, StateError>,
    ) -> Result<(), StateError> {
        let mut r = StateReader::new("a codec bank", bytes);
        let count = r.u64("the stream count")?;
        let mut codecs = HashMap::new();
        for _ in 0..count {
            let id = r.stream()?;
            let state = r.bytes("a codec state")?;
            let mut codec = (self.factory)(&Stream { id, rows: rows(id)? });
            let stream = |e: StateError| {
                e.context(format_args!("stream {} {} peer {} {:?}", id.tag, id.route, id.peer, id.side))
            };
            codec.restore_state(state).map_err(stream)?;
            codecs.insert(id, codec);
        }
        r.finish()?;
        self.codecs = codecs;
        Ok(())
    }

    /// Number of streams seen so far.
    pub fn len(&self) -> usize {
        self.codecs.len()
    }

    /// Whether no stream has been used yet.
    pub fn is_empty(&self) -> bool {
        self.codecs.is_empty()
    }
}

impl std::fmt::Debug for CodecBank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodecBank").field("streams", &self.codecs.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CodecError;
    use crate::stream::{Direction, Pass, Route, Side, Step, Tag};

    /// Counts the messages it encoded and remembers its stream's first row id.
    struct Counting(u8, u32);

    impl Codec for Counting {
        fn name(&self) -> String {
            "counting".into()
        }
        fn encode(&mut self, _: Pass, _rows: &[f32], _width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
            self.0 += 1;
            out.extend([self.0, self.1 as u8]);
            Ok(())
        }
        fn decode(&mut self, _: Pass, _bytes: &[u8], _width: usize, _out: &mut [f32]) -> Result<(), CodecError> {
            Ok(())
        }
    }

    fn id(peer: usize) -> StreamId {
        StreamId { tag: Tag::new(0, Direction::Forward, Step::Halo), route: Route::ToCopies, peer, side: Side::Encode }
    }

    #[test]
    fn each_stream_keeps_its_own_state_and_learns_its_rows() {
        let mut bank =
            CodecBank::new(Arc::new(|s: &Stream| Box::new(Counting(0, s.rows.first().copied().unwrap_or(0)))));
        assert!(bank.is_empty());
        let mut out = Vec::new();
        let pass = Pass::train(1, 0);
        bank.get(id(1), || Arc::from(vec![7u32])).encode(pass, &[], 1, &mut out).unwrap();
        bank.get(id(1), || unreachable!("the stream exists")).encode(pass, &[], 1, &mut out).unwrap();
        bank.get(id(2), || Arc::from(vec![9u32])).encode(pass, &[], 1, &mut out).unwrap();
        assert_eq!(out, [1, 7, 2, 7, 1, 9]);
        assert_eq!(bank.len(), 2);
        assert_eq!(bank.codec_name(), "counting");
    }

    /// A bank of skip-repeats over 8-bit quantization that has encoded `messages` blocks on
    /// one stream, and the bytes of those messages.
    fn skip_repeats_bank() -> CodecBank {
        let inner: CodecFactory = Arc::new(|_: &Stream| Box::new(crate::LinearQuant::new(8).unwrap()));
        CodecBank::new(crate::SkipRepeats::over(inner))
    }

    fn rows(_: StreamId) -> Result<Arc<[u32]>, StateError> {
        Ok(Arc::from(vec![0u32, 1]))
    }

    #[test]
    fn a_restored_bank_encodes_the_next_message_like_the_original() {
        let mut bank = skip_repeats_bank();
        let (mut out, pass) = (Vec::new(), Pass::train(1, 0));
        for block in [[1.0f32, 2.0, 3.0, 4.0], [1.0, 2.0, 3.5, 4.0]] {
            bank.get(id(1), || Arc::from(vec![0u32, 1])).encode(pass, &block, 2, &mut out).unwrap();
        }
        let mut saved = Vec::new();
        bank.save_state(&mut saved).unwrap();
        let mut restored = skip_repeats_bank();
        restored.restore_state(&saved, rows).unwrap();
        let next = [1.0f32, 2.0, 3.5, 5.0];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        bank.get(id(1), || unreachable!()).encode(pass, &next, 2, &mut a).unwrap();
        restored.get(id(1), || unreachable!("restored")).encode(pass, &next, 2, &mut b).unwrap();
        assert_eq!(a, b);
        // A fresh bank would resend the unchanged first row.
        let mut fresh = Vec::new();
        skip_repeats_bank().get(id(1), || Arc::from(vec![0u32, 1])).encode(pass, &next, 2, &mut fresh).unwrap();
        assert_ne!(a, fresh);
        // Into a stack without state, the saved state is an error naming the stream.
        let err = CodecBank::identity().restore_state(&saved, rows).unwrap_err().to_string();
        assert!(err.contains("stream fwd/0/halo") && err.contains("left over"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn mutated_or_cut_states_restore_or_fail_cleanly(at in 0usize..4096, byte in proptest::num::u8::ANY, cut in proptest::bool::ANY) {
            let mut bank = skip_repeats_bank();
            bank.get(id(1), || Arc::from(vec![0u32, 1])).encode(Pass::train(1, 0), &[1.0, 2.0, 3.0, 4.0], 2, &mut Vec::new()).unwrap();
            let mut saved = Vec::new();
            bank.save_state(&mut saved).unwrap();
            let at = at % saved.len();
            if cut { saved.truncate(at) } else { saved[at] = byte }
            let _ = skip_repeats_bank().restore_state(&saved, rows);
        }
    }

    #[test]
    fn identity_bank_makes_identity_codecs() {
        let bank = CodecBank::identity();
        assert_eq!(bank.codec_name(), "identity");
    }
}
