//! `halo`: the command-line front of Halo. Each subcommand lives in its own module under
//! `cmd/`; this file only parses and dispatches, and turns errors into a non-zero exit.
//!
//! Errors go to stderr with each cause in the chain once; log lines carry colour codes only on a
//! terminal.

use std::io::IsTerminal;

use clap::{Parser, Subcommand};

mod cmd;
#[cfg(test)]
mod docs_commands;

#[derive(Debug, Parser)]
#[command(name = "halo", version, about = "Distributed GNN training that cuts the traffic between workers")]
struct Cli {
    /// Log lines on stderr as text or as one JSON object per line (for log collectors); the
    /// level comes from HALO_LOG (default: warn).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect and generate datasets in the OGB raw layout.
    Datasets(cmd::datasets::Args),
    /// Partition a dataset's graph, report the partition's quality, save the partition book.
    Partition(cmd::partition::Args),
    /// Benchmark Halo's layers (`bench comm`: communicator throughput, ledger and cost model).
    Bench(cmd::bench::Args),
    /// Train a GNN (GCN, GraphSAGE, GAT; full-batch or mini-batch) with any method; write a JSON report.
    // Boxed: every method adds flags, and the other subcommands' arguments are small.
    Train(Box<cmd::train::Args>),
    /// Run a grid of `train` variants x seeds from a TOML file; tabulate means, errors and the
    /// differences from a baseline variant.
    Experiment(cmd::experiment::Args),
    /// Compare reports side by side: accuracy, bytes, modeled and wall time, ratios against the first.
    Compare(cmd::compare::Args),
    /// Draw reports' epochs (loss, accuracy, bytes, modeled time, method fields) to an SVG or PNG.
    Plot(cmd::plot::Args),
    /// Run weights saved by `train --save-model` over a dataset: accuracies and predictions.
    Predict(cmd::predict::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Warnings (e.g. a stale dataset cache being rebuilt) show by default; HALO_LOG overrides.
    let filter = tracing_subscriber::EnvFilter::try_from_env("HALO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match cli.log_format {
        // Colour codes only where a terminal interprets them; in a log file they are noise.
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
    let result = match cli.command {
        Command::Datasets(args) => cmd::datasets::run(args),
        Command::Partition(args) => cmd::partition::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Train(args) => cmd::train::run(*args),
        Command::Experiment(args) => cmd::experiment::run(args),
        Command::Compare(args) => cmd::compare::run(args),
        Command::Plot(args) => cmd::plot::run(args),
        Command::Predict(args) => cmd::predict::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", causes_once(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose message the error before
/// it already quotes (a library error that both prints and chains its source, say), so each
/// cause shows once.
fn causes_once(err: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut previous = String::new();
    for cause in err.chain() {
        let message = cause.to_string();
        if !previous.contains(&message) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&message);
        }
        previous = message;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "edge.csv.gz: {}", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_the_error_above_quotes_is_printed_once() {
        let io = std::io::Error::other("incomplete deflate stream");
        let err = anyhow::Error::new(Quoting(io)).context("cannot load --dataset d");
        assert_eq!(causes_once(&err), "cannot load --dataset d: edge.csv.gz: incomplete deflate stream");
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(causes_once(&plain), "outer: inner");
    }
}
