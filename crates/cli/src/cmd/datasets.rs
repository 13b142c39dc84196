//! `halo datasets info|synth|import`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Subcommand;
use graph_partition::DatasetError;
use graph_partition::SynthConfig;
use graph_partition::dataset::{ImportFormat, ImportOptions, ParseErrorKind, import};

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
    /// Turn a graph in a common layout (NumPy .npz, OGB's binary folder, an edge list) into a
    /// Halo dataset folder (docs/GUIDE.md, "Bring your own graph").
    Import(ImportArgs),
}

#[derive(Debug, clap::Args)]
struct ImportArgs {
    /// The input: an .npz file, an OGB binary folder (with raw/data.npz), or an edge-list file.
    path: PathBuf,
    /// The dataset folder to write; it must not exist yet (or be empty).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The input's layout, instead of telling it from PATH.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Edge list: node features, a .npy (N, F) array or a CSV file of rows.
    #[arg(long, value_name = "FILE")]
    features: Option<PathBuf>,
    /// Edge list: node classes, a .npy (N,) array or a CSV file of one class per line.
    #[arg(long, value_name = "FILE")]
    labels: Option<PathBuf>,
    /// A folder with {train,valid,test}.csv[.gz] node-id files (OGB's split folder).
    #[arg(long, value_name = "DIR", conflicts_with = "masks")]
    split: Option<PathBuf>,
    /// An .npz with the bool arrays train_mask, val_mask and test_mask.
    #[arg(long, value_name = "FILE")]
    masks: Option<PathBuf>,
    /// Dataset name; default the --out folder's name.
    #[arg(long)]
    name: Option<String>,
    /// Number of classes; a larger label is an error. Default: the largest label plus one.
    #[arg(long, value_name = "C", value_parser = clap::value_parser!(u64).range(1..u32::MAX as u64))]
    num_classes: Option<u64>,
    /// Seed of the random split made when the input has none.
    #[arg(long, value_name = "S", default_value_t = 0)]
    split_seed: u64,
    /// Fraction of the labelled nodes the random split puts in train.
    #[arg(long, value_name = "F", default_value_t = ImportOptions::default().train_fraction, value_parser = fraction)]
    train_fraction: f64,
    /// Fraction of the labelled nodes the random split puts in valid (the rest is test).
    #[arg(long, value_name = "F", default_value_t = ImportOptions::default().valid_fraction, value_parser = fraction)]
    valid_fraction: f64,
    /// Accept NaN and infinite features; by default the first one is an error naming its
    /// position.
    #[arg(long, alias = "allow-non-finite")]
    allow_nonfinite: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Npz,
    OgbBin,
    EdgeList,
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
        DatasetsCommand::Import(args) => run_import(args),
    }
}

fn run_import(args: ImportArgs) -> anyhow::Result<()> {
    if args.train_fraction + args.valid_fraction > 1.0 {
        bail!("--train-fraction ({}) plus --valid-fraction ({}) exceeds 1", args.train_fraction, args.valid_fraction);
    }
    let opts = ImportOptions {
        format: args.format.map(|f| match f {
            Format::Npz => ImportFormat::Npz,
            Format::OgbBin => ImportFormat::OgbBin,
            Format::EdgeList => ImportFormat::EdgeList,
        }),
        features: args.features,
        labels: args.labels,
        split: args.split,
        masks: args.masks,
        name: args.name,
        num_classes: args.num_classes.map(|c| c as usize),
        split_seed: args.split_seed,
        train_fraction: args.train_fraction,
        valid_fraction: args.valid_fraction,
        allow_nonfinite: args.allow_nonfinite,
        progress: true,
    };
    let report = import(&args.path, &args.out, &opts).map_err(|err| {
        let non_finite = matches!(
            &err,
            DatasetError::Parse { kind: ParseErrorKind::NonFinite { .. }, .. }
                | DatasetError::Element { kind: ParseErrorKind::NonFiniteValue { .. }, .. }
        );
        let hint = if non_finite { " (--allow-nonfinite accepts non-finite features)" } else { "" };
        let (path, out) = (args.path.display(), args.out.display());
        anyhow::Error::new(err).context(format!("cannot import {path}{hint}; nothing is written to {out}"))
    })?;
    for note in report.notes() {
        eprintln!("note: {note}");
    }
    println!(
        "imported {} ({}) into {}: {} nodes, {} undirected edges, {} features, {} classes, split {}/{}/{}",
        args.path.display(),
        report.format.name(),
        args.out.display(),
        report.nodes,
        report.undirected_edges,
        report.features,
        report.classes,
        report.train,
        report.valid,
        report.test
    );
    Ok(())
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
