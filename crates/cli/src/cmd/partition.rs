//! `halo partition`: split a dataset's graph, report the partition's quality, optionally save
//! the partition book.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use graph_partition::book::{BookError, FolderError, LHopSets, PartitionBook, write_part_folder};
use graph_partition::metrics::{PartStats, PartitionCost, PartitionMetrics, measure, peak_rss_bytes};
use graph_partition::partition::{
    Algorithm, EbvWeights, MasterRule, Partition, PartitionConfig, PartitionError, expand_l_hop, partition_graph,
};
use graph_partition::{Csr, Dataset, Structure};
use serde::Serialize;

use super::load::{LoadArgs, nonfinite_hint, resolve};
use super::output::{Place, refuse_clashes};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Dataset directory in the OGB raw layout, or a name under `datasets/`. With --out its
    /// graph, labels and split are parsed from the raw files and its features only streamed (the
    /// dataset cache, which holds the features too, is neither read nor written); without, it
    /// loads as for `halo train`.
    #[arg(long, value_name = "PATH")]
    dataset: String,
    /// Partitioner: hash, random, metis, bdg (edge-cut); random-vertex-cut, ebv (vertex-cut).
    #[arg(long)]
    algo: Algorithm,
    /// Number of parts (workers), between 1 and the number of nodes.
    #[arg(long)]
    parts: usize,
    /// Hosts the parts are spread over evenly; must divide --parts.
    #[arg(long, default_value_t = 1)]
    hosts: usize,
    /// EBV: weight of the per-host replication term, in [0, 1].
    #[arg(long, default_value_t = EbvWeights::default().gamma)]
    gamma: f64,
    /// EBV: weight of the edge-balance term.
    #[arg(long, default_value_t = EbvWeights::default().alpha)]
    alpha: f64,
    /// EBV: weight of the vertex-balance term.
    #[arg(long, default_value_t = EbvWeights::default().beta)]
    beta: f64,
    /// Vertex-cut master placement: hash or host-aware.
    #[arg(long, default_value_t = MasterRule::HostAware)]
    master: MasterRule,
    /// Edge-cut only: also keep the L-hop in-neighbourhood of each part's training nodes (ADGraph).
    #[arg(long, value_name = "L")]
    hops: Option<usize>,
    /// Seed of the randomised partitioners.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Split whose training nodes --hops expands (default: the dataset's only split).
    #[arg(long)]
    split: Option<String>,
    /// Write the partition book here as a part folder: book.json and `part-<i>.bin`, plus each
    /// part's rows (`part-<i>.rows`: features, labels and split ids of its vertices) and
    /// parts.json; `halo train --partition-book DIR` then has worker i read part i alone. The
    /// features are streamed from the dataset's feature file, never held whole. The part files
    /// of an earlier book there are replaced.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the JSON partition report here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

/// `--report` contents: the partition-report fields of docs/ARCHITECTURE.md at the top level, then details.
#[derive(Debug, Serialize)]
struct Report {
    algorithm: Algorithm,
    parts: usize,
    hosts: usize,
    replication_factor: f64,
    edge_imbalance: f64,
    vertex_imbalance: f64,
    edge_cut_fraction: Option<f64>,
    remote_neighbor_ratio: f64,
    max_inner_connections: u64,
    max_outer_connections: u64,
    /// Time of the partitioner alone.
    time_s: f64,
    /// The process's peak resident memory up to the end of partitioning (loading included; with
    /// --out the node features are never loaded).
    peak_rss_bytes: Option<u64>,
    /// With --out: the time of writing the part folder, and the process's peak resident memory
    /// up to its end (the features streamed included).
    out_time_s: Option<f64>,
    out_peak_rss_bytes: Option<u64>,
    dataset: String,
    num_nodes: usize,
    num_edges: usize,
    seed: u64,
    config: PartitionConfig,
    book_time_s: f64,
    l_hop: Option<LHopReport>,
    per_part: Vec<PartStats>,
}

#[derive(Debug, Serialize)]
struct LHopReport {
    hops: usize,
    nodes_per_part: Vec<usize>,
    /// Total kept vertices over the number of vertices.
    replication_factor: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.hops.is_some() && args.algo.is_vertex_cut() {
        bail!("--hops applies to the edge-cut algorithms (hash, random, metis, bdg), not {}", args.algo);
    }
    check_outputs(args.out.as_deref(), args.report.as_deref())?;
    let data_dir = resolve(&args.dataset)?;
    let config = PartitionConfig {
        algorithm: args.algo,
        parts: args.parts,
        hosts: args.hosts,
        ebv: EbvWeights { alpha: args.alpha, beta: args.beta, gamma: args.gamma },
        master: args.master,
        seed: args.seed,
    };
    let built = match &args.out {
        // The features go straight from their file into the part folder, never held whole.
        Some(dir) => write_folder(
            dir,
            args.load.load_structure(&data_dir, "--dataset", args.split.clone())?,
            &args,
            &config,
            &data_dir,
        )?,
        None => {
            let dataset = args.load.load(&args.dataset, "--dataset", args.split.clone(), false)?;
            in_memory(dataset.into_structure(&data_dir, &args.load.options(args.split.clone(), false)), &args, &config)?
        }
    };
    let Built { dataset, num_nodes, num_edges, cost, metrics, book_time_s, l_hop, out_time_s } = built;
    let report = Report {
        algorithm: config.algorithm,
        parts: metrics.parts,
        hosts: metrics.hosts,
        replication_factor: metrics.replication_factor,
        edge_imbalance: metrics.edge_imbalance,
        vertex_imbalance: metrics.vertex_imbalance,
        edge_cut_fraction: metrics.edge_cut_fraction,
        remote_neighbor_ratio: metrics.remote_neighbor_ratio,
        max_inner_connections: metrics.max_inner_connections,
        max_outer_connections: metrics.max_outer_connections,
        time_s: cost.time_s,
        peak_rss_bytes: cost.peak_rss_bytes,
        out_time_s,
        out_peak_rss_bytes: out_time_s.and_then(|_| peak_rss_bytes()),
        dataset,
        num_nodes,
        num_edges,
        seed: config.seed,
        config: config.clone(),
        book_time_s,
        l_hop,
        per_part: metrics.per_part,
    };
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&report)?;
        super::output::write_atomically(path, &(json + "\n"), "--report")?;
    }
    eprintln!(
        "{} into {} parts on {} host(s) in {:.3}s: replication factor {:.3}, edge imbalance {:.3}, \
         max outer connections {}",
        config.algorithm,
        report.parts,
        report.hosts,
        report.time_s,
        report.replication_factor,
        report.edge_imbalance,
        report.max_outer_connections
    );
    Ok(())
}

/// What partitioning made, for the report.
struct Built {
    /// The dataset's name.
    dataset: String,
    num_nodes: usize,
    num_edges: usize,
    /// The partitioner's cost, loading included in its peak memory.
    cost: PartitionCost,
    metrics: PartitionMetrics,
    book_time_s: f64,
    l_hop: Option<LHopReport>,
    /// With --out: the time of writing the part folder.
    out_time_s: Option<f64>,
}

/// Partitions `dataset` and builds the whole book in memory, for its metrics.
fn in_memory(dataset: Structure, args: &Args, config: &PartitionConfig) -> anyhow::Result<Built> {
    let graph = &dataset.graph;
    let (partition, cost) = measure(|| partition_graph(graph, config));
    let partition = partition.map_err(flag_error)?;
    let (book, book_cost) = measure(|| PartitionBook::build(graph, &partition));
    let book = book.context("building the partition book")?;
    let metrics = PartitionMetrics::of(&book, &config.layout().map_err(flag_error)?)?;
    let l_hop = match (args.hops, &partition) {
        (Some(hops), Partition::EdgeCut { parts, owner }) => {
            Some(l_hop_sets(graph, *parts, owner, &dataset.splits.train, hops)?.0)
        }
        _ => None,
    };
    let (num_nodes, num_edges) = (graph.num_nodes(), graph.num_edges());
    Ok(Built {
        dataset: dataset.name,
        num_nodes,
        num_edges,
        cost,
        metrics,
        book_time_s: book_cost.time_s,
        l_hop,
        out_time_s: None,
    })
}

/// Partitions `dataset` and writes its part folder to `dir` one part at a time
/// ([`write_part_folder`]): the whole book is never held, and the graph is dropped before
/// the features are streamed.
fn write_folder(
    dir: &Path,
    dataset: Structure,
    args: &Args,
    config: &PartitionConfig,
    data_dir: &Path,
) -> anyhow::Result<Built> {
    let (partition, cost) = measure(|| partition_graph(&dataset.graph, config));
    let partition = partition.map_err(flag_error)?;
    let layout = config.layout().map_err(flag_error)?;
    let (l_hop, sets) = match (args.hops, &partition) {
        (Some(hops), Partition::EdgeCut { parts, owner }) => {
            let (report, sets) = l_hop_sets(&dataset.graph, *parts, owner, &dataset.splits.train, hops)?;
            (Some(report), Some(sets))
        }
        _ => (None, None),
    };
    let context = || format!("cannot write the part folder to --out {}", dir.display());
    let fingerprint = Dataset::source_fingerprint(data_dir)
        .with_context(|| format!("cannot read --dataset {}", data_dir.display()))?;
    let (name, num_nodes, num_edges) = (dataset.name.clone(), dataset.graph.num_nodes(), dataset.graph.num_edges());
    let start = std::time::Instant::now();
    let written =
        write_part_folder(dir, dataset, &partition, &layout, sets.as_ref(), fingerprint, config.algorithm.name())
            .map_err(|err| match err {
                FolderError::Partition(e) => anyhow::Error::new(e).context("building the partition book"),
                FolderError::Book(BookError::Dataset(e)) => {
                    let hint = nonfinite_hint(&e);
                    anyhow::Error::new(e).context(format!("{}{hint}", context()))
                }
                err => anyhow::Error::new(err).context(context()),
            })?;
    Ok(Built {
        dataset: name,
        num_nodes,
        num_edges,
        cost,
        metrics: written.metrics,
        book_time_s: written.build_time_s,
        l_hop,
        out_time_s: Some(start.elapsed().as_secs_f64()),
    })
}

/// ADGraph's l-hop sets of an edge-cut, and what the report says of them.
fn l_hop_sets(
    graph: &Csr,
    parts: usize,
    owner: &[u32],
    train: &[u32],
    hops: usize,
) -> anyhow::Result<(LHopReport, LHopSets)> {
    let nodes = expand_l_hop(graph, parts, owner, train, hops)?;
    let report = LHopReport {
        hops,
        nodes_per_part: nodes.iter().map(Vec::len).collect(),
        replication_factor: nodes.iter().map(Vec::len).sum::<usize>() as f64 / graph.num_nodes() as f64,
    };
    Ok((report, LHopSets { hops, nodes }))
}

/// Fails before any work when an output cannot be written: `--out` must be a directory or not
/// exist yet, `--report` must not be a directory and its directory must exist, and the report
/// must not lie in the book's folder.
fn check_outputs(out: Option<&Path>, report: Option<&Path>) -> anyhow::Result<()> {
    let places = out.map(|dir| Place::output_folder("--out", dir)).into_iter();
    refuse_clashes(&places.chain(report.map(|path| Place::output("--report", path))).collect::<Vec<_>>())?;
    if let Some(dir) = out
        && dir.exists()
        && !dir.is_dir()
    {
        bail!("--out {} is a file, not a directory", dir.display());
    }
    match report {
        Some(path) => super::output::check_writable(path, "--report"),
        None => Ok(()),
    }
}

/// Names the command-line flag behind a parameter error.
fn flag_error(err: PartitionError) -> anyhow::Error {
    let flag = match &err {
        PartitionError::Parts { .. } | PartitionError::LayoutParts(_) => "--parts",
        PartitionError::Hosts { .. } => "--hosts",
        PartitionError::Gamma(_) => "--gamma",
        PartitionError::Weight { name: "alpha", .. } => "--alpha",
        PartitionError::Weight { name: "beta", .. } => "--beta",
        _ => return anyhow::Error::new(err).context("partitioning failed"),
    };
    anyhow::Error::new(err).context(format!("invalid {flag}"))
}
