//! `halo datasets info|synth`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Subcommand;
use graph_partition::SynthConfig;

use super::load::LoadArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: DatasetsCommand,
}

#[derive(Debug, Subcommand)]
enum DatasetsCommand {
    /// Print node, edge, feature, class, split and degree statistics of a dataset directory.
    Info(InfoArgs),
    /// Generate a synthetic dataset and write it in the OGB raw layout (split `random`).
    Synth(SynthArgs),
}

#[derive(Debug, clap::Args)]
struct InfoArgs {
    /// Dataset directory in the OGB raw layout (raw/, split/, optional meta.json), or a name
    /// under `datasets/`.
    #[arg(value_name = "DATASET")]
    dataset: String,
    /// Split to report (a directory under split/); default: the only one present.
    #[arg(long, value_name = "NAME")]
    split: Option<String>,
    #[command(flatten)]
    load: LoadArgs,
    /// Print the statistics as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct SynthArgs {
    /// Number of nodes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..u32::MAX as u64))]
    nodes: u64,
    /// Mean degree of the (symmetric) graph.
    #[arg(long, value_name = "D", value_parser = non_negative)]
    avg_degree: f64,
    /// Feature columns.
    #[arg(long, value_name = "F", value_parser = clap::value_parser!(u64).range(1..))]
    features: u64,
    /// Classes.
    #[arg(long, value_name = "C", value_parser = clap::value_parser!(u64).range(2..))]
    classes: u64,
    /// Plant this many communities (not aligned with classes).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    communities: Option<u64>,
    /// Fraction of edges inside a community (with --communities).
    #[arg(long, value_name = "F", default_value_t = SynthConfig::default().intra_community, value_parser = fraction)]
    intra: f64,
    /// Fraction of edges joining nodes of the same class.
    #[arg(long, value_name = "H", default_value_t = SynthConfig::default().homophily, value_parser = fraction)]
    homophily: f64,
    /// Put each class's feature signal in one of B contiguous column blocks (class c in block
    /// c mod B; the blocks of a feature cut into B parts) instead of every column.
    #[arg(long, value_name = "B", value_parser = clap::value_parser!(u64).range(1..))]
    signal_blocks: Option<u64>,
    /// Random seed.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Output directory (created if needed). A dataset already there is replaced: its files are
    /// overwritten, its other splits and its cache removed.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

fn non_negative(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() && v >= 0.0 { Ok(v) } else { Err(format!("{s} must be a finite number >= 0")) }
}

fn fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=1.0).contains(&v) { Ok(v) } else { Err(format!("{s} is not in [0, 1]")) }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        DatasetsCommand::Info(info) => run_info(info),
        DatasetsCommand::Synth(synth) => run_synth(synth),
    }
}

fn run_info(args: InfoArgs) -> anyhow::Result<()> {
    let dataset = args.load.load(&args.dataset, "the dataset", args.split, true)?;
    let summary = dataset.summary();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("{summary}");
    }
    Ok(())
}

fn run_synth(args: SynthArgs) -> anyhow::Result<()> {
    // Cross-flag checks clap cannot express; single-flag ranges are checked while parsing.
    if let Some(k) = args.communities
        && k > args.nodes
    {
        bail!("--communities ({k}) must not exceed --nodes ({})", args.nodes);
    }
    if args.avg_degree > (args.nodes - 1) as f64 {
        bail!("--avg-degree ({}) must be at most --nodes - 1 ({})", args.avg_degree, args.nodes - 1);
    }
    if let Some(b) = args.signal_blocks
        && b > args.features
    {
        bail!("--signal-blocks ({b}) must not exceed --features ({})", args.features);
    }
    if args.classes > args.nodes {
        bail!("--classes ({}) must not exceed --nodes ({})", args.classes, args.nodes);
    }
    let config = SynthConfig {
        nodes: args.nodes as usize,
        avg_degree: args.avg_degree,
        features: args.features as usize,
        classes: args.classes as usize,
        communities: args.communities.map(|k| k as usize),
        intra_community: args.intra,
        homophily: args.homophily,
        signal_blocks: args.signal_blocks.map(|b| b as usize),
        seed: args.seed,
    };
    let dataset = config.generate().context("invalid synthetic dataset parameters")?;
    dataset.write_ogb(&args.out).with_context(|| format!("cannot write --out {}", args.out.display()))?;
    let s = dataset.summary();
    println!(
        "wrote {}: {} nodes, {} undirected edges, {} features, {} classes, split random {}/{}/{}",
        args.out.display(),
        s.nodes,
        s.undirected_edges,
        s.features,
        s.classes,
        s.train,
        s.valid,
        s.test
    );
    Ok(())
}
