//! `halo compare REPORT.json...`: the final figures of several runs side by side (accuracy,
//! bytes, modeled and measured time), each with its ratio against the baseline: the first
//! complete report. Above the table, the settings on which the runs differ. An incomplete report
//! shows the figures of its epochs so far, without ratios. A terminal table by default, Markdown
//! with `--markdown`.

use std::path::PathBuf;

use trainer::experiment::{Metric, RunRow};

use super::output::bytes;
use super::reports::{self, LoadedReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Reports written by `halo train --report`; the first is the baseline of the ratios.
    #[arg(value_name = "REPORT.json", required = true, num_args = 1..)]
    reports: Vec<PathBuf>,
    /// Print a Markdown table (for docs and pull requests) instead of an aligned one.
    #[arg(long)]
    markdown: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let reports = reports::load(&args.reports)?;
    print!("{}", header(&reports));
    let table = table(&reports);
    print!("{}", if args.markdown { markdown(&table) } else { aligned(&table) });
    Ok(())
}

/// The report the ratios are against: the first complete one (the first when none is).
fn baseline(reports: &[LoadedReport]) -> usize {
    reports.iter().position(|r| !r.incomplete()).unwrap_or(0)
}

/// The lines above the table: the settings the runs differ on, and the baseline when it is not
/// the first report.
fn header(reports: &[LoadedReport]) -> String {
    let mut text = String::new();
    let differ = reports::differing_settings(reports);
    if !differ.is_empty() {
        text += "runs differ in:";
        for (key, values) in &differ {
            text += &format!(" {key} ({});", values.join(", "));
        }
        text.pop();
        text.push('\n');
    }
    let base = baseline(reports);
    if base > 0 {
        text += &format!("ratios against {} (the first complete report)\n", reports[base].label);
    }
    // A blank line, so that Markdown renders the table as one.
    if !text.is_empty() {
        text.push('\n');
    }
    text
}

/// The cost columns, each followed by its ratio against the baseline.
const COSTS: [(Metric, &str, Unit); 4] = [
    (Metric::BytesTotal, "bytes", Unit::Bytes),
    (Metric::BytesExchange, "exchange bytes", Unit::Bytes),
    (Metric::ModeledTrainS, "modeled s", Unit::Seconds),
    (Metric::TrainWallS, "wall s", Unit::Seconds),
];

#[derive(Clone, Copy)]
enum Unit {
    Bytes,
    Seconds,
}

impl Unit {
    fn show(self, value: f64) -> String {
        match self {
            Unit::Seconds => format!("{value:.3}"),
            Unit::Bytes => bytes(value),
        }
    }
}

/// Header and rows of the comparison, as text cells.
fn table(reports: &[LoadedReport]) -> Vec<Vec<String>> {
    let rows: Vec<RunRow> =
        reports.iter().map(|r| RunRow::from_report(&r.label, 0, &r.json, r.path.display().to_string())).collect();
    let mut header = vec!["run".to_string(), "test acc".to_string(), "diff (points)".to_string()];
    header.push("best val".to_string());
    for (_, name, _) in COSTS {
        header.extend([name.to_string(), "ratio".to_string()]);
    }
    let na = || "n/a".to_string();
    let base = &rows[baseline(reports)];
    let mut cells = vec![header];
    for (row, report) in rows.iter().zip(reports) {
        let acc = row.value(Metric::TestAcc);
        let diff = acc.zip(base.value(Metric::TestAcc)).map(|(a, b)| format!("{:+.2}", 100.0 * (a - b)));
        let mut line = vec![
            row.variant.clone(),
            acc.map_or_else(na, |a| format!("{a:.4}")),
            diff.unwrap_or_else(na),
            row.value(Metric::BestValAcc).map_or_else(na, |a| format!("{a:.4}")),
        ];
        for (metric, _, unit) in COSTS {
            let value = row.value(metric);
            // Sums over fewer epochs than the baseline's have no ratio to it.
            let ratio = value
                .zip(base.value(metric))
                .filter(|_| !report.incomplete())
                .and_then(|(v, b)| trainer::experiment::stats::ratio(v, b));
            line.push(value.map_or_else(na, |v| unit.show(v)));
            line.push(ratio.map_or_else(na, |r| format!("{r:.3}x")));
        }
        cells.push(line);
    }
    cells
}

/// Columns padded to their widest cell; the first left-aligned, numbers right-aligned.
fn aligned(cells: &[Vec<String>]) -> String {
    let widths: Vec<usize> =
        (0..cells[0].len()).map(|c| cells.iter().map(|row| row[c].chars().count()).max().unwrap_or(0)).collect();
    let mut text = String::new();
    for row in cells {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| if c == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
            .collect();
        text += line.join("  ").trim_end();
        text.push('\n');
    }
    text
}

fn markdown(cells: &[Vec<String>]) -> String {
    let line = |row: &[String]| format!("| {} |\n", row.join(" | "));
    let rule: Vec<String> = (0..cells[0].len()).map(|c| if c == 0 { "---" } else { "---:" }.to_string()).collect();
    let mut text = line(&cells[0]);
    text += &line(&rule);
    for row in &cells[1..] {
        text += &line(row);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::reports::tests::{report, write};

    fn compared() -> Vec<Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.json", &report("vanilla", &[0.5, 0.80], 4_000_000));
        let b = write(dir.path(), "b.json", &report("cdfgnn", &[0.5, 0.79], 1_000_000));
        table(&reports::load(&[a, b]).unwrap())
    }

    #[test]
    fn ratios_and_differences_are_against_the_first_report() {
        let cells = compared();
        assert_eq!(cells.len(), 3);
        let cdfgnn = &cells[2];
        assert_eq!(&cdfgnn[..4], ["cdfgnn", "0.7900", "-1.00", "0.7900"]);
        assert_eq!((cdfgnn[4].as_str(), cdfgnn[5].as_str()), ("1.9 MiB", "0.250x"));
        assert_eq!(cells[1][5], "1.000x", "the baseline against itself");
        assert_eq!(cdfgnn[9], "1.000x", "same modeled time");
    }

    #[test]
    fn an_incomplete_first_report_spoils_no_ratio() {
        let dir = tempfile::tempdir().unwrap();
        let mut partial = report("adaqp", &[0.5, 0.6], 8_000_000);
        partial["final"] = serde_json::Value::Null;
        partial["incomplete"] = serde_json::json!(true);
        let a = write(dir.path(), "a.json", &partial);
        let b = write(dir.path(), "b.json", &report("vanilla", &[0.5, 0.80], 4_000_000));
        let c = write(dir.path(), "c.json", &report("cdfgnn", &[0.5, 0.79], 1_000_000));
        let loaded = reports::load(&[a, b, c]).unwrap();
        let cells = table(&loaded);
        // The incomplete run: its epochs so far, no ratios.
        assert_eq!(&cells[1][..4], ["adaqp [incomplete: 2 epochs]", "0.6000", "-20.00", "0.6000"]);
        assert_eq!((cells[1][4].as_str(), cells[1][5].as_str()), ("15.3 MiB", "n/a"));
        // The others against the first complete report.
        assert_eq!((cells[2][5].as_str(), cells[3][5].as_str()), ("1.000x", "0.250x"));
        assert_eq!(header(&loaded), "ratios against vanilla (the first complete report)\n\n");
    }

    #[test]
    fn both_renderings_hold_every_cell() {
        let cells = compared();
        let md = markdown(&cells);
        assert!(
            md.starts_with("| run | test acc |") && md.lines().nth(1).unwrap().starts_with("| --- | ---: |"),
            "{md}"
        );
        assert_eq!(md.lines().count(), 4);
        let text = aligned(&cells);
        assert_eq!(text.lines().count(), 3);
        for cell in cells.iter().flatten() {
            assert!(md.contains(cell.as_str()) && text.contains(cell.as_str()), "{cell}");
        }
    }
}
