//! The GPU tests `cargo test` ignores: which they are, and `cargo xtask gpu-test`, which runs them.

use anyhow::{Context, Result};

/// One `#[ignore]`d GPU test target.
pub struct GpuTest {
    pub package: &'static str,
    /// The feature that compiles the target in.
    pub feature: &'static str,
    /// The `--test` target.
    pub test: &'static str,
    /// GPUs it needs on one host.
    pub gpus: usize,
}

impl GpuTest {
    /// Its file name in a GPU bundle, `<package>-<test>`.
    pub fn bundle_name(&self) -> String {
        format!("{}-{}", self.package, self.test)
    }
}

/// Every kernel against its CPU reference, device training against the CPU loss curve on Cora,
/// and NCCL against the host backend (that one needs two GPUs).
pub const GPU_TESTS: [GpuTest; 3] = [
    GpuTest { package: "gnn-core", feature: "cuda", test: "gpu", gpus: 1 },
    GpuTest { package: "trainer", feature: "cuda", test: "gpu_train", gpus: 1 },
    GpuTest { package: "comm-hierarchy", feature: "nccl", test: "nccl", gpus: 2 },
];

/// Runs the GPU tests through cargo in the workspace at `root`.
pub fn test(root: &std::path::Path) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    for GpuTest { package, feature, test, .. } in &GPU_TESTS {
        let status = std::process::Command::new(&cargo)
            .current_dir(root)
            .args(["test", "-p", package, "--features", feature, "--test", test, "--", "--ignored", "--test-threads=1"])
            .status()
            .context("starting cargo test")?;
        anyhow::ensure!(status.success(), "GPU tests of {package} (--test {test}) failed ({status})");
    }
    Ok(())
}
