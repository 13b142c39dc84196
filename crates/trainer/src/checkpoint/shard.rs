//! One rank's shard of a checkpoint: a small versioned binary file.
//!
//! Layout (little-endian): the magic `HALOCKPT`, the format version (u32), rank and world size
//! (u32 each), the epoch (u64), the fingerprint of the rank's data (u64), then four
//! length-prefixed sections (u64 length): the parameters (f32), the parameters of the best
//! validation epoch (a presence byte first), Adam's two moments (f32) and step count (u64), and
//! the method's state blob; last, the xxh3-64 of every byte before it. The checksum is verified before anything is decoded, and every length is
//! checked against the bytes left before it is allocated.

use std::path::Path;

use gnn_core::Optim;

use crate::error::CheckpointError;

const MAGIC: &[u8; 8] = b"HALOCKPT";
/// The format version this build writes and reads (2: the method blob holds the exchange's and
/// the controller's state, each with its length).
pub const VERSION: u32 = 2;

/// The optimizer's state besides its settings ([`Optim::state`]): Adam's first and second
/// moments, or SGD's momentum buffer in `m` with `v` empty; and the steps taken.
#[derive(Debug, Clone, PartialEq)]
pub struct Moments {
    pub m: Vec<f32>,
    pub v: Vec<f32>,
    pub t: u64,
}

impl Moments {
    pub fn of(optimizer: &Optim) -> Self {
        let (m, v, t) = optimizer.state();
        Self { m: m.to_vec(), v: v.to_vec(), t }
    }
}

/// What a shard holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    pub rank: u32,
    pub world: u32,
    pub epoch: u64,
    /// Hash of the data the rank trains on (its part of the graph), to refuse a resume on
    /// different data.
    pub fingerprint: u64,
    pub params: Vec<f32>,
    pub best_params: Option<Vec<f32>>,
    pub optimizer: Moments,
    pub method: Vec<u8>,
}

fn put_f32s(out: &mut Vec<u8>, values: &[f32]) {
    out.extend_from_slice(&(values.len() as u64).to_le_bytes());
    values.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

impl Shard {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let floats = self.params.len()
            + self.best_params.as_ref().map_or(0, Vec::len)
            + self.optimizer.m.len()
            + self.optimizer.v.len();
        let mut out = Vec::with_capacity(80 + 4 * floats + self.method.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&self.world.to_le_bytes());
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        put_f32s(&mut out, &self.params);
        match &self.best_params {
            Some(best) => {
                out.push(1);
                put_f32s(&mut out, best);
            }
            None => out.push(0),
        }
        put_f32s(&mut out, &self.optimizer.m);
        put_f32s(&mut out, &self.optimizer.v);
        out.extend_from_slice(&self.optimizer.t.to_le_bytes());
        put_bytes(&mut out, &self.method);
        let checksum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Decodes the bytes of the file at `path` (named in every error).
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<Self, CheckpointError> {
        let corrupt = |detail: String| CheckpointError::Corrupt { path: path.to_path_buf(), detail };
        if bytes.len() < MAGIC.len() + 8 || &bytes[..MAGIC.len()] != MAGIC {
            return Err(corrupt("not a Halo checkpoint shard (no HALOCKPT header)".to_string()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        let stored = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
        if xxhash_rust::xxh3::xxh3_64(body) != stored {
            return Err(corrupt(format!(
                "checksum mismatch over {} bytes: the file is truncated or corrupt",
                bytes.len()
            )));
        }
        let mut r = Reader { rest: &body[MAGIC.len()..] };
        let version = r.u32().map_err(&corrupt)?;
        if version != VERSION {
            return Err(corrupt(format!("format version {version}; this build reads version {VERSION}")));
        }
        let shard = (|| {
            let (rank, world, epoch, fingerprint) = (r.u32()?, r.u32()?, r.u64()?, r.u64()?);
            let params = r.f32s()?;
            let best_params = match r.byte()? {
                0 => None,
                1 => Some(r.f32s()?),
                flag => return Err(format!("best-parameters flag {flag}, expected 0 or 1")),
            };
            let optimizer = Moments { m: r.f32s()?, v: r.f32s()?, t: r.u64()? };
            let method = r.bytes()?.to_vec();
            if !r.rest.is_empty() {
                return Err(format!("{} trailing bytes after the last section", r.rest.len()));
            }
            Ok(Shard { rank, world, epoch, fingerprint, params, best_params, optimizer, method })
        })()
        .map_err(corrupt)?;
        Ok(shard)
    }
}

/// Reads fields off the front of a byte slice; every read checks the length first.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.rest.len() {
            return Err(format!("a field of {n} bytes runs past the end ({} bytes left)", self.rest.len()));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn len(&mut self, unit: usize) -> Result<usize, String> {
        let n = self.u64()?;
        usize::try_from(n).ok().and_then(|n| n.checked_mul(unit)).filter(|&bytes| bytes <= self.rest.len()).ok_or_else(
            || format!("a section of {n} x {unit} bytes runs past the end ({} bytes left)", self.rest.len()),
        )
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.len(1)?;
        self.take(n)
    }

    fn f32s(&mut self) -> Result<Vec<f32>, String> {
        let n = self.len(4)?;
        Ok(self.take(n)?.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnn_core::{Adam, Optim, Optimizer};
    use proptest::prelude::*;

    pub(crate) fn sample() -> Shard {
        let mut adam = Optim::Adam(Adam::new(0.01, 5e-4));
        let mut params = vec![0.5f32, -1.0, 2.0];
        adam.step(&mut params, &[0.1, 0.2, -0.3]).unwrap();
        let optimizer = Moments::of(&adam);
        Shard {
            rank: 1,
            world: 2,
            epoch: 10,
            fingerprint: 42,
            best_params: Some(params.clone()),
            params,
            optimizer,
            method: vec![7, 8, 9],
        }
    }

    #[test]
    fn round_trips() {
        let shard = sample();
        assert_eq!(Shard::decode(Path::new("s.bin"), &shard.encode()).unwrap(), shard);
    }

    #[test]
    fn truncation_and_flips_are_named_errors() {
        let bytes = sample().encode();
        for cut in [0, 7, 20, bytes.len() - 1] {
            let err = Shard::decode(Path::new("ck/rank-0001.bin"), &bytes[..cut]).unwrap_err().to_string();
            assert!(err.contains("ck/rank-0001.bin"), "{err}");
        }
        let mut flipped = bytes.clone();
        flipped[30] ^= 1;
        let err = Shard::decode(Path::new("s.bin"), &flipped).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::checkpoint::fuzz_cases()))]

        /// Mutated shards never panic and never allocate past their own length: they decode
        /// (the mutation kept the checksum right) or fail naming the file.
        #[test]
        fn mutated_shards_are_refused_cleanly(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
            cut in any::<prop::sample::Index>(),
            fix_checksum in any::<bool>(),
        ) {
            let mut bytes = sample().encode();
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let keep = cut.index(bytes.len() + 1);
            bytes.truncate(keep.max(bytes.len().saturating_sub(keep % 64)));
            if fix_checksum && bytes.len() >= 16 {
                // Reach the section parser, past the checksum, as a crafted file would.
                let n = bytes.len() - 8;
                let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..n]).to_le_bytes();
                bytes[n..].copy_from_slice(&sum);
            }
            if let Err(e) = Shard::decode(Path::new("fuzz.bin"), &bytes) {
                prop_assert!(e.to_string().contains("fuzz.bin"));
            }
        }
    }
}
