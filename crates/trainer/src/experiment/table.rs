//! The results table: every run's final figures, per-variant estimates over seeds, and the
//! comparison with the baseline variant; serialised as JSON (`serde`) and as CSV ([`Table::to_csv`]).

use serde::{Serialize, Serializer, ser::SerializeMap};
use serde_json::{Number, Value};

use super::spec::ExperimentSpec;
use super::stats::{Estimate, paired_differences, ratio};

/// A figure of a run, read from its report's `final` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Test accuracy at the best validation epoch.
    TestAcc,
    /// Best validation accuracy.
    BestValAcc,
    /// 1-based epoch of the best validation accuracy.
    BestEpoch,
    /// Bytes sent between workers, all phases.
    BytesTotal,
    /// Bytes of the layers' feature and gradient exchanges.
    BytesExchange,
    /// Bytes of the gradient synchronisation.
    BytesGradSync,
    /// Modeled training time on the modeled cluster.
    ModeledTrainS,
    /// Measured training time (sum of the epochs' steps).
    TrainWallS,
}

impl Metric {
    /// Every metric, in column order.
    pub const ALL: [Metric; 8] = [
        Metric::TestAcc,
        Metric::BestValAcc,
        Metric::BestEpoch,
        Metric::BytesTotal,
        Metric::BytesExchange,
        Metric::BytesGradSync,
        Metric::ModeledTrainS,
        Metric::TrainWallS,
    ];

    /// The metrics compared with the baseline as a ratio of means (costs, where "2x fewer" is the claim).
    pub const RATIOS: [Metric; 4] =
        [Metric::BytesTotal, Metric::BytesExchange, Metric::BytesGradSync, Metric::ModeledTrainS];

    /// The name of its column and JSON key in the results.
    pub fn name(self) -> &'static str {
        match self {
            Metric::TestAcc => "test_acc",
            Metric::BestValAcc => "best_val_acc",
            Metric::BestEpoch => "best_epoch",
            Metric::BytesTotal => "bytes_total",
            Metric::BytesExchange => "bytes_exchange",
            Metric::BytesGradSync => "bytes_grad_sync",
            Metric::ModeledTrainS => "modeled_train_s",
            Metric::TrainWallS => "train_wall_s",
        }
    }

    /// Its field under the report's `final`.
    fn report_key(self) -> &'static str {
        match self {
            Metric::TestAcc => "test_acc_at_best_val",
            other => other.name(),
        }
    }
}

/// Values keyed by metric, serialised as a JSON object with the metrics' names as keys.
#[derive(Debug, Clone, PartialEq)]
pub struct ByMetric<T>(pub Vec<(Metric, T)>);

impl<T> ByMetric<T> {
    /// The value of `metric`, if the map holds it.
    pub fn get(&self, metric: Metric) -> Option<&T> {
        self.0.iter().find(|(m, _)| *m == metric).map(|(_, v)| v)
    }
}

impl<T: Serialize> Serialize for ByMetric<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (metric, value) in &self.0 {
            map.serialize_entry(metric.name(), value)?;
        }
        map.end()
    }
}

/// One finished run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    /// The variant's name.
    pub variant: String,
    /// The run's seed.
    pub seed: u64,
    /// Its final figures; `None` (JSON `null`) where the report has no such field.
    #[serde(flatten)]
    pub figures: ByMetric<Option<Number>>,
    /// Its full report, relative to the output directory.
    pub report: String,
}

impl RunRow {
    /// Reads the figures from a report serialised as JSON; a field the report lacks (an older
    /// report, or one from before the field existed) is `None` rather than an error.
    pub fn from_report(variant: &str, seed: u64, report: &Value, report_path: String) -> Self {
        let final_ = &report["final"];
        let figures = Metric::ALL.map(|m| (m, final_.get(m.report_key()).and_then(Value::as_number).cloned()));
        Self { variant: variant.to_string(), seed, figures: ByMetric(figures.into()), report: report_path }
    }

    /// The value of `metric` as a float.
    pub fn value(&self, metric: Metric) -> Option<f64> {
        self.figures.get(metric).and_then(|n| n.as_ref()).and_then(Number::as_f64)
    }
}

/// A variant's test-accuracy difference from the baseline, seed by seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedDiff {
    /// Mean and standard error of the differences.
    #[serde(flatten)]
    pub estimate: Estimate,
    /// `variant - baseline` per seed.
    pub by_seed: Vec<SeedDiff>,
}

/// One seed's difference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeedDiff {
    /// The seed both runs used.
    pub seed: u64,
    /// Variant minus baseline.
    pub diff: f64,
}

/// One variant over all seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantSummary {
    /// The variant's name.
    pub name: String,
    /// Its full `halo train` flags (the experiment's base flags, then its own).
    pub flags: Vec<String>,
    /// Number of runs (seeds).
    pub runs: usize,
    /// Mean and standard error of each metric over the seeds; `None` unless every run has it.
    pub figures: ByMetric<Option<Estimate>>,
    /// Paired test-accuracy difference from the baseline (0 for the baseline itself).
    pub test_acc_diff: Option<PairedDiff>,
    /// Mean over the baseline's mean, per cost metric; `None` when either is missing or the
    /// baseline's is 0.
    pub ratios: ByMetric<Option<f64>>,
}

/// The whole results table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// The experiment's name.
    pub experiment: String,
    /// The baseline variant's name.
    pub baseline: String,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// Every run, by variant (file order) then seed (file order).
    pub runs: Vec<RunRow>,
    /// One summary per variant, in file order.
    pub variants: Vec<VariantSummary>,
}

impl Table {
    /// Summarises the runs of `spec`'s grid; `runs` may come in any order.
    pub fn new(spec: &ExperimentSpec, mut runs: Vec<RunRow>) -> Self {
        let position = |r: &RunRow| {
            let variant = spec.variants.iter().position(|v| v.name == r.variant);
            (variant, spec.seeds.iter().position(|&s| s == r.seed))
        };
        runs.sort_by_key(position);
        let of = |name: &str| runs.iter().filter(|r| r.variant == name).collect::<Vec<_>>();
        let baseline = of(&spec.baseline);
        let variants =
            spec.variants.iter().map(|v| summarise(&v.name, spec.train_flags(v), &of(&v.name), &baseline)).collect();
        Self {
            experiment: spec.name.clone(),
            baseline: spec.baseline.clone(),
            seeds: spec.seeds.clone(),
            runs,
            variants,
        }
    }

    /// The table as CSV: one `run` row per run, then one `summary` row per variant.
    ///
    /// Columns: `row, variant, seed, runs`, then each metric and its standard error (`test_acc,
    /// test_acc_se, ...`), `test_acc_diff, test_acc_diff_se`, the ratios (`bytes_total_ratio, ...`)
    /// and `report`. A run row holds its figures and its difference from the baseline run of the
    /// same seed; a summary row holds the means, standard errors and ratios. Missing values are
    /// empty cells. No cell needs quoting: variant names are restricted to `[A-Za-z0-9._-]`.
    pub fn to_csv(&self) -> String {
        let mut header = vec!["row".to_string(), "variant".into(), "seed".into(), "runs".into()];
        for m in Metric::ALL {
            header.extend([m.name().to_string(), format!("{}_se", m.name())]);
        }
        header.extend(["test_acc_diff".into(), "test_acc_diff_se".into()]);
        header.extend(Metric::RATIOS.map(|m| format!("{}_ratio", m.name())));
        header.push("report".into());
        let mut lines = vec![header.join(",")];

        let cell = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let blanks = |n: usize| vec![String::new(); n];
        for run in &self.runs {
            let mut row = vec!["run".into(), run.variant.clone(), run.seed.to_string(), String::new()];
            for (_, value) in &run.figures.0 {
                row.extend([value.as_ref().map_or(String::new(), Number::to_string), String::new()]);
            }
            let diff = self
                .variants
                .iter()
                .find(|v| v.name == run.variant)
                .and_then(|v| v.test_acc_diff.as_ref())
                .and_then(|d| d.by_seed.iter().find(|s| s.seed == run.seed))
                .map(|s| s.diff);
            row.extend([cell(diff), String::new()]);
            row.extend(blanks(Metric::RATIOS.len()));
            row.push(run.report.clone());
            lines.push(row.join(","));
        }
        for v in &self.variants {
            let mut row = vec!["summary".into(), v.name.clone(), String::new(), v.runs.to_string()];
            for (_, estimate) in &v.figures.0 {
                row.extend([cell(estimate.map(|e| e.mean)), cell(estimate.and_then(|e| e.stderr))]);
            }
            let diff = v.test_acc_diff.as_ref().map(|d| d.estimate);
            row.extend([cell(diff.map(|e| e.mean)), cell(diff.and_then(|e| e.stderr))]);
            row.extend(v.ratios.0.iter().map(|(_, r)| cell(*r)));
            row.push(String::new());
            lines.push(row.join(","));
        }
        lines.join("\n") + "\n"
    }
}

/// The estimates of one variant and its comparison with the baseline runs.
fn summarise(name: &str, flags: Vec<String>, runs: &[&RunRow], baseline: &[&RunRow]) -> VariantSummary {
    // A metric some run lacks is not estimated: a mean over a subset of seeds would not pair.
    let values = |runs: &[&RunRow], m: Metric| runs.iter().map(|r| r.value(m)).collect::<Option<Vec<f64>>>();
    let estimate = |runs: &[&RunRow], m: Metric| values(runs, m).and_then(|v| Estimate::of(&v));
    let by_seed = |runs: &[&RunRow]| -> Option<Vec<(u64, f64)>> {
        runs.iter().map(|r| Some((r.seed, r.value(Metric::TestAcc)?))).collect()
    };
    let test_acc_diff = by_seed(runs).zip(by_seed(baseline)).and_then(|(v, b)| {
        let diffs = paired_differences(&v, &b);
        let estimate = Estimate::of(&diffs.iter().map(|d| d.1).collect::<Vec<_>>())?;
        Some(PairedDiff { estimate, by_seed: diffs.into_iter().map(|(seed, diff)| SeedDiff { seed, diff }).collect() })
    });
    let ratios = Metric::RATIOS.map(|m| {
        let r = estimate(runs, m).zip(estimate(baseline, m)).and_then(|(v, b)| ratio(v.mean, b.mean));
        (m, r)
    });
    VariantSummary {
        name: name.to_string(),
        flags,
        runs: runs.len(),
        figures: ByMetric(Metric::ALL.map(|m| (m, estimate(runs, m))).into()),
        test_acc_diff,
        ratios: ByMetric(ratios.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ExperimentSpec {
        let text = r#"
name = "t"
seeds = [3, 1]
base = ["--epochs", "2"]
baseline = "base"
[[variant]]
name = "base"
[[variant]]
name = "lossy"
flags = ["--method", "vanilla"]
"#;
        ExperimentSpec::from_toml_str(text, "t.toml").unwrap()
    }

    /// A report JSON as the trainer writes it today: no `bytes_exchange`, `bytes_grad_sync` or
    /// `modeled_train_s` yet.
    fn report(test_acc: f64, bytes_total: u64) -> Value {
        json!({"final": {"best_val_acc": 0.7, "test_acc_at_best_val": test_acc, "best_epoch": 2,
                         "train_wall_s": 0.5, "bytes_total": bytes_total}})
    }

    fn row(variant: &str, seed: u64, test_acc: f64, bytes_total: u64) -> RunRow {
        RunRow::from_report(variant, seed, &report(test_acc, bytes_total), format!("runs/{variant}-seed{seed}.json"))
    }

    fn table() -> Table {
        let runs = vec![
            row("lossy", 1, 0.78, 100),
            row("base", 3, 0.80, 400),
            row("lossy", 3, 0.76, 300),
            row("base", 1, 0.80, 200),
        ];
        Table::new(&spec(), runs)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn rows_are_ordered_by_variant_then_seed_as_in_the_file() {
        let t = table();
        let order: Vec<(&str, u64)> = t.runs.iter().map(|r| (r.variant.as_str(), r.seed)).collect();
        assert_eq!(order, [("base", 3), ("base", 1), ("lossy", 3), ("lossy", 1)]);
    }

    #[test]
    fn missing_report_fields_are_null_not_errors() {
        let r = row("base", 3, 0.8, 400);
        assert_eq!(r.value(Metric::TestAcc), Some(0.8));
        assert_eq!(r.value(Metric::BytesTotal), Some(400.0));
        assert_eq!(r.value(Metric::BytesExchange), None);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["bytes_exchange"], Value::Null);
        assert_eq!(json["bytes_total"], 400, "integers stay integers");
        assert_eq!(json["report"], "runs/base-seed3.json");
    }

    #[test]
    fn summaries_estimate_pair_and_divide() {
        let t = table();
        let lossy = &t.variants[1];
        assert_eq!((lossy.name.as_str(), lossy.runs), ("lossy", 2));
        assert_eq!(lossy.flags, ["--epochs", "2", "--method", "vanilla"]);
        let acc = lossy.figures.get(Metric::TestAcc).unwrap().unwrap();
        assert!(close(acc.mean, 0.77) && close(acc.stderr.unwrap(), 0.01), "{acc:?}");
        assert_eq!(*lossy.figures.get(Metric::ModeledTrainS).unwrap(), None);
        let diff = lossy.test_acc_diff.as_ref().unwrap();
        assert!(close(diff.estimate.mean, -0.03) && close(diff.estimate.stderr.unwrap(), 0.01), "{diff:?}");
        assert_eq!(diff.by_seed.iter().map(|d| d.seed).collect::<Vec<_>>(), [3, 1]);
        assert_eq!(*lossy.ratios.get(Metric::BytesTotal).unwrap(), Some(200.0 / 300.0));
        assert_eq!(*lossy.ratios.get(Metric::BytesExchange).unwrap(), None);

        let base = &t.variants[0];
        let diff = base.test_acc_diff.as_ref().unwrap();
        assert_eq!((diff.estimate.mean, diff.estimate.stderr), (0.0, Some(0.0)), "the baseline against itself");
        assert_eq!(*base.ratios.get(Metric::BytesTotal).unwrap(), Some(1.0));
    }

    #[test]
    fn zero_baseline_bytes_give_no_ratio() {
        let runs =
            vec![row("base", 3, 0.8, 0), row("base", 1, 0.8, 0), row("lossy", 3, 0.8, 5), row("lossy", 1, 0.8, 5)];
        let t = Table::new(&spec(), runs);
        assert_eq!(*t.variants[1].ratios.get(Metric::BytesTotal).unwrap(), None);
    }

    #[test]
    fn csv_has_a_row_per_run_and_per_variant_with_empty_missing_cells() {
        let csv = table().to_csv();
        let lines: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        let header = &lines[0];
        assert_eq!(lines.len(), 1 + 4 + 2);
        assert!(lines.iter().all(|l| l.len() == header.len()), "{csv}");
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
        let lossy_seed1 = &lines[4];
        assert_eq!(&lossy_seed1[..3], ["run", "lossy", "1"]);
        assert_eq!(lossy_seed1[col("test_acc")], "0.78");
        assert_eq!(lossy_seed1[col("bytes_total")], "100");
        assert_eq!(lossy_seed1[col("bytes_exchange")], "");
        assert!(close(lossy_seed1[col("test_acc_diff")].parse().unwrap(), -0.02), "{csv}");
        assert_eq!(lossy_seed1[col("report")], "runs/lossy-seed1.json");
        let lossy = &lines[6];
        assert_eq!(&lossy[..4], ["summary", "lossy", "", "2"]);
        assert!(close(lossy[col("test_acc")].parse().unwrap(), 0.77), "{csv}");
        assert!(close(lossy[col("test_acc_se")].parse().unwrap(), 0.01), "{csv}");
        assert!(close(lossy[col("bytes_total_ratio")].parse().unwrap(), 2.0 / 3.0), "{csv}");
        assert_eq!(lossy[col("modeled_train_s_ratio")], "");
    }
}
