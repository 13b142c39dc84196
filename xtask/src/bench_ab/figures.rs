//! The figures `cargo xtask bench-ab` compares: read from each run's `halo train` report, then
//! summarised per side (minimum, median, maximum) with the ratio of the medians.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Per-epoch fields of the report compared as the mean over a run's epochs.
const EPOCH_FIELDS: [&str; 3] = ["wall_s", "compute_s", "eval_s"];

/// Per-epoch method fields (mini-batch runners' timings and batch shape) are compared when
/// their name ends with one of these.
const METHOD_SUFFIXES: [&str; 2] = ["_s", "_per_step"];

/// One run's figures by name, in a stable order.
pub type Figures = BTreeMap<String, f64>;

/// The figures of one report (the JSON text of `halo train --report`): the mean over epochs of
/// each epoch's `wall_s`, `compute_s` and `eval_s` and of its method's numeric timing and
/// per-step fields (`method.compute_s`, `method.sampled_edges_per_step`, ...), and the summary's
/// `train_wall_s`.
pub fn read(report: &str) -> Result<Figures> {
    let json: Value = serde_json::from_str(report).context("not a JSON report")?;
    let Some(epochs) = json.get("epochs").and_then(Value::as_array).filter(|e| !e.is_empty()) else {
        bail!("the report has no epochs (is it a `halo train` report?)")
    };
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut add = |name: String, value: f64| {
        let entry = sums.entry(name).or_default();
        entry.0 += value;
        entry.1 += 1;
    };
    for (i, epoch) in epochs.iter().enumerate() {
        for field in EPOCH_FIELDS {
            let value = epoch.get(field).and_then(Value::as_f64);
            let value = value.with_context(|| format!("epoch record {} has no number `{field}`", i + 1))?;
            add(format!("epoch {field}"), value);
        }
        let method = epoch.get("method").and_then(Value::as_object).into_iter().flatten();
        for (name, value) in method {
            if let Some(value) = value.as_f64().filter(|_| METHOD_SUFFIXES.iter().any(|s| name.ends_with(s))) {
                add(format!("epoch method.{name}"), value);
            }
        }
    }
    let mut figures: Figures = sums.into_iter().map(|(name, (sum, n))| (name, sum / n as f64)).collect();
    let total = json.pointer("/final/train_wall_s").and_then(Value::as_f64);
    figures.insert("final train_wall_s".into(), total.context("the report has no number `final.train_wall_s`")?);
    Ok(figures)
}

/// Minimum, median and maximum of a figure over one side's runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none. The median of an even count is the
    /// mean of the middle two.
    pub fn of(values: &[f64]) -> Option<Self> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        Some(Self { min: sorted[0], median, max: sorted[n - 1] })
    }
}

/// The comparison table: one line per figure that every run of both sides reported, with each
/// side's spread and the ratio of the medians (`new / base`). Figures only some runs reported
/// are listed below the table by name.
pub fn table(base_label: &str, new_label: &str, base: &[Figures], new: &[Figures]) -> String {
    let all: Vec<&Figures> = base.iter().chain(new).collect();
    let names: std::collections::BTreeSet<&String> = all.iter().flat_map(|f| f.keys()).collect();
    let (common, partial): (Vec<&String>, Vec<&String>) =
        names.into_iter().partition(|name| all.iter().all(|f| f.contains_key(*name)));
    let column = |side: &[Figures], name: &str| -> Option<Spread> {
        Spread::of(&side.iter().map(|f| f[name]).collect::<Vec<_>>())
    };
    let width = common.iter().map(|n| n.len()).max().unwrap_or(0).max("figure".len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:>30}  {:>30}  {:>9}",
        "figure",
        format!("{base_label} (min/median/max)"),
        format!("{new_label} (min/median/max)"),
        "ratio"
    );
    for name in common {
        let (Some(b), Some(n)) = (column(base, name), column(new, name)) else { continue };
        let ratio = if b.median != 0.0 { format!("{:.3}x", n.median / b.median) } else { "-".to_owned() };
        let _ = writeln!(out, "{name:<width$}  {:>30}  {:>30}  {ratio:>9}", cell(b), cell(n));
    }
    if !partial.is_empty() {
        let names: Vec<&str> = partial.iter().map(|n| n.as_str()).collect();
        let _ = writeln!(out, "left out (not in every run): {}", names.join(", "));
    }
    out
}

/// `min / median / max` with enough digits for seconds and for counts.
fn cell(s: Spread) -> String {
    let fmt = |v: f64| if v.abs() >= 1000.0 { format!("{v:.0}") } else { format!("{v:.4}") };
    format!("{} / {} / {}", fmt(s.min), fmt(s.median), fmt(s.max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(epochs: &[(f64, f64, f64, Option<f64>)], total: f64) -> String {
        let epochs: Vec<Value> = epochs
            .iter()
            .map(|&(wall, compute, eval, edges)| {
                let mut e = serde_json::json!({"epoch": 1, "wall_s": wall, "compute_s": compute, "eval_s": eval});
                if let Some(edges) = edges {
                    e["method"] = serde_json::json!({
                        "sampled_edges_per_step": edges, "sampling_wait_s": 0.5, "steps": 3, "blocks": []
                    });
                }
                e
            })
            .collect();
        serde_json::json!({"epochs": epochs, "final": {"train_wall_s": total}}).to_string()
    }

    #[test]
    fn reads_epoch_means_method_timings_and_the_total() {
        let figures = read(&report(&[(2.0, 1.5, 0.5, Some(100.0)), (4.0, 2.5, 0.7, Some(300.0))], 6.0)).unwrap();
        let want: Figures = [
            ("epoch wall_s", 3.0),
            ("epoch compute_s", 2.0),
            ("epoch eval_s", 0.6),
            ("epoch method.sampled_edges_per_step", 200.0),
            ("epoch method.sampling_wait_s", 0.5),
            ("final train_wall_s", 6.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(figures.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
        for (name, value) in want {
            assert!((figures[&name] - value).abs() < 1e-12, "{name}: {} vs {value}", figures[&name]);
        }
    }

    #[test]
    fn unreadable_reports_name_what_is_missing() {
        let err = |text: &str| format!("{:#}", read(text).unwrap_err());
        assert!(err("{").contains("not a JSON report"));
        assert!(err(r#"{"epochs": []}"#).contains("no epochs"));
        assert!(
            err(r#"{"epochs": [{"wall_s": 1.0, "eval_s": 1.0}]}"#).contains("epoch record 1 has no number `compute_s`")
        );
        let no_total = r#"{"epochs": [{"wall_s": 1.0, "compute_s": 1.0, "eval_s": 1.0}], "final": {}}"#;
        assert!(err(no_total).contains("`final.train_wall_s`"));
    }

    #[test]
    fn spread_of_odd_even_and_empty_counts() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Some(Spread { min: 1.0, median: 2.0, max: 3.0 }));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 10.0]), Some(Spread { min: 1.0, median: 3.0, max: 10.0 }));
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn table_gives_spreads_and_the_ratio_of_medians() {
        let run = |wall: f64, extra: Option<f64>| -> Figures {
            let mut f: Figures = [("epoch wall_s".to_owned(), wall)].into_iter().collect();
            if let Some(x) = extra {
                f.insert("epoch method.compute_s".into(), x);
            }
            f
        };
        let base = [run(10.0, Some(1.0)), run(12.0, None), run(11.0, Some(1.0))];
        let new = [run(5.0, Some(1.0)), run(6.0, Some(1.0)), run(5.5, Some(1.0))];
        let text = table("base", "new", &base, &new);
        let line = text.lines().find(|l| l.starts_with("epoch wall_s")).unwrap();
        assert!(line.contains("10.0000 / 11.0000 / 12.0000"), "{line}");
        assert!(line.contains("5.0000 / 5.5000 / 6.0000"), "{line}");
        assert!(line.trim_end().ends_with("0.500x"), "{line}");
        assert!(text.contains("left out (not in every run): epoch method.compute_s"), "{text}");
    }
}
