//! Building every part's [`LocalGraph`] from a graph and an edge-cut or vertex-cut.

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

/// A part before its exchange lists are known: primaries, copies (ordered by home part then
/// global id) and its edges in local ids.
struct Skeleton {
    part: u32,
    local_to_global: Vec<u32>,
    num_primary: usize,
    csr: Csr,
}

/// Builds one part from its edges `(dst, src)` in global ids. Every endpoint not primary here
/// becomes a copy.
fn skeleton(part: u32, homes: &Homes, edges: &[(u32, u32)]) -> Skeleton {
    const ABSENT: u32 = u32::MAX;
    const COPY: u32 = u32::MAX - 1;
    let primaries = &homes.primaries[part as usize];
    // A dense global -> local map (4 bytes per graph vertex while this part is built): the
    // lookups per edge stay O(1) without hashing.
    let mut local = vec![ABSENT; homes.part.len()];
    for (l, &g) in primaries.iter().enumerate() {
        local[g as usize] = l as u32;
    }
    let mut copies = Vec::new();
    for g in edges.iter().flat_map(|&(d, s)| [d, s]) {
        if local[g as usize] == ABSENT {
            local[g as usize] = COPY;
            copies.push(g);
        }
    }
    copies.sort_unstable_by_key(|&g| (homes.part[g as usize], g));
    for (c, &g) in copies.iter().enumerate() {
        local[g as usize] = (primaries.len() + c) as u32;
    }
    let num_local = primaries.len() + copies.len();
    let mut indptr = vec![0u64; num_local + 1];
    for &(d, _) in edges {
        indptr[local[d as usize] as usize + 1] += 1;
    }
    for i in 0..num_local {
        indptr[i + 1] += indptr[i];
    }
    let mut fill = indptr.clone();
    let mut indices = vec![0u32; edges.len()];
    for &(d, s) in edges {
        let row = local[d as usize] as usize;
        indices[fill[row] as usize] = local[s as usize];
        fill[row] += 1;
    }
    for w in indptr.windows(2) {
        indices[w[0] as usize..w[1] as usize].sort_unstable();
    }
    let csr = Csr::try_new(num_local, num_local, indptr, indices).expect("distinct global edges stay distinct locally");
    let mut local_to_global = primaries.clone();
    local_to_global.extend_from_slice(&copies);
    Skeleton { part, local_to_global, num_primary: primaries.len(), csr }
}

/// Edge-cut: each part's edges are the in-edges of the vertices it owns.
pub(super) fn edge_cut_parts(graph: &Csr, homes: &Homes) -> Vec<LocalGraph> {
    let skeletons = (0..homes.primaries.len() as u32)
        .into_par_iter()
        .map(|p| {
            let edges: Vec<(u32, u32)> = homes.primaries[p as usize]
                .iter()
                .flat_map(|&v| graph.neighbors(v as usize).iter().map(move |&u| (v, u)))
                .collect();
            skeleton(p, homes, &edges)
        })
        .collect();
    assemble(graph, homes, skeletons)
}

/// Vertex-cut: each part's edges are the entries assigned to it.
pub(super) fn vertex_cut_parts(graph: &Csr, homes: &Homes, edge_part: &[u32]) -> Vec<LocalGraph> {
    let skeletons = (0..homes.primaries.len() as u32)
        .into_par_iter()
        .map(|p| {
            let edges: Vec<(u32, u32)> = (0..graph.num_nodes())
                .flat_map(|v| graph.row_range(v).filter(|&k| edge_part[k] == p).map(move |k| (v as u32, k)))
                .map(|(v, k)| (v, graph.indices()[k]))
                .collect();
            skeleton(p, homes, &edges)
        })
        .collect();
    assemble(graph, homes, skeletons)
}

/// Derives the exchange lists, copy origins and copy sites, which tie the parts together.
fn assemble(graph: &Csr, homes: &Homes, skeletons: Vec<Skeleton>) -> Vec<LocalGraph> {
    let parts = skeletons.len();
    let in_degree = graph.degrees();
    let out_degree = graph.column_counts();
    // send[a][b]: a's primaries copied on b, in b's copy order (ascending global id).
    let mut send = vec![vec![Vec::new(); parts]; parts];
    let mut site_count: Vec<Vec<u64>> = homes.primaries.iter().map(|p| vec![0; p.len() + 1]).collect();
    for s in &skeletons {
        for &g in &s.local_to_global[s.num_primary..] {
            let (a, l) = (homes.part[g as usize] as usize, homes.local[g as usize]);
            send[a][s.part as usize].push(l);
            site_count[a][l as usize + 1] += 1;
        }
    }
    let mut copy_ptr: Vec<Vec<u64>> = site_count
        .into_iter()
        .map(|mut c| {
            for i in 1..c.len() {
                c[i] += c[i - 1];
            }
            c
        })
        .collect();
    let mut copy_sites: Vec<Vec<(u32, u32)>> =
        copy_ptr.iter().map(|c| vec![(0, 0); *c.last().expect("len + 1 entries") as usize]).collect();
    // Filling in ascending part order keeps each primary's sites sorted by part.
    let mut fill: Vec<Vec<u64>> = copy_ptr.clone();
    for s in &skeletons {
        for (c, &g) in s.local_to_global[s.num_primary..].iter().enumerate() {
            let (a, l) = (homes.part[g as usize] as usize, homes.local[g as usize] as usize);
            copy_sites[a][fill[a][l] as usize] = (s.part, (s.num_primary + c) as u32);
            fill[a][l] += 1;
        }
    }
    skeletons
        .into_iter()
        .zip(send)
        .map(|(s, send)| {
            let p = s.part as usize;
            let mut recv = vec![Vec::new(); parts];
            let mut copy_origin = Vec::with_capacity(s.local_to_global.len() - s.num_primary);
            for (l, &g) in s.local_to_global.iter().enumerate().skip(s.num_primary) {
                recv[homes.part[g as usize] as usize].push(l as u32);
                copy_origin.push((homes.part[g as usize], homes.local[g as usize]));
            }
            let mut by_global: Vec<u32> = (0..s.local_to_global.len() as u32).collect();
            by_global.sort_unstable_by_key(|&l| s.local_to_global[l as usize]);
            LocalGraph {
                part: s.part,
                num_primary: s.num_primary,
                global_in_degree: s.local_to_global.iter().map(|&g| in_degree[g as usize]).collect(),
                global_out_degree: s.local_to_global.iter().map(|&g| out_degree[g as usize]).collect(),
                by_global,
                local_to_global: s.local_to_global,
                csr: s.csr,
                send,
                recv,
                copy_origin,
                copy_ptr: std::mem::take(&mut copy_ptr[p]),
                copy_sites: std::mem::take(&mut copy_sites[p]),
            }
        })
        .collect()
}
