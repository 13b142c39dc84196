//! `--device cpu|cuda[:N]`: where `halo train` computes.

use trainer::config::{Device, TrainConfig};

/// The build command that makes `--device cuda` available.
pub const CUDA_BUILD: &str = "cargo build --release -p cli --features cuda";

#[derive(Debug, clap::Args)]
pub struct DeviceFlags {
    /// Where to train: cpu, or cuda / cuda:N for GPU N (single-process full-batch only for now)
    /// [default: cpu].
    #[arg(long, value_name = "DEVICE")]
    device: Option<Device>,
}

impl DeviceFlags {
    pub fn apply(&self, c: &mut TrainConfig) {
        if let Some(device) = self.device {
            c.device = device;
        }
    }
}

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
