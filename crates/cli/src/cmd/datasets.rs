//! `halo datasets info|synth`.

use clap::Subcommand;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: DatasetsCommand,
}

#[derive(Debug, Subcommand)]
enum DatasetsCommand {}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {}
}
