//! Conversion between [`Csr`] and `sprs` matrices, so tests elsewhere can check Halo's sparse
//! kernels against an independent implementation.

use sprs::{CsMat, CsMatViewI, SpIndex};

use super::{Csr, CsrError};

impl Csr {
    /// The adjacency as an `sprs` CSR matrix with every stored entry equal to `1.0`
    /// (row `v`, column `u` for the edge `u -> v`, as in [`Csr`]).
    pub fn to_sprs(&self) -> CsMat<f32> {
        let indptr: Vec<usize> = self.indptr.iter().map(|&p| p as usize).collect();
        let indices: Vec<usize> = self.indices.iter().map(|&c| c as usize).collect();
        let data = vec![1.0f32; indices.len()];
        CsMat::try_new((self.num_rows(), self.num_cols), indptr, indices, data)
            .map_err(|(_, _, _, err)| err)
            .expect("a validated Csr satisfies every sprs structure check")
    }

    /// The sparsity pattern of an `sprs` matrix (CSR or CSC; values are ignored, explicitly
    /// stored zeros are kept as entries). Fails if an index does not fit Halo's `u32` ids.
    pub fn from_sprs<N, I, Iptr>(matrix: CsMatViewI<'_, N, I, Iptr>) -> Result<Self, CsrError>
    where
        N: Clone + Default,
        I: SpIndex,
        Iptr: SpIndex,
    {
        let csr_owned;
        let csr = if matrix.is_csr() {
            matrix
        } else {
            csr_owned = matrix.to_csr();
            csr_owned.view()
        };
        let (rows, cols) = csr.shape();
        if rows > u32::MAX as usize || cols > u32::MAX as usize {
            return Err(CsrError::TooManyNodes(rows.max(cols)));
        }
        let indptr: Vec<u64> = csr.proper_indptr().iter().map(|p| p.index() as u64).collect();
        let indices: Vec<u32> = csr.indices().iter().map(|i| i.index() as u32).collect();
        Self::try_new(rows, cols, indptr, indices)
    }
}

#[cfg(test)]
mod tests {
    use crate::csr::EdgeListOptions;

    use super::*;

    #[test]
    fn round_trips_through_sprs() {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: false };
        let g = Csr::from_edges(4, &[(0, 1), (2, 1), (3, 0), (1, 1), (2, 3)], opts).unwrap();
        let m = g.to_sprs();
        assert_eq!(m.shape(), (4, 4));
        assert_eq!(m.nnz(), g.num_edges());
        // Entry (v, u) is the edge u -> v.
        assert_eq!(m.get(1, 0), Some(&1.0));
        assert_eq!(m.get(1, 2), Some(&1.0));
        assert_eq!(m.get(0, 1), None);
        assert_eq!(Csr::from_sprs(m.view()).unwrap(), g);

        // A CSC matrix of the same pattern converts to the same graph.
        let csc = m.to_csc();
        assert_eq!(Csr::from_sprs(csc.view()).unwrap(), g);
    }

    #[test]
    fn sprs_product_matches_neighbour_sums() {
        // A x sums the in-neighbours of every node: the reference other crates test against.
        let g =
            Csr::from_edges(5, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)], EdgeListOptions::default()).unwrap();
        let x: Vec<f32> = (0..5).map(|i| (i * i) as f32 + 0.5).collect();
        let y = &g.to_sprs() * &sprs::CsVec::new(5, (0..5).collect(), x.clone());
        for v in 0..5 {
            let expected: f32 = g.neighbors(v).iter().map(|&u| x[u as usize]).sum();
            assert_eq!(y.get(v).copied().unwrap_or(0.0), expected, "row {v}");
        }
    }

    #[test]
    fn from_sprs_rectangular() {
        let m = CsMat::new((2, 3), vec![0, 2, 3], vec![0, 2, 1], vec![5.0f64, 0.0, 1.0]);
        let g = Csr::from_sprs(m.view()).unwrap();
        assert_eq!((g.num_rows(), g.num_cols()), (2, 3));
        assert_eq!(g.neighbors(0), &[0, 2]);
        assert_eq!(g.neighbors(1), &[1]);
    }
}
