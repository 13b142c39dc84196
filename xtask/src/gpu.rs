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
/// and NCCL against the host backend, its collectives and training's gradient sum (those need
/// two GPUs).
pub const GPU_TESTS: [GpuTest; 4] = [
    GpuTest { package: "gnn-core", feature: "cuda", test: "gpu", gpus: 1 },
    GpuTest { package: "trainer", feature: "cuda", test: "gpu_train", gpus: 1 },
    GpuTest { package: "comm-hierarchy", feature: "nccl", test: "nccl", gpus: 2 },
    GpuTest { package: "trainer", feature: "nccl", test: "nccl_train", gpus: 2 },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A test file compiled only with a GPU feature is a GPU test: `gpu-test` and `gpu-bundle`
    /// must list it, or it would never run.
    #[test]
    fn every_gpu_test_file_is_listed() {
        let root = crate::project_root();
        let mut found = Vec::new();
        for krate in std::fs::read_dir(root.join("crates")).unwrap() {
            let krate = krate.unwrap().path();
            let Ok(tests) = std::fs::read_dir(krate.join("tests")) else { continue };
            for file in tests {
                let path = file.unwrap().path();
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if let Some(feature) = ["cuda", "nccl"]
                    .into_iter()
                    .find(|f| text.lines().any(|l| l.trim() == format!("#![cfg(feature = \"{f}\")]")))
                {
                    let package = krate.file_name().unwrap().to_string_lossy().into_owned();
                    let test = path.file_stem().unwrap().to_string_lossy().into_owned();
                    found.push((package, feature, test));
                }
            }
        }
        found.sort();
        let mut listed: Vec<_> =
            GPU_TESTS.iter().map(|t| (t.package.to_owned(), t.feature, t.test.to_owned())).collect();
        listed.sort();
        assert_eq!(found, listed, "GPU test files (crates/*/tests/*.rs behind cuda or nccl) against GPU_TESTS");
    }
}
