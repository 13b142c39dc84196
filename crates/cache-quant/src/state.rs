//! The checkpoint form of a codec's, cache's or controller's state between epochs: simple
//! little-endian framing, every variable-length part prefixed by its length, so that a state
//! of another shape (another model, partition or method) is an error naming what differs
//! rather than a misread.
//!
//! Codec state is training-only (evaluation passes go around the codecs), so at an epoch
//! boundary it is complete: nothing is in flight.
//!
//! `Codec::save_state` / `restore_state` are stateless by default; decorators nest their inner
//! codec's state. `CodecBank` saves its streams in key order and, on restore, rebuilds each codec
//! through the factory for its stream's rows before restoring it. `ReplicaCache`, the `BitTable`
//! and the `QuantProbe` save and restore their state here too.

use thiserror::Error;

use crate::codec::le::{extend_le, read_le};
use crate::stream::{Direction, Route, Side, Step, StreamId, Tag};

/// Why a saved state does not fit what it is restored into.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct StateError(pub String);

impl StateError {
    /// Prefixes the message with what was being restored.
    pub fn context(self, what: impl std::fmt::Display) -> Self {
        Self(format!("{what}: {}", self.0))
    }
}

/// Appends a `u64` length prefix and `bytes`.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend((bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends a length prefix and the values.
pub fn put_f32s(out: &mut Vec<u8>, values: &[f32]) {
    out.extend((values.len() as u64).to_le_bytes());
    extend_le(out, values);
}

/// Appends `f64` values, length-prefixed.
pub fn put_f64s(out: &mut Vec<u8>, values: &[f64]) {
    out.extend((values.len() as u64).to_le_bytes());
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

/// Appends one `f64`.
pub fn put_f64(out: &mut Vec<u8>, value: f64) {
    out.extend(value.to_le_bytes());
}

/// Appends an optional `f64`: a presence byte, then the value (zero when absent).
pub fn put_opt_f64(out: &mut Vec<u8>, value: Option<f64>) {
    out.push(value.is_some() as u8);
    put_f64(out, value.unwrap_or_default());
}

/// Appends an optional part's state: a presence byte, then what `save` writes for the part,
/// length-prefixed (empty when absent).
pub fn put_optional<T: ?Sized>(
    out: &mut Vec<u8>,
    part: Option<&T>,
    save: impl FnOnce(&T, &mut Vec<u8>) -> Result<(), StateError>,
) -> Result<(), StateError> {
    out.push(part.is_some() as u8);
    let mut section = Vec::new();
    if let Some(part) = part {
        save(part, &mut section)?;
    }
    put_bytes(out, &section);
    Ok(())
}

/// Restores an optional part from what [`StateReader::optional`] read. A part present on one
/// side only means the state comes from another configuration: an error naming the part.
pub fn restore_optional<T: ?Sized>(
    part: &str,
    mine: Option<&mut T>,
    saved: Option<&[u8]>,
    restore: impl FnOnce(&mut T, &[u8]) -> Result<(), StateError>,
) -> Result<(), StateError> {
    match (mine, saved) {
        (Some(mine), Some(saved)) => restore(mine, saved),
        (None, None) => Ok(()),
        (mine, _) => {
            let side = |present: bool| if present { "present" } else { "absent" };
            let (was, is) = (side(mine.is_none()), side(mine.is_some()));
            Err(StateError(format!("{part}: {was} in the saved state, {is} in this run")))
        }
    }
}

/// Appends a stream's key.
pub fn put_stream(out: &mut Vec<u8>, id: StreamId) {
    put_tag(out, id.tag);
    out.push(id.route as u8);
    out.extend((id.peer as u64).to_le_bytes());
    out.push(id.side as u8);
}

/// Appends a sync point's key.
pub fn put_tag(out: &mut Vec<u8>, tag: Tag) {
    out.extend((tag.layer as u64).to_le_bytes());
    out.push(tag.dir as u8);
    out.push(tag.step as u8);
}

/// Reads what the `put_*` functions wrote, in the same order.
pub struct StateReader<'a> {
    what: &'a str,
    bytes: &'a [u8],
}

impl<'a> StateReader<'a> {
    /// A reader of the state of `what` (named in its errors).
    pub fn new(what: &'a str, bytes: &'a [u8]) -> Self {
        Self { what, bytes }
    }

    fn error(&self, detail: impl std::fmt::Display) -> StateError {
        StateError(format!("the saved state of {}: {detail}", self.what))
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], StateError> {
        if self.bytes.len() < n {
            return Err(self.error(format!("{field} needs {n} bytes, {} are left", self.bytes.len())));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// One byte.
    pub fn u8(&mut self, field: &str) -> Result<u8, StateError> {
        Ok(self.take(1, field)?[0])
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, field: &str) -> Result<u64, StateError> {
        let b = self.take(8, field)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// A length prefix, bounded by the bytes left (so a corrupt one cannot ask for memory).
    fn len(&mut self, field: &str, unit: usize) -> Result<usize, StateError> {
        let n = self.u64(field)?;
        if n.saturating_mul(unit as u64) > self.bytes.len() as u64 {
            return Err(self.error(format!("{field} claims {n} items, more than the {} bytes left", self.bytes.len())));
        }
        Ok(n as usize)
    }

    /// A little-endian `f64`.
    pub fn f64(&mut self, field: &str) -> Result<f64, StateError> {
        Ok(f64::from_bits(self.u64(field)?))
    }

    /// What [`put_opt_f64`] wrote.
    pub fn opt_f64(&mut self, field: &str) -> Result<Option<f64>, StateError> {
        let present = self.u8(field)? != 0;
        let value = self.f64(field)?;
        Ok(present.then_some(value))
    }

    /// What [`put_optional`] wrote: the part's state, or `None` when the part was absent.
    pub fn optional(&mut self, field: &str) -> Result<Option<&'a [u8]>, StateError> {
        let present = self.u8(field)? != 0;
        let state = self.bytes(field)?;
        Ok(present.then_some(state))
    }

    /// Length-prefixed bytes.
    pub fn bytes(&mut self, field: &str) -> Result<&'a [u8], StateError> {
        let n = self.len(field, 1)?;
        self.take(n, field)
    }

    /// Length-prefixed `f32`s.
    pub fn f32s(&mut self, field: &str) -> Result<Vec<f32>, StateError> {
        let n = self.len(field, 4)?;
        let mut out = vec![0.0; n];
        read_le(self.take(4 * n, field)?, &mut out);
        Ok(out)
    }

    /// Length-prefixed `f32`s that must number `expected` (a block of a known shape).
    pub fn f32s_of(&mut self, field: &str, expected: usize) -> Result<Vec<f32>, StateError> {
        let values = self.f32s(field)?;
        if values.len() != expected {
            return Err(self.error(format!("{field} holds {} values, this run's has {expected}", values.len())));
        }
        Ok(values)
    }

    /// Length-prefixed `f64`s.
    pub fn f64s(&mut self, field: &str) -> Result<Vec<f64>, StateError> {
        let n = self.len(field, 8)?;
        let b = self.take(8 * n, field)?;
        Ok(b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
    }

    /// A sync point's key.
    pub fn tag(&mut self) -> Result<Tag, StateError> {
        let layer = self.u64("a layer")? as usize;
        let dir = match self.u8("a direction")? {
            0 => Direction::Forward,
            1 => Direction::Backward,
            d => return Err(self.error(format!("direction {d} is neither forward (0) nor backward (1)"))),
        };
        let step = match self.u8("a step")? {
            0 => Step::Halo,
            1 => Step::Aggregate,
            2 => Step::AttentionMax,
            s => return Err(self.error(format!("step {s} names no exchange step"))),
        };
        Ok(Tag { layer, dir, step })
    }

    /// A stream's key.
    pub fn stream(&mut self) -> Result<StreamId, StateError> {
        let tag = self.tag()?;
        let route = match self.u8("a route")? {
            0 => Route::ToPrimary,
            1 => Route::ToCopies,
            r => return Err(self.error(format!("route {r} names no route"))),
        };
        let peer = self.u64("a peer")? as usize;
        let side = match self.u8("a side")? {
            0 => Side::Encode,
            1 => Side::Decode,
            s => return Err(self.error(format!("side {s} is neither encode (0) nor decode (1)"))),
        };
        Ok(StreamId { tag, route, peer, side })
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Checks that everything was read: trailing bytes mean the state is of another shape.
    pub fn finish(self) -> Result<(), StateError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(self.error(format!("{} bytes are left over", self.bytes.len())))
        }
    }
}

/// The restore of a part that keeps no state: the saved state must be empty too.
pub fn expect_empty(what: &str, bytes: &[u8]) -> Result<(), StateError> {
    StateReader::new(what, bytes).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip_and_short_or_long_input_is_an_error() {
        let id = StreamId {
            tag: Tag::new(2, Direction::Backward, Step::Aggregate),
            route: Route::ToCopies,
            peer: 5,
            side: Side::Decode,
        };
        let mut out = Vec::new();
        put_stream(&mut out, id);
        put_f32s(&mut out, &[1.5, -2.0]);
        put_f64s(&mut out, &[0.25]);
        put_bytes(&mut out, b"xy");
        let mut r = StateReader::new("test", &out);
        assert_eq!(r.stream().unwrap(), id);
        assert_eq!(r.f32s_of("values", 2).unwrap(), [1.5, -2.0]);
        assert_eq!(r.f64s("f64s").unwrap(), [0.25]);
        assert_eq!(r.bytes("bytes").unwrap(), b"xy");
        r.finish().unwrap();
        let mut short = StateReader::new("test", &out[..out.len() - 1]);
        short.stream().unwrap();
        short.f32s("values").unwrap();
        short.f64s("f64s").unwrap();
        assert!(short.bytes("bytes").unwrap_err().0.contains("bytes"));
        let mut huge = Vec::new();
        huge.extend(u64::MAX.to_le_bytes());
        assert!(StateReader::new("test", &huge).f32s("values").unwrap_err().0.contains("claims"));
        assert!(expect_empty("test", b"x").unwrap_err().0.contains("left over"));
    }

    #[test]
    fn optional_parts_round_trip_and_a_part_on_one_side_only_is_named() {
        let save = |v: &u8, out: &mut Vec<u8>| -> Result<(), StateError> {
            out.push(*v);
            Ok(())
        };
        let mut out = Vec::new();
        put_optional(&mut out, Some(&7u8), save).unwrap();
        put_optional(&mut out, None::<&u8>, save).unwrap();
        let mut r = StateReader::new("test", &out);
        let (present, absent) = (r.optional("first").unwrap(), r.optional("second").unwrap());
        r.finish().unwrap();
        assert_eq!((present, absent), (Some(&[7u8][..]), None));

        let restore = |mine: &mut u8, saved: &[u8]| -> Result<(), StateError> {
            *mine = saved[0];
            Ok(())
        };
        let mut mine = 0u8;
        restore_optional("the cache", Some(&mut mine), present, restore).unwrap();
        assert_eq!(mine, 7);
        restore_optional("the cache", None::<&mut u8>, absent, restore).unwrap();
        let extra = restore_optional("the cache", Some(&mut mine), absent, restore).unwrap_err().0;
        assert_eq!(extra, "the cache: absent in the saved state, present in this run");
        let missing = restore_optional("the cache", None::<&mut u8>, present, restore).unwrap_err().0;
        assert_eq!(missing, "the cache: present in the saved state, absent in this run");
    }
}
