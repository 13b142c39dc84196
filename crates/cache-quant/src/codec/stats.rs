//! What codecs did to the rows they carried, summed per (layer, direction, route).
//!
//! The exchange counts rows and payload bytes of every message, and the bytes the same rows take
//! uncoded (what the exact exchange sends); codecs add what only they know
//! ([`super::Codec::take_stats`]): rows they skipped, the bit-width each sent row used, and the
//! squared error of what the receiver decodes against the true rows. The exchange also counts the
//! part of the bytes that crossed hosts, and the seconds its codec calls took on both ends (what
//! compression costs in CPU, against what its saved bytes are worth on the wire). A
//! [`StatsTable`] flattens to a fixed-length `f64` vector so that workers can all-reduce it.

use std::collections::BTreeMap;

use crate::stream::{Direction, Route};

/// Bit-widths a histogram can hold: 0 to 32.
pub const MAX_BITS: usize = 32;

/// Counts of one stream or a sum of streams.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecStats {
    /// Rows the exchange asked to send.
    pub rows: u64,
    /// Of those, rows the codec sent no payload for (the receiver filled them from its state).
    pub rows_skipped: u64,
    /// Bytes of the encoded messages.
    pub bytes: u64,
    /// Bytes the same rows take uncoded, 4 per value: what the exact exchange sends for them.
    pub exact_bytes: u64,
    /// Rows sent at each bit-width (index = bits), for codecs that choose one per row.
    pub bits: [u64; MAX_BITS + 1],
    /// Sum of squared differences between the decoded and the true values.
    pub err_sq: f64,
    /// Sum of squared true values (the error's reference).
    pub ref_sq: f64,
    /// Of `bytes`, those of messages between ranks of different hosts.
    pub inter_bytes: u64,
    /// Of `exact_bytes`, those of messages between ranks of different hosts.
    pub inter_exact_bytes: u64,
    /// Seconds the exchange spent in the codec calls of these messages, on the sending and on the
    /// receiving end (for the replica cache, its bookkeeping too).
    pub codec_s: f64,
}

impl Default for CodecStats {
    fn default() -> Self {
        Self {
            rows: 0,
            rows_skipped: 0,
            bytes: 0,
            exact_bytes: 0,
            bits: [0; MAX_BITS + 1],
            err_sq: 0.0,
            ref_sq: 0.0,
            inter_bytes: 0,
            inter_exact_bytes: 0,
            codec_s: 0.0,
        }
    }
}

/// The scalar fields of [`CodecStats::to_vec`], before the bit histogram.
const SCALARS: usize = 9;

/// Length of [`CodecStats::to_vec`].
const FIELDS: usize = SCALARS + MAX_BITS + 1;

impl CodecStats {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &CodecStats) {
        self.rows += other.rows;
        self.rows_skipped += other.rows_skipped;
        self.bytes += other.bytes;
        self.exact_bytes += other.exact_bytes;
        self.bits.iter_mut().zip(&other.bits).for_each(|(a, b)| *a += b);
        self.err_sq += other.err_sq;
        self.ref_sq += other.ref_sq;
        self.inter_bytes += other.inter_bytes;
        self.inter_exact_bytes += other.inter_exact_bytes;
        self.codec_s += other.codec_s;
    }

    /// Bytes sent over the exact exchange's bytes for the same rows (1 when nothing was counted).
    pub fn bytes_fraction(&self) -> f64 {
        if self.exact_bytes > 0 { self.bytes as f64 / self.exact_bytes as f64 } else { 1.0 }
    }

    /// Relative error `||decoded - true|| / ||true||` over the counted rows (0 when nothing
    /// was counted).
    pub fn relative_error(&self) -> f64 {
        if self.ref_sq > 0.0 { (self.err_sq / self.ref_sq).sqrt() } else { 0.0 }
    }

    fn to_vec(&self) -> [f64; FIELDS] {
        let mut v = [0.0; FIELDS];
        v[..SCALARS].copy_from_slice(&[
            self.rows as f64,
            self.rows_skipped as f64,
            self.bytes as f64,
            self.err_sq,
            self.ref_sq,
            self.exact_bytes as f64,
            self.inter_bytes as f64,
            self.inter_exact_bytes as f64,
            self.codec_s,
        ]);
        v[SCALARS..].iter_mut().zip(&self.bits).for_each(|(a, &b)| *a = b as f64);
        v
    }

    fn from_slice(v: &[f64]) -> Self {
        let mut bits = [0u64; MAX_BITS + 1];
        bits.iter_mut().zip(&v[SCALARS..]).for_each(|(a, &b)| *a = b as u64);
        let (rows, rows_skipped, bytes, exact_bytes) = (v[0] as u64, v[1] as u64, v[2] as u64, v[5] as u64);
        let (inter_bytes, inter_exact_bytes) = (v[6] as u64, v[7] as u64);
        let (err_sq, ref_sq, codec_s) = (v[3], v[4], v[8]);
        Self { rows, rows_skipped, bytes, exact_bytes, err_sq, ref_sq, bits, inter_bytes, inter_exact_bytes, codec_s }
    }
}

/// Where stats are summed: one layer's exchanges in one direction along one route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StatsKey {
    pub layer: usize,
    pub dir: Direction,
    pub route: Route,
}

impl std::fmt::Display for StatsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.dir, self.layer, self.route)
    }
}

/// Stats per [`StatsKey`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatsTable(BTreeMap<StatsKey, CodecStats>);

impl StatsTable {
    /// Adds `stats` under `key`.
    pub fn add(&mut self, key: StatsKey, stats: &CodecStats) {
        self.0.entry(key).or_default().add(stats);
    }

    /// Adds every entry of `other`.
    pub fn merge(&mut self, other: &StatsTable) {
        for (key, stats) in &other.0 {
            self.add(*key, stats);
        }
    }

    /// The entries, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&StatsKey, &CodecStats)> {
        self.0.iter()
    }

    /// The table with every entry's [`CodecStats::codec_s`] cleared: what two runs of the same
    /// messages agree on, bit for bit (seconds differ run to run).
    pub fn without_times(&self) -> StatsTable {
        Self(self.0.iter().map(|(key, stats)| (*key, CodecStats { codec_s: 0.0, ..stats.clone() })).collect())
    }

    /// The sum over all entries.
    pub fn total(&self) -> CodecStats {
        let mut total = CodecStats::default();
        self.0.values().for_each(|s| total.add(s));
        total
    }

    /// Every key of a model with `layers` layers, in a fixed order.
    fn keys(layers: usize) -> impl Iterator<Item = StatsKey> {
        (0..layers).flat_map(|layer| {
            [Direction::Forward, Direction::Backward].into_iter().flat_map(move |dir| {
                [Route::ToPrimary, Route::ToCopies].into_iter().map(move |route| StatsKey { layer, dir, route })
            })
        })
    }

    /// A fixed-length vector of the table for a model of `layers` layers, so that ranks can
    /// sum their tables with an all-reduce; entries of deeper layers are dropped.
    pub fn to_vec(&self, layers: usize) -> Vec<f64> {
        Self::keys(layers).flat_map(|k| self.0.get(&k).cloned().unwrap_or_default().to_vec()).collect()
    }

    /// The inverse of [`StatsTable::to_vec`]; entries with no rows are left out.
    pub fn from_vec(layers: usize, v: &[f64]) -> Self {
        let table = Self::keys(layers)
            .zip(v.chunks_exact(FIELDS))
            .map(|(k, chunk)| (k, CodecStats::from_slice(chunk)))
            .filter(|(_, s)| s.rows > 0)
            .collect();
        Self(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rows: u64) -> CodecStats {
        let mut bits = [0; MAX_BITS + 1];
        bits[8] = rows - 1;
        CodecStats {
            rows,
            rows_skipped: 1,
            bytes: 40,
            exact_bytes: 160,
            bits,
            err_sq: 0.5,
            ref_sq: 2.0,
            inter_bytes: 10,
            inter_exact_bytes: 40,
            codec_s: 0.25,
        }
    }

    #[test]
    fn tables_round_trip_through_vectors_and_sum() {
        let mut t = StatsTable::default();
        let k0 = StatsKey { layer: 0, dir: Direction::Forward, route: Route::ToCopies };
        let k1 = StatsKey { layer: 1, dir: Direction::Backward, route: Route::ToPrimary };
        t.add(k0, &sample(3));
        t.add(k1, &sample(5));
        t.add(k1, &sample(5));
        let back = StatsTable::from_vec(2, &t.to_vec(2));
        assert_eq!(back, t);
        let total = t.total();
        assert_eq!((total.rows, total.rows_skipped, total.bytes, total.bits[8]), (13, 3, 120, 10));
        assert_eq!((total.exact_bytes, total.bytes_fraction()), (480, 0.25));
        assert_eq!((total.inter_bytes, total.inter_exact_bytes, total.codec_s), (30, 120, 0.75));
        assert_eq!(CodecStats::default().bytes_fraction(), 1.0);
        assert!((total.relative_error() - 0.5).abs() < 1e-12);
        assert_eq!(k1.to_string(), "bwd/1/to-primary");
        // Summing two ranks' vectors sums their tables.
        let summed: Vec<f64> = t.to_vec(2).iter().map(|x| 2.0 * x).collect();
        assert_eq!(StatsTable::from_vec(2, &summed).total().rows, 26);
        let untimed = t.without_times();
        assert_eq!((untimed.total().codec_s, untimed.total().bytes), (0.0, 120));
    }
}
