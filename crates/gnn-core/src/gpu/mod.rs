//! The device path. [`reference`](mod@reference) holds CPU references for every kernel in `kernels/*.cu` and is
//! always built (its tests run in `cargo test`). Behind the `cuda` feature, [`Device`] loads the
//! embedded PTX lazily per device and launches the kernels and cuBLAS; without it a stand-in
//! [`Device`] keeps the API compiling and refuses to start, so the CPU path never changes.

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
