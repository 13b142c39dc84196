//! One worker's block of feature columns and the two ways it builds a batch's input rows:
//! its own columns with the others at zero (eq. 4), or every column fetched from the workers
//! that hold them (eq. 3).
//!
//! This module owns featpart's wire format: eq. 3's fetch is two all-to-alls, the requested global
//! ids (little-endian `u32`) under `fetch/ids` and the answering rows of the holder's column block
//! (little-endian `f32`) under `fetch/columns`; it also gives the fetch's analytic byte count.

use std::ops::Range;

use comm_hierarchy::Communicator;
use graph_partition::partition::feature_cut;
use ndarray::{Array2, s};

use crate::error::DistError;
use crate::minibatch::compute::Columns;
use crate::minibatch::trainer::OwnColumns;

/// Ledger phases of a fetch: the requested vertex ids, then the column blocks of their rows.
pub(crate) const FETCH_IDS: &str = "fetch/ids";
pub(crate) const FETCH_COLUMNS: &str = "fetch/columns";

/// Bytes of one feature value and of one requested id on the wire.
const VALUE_BYTES: u64 = 4;
const ID_BYTES: u64 = 4;

/// Columns `columns[rank]` of every vertex; the structure lives in the dataset every worker holds.
#[derive(Debug)]
pub(crate) struct ColumnShard {
    rank: usize,
    /// Every worker's columns (`feature_cut`: contiguous, sizes differing by at most one).
    columns: Vec<Range<usize>>,
    /// `num_nodes x columns[rank].len()`.
    block: Array2<f32>,
    /// The step's input rows, `ids x width` (reused between steps).
    rows: Array2<f32>,
}

impl ColumnShard {
    /// Worker `rank` of `workers` keeps its columns of `features`.
    pub(crate) fn new(features: &Array2<f32>, rank: usize, workers: usize) -> Result<Self, DistError> {
        let columns = feature_cut(features.ncols(), workers)
            .map_err(|err| DistError::Setup { rank, detail: format!("cutting the feature columns: {err}") })?;
        let block = features.slice(s![.., columns[rank].clone()]).to_owned();
        Ok(Self { rank, columns, block, rows: Array2::zeros((0, 0)) })
    }

    /// Every worker's column range.
    pub(crate) fn columns(&self) -> &[Range<usize>] {
        &self.columns
    }

    /// Bytes of the feature values each worker holds, over `nodes` vertices.
    pub(crate) fn held_bytes(&self, nodes: u64) -> Vec<u64> {
        self.columns.iter().map(|c| nodes * c.len() as u64 * VALUE_BYTES).collect()
    }

    fn width(&self) -> usize {
        self.columns.last().map_or(0, |r| r.end)
    }

    /// Zeroed rows for `ids`, this worker's columns filled in.
    fn own_rows(&mut self, ids: &[u32]) {
        let own = self.columns[self.rank].clone();
        self.rows = Array2::zeros((ids.len(), self.width()));
        for (i, &id) in ids.iter().enumerate() {
            self.rows.slice_mut(s![i, own.clone()]).assign(&self.block.row(id as usize));
        }
    }

    /// This worker's columns, as the rows of a fetch iteration hold them beside the others.
    pub(crate) fn own_columns(&self) -> OwnColumns {
        let own = &self.columns[self.rank];
        OwnColumns::Beside(Columns { start: own.start, end: own.end })
    }

    /// Every vertex's row with this worker's columns, every other column 0: what
    /// [`ColumnShard::local_rows`] gathers from (a device worker holds it resident).
    pub(crate) fn own_rows_of_every_vertex(&self) -> Array2<f32> {
        let mut rows = Array2::zeros((self.block.nrows(), self.width()));
        rows.slice_mut(s![.., self.columns[self.rank].clone()]).assign(&self.block);
        rows
    }

    /// Eq. 4's input: the rows of `ids` with this worker's columns, every other column 0.
    pub(crate) fn local_rows(&mut self, ids: &[u32]) -> &Array2<f32> {
        self.own_rows(ids);
        &self.rows
    }

    /// Eq. 3's input: the full rows of `ids`. Every worker sends every peer the ids it needs
    /// (one all-to-all under [`FETCH_IDS`]), and answers each request with its columns of those
    /// rows (one under [`FETCH_COLUMNS`]). A collective: every worker calls it, `ids` possibly
    /// empty.
    pub(crate) fn fetch_rows(&mut self, comm: &dyn Communicator, ids: &[u32]) -> Result<&Array2<f32>, DistError> {
        let workers = self.columns.len();
        let request: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        let send = (0..workers).map(|p| if p == self.rank { Vec::new() } else { request.clone() }).collect();
        let requests = comm.all_to_all_v(FETCH_IDS, send)?;
        let mut replies = Vec::with_capacity(workers);
        for (peer, bytes) in requests.iter().enumerate() {
            if bytes.len() % ID_BYTES as usize != 0 {
                return Err(self.garbage(peer, format!("a request of {} bytes is not a list of u32 ids", bytes.len())));
            }
            let mut reply = Vec::with_capacity(bytes.len() / 4 * self.block.ncols() * 4);
            for id in bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))) {
                if id as usize >= self.block.nrows() {
                    return Err(self.garbage(peer, format!("requested vertex {id} does not exist")));
                }
                reply.extend(self.block.row(id as usize).iter().flat_map(|v| v.to_le_bytes()));
            }
            replies.push(reply);
        }
        let answers = comm.all_to_all_v(FETCH_COLUMNS, replies)?;
        self.own_rows(ids);
        for (peer, bytes) in answers.iter().enumerate().filter(|&(p, _)| p != self.rank) {
            let cols = self.columns[peer].clone();
            if bytes.len() != ids.len() * cols.len() * VALUE_BYTES as usize {
                return Err(self.garbage(peer, format!("{} bytes of columns for {} rows", bytes.len(), ids.len())));
            }
            let values = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")));
            let mut target = self.rows.slice_mut(s![.., cols]);
            for (slot, v) in target.iter_mut().zip(values) {
                *slot = v;
            }
        }
        Ok(&self.rows)
    }

    fn garbage(&self, peer: usize, detail: String) -> DistError {
        DistError::Setup { rank: self.rank, detail: format!("feature fetch from rank {peer}: {detail}") }
    }

    /// The bytes a fetch puts on the wire when worker `k` requests `requested[k]` rows: each
    /// sends its ids to the `K - 1` others and receives the others' columns of those rows,
    /// `sum_k n_k (4 (K - 1) + 4 (d - d_k))`. The paper's `B d / (K b)` leaves out the ids,
    /// the 4 bytes per value and the worker's own `d_k` columns.
    #[cfg(test)]
    pub(crate) fn fetch_bytes(columns: &[Range<usize>], requested: &[usize]) -> u64 {
        let (workers, width) = (columns.len() as u64, columns.last().map_or(0, |r| r.end) as u64);
        columns
            .iter()
            .zip(requested)
            .map(|(own, &n)| n as u64 * (ID_BYTES * (workers - 1) + VALUE_BYTES * (width - own.len() as u64)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use comm_hierarchy::{LocalCluster, Topology};

    use super::*;

    fn features() -> Array2<f32> {
        Array2::from_shape_fn((20, 7), |(i, j)| (i * 10 + j) as f32 * 0.5 - 3.0)
    }

    /// Worker `k` asks for `k + 2` distinct rows (the last one an empty list).
    fn ids(rank: usize, workers: usize) -> Vec<u32> {
        if rank == workers - 1 {
            Vec::new()
        } else {
            (0..rank as u32 + 2).map(|i| (i * 7 + rank as u32) % 20).collect()
        }
    }

    #[test]
    fn a_fetch_rebuilds_full_rows_and_costs_exactly_the_analytic_bytes() {
        let (x, workers) = (features(), 3);
        let topology = Topology::for_workers(workers, 1, Default::default()).unwrap();
        let ledgers = LocalCluster::run(&topology, |comm| {
            let mut shard = ColumnShard::new(&x, comm.rank(), workers)?;
            let want = ids(comm.rank(), workers);
            let mark = comm.ledger_mark();
            let rows = shard.fetch_rows(comm, &want)?.clone();
            let delta = comm.ledger_since(mark);
            for (i, &id) in want.iter().enumerate() {
                assert_eq!(rows.row(i), x.row(id as usize), "rank {} row {id}", comm.rank());
            }
            let local = shard.local_rows(&want).clone();
            let own = shard.columns()[comm.rank()].clone();
            for (i, &id) in want.iter().enumerate() {
                for j in 0..x.ncols() {
                    let expected = if own.contains(&j) { x[[id as usize, j]] } else { 0.0 };
                    assert_eq!(local[[i, j]], expected, "eq. 4: rank {} row {id} column {j}", comm.rank());
                }
            }
            Ok::<_, DistError>((delta, shard.columns().to_vec()))
        })
        .unwrap();
        let columns = ledgers[0].1.clone();
        let requested: Vec<usize> = (0..workers).map(|k| ids(k, workers).len()).collect();
        let sent: u64 = ledgers
            .iter()
            .map(|(l, _)| l.phase_totals(FETCH_IDS).bytes() + l.phase_totals(FETCH_COLUMNS).bytes())
            .sum();
        // Columns 0..3, 3..5, 5..7; rows 2 and 3 requested: 2 (4*2 + 4*4) + 3 (4*2 + 4*5) + 0.
        assert_eq!(ColumnShard::fetch_bytes(&columns, &requested), 2 * 24 + 3 * 28);
        assert_eq!(sent, ColumnShard::fetch_bytes(&columns, &requested));
    }

    #[test]
    fn more_workers_than_columns_is_an_error() {
        let err = ColumnShard::new(&features(), 0, 8).unwrap_err();
        assert!(err.to_string().contains("feature"), "{err}");
    }
}
