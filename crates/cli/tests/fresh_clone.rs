//! A fresh clone of the repository, with nothing beside it, has everything the README's quick
//! start needs. The clone is of the committed tree (`git clone` of this checkout), so it sees
//! what a user who clones Halo gets; running the whole test suite inside a test would take far
//! too long, so the test command is checked for the data it reads instead: no tracked file may
//! point outside the repository for test data, and the vendored Cora must be tracked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root exists")
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Clones the repository into `<parent>/halo`, where `parent` is a fresh empty directory.
fn fresh_clone(parent: &Path) -> PathBuf {
    let clone = parent.join("halo");
    run(Command::new("git").args(["clone", "--quiet"]).arg(repo_root()).arg(&clone));
    clone
}

/// The indented command lines of the README block that follows the paragraph starting `intro`.
fn readme_block(readme: &str, intro: &str) -> Vec<String> {
    let start = readme.find(intro).unwrap_or_else(|| panic!("the README has no `{intro}` paragraph"));
    readme[start..]
        .lines()
        .skip_while(|l| !l.starts_with("    "))
        .take_while(|l| l.starts_with("    "))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn a_fresh_clone_runs_the_readme_commands_without_a_sibling_shared_directory() {
    let parent = tempfile::tempdir().unwrap();
    let clone = fresh_clone(parent.path());
    assert!(!parent.path().join("shared").exists());

    // (a) No tracked file reads test data from beside the repository, and Cora is tracked.
    let sibling = ["..", "shared", "datasets"].join("/");
    let listed = run(Command::new("git").arg("ls-files").current_dir(&clone));
    let tracked: Vec<&str> = std::str::from_utf8(&listed.stdout).expect("UTF-8 paths").lines().collect();
    let offenders: Vec<&str> = tracked
        .iter()
        .copied()
        .filter(|file| {
            std::fs::read(clone.join(file)).is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(&sibling))
        })
        .collect();
    assert!(offenders.is_empty(), "tracked files point at {sibling}: {offenders:?}");
    for file in ["datasets/cora/raw/edge.csv.gz", "datasets/cora/split/public/train.csv.gz", "datasets/cora/README.md"]
    {
        assert!(tracked.contains(&file), "{file} is not tracked");
    }

    // The README's quick start: the install, the test command, and the main job with the binary
    // already built (the install only builds it and puts it on the PATH), from the clone's root.
    let readme = std::fs::read_to_string(clone.join("README.md")).unwrap();
    assert_eq!(readme_block(&readme, "Build and install the `halo` binary"), ["cargo install --path crates/cli"]);
    assert_eq!(readme_block(&readme, "Run the tests:"), ["cargo test --workspace"]);
    let main_job = readme_block(&readme, "Run the main job");
    let [command] = main_job.as_slice() else { panic!("expected one main-job command, got {main_job:?}") };
    let args =
        command.strip_prefix("halo ").unwrap_or_else(|| panic!("the main job is not a `halo` command: {command}"));
    let report = parent.path().join("main-job.json");
    run(Command::new(env!("CARGO_BIN_EXE_halo"))
        .args(args.split_whitespace())
        .args(["--quiet", "--report"])
        .arg(&report)
        .current_dir(&clone));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!((report["method"].as_str(), report["workers"].as_u64()), (Some("vanilla"), Some(4)), "{report}");

    // `--dataset cora` resolves to the vendored copy from the clone's root.
    let report = parent.path().join("cora.json");
    run(Command::new(env!("CARGO_BIN_EXE_halo"))
        .args(["train", "--dataset", "cora", "--epochs", "1", "--quiet", "--report"])
        .arg(&report)
        .current_dir(&clone));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["dataset"], "cora", "{report}");
}
