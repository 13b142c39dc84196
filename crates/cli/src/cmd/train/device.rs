//! `--device cpu|cuda[:N]` and `--backend nccl|mpi-nccl`: a GPU run, or NCCL's, is refused before
//! any work in a build without its feature.

use trainer::config::{Device, TrainConfig};

/// The build command that makes `--device cuda` available (it installs `halo` on the PATH).
pub const CUDA_BUILD: &str = "cargo install --path crates/cli --features cuda";
/// The build command named when `--backend nccl` (or `mpi-nccl`) meets a build without NCCL.
pub const NCCL_BUILD: &str = "cargo install --path crates/cli --features nccl";
/// The build command that makes `--backend mpi` available.
pub const MPI_BUILD: &str = "cargo install --path crates/cli --features mpi";

/// What this binary was built with.
#[derive(Debug, Clone, Copy)]
pub struct Built {
    pub cuda: bool,
    pub nccl: bool,
}

impl Built {
    /// This binary.
    pub const THIS: Built = Built { cuda: cfg!(feature = "cuda"), nccl: cfg!(feature = "nccl") };
}

/// Refuses a GPU run, or NCCL's, before any work in a build without its path.
pub fn check_build(c: &TrainConfig, built: Built) -> anyhow::Result<()> {
    let backend = c.distributed.backend;
    if backend.nccl() && !built.nccl {
        anyhow::bail!(
            "--backend {}: this halo was built without NCCL support; build it with `{NCCL_BUILD}`{}",
            backend.as_str(),
            if backend.in_process() { "" } else { " and `--features mpi`" }
        );
    }
    match c.device {
        Device::Cuda(_) if !built.cuda => anyhow::bail!(
            "--device {}: this halo was built without CUDA support; build it with `{CUDA_BUILD}`",
            c.device
        ),
        _ => Ok(()),
    }
}
