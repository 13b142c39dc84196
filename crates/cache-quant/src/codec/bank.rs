//! One codec instance per message stream, created on first use.
//!
//! Stateful codecs (error feedback, predictors) must see exactly one stream of messages: the
//! encoder for (layer, direction, peer) and the matching decoder on the peer evolve in lock step.
//! The bank owns those instances so exchanges can stay generic over the codec.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use super::{Codec, IdentityCodec};

/// Makes a fresh codec for a new message stream.
pub type CodecFactory = Arc<dyn Fn() -> Box<dyn Codec> + Send + Sync>;

/// Codecs keyed by message stream `K` (e.g. layer, direction, peer, send or receive side).
pub struct CodecBank<K> {
    factory: CodecFactory,
    codecs: HashMap<K, Box<dyn Codec>>,
}

impl<K: Hash + Eq> CodecBank<K> {
    /// A bank that creates its codecs with `factory`.
    pub fn new(factory: CodecFactory) -> Self {
        Self { factory, codecs: HashMap::new() }
    }

    /// A bank of [`IdentityCodec`]s: exact transport.
    pub fn identity() -> Self {
        Self::new(Arc::new(|| Box::new(IdentityCodec)))
    }

    /// The codec of stream `key`, created on first use.
    pub fn get(&mut self, key: K) -> &mut dyn Codec {
        let factory = &self.factory;
        self.codecs.entry(key).or_insert_with(|| factory()).as_mut()
    }

    /// Name of the codecs this bank makes.
    pub fn codec_name(&self) -> &'static str {
        (self.factory)().name()
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

impl<K> std::fmt::Debug for CodecBank<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodecBank").field("streams", &self.codecs.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CodecError;

    /// Counts the messages it encoded, so the test can see which instance served a stream.
    struct Counting(u8);

    impl Codec for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn encode_rows(&mut self, _rows: &[f32], _width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
            self.0 += 1;
            out.push(self.0);
            Ok(())
        }
        fn decode_rows(&mut self, _bytes: &[u8], _width: usize, _out: &mut [f32]) -> Result<(), CodecError> {
            Ok(())
        }
    }

    #[test]
    fn each_stream_keeps_its_own_state() {
        let mut bank: CodecBank<(usize, u32)> = CodecBank::new(Arc::new(|| Box::new(Counting(0))));
        assert!(bank.is_empty());
        let mut out = Vec::new();
        bank.get((0, 1)).encode_rows(&[], 1, &mut out).unwrap();
        bank.get((0, 1)).encode_rows(&[], 1, &mut out).unwrap();
        bank.get((1, 1)).encode_rows(&[], 1, &mut out).unwrap();
        assert_eq!(out, [1, 2, 1]);
        assert_eq!(bank.len(), 2);
        assert_eq!(bank.codec_name(), "counting");
    }

    #[test]
    fn identity_bank_makes_identity_codecs() {
        let mut bank: CodecBank<u8> = CodecBank::identity();
        assert_eq!(bank.get(3).name(), "identity");
        assert_eq!(bank.codec_name(), "identity");
    }
}
