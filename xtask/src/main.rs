//! `cargo xtask`: Halo's developer tasks (rust-analyzer style: plain Rust instead of scripts).
//!
//! - `cargo xtask download <ogbn-...> [--dir DIR]`: fetch and unpack an OGB dataset.
//! - `cargo xtask ptx [--arch sm_XX] [--nvcc] [--check]`: compile `kernels/*.cu` to PTX, or check it.
//! - `cargo xtask gpu-test`: the GPU tests `cargo test` ignores.
//! - `cargo xtask gpu-bundle DIR [--base REV]`: those tests, `halo` (and REV's), Cora and the PyG speed peer in one folder
//!   that a GPU machine without Rust runs with `DIR/run`.
//! - `cargo xtask bench-ab REV [--rounds N] -- HALO_ARGS`: REV's `halo` against the working
//!   tree's on one workload, run alternately in one sitting.
//! - `cargo xtask cluster up|run|shape|link|status|down|smoke`: a cluster of hosts in network
//!   namespaces on this machine, MPI across them over shaped links.
//!
//! The repository's tidy checks (crate layering, manifests, source hygiene, unused dependencies,
//! portability) live in `tidy` as tests, so `cargo test --workspace` enforces them.

mod bench_ab;
mod bundle;
mod cli;
mod cluster;
mod datasets;
mod download;
mod gpu;
mod install;
mod meta;
mod progress;
mod ptx;
#[cfg(test)]
mod testutil;
#[cfg(test)]
mod tidy;
mod unpack;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use cli::Command;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    match cli::parse(std::env::args().skip(1))? {
        Command::Help => print!("{}", cli::USAGE),
        Command::Download { dataset, dir } => {
            let dir = dir.unwrap_or_else(|| project_root().join("datasets"));
            install::download(dataset, &dir, &download::agent(true))?;
        }
        Command::Ptx { arch, compiler, mode } => ptx::run(&project_root().join("kernels"), &arch, compiler, mode)?,
        Command::GpuTest => gpu::test(&project_root())?,
        Command::GpuBundle { dir, base } => bundle::run(&project_root(), &dir, base.as_deref())?,
        Command::BenchAb { rev, rounds, halo_args } => bench_ab::run(&project_root(), &rev, rounds, &halo_args)?,
        Command::Cluster(action) => cluster::run(action)?,
    }
    Ok(())
}

/// The workspace root: xtask always lives one level below it.
fn project_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_owned()
}
