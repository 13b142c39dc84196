//! `halo`: the command-line front of Halo. Each subcommand lives in its own module under
//! `cmd/`; this file only parses and dispatches, and turns errors into a non-zero exit.

use clap::{Parser, Subcommand};

mod cmd;

#[derive(Debug, Parser)]
#[command(name = "halo", version, about = "Distributed GNN training that cuts the traffic between workers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect and generate datasets in the OGB raw layout.
    Datasets(cmd::datasets::Args),
    /// Partition a dataset's graph, report the partition's quality, save the partition book.
    Partition(cmd::partition::Args),
    /// Benchmark Halo's layers (`bench comm`: communicator throughput, ledger and cost model).
    Bench(cmd::bench::Args),
    /// Train a GNN full-batch (GCN, GraphSAGE, GAT) and write a JSON report.
    Train(cmd::train::Args),
    /// Run a grid of `train` variants x seeds from a TOML file; tabulate means, errors and the
    /// differences from a baseline variant.
    Experiment(cmd::experiment::Args),
}

fn main() -> std::process::ExitCode {
    // Warnings (e.g. a stale dataset cache being rebuilt) show by default; HALO_LOG overrides.
    let filter = tracing_subscriber::EnvFilter::try_from_env("HALO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Datasets(args) => cmd::datasets::run(args),
        Command::Partition(args) => cmd::partition::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Train(args) => cmd::train::run(args),
        Command::Experiment(args) => cmd::experiment::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
