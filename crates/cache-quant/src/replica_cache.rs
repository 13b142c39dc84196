//! CDFGNN's adaptive vertex cache (Alg. 2) for one sync point of a vertex-cut worker, over the
//! codec of the deltas.
//!
//! Every replica `i` of a vertex `u` keeps `contributed` (z~_{i,u}: its partial as the master
//! last counted it) and `held` (z~_{.,u}: the cached sum every replica of `u` uses); the master
//! also keeps `sum`, the cached sum it has counted so far. Per sync:
//!
//! 1. a mirror sends `z - contributed` when `||z - contributed||_inf > eps ||contributed||_inf`
//!    ([`ReplicaCache::send_deltas`]) and adds the *decoded* delta into `contributed`;
//! 2. the master adds the deltas it receives ([`ReplicaCache::absorb_deltas`]) and its own
//!    ([`ReplicaCache::absorb_own`], exact: it travels in no message) into `sum`;
//! 3. the master sends `sum - held` for the vertices whose sum changed
//!    ([`ReplicaCache::send_sums`]), and every replica, the master included, adds the *decoded*
//!    delta into `held` ([`ReplicaCache::commit_sums`], [`ReplicaCache::land_sums`]).
//!
//! Adding decoded deltas (Alg. 2 sets `z~ <- z`) keeps every replica's `held` bit-identical to
//! the master's under a lossy codec, and makes quantization error feed back into the next delta
//! instead of accumulating. The codec must decode each row on its own (as [`crate::LinearQuant`]
//! and [`crate::IdentityCodec`] do), so that a row decodes to the same bits in every message.
//!
//! Messages are a row mask ([`crate::codec::mask`]) and the codec's payload of the rows sent.
//! Rows are local ids of a block of `rows x width` values; the caller pairs the row lists of a
//! message's two ends, as the partition book does.

use crate::codec::mask::{read_mask, write_mask};
use crate::codec::{Codec, CodecError, CodecStats};
use crate::state::{StateError, StateReader, put_f32s};
use crate::stream::Pass;

const NAME: &str = "replica-cache";

/// The cache state of one sync point on one worker (see the module docs).
#[derive(Debug, Clone)]
pub struct ReplicaCache {
    width: usize,
    contributed: Vec<f32>,
    held: Vec<f32>,
    sum: Vec<f32>,
    /// Masters: the row's sum changed in this sync.
    active: Vec<bool>,
    /// Masters: the decoded delta of an active row, waiting for [`ReplicaCache::commit_sums`].
    pending: Vec<Option<usize>>,
    decoded: Vec<f32>,
    /// Rows gathered for a message, and decoded from one.
    picked: Vec<f32>,
    scratch: Vec<f32>,
}

impl ReplicaCache {
    /// The empty cache of a block of `rows x width` values: every copy holds zeros.
    pub fn new(rows: usize, width: usize) -> Self {
        let len = rows * width;
        Self {
            width,
            contributed: vec![0.0; len],
            held: vec![0.0; len],
            sum: vec![0.0; len],
            active: vec![false; rows],
            pending: vec![None; rows],
            decoded: Vec::new(),
            picked: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Appends the cached rows (between syncs nothing else is pending).
    pub fn save_state(&self, out: &mut Vec<u8>) {
        out.extend((self.width as u64).to_le_bytes());
        for values in [&self.contributed, &self.held, &self.sum] {
            put_f32s(out, values);
        }
    }

    /// The cache of `rows` rows a [`ReplicaCache::save_state`] saved.
    pub fn restored(rows: usize, bytes: &[u8]) -> Result<Self, StateError> {
        let mut r = StateReader::new(NAME, bytes);
        let width = r.u64("the row width")? as usize;
        let contributed = r.f32s("the contributed partials")?;
        // Checked against what was read before anything of that size is allocated.
        if Some(contributed.len()) != rows.checked_mul(width) {
            let detail = format!("{} values do not make {rows} rows of width {width}", contributed.len());
            return Err(StateError(format!("the saved state of {NAME}: {detail}")));
        }
        let mut cache = Self::new(rows, width);
        cache.held = r.f32s_of("the held sums", contributed.len())?;
        cache.sum = r.f32s_of("the masters' sums", contributed.len())?;
        cache.contributed = contributed;
        r.finish()?;
        Ok(cache)
    }

    /// Checks that `block` is a block of this cache's shape.
    pub fn check(&self, block: &[f32]) -> Result<(), CodecError> {
        if block.len() != self.held.len() {
            return Err(CodecError::StreamShape { codec: NAME, expected: self.held.len(), actual: block.len() });
        }
        Ok(())
    }

    fn row(v: &[f32], r: u32, width: usize) -> &[f32] {
        &v[r as usize * width..][..width]
    }

    /// Mirror side: the message carrying the deltas of `rows` of `block` that moved past the
    /// threshold `eps`. Returns the rows skipped and the error of `contributed` against `block`.
    #[allow(clippy::too_many_arguments)]
    pub fn send_deltas(
        &mut self,
        pass: Pass,
        eps: f32,
        rows: &[u32],
        block: &[f32],
        codec: &mut dyn Codec,
        shadow: &mut dyn Codec,
        out: &mut Vec<u8>,
    ) -> Result<CodecStats, CodecError> {
        self.check(block)?;
        let w = self.width;
        let sent: Vec<bool> =
            rows.iter().map(|&r| moved(Self::row(block, r, w), Self::row(&self.contributed, r, w), eps)).collect();
        self.picked.clear();
        for (&r, _) in rows.iter().zip(&sent).filter(|(_, s)| **s) {
            let (now, before) = (Self::row(block, r, w), Self::row(&self.contributed, r, w));
            self.picked.extend(now.iter().zip(before).map(|(a, b)| a - b));
        }
        let decoded = encode_masked(pass, &sent, &self.picked, w, codec, shadow, out, &mut self.scratch)?;
        add_rows(&mut self.contributed, rows, &sent, decoded, w);
        let mut stats = CodecStats { rows_skipped: sent.iter().filter(|s| !**s).count() as u64, ..Default::default() };
        for &r in rows {
            for (truth, got) in Self::row(block, r, w).iter().zip(Self::row(&self.contributed, r, w)) {
                stats.err_sq += f64::from(truth - got).powi(2);
                stats.ref_sq += f64::from(*truth).powi(2);
            }
        }
        stats.add(&codec.take_stats());
        Ok(stats)
    }

    /// Master side: adds the deltas of a mirror's message for `rows` into the cached sums.
    pub fn absorb_deltas(
        &mut self,
        pass: Pass,
        rows: &[u32],
        bytes: &[u8],
        codec: &mut dyn Codec,
    ) -> Result<(), CodecError> {
        let sent = decode_masked(pass, rows.len(), bytes, self.width, codec, &mut self.scratch)?;
        add_rows(&mut self.sum, rows, &sent, &self.scratch, self.width);
        rows.iter().zip(&sent).filter(|(_, s)| **s).for_each(|(&r, _)| self.active[r as usize] = true);
        Ok(())
    }

    /// Master side: adds the master's own partials of `rows` (its replicated vertices) that
    /// moved past `eps` into the cached sums, exactly.
    pub fn absorb_own(&mut self, eps: f32, rows: &[u32], block: &[f32]) -> Result<(), CodecError> {
        self.check(block)?;
        let w = self.width;
        for &r in rows {
            let range = r as usize * w..(r as usize + 1) * w;
            if moved(&block[range.clone()], &self.contributed[range.clone()], eps) {
                for i in range {
                    self.sum[i] += block[i] - self.contributed[i];
                    self.contributed[i] = block[i];
                }
                self.active[r as usize] = true;
            }
        }
        Ok(())
    }

    /// Master side: the message carrying `sum - held` of the `rows` whose sum changed in this
    /// sync. Call for every peer, then [`ReplicaCache::commit_sums`] once. Returns the rows
    /// skipped and the error of what the peer will hold against the cached sums.
    pub fn send_sums(
        &mut self,
        pass: Pass,
        rows: &[u32],
        codec: &mut dyn Codec,
        shadow: &mut dyn Codec,
        out: &mut Vec<u8>,
    ) -> Result<CodecStats, CodecError> {
        let w = self.width;
        let sent: Vec<bool> = rows.iter().map(|&r| self.active[r as usize]).collect();
        self.picked.clear();
        for (&r, _) in rows.iter().zip(&sent).filter(|(_, s)| **s) {
            let (sum, held) = (Self::row(&self.sum, r, w), Self::row(&self.held, r, w));
            self.picked.extend(sum.iter().zip(held).map(|(a, b)| a - b));
        }
        let decoded = encode_masked(pass, &sent, &self.picked, w, codec, shadow, out, &mut self.scratch)?;
        let mut stats = CodecStats { rows_skipped: sent.iter().filter(|s| !**s).count() as u64, ..Default::default() };
        let mut decoded_rows = decoded.chunks_exact(w.max(1));
        for (&r, &s) in rows.iter().zip(&sent) {
            let delta = if s { decoded_rows.next() } else { None };
            for c in 0..w {
                let at = r as usize * w + c;
                let got = self.held[at] + delta.map_or(0.0, |d| d[c]);
                stats.err_sq += f64::from(self.sum[at] - got).powi(2);
                stats.ref_sq += f64::from(self.sum[at]).powi(2);
            }
            if let Some(d) = delta
                && self.pending[r as usize].is_none()
            {
                self.pending[r as usize] = Some(self.decoded.len());
                self.decoded.extend_from_slice(d);
            }
        }
        stats.add(&codec.take_stats());
        Ok(stats)
    }

    /// Master side: every active row adds its decoded delta into `held`, as its mirrors do.
    pub fn commit_sums(&mut self) {
        let w = self.width;
        for (r, slot) in self.pending.iter_mut().enumerate() {
            if let Some(at) = slot.take() {
                let held = &mut self.held[r * w..][..w];
                held.iter_mut().zip(&self.decoded[at..at + w]).for_each(|(h, d)| *h += d);
            }
        }
        self.active.iter_mut().for_each(|a| *a = false);
        self.decoded.clear();
    }

    /// Mirror side: adds the decoded deltas of the master's message for `rows` into `held`.
    pub fn land_sums(
        &mut self,
        pass: Pass,
        rows: &[u32],
        bytes: &[u8],
        codec: &mut dyn Codec,
    ) -> Result<(), CodecError> {
        let sent = decode_masked(pass, rows.len(), bytes, self.width, codec, &mut self.scratch)?;
        add_rows(&mut self.held, rows, &sent, &self.scratch, self.width);
        Ok(())
    }

    /// Copies the held (cached) value of `rows` into `block`.
    pub fn write_held(&self, rows: &[u32], block: &mut [f32]) -> Result<(), CodecError> {
        self.check(block)?;
        let w = self.width;
        for &r in rows {
            let range = r as usize * w..(r as usize + 1) * w;
            block[range.clone()].copy_from_slice(&self.held[range]);
        }
        Ok(())
    }

    /// The held value of row `r` (what every replica of it uses).
    pub fn held(&self, r: u32) -> &[f32] {
        Self::row(&self.held, r, self.width)
    }
}

/// Alg. 2's test: `||now - before||_inf > eps ||before||_inf`.
fn moved(now: &[f32], before: &[f32], eps: f32) -> bool {
    let (mut diff, mut norm) = (0.0f32, 0.0f32);
    for (a, b) in now.iter().zip(before) {
        diff = diff.max((a - b).abs());
        norm = norm.max(b.abs());
    }
    diff > eps * norm
}

/// Writes the mask of `sent` and the codec's payload of `picked` (the sent rows) to `out`, and
/// decodes that payload as the receiver will, into `scratch`; returns the decoded rows.
#[allow(clippy::too_many_arguments)]
fn encode_masked<'s>(
    pass: Pass,
    sent: &[bool],
    picked: &[f32],
    width: usize,
    codec: &mut dyn Codec,
    shadow: &mut dyn Codec,
    out: &mut Vec<u8>,
    scratch: &'s mut Vec<f32>,
) -> Result<&'s [f32], CodecError> {
    write_mask(sent, out);
    let start = out.len();
    codec.encode(pass, picked, width, out)?;
    scratch.resize(picked.len(), 0.0);
    shadow.decode(pass, &out[start..], width, scratch)?;
    Ok(scratch)
}

/// Reads a message of `rows` rows: its mask, and the payload of the rows sent into `scratch`.
fn decode_masked(
    pass: Pass,
    rows: usize,
    bytes: &[u8],
    width: usize,
    codec: &mut dyn Codec,
    scratch: &mut Vec<f32>,
) -> Result<Vec<bool>, CodecError> {
    let (sent, payload) = read_mask(NAME, bytes, rows)?;
    scratch.resize(sent.iter().filter(|s| **s).count() * width, 0.0);
    codec.decode(pass, payload, width, scratch)?;
    Ok(sent)
}

/// Adds the consecutive rows of `deltas` into the `rows` of `target` that `sent` flags.
fn add_rows(target: &mut [f32], rows: &[u32], sent: &[bool], deltas: &[f32], width: usize) {
    let targets = rows.iter().zip(sent).filter(|(_, s)| **s).map(|(&r, _)| r as usize);
    for (r, delta) in targets.zip(deltas.chunks_exact(width.max(1))) {
        target[r * width..][..width].iter_mut().zip(delta).for_each(|(t, d)| *t += d);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{IdentityCodec, LinearQuant};

    const W: usize = 3;
    const ROWS: usize = 4;

    fn codec(bits: u8) -> Box<dyn Codec> {
        if bits == 0 { Box::new(IdentityCodec) } else { Box::new(LinearQuant::new(bits).unwrap()) }
    }

    /// One master and `mirrors` mirrors of the same `ROWS` vertices (row r on every worker).
    struct Job {
        master: ReplicaCache,
        mirrors: Vec<ReplicaCache>,
        bits: u8,
    }

    impl Job {
        fn new(mirrors: usize, bits: u8) -> Self {
            Self { master: ReplicaCache::new(ROWS, W), mirrors: vec![ReplicaCache::new(ROWS, W); mirrors], bits }
        }

        /// One sync of `blocks` (the master's first, then each mirror's); returns the rows sent
        /// mirror -> master and master -> mirror.
        fn sync(&mut self, eps: f32, blocks: &[Vec<f32>]) -> (u64, u64) {
            let pass = Pass::train(1, 0);
            let all: Vec<u32> = (0..ROWS as u32).collect();
            let (mut up, mut down) = (0, 0);
            let mut messages = Vec::new();
            for (mirror, block) in self.mirrors.iter_mut().zip(&blocks[1..]) {
                let mut bytes = Vec::new();
                let stats = mirror
                    .send_deltas(pass, eps, &all, block, &mut *codec(self.bits), &mut *codec(self.bits), &mut bytes)
                    .unwrap();
                up += ROWS as u64 - stats.rows_skipped;
                messages.push(bytes);
            }
            for bytes in &messages {
                self.master.absorb_deltas(pass, &all, bytes, &mut *codec(self.bits)).unwrap();
            }
            self.master.absorb_own(eps, &all, &blocks[0]).unwrap();
            let mut replies = Vec::new();
            for _ in &self.mirrors {
                let mut bytes = Vec::new();
                let stats = self
                    .master
                    .send_sums(pass, &all, &mut *codec(self.bits), &mut *codec(self.bits), &mut bytes)
                    .unwrap();
                down += ROWS as u64 - stats.rows_skipped;
                replies.push(bytes);
            }
            self.master.commit_sums();
            for (mirror, bytes) in self.mirrors.iter_mut().zip(&replies) {
                mirror.land_sums(pass, &all, bytes, &mut *codec(self.bits)).unwrap();
            }
            (up, down)
        }
    }

    #[test]
    fn eps_zero_without_quantization_sums_exactly_and_skips_unchanged_rows() {
        let mut job = Job::new(2, 0);
        let blocks: Vec<Vec<f32>> = (0..3).map(|k| (0..ROWS * W).map(|i| (k * 10 + i) as f32).collect()).collect();
        assert_eq!(job.sync(0.0, &blocks), (8, 8));
        for r in 0..ROWS as u32 {
            let want: Vec<f32> = (0..W).map(|c| blocks.iter().map(|b| b[r as usize * W + c]).sum()).collect();
            assert_eq!(job.master.held(r), &want[..]);
            assert_eq!(job.mirrors[1].held(r), &want[..]);
        }
        // Nothing moved: nothing is sent either way.
        assert_eq!(job.sync(0.0, &blocks), (0, 0));
    }

    #[test]
    fn small_moves_stay_cached_and_large_ones_are_sent() {
        let mut job = Job::new(1, 0);
        let ones = vec![1.0f32; ROWS * W];
        job.sync(0.1, &[ones.clone(), ones.clone()]);
        let mut nudged = ones.clone();
        nudged[0] = 1.05; // row 0 moves by 5% < 10%
        nudged[W] = 1.5; // row 1 moves by 50%
        assert_eq!(job.sync(0.1, &[ones.clone(), nudged]), (1, 1));
        assert_eq!(job.master.held(0), &[2.0; W]);
        assert_eq!(job.master.held(1), &[2.5, 2.0, 2.0]);
    }

    #[test]
    fn a_block_of_another_shape_is_an_error() {
        let mut cache = ReplicaCache::new(ROWS, W);
        let err = cache.absorb_own(0.0, &[0], &[0.0; 5]).unwrap_err();
        assert!(matches!(err, CodecError::StreamShape { expected: 12, actual: 5, .. }), "{err}");
    }

    proptest! {
        /// After any sequence of syncs, at any threshold and bit-width, every mirror holds the
        /// master's cached value bit for bit.
        #[test]
        fn every_copy_equals_the_masters_bit_for_bit(
            bits in prop::sample::select(vec![0u8, 2, 4, 8, 16]),
            eps in prop::sample::select(vec![0.0f32, 0.01, 0.1, 0.5]),
            mirrors in 1usize..4,
            steps in prop::collection::vec(prop::collection::vec(-8i16..8, 4 * ROWS * W), 1..10),
        ) {
            let mut job = Job::new(mirrors, bits);
            for step in steps {
                let blocks: Vec<Vec<f32>> = (0..=mirrors)
                    .map(|k| step[k * ROWS * W..][..ROWS * W].iter().map(|&v| f32::from(v) * 0.37).collect())
                    .collect();
                job.sync(eps, &blocks);
                for r in 0..ROWS as u32 {
                    for mirror in &job.mirrors {
                        let (a, b): (Vec<u32>, Vec<u32>) = (
                            mirror.held(r).iter().map(|v| v.to_bits()).collect(),
                            job.master.held(r).iter().map(|v| v.to_bits()).collect(),
                        );
                        prop_assert_eq!(a, b);
                    }
                }
            }
        }
    }
}
