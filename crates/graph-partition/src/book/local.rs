//! One worker's share of a partitioned graph.

use std::sync::Arc;

use crate::Csr;

/// One part of a partition book: the vertices a worker holds, its edges in local ids, and the
/// index lists for exchanging vertex rows with its peers.
///
/// Every local vertex is either *primary* (edge-cut: owned; vertex-cut: master) or a *copy*
/// (edge-cut: halo; vertex-cut: mirror) of a vertex whose primary lives on another part.
/// Local ids `0..num_primary` are the primaries in ascending global id, then the copies grouped
/// by the part holding their primary (ascending part) and ascending global id within a group.
///
/// `csr` has a row and a column for every local vertex (`num_rows = num_cols = num_local`),
/// with Halo's convention: row `v` lists the sources `u` of edges `u -> v`.
/// - edge-cut: a primary's row is its full in-neighbour list; copy rows are empty, and the
///   copies are exactly the non-owned in-neighbours of owned vertices;
/// - vertex-cut: the rows hold this part's edges only, for masters and mirrors alike.
///
/// Exchange lists, for every peer `p` (empty for `p == part`):
/// - `send(p)`: local ids of my primaries that `p` holds copies of, in ascending global id;
/// - `recv(p)`: local ids of my copies whose primary is on `p`, in ascending global id.
///
/// so `send(p)` on part `a` and `recv(a)` on part `p` name the same vertices in the same
/// order, and one list pair serves both directions of every exchange:
/// - edge-cut forward: `a` sends the rows `send(p)`, `p` writes them into `recv(a)`;
///   backward (gradients of halo rows, also for directed graphs): `p` sends the rows `recv(a)`
///   back and `a` adds them into `send(p)`;
/// - vertex-cut gather: mirrors send partial sums `recv(p)`, the master adds
///   them into `send(p)`; scatter: the reverse, overwriting the mirrors.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub struct LocalGraph {
    pub(super) part: u32,
    pub(super) num_primary: usize,
    pub(super) local_to_global: Vec<u32>,
    /// Local ids sorted by global id, for [`LocalGraph::local_of`].
    pub(super) by_global: Vec<u32>,
    /// Shared with the worker's aggregation view ([`LocalGraph::shared_csr`]): held once.
    pub(super) csr: Arc<Csr>,
    pub(super) global_in_degree: Vec<u32>,
    pub(super) global_out_degree: Vec<u32>,
    pub(super) send: Vec<Vec<u32>>,
    pub(super) recv: Vec<Vec<u32>>,
    /// Per copy (local id - num_primary): (part of its primary, local id there).
    pub(super) copy_origin: Vec<(u32, u32)>,
    /// `copy_sites[copy_ptr[l]..copy_ptr[l + 1]]`: the (part, local id) of primary `l`'s copies.
    pub(super) copy_ptr: Vec<u64>,
    pub(super) copy_sites: Vec<(u32, u32)>,
}

impl LocalGraph {
    /// This part's id.
    pub fn part(&self) -> usize {
        self.part as usize
    }

    /// Number of parts in the book.
    pub fn num_parts(&self) -> usize {
        self.send.len()
    }

    /// Primaries plus copies.
    pub fn num_local(&self) -> usize {
        self.local_to_global.len()
    }

    /// Owned vertices (edge-cut) or masters (vertex-cut): local ids `0..num_primary`.
    pub fn num_primary(&self) -> usize {
        self.num_primary
    }

    /// Halo vertices (edge-cut) or mirrors (vertex-cut): local ids `num_primary..num_local`.
    pub fn num_copies(&self) -> usize {
        self.num_local() - self.num_primary
    }

    /// True when local vertex `local` is owned / a master.
    pub fn is_primary(&self, local: usize) -> bool {
        local < self.num_primary
    }

    /// Global id of every local vertex.
    pub fn local_to_global(&self) -> &[u32] {
        &self.local_to_global
    }

    /// The local id of global vertex `global`, if this part holds it.
    pub fn local_of(&self, global: u32) -> Option<u32> {
        self.by_global
            .binary_search_by_key(&global, |&l| self.local_to_global[l as usize])
            .ok()
            .map(|pos| self.by_global[pos])
    }

    /// The part's edges in local ids (see the type documentation for which edges).
    pub fn csr(&self) -> &Csr {
        &self.csr
    }

    /// The part's edges, shared rather than copied: a view built on them (a worker's
    /// aggregation graph) holds the same adjacency as this part.
    pub fn shared_csr(&self) -> Arc<Csr> {
        Arc::clone(&self.csr)
    }

    /// In-degree of every local vertex in the whole graph (row length of the global CSR).
    pub fn global_in_degree(&self) -> &[u32] {
        &self.global_in_degree
    }

    /// Out-degree of every local vertex in the whole graph (column count of the global CSR).
    pub fn global_out_degree(&self) -> &[u32] {
        &self.global_out_degree
    }

    /// Local ids of my primaries that `peer` holds copies of, ascending global id.
    pub fn send(&self, peer: usize) -> &[u32] {
        &self.send[peer]
    }

    /// Local ids of my copies whose primary is on `peer`, ascending global id.
    pub fn recv(&self, peer: usize) -> &[u32] {
        &self.recv[peer]
    }

    /// The longest list this part exchanges with one peer, either way: the rows of its largest
    /// message at one row per list entry.
    pub fn largest_peer_list(&self) -> usize {
        self.send.iter().chain(&self.recv).map(Vec::len).max().unwrap_or(0)
    }

    /// Where the primary of copy `local` lives: (part, local id on that part).
    /// `None` for a primary.
    pub fn origin_of(&self, local: usize) -> Option<(u32, u32)> {
        local.checked_sub(self.num_primary).and_then(|c| self.copy_origin.get(c)).copied()
    }

    /// The copies of primary `local` as (part, local id there), ascending part. Empty for a
    /// copy or a vertex no other part holds.
    pub fn copies_of(&self, local: usize) -> &[(u32, u32)] {
        match (self.copy_ptr.get(local), self.copy_ptr.get(local + 1)) {
            (Some(&start), Some(&end)) => &self.copy_sites[start as usize..end as usize],
            _ => &[],
        }
    }

    /// Number of edges this part stores (entries of its CSR).
    pub fn num_edges(&self) -> usize {
        self.csr.num_edges()
    }
}
