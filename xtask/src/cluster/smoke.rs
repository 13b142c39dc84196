//! `cargo xtask cluster smoke --halo PATH`: the cluster test CI runs. Two hosts of two ranks
//! each over links shaped to 100 Mbit/s train Cora for 2 epochs with vanilla and with adaqp.
//! Each report must name 2 hosts and count bytes between them; vanilla's losses must equal an
//! in-process run's on the same 4 workers and 2 hosts. Afterwards no namespace, link or process
//! is left.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use super::reports::{epochs, losses, read, scratch};
use super::{Rate, Shape, down, net, run_command, up};

/// Each run's bound: Cora's two epochs take seconds.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs the test with the MPI build of `halo` at `halo`; the cluster is removed whatever happens.
pub fn smoke(halo: &Path) -> Result<()> {
    let halo = halo.canonicalize().with_context(|| format!("--halo {}: no such binary", halo.display()))?;
    let shape = Shape::new(2, 2, Rate::parse("100mbit")?);
    up(&shape)?;
    let outcome = train_both(&halo, &shape);
    let removed = down();
    outcome?;
    removed?;
    ensure!(net::namespaces()?.is_empty() && net::root_links()?.is_empty(), "cluster smoke: down left links behind");
    eprintln!("cluster smoke: passed");
    Ok(())
}

fn cora() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/cora").display().to_string()
}

fn train_both(halo: &Path, shape: &Shape) -> Result<()> {
    let dir = scratch("smoke")?;
    let common = ["train", "--dataset", &cora(), "--epochs", "2", "--hosts", "2", "--quiet"];
    let mut reports = Vec::new();
    for method in ["vanilla", "adaqp"] {
        let report = dir.join(format!("{method}.json"));
        let mut command: Vec<String> = std::iter::once(halo.display().to_string())
            .chain(common.iter().map(|s| s.to_string()))
            .chain(["--method", method, "--report", &report.display().to_string()].map(String::from))
            .collect();
        command.extend(["--peer-timeout".into(), "60".into()]);
        let run = run_command(shape, RUN_TIMEOUT, &command)?;
        ensure!(
            run.status.success(),
            "cluster smoke: `{}` on the cluster ended with {}",
            command.join(" "),
            run.status
        );
        ensure!(run.left.is_empty(), "cluster smoke: {method} left processes: {}", run.left.join("; "));
        reports.push((method, read(&report)?));
    }
    for (method, report) in &reports {
        ensure!(
            report["hosts"] == 2 && report["workers"] == 4,
            "cluster smoke: {method}'s report names {} hosts and {} workers, expected 2 and 4",
            report["hosts"],
            report["workers"]
        );
        let inter: u64 = epochs(report).iter().filter_map(|e| e["bytes_inter"].as_u64()).sum();
        ensure!(inter > 0, "cluster smoke: {method} moved no bytes between hosts");
    }
    let local = dir.join("local.json");
    let status = Command::new(halo)
        .args(common)
        .args(["--method", "vanilla", "--workers", "4", "--report"])
        .arg(&local)
        .status()
        .context("running halo")?;
    ensure!(status.success(), "cluster smoke: the in-process run failed with {status}");
    let (wire, local) = (losses(&reports[0].1), losses(&read(&local)?));
    ensure!(
        wire.len() == 2 && wire.iter().zip(&local).all(|(a, b)| (a - b).abs() <= 1e-4 * b.abs().max(1.0)),
        "cluster smoke: vanilla's losses on the wire {wire:?} differ from the in-process run's {local:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
