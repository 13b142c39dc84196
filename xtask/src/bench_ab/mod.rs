//! `cargo xtask bench-ab REV [--rounds N] -- HALO_ARGS`: a same-run A/B timing of two builds of
//! `halo` on one workload.
//!
//! REV is checked out (detached) in a git worktree of its own, `target/bench-ab/trees/<commit>`,
//! and built in release into a target folder of its own, `target/bench-ab/targets/<commit>`:
//! cargo hashes a workspace member by its path within the workspace, so two worktrees sharing
//! one target folder would take each other's crates. Both stay for the next call, so comparing
//! against several commits in turn rebuilds none of them. The working tree is built in release
//! as usual. Both
//! binaries are copied to `target/bench-ab/bin` (a rebuild elsewhere cannot swap one mid-run) and
//! run alternately, the order flipping every round (REV first in round 1, 3, ...), so that load from
//! other processes and thermal drift fall on both sides alike. Each run writes its report to
//! `target/bench-ab/runs/`, and [`figures`] turns the reports into the printed table.

mod figures;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};

use figures::Figures;

/// Where the worktree, its target folder, the binaries and the reports live, under `target/`.
const HOME: &str = "target/bench-ab";

/// The two builds compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// REV, the baseline.
    Base,
    /// The working tree.
    New,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Base => "base",
            Side::New => "new",
        }
    }
}

/// The order of the two runs in round `round` (0-based): REV first in even rounds.
fn order(round: usize) -> [Side; 2] {
    if round.is_multiple_of(2) { [Side::Base, Side::New] } else { [Side::New, Side::Base] }
}

/// Builds both sides, runs them `rounds` times each on `halo_args` and prints the comparison.
pub fn run(root: &Path, rev: &str, rounds: usize, halo_args: &[String]) -> Result<()> {
    ensure!(rounds > 0, "bench-ab: --rounds must be at least 1");
    let home = root.join(HOME);
    let base = Baseline::check_out(root, rev).context("bench-ab")?;
    let short = base.short();
    let bin = home.join("bin");
    fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    eprintln!("bench-ab: building {short} in {}", base.tree.display());
    let base = keep(&build(&base.tree, &base.target_dir)?, &bin.join("halo-base"))?;
    eprintln!("bench-ab: building the working tree");
    let new = keep(&build(root, &root.join("target"))?, &bin.join("halo-new"))?;
    let runs = home.join("runs");
    fs::create_dir_all(&runs).with_context(|| format!("creating {}", runs.display()))?;
    let (mut base_figures, mut new_figures) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for side in order(round) {
            let (binary, into) = match side {
                Side::Base => (&base, &mut base_figures),
                Side::New => (&new, &mut new_figures),
            };
            let figures = run_once(binary, halo_args, &runs, side, round)?;
            eprintln!(
                "bench-ab: round {}/{rounds} {:<4} epoch wall_s {:.3}",
                round + 1,
                side.name(),
                figures.get("epoch wall_s").copied().unwrap_or(f64::NAN)
            );
            into.push(figures);
        }
    }
    println!("bench-ab: {rounds} rounds alternating, base = {short} ({rev}), new = the working tree");
    println!("halo {}", halo_args.join(" "));
    print!("{}", figures::table(&format!("base {short}"), "new", &base_figures, &new_figures));
    Ok(())
}

/// A commit checked out in a worktree of its own, with its own target folder.
pub(crate) struct Baseline {
    pub commit: String,
    pub tree: PathBuf,
    pub target_dir: PathBuf,
}

impl Baseline {
    /// Checks `rev` out in `target/bench-ab/trees/<commit>`, to build into
    /// `target/bench-ab/targets/<commit>` (`cargo xtask gpu-bundle --base` builds its device
    /// `halo` there too).
    pub(crate) fn check_out(root: &Path, rev: &str) -> Result<Self> {
        let home = root.join(HOME);
        let commit = git(root, &["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")])
            .with_context(|| format!("`{rev}` is not a commit of this repository"))?;
        let short = &commit[..commit.len().min(10)];
        let (tree, target_dir) = (home.join("trees").join(short), home.join("targets").join(short));
        checkout(root, &tree, &commit)?;
        Ok(Self { commit, tree, target_dir })
    }

    /// The commit's first ten digits.
    pub(crate) fn short(&self) -> &str {
        &self.commit[..self.commit.len().min(10)]
    }
}

/// Puts `tree` at `commit`: a detached worktree of `root`'s repository, made on the first call
/// and moved on later ones.
fn checkout(root: &Path, tree: &Path, commit: &str) -> Result<()> {
    let tree_arg = tree.to_str().with_context(|| format!("the path {} is not UTF-8", tree.display()))?;
    if tree.join(".git").exists() {
        git(tree, &["checkout", "--quiet", "--detach", "--force", commit])
            .with_context(|| format!("bench-ab: checking out {commit} in {}", tree.display()))?;
        return Ok(());
    }
    if tree.exists() {
        bail!("bench-ab: {} exists but is no git worktree; remove it and run again", tree.display());
    }
    // A worktree whose folder was deleted (`cargo clean`) is still registered until pruned.
    git(root, &["worktree", "prune"])?;
    git(root, &["worktree", "add", "--quiet", "--detach", tree_arg, commit])
        .with_context(|| format!("bench-ab: adding a worktree at {}", tree.display()))?;
    Ok(())
}

/// Builds the release `halo` of the workspace at `dir` into `target_dir`; returns the binary.
fn build(dir: &Path, target_dir: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(dir)
        .args(["build", "--release", "-p", "cli", "--bin", "halo", "--target-dir"])
        .arg(target_dir)
        .status()
        .context("starting cargo build")?;
    ensure!(status.success(), "bench-ab: building halo in {} failed ({status})", dir.display());
    Ok(target_dir.join("release").join("halo"))
}

/// Copies `binary` to `to` and returns `to`.
fn keep(binary: &Path, to: &Path) -> Result<PathBuf> {
    fs::copy(binary, to).with_context(|| format!("copying {} to {}", binary.display(), to.display()))?;
    Ok(to.to_owned())
}

/// One run of `binary` with `halo_args` and a report in `runs`; returns its figures. The run's
/// output goes to a log beside the report, whose tail a failure shows.
fn run_once(binary: &Path, halo_args: &[String], runs: &Path, side: Side, round: usize) -> Result<Figures> {
    let stem = format!("{}-{}", side.name(), round + 1);
    let (report, log) = (runs.join(format!("{stem}.json")), runs.join(format!("{stem}.log")));
    // A stale report must not pass for this run's.
    if report.exists() {
        fs::remove_file(&report).with_context(|| format!("removing {}", report.display()))?;
    }
    let out = fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone().with_context(|| format!("opening {}", log.display()))?;
    let status = Command::new(binary)
        .args(halo_args)
        .arg("--report")
        .arg(&report)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .with_context(|| format!("starting {}", binary.display()))?;
    if !status.success() {
        let text = fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        bail!(
            "bench-ab: the {} run of round {} failed ({status}); log {}:\n{}",
            side.name(),
            round + 1,
            log.display(),
            tail.join("\n")
        );
    }
    let text = fs::read_to_string(&report)
        .with_context(|| format!("bench-ab: the {} run wrote no report at {}", side.name(), report.display()))?;
    figures::read(&text).with_context(|| format!("reading {}", report.display()))
}

/// Runs `git args` in `dir` and returns its trimmed standard output.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git").current_dir(dir).args(args).output().context("starting git")?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_which_side_runs_first() {
        assert_eq!(order(0), [Side::Base, Side::New]);
        assert_eq!(order(1), [Side::New, Side::Base]);
        assert_eq!(order(2), order(0));
    }

    #[test]
    fn unknown_revisions_are_refused_before_building() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let err = run(root, "no-such-rev-xyz", 1, &["train".into()]).unwrap_err();
        assert!(format!("{err:#}").contains("`no-such-rev-xyz` is not a commit"), "{err:#}");
        let err = run(root, "HEAD", 0, &["train".into()]).unwrap_err();
        assert!(err.to_string().contains("--rounds must be at least 1"), "{err}");
    }
}
