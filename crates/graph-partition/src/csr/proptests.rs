//! Property tests for the CSR invariants every other module relies on.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{Csr, EdgeListOptions};

/// A node count and an edge list over it (duplicates and self loops included on purpose).
fn graph_input() -> impl Strategy<Value = (usize, Vec<(u32, u32)>)> {
    (1usize..40).prop_flat_map(|n| {
        let edge = (0..n as u32, 0..n as u32);
        (Just(n), prop::collection::vec(edge, 0..200))
    })
}

fn options() -> impl Strategy<Value = EdgeListOptions> {
    (any::<bool>(), any::<bool>())
        .prop_map(|(symmetrize, remove_self_loops)| EdgeListOptions { symmetrize, remove_self_loops })
}

/// The set of stored `(row, col)` entries `from_edges` must produce, computed independently.
fn expected_entries(edges: &[(u32, u32)], opts: EdgeListOptions) -> BTreeSet<(u32, u32)> {
    let mut set = BTreeSet::new();
    for &(s, d) in edges {
        if opts.remove_self_loops && s == d {
            continue;
        }
        set.insert((d, s));
        if opts.symmetrize {
            set.insert((s, d));
        }
    }
    set
}

fn entries(g: &Csr) -> BTreeSet<(u32, u32)> {
    (0..g.num_rows()).flat_map(|r| g.neighbors(r).iter().map(move |&c| (r as u32, c))).collect()
}

/// Ways to break a valid CSR; each must be rejected by `try_new`.
#[derive(Debug, Clone, Copy)]
enum Corruption {
    DropIndptrEntry,
    NonZeroStart,
    LastMismatch,
    DecreasingIndptr,
    UnsortedRow,
    DuplicateInRow,
    ColumnOutOfRange,
}

fn corruption() -> impl Strategy<Value = Corruption> {
    prop_oneof![
        Just(Corruption::DropIndptrEntry),
        Just(Corruption::NonZeroStart),
        Just(Corruption::LastMismatch),
        Just(Corruption::DecreasingIndptr),
        Just(Corruption::UnsortedRow),
        Just(Corruption::DuplicateInRow),
        Just(Corruption::ColumnOutOfRange),
    ]
}

/// Applies `c` to the arrays of a valid CSR; `None` when the graph is too small for it.
fn corrupt(g: &Csr, c: Corruption, pick: usize) -> Option<(usize, usize, Vec<u64>, Vec<u32>)> {
    let (rows, cols) = (g.num_rows(), g.num_cols());
    let mut indptr = g.indptr().to_vec();
    let mut indices = g.indices().to_vec();
    let long_rows: Vec<usize> = (0..rows).filter(|&r| g.degree(r) >= 2).collect();
    match c {
        Corruption::DropIndptrEntry => {
            indptr.pop();
        }
        Corruption::NonZeroStart => indptr[0] = 1 + pick as u64 % 5,
        Corruption::LastMismatch => *indptr.last_mut()? += 1 + pick as u64 % 3,
        Corruption::DecreasingIndptr => {
            // Raise an interior boundary above its successor (needs at least two rows).
            if rows < 2 {
                return None;
            }
            let r = 1 + pick % (rows - 1);
            indptr[r] = indptr[r + 1] + 1;
        }
        Corruption::UnsortedRow => {
            let r = *long_rows.get(pick % long_rows.len().max(1))?;
            let k = indptr[r] as usize;
            indices.swap(k, k + 1);
        }
        Corruption::DuplicateInRow => {
            let r = *long_rows.get(pick % long_rows.len().max(1))?;
            let k = indptr[r] as usize;
            indices[k + 1] = indices[k];
        }
        Corruption::ColumnOutOfRange => {
            if indices.is_empty() {
                return None;
            }
            let k = pick % indices.len();
            indices[k] = (cols + pick % 3) as u32;
        }
    }
    Some((rows, cols, indptr, indices))
}

proptest! {
    #[test]
    fn from_edges_is_valid_and_exact((n, edges) in graph_input(), opts in options()) {
        let g = Csr::from_edges(n, &edges, opts).unwrap();
        prop_assert!(g.check_structure().is_ok());
        prop_assert_eq!(g.num_rows(), n);
        prop_assert_eq!(g.num_cols(), n);
        prop_assert_eq!(entries(&g), expected_entries(&edges, opts));
        if opts.symmetrize {
            prop_assert!(g.is_symmetric());
        }
        if opts.remove_self_loops {
            prop_assert!((0..n).all(|v| !g.neighbors(v).contains(&(v as u32))));
        }
    }

    #[test]
    fn degrees_sum_to_nnz((n, edges) in graph_input(), opts in options()) {
        let g = Csr::from_edges(n, &edges, opts).unwrap();
        let row_sum: u64 = g.degrees().iter().map(|&d| d as u64).sum();
        let col_sum: u64 = g.column_counts().iter().map(|&d| d as u64).sum();
        prop_assert_eq!(row_sum, g.num_edges() as u64);
        prop_assert_eq!(col_sum, g.num_edges() as u64);
        prop_assert!((0..n).all(|v| g.degree(v) == g.neighbors(v).len()));
    }

    #[test]
    fn transpose_twice_is_identity((n, edges) in graph_input(), opts in options()) {
        let g = Csr::from_edges(n, &edges, opts).unwrap();
        let t = g.reverse();
        prop_assert!(t.check_structure().is_ok());
        prop_assert_eq!(g.column_counts(), t.degrees());
        // The in-place check agrees with building the transpose.
        prop_assert_eq!(g.is_symmetric(), t == g);
        prop_assert_eq!(t.reverse(), g);
    }

    #[test]
    fn try_new_accepts_valid_and_rejects_corruption(
        (n, edges) in graph_input(),
        opts in options(),
        c in corruption(),
        pick in any::<usize>(),
    ) {
        let g = Csr::from_edges(n, &edges, opts).unwrap();
        let rebuilt = Csr::try_new(g.num_rows(), g.num_cols(), g.indptr().to_vec(), g.indices().to_vec());
        prop_assert_eq!(rebuilt.as_ref(), Ok(&g));
        let corrupted = corrupt(&g, c, pick);
        prop_assume!(corrupted.is_some());
        let (rows, cols, indptr, indices) = corrupted.unwrap();
        prop_assert!(Csr::try_new(rows, cols, indptr, indices).is_err(), "{:?} accepted", c);
    }

    #[test]
    fn sprs_round_trip((n, edges) in graph_input(), opts in options()) {
        let g = Csr::from_edges(n, &edges, opts).unwrap();
        let m = g.to_sprs();
        prop_assert_eq!(m.nnz(), g.num_edges());
        prop_assert_eq!(Csr::from_sprs(m.view()).unwrap(), g.clone());
        prop_assert_eq!(Csr::from_sprs(m.to_csc().view()).unwrap(), g);
    }
}
