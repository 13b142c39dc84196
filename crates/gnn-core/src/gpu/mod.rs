//! The device path. [`reference`](mod@reference) holds CPU references for every kernel in `kernels/*.cu` and is
//! always built (its tests run in `cargo test`). Behind the `cuda` feature, [`Device`] loads the
//! embedded PTX lazily per device and launches the kernels and cuBLAS; without it a stand-in
//! [`Device`] keeps the API compiling and refuses to start, so the CPU path never changes.

pub mod arena;
pub mod footprint;
pub mod plan;
pub mod reference;

#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cuda")]
pub use cuda::*;

#[cfg(not(feature = "cuda"))]
mod stand_in;
#[cfg(not(feature = "cuda"))]
pub use stand_in::*;

/// A device's memory as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    pub free: u64,
    pub total: u64,
}

/// Columns per block of the column reductions (`COLUMN_TILE` in `kernels/elementwise.cu`).
pub const COLUMN_TILE: usize = 32;
/// About this many blocks per column reduction: enough to fill every SM of a large GPU.
const COLUMN_BLOCKS: usize = 1024;

/// How the device's column sums split `n` rows of `f` columns: `(chunks, rows per chunk)`,
/// at least 256 rows a chunk and about `COLUMN_BLOCKS` (1024) blocks over the column tiles. Each
/// chunk writes one partial sum per column, which a second pass adds up.
pub fn column_chunks(n: usize, f: usize) -> (usize, usize) {
    let tiles = f.div_ceil(COLUMN_TILE).max(1);
    let chunks = n.div_ceil(256).clamp(1, (COLUMN_BLOCKS / tiles).max(1));
    (chunks, n.div_ceil(chunks).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks cover every row, hold at least 256 rows unless there are fewer, and keep the
    /// grid near COLUMN_BLOCKS blocks.
    #[test]
    fn column_chunks_cover_the_rows() {
        for (n, f) in [(0, 1), (1, 1), (255, 3), (100_000, 1), (100_000, 256), (2_400_000, 47), (7, 5000)] {
            let (chunks, rows) = column_chunks(n, f);
            assert!(chunks >= 1 && chunks * rows >= n, "{n} x {f}");
            assert!(rows >= 256 || chunks == 1, "{n} x {f}: {chunks} chunks of {rows}");
            assert!(chunks * f.div_ceil(COLUMN_TILE) <= COLUMN_BLOCKS.max(f.div_ceil(COLUMN_TILE)), "{n} x {f}");
        }
    }
}
