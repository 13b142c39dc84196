//! `halo experiment` end to end through the binary: the shipped smoke grid on Cora (table,
//! statistics, paired differences, a rerun that skips every run), and its errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Cora in the OGB raw layout, vendored under `datasets/cora`.
fn cora_dir() -> PathBuf {
    let dir = Path::new(REPO).join("datasets/cora");
    assert!(dir.join("raw").is_dir(), "Cora is missing: expected the OGB raw layout at {}", dir.display());
    dir
}

fn halo(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halo")).arg("experiment").args(args).current_dir(cwd).output().expect("halo runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the smoke grid into `out`, with Cora's parent folder as the dataset root.
fn smoke(out: &Path) -> Output {
    let datasets = cora_dir().join("..");
    let file = Path::new(REPO).join("experiments/smoke.toml");
    let args = [file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--datasets", datasets.to_str().unwrap()];
    let output = halo(&args, out.parent().unwrap());
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn smoke_grid_writes_the_table_and_a_rerun_skips_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smoke");
    let first = smoke(&out);
    let progress = stderr(&first);
    assert_eq!(progress.lines().filter(|l| l.starts_with('[') && l.contains("/6] ")).count(), 6, "{progress}");
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("single") && stdout.contains("vanilla") && stdout.contains("±"), "{stdout}");

    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let results: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(results["baseline"], "vanilla");
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * 3);
    let test_acc = |variant: &str, seed: u64| {
        let run = runs.iter().find(|r| r["variant"] == variant && r["seed"] == seed).expect("run in the table");
        number(&run["test_acc"])
    };
    for run in runs {
        assert!((0.0..=1.0).contains(&number(&run["test_acc"])), "{run}");
        assert!(number(&run["bytes_total"]) >= 0.0 && number(&run["train_wall_s"]) > 0.0, "{run}");
        let report: Value = serde_json::from_slice(&std::fs::read(out.join(run["report"].as_str().unwrap())).unwrap())
            .expect("the run's full report");
        assert_eq!(report["final"]["test_acc_at_best_val"], run["test_acc"]);
        assert_eq!((&report["seed"], &report["method"]), (&run["seed"], &run["variant"]), "{run}");
    }

    let variants = results["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    for v in variants {
        assert_eq!(v["runs"], 3, "{v}");
        let acc = &v["figures"]["test_acc"];
        assert!((0.0..=1.0).contains(&number(&acc["mean"])) && number(&acc["stderr"]) >= 0.0, "{v}");
        let name = v["name"].as_str().unwrap();
        let diff = &v["test_acc_diff"];
        let by_seed = diff["by_seed"].as_array().unwrap();
        assert_eq!(by_seed.len(), 3, "{v}");
        let mut sum = 0.0;
        for d in by_seed {
            let seed = d["seed"].as_u64().unwrap();
            let want = test_acc(name, seed) - test_acc("vanilla", seed);
            assert!((number(&d["diff"]) - want).abs() < 1e-12, "{name} seed {seed}: {d} vs {want}");
            sum += want;
        }
        assert!((number(&diff["mean"]) - sum / 3.0).abs() < 1e-12, "{v}");
    }
    let single = &variants[0];
    assert_eq!(single["name"], "single");
    assert_eq!(number(&single["ratios"]["bytes_total"]), 0.0, "single-process runs send nothing");
    assert_eq!(number(&variants[1]["ratios"]["bytes_total"]), 1.0, "the baseline against itself");

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 1 + 6 + 2, "{csv}");
    assert!(rows.iter().all(|r| r.len() == rows[0].len()), "{csv}");
    let col = rows[0].iter().position(|h| *h == "test_acc").unwrap();
    for summary in rows.iter().filter(|r| r[0] == "summary") {
        assert!((0.0..=1.0).contains(&summary[col].parse::<f64>().unwrap()), "{csv}");
    }

    let reports: Vec<_> =
        runs.iter().map(|r| std::fs::read(out.join(r["report"].as_str().unwrap())).unwrap()).collect();
    let again = smoke(&out);
    let skipped = stderr(&again).lines().filter(|l| l.contains("skipped")).count();
    assert_eq!(skipped, 6, "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(out.join("results.json")).unwrap(), text, "the same table again");
    for (run, before) in runs.iter().zip(reports) {
        assert_eq!(std::fs::read(out.join(run["report"].as_str().unwrap())).unwrap(), before, "{run}");
    }
}

#[test]
fn bad_files_and_outputs_are_named_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let grid =
        "name = \"bad\"\nseeds = [0]\nbaseline = \"a\"\n\n[[variant]]\nname = \"a\"\nflags = [\"--epochs\", \"1\"]\n";
    let cases = [
        (grid.replace("baseline = \"a\"", "baseline = \"b\""), "bad.toml:3: key `baseline`: `b` is not a variant"),
        (grid.replace("\"1\"]", "\"1\", \"--workers\", \"many\"]"), "bad.toml:7: flags of variant `a`: "),
        (grid.replace("\"1\"]", "\"1\", \"--seed\", \"4\"]"), "bad.toml:7: key `variant[0].flags[2]`: `--seed`"),
        (grid.replace("\"1\"]", "\"1\", \"--threads\", \"1\"]"), "variant `a` sets `threads`"),
        // A bad flag of `base` is named at the base's line, not at a variant's.
        (
            grid.replace("baseline", "base = [\"--epochs\", \"2\",\n  \"--dropout\", \"lots\"]\nbaseline"),
            "bad.toml:4: base flags: ",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(dir.path().join("bad.toml"), text).unwrap();
        let out = halo(&["bad.toml", "--out", "out"], dir.path());
        assert!(!out.status.success() && stderr(&out).contains(want), "want `{want}` in: {}", stderr(&out));
        assert!(!dir.path().join("out/runs").exists() || dir.path().join("out/runs").read_dir().unwrap().count() == 0);
    }

    std::fs::write(dir.path().join("bad.toml"), grid).unwrap();
    std::fs::write(dir.path().join("taken"), "a file").unwrap();
    let out = halo(&["bad.toml", "--out", "taken"], dir.path());
    assert!(!out.status.success() && stderr(&out).contains("taken"), "{}", stderr(&out));
    let out = halo(&["missing.toml", "--out", "out"], dir.path());
    assert!(!out.status.success() && stderr(&out).contains("missing.toml"), "{}", stderr(&out));
    // The experiment file where the experiment writes its table is refused, naming both.
    std::fs::create_dir_all(dir.path().join("o")).unwrap();
    std::fs::write(dir.path().join("o/results.csv"), grid).unwrap();
    let out = halo(&["o/results.csv", "--out", "o"], dir.path());
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("the experiment o/results.csv and --out's results.csv"), "{err}");
}

#[test]
fn a_failing_run_names_variant_and_seed_and_keeps_the_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let grid = "name = \"f\"\nseeds = [5]\nbase = [\"--epochs\", \"1\"]\nbaseline = \"ok\"\n\n\
                [[variant]]\nname = \"ok\"\n\n[[variant]]\nname = \"broken\"\nflags = [\"--dataset\", \"nowhere\"]\n";
    std::fs::write(dir.path().join("f.toml"), grid).unwrap();
    let out = halo(&["f.toml", "--out", "out", "--datasets", "graphs"], dir.path());
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(message.contains("variant `broken` with seed 5 failed") && message.contains("graphs/nowhere"), "{message}");
    assert!(dir.path().join("out/runs/ok-seed5.json").is_file(), "the finished run is kept");
    assert!(!dir.path().join("out/results.json").exists());
}

/// `halo compare` and `halo plot` read the grid's reports back, and `halo experiment` drew the
/// grid's first seed beside its table.
#[test]
fn the_grid_s_reports_compare_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smoke");
    smoke(&out);
    let drawn = std::fs::read_to_string(out.join("epochs.svg")).expect("the experiment's plot");
    assert!(drawn.contains("<svg") && drawn.contains("single") && drawn.contains("vanilla"), "variants label lines");

    let runs = out.join("runs");
    let mut reports: Vec<PathBuf> = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).collect();
    reports.sort();
    let (single, vanilla) = (reports[0].to_str().unwrap(), reports[reports.len() - 1].to_str().unwrap());
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_halo")).args(args).output().expect("halo runs");
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let printed = run(&["compare", vanilla, single, "--markdown"]);
    let (differ, table) = printed.split_once("\n\n").expect("the differing settings, then the table");
    assert!(differ.starts_with("runs differ in: ") && differ.contains("vanilla, single"), "{printed}");
    assert!(table.starts_with("| run |") && table.lines().count() == 4, "{table}");
    assert!(table.lines().nth(2).unwrap().contains("1.000x") && table.contains("| single"), "{table}");
    for name in ["runs.svg", "runs.png"] {
        let picture = dir.path().join(name);
        run(&["plot", vanilla, single, "--out", picture.to_str().unwrap()]);
        assert!(std::fs::metadata(&picture).unwrap().len() > 1000, "{name} is drawn");
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_halo")).args(["plot", vanilla, "--out", "x.pdf"]).output().unwrap();
    assert!(!bad.status.success() && stderr(&bad).contains("--out x.pdf"), "{}", stderr(&bad));
}
