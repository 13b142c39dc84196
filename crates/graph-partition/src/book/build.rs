//! Building every part's [`LocalGraph`] from a graph and an edge-cut or vertex-cut.
//!
//! In two passes: [`Plan::new`] finds every part's copies, the one thing a part needs to know
//! of the others (4 bytes per copy), then [`Plan::part`] builds one part whole. So the parts
//! can be built all at once ([`super::PartitionBook::build`], in parallel) or one at a time,
//! each written and dropped before the next is made (`super::folder`), holding one part's
//! arrays besides the graph.

use std::sync::Arc;

use rayon::prelude::*;

use super::local::LocalGraph;
use crate::Csr;

/// Where each global vertex's primary lives: its part, and its local id there (primaries are
/// numbered in ascending global id within their part).
pub(super) struct Homes {
    pub part: Vec<u32>,
    pub local: Vec<u32>,
    /// Primaries of each part, ascending.
    pub primaries: Vec<Vec<u32>>,
}

impl Homes {
    pub(super) fn new(parts: usize, home_part: Vec<u32>) -> Self {
        let mut primaries = vec![Vec::new(); parts];
        let mut local = vec![0u32; home_part.len()];
        for (g, &p) in home_part.iter().enumerate() {
            local[g] = primaries[p as usize].len() as u32;
            primaries[p as usize].push(g as u32);
        }
        Self { part: home_part, local, primaries }
    }
}

/// Which edges a part stores.
#[derive(Clone, Copy)]
pub(super) enum Cut<'a> {
    /// The in-edges of the vertices it owns.
    Edge,
    /// The entries of the graph's CSR assigned to it (`edge_part[k]`).
    Vertex { edge_part: &'a [u32] },
}

/// What building any one part needs: the graph, the homes, and every part's copies.
pub(super) struct Plan<'a> {
    graph: &'a Csr,
    cut: Cut<'a>,
    homes: Homes,
    /// Per part, its copies in local order (local ids `num_primary..`): by home part, then
    /// ascending global id.
    copies: Vec<Vec<u32>>,
    in_degree: Vec<u32>,
    out_degree: Vec<u32>,
}

impl<'a> Plan<'a> {
    /// Finds every part's copies (in parallel over the parts).
    pub(super) fn new(graph: &'a Csr, cut: Cut<'a>, homes: Homes) -> Self {
        let parts = homes.primaries.len() as u32;
        let copies = (0..parts).into_par_iter().map(|p| copies_of(graph, cut, &homes, p)).collect();
        Self { graph, cut, homes, copies, in_degree: graph.degrees(), out_degree: graph.column_counts() }
    }

    pub(super) fn parts(&self) -> usize {
        self.homes.primaries.len()
    }

    pub(super) fn homes(&self) -> &Homes {
        &self.homes
    }

    /// Every part, built in parallel.
    pub(super) fn all_parts(&self) -> Vec<LocalGraph> {
        (0..self.parts()).into_par_iter().map(|p| self.part(p)).collect()
    }

    /// Part `p` whole: its local CSR, ids, degrees, exchange lists, copy origins and the copy
    /// sites of its primaries.
    pub(super) fn part(&self, p: usize) -> LocalGraph {
        let homes = &self.homes;
        let primaries = &homes.primaries[p];
        let copies = &self.copies[p];
        let num_primary = primaries.len();
        let mut local_to_global = Vec::with_capacity(num_primary + copies.len());
        local_to_global.extend_from_slice(primaries);
        local_to_global.extend_from_slice(copies);
        let csr = self.local_csr(p, &local_to_global);
        // send[q]: my primaries that q holds copies of, in q's copy order.
        let send = (0..self.parts())
            .map(|q| self.homed_on(q, p).1.iter().map(|&g| homes.local[g as usize]).collect())
            .collect();
        let mut recv = vec![Vec::new(); self.parts()];
        let mut copy_origin = Vec::with_capacity(copies.len());
        for (c, &g) in copies.iter().enumerate() {
            let home = homes.part[g as usize];
            recv[home as usize].push((num_primary + c) as u32);
            copy_origin.push((home, homes.local[g as usize]));
        }
        // Each primary's copy sites, by ascending part (filled in part order).
        let mut copy_ptr = vec![0u64; num_primary + 1];
        for q in 0..self.parts() {
            for &g in self.homed_on(q, p).1 {
                copy_ptr[homes.local[g as usize] as usize + 1] += 1;
            }
        }
        for i in 1..copy_ptr.len() {
            copy_ptr[i] += copy_ptr[i - 1];
        }
        let mut copy_sites = vec![(0, 0); *copy_ptr.last().expect("len + 1 entries") as usize];
        let mut fill = copy_ptr.clone();
        for q in 0..self.parts() {
            let (first, run) = self.homed_on(q, p);
            for (c, &g) in run.iter().enumerate() {
                let l = homes.local[g as usize] as usize;
                copy_sites[fill[l] as usize] = (q as u32, (first + c) as u32);
                fill[l] += 1;
            }
        }
        drop(fill);
        let mut by_global: Vec<u32> = (0..local_to_global.len() as u32).collect();
        by_global.sort_unstable_by_key(|&l| local_to_global[l as usize]);
        LocalGraph {
            part: p as u32,
            num_primary,
            global_in_degree: local_to_global.iter().map(|&g| self.in_degree[g as usize]).collect(),
            global_out_degree: local_to_global.iter().map(|&g| self.out_degree[g as usize]).collect(),
            by_global,
            local_to_global,
            csr: Arc::new(csr),
            send,
            recv,
            copy_origin,
            copy_ptr,
            copy_sites,
        }
    }

    /// Part `q`'s copies whose primary is on part `p`, with the local id of the first: one run,
    /// as copies are ordered by home part.
    fn homed_on(&self, q: usize, p: usize) -> (usize, &[u32]) {
        let (copies, home) = (&self.copies[q], |g: &u32| self.homes.part[*g as usize] as usize);
        let start = copies.partition_point(|g| home(g) < p);
        let end = start + copies[start..].partition_point(|g| home(g) == p);
        (self.homes.primaries[q].len() + start, &copies[start..end])
    }

    /// Part `p`'s edges in local ids: one row per local vertex, sorted.
    fn local_csr(&self, p: usize, local_to_global: &[u32]) -> Csr {
        let graph = self.graph;
        let num_local = local_to_global.len();
        // A dense global -> local map (4 bytes per graph vertex while this part is built): the
        // lookups per edge stay O(1) without hashing.
        let mut local = vec![u32::MAX; graph.num_nodes()];
        for (l, &g) in local_to_global.iter().enumerate() {
            local[g as usize] = l as u32;
        }
        let mut indptr = vec![0u64; num_local + 1];
        let indices = match self.cut {
            Cut::Edge => {
                let primaries = &self.homes.primaries[p];
                for (l, &v) in primaries.iter().enumerate() {
                    indptr[l + 1] = indptr[l] + graph.degree(v as usize) as u64;
                }
                for l in primaries.len()..num_local {
                    indptr[l + 1] = indptr[l];
                }
                let mut indices = Vec::with_capacity(indptr[num_local] as usize);
                for &v in primaries {
                    indices.extend(graph.neighbors(v as usize).iter().map(|&u| local[u as usize]));
                }
                indices
            }
            Cut::Vertex { edge_part } => {
                let mine = |k: &usize| edge_part[*k] as usize == p;
                for v in 0..graph.num_nodes() {
                    let count = graph.row_range(v).filter(mine).count() as u64;
                    if count > 0 {
                        indptr[local[v] as usize + 1] = count;
                    }
                }
                for i in 0..num_local {
                    indptr[i + 1] += indptr[i];
                }
                let mut fill = indptr.clone();
                let mut indices = vec![0u32; indptr[num_local] as usize];
                for v in 0..graph.num_nodes() {
                    for k in graph.row_range(v).filter(mine) {
                        let row = local[v] as usize;
                        indices[fill[row] as usize] = local[graph.indices()[k] as usize];
                        fill[row] += 1;
                    }
                }
                indices
            }
        };
        drop(local);
        let mut indices = indices;
        for w in indptr.windows(2) {
            indices[w[0] as usize..w[1] as usize].sort_unstable();
        }
        Csr::try_new(num_local, num_local, indptr, indices).expect("distinct global edges stay distinct locally")
    }
}

/// Part `p`'s copies: every endpoint of its edges whose primary is elsewhere, ordered by home
/// part, then global id.
fn copies_of(graph: &Csr, cut: Cut<'_>, homes: &Homes, p: u32) -> Vec<u32> {
    let mut seen = vec![0u64; graph.num_nodes().div_ceil(64)];
    let mut copies = Vec::new();
    let mut see = |g: u32| {
        let (word, bit) = (g as usize / 64, 1u64 << (g % 64));
        if homes.part[g as usize] != p && seen[word] & bit == 0 {
            seen[word] |= bit;
            copies.push(g);
        }
    };
    match cut {
        Cut::Edge => {
            for &v in &homes.primaries[p as usize] {
                graph.neighbors(v as usize).iter().for_each(|&u| see(u));
            }
        }
        Cut::Vertex { edge_part } => {
            for v in 0..graph.num_nodes() {
                for k in graph.row_range(v).filter(|&k| edge_part[k] == p) {
                    see(v as u32);
                    see(graph.indices()[k]);
                }
            }
        }
    }
    copies.sort_unstable_by_key(|&g| (homes.part[g as usize], g));
    copies
}
