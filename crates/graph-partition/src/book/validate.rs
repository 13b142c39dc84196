//! Structural and cross-part checks of a partition book, run after building in tests and
//! always after loading.

use std::fmt;

use super::local::LocalGraph;
use super::{CutKind, LHopSets, PartitionBook};

/// A broken invariant of a partition book, with the part it was found in (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBook {
    pub part: Option<usize>,
    pub reason: String,
}

impl fmt::Display for InvalidBook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.part {
            Some(p) => write!(f, "part {p}: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for InvalidBook {}

fn fail<T>(part: Option<usize>, reason: String) -> Result<T, InvalidBook> {
    Err(InvalidBook { part, reason })
}

/// Checks one part on its own: ids in range, the local-id layout, CSR shape, list shapes.
pub(super) fn check_part(
    lg: &LocalGraph,
    index: usize,
    cut: CutKind,
    parts: usize,
    num_nodes: usize,
) -> Result<(), InvalidBook> {
    let at = Some(index);
    let n_local = lg.num_local();
    if lg.part() != index {
        return fail(at, format!("records part id {}", lg.part()));
    }
    if lg.send.len() != parts || lg.recv.len() != parts {
        return fail(at, format!("has {} send and {} recv lists for {parts} parts", lg.send.len(), lg.recv.len()));
    }
    if lg.num_primary > n_local {
        return fail(at, format!("{} primaries but only {n_local} local vertices", lg.num_primary));
    }
    if let Err(e) = lg.csr.check_structure() {
        return fail(at, format!("local CSR: {e}"));
    }
    if lg.csr.num_rows() != n_local || lg.csr.num_cols() != n_local {
        return fail(
            at,
            format!("local CSR is {}x{}, expected {n_local}x{n_local}", lg.csr.num_rows(), lg.csr.num_cols()),
        );
    }
    if let Some(&g) = lg.local_to_global.iter().find(|&&g| g as usize >= num_nodes) {
        return fail(at, format!("global id {g} out of range (graph has {num_nodes} nodes)"));
    }
    let by_global_ok = lg.by_global.len() == n_local
        && lg.by_global.iter().all(|&l| (l as usize) < n_local)
        && lg.by_global.windows(2).all(|w| lg.local_to_global[w[0] as usize] < lg.local_to_global[w[1] as usize]);
    if !by_global_ok {
        return fail(at, "global ids are not distinct or the global-id index is corrupt".into());
    }
    if !lg.local_to_global[..lg.num_primary].is_sorted() {
        return fail(at, "primaries are not in ascending global id".into());
    }
    if lg.global_in_degree.len() != n_local || lg.global_out_degree.len() != n_local {
        return fail(at, "global degree arrays do not cover every local vertex".into());
    }
    check_copies(lg, at, parts)?;
    check_sends(lg, at)?;
    check_sites(lg, at, parts)?;
    check_copy_edges(lg, at, cut)
}

/// Copies are ordered by (origin part, global id), and `recv` lists are exactly those groups.
fn check_copies(lg: &LocalGraph, at: Option<usize>, parts: usize) -> Result<(), InvalidBook> {
    if lg.copy_origin.len() != lg.num_copies() {
        return fail(at, format!("{} copy origins for {} copies", lg.copy_origin.len(), lg.num_copies()));
    }
    let mut expected_recv = vec![Vec::new(); parts];
    let mut prev: Option<(u32, u32)> = None;
    for (c, &(p, _)) in lg.copy_origin.iter().enumerate() {
        let local = lg.num_primary + c;
        if p as usize >= parts || p as usize == lg.part() {
            return fail(at, format!("copy {local} has its primary on part {p}"));
        }
        let key = (p, lg.local_to_global[local]);
        if prev.is_some_and(|k| k >= key) {
            return fail(at, format!("copy {local} is out of (origin part, global id) order"));
        }
        prev = Some(key);
        expected_recv[p as usize].push(local as u32);
    }
    match (0..parts).find(|&p| lg.recv[p] != expected_recv[p]) {
        Some(p) => fail(at, format!("recv list for part {p} does not match the copies whose primary is there")),
        None => Ok(()),
    }
}

/// `send` lists name primaries, in ascending global id.
fn check_sends(lg: &LocalGraph, at: Option<usize>) -> Result<(), InvalidBook> {
    if !lg.send[lg.part()].is_empty() {
        return fail(at, "send list to itself is not empty".into());
    }
    for (p, list) in lg.send.iter().enumerate() {
        let in_range = list.iter().all(|&l| (l as usize) < lg.num_primary);
        if !in_range || !list.windows(2).all(|w| lg.local_to_global[w[0] as usize] < lg.local_to_global[w[1] as usize])
        {
            return fail(at, format!("send list for part {p} holds non-primaries or is not in ascending global id"));
        }
    }
    Ok(())
}

/// `copy_ptr`/`copy_sites` form a CSR over primaries with at most one site per other part.
fn check_sites(lg: &LocalGraph, at: Option<usize>, parts: usize) -> Result<(), InvalidBook> {
    let ptr = &lg.copy_ptr;
    if ptr.len() != lg.num_primary + 1
        || ptr[0] != 0
        || !ptr.is_sorted()
        || *ptr.last().expect("non-empty") != lg.copy_sites.len() as u64
    {
        return fail(at, "copy-site offsets are malformed".into());
    }
    for l in 0..lg.num_primary {
        let sites = lg.copies_of(l);
        let ok = sites.iter().all(|&(p, _)| (p as usize) < parts && p as usize != lg.part())
            && sites.windows(2).all(|w| w[0].0 < w[1].0);
        if !ok {
            return fail(at, format!("copy sites of primary {l} name bad or repeated parts"));
        }
    }
    Ok(())
}

/// Edge-cut halo rows are empty and every halo vertex feeds some owned row; every vertex-cut
/// mirror touches one of the part's edges.
fn check_copy_edges(lg: &LocalGraph, at: Option<usize>, cut: CutKind) -> Result<(), InvalidBook> {
    let used_as_source = lg.csr.column_counts();
    for (local, &cols) in used_as_source.iter().enumerate().skip(lg.num_primary) {
        let rows = lg.csr.degree(local);
        let bad = match cut {
            CutKind::EdgeCut => rows != 0 || cols == 0,
            CutKind::VertexCut | CutKind::FeatureCut => rows == 0 && cols == 0,
        };
        if bad {
            return fail(
                at,
                format!("copy {local} has {rows} in-edges and {cols} out-edges, impossible for a {cut:?}"),
            );
        }
    }
    Ok(())
}

/// The whole book: metadata, every part, and the correspondences between parts.
pub(super) fn check_book(book: &PartitionBook) -> Result<(), InvalidBook> {
    let meta = &book.meta;
    if meta.cut == CutKind::FeatureCut {
        let ok = book.parts.is_empty()
            && meta.feature_columns.len() == meta.parts
            && meta.feature_columns.first().is_some_and(|r| r.start == 0)
            && meta.feature_columns.iter().all(|r| r.start < r.end)
            && meta.feature_columns.windows(2).all(|w| w[0].end == w[1].start);
        return if ok {
            Ok(())
        } else {
            fail(None, "feature-cut column ranges are not contiguous and non-empty".into())
        };
    }
    if book.parts.len() != meta.parts || meta.parts == 0 {
        return fail(None, format!("metadata says {} parts, book has {}", meta.parts, book.parts.len()));
    }
    for (i, lg) in book.parts.iter().enumerate() {
        check_part(lg, i, meta.cut, meta.parts, meta.num_nodes)?;
    }
    check_primaries(book)?;
    check_exchange_lists(book)?;
    if let Some(l_hop) = &book.l_hop {
        check_l_hop(book, l_hop)?;
    }
    Ok(())
}

/// Every vertex is primary on exactly one part, and the parts hold all edges once.
fn check_primaries(book: &PartitionBook) -> Result<(), InvalidBook> {
    let mut home = vec![u32::MAX; book.meta.num_nodes];
    for lg in &book.parts {
        for &g in &lg.local_to_global[..lg.num_primary] {
            if home[g as usize] != u32::MAX {
                return fail(Some(lg.part()), format!("vertex {g} is also primary on part {}", home[g as usize]));
            }
            home[g as usize] = lg.part;
        }
    }
    if let Some(g) = home.iter().position(|&p| p == u32::MAX) {
        return fail(None, format!("vertex {g} is primary on no part"));
    }
    let stored: usize = book.parts.iter().map(LocalGraph::num_edges).sum();
    if stored != book.meta.num_edges {
        return fail(None, format!("parts store {stored} edges, the graph has {}", book.meta.num_edges));
    }
    Ok(())
}

/// `send`/`recv` pairs match across parts, copy origins point at the right primaries (with
/// the same degrees), and copy sites point back at the copies.
fn check_exchange_lists(book: &PartitionBook) -> Result<(), InvalidBook> {
    let parts = &book.parts;
    for b in parts {
        for (a, lg_a) in parts.iter().enumerate() {
            let theirs = lg_a.send[b.part()].iter().map(|&l| lg_a.local_to_global[l as usize]);
            let mine = b.recv[a].iter().map(|&l| b.local_to_global[l as usize]);
            if !theirs.eq(mine) {
                return fail(Some(b.part()), format!("recv list for part {a} does not match part {a}'s send list"));
            }
        }
        for local in b.num_primary..b.num_local() {
            let (a, l) = b.copy_origin[local - b.num_primary];
            let home = &parts[a as usize];
            let same = (l as usize) < home.num_primary
                && home.local_to_global[l as usize] == b.local_to_global[local]
                && home.global_in_degree[l as usize] == b.global_in_degree[local]
                && home.global_out_degree[l as usize] == b.global_out_degree[local];
            if !same {
                return fail(Some(b.part()), format!("copy {local} does not match its origin ({a}, {l})"));
            }
        }
    }
    for a in parts {
        let copies_elsewhere: usize = parts.iter().map(|b| b.recv[a.part()].len()).sum();
        if a.copy_sites.len() != copies_elsewhere {
            return fail(
                Some(a.part()),
                format!("{} copy sites, other parts hold {copies_elsewhere} copies", a.copy_sites.len()),
            );
        }
        for l in 0..a.num_primary {
            for &(b, lb) in a.copies_of(l) {
                if parts[b as usize].origin_of(lb as usize) != Some((a.part, l as u32)) {
                    return fail(Some(a.part()), format!("copy site ({b}, {lb}) of primary {l} is not its copy"));
                }
            }
        }
    }
    Ok(())
}

/// l-hop sets: edge-cut only, one per part, ascending, in range, covering the owned vertices.
pub(super) fn check_l_hop(book: &PartitionBook, l_hop: &LHopSets) -> Result<(), InvalidBook> {
    check_l_hop_sets(book.meta.cut, book.parts.len(), l_hop)?;
    for (lg, set) in book.parts.iter().zip(&l_hop.nodes) {
        check_l_hop_of(lg, set, book.meta.num_nodes)?;
    }
    Ok(())
}

/// The l-hop sets as a whole: for an edge-cut, one per part.
pub(super) fn check_l_hop_sets(cut: CutKind, parts: usize, l_hop: &LHopSets) -> Result<(), InvalidBook> {
    if cut != CutKind::EdgeCut {
        return fail(None, format!("l-hop sets need an edge-cut book, this is a {cut:?}"));
    }
    if l_hop.nodes.len() != parts {
        return fail(None, format!("{} l-hop sets for {parts} parts", l_hop.nodes.len()));
    }
    Ok(())
}

/// Part `lg`'s l-hop set: ascending, below `num_nodes`, covering its owned vertices.
pub(super) fn check_l_hop_of(lg: &LocalGraph, set: &[u32], num_nodes: usize) -> Result<(), InvalidBook> {
    let ascending = set.windows(2).all(|w| w[0] < w[1]);
    let in_range = set.last().is_none_or(|&g| (g as usize) < num_nodes);
    let owned = &lg.local_to_global[..lg.num_primary];
    if !ascending || !in_range || !owned.iter().all(|g| set.binary_search(g).is_ok()) {
        return fail(Some(lg.part()), "l-hop set is unsorted, out of range, or misses owned vertices".into());
    }
    Ok(())
}
