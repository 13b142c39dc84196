//! Compressed sparse row adjacency with validated construction.
//!
//! Convention used across Halo: row `v` lists the *sources* `u` of the edges `u -> v`
//! (in-neighbours), so an aggregation `h_v = sum_{u in N(v)} x_u` reads one row. For the
//! symmetric graphs most datasets are, rows are simply neighbour lists.
//!
//! A [`Csr`] holds `u64` row pointers and `u32` column ids and is checked when built
//! ([`Csr::try_new`], [`Csr::check_structure`]). [`Csr::from_edges`] removes duplicate edges and,
//! as its [`EdgeListOptions`] say, symmetrises and drops self loops. `sprs_interop` converts to and
//! from `sprs`; [`Csr::fingerprint`] identifies a graph for saved partition books and checkpoints.

use serde::{Deserialize, Serialize};

#[cfg(test)]
mod proptests;
mod sprs_interop;

/// Why a CSR failed validation. Positions name the offending row or entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsrError {
    #[error("indptr has {got} entries, expected num_rows + 1 = {expected}")]
    IndptrLength { got: usize, expected: usize },
    #[error("indptr must start at 0, found {0}")]
    IndptrStart(u64),
    #[error("indptr decreases at row {row}: {start} > {end}")]
    IndptrDecreasing { row: usize, start: u64, end: u64 },
    #[error("last indptr entry {last} does not equal the number of column ids {nnz}")]
    IndptrEnd { last: u64, nnz: usize },
    #[error("row {row} has column id {col} >= num_cols {num_cols}")]
    ColumnOutOfRange { row: usize, col: u32, num_cols: usize },
    #[error("row {row} columns are not strictly increasing at position {pos} ({prev} then {next})")]
    UnsortedRow { row: usize, pos: usize, prev: u32, next: u32 },
    #[error("edge ({src}, {dst}) names a node >= num_nodes {num_nodes}")]
    EdgeOutOfRange { src: u32, dst: u32, num_nodes: usize },
    #[error("{0} nodes do not fit the u32 ids Halo uses")]
    TooManyNodes(usize),
}

/// How to clean an edge list while building a graph from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeListOptions {
    /// Add `v -> u` for every `u -> v`.
    pub symmetrize: bool,
    /// Drop `v -> v` edges.
    pub remove_self_loops: bool,
}

/// Elements converted to bytes per hasher update in [`Csr::fingerprint`].
const FINGERPRINT_CHUNK: usize = 1 << 14;

impl Default for EdgeListOptions {
    fn default() -> Self {
        Self { symmetrize: true, remove_self_loops: true }
    }
}

/// A sparse adjacency: `num_rows` rows over `num_cols` columns, with sorted and
/// deduplicated column ids in every row. Built only through validating constructors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct Csr {
    num_cols: usize,
    indptr: Vec<u64>,
    indices: Vec<u32>,
    /// [`Csr::is_symmetric`], once asked: a memory estimate, METIS' input and the aggregation
    /// graph all ask, and on a 60M-edge graph each answer costs seconds. Clones keep it.
    #[serde(skip)]
    symmetric: Memo,
}

/// A value computed from the rest of a [`Csr`] on first use. Not part of the value: it is
/// neither compared nor stored.
#[derive(Debug, Clone, Default)]
struct Memo(std::sync::OnceLock<bool>);

impl PartialEq for Memo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Memo {}

impl bincode::Encode for Memo {
    fn encode<E: bincode::enc::Encoder>(&self, _: &mut E) -> Result<(), bincode::error::EncodeError> {
        Ok(())
    }
}

impl<Context> bincode::Decode<Context> for Memo {
    fn decode<D: bincode::de::Decoder<Context = Context>>(_: &mut D) -> Result<Self, bincode::error::DecodeError> {
        Ok(Self::default())
    }
}

bincode::impl_borrow_decode!(Memo);

impl Csr {
    /// Validates and wraps raw CSR arrays: `indptr.len() == num_rows + 1`, starts at 0,
    /// never decreases, ends at `indices.len()`, every row strictly increasing and `< num_cols`.
    pub fn try_new(num_rows: usize, num_cols: usize, indptr: Vec<u64>, indices: Vec<u32>) -> Result<Self, CsrError> {
        if indptr.len() != num_rows + 1 {
            return Err(CsrError::IndptrLength { got: indptr.len(), expected: num_rows + 1 });
        }
        let csr = Self { num_cols, indptr, indices, symmetric: Memo::default() };
        csr.check_structure()?;
        Ok(csr)
    }

    /// Re-checks every structural invariant (used after deserialising untrusted bytes).
    pub fn check_structure(&self) -> Result<(), CsrError> {
        if num_cols_overflow(self.num_cols) || num_cols_overflow(self.num_rows()) {
            return Err(CsrError::TooManyNodes(self.num_cols.max(self.num_rows())));
        }
        let Some(&first) = self.indptr.first() else {
            return Err(CsrError::IndptrLength { got: 0, expected: 1 });
        };
        if first != 0 {
            return Err(CsrError::IndptrStart(first));
        }
        let last = *self.indptr.last().expect("non-empty");
        if last != self.indices.len() as u64 {
            return Err(CsrError::IndptrEnd { last, nnz: self.indices.len() });
        }
        // Monotonicity first: with it and the end check, every row range lies inside `indices`.
        if let Some((row, w)) = self.indptr.windows(2).enumerate().find(|(_, w)| w[0] > w[1]) {
            return Err(CsrError::IndptrDecreasing { row, start: w[0], end: w[1] });
        }
        for (row, w) in self.indptr.windows(2).enumerate() {
            let cols = &self.indices[w[0] as usize..w[1] as usize];
            for (pos, pair) in cols.windows(2).enumerate() {
                if pair[0] >= pair[1] {
                    return Err(CsrError::UnsortedRow { row, pos: pos + 1, prev: pair[0], next: pair[1] });
                }
            }
            if let Some(&col) = cols.last()
                && col as usize >= self.num_cols
            {
                return Err(CsrError::ColumnOutOfRange { row, col, num_cols: self.num_cols });
            }
        }
        Ok(())
    }

    /// Builds a square `num_nodes x num_nodes` graph from `(src, dst)` edges: row `dst`
    /// receives column `src`. Duplicates are removed; see [`EdgeListOptions`] for the rest.
    pub fn from_edges(num_nodes: usize, edges: &[(u32, u32)], opts: EdgeListOptions) -> Result<Self, CsrError> {
        if num_cols_overflow(num_nodes) {
            return Err(CsrError::TooManyNodes(num_nodes));
        }
        if let Some(&(src, dst)) = edges.iter().find(|&&(s, d)| s as usize >= num_nodes || d as usize >= num_nodes) {
            return Err(CsrError::EdgeOutOfRange { src, dst, num_nodes });
        }
        let keep = |&&(s, d): &&(u32, u32)| !(opts.remove_self_loops && s == d);
        // Counting sort by destination row, then sort + dedup inside each row.
        let mut counts = vec![0u64; num_nodes + 1];
        for &(s, d) in edges.iter().filter(keep) {
            counts[d as usize + 1] += 1;
            if opts.symmetrize && s != d {
                counts[s as usize + 1] += 1;
            }
        }
        for i in 0..num_nodes {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut indices = vec![0u32; counts[num_nodes] as usize];
        for &(s, d) in edges.iter().filter(keep) {
            indices[fill[d as usize] as usize] = s;
            fill[d as usize] += 1;
            if opts.symmetrize && s != d {
                indices[fill[s as usize] as usize] = d;
                fill[s as usize] += 1;
            }
        }
        Ok(Self::compact_rows(num_nodes, &counts, indices))
    }

    /// Sorts and deduplicates each row of an unsorted CSR layout, returning a valid CSR.
    fn compact_rows(num_cols: usize, indptr: &[u64], mut indices: Vec<u32>) -> Self {
        use rayon::prelude::*;
        let num_rows = indptr.len() - 1;
        let mut rows: Vec<&mut [u32]> = Vec::with_capacity(num_rows);
        let mut rest = indices.as_mut_slice();
        for w in indptr.windows(2) {
            let (row, tail) = rest.split_at_mut((w[1] - w[0]) as usize);
            rows.push(row);
            rest = tail;
        }
        let lens: Vec<usize> = rows
            .into_par_iter()
            .map(|row| {
                row.sort_unstable();
                let mut len = 0;
                for i in 0..row.len() {
                    if len == 0 || row[i] != row[len - 1] {
                        row[len] = row[i];
                        len += 1;
                    }
                }
                len
            })
            .collect();
        let mut new_indptr = Vec::with_capacity(num_rows + 1);
        new_indptr.push(0u64);
        let mut write = 0usize;
        for (row, &len) in lens.iter().enumerate() {
            let start = indptr[row] as usize;
            indices.copy_within(start..start + len, write);
            write += len;
            new_indptr.push(write as u64);
        }
        indices.truncate(write);
        Self { num_cols, indptr: new_indptr, indices, symmetric: Memo::default() }
    }

    pub fn num_rows(&self) -> usize {
        self.indptr.len() - 1
    }

    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    /// Number of nodes of a square graph (same as `num_rows`).
    pub fn num_nodes(&self) -> usize {
        self.num_rows()
    }

    /// Number of stored (directed) entries.
    pub fn num_edges(&self) -> usize {
        self.indices.len()
    }

    /// A 64-bit content hash (xxh3) of the shape and both arrays: two graphs with the same
    /// fingerprint are, for every practical purpose, the same graph. Partition books record it
    /// so that a saved book is never applied to another graph.
    pub fn fingerprint(&self) -> u64 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        hasher.update(&(self.num_rows() as u64).to_le_bytes());
        hasher.update(&(self.num_cols as u64).to_le_bytes());
        let mut buf = Vec::with_capacity(FINGERPRINT_CHUNK * 8);
        for chunk in self.indptr.chunks(FINGERPRINT_CHUNK) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
            hasher.update(&buf);
        }
        for chunk in self.indices.chunks(FINGERPRINT_CHUNK) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
            hasher.update(&buf);
        }
        hasher.digest()
    }

    pub fn indptr(&self) -> &[u64] {
        &self.indptr
    }

    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Column ids of row `v`.
    pub fn neighbors(&self, v: usize) -> &[u32] {
        &self.indices[self.indptr[v] as usize..self.indptr[v + 1] as usize]
    }

    /// Entry-index range of row `v` into [`Csr::indices`] (edge ids for per-edge data).
    pub fn row_range(&self, v: usize) -> std::ops::Range<usize> {
        self.indptr[v] as usize..self.indptr[v + 1] as usize
    }

    /// Entries in row `v` (the in-degree under Halo's convention).
    pub fn degree(&self, v: usize) -> usize {
        (self.indptr[v + 1] - self.indptr[v]) as usize
    }

    /// Row lengths of every row.
    pub fn degrees(&self) -> Vec<u32> {
        self.indptr.windows(2).map(|w| (w[1] - w[0]) as u32).collect()
    }

    /// Entries per column (out-degrees under Halo's convention).
    pub fn column_counts(&self) -> Vec<u32> {
        let mut counts = vec![0u32; self.num_cols];
        for &c in &self.indices {
            counts[c as usize] += 1;
        }
        counts
    }

    /// The transpose: row `u` lists every `v` whose row contains `u` (the reverse graph).
    /// `perm[k]` gives, for entry `k` of the transpose, the index of the same entry in `self`,
    /// so per-edge values can follow an edge across the transpose.
    pub fn transpose_with_perm(&self) -> (Self, Vec<usize>) {
        let mut indptr = vec![0u64; self.num_cols + 1];
        for &c in &self.indices {
            indptr[c as usize + 1] += 1;
        }
        for i in 0..self.num_cols {
            indptr[i + 1] += indptr[i];
        }
        let mut fill = indptr.clone();
        let mut indices = vec![0u32; self.indices.len()];
        let mut perm = vec![0usize; self.indices.len()];
        // Rows are visited in increasing order, so each transposed row comes out sorted.
        for row in 0..self.num_rows() {
            for k in self.row_range(row) {
                let c = self.indices[k] as usize;
                let slot = fill[c] as usize;
                indices[slot] = row as u32;
                perm[slot] = k;
                fill[c] += 1;
            }
        }
        (Self { num_cols: self.num_rows(), indptr, indices, symmetric: Memo::default() }, perm)
    }

    /// The reverse graph (transpose).
    pub fn reverse(&self) -> Self {
        self.transpose_with_perm().0
    }

    /// True when `u` is in row `v`'s columns and `v` in row `u`'s, for every entry: the graph
    /// is its own transpose. Checked in place (no transpose is built), row-parallel, looking up
    /// the mirrors of the entries above the diagonal only: rows being strictly increasing, an
    /// entry maps to one mirror, so when every entry above finds its mirror below and there
    /// are as many below as above, the entries below are exactly those mirrors.
    ///
    /// Computed on the first call, then remembered (by clones too).
    pub fn is_symmetric(&self) -> bool {
        *self.symmetric.0.get_or_init(|| self.check_symmetric())
    }

    fn check_symmetric(&self) -> bool {
        use rayon::prelude::*;
        if self.num_rows() != self.num_cols {
            return false;
        }
        let (mirrored, below, above) = (0..self.num_rows())
            .into_par_iter()
            .with_min_len(1024)
            .map(|v| {
                let row = self.neighbors(v);
                let (lower, upper) = row.split_at(row.partition_point(|&u| (u as usize) < v));
                let upper = upper.strip_prefix(&[v as u32]).unwrap_or(upper);
                let found = upper.iter().all(|&u| self.neighbors(u as usize).binary_search(&(v as u32)).is_ok());
                (found, lower.len(), upper.len())
            })
            .reduce(|| (true, 0, 0), |a, b| (a.0 && b.0, a.1 + b.1, a.2 + b.2));
        mirrored && below == above
    }

    /// Keeps only the rows and columns in `nodes` (given in the order they get as new ids).
    /// Returns the induced subgraph on `0..nodes.len()`.
    pub fn induced_subgraph(&self, nodes: &[u32]) -> Self {
        let mut local = vec![u32::MAX; self.num_cols.max(self.num_rows())];
        for (i, &g) in nodes.iter().enumerate() {
            local[g as usize] = i as u32;
        }
        let mut indptr = Vec::with_capacity(nodes.len() + 1);
        indptr.push(0u64);
        let mut indices = Vec::new();
        for &g in nodes {
            let start = indices.len();
            indices.extend(self.neighbors(g as usize).iter().map(|&c| local[c as usize]).filter(|&l| l != u32::MAX));
            indices[start..].sort_unstable();
            indptr.push(indices.len() as u64);
        }
        Self { num_cols: nodes.len(), indptr, indices, symmetric: Memo::default() }
    }
}

fn num_cols_overflow(n: usize) -> bool {
    n > u32::MAX as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_structure() {
        assert_eq!(Csr::try_new(2, 2, vec![0, 1], vec![0]), Err(CsrError::IndptrLength { got: 2, expected: 3 }));
        assert_eq!(Csr::try_new(1, 2, vec![1, 1], vec![0]), Err(CsrError::IndptrStart(1)));
        assert_eq!(Csr::try_new(1, 2, vec![0, 2], vec![0]), Err(CsrError::IndptrEnd { last: 2, nnz: 1 }));
        assert!(matches!(Csr::try_new(1, 2, vec![0, 2], vec![1, 1]), Err(CsrError::UnsortedRow { row: 0, .. })));
        assert!(matches!(Csr::try_new(1, 2, vec![0, 1], vec![2]), Err(CsrError::ColumnOutOfRange { col: 2, .. })));
        assert!(matches!(
            Csr::try_new(2, 2, vec![0, 1, 0], vec![0]),
            Err(CsrError::IndptrDecreasing { row: 1, .. } | CsrError::IndptrEnd { .. })
        ));
    }

    #[test]
    fn from_edges_cleans_and_symmetrizes() {
        let g = Csr::from_edges(3, &[(0, 1), (1, 0), (0, 1), (2, 2), (1, 2)], EdgeListOptions::default()).unwrap();
        assert_eq!(g.neighbors(0), &[1]);
        assert_eq!(g.neighbors(1), &[0, 2]);
        assert_eq!(g.neighbors(2), &[1]);
        assert!(g.is_symmetric());
        assert_eq!(g.num_edges(), 4);
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: false };
        let one_way = Csr::from_edges(3, &[(0, 1), (1, 0), (1, 2)], opts).unwrap();
        assert!(!one_way.is_symmetric());
        let looped = Csr::from_edges(2, &[(0, 0), (0, 1), (1, 0)], opts).unwrap();
        assert!(looped.is_symmetric());
        assert!(!Csr::try_new(2, 3, vec![0, 0, 1], vec![2]).unwrap().is_symmetric());
    }

    #[test]
    fn the_remembered_symmetry_is_neither_compared_nor_stored() {
        let asked = Csr::from_edges(3, &[(0, 1), (1, 2)], EdgeListOptions::default()).unwrap();
        let fresh = asked.clone();
        assert!(asked.is_symmetric());
        assert_eq!(asked.symmetric.0.get(), Some(&true));
        assert_eq!(asked.clone().symmetric.0.get(), Some(&true), "clones keep the answer");
        assert_eq!(fresh.symmetric.0.get(), None);
        assert_eq!(asked, fresh);
        let config = bincode::config::standard();
        let bytes = bincode::encode_to_vec(&asked, config).unwrap();
        assert_eq!(bytes, bincode::encode_to_vec(&fresh, config).unwrap());
        let (decoded, _): (Csr, usize) = bincode::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(decoded.symmetric.0.get(), None);
        assert_eq!(serde_json::to_string(&asked).unwrap(), serde_json::to_string(&fresh).unwrap());
        assert!(decoded.is_symmetric());
    }

    #[test]
    fn from_edges_rejects_out_of_range() {
        let err = Csr::from_edges(2, &[(0, 5)], EdgeListOptions::default()).unwrap_err();
        assert_eq!(err, CsrError::EdgeOutOfRange { src: 0, dst: 5, num_nodes: 2 });
    }

    #[test]
    fn transpose_tracks_entries() {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: false };
        let g = Csr::from_edges(3, &[(0, 1), (2, 1), (1, 2), (0, 0)], opts).unwrap();
        let (t, perm) = g.transpose_with_perm();
        t.check_structure().unwrap();
        for row in 0..t.num_rows() {
            for k in t.row_range(row) {
                // Entry k of the transpose is (row <- col) reversed from g's entry perm[k].
                let col = t.indices()[k] as usize;
                assert_eq!(g.indices()[perm[k]] as usize, row);
                assert!(g.row_range(col).contains(&perm[k]));
            }
        }
        assert_eq!(t.reverse(), g);
    }
}
