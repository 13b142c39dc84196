//! The one line `halo train` prints when a run ends.
//!
//! Training step and evaluation are timed apart (evaluation can be most of a real epoch on a
//! large graph). Runs with more than one worker add what the method sent and what the run
//! costs on the modeled cluster (`traffic`), and partitioned runs the partition's quality
//! (replication factor for a vertex-cut, edge-cut fraction for an edge-cut).

mod traffic;

use graph_partition::book::CutKind;
use trainer::report::Report;

use crate::cmd::output::{bytes, seconds};
use traffic::traffic;

/// The summary line of `report`.
pub fn summary(report: &Report) -> String {
    let f = &report.final_;
    let epochs = &report.epochs;
    let test = match report.split_sizes.test {
        0 => "no test vertices".to_string(),
        _ => format!("test acc {:.4}", f.test_acc_at_best_val),
    };
    let mut line = format!(
        "{} {} on {}: best val acc {:.4} at epoch {}, {test}; median step {}, eval {} over {} epochs",
        report.method,
        report.model,
        report.dataset,
        f.best_val_acc,
        f.best_epoch,
        seconds(median(epochs.iter().map(|e| e.wall_s))),
        seconds(median(epochs.iter().filter(|e| e.eval_epoch.is_none()).map(|e| e.eval_s))),
        epochs.len(),
    );
    if let Some(traffic) = traffic(report) {
        line += &format!("; {traffic}");
    }
    if let Some(partition) = &report.partition {
        let quality = if report.cut == CutKind::VertexCut.as_str() {
            format!("replication factor {:.3}", partition.replication_factor)
        } else {
            format!("edge-cut fraction {:.4}", partition.edge_cut_fraction)
        };
        line += &format!("; {} {} parts, {quality}", partition.algorithm, partition.parts);
    }
    let rss = f.peak_rss_bytes.map_or("n/a".to_string(), |b| bytes(b as f64));
    // The estimate counts the run's data and buffers (`trainer::memory`), not the program's own
    // code, libraries and allocator slack, which the measured peak holds too.
    let estimate = f.memory.as_ref().map_or(String::new(), |m| {
        format!(" (estimated {} for the run's data and buffers, the program itself not counted)", {
            bytes(m.estimate_bytes as f64)
        })
    });
    line + &format!("; peak RSS {rss}{estimate}")
}

/// The median of `values` (0 for none).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[mid],
        _ => 0.5 * (values[mid - 1] + values[mid]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_test_split_is_named_not_scored_zero() {
        use trainer::{LocalOptions, TrainConfig, data, run_on};
        let config = TrainConfig { epochs: 1, ..TrainConfig::default() };
        let mut dataset = data::prepare_dataset(&config, std::path::Path::new("."), &Default::default()).unwrap();
        let scored = summary(&run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap());
        assert!(scored.contains("test acc ") && !scored.contains("no test vertices"), "{scored}");
        dataset.splits.test.clear();
        let line = summary(&run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap());
        assert!(line.contains("no test vertices") && !line.contains("test acc"), "{line}");
    }

    #[test]
    fn median_of_none_odd_and_even_counts() {
        assert_eq!(median([].into_iter()), 0.0);
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
    }
}
