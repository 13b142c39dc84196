//! EC-Graph's error-compensated compression of an edge-cut exchange: bucket compression
//! ([`super::bucket`]) of the forward halo rows with requesting-end compensation
//! ([`ReqEc`], ReqEC-FP) and of the backward halo gradients with responding-end compensation
//! ([`ResEc`], ResEC-BP), each switchable, plus the [`SelectorTally`] through which the
//! encoders report their selector ids to the bit tuner.

mod reqec;
mod resec;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

pub use reqec::{ReqEc, Round, Selector, TrendState, message_len, selector_bytes};
pub use resec::ResEc;

use super::bucket::BucketCodec;
use super::{Codec, CodecFactory, IdentityCodec};
use crate::knob::Knob;
use crate::stream::{Direction, Route, Side, Stream};

/// Per forward layer, the rows this worker's ReqEC encoders sent in each way since the last
/// [`SelectorTally::take`]: `[full, compressed, predicted, average]`.
#[derive(Debug, Clone, Default)]
pub struct SelectorTally(Arc<Mutex<BTreeMap<usize, [u64; 4]>>>);

impl SelectorTally {
    /// Adds `counts` under `layer`.
    pub fn add(&self, layer: usize, counts: [u64; 4]) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.entry(layer).or_default();
        entry.iter_mut().zip(counts).for_each(|(a, b)| *a += b);
    }

    /// The counts since the last call, and resets them.
    pub fn take(&self) -> BTreeMap<usize, [u64; 4]> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// How one direction's halo rows travel.
#[derive(Debug, Clone)]
pub enum Compression {
    /// Exactly.
    Exact,
    /// Bucket compression at the width the knob holds.
    Bucket(Knob<u8>),
    /// Bucket compression with the direction's compensation (ReqEC-FP forward, ResEC-BP
    /// backward).
    Compensated(Knob<u8>),
}

/// Settings of EC-Graph's codec stack on an edge-cut exchange.
#[derive(Debug, Clone)]
pub struct EcGraphCodecs {
    /// Forward (halo rows), per layer: the bit tuner sets each layer's width.
    pub forward: Vec<Compression>,
    /// Backward (halo gradients), per layer.
    pub backward: Vec<Compression>,
    /// ReqEC-FP trend group length `T_tr`.
    pub trend: u64,
    /// Ship `M_cr` with full rounds (the paper's bytes) instead of deriving it at the receiver.
    pub send_change_rate: bool,
    /// Where ReqEC encoders count their selectors.
    pub tally: SelectorTally,
}

impl EcGraphCodecs {
    /// The factory of every stream's codec: forward halo rows ([`Route::ToCopies`]) and backward
    /// halo gradients ([`Route::ToPrimary`]) as configured, anything else exactly.
    pub fn factory(self) -> CodecFactory {
        Arc::new(move |stream: &Stream| -> Box<dyn Codec> {
            let id = stream.id;
            let layer = id.tag.layer;
            let choice = match (id.tag.dir, id.route) {
                (Direction::Forward, Route::ToCopies) => self.forward.get(layer),
                (Direction::Backward, Route::ToPrimary) => self.backward.get(layer),
                _ => None,
            };
            match (choice, id.tag.dir) {
                (None | Some(Compression::Exact), _) => Box::new(IdentityCodec),
                (Some(Compression::Bucket(bits)), _) => Box::new(BucketCodec::new(bits.clone())),
                (Some(Compression::Compensated(bits)), Direction::Forward) => {
                    let tally = (id.side == Side::Encode).then(|| (self.tally.clone(), layer));
                    Box::new(ReqEc::new(self.trend, bits.clone(), self.send_change_rate, tally))
                }
                (Some(Compression::Compensated(bits)), Direction::Backward) => Box::new(ResEc::new(bits.clone())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{Pass, Step, StreamId, Tag};

    fn stream(layer: usize, dir: Direction, route: Route, side: Side) -> Stream {
        let id = StreamId { tag: Tag::new(layer, dir, Step::Halo), route, peer: 1, side };
        Stream { id, rows: Arc::from(vec![0u32]) }
    }

    #[test]
    fn the_factory_picks_each_direction_and_layer_codec() {
        let tally = SelectorTally::default();
        let codecs = EcGraphCodecs {
            forward: vec![Compression::Compensated(Knob::new(2)), Compression::Bucket(Knob::new(4))],
            backward: vec![Compression::Exact, Compression::Compensated(Knob::new(4))],
            trend: 10,
            send_change_rate: false,
            tally: tally.clone(),
        };
        let make = codecs.factory();
        let name = |l, d, r| make(&stream(l, d, r, Side::Encode)).name();
        assert_eq!(name(0, Direction::Forward, Route::ToCopies), "reqec(bucket)");
        assert_eq!(name(1, Direction::Forward, Route::ToCopies), "bucket");
        assert_eq!(name(0, Direction::Backward, Route::ToPrimary), "identity");
        assert_eq!(name(1, Direction::Backward, Route::ToPrimary), "resec(bucket)");
        assert_eq!(name(5, Direction::Forward, Route::ToCopies), "identity");
        // Only encoders count selectors.
        let mut dec = make(&stream(0, Direction::Forward, Route::ToCopies, Side::Decode));
        let mut enc = make(&stream(0, Direction::Forward, Route::ToCopies, Side::Encode));
        let mut bytes = Vec::new();
        enc.encode(Pass::train(1, 0), &[1.0, 2.0], 2, &mut bytes).unwrap();
        dec.decode(Pass::train(1, 0), &bytes, 2, &mut [0.0; 2]).unwrap();
        assert_eq!(tally.take()[&0], [1, 0, 0, 0]);
    }
}
