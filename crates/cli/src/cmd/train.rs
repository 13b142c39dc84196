//! `halo train`: GNN training (full-batch, or on sampled mini-batches with `--batch-size`) with
//! progress on stderr and a JSON report.
//!
//! Settings come from the defaults, then the `--config` TOML file, then the flags (each layer
//! overriding the one before); the merged configuration is validated once. Before any work the
//! run is checked: distributed flags need a distributed method, an MPI launch needs the MPI
//! backend ([`launch`]), and the report's path must be writable. A run that fails or is
//! interrupted keeps its report so far ([`keeper`]).

mod adaqp_flags;
mod adgraph_flags;
mod cdfgnn_flags;
mod device_flags;
mod ecgraph_flags;
mod featpart_flags;
mod keeper;
pub(crate) mod launch;
mod memory_flags;
mod progress;
mod reliability_flags;
mod summary;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use comm_hierarchy::Preset;
use gnn_core::{ConvKind, GcnNorm, LayerOrder};
use graph_partition::book::CutKind;
use graph_partition::partition::Algorithm;
use graph_partition::sample::Fanouts;
use trainer::Source;
use trainer::config::{Backend, FeatureNorm, LrScaling, Method, ParamSync, TrainConfig};

use super::load::LoadArgs;
use super::output::check_writable;
use adaqp_flags::{AdaqpFlags, on_off};
use adgraph_flags::AdgraphFlags;
use cdfgnn_flags::CdfgnnFlags;
use device_flags::DeviceFlags;
use ecgraph_flags::EcgraphFlags;
use featpart_flags::FeatpartFlags;
use keeper::Keeper;
use launch::MpiLaunch;
use memory_flags::MemoryFlags;
use progress::Progress;
use reliability_flags::ReliabilityFlags;
use summary::summary;

/// `--backend`'s help, which says whether this build can run under mpirun.
const BACKEND_HELP: &str = if cfg!(feature = "mpi") {
    "Distributed methods: `local` (in-process threads) or `mpi` (MPI processes, `mpirun -np P halo ...`) \
     [default: local; mpi when started by mpirun]. This build has MPI. (NCCL is in `halo bench comm` only.)"
} else {
    "Distributed methods: `local` (in-process threads) or `mpi` (MPI processes, `mpirun -np P halo ...`) \
     [default: local]. This build has no MPI: build it with `cargo build --release --features mpi`. \
     (NCCL is in `halo bench comm` only.)"
};

/// `halo train`'s flags, and which of them the command line gave (the refusals of flags that do
/// not apply to the run read them; a config file's keys are not counted: one file may hold the
/// settings of every method, and only the named method's apply).
#[derive(Debug)]
pub struct Args {
    flags: Flags,
    /// The long names of the flags given on the command line.
    given: Vec<String>,
}

impl clap::FromArgMatches for Args {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self { flags: Flags::from_arg_matches(matches)?, given: given(matches) })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.flags.update_from_arg_matches(matches)?;
        self.given = given(matches);
        Ok(())
    }
}

impl clap::Args for Args {
    fn augment_args(command: clap::Command) -> clap::Command {
        Flags::augment_args(command)
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Flags::augment_args_for_update(command)
    }
}

/// The long names of the flags `matches` got from the command line (an argument's id is its
/// field's name, which the long name spells with dashes).
fn given(matches: &clap::ArgMatches) -> Vec<String> {
    matches
        .ids()
        .filter(|id| matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| id.as_str().replace('_', "-"))
        .collect()
}

/// The sections of `halo train --help`; a method's settings sit under `method <name>`.
mod heading {
    pub const DATA: &str = "Data";
    pub const MODEL: &str = "Model";
    pub const OPTIMIZATION: &str = "Optimization";
    pub const DISTRIBUTED: &str = "Distributed";
    pub const VANILLA: &str = "Method vanilla";
    pub const DATA_PARALLEL: &str = "Method data-parallel";
    pub const ADAQP: &str = "Method adaqp";
    pub const ADGRAPH: &str = "Method adgraph";
    pub const CDFGNN: &str = "Method cdfgnn";
    pub const FEATPART: &str = "Method featpart";
    pub const ECGRAPH: &str = "Method ecgraph";
    pub const RELIABILITY: &str = "Reliability";
    pub const OUTPUT: &str = "Output";
}

#[derive(Debug, clap::Args)]
struct Flags {
    /// TOML file with any of the keys below (spelled like the flags, e.g. `weight-decay = 0.0`);
    /// flags given on the command line override it.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Training method [default: single].
    #[arg(long, value_enum)]
    method: Option<Method>,
    #[command(flatten)]
    device: DeviceFlags,
    /// Compute threads [default: all cores].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    threads: Option<usize>,
    /// Dataset directory in the OGB raw layout, or the name of one under `datasets/`
    /// [default: a built-in synthetic graph].
    #[arg(help_heading = heading::DATA, long, value_name = "PATH")]
    dataset: Option<String>,
    /// Split under `split/` [default: the dataset's default split].
    #[arg(help_heading = heading::DATA, long, value_name = "NAME")]
    split: Option<String>,
    /// Feature normalisation [default: none].
    #[arg(help_heading = heading::DATA, long, value_enum)]
    feature_norm: Option<FeatureNorm>,
    #[command(flatten, next_help_heading = heading::DATA)]
    load: LoadArgs,
    /// Architecture: gcn, sage or gat [default: gcn].
    #[arg(help_heading = heading::MODEL, long, value_name = "NAME")]
    model: Option<ConvKind>,
    /// Number of GNN layers [default: 2].
    #[arg(help_heading = heading::MODEL, long, value_name = "N", allow_negative_numbers = true)]
    layers: Option<usize>,
    /// Hidden width (per head for GAT) [default: 16].
    #[arg(help_heading = heading::MODEL, long, value_name = "N", allow_negative_numbers = true)]
    hidden: Option<usize>,
    /// Attention heads of GAT's hidden layers [default: 8].
    #[arg(help_heading = heading::MODEL, long, value_name = "N", allow_negative_numbers = true)]
    heads: Option<usize>,
    /// Dropout probability [default: 0.5].
    #[arg(help_heading = heading::MODEL, long, value_name = "F", allow_negative_numbers = true)]
    dropout: Option<f32>,
    /// Dropout probability on the input features [default: --dropout; 0 under cdfgnn].
    #[arg(help_heading = heading::MODEL, long, value_name = "F", allow_negative_numbers = true)]
    input_dropout: Option<f32>,
    /// LayerNorm after every hidden conv, before its activation [default: off].
    #[arg(help_heading = heading::MODEL, long, value_name = "on|off", value_parser = on_off)]
    layer_norm: Option<bool>,
    /// Hidden layer order: dropout-last (conv, LayerNorm, activation, dropout) or dropout-first
    /// (conv, dropout, LayerNorm, activation) [default: the method's, dropout-first for adaqp,
    /// else dropout-last].
    #[arg(help_heading = heading::MODEL, long, value_name = "ORDER")]
    layer_order: Option<LayerOrder>,
    /// Training epochs [default: 200].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "N", allow_negative_numbers = true)]
    epochs: Option<usize>,
    /// Adam learning rate [default: 0.01].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "F", allow_negative_numbers = true)]
    lr: Option<f32>,
    /// L2 weight decay [default: 0.0005].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "F", allow_negative_numbers = true)]
    weight_decay: Option<f32>,
    /// Seed of initialisation, dropout and the synthetic graph [default: 0].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "N", allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Stop after N epochs without a validation improvement [default: never].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "N", allow_negative_numbers = true)]
    patience: Option<usize>,
    /// Mini-batch training: seed vertices per step, per worker for data-parallel
    /// [default: full batch].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "N")]
    batch_size: Option<usize>,
    /// Neighbours sampled per vertex and layer, input layer first, -1 for all (e.g. 10,25):
    /// per mini-batch block, or without --batch-size (single, vanilla, ecgraph) each layer's
    /// in-edges drawn anew every epoch, full-batch [default: every neighbour].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "LIST")]
    fanouts: Option<Fanouts>,
    /// Mini-batch GCN: normalise a block with its sampled degrees or the global ones
    /// [default: global].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "NORM")]
    gcn_norm: Option<GcnNorm>,
    /// Mini-batch: vertices per batch of layer-wise evaluation [default: 4096].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "N")]
    eval_batch_size: Option<usize>,
    /// Mini-batch: raise a scaled learning rate linearly, step by step, from the rate as given
    /// over the first N epochs (`--lr-scaling linear`'s warm-up) [default: 0].
    #[arg(help_heading = heading::OPTIMIZATION, long, value_name = "N")]
    lr_warmup: Option<usize>,
    /// Distributed methods: how the graph is split, edge or vertex [default: edge].
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "CUT")]
    cut: Option<CutKind>,
    /// Distributed methods: partitioner, one of hash, random, metis, bdg (edge-cut) or
    /// random-vertex-cut, ebv (vertex-cut) [default: metis for edge, ebv for vertex].
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "NAME")]
    partitioner: Option<Algorithm>,
    /// Distributed methods: use the partition book `halo partition --out DIR` saved instead of
    /// partitioning (checked against the dataset, the workers and the cut).
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "DIR")]
    partition_book: Option<PathBuf>,
    /// Distributed methods: workers of the local backend [default: 4]; under MPI the world size.
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "P", allow_negative_numbers = true)]
    workers: Option<usize>,
    /// Distributed methods: hosts the workers are spread over, dividing the workers [default: 1].
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "H", allow_negative_numbers = true)]
    hosts: Option<usize>,
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "local|mpi", help = BACKEND_HELP)]
    backend: Option<Backend>,
    /// Distributed methods: the modeled cluster, one of cdfgnn, adaqp, ecgraph, featpart,
    /// adgraph (the papers' clusters) [default: cdfgnn].
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "NAME")]
    topology: Option<Preset>,
    /// Distributed methods: multiply the topology's link bandwidths (latencies kept)
    /// [default: 1].
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "F")]
    bandwidth_scale: Option<f64>,
    /// Distributed methods: split halo exchanges and compute what needs no halo row meanwhile.
    #[arg(help_heading = heading::DISTRIBUTED, long)]
    overlap: bool,
    /// Distributed vertex-cut: only masters run the dense per-row work; mirrors aggregate their
    /// edges and push partial sums (less memory and compute; the same traffic as a replica sync).
    #[arg(help_heading = heading::DISTRIBUTED, long)]
    masters_only: bool,
    /// Distributed methods, in-process workers: compute one worker at a time, so each worker's
    /// measured compute (and the modeled epoch) is what it takes with the machine to itself.
    /// Results are unchanged; runs take longer. On without the flag when the workers outnumber
    /// the cores (and no checkpoints are written).
    #[arg(help_heading = heading::DISTRIBUTED, long)]
    serialize_compute: bool,
    /// Distributed methods: evaluate through the method's codecs (advancing their state)
    /// instead of exactly.
    #[arg(help_heading = heading::DISTRIBUTED, long)]
    lossy_eval: bool,
    /// Full-batch distributed methods: agree on the update by an all-reduce of the gradients,
    /// or through parameter servers holding contiguous slices (push gradients, pull slices)
    /// [default: allreduce].
    #[arg(help_heading = heading::DISTRIBUTED, long, value_enum)]
    param_sync: Option<ParamSync>,
    /// --param-sync ps: parameter servers, co-located with the first workers [default: one per
    /// worker].
    #[arg(help_heading = heading::DISTRIBUTED, long, value_name = "M")]
    servers: Option<usize>,
    /// vanilla: send only the rows a receiver does not already hold (lossless).
    #[arg(help_heading = heading::VANILLA, long)]
    skip_repeats: bool,
    /// data-parallel, adgraph: learning rate times the number of workers (linear) or as given
    /// [default: none for data-parallel, linear for adgraph].
    #[arg(help_heading = heading::DATA_PARALLEL, long, value_enum)]
    lr_scaling: Option<LrScaling>,
    #[command(flatten, next_help_heading = heading::ADAQP)]
    adaqp: AdaqpFlags,
    #[command(flatten, next_help_heading = heading::ADGRAPH)]
    adgraph: AdgraphFlags,
    #[command(flatten, next_help_heading = heading::CDFGNN)]
    cdfgnn: CdfgnnFlags,
    #[command(flatten, next_help_heading = heading::FEATPART)]
    featpart: FeatpartFlags,
    #[command(flatten, next_help_heading = heading::ECGRAPH)]
    ecgraph: EcgraphFlags,
    #[command(flatten, next_help_heading = heading::RELIABILITY)]
    reliability: ReliabilityFlags,
    #[command(flatten, next_help_heading = heading::RELIABILITY)]
    memory: MemoryFlags,
    /// Write the JSON report here (checked before training starts; a run that fails or is
    /// interrupted leaves the epochs so far, marked `"incomplete": true` with the reason).
    #[arg(help_heading = heading::OUTPUT, long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// Write the weights of the best validation epoch here (safetensors), and the model and
    /// training configuration beside it (the same name ending in `.json`), for `halo predict`.
    #[arg(help_heading = heading::OUTPUT, long, value_name = "FILE.safetensors")]
    save_model: Option<PathBuf>,
    /// No progress on stderr (a bar on a terminal, else a log line per epoch, at most one every 5 s).
    #[arg(help_heading = heading::OUTPUT, long, short)]
    quiet: bool,
}

impl Args {
    /// Defaults, overridden by the config file, overridden by the flags; validated after the
    /// flags that do not apply to the method are refused.
    fn resolve(&self) -> anyhow::Result<TrainConfig> {
        let c = self.flags.merged()?;
        refuse_foreign(&self.given, c.method.name)?;
        if let (Some(cut), Some(own)) = (self.flags.cut, c.method.name.cut())
            && cut != own
        {
            bail!("--cut {cut}: --method {} trains on a {own}-cut", c.method.name.as_str());
        }
        let c = c.with_method_cut();
        c.validate().context("invalid training setting (flag or config key)")?;
        Ok(c)
    }
}

/// The configuration key a flag sets (the flag's name but for these).
fn flag_key(flag: &str) -> &str {
    FLAG_KEYS.iter().find(|(f, _)| *f == flag).map_or(flag, |(_, key)| key)
}

/// Refuses the `given` flags of another method's settings than `method`'s, naming the methods
/// they belong to.
fn refuse_foreign(given: &[String], method: Method) -> anyhow::Result<()> {
    let foreign: Vec<String> = given
        .iter()
        .filter_map(|flag| {
            let owners = trainer::config::owners(flag_key(flag));
            let names: Vec<&str> = owners.iter().map(|m| m.as_str()).collect();
            (!owners.is_empty() && !owners.contains(&method))
                .then(|| format!("--{flag} is a setting of --method {}", names.join(" or ")))
        })
        .collect();
    if !foreign.is_empty() {
        let it = if foreign.len() == 1 { "it" } else { "them" };
        bail!("{}; this run is --method {}, which would ignore {it}", foreign.join(", "), method.as_str());
    }
    Ok(())
}

/// The flags spelled otherwise than their configuration key.
const FLAG_KEYS: [(&str, &str); 3] =
    [("method", "name"), ("lr-warmup", "lr-warmup-epochs"), ("fetch-trials", "trials")];

impl Flags {
    /// How errors about the report path name it: the flag, or the config file's key.
    fn report_flag(&self) -> String {
        match (&self.report, &self.config) {
            (None, Some(file)) => format!("`report` of {}", file.display()),
            _ => "--report".to_string(),
        }
    }

    /// Defaults, overridden by the config file, overridden by the flags (not validated yet).
    fn merged(&self) -> anyhow::Result<TrainConfig> {
        let mut c = match &self.config {
            Some(path) => TrainConfig::from_toml_file(path)?,
            None => TrainConfig::default(),
        };
        fn set<T: Clone>(slot: &mut T, flag: &Option<T>) {
            if let Some(v) = flag {
                *slot = v.clone();
            }
        }
        fn set_opt<T: Clone>(slot: &mut Option<T>, flag: &Option<T>) {
            if flag.is_some() {
                slot.clone_from(flag);
            }
        }
        set_opt(&mut c.dataset, &self.dataset);
        set(&mut c.model, &self.model);
        set(&mut c.layers, &self.layers);
        set(&mut c.hidden, &self.hidden);
        set(&mut c.heads, &self.heads);
        set(&mut c.epochs, &self.epochs);
        set(&mut c.lr, &self.lr);
        set(&mut c.weight_decay, &self.weight_decay);
        set(&mut c.dropout, &self.dropout);
        set_opt(&mut c.input_dropout, &self.input_dropout);
        set(&mut c.layer_norm, &self.layer_norm);
        set_opt(&mut c.layer_order, &self.layer_order);
        set(&mut c.seed, &self.seed);
        set(&mut c.feature_norm, &self.feature_norm);
        set_opt(&mut c.split, &self.split);
        set(&mut c.method.name, &self.method);
        set(&mut c.distributed.cut, &self.cut);
        set_opt(&mut c.distributed.partitioner, &self.partitioner);
        set_opt(&mut c.distributed.partition_book, &self.partition_book);
        set(&mut c.distributed.workers, &self.workers);
        set(&mut c.distributed.hosts, &self.hosts);
        set(&mut c.distributed.backend, &self.backend);
        set(&mut c.distributed.topology, &self.topology);
        set(&mut c.distributed.bandwidth_scale, &self.bandwidth_scale);
        c.distributed.overlap |= self.overlap;
        c.distributed.masters_only |= self.masters_only;
        c.distributed.serialize_compute |= self.serialize_compute;
        c.distributed.lossy_eval |= self.lossy_eval;
        set(&mut c.distributed.param_sync, &self.param_sync);
        set_opt(&mut c.distributed.servers, &self.servers);
        c.method.vanilla.skip_repeats |= self.skip_repeats;
        set_opt(&mut c.minibatch.batch_size, &self.batch_size);
        set_opt(&mut c.minibatch.fanouts, &self.fanouts);
        set(&mut c.minibatch.gcn_norm, &self.gcn_norm);
        set(&mut c.minibatch.eval_batch_size, &self.eval_batch_size);
        set(&mut c.method.data_parallel.lr_scaling, &self.lr_scaling);
        set(&mut c.method.adgraph.lr_scaling, &self.lr_scaling);
        set(&mut c.minibatch.lr_warmup_epochs, &self.lr_warmup);
        self.adgraph.apply(&mut c);
        set_opt(&mut c.threads, &self.threads);
        set_opt(&mut c.patience, &self.patience);
        self.featpart.apply(&mut c);
        set_opt(&mut c.report, &self.report);
        self.adaqp.apply(&mut c);
        self.cdfgnn.apply(&mut c);
        self.ecgraph.apply(&mut c);
        self.device.apply(&mut c);
        self.reliability.apply(&mut c);
        self.memory.apply(&mut c);
        Ok(c)
    }
}

/// The validated configuration `halo train FLAGS` would run (flags without the subcommand);
/// `halo experiment` builds each variant with it, so a variant means exactly what its flags mean.
pub(crate) fn config_from_flags(flags: &[String]) -> anyhow::Result<TrainConfig> {
    use clap::{Args as _, FromArgMatches as _};
    let command = Args::augment_args(clap::Command::new("halo train").no_binary_name(true));
    let args = command.try_get_matches_from(flags).and_then(|m| Args::from_arg_matches(&m)).map_err(|err| {
        // clap renders for a terminal: the message, then usage and a help hint. Keep the message.
        let text = err.to_string();
        anyhow::anyhow!("{}", text.lines().next().unwrap_or_default().trim_start_matches("error: "))
    })?;
    args.resolve()
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (config, report_target) = checked(&args)?;
    let args = args.flags;
    if let Some(threads) = config.threads {
        use_threads(threads)?;
    }
    let keeper = Keeper::new(&config, report_target);
    #[cfg(unix)]
    keeper.keep_on_signals()?;
    let mut progress = Progress::new(config.epochs, args.quiet, std::io::stderr().is_terminal(), keeper.clone());
    let load = args.load.options(None, false);
    let outcome = trainer::run(&config, Source::Load(Path::new("datasets"), &load), &mut progress);
    progress.finish();
    let Some(report) = outcome.map_err(|err| keeper.fail(err.into()))? else {
        return Ok(()); // an MPI rank other than 0: rank 0 reports for every rank
    };
    keeper.complete(&report)?;
    println!("{}", summary(&report));
    if let Some(path) = &args.save_model {
        trainer::export::save(path, &report).context("--save-model")?;
        println!("saved the model of epoch {} to {}", report.final_.best_epoch, path.display());
    }
    Ok(())
}

/// The configuration to run and where its report goes (with the flag that named the path), after
/// the checks that need no work: distributed flags need a distributed method, an MPI launch the
/// MPI backend, and the report a writable path (on the rank that writes it).
fn checked(args: &Args) -> anyhow::Result<(TrainConfig, Option<(PathBuf, String)>)> {
    let mut config = args.resolve()?;
    device_flags::check_build(&config, cfg!(feature = "cuda"))?;
    if config.method.name == Method::Single {
        let ignored: Vec<String> = args
            .given
            .iter()
            .filter(|flag| trainer::config::is_distributed(flag_key(flag)))
            .map(|flag| format!("--{flag}"))
            .collect();
        if !ignored.is_empty() {
            bail!(
                "{} {} no effect with --method single, which trains in one process; add --method vanilla \
                 to train on several workers",
                ignored.join(", "),
                if ignored.len() == 1 { "has" } else { "have" }
            );
        }
    }
    let args = &args.flags;
    let launch = MpiLaunch::from_env();
    if let Some(backend) = launch::backend_for(launch.as_ref(), &config, args.backend, cfg!(feature = "mpi"))? {
        tracing::info!("started by an MPI launcher: training with --backend {}", backend.as_str());
        config.distributed.backend = backend;
    }
    let writes_report = launch.as_ref().is_none_or(MpiLaunch::is_root);
    let target = config.report.clone().filter(|_| writes_report).map(|path| (path, args.report_flag()));
    if let Some((path, flag)) = &target {
        check_writable(path, flag)?;
    }
    if let Some(path) = args.save_model.as_ref().filter(|_| writes_report) {
        let sidecar = trainer::export::sidecar_path(path);
        if sidecar == *path {
            bail!(
                "--save-model {}: the weights need a name not ending in .json (their sidecar takes it)",
                path.display()
            );
        }
        check_writable(path, "--save-model")?;
    }
    Ok((config, target))
}

/// Runs the compute pool (rayon's, which gnn-core's dense products share) on `threads` threads.
fn use_threads(threads: usize) -> anyhow::Result<()> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .with_context(|| format!("cannot start a pool of {threads} threads (--threads)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("train").chain(argv.iter().copied())).unwrap().args
    }

    #[test]
    fn flags_override_toml_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, "lr = 0.05\nhidden = 32\nmodel = \"sage\"\n").unwrap();
        let c = parse(&["--config", path.to_str().unwrap(), "--lr", "0.2", "--epochs", "7"]).resolve().unwrap();
        assert_eq!(c.lr, 0.2, "flag beats file");
        assert_eq!(c.hidden, 32, "file beats default");
        assert_eq!(c.model, ConvKind::Sage);
        assert_eq!(c.epochs, 7);
        assert_eq!(c.dropout, TrainConfig::default().dropout, "default kept");
    }

    #[test]
    fn no_flags_give_the_defaults() {
        assert_eq!(parse(&[]).resolve().unwrap(), TrainConfig::default());
    }

    #[test]
    fn mini_batch_flags_set_the_minibatch_and_data_parallel_keys() {
        let argv = ["--method", "data-parallel", "--batch-size", "32", "--fanouts", "10,25", "--gcn-norm", "sampled"];
        let c =
            parse(&[&argv[..], &["--eval-batch-size", "100", "--lr-scaling", "linear"]].concat()).resolve().unwrap();
        assert_eq!((c.method.name, c.minibatch.batch_size), (Method::DataParallel, Some(32)));
        assert_eq!(c.minibatch.fanouts, Some("10,25".parse().unwrap()));
        assert_eq!((c.minibatch.gcn_norm, c.minibatch.eval_batch_size), (GcnNorm::Sampled, 100));
        assert_eq!(c.method.data_parallel.lr_scaling, LrScaling::Linear);
        assert_eq!(c.minibatch.lr_warmup_epochs, 0);
        let c = parse(&[&argv[..], &["--lr-warmup", "5"]].concat()).resolve().unwrap();
        assert_eq!(c.minibatch.lr_warmup_epochs, 5);
        let err = parse(&["--lr-warmup", "5"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("`lr-warmup-epochs`"), "{err:#}");
        let err = parse(&["--batch-size", "8", "--fanouts", "10,25,5"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("`fanouts`") && format!("{err:#}").contains("2 layers"), "{err:#}");
        let cli = Cli::try_parse_from(["train", "--fanouts", "10,0"]).err().expect("fanout 0 is refused");
        assert!(cli.to_string().contains("fanout 2 is 0"), "{cli}");
    }

    #[test]
    fn adgraph_flags_set_its_settings() {
        let argv = ["--method", "adgraph", "--hops", "2", "--batch-size", "16", "--partitioner", "random"];
        let c = parse(&[&argv[..], &["--lr-scaling", "none"]].concat()).resolve().unwrap();
        assert_eq!((c.method.name, c.method.adgraph.hops), (Method::Adgraph, 2));
        assert_eq!(
            (c.method.adgraph.lr_scaling, c.distributed.partitioner),
            (LrScaling::None, Some(Algorithm::Random))
        );
        let c = parse(&["--method", "adgraph", "--batch-size", "16"]).resolve().unwrap();
        assert_eq!(
            (c.method.adgraph.hops, c.method.adgraph.lr_scaling),
            (1, LrScaling::Linear),
            "the paper's defaults"
        );
        let err = parse(&["--method", "adgraph", "--hops", "2"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("`batch-size`"), "{err:#}");
        let err = parse(&["--hops", "2"]).resolve().unwrap_err().to_string();
        assert!(err.contains("--hops is a setting of --method adgraph"), "{err}");
        let err = checked(&parse(&["--workers", "2", "--overlap"])).unwrap_err().to_string();
        assert!(err.starts_with("--workers, --overlap have no effect with --method single"), "{err}");
    }

    #[test]
    fn the_device_flag_is_checked_before_any_work() {
        let c = parse(&["--device", "cuda:1"]).resolve().unwrap();
        assert_eq!(c.device, trainer::config::Device::Cuda(1));
        let err = device_flags::check_build(&c, false).unwrap_err().to_string();
        assert!(err.contains("--device cuda:1") && err.contains(device_flags::CUDA_BUILD), "{err}");
        device_flags::check_build(&c, true).unwrap();
        let err = parse(&["--device", "cuda", "--method", "vanilla"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("`device`") && format!("{err:#}").contains("single-process"), "{err:#}");
        let cli = Cli::try_parse_from(["train", "--device", "gpu"]).err().expect("an unknown device is refused");
        assert!(cli.to_string().contains("unknown device `gpu`"), "{cli}");
        if !cfg!(feature = "cuda") {
            let err = checked(&parse(&["--device", "cuda"])).unwrap_err().to_string();
            assert!(err.contains(device_flags::CUDA_BUILD), "{err}");
        }
    }

    /// NCCL is a `halo bench comm` backend; training has none, and the refusal says where it is.
    #[test]
    fn the_backend_flag_points_nccl_at_the_benchmark() {
        assert_eq!(parse(&["--backend", "mpi"]).flags.backend, Some(Backend::Mpi));
        assert_eq!(parse(&["--backend", "local"]).flags.backend, Some(Backend::Local));
        let cli = Cli::try_parse_from(["train", "--backend", "nccl"]).err().expect("training has no NCCL backend");
        assert!(cli.to_string().contains("halo bench comm --backend nccl"), "{cli}");
        let cli = Cli::try_parse_from(["train", "--backend", "gloo"]).err().expect("an unknown backend is refused");
        assert!(cli.to_string().contains("expected local or mpi"), "{cli}");
    }

    /// The command's arguments, as `halo train --help` lists them.
    fn command() -> clap::Command {
        <Args as clap::Args>::augment_args(clap::Command::new("train"))
    }

    /// A value `--long` parses (none for a switch).
    fn sample_value(arg: &clap::Arg) -> Option<String> {
        if !arg.get_action().takes_values() {
            return None;
        }
        let long = arg.get_long().unwrap();
        let possible = arg.get_possible_values().into_iter().map(|v| v.get_name().to_string());
        let candidates = possible.chain(["4", "0.5", "on"].map(String::from));
        let parses = |value: &String| Cli::try_parse_from(["train", &format!("--{long}"), value]).is_ok();
        Some(candidates.into_iter().find(parses).unwrap_or_else(|| panic!("no sample value for --{long}")))
    }

    /// Each flag of a method's settings, given under every method that does not read it, is
    /// refused, naming the methods it belongs to (before it could train plain vanilla).
    #[test]
    fn a_methods_flag_under_another_method_is_refused_naming_its_owner() {
        let mut refused = 0;
        for arg in command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let owners = trainer::config::owners(flag_key(long));
            if owners.is_empty() {
                continue;
            }
            let names: Vec<&str> = owners.iter().map(|m| m.as_str()).collect();
            let expected = format!("--{long} is a setting of --method {}", names.join(" or "));
            let value = sample_value(arg);
            for method in Method::ALL.into_iter().filter(|m| !owners.contains(m)) {
                let flag = format!("--{long}");
                let mut argv = vec!["--method", method.as_str(), &flag];
                argv.extend(value.as_deref());
                let err = parse(&argv).resolve().expect_err(&format!("{argv:?} is refused")).to_string();
                assert!(err.contains(&expected) && err.contains(method.as_str()), "{argv:?}: {err}");
                refused += 1;
            }
            let flag = format!("--{long}");
            let mut argv = vec!["--method", owners[0].as_str(), &flag];
            argv.extend(value.as_deref());
            if let Err(err) = parse(&argv).resolve() {
                assert!(!err.to_string().contains("is a setting of"), "{argv:?}: {err}");
            }
        }
        assert!(refused >= 30 * 6, "{refused} refusals: the method flags were not found");
        for (argv, expected) in [
            (&["--method", "vanilla", "--quant-bits", "4"][..], "--quant-bits is a setting of --method cdfgnn"),
            (&["--method", "vanilla", "--fp-bits", "2"], "--fp-bits is a setting of --method ecgraph"),
            (&["--method", "vanilla", "--cache", "on"], "--cache is a setting of --method cdfgnn"),
            (&["--method", "vanilla", "--tau", "4"], "--tau is a setting of --method featpart"),
            (&["--method", "vanilla", "--hops", "2"], "--hops is a setting of --method adgraph"),
            (&["--method", "cdfgnn", "--bits", "4"], "--bits is a setting of --method adaqp"),
        ] {
            let err = parse(argv).resolve().unwrap_err().to_string();
            assert!(err.contains(expected), "{argv:?}: {err}");
        }
    }

    /// `--help` has a section per method holding exactly the flags of its settings, and
    /// `--method` offers every method.
    #[test]
    fn help_has_a_section_per_method() {
        let command = command();
        let cli_only = ["config", "quiet", "save-model", "no-cache", "refresh-cache", "cache-dir", "allow-nonfinite"];
        let mut sections = std::collections::BTreeSet::new();
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let key = flag_key(long);
            assert!(
                cli_only.contains(&long) || !trainer::config::sections_of(key).is_empty(),
                "--{long} sets no configuration key"
            );
            let owners = trainer::config::owners(key);
            match arg.get_help_heading().and_then(|h| h.strip_prefix("Method ")) {
                Some(name) => {
                    assert!(owners.iter().any(|m| m.as_str() == name), "--{long} under `Method {name}`");
                    sections.insert(name);
                }
                None => assert!(owners.is_empty(), "--{long} of {owners:?} is not in a method's section"),
            }
        }
        let offered: Vec<String> = command
            .get_arguments()
            .find(|a| a.get_long() == Some("method"))
            .unwrap()
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        assert_eq!(offered, Method::ALL.map(|m| m.as_str().to_string()));
        let with_settings: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).filter(|m| *m != "single").collect();
        assert_eq!(
            sections.into_iter().collect::<std::collections::BTreeSet<_>>(),
            with_settings.into_iter().collect()
        );
    }

    #[test]
    fn a_cut_the_method_does_not_train_on_is_refused() {
        let err = parse(&["--method", "cdfgnn", "--cut", "edge"]).resolve().unwrap_err().to_string();
        assert!(err.contains("--cut edge: --method cdfgnn trains on a vertex-cut"), "{err}");
        let c = parse(&["--method", "cdfgnn", "--partitioner", "ebv"]).resolve().unwrap();
        assert_eq!(c.distributed.cut, CutKind::VertexCut);
    }

    #[test]
    fn invalid_merged_value_names_the_key() {
        let err = parse(&["--dropout", "1.0"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("`dropout`"), "{err:#}");
    }

    #[test]
    fn unknown_key_in_config_file_names_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "epochs = 5\nlayerz = 2\n").unwrap();
        let err = parse(&["--config", path.to_str().unwrap(), "--epochs", "3"]).resolve().unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("bad.toml:2") && msg.contains("layerz"), "{msg}");
    }
}
