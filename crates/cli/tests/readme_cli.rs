//! The README's `halo` commands run as written, in order, so the README cannot rot.
//!
//! Every indented `halo ...` line of `README.md` (with its `\` continuations and `&&` chains)
//! runs through the built binary in a scratch folder holding copies of what the commands read
//! from the repository (`datasets/cora`, `experiments/smoke.toml`); a `mkdir -p DIR` line makes
//! its folder there. Changes, so that the whole
//! list runs in about a minute: a training run gets `--epochs 2` (replacing the README's count
//! or added), `/tmp/` becomes the scratch folder, and an optional `[...]` group runs once
//! without and once with its flags. Skipped, each for the reason in [`SKIPPED`]: commands that
//! need `mpirun`, and the 100,000-vertex synthetic graph with the bench that reads it.

use std::path::{Path, PathBuf};
use std::process::Command;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The folder-making line of the README, run here as `create_dir_all`.
const MKDIR: &str = "mkdir -p ";

/// Commands left out (matched by prefix), with why.
const SKIPPED: [(&str, &str); 3] = [
    ("mpirun ", "needs mpirun and a build with `--features mpi` (the MPI tests cover it)"),
    ("halo datasets synth --nodes 100000", "writes a 100,000-vertex graph: too large for a test"),
    ("halo bench memory", "trains on that 100,000-vertex graph"),
];

/// The commands of the README's indented blocks that start with `halo`, `mpirun` or `mkdir -p`,
/// with continuation lines joined and comments dropped.
fn readme_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        let Some(code) = line.strip_prefix("    ") else {
            current = None;
            continue;
        };
        let code = code.split(" # ").next().unwrap_or_default().trim();
        let (code, continues) = match code.strip_suffix('\\') {
            Some(head) => (head.trim(), true),
            None => (code, false),
        };
        match current.as_mut() {
            Some(command) => *command = format!("{command} {code}"),
            None if ["halo ", "mpirun ", MKDIR].iter().any(|p| code.starts_with(p)) => current = Some(code.to_string()),
            None => continue,
        }
        if !continues && let Some(command) = current.take() {
            commands.push(command);
        }
    }
    commands
}

/// The variants of `command` with each `[...]` group left out and put in: one run without any
/// optional flags, one with all of them.
fn variants(command: &str) -> Vec<String> {
    if !command.contains('[') {
        return vec![command.to_string()];
    }
    let without: String = command.split('[').enumerate().fold(String::new(), |mut out, (i, piece)| {
        out += if i == 0 { piece } else { piece.split_once(']').map_or(piece, |(_, rest)| rest) };
        out
    });
    let with: String = command.replace(['[', ']'], "");
    vec![without, with]
}

/// `halo ARGS` as run here: 2 epochs for training, `/tmp/` inside `scratch`.
fn arguments(command: &str, scratch: &Path) -> Vec<String> {
    let tmp = format!("{}/", scratch.display());
    let mut args: Vec<String> = command.split_whitespace().skip(1).map(|a| a.replace("/tmp/", &tmp)).collect();
    if args.first().is_some_and(|a| a == "train") {
        match args.iter().position(|a| a == "--epochs") {
            Some(at) if at + 1 < args.len() => args[at + 1] = "2".to_string(),
            _ => args.extend(["--epochs".to_string(), "2".to_string()]),
        }
    }
    args
}

/// Copies `from` (a file or folder) to `to`, leaving out datasets' `processed/` caches.
fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap();
            if name != "processed" {
                copy(&path, &to.join(name));
            }
        }
    } else {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
    }
}

#[test]
fn the_readme_halo_commands_run_in_order() {
    let readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    assert!(commands.len() >= 15, "expected the README's `halo` examples, found {commands:?}");
    let scratch = tempfile::tempdir().unwrap();
    for path in ["datasets/cora", "experiments/smoke.toml"] {
        std::fs::create_dir_all(scratch.path().join(path).parent().unwrap()).unwrap();
        copy(&Path::new(REPO).join(path), &scratch.path().join(path));
    }
    let (mut ran, mut skipped) = (0, Vec::new());
    for command in &commands {
        if let Some((_, why)) = SKIPPED.iter().find(|(prefix, _)| command.starts_with(prefix)) {
            skipped.push(format!("{command}: {why}"));
            continue;
        }
        if let Some(dir) = command.strip_prefix(MKDIR) {
            std::fs::create_dir_all(scratch.path().join(dir.trim())).unwrap();
            continue;
        }
        for variant in variants(command) {
            for part in variant.split(" && ") {
                let args = arguments(part.trim(), scratch.path());
                let out = Command::new(env!("CARGO_BIN_EXE_halo"))
                    .args(&args)
                    .current_dir(scratch.path())
                    .output()
                    .expect("halo runs");
                assert!(
                    out.status.success(),
                    "README command `{part}` (run as halo {args:?}) failed:\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                ran += 1;
            }
        }
    }
    eprintln!("ran {ran} README commands; skipped:\n  {}", skipped.join("\n  "));
    assert_eq!(skipped.len(), SKIPPED.len(), "each skip rule matches one README command: {skipped:?}");
}

#[test]
fn commands_are_joined_split_and_rewritten() {
    let readme = "text halo not code\n\n    mkdir -p out\n    halo a --x 1 \\\n        --y 2   # note\n    cargo b\n    \
                  mpirun -np 2 halo c\n\n    halo d [--e] && halo f --epochs 9\n";
    let commands = readme_commands(readme);
    assert_eq!(
        commands,
        ["mkdir -p out", "halo a --x 1 --y 2", "mpirun -np 2 halo c", "halo d [--e] && halo f --epochs 9"]
    );
    assert_eq!(variants("halo d [--e] x [--f g]"), ["halo d  x ", "halo d --e x --f g"]);
    let scratch = PathBuf::from("/s");
    assert_eq!(
        arguments("halo train --epochs 200 --out /tmp/x", &scratch),
        ["train", "--epochs", "2", "--out", "/s/x"]
    );
    assert_eq!(arguments("halo train --dataset cora", &scratch), ["train", "--dataset", "cora", "--epochs", "2"]);
    assert_eq!(arguments("halo compare a.json", &scratch), ["compare", "a.json"]);
}
