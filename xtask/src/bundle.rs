//! `cargo xtask gpu-bundle DIR`: everything a GPU machine without a Rust toolchain needs to check
//! the device path in one call, `DIR/run`.
//!
//! The bundle holds `bin/halo` (release, feature `cuda`), every GPU test binary under `tests/`
//! (listed with the GPUs each needs in `tests.tsv`), Cora under `datasets/cora`, the PyG peer
//! (`pyg_gpu.py`, from `benches/peers/`), featpart's table script (`featpart-table.py`, from
//! `experiments/`), the summary script and the `run` script (both from `xtask/bundle/`), and
//! `bundle.json` (the commit it was built from). With `--base REV` it also holds REV's `halo`
//! (cuda) as `bin/halo-base`, built in bench-ab's worktree of REV, for the run's same-machine
//! A/B (`ab-device`). Nothing in it names a
//! path of the machine that built it: the test binaries find Cora through `HALO_CORA`, which
//! `run` sets. Binaries are copied without their debug info so the bundle stays under
//! [`SIZE_LIMIT`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use crate::bench_ab::Baseline;
use crate::gpu::GPU_TESTS;

/// The most the bundle may weigh (issue 35: under 60 MB).
pub const SIZE_LIMIT: u64 = 60_000_000;

/// Marks a directory as a bundle, so a rebuild may replace what an earlier one wrote.
const MARKER: &str = "bundle.json";

/// Files copied from the repository as they are: (source under the workspace, name in the bundle).
const SCRIPTS: [(&str, &str); 4] = [
    ("xtask/bundle/run", "run"),
    ("xtask/bundle/summary.py", "summary.py"),
    ("benches/peers/pyg_gpu.py", "pyg_gpu.py"),
    ("experiments/featpart-table.py", "featpart-table.py"),
];

/// What a bundle writes at its top level; a rebuild replaces exactly these.
const ENTRIES: [&str; 9] =
    ["bin", "tests", "datasets", "tests.tsv", "run", "summary.py", "pyg_gpu.py", "featpart-table.py", MARKER];

/// Builds the bundle into `dir` from the workspace at `root`, with `base`'s `halo` beside its own
/// where given.
pub fn run(root: &Path, dir: &Path, base: Option<&str>) -> Result<()> {
    // The base first: a revision that is no commit fails before minutes of building.
    let base = base.map(|rev| Baseline::check_out(root, rev).context("gpu-bundle --base")).transpose()?;
    prepare(dir)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let halo_args = ["build", "--release", "-p", "cli", "--features", "cuda"];
    let halo = build(root, &cargo, &halo_args, "halo")?;
    let mut binaries = vec![(PathBuf::from("bin/halo"), halo)];
    if let Some(base) = &base {
        let target_dir = base.target_dir.to_str().context("the bench-ab target folder's path is not UTF-8")?;
        let args: Vec<&str> = halo_args.iter().copied().chain(["--target-dir", target_dir]).collect();
        binaries.push((PathBuf::from("bin/halo-base"), build(&base.tree, &cargo, &args, "halo")?));
    }
    let base = base.map(|b| b.commit);
    let mut listing = String::new();
    for test in GPU_TESTS {
        let args = ["test", "--no-run", "-p", test.package, "--features", test.feature, "--test", test.test];
        let executable = build(root, &cargo, &args, test.test)?;
        let name = test.bundle_name();
        listing.push_str(&format!("{name}\t{}\n", test.gpus));
        binaries.push((Path::new("tests").join(&name), executable));
    }
    for (name, executable) in &binaries {
        install_binary(executable, &dir.join(name))?;
    }
    fs::write(dir.join("tests.tsv"), listing).context("writing tests.tsv")?;
    copy_tree(&root.join("datasets/cora"), &dir.join("datasets/cora"))?;
    for (source, name) in SCRIPTS {
        let target = dir.join(name);
        fs::copy(root.join(source), &target)
            .with_context(|| format!("copying {} to {}", root.join(source).display(), target.display()))?;
    }
    let tests: Vec<String> = GPU_TESTS.iter().map(|t| t.bundle_name()).collect();
    let marker = serde_json::json!({ "commit": commit(root), "base": base, "tests": tests });
    fs::write(dir.join(MARKER), format!("{marker:#}\n")).context("writing bundle.json")?;
    let size = tree_size(dir)?;
    ensure!(
        size < SIZE_LIMIT,
        "the bundle in {} weighs {} MB, over the {} MB limit (were the binaries stripped? `objcopy` comes with binutils)",
        dir.display(),
        size / 1_000_000,
        SIZE_LIMIT / 1_000_000
    );
    println!(
        "wrote {} ({:.1} MB); on the GPU machine: {}/run [OUTDIR]",
        dir.display(),
        size as f64 / 1e6,
        dir.display()
    );
    Ok(())
}

/// Creates `dir`, or clears what an earlier bundle wrote there; any other non-empty folder is
/// refused, so a mistyped path loses nothing.
fn prepare(dir: &Path) -> Result<()> {
    match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read the bundle folder {}", dir.display())),
        Ok(mut entries) => {
            let empty = entries.next().is_none();
            if !empty && !dir.join(MARKER).is_file() {
                bail!("{} is not empty and holds no {MARKER}: give an empty or new folder", dir.display());
            }
            for entry in ENTRIES.map(|e| dir.join(e)) {
                let removed = if entry.is_dir() { fs::remove_dir_all(&entry) } else { fs::remove_file(&entry) };
                match removed {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(e)
                            .with_context(|| format!("cannot remove {} of the earlier bundle", entry.display()));
                    }
                    _ => {}
                }
            }
        }
    }
    fs::create_dir_all(dir.join("bin"))
        .and_then(|()| fs::create_dir_all(dir.join("tests")))
        .with_context(|| format!("cannot create the bundle folder {}", dir.display()))
}

/// Runs `cargo ARGS --message-format=json-render-diagnostics` in `root` (diagnostics and progress
/// on stderr as usual) and returns the executable it reports for target `target`.
fn build(root: &Path, cargo: &std::ffi::OsStr, args: &[&str], target: &str) -> Result<PathBuf> {
    let command = format!("cargo {}", args.join(" "));
    eprintln!("gpu-bundle: {command}");
    let output = Command::new(cargo)
        .current_dir(root)
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start `{command}`"))?;
    ensure!(output.status.success(), "`{command}` failed ({})", output.status);
    let stdout = String::from_utf8_lossy(&output.stdout);
    executable(&stdout, target).with_context(|| format!("`{command}`"))
}

/// The `executable` of the compiler-artifact message for `target` in cargo's JSON messages.
fn executable(messages: &str, target: &str) -> Result<PathBuf> {
    let mut found = None;
    for line in messages.lines().filter(|l| l.starts_with('{')) {
        let message: Value =
            serde_json::from_str(line).with_context(|| format!("unreadable cargo message `{line}`"))?;
        if message["reason"] == "compiler-artifact"
            && message["target"]["name"] == target
            && let Some(path) = message["executable"].as_str()
        {
            found = Some(PathBuf::from(path));
        }
    }
    found.with_context(|| format!("reported no executable for target `{target}`"))
}

/// Copies `executable` to `target` without its debug info (`objcopy --strip-debug`); as it is
/// where objcopy is missing, leaving the size check to say so.
fn install_binary(executable: &Path, target: &Path) -> Result<()> {
    let status = Command::new("objcopy").arg("--strip-debug").arg(executable).arg(target).status();
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => bail!("`objcopy --strip-debug {} {}` failed ({status})", executable.display(), target.display()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            eprintln!("gpu-bundle: objcopy not found; copying {} with its debug info", executable.display());
            fs::copy(executable, target).map(drop).with_context(|| format!("copying {}", executable.display()))
        }
        Err(e) => Err(e).context("cannot start objcopy"),
    }
}

/// Copies the files under `from` to `to`, leaving out Halo's binary cache (`processed/`), which
/// the first load on the GPU machine rebuilds.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
        let (source, name) = (entry.path(), entry.file_name());
        if source.is_dir() {
            if name != "processed" {
                copy_tree(&source, &to.join(&name))?;
            }
        } else {
            fs::copy(&source, to.join(&name)).with_context(|| format!("copying {}", source.display()))?;
        }
    }
    Ok(())
}

/// Bytes of the files under `dir`.
fn tree_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let meta = entry.metadata().with_context(|| format!("cannot stat {}", entry.path().display()))?;
        total += if meta.is_dir() { tree_size(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

/// The commit the bundle is built from, `-dirty` when tracked files differ from it, or
/// `unknown` outside a git checkout.
fn commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match (git(&["rev-parse", "--short=12", "HEAD"]), git(&["status", "--porcelain", "--untracked-files=no"])) {
        (Some(hash), Some(changes)) if !changes.is_empty() => format!("{hash}-dirty"),
        (Some(hash), _) => hash,
        (None, _) => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_comes_from_the_named_targets_artifact() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"gnn_core","kind":["lib"]},"executable":null}
{"reason":"build-script-executed","package_id":"x"}
{"reason":"compiler-artifact","target":{"name":"gpu","kind":["test"]},"profile":{"test":true},"executable":"/t/debug/deps/gpu-1a2b"}
{"reason":"build-finished","success":true}
"#;
        assert_eq!(executable(messages, "gpu").unwrap(), PathBuf::from("/t/debug/deps/gpu-1a2b"));
        let err = executable(messages, "gpu_train").unwrap_err().to_string();
        assert_eq!(err, "reported no executable for target `gpu_train`");
        let err = format!("{:#}", executable("{\"reason\":", "gpu").unwrap_err());
        assert!(err.contains("unreadable cargo message `{\"reason\":`"), "{err}");
    }

    /// A base that is no commit is refused before anything is built or any folder touched.
    #[test]
    fn a_base_that_is_no_commit_is_refused_first() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bundle");
        let err = run(&crate::project_root(), &dir, Some("no-such-rev-xyz")).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("gpu-bundle --base") && text.contains("`no-such-rev-xyz` is not a commit"), "{text}");
        assert!(!dir.exists(), "nothing was written");
    }

    #[test]
    fn a_folder_that_is_not_a_bundle_is_refused_and_a_bundle_is_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let other = tmp.path().join("other");
        fs::create_dir(&other).unwrap();
        fs::write(other.join("notes.txt"), "keep").unwrap();
        let err = prepare(&other).unwrap_err().to_string();
        assert!(err.contains("is not empty and holds no bundle.json"), "{err}");
        assert_eq!(fs::read_to_string(other.join("notes.txt")).unwrap(), "keep");

        let bundle = tmp.path().join("bundle");
        prepare(&bundle).unwrap();
        assert!(bundle.join("bin").is_dir() && bundle.join("tests").is_dir());
        fs::write(bundle.join("tests/old-test"), "x").unwrap();
        fs::write(bundle.join(MARKER), "{}").unwrap();
        fs::create_dir(bundle.join("out")).unwrap();
        prepare(&bundle).unwrap();
        assert!(!bundle.join("tests/old-test").exists() && !bundle.join(MARKER).exists());
        assert!(bundle.join("out").is_dir(), "a run's results beside the bundle are kept");
    }

    #[test]
    fn cora_is_copied_without_the_binary_cache_and_sizes_add_up() {
        let tmp = tempfile::tempdir().unwrap();
        let from = tmp.path().join("cora");
        for dir in ["raw", "split/public", "processed"] {
            fs::create_dir_all(from.join(dir)).unwrap();
        }
        fs::write(from.join("meta.json"), "{}").unwrap();
        fs::write(from.join("raw/edge.csv.gz"), [0u8; 100]).unwrap();
        fs::write(from.join("split/public/train.csv.gz"), [0u8; 20]).unwrap();
        fs::write(from.join("processed/halo-cache-v2.bin"), [0u8; 1000]).unwrap();
        let to = tmp.path().join("bundle/datasets/cora");
        copy_tree(&from, &to).unwrap();
        assert!(to.join("raw/edge.csv.gz").is_file() && to.join("split/public/train.csv.gz").is_file());
        assert!(!to.join("processed").exists());
        assert_eq!(tree_size(&to).unwrap(), 122);
    }

    #[test]
    fn binaries_lose_their_debug_info() {
        // Any executable with debug info will do: this test binary has some (the test profile).
        let me = std::env::current_exe().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let copy = tmp.path().join("copy");
        install_binary(&me, &copy).unwrap();
        let size = |p: &Path| fs::metadata(p).unwrap().len();
        assert!(size(&copy) > 0 && size(&copy) < size(&me), "{} !< {}", size(&copy), size(&me));
        let err = install_binary(&tmp.path().join("missing"), &copy).unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
    }
    /// Stand-ins with the interfaces `run` uses: `halo` (synth writes meta.json, train a report
    /// of five epochs with device phases, or fails for GAT), `nvidia-smi` (one GPU), test binaries (libtest's
    /// output: one failing, one passing, one needing two GPUs) and a Python that imports PyG
    /// (unless `FAKE_PYG=0`), writes the peer's JSON and runs the real summary.
    const FAKE_HALO: &str = r#"#!/bin/sh
echo "halo $*" >>"$FAKE_LOG"
case $1 in
datasets) while [ $# -gt 1 ]; do [ "$1" = --out ] && out=$2; shift; done; mkdir -p "$out"; echo '{}' >"$out/meta.json" ;;
train) case "$*" in *"--model gat"*) echo "error: the device ran out of memory" >&2; exit 1 ;; esac
  while [ $# -gt 1 ]; do [ "$1" = --report ] && report=$2; shift; done
  e() { echo "{\"epoch\":$1,\"wall_s\":0.$1,\"eval_s\":0.01,\"loss\":1,\"val_acc\":0.5,\"device\":{\"forward_s\":0.00$1,\"h2d_bytes\":64,\"idle_share\":0.$1},\"method\":{\"sampling_s\":0.$1,\"sampled_edges_per_step\":100}}"; }
  echo "{\"config\":{\"minibatch\":{\"sampler-threads\":2}},\"epochs\":[$(e 1),$(e 2),$(e 3),$(e 4),$(e 5)],\"final\":{\"device\":{\"peak_gpu_bytes\":1048576}}}" >"$report" ;;
experiment) while [ $# -gt 1 ]; do [ "$1" = --out ] && out=$2; shift; done
  case $out in */accuracy/*) mkdir -p "$out"; r() { echo "{\"variant\":\"$1\",\"seed\":$2,\"test_acc\":$3}"; }
    echo "{\"runs\":[$(r cpu 0 0.80),$(r cuda 0 0.81),$(r vanilla-cuda 0 0.82),$(r cpu 1 0.80),$(r cuda 1 0.79),$(r vanilla-cuda 1 0.795)]}" >"$out/results.json" ;;
  esac ;;
esac
"#;
    const FAKE_PYTHON: &str = r#"#!/bin/sh
case $1 in
-c) [ "${FAKE_PYG:-1}" = 1 ] || { echo "ModuleNotFoundError: No module named 'torch'" >&2; exit 1; } ;;
*pyg_gpu.py) echo "pyg $*" >>"$FAKE_LOG"; while [ $# -gt 1 ]; do [ "$1" = --out ] && out=$2; shift; done
  echo '{"faster":"csr","paths":{"edge_index":{"error":"RuntimeError: no"},"csr":{"step_s":[1,1,0.2,0.2,0.2],"eval_s":[1,1,0.02,0.02,0.02],"loss":[1,1,1,1,1],"val_acc":0.4}}}' >"$out" ;;
*) exec python3 "$@" ;;
esac
"#;
    const FAKE_SMI: &str = "#!/bin/sh\ncase $1 in -L) echo 'GPU 0: Fake GPU (UUID: GPU-0)' ;; *) echo 'Fake GPU, 580.00, 81559 MiB' ;; esac\n";
    const PASSING: &str = "#!/bin/sh\n[ -f \"$HALO_CORA/meta.json\" ] || exit 3\necho 'test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out'\n";
    const FAILING: &str = "#!/bin/sh\necho 'test a ... ok'\necho 'test b ... FAILED'\necho 'test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out'\nexit 101\n";

    /// Runs a bundle of stand-ins (and the real `run` and `summary.py`) with `env`; returns the
    /// exit code, the summary and the stand-ins' log of calls. With `FAKE_BASE` in `env` the
    /// bundle holds a base build too, which logs its calls as `base ...`.
    fn run_fake_bundle(env: &[(&str, &str)]) -> (i32, Value, String) {
        let tmp = tempfile::tempdir().unwrap();
        let (bundle, fakes) = (tmp.path().join("bundle"), tmp.path().join("fakes"));
        let executable = |path: PathBuf, text: &str| {
            use std::os::unix::fs::PermissionsExt;
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, text).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        };
        executable(bundle.join("bin/halo"), FAKE_HALO);
        if env.iter().any(|(key, _)| *key == "FAKE_BASE") {
            executable(bundle.join("bin/halo-base"), &FAKE_HALO.replace(r#"echo "halo $*""#, r#"echo "base $*""#));
        }
        executable(bundle.join("tests/gnn-core-gpu"), FAILING);
        executable(bundle.join("tests/trainer-gpu_train"), PASSING);
        executable(bundle.join("tests/comm-hierarchy-nccl"), PASSING);
        executable(fakes.join("python"), FAKE_PYTHON);
        executable(fakes.join("nvidia-smi"), FAKE_SMI);
        fs::create_dir_all(bundle.join("datasets/cora")).unwrap();
        fs::write(bundle.join("datasets/cora/meta.json"), "{}").unwrap();
        fs::write(bundle.join("tests.tsv"), "gnn-core-gpu\t1\ntrainer-gpu_train\t1\ncomm-hierarchy-nccl\t2\n").unwrap();
        fs::write(bundle.join(MARKER), r#"{"commit": "abc123"}"#).unwrap();
        let root = crate::project_root();
        for (source, name) in SCRIPTS {
            fs::copy(root.join(source), bundle.join(name)).unwrap();
        }
        let log = tmp.path().join("calls.log");
        let path = format!("{}:{}", fakes.display(), std::env::var("PATH").unwrap_or_default());
        let status = Command::new("bash")
            .arg(bundle.join("run"))
            .current_dir(tmp.path())
            .env("PATH", path)
            .env("PYTHON", fakes.join("python"))
            .env("FAKE_LOG", &log)
            .env("HALO_BUNDLE_EPOCHS", "5")
            .env("HALO_BUNDLE_WORK", tmp.path().join("graphs"))
            .env_remove("OUT")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        let summary = fs::read_to_string(tmp.path().join("out/summary.json")).expect("run writes out/summary.json");
        assert!(tmp.path().join("out/summary.md").is_file());
        (status.code().unwrap(), serde_json::from_str(&summary).unwrap(), fs::read_to_string(log).unwrap_or_default())
    }

    #[test]
    fn the_run_script_records_every_test_and_times_both_sides_of_each_row() {
        let (code, summary, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "small")]);
        assert_eq!(code, 1, "a failing test fails the run");
        assert_eq!(summary["bundle"]["commit"], "abc123");
        assert_eq!(summary["gpus"], serde_json::json!(["Fake GPU, 580.00, 81559 MiB"]));
        let tests = summary["tests"].as_array().unwrap();
        let fields = |t: &Value| (t["name"].clone(), t["passed"].clone(), t["failed"].clone(), t["status"].clone());
        assert_eq!(fields(&tests[0]), ("gnn-core-gpu".into(), 1.into(), 1.into(), "failed".into()));
        assert_eq!(tests[0]["failed_tests"], serde_json::json!(["b"]));
        assert_eq!(fields(&tests[1]), ("trainer-gpu_train".into(), 3.into(), 0.into(), "ok".into()));
        assert_eq!(tests[2]["status"], "skipped: needs 2 GPUs, nvidia-smi lists 1");
        assert_eq!(summary["tests_total"], serde_json::json!({"passed": 4, "failed": 1, "ignored": 1}));

        let rows = summary["speed"]["rows"].as_array().unwrap();
        let ids: Vec<_> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["100k-gcn", "100k-sage", "100k-gat"]);
        let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
        let gat = &rows[2];
        assert_eq!(gat["ratio"], serde_json::json!({}));
        assert_eq!(
            gat["errors"],
            serde_json::json!([
                "halo: 100k-gat.halo.json is missing (speed/100k-gat.halo.log ends: error: the device ran out of memory)"
            ])
        );
        for row in &rows[..2] {
            // Halo: steps 0.1..0.5 s, so the median after the second epoch is 0.4; PyG's 0.2 (csr).
            assert!(close(&row["halo"]["step_s"], 0.4) && close(&row["pyg"]["step_s"], 0.2), "{row}");
            assert!(close(&row["ratio"]["step"], 2.0) && close(&row["ratio"]["eval"], 0.5), "{row}");
            assert!(close(&row["ratio"]["epoch"], 0.41 / 0.22), "{row}");
            assert!(close(&row["halo"]["device"]["forward_s"], 0.004), "{row}");
            assert_eq!(row["halo"]["final_device"]["peak_gpu_bytes"], 1048576);
            assert_eq!(row["pyg"]["path"], "csr");
            assert_eq!(row["pyg"]["paths"]["edge_index"]["error"], "RuntimeError: no");
            assert_eq!(row["targets"]["evaluation <= 1.0x PyG"], true);
            assert_eq!(row["targets"]["whole epoch <= 0.7x PyG"], false);
        }
        assert_eq!(calls.matches("halo datasets synth --nodes 100000").count(), 1, "one graph for three rows\n{calls}");
        assert!(calls.contains("--model gat --layers 3 --hidden 32 --epochs 5 --heads 8"), "{calls}");
        assert!(calls.contains("--device cuda --model gcn --layers 3 --hidden 256 --epochs 5 --report"), "{calls}");
        assert!(!calls.contains("--model gcn --layers 3 --hidden 256 --epochs 5 --heads"), "{calls}");
        assert_eq!(calls.matches("pyg ").count(), 3, "{calls}");
        // The mini-batch row: epochs 0.3..0.5 s after the second, sampling 0.3..0.5 s over 2 threads.
        let mb = &summary["minibatch"][0];
        assert_eq!(mb["id"], "100k-sage-mb");
        assert!(
            close(&mb["epoch_s"], 0.4) && close(&mb["sampling_s"], 0.2) && close(&mb["over_sampling"], 2.0),
            "{mb}"
        );
        assert!(close(&mb["idle_share"], 0.4) && mb["met"] == false, "{mb}");
        assert!(calls.contains("--batch-size 1024"), "{calls}");
    }

    /// Named, the featpart grids run as `halo experiment` on generated TOMLs with device
    /// compute, and a grid without results leaves the summary a note instead of a table.
    #[test]
    fn the_featpart_grids_run_only_when_named() {
        let (code, summary, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "featpart-device")]);
        assert_eq!(code, 1, "the stand-in's grids have no results, so the table fails");
        assert_eq!(calls.matches("halo experiment").count(), 2, "{calls}");
        assert!(calls.contains("featpart-device-10k.toml") && calls.contains("featpart-device-100k-signal.toml"));
        assert_eq!(summary["featpart"], "", "the grids ran, without a table");
        assert_eq!(summary["speed"]["rows"], serde_json::json!([]));
        let (_, small, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "small")]);
        assert!(small["featpart"].is_null() && !calls.contains("halo experiment"), "{calls}");
        assert!(small["adgraph_scaling"].is_null(), "{small}");
    }

    /// Named, the ADGraph scaling runs go through `halo experiment` with device compute, and
    /// runs without reports leave the summary their error.
    #[test]
    fn the_adgraph_scaling_runs_only_when_named() {
        let (code, summary, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "adgraph-device")]);
        assert_eq!(code, 1, "a failing test fails the run");
        assert_eq!(calls.matches("halo experiment").count(), 1, "{calls}");
        assert!(calls.contains("adgraph-device.toml"), "{calls}");
        let errors = summary["adgraph_scaling"]["errors"].as_array().unwrap();
        assert!(errors[0].as_str().unwrap().starts_with("w1: w1-seed0.json is missing"), "{errors:?}");
        assert!(summary["featpart"].is_null());
    }

    /// Issue 37's grids run only when named: one experiment per paper on the 1M graph, its
    /// method against vanilla on the same cut and topology, 8 workers on the GPU.
    #[test]
    fn the_methods_grids_run_when_named() {
        let (_, summary, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "methods-device")]);
        assert_eq!(calls.matches("halo experiment").count(), 3, "{calls}");
        assert!(calls.contains("--nodes 1000000"), "{calls}");
        for (paper, algo, hosts) in [("adaqp", "metis", 2), ("cdfgnn", "ebv", 2), ("ecgraph", "metis", 8)] {
            assert!(calls.contains(&format!("methods/{paper}.toml")), "{calls}");
            // One partition per paper, which both variants load.
            let partition = format!("--algo {algo} --parts 8 --hosts {hosts} --seed 0 --out ");
            assert!(calls.contains(&partition) && calls.contains(&format!("book-{paper}\n")), "{calls}");
        }
        assert_eq!(calls.matches("halo partition").count(), 3, "{calls}");
        let rows = summary["methods"].as_array().unwrap();
        let papers: Vec<&str> = rows.iter().map(|r| r["paper"].as_str().unwrap()).collect();
        assert_eq!(papers, ["adaqp", "cdfgnn", "ecgraph"]);
        let errors = rows[0]["errors"].as_array().unwrap();
        assert!(errors[0].as_str().unwrap().starts_with("vanilla: vanilla-seed0.json is missing"), "{errors:?}");
        // AdaQP's grid also runs on CPU workers, for the wall clock of the same configuration.
        let cpu = |row: &Value| {
            row["errors"].as_array().unwrap().iter().any(|e| e.as_str().unwrap().starts_with("adaqp-cpu:"))
        };
        assert!(cpu(&rows[0]) && !cpu(&rows[1]), "{rows:?}");
        let (_, small, _) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "small")]);
        assert!(small["methods"].is_null(), "not asked for");
    }

    /// Issue 37's accuracy grids run only when named: per paper, the method on the CPU, on the
    /// GPU and vanilla on the GPU over Cora, and the summary pairs the seeds: GPU against CPU,
    /// and the method against vanilla on the GPU against the paper's bar.
    #[test]
    fn the_accuracy_grids_run_when_named_and_pair_the_seeds() {
        let (_, summary, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "methods-cora-device")]);
        assert_eq!(calls.matches("halo experiment").count(), 3, "{calls}");
        for paper in ["adaqp", "cdfgnn", "ecgraph"] {
            assert!(calls.contains(&format!("accuracy/{paper}.toml")), "{calls}");
        }
        let rows = summary["accuracy"].as_array().unwrap();
        let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
        // Seed 0: GPU +1 point over the CPU, -1 under vanilla; seed 1: -1 and -0.5.
        for row in rows {
            assert!(close(&row["device_vs_cpu"]["mean"], 0.0), "{row}");
            assert!(close(&row["method_vs_vanilla"]["mean"], -0.75), "{row}");
            assert!(close(&row["method_vs_vanilla"]["stderr"], 0.25), "{row}");
            assert_eq!(row["method_vs_vanilla"]["seeds"], serde_json::json!([0, 1]));
        }
        let met: Vec<_> = rows.iter().map(|r| (r["paper"].as_str().unwrap(), r["met"].as_bool().unwrap())).collect();
        assert_eq!(met, [("adaqp", false), ("cdfgnn", true), ("ecgraph", true)]);
        let (_, small, _) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "small")]);
        assert!(small["accuracy"].is_null(), "not asked for");
    }

    /// Named, the A/B runs each configuration with each build twice, alternating, on one graph
    /// and partition; without a base build it is a failure that says how to build one.
    #[test]
    fn the_ab_row_alternates_the_two_builds() {
        let (code, summary, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "ab-device"), ("FAKE_BASE", "1")]);
        assert_eq!(code, 1, "the stand-in tests fail");
        let trains: Vec<&str> = calls.lines().filter(|l| l.contains(" train ")).collect();
        let order: Vec<&str> = trains.iter().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(order, ["base", "halo", "base", "halo", "halo", "base", "halo", "base"], "{calls}");
        assert!(trains.iter().all(|l| l.contains("--partition-book") && l.contains("book-adaqp")), "{calls}");
        assert_eq!(calls.matches("halo datasets synth --nodes 1000000").count(), 1, "{calls}");
        assert_eq!(calls.matches("halo partition").count(), 1, "{calls}");
        let rows = summary["ab"]["rows"].as_array().unwrap();
        assert_eq!(rows.iter().map(|r| r["config"].as_str().unwrap()).collect::<Vec<_>>(), ["vanilla", "adaqp"]);
        for row in rows {
            assert_eq!(row["errors"], serde_json::json!([]), "{row}");
            // Epochs 0.2..0.5 s after the first, on both sides.
            let wall = &row["figures"][0];
            assert_eq!(wall["figure"], "epoch wall_s");
            assert!((wall["base"].as_f64().unwrap() - 0.35).abs() < 1e-9 && wall["ratio"] == 1.0, "{wall}");
            assert!(row["figures"][3]["ratio"].is_null(), "the stand-in reports no exchange_s");
        }
        let (code, summary, calls) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "ab-device")]);
        assert_eq!(code, 1);
        let skipped = summary["ab"]["skipped"].as_str().unwrap();
        assert!(skipped.contains("cargo xtask gpu-bundle DIR --base REV"), "{skipped}");
        assert!(!calls.contains(" train "), "{calls}");
        let (_, small, _) = run_fake_bundle(&[("HALO_BUNDLE_ROWS", "small")]);
        assert!(small["ab"].is_null(), "not asked for");
    }

    #[test]
    fn without_pyg_the_run_skips_the_speed_table_and_still_runs_the_mini_batch_row() {
        let (_, summary, calls) = run_fake_bundle(&[("FAKE_PYG", "0")]);
        let skipped = summary["speed"]["skipped"].as_str().unwrap();
        assert!(skipped.contains("cannot import torch and torch_geometric (ModuleNotFoundError"), "{skipped}");
        assert_eq!(summary["speed"]["rows"], serde_json::json!([]));
        assert_eq!(summary["tests_total"]["passed"], 4);
        // Halo alone: the mini-batch row, and no PyG row.
        assert!(!calls.contains("pyg ") && calls.contains("--batch-size 1024"), "{calls}");
        assert_eq!(summary["minibatch"][0]["errors"], serde_json::json!([]));
    }
}
