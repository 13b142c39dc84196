//! `--device cpu|cuda[:N]` and `--backend nccl`: a GPU run, or NCCL's, is refused before any work
//! in a build without its feature.

use trainer::config::{Backend, Device, TrainConfig};

/// The build command that makes `--device cuda` available.
pub const CUDA_BUILD: &str = "cargo build --release -p cli --features cuda";
/// The build command named when `--backend nccl` meets a build without NCCL.
pub const NCCL_BUILD: &str = "cargo build --release -p cli --features nccl";

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
    if c.distributed.backend == Backend::Nccl && !built.nccl {
        anyhow::bail!("--backend nccl: this halo was built without NCCL support; build it with `{NCCL_BUILD}`");
    }
    match c.device {
        Device::Cuda(_) if !built.cuda => anyhow::bail!(
            "--device {}: this halo was built without CUDA support; build it with `{CUDA_BUILD}`",
            c.device
        ),
        _ => Ok(()),
    }
}
