//! `--device cpu|cuda[:N]`: a GPU run is refused before any work in a build without CUDA.

use trainer::config::{Device, TrainConfig};

/// The build command that makes `--device cuda` available.
pub const CUDA_BUILD: &str = "cargo build --release -p cli --features cuda";

/// Refuses a GPU run before any work in a build without the device path.
pub fn check_build(c: &TrainConfig, built_with_cuda: bool) -> anyhow::Result<()> {
    match c.device {
        Device::Cuda(_) if !built_with_cuda => anyhow::bail!(
            "--device {}: this halo was built without CUDA support; build it with `{CUDA_BUILD}`",
            c.device
        ),
        _ => Ok(()),
    }
}
