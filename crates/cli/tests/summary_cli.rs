//! The summary line of `halo train` says what the method did: a cdfgnn run with the cache and
//! 8-bit deltas states the fraction of the exact exchange's bytes it sent, and every runner
//! with more than one worker (featpart and data-parallel included) states its bytes and its
//! modeled time.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cora() -> String {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir.display().to_string()
}

/// Trains with `args` (plus `--report run.json`) in `dir`; returns the summary line and the report.
fn train(args: &[&str], dir: &Path) -> (String, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_halo"))
        .arg("train")
        .args(["--dataset", &cora(), "--no-cache", "-q", "--report", "run.json"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("halo runs");
    assert!(out.status.success(), "halo train {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(dir.join("run.json")).expect("report written");
    (String::from_utf8_lossy(&out.stdout).into_owned(), serde_json::from_str(&report).expect("report is JSON"))
}

/// The number just before `suffix` in `line`.
fn number_before(line: &str, suffix: &str) -> f64 {
    let head = &line[..line.find(suffix).unwrap_or_else(|| panic!("`{suffix}` missing from: {line}"))];
    let word = head.rsplit([' ', '(']).next().unwrap_or_default();
    word.parse().unwrap_or_else(|e| panic!("`{word}` before `{suffix}` is not a number ({e}): {line}"))
}

#[test]
fn a_cdfgnn_cache_and_8_bit_summary_states_its_fraction_of_the_exact_exchange() {
    let dir = tempfile::tempdir().unwrap();
    // The papers' stack whatever the links: this test reads what the cache and the 8 bits send.
    let args = [
        "--model",
        "gcn",
        "--hidden",
        "64",
        "--method",
        "cdfgnn",
        "--workers",
        "8",
        "--hosts",
        "2",
        "--compress",
        "always",
    ];
    let (line, report) =
        train(&[&args[..], &["--replica-cache", "on", "--quant-bits", "8", "--epochs", "10"]].concat(), dir.path());
    let stated = number_before(&line, "x the exact exchange's bytes");
    let total = &report["final"]["method"]["codec_stats"]["total"];
    let fraction = total["bytes"].as_f64().unwrap() / total["exact_bytes"].as_f64().unwrap();
    assert!((stated - fraction).abs() < 5e-4, "stated {stated}, the report's codec totals give {fraction}: {line}");
    // The cache skips rows and 8 bits replace 32: well under a third of the exact bytes.
    assert!(fraction > 0.02 && fraction < 0.3, "fraction {fraction}: {line}");
    assert!(line.contains("% of its rows sent") && line.contains("8.00 bits a value"), "{line}");
    assert!(line.contains("modeled epoch") && line.contains("modeled comm"), "{line}");
    // The memory estimate says what it covers next to the measured peak.
    assert!(line.contains("peak RSS") && line.contains("the program itself not counted"), "{line}");
    // The exact sync of the same method sends all of it.
    let (exact, _) =
        train(&[&args[..], &["--replica-cache", "off", "--quant-bits", "0", "--epochs", "2"]].concat(), dir.path());
    assert!(exact.contains("1.000x the exact exchange's bytes") && !exact.contains("rows sent"), "{exact}");
}

/// A method run whose communication is a sliver of the modeled epoch says so, naming the flags
/// that would show the method's savings; on a slow enough modeled network it does not.
#[test]
fn a_method_whose_communication_barely_counts_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--method", "adaqp", "--workers", "4", "--epochs", "2"];
    let note = "too small a share of the modeled epoch for the method's savings to show";
    let share = |report: &serde_json::Value| {
        let f = &report["final"];
        f["modeled_comm_s_total"].as_f64().unwrap() / f["modeled_train_s"].as_f64().unwrap()
    };
    for scale in ["1", "0.0001"] {
        let (line, report) = train(&[&args[..], &["--bandwidth-scale", scale]].concat(), dir.path());
        assert_eq!(line.contains(note), share(&report) < 0.05, "--bandwidth-scale {scale}: {line}");
        if scale != "1" {
            assert!(!line.contains(note), "a slow network shows the savings: {line}");
        }
    }
    let (vanilla, report) = train(&["--method", "vanilla", "--workers", "4", "--epochs", "2"], dir.path());
    assert!(share(&report) > 0.0 && !vanilla.contains(note), "exact training has no savings to show: {vanilla}");
}

#[test]
fn featpart_and_data_parallel_summaries_state_bytes_and_modeled_time() {
    let dir = tempfile::tempdir().unwrap();
    let sampled = ["--model", "sage", "--workers", "4", "--batch-size", "32", "--fanouts", "10,25", "--epochs", "2"];
    for (method, extra) in [("featpart", &["--hosts", "4", "--tau", "4"][..]), ("data-parallel", &[][..])] {
        let (line, report) = train(&[&sampled[..], &["--method", method], extra].concat(), dir.path());
        let sent = report["final"]["bytes_total"].as_f64().unwrap() / 2.0;
        assert!(sent > 0.0, "{method} sent nothing: {line}");
        assert!(line.contains(" sent (") && line.contains("intra-host"), "{method} states no bytes: {line}");
        let modeled = number_before(&line, " s, modeled comm");
        assert!(modeled > 0.0, "{method} states no modeled epoch: {line}");
        if method == "featpart" {
            assert!(line.contains("tau 4") && line.contains("fetched at "), "{line}");
        }
    }
    // `tau auto` fetches in its trials too, through the clock: serialized compute (the default
    // with more workers than cores) runs to the end. The line names the default reading of eq. 20.
    let auto = ["--method", "featpart", "--hosts", "4", "--tau", "auto", "--serialize-compute", "--peer-timeout", "60"];
    let (line, _) = train(&[&sampled[..], &auto[..]].concat(), dir.path());
    let reading = "tau auto [--tau-rule eq20 --bias-estimate running-max --eq20-step lr]";
    assert!(line.contains(reading) && line.contains("compute measured as serialized"), "{line}");
}
