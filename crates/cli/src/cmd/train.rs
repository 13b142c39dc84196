//! `halo train`: GNN training (full-batch, or on sampled mini-batches with `--batch-size`) with
//! progress on stderr and a JSON report.
//!
//! Settings come from the defaults, then the `--config` TOML file, then the flags (each layer
//! overriding the one before); the merged configuration is validated once. Before any work the
//! run is checked: distributed flags need a distributed method, an MPI launch needs the MPI
//! backend ([`launch`]), and the report's path must be writable. A run that fails or is
//! interrupted keeps its report so far ([`keeper`]).
//!
//! The refusals read the section of each flag's configuration key (`trainer::config::owners`): a
//! flag of another method's settings names the method it belongs to, and distributed flags under
//! `--method single` are refused too; config-file keys are not refused, since one file may hold
//! every method's settings. A `--cut` the method does not train on is an error
//! (`Method::ignores_cut`).

mod device;
mod keeper;
mod keys;
pub(crate) mod launch;
#[cfg(test)]
mod method_flag_tests;
mod progress;
mod summary;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use graph_partition::book::CutKind;
use trainer::Source;
use trainer::config::{Method, TrainConfig, heading};

use super::load::{self, LoadArgs};
use super::output::{Place, check_writable, refuse_clashes};
use keeper::Keeper;
use keys::Given;
use launch::MpiLaunch;
use progress::Progress;
use summary::summary;

/// What `--backend`'s help adds: whether this build can run under mpirun.
const BACKEND_BUILD: &str = if cfg!(feature = "mpi") {
    "This build has MPI."
} else {
    "This build has no MPI: `cargo install --path crates/cli --features mpi` installs one."
};

/// `halo train`'s arguments: every configuration key as a flag ([`keys`]) and the command's own
/// flags, with the keys the command line gave (the refusals of flags that do not apply to the
/// run read them; a config file's keys are not counted: one file may hold the settings of every
/// method, and only the named method's apply).
#[derive(Debug)]
pub struct Args {
    flags: Flags,
    /// The parsed command line, which [`Args::resolve`] writes over the configuration.
    matches: clap::ArgMatches,
    given: Vec<Given>,
}

impl Args {
    /// Whether the command line gave `key`.
    fn gave(&self, key: &str) -> bool {
        self.given.iter().any(|g| g.key == key)
    }
}

impl clap::FromArgMatches for Args {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let command = <Self as clap::Args>::augment_args(clap::Command::new("train"));
        Ok(Self {
            flags: Flags::from_arg_matches(matches)?,
            matches: matches.clone(),
            given: keys::given(&command, matches),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for Args {
    fn augment_args(command: clap::Command) -> clap::Command {
        let command = keys::augment(command).mut_arg("backend", |arg| {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(format!("{help} {BACKEND_BUILD}"))
        });
        // The keys leave their last section's heading in force; the command's own flags name theirs.
        Flags::augment_args(command.next_help_heading(None::<&str>))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

/// The flags of the command itself, which no configuration holds.
#[derive(Debug, clap::Args)]
struct Flags {
    /// TOML file with any of the keys below (spelled like the flags, e.g. `weight-decay = 0.0`);
    /// flags given on the command line override it.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    #[command(flatten, next_help_heading = heading::DATA)]
    load: LoadArgs,
    /// Write the weights of the best validation epoch here (safetensors), and the model, the
    /// training configuration and the dataset's directory beside it (the same name with `.json`
    /// appended), for `halo predict`.
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
        self.resolve_under(MpiLaunch::from_env().as_ref())
    }

    /// The configuration of a run started by `launch` (`None`: not by an MPI launcher).
    fn resolve_under(&self, launch: Option<&MpiLaunch>) -> anyhow::Result<TrainConfig> {
        let mut c = match &self.flags.config {
            Some(path) => TrainConfig::from_toml_file(path)?,
            None => TrainConfig::default(),
        };
        clap::FromArgMatches::update_from_arg_matches(&mut c, &self.matches)?;
        refuse_foreign(&self.given, c.method.name)?;
        let cut = c.distributed.cut;
        let mut c = c.with_method_cut();
        // An MPI launch decides the backend before the checks, so the settings that need MPI
        // are accepted under mpirun without `--backend mpi`.
        let backend_flag = self.gave("backend").then_some(c.distributed.backend);
        if let Some(backend) = launch::backend_for(launch, &c, backend_flag, cfg!(feature = "mpi"))? {
            tracing::info!("started by an MPI launcher: training with --backend {}", backend.as_str());
            c.distributed.backend = backend;
        }
        c.validate().context("invalid training setting (flag or config key)")?;
        self.refuse_unread_partition_flags(&c, cut)?;
        Ok(c)
    }

    /// Refuses the partition's flags that the method of the validated `config` would ignore: a
    /// `--cut` (given as `cut`) other than its own, a partitioner or book its data plan does not
    /// read. A method in one process is refused every distributed flag at once ([`checked`]).
    fn refuse_unread_partition_flags(&self, config: &TrainConfig, cut: CutKind) -> anyhow::Result<()> {
        if trainer::plan::in_one_process(config) {
            return Ok(());
        }
        let method = config.method.name;
        if let Some(why) = method.ignores_cut(cut).filter(|_| self.gave("cut")) {
            bail!("--cut {cut}: --method {why}, so the flag would be ignored");
        }
        let read = trainer::plan::partition_keys(config);
        match ["partitioner", "partition-book"].into_iter().find(|k| self.gave(k) && !read.contains(k)) {
            Some(key) => bail!("--{key}: --method {} does not read it, so the flag would be ignored", method.as_str()),
            None => Ok(()),
        }
    }

    /// How errors about the path of `key` name it: the flag, or the config file's key.
    fn path_flag(&self, key: &str) -> String {
        match &self.flags.config {
            Some(file) if !self.gave(key) => format!("`{key}` of {}", file.display()),
            _ => format!("--{key}"),
        }
    }

    /// Every file and folder the run of `config` reads its settings from or writes: the config
    /// file, the report, the saved model and its sidecar, the checkpoints.
    fn places(&self, config: &TrainConfig) -> Vec<Place> {
        let mut places: Vec<Place> = self.flags.config.iter().map(|file| Place::input("--config", file)).collect();
        places.extend(config.report.iter().map(|path| Place::output(self.path_flag("report"), path)));
        if let Some(path) = &self.flags.save_model {
            places.push(Place::output("--save-model", path));
            let sidecar = trainer::export::sidecar_path(path);
            places.push(Place::output("--save-model's sidecar", &sidecar));
        }
        let checkpoints = config.reliability.checkpoint_dir.iter();
        places.extend(checkpoints.map(|dir| Place::output_folder(self.path_flag("checkpoint-dir"), dir)));
        places
    }
}

/// Refuses the `given` flags of another method's settings than `method`'s, naming the methods
/// they belong to.
fn refuse_foreign(given: &[Given], method: Method) -> anyhow::Result<()> {
    let foreign: Vec<String> = given
        .iter()
        .filter_map(|given| {
            let owners = trainer::config::owners(&given.key);
            let names: Vec<&str> = owners.iter().map(|m| m.as_str()).collect();
            (!owners.is_empty() && !owners.contains(&method))
                .then(|| format!("--{} is a setting of --method {}", given.flag, names.join(" or ")))
        })
        .collect();
    if !foreign.is_empty() {
        let it = if foreign.len() == 1 { "it" } else { "them" };
        bail!("{}; this run is --method {}, which would ignore {it}", foreign.join(", "), method.as_str());
    }
    Ok(())
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
    keeper.keep_on_signals(MpiLaunch::from_env().is_some_and(|launch| launch.size > 1))?;
    let mut progress = Progress::new(config.epochs, args.quiet, std::io::stderr().is_terminal(), keeper.clone());
    let load = args.load.options(None, false);
    let outcome = trainer::run(&config, Source::Load(Path::new(load::DATASETS), &load), &mut progress);
    progress.finish();
    let Some(report) = outcome.map_err(|err| keeper.fail(err.into()))? else {
        return Ok(()); // an MPI rank other than 0: rank 0 reports for every rank
    };
    keeper.complete(&report)?;
    println!("{}", summary(&report));
    if let Some(path) = &args.save_model {
        let datasets = Path::new(load::DATASETS);
        let dir =
            config.dataset.as_deref().map(|spec| trainer::data::resolve_dataset_dir(spec, datasets)).transpose()?;
        trainer::export::save(path, &report, dir.as_deref()).context("--save-model")?;
        println!("saved the model of epoch {} to {}", report.final_.best_epoch, path.display());
    }
    Ok(())
}

/// The configuration to run and where its report goes (with the flag that named the path), after
/// the checks that need no work: distributed flags need a distributed method, an MPI launch the
/// MPI backend, the outputs paths of their own, and the report a writable path (on the rank that
/// writes it).
fn checked(args: &Args) -> anyhow::Result<(TrainConfig, Option<(PathBuf, String)>)> {
    let launch = MpiLaunch::from_env();
    let config = args.resolve_under(launch.as_ref())?;
    device::check_build(&config, device::Built::THIS)?;
    if trainer::plan::in_one_process(&config) {
        let ignored: Vec<String> = args
            .given
            .iter()
            .filter(|given| trainer::config::is_distributed(&given.key))
            .map(|given| format!("--{}", given.flag))
            .collect();
        if !ignored.is_empty() {
            bail!(
                "{} {} no effect with --method {}, which trains in one process; add --method vanilla \
                 to train on several workers",
                ignored.join(", "),
                if ignored.len() == 1 { "has" } else { "have" },
                config.method.name.as_str()
            );
        }
    }
    refuse_clashes(&args.places(&config))?;
    let writes_report = launch.as_ref().is_none_or(MpiLaunch::is_root);
    let target = config.report.clone().filter(|_| writes_report).map(|path| (path, args.path_flag("report")));
    if let Some((path, flag)) = &target {
        check_writable(path, flag)?;
    }
    if let Some(path) = args.flags.save_model.as_ref().filter(|_| writes_report) {
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
    use clap::Parser;
    use gnn_core::{ConvKind, GcnNorm};
    use graph_partition::partition::Algorithm;
    use trainer::config::{Backend, LrScaling};

    use super::*;

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
    fn mini_batch_flags_set_the_minibatch_keys() {
        let argv = ["--method", "data-parallel", "--batch-size", "32", "--fanouts", "10,25", "--gcn-norm", "sampled"];
        let c =
            parse(&[&argv[..], &["--eval-batch-size", "100", "--lr-scaling", "linear"]].concat()).resolve().unwrap();
        assert_eq!((c.method.name, c.minibatch.batch_size), (Method::DataParallel, Some(32)));
        assert_eq!(c.minibatch.fanouts, Some("10,25".parse().unwrap()));
        assert_eq!((c.minibatch.gcn_norm, c.minibatch.eval_batch_size), (GcnNorm::Sampled, 100));
        assert_eq!((c.minibatch.lr_scaling, c.lr_scaling()), (Some(LrScaling::Linear), LrScaling::Linear));
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
        assert_eq!((c.lr_scaling(), c.distributed.partitioner), (LrScaling::None, Some(Algorithm::Random)));
        let c = parse(&["--method", "adgraph", "--batch-size", "16"]).resolve().unwrap();
        assert_eq!((c.method.adgraph.hops, c.lr_scaling()), (1, LrScaling::None), "adam's default");
        let c = parse(&["--method", "adgraph", "--batch-size", "16", "--optimizer", "sgd"]).resolve().unwrap();
        assert_eq!(c.lr_scaling(), LrScaling::Linear, "the paper's rule, derived for sgd");
        let err =
            parse(&["--method", "featpart", "--batch-size", "16", "--lr-scaling", "linear"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("`lr-scaling`: featpart does not scale"), "{err:#}");
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
        let err = device::check_build(&c, device::Built { cuda: false, nccl: false }).unwrap_err().to_string();
        assert!(err.contains("--device cuda:1") && err.contains(device::CUDA_BUILD), "{err}");
        device::check_build(&c, device::Built { cuda: true, nccl: false }).unwrap();
        parse(&["--device", "cuda", "--method", "featpart", "--batch-size", "16"]).resolve().unwrap();
        parse(&["--device", "cuda", "--model", "gat", "--batch-size", "16"]).resolve().unwrap();
        parse(&["--device", "cuda", "--method", "adaqp"]).resolve().unwrap();
        parse(&["--device", "cuda", "--method", "ecgraph"]).resolve().unwrap();
        parse(&["--device", "cuda", "--method", "ecgraph", "--model", "gat"]).resolve().unwrap();
        parse(&["--device", "cuda", "--method", "cdfgnn", "--model", "gat"]).resolve().unwrap();
        parse(&["--device", "cuda", "--method", "vanilla", "--workers", "2", "--overlap"]).resolve().unwrap();
        parse(&["--device", "cuda", "--method", "vanilla", "--workers", "4"]).resolve().unwrap();
        let cli = Cli::try_parse_from(["train", "--device", "gpu"]).err().expect("an unknown device is refused");
        assert!(cli.to_string().contains("unknown device `gpu`"), "{cli}");
        if !cfg!(feature = "cuda") {
            let err = checked(&parse(&["--device", "cuda"])).unwrap_err().to_string();
            assert!(err.contains(device::CUDA_BUILD), "{err}");
        }
    }

    /// `--backend nccl` sums GPU workers' gradients: it needs a GPU and a build with NCCL, and
    /// each refusal names what to do.
    #[test]
    fn the_backend_flag_takes_nccl_for_gpu_workers() {
        let backend = |name| parse(&["--method", "vanilla", "--backend", name]).resolve().unwrap().distributed.backend;
        assert_eq!((backend("mpi"), backend("local")), (Backend::Mpi, Backend::Local));
        let err = parse(&["--method", "vanilla", "--backend", "nccl"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("needs --device cuda"), "{err:#}");
        let c = parse(&["--method", "vanilla", "--workers", "2", "--backend", "nccl", "--device", "cuda"])
            .resolve()
            .unwrap();
        assert_eq!(c.distributed.backend, Backend::Nccl);
        let err = device::check_build(&c, device::Built { cuda: true, nccl: false }).unwrap_err().to_string();
        assert!(err.contains("--backend nccl") && err.contains(device::NCCL_BUILD), "{err}");
        device::check_build(&c, device::Built { cuda: true, nccl: true }).unwrap();
        let c = parse(&["--method", "vanilla", "--workers", "2", "--backend", "mpi-nccl", "--device", "cuda"])
            .resolve()
            .unwrap();
        assert_eq!(c.distributed.backend, Backend::MpiNccl);
        let err = device::check_build(&c, device::Built { cuda: true, nccl: false }).unwrap_err().to_string();
        assert!(err.contains("--backend mpi-nccl") && err.contains("--features mpi"), "{err}");
        let err = parse(&["--method", "vanilla", "--backend", "mpi-nccl"]).resolve().unwrap_err();
        assert!(format!("{err:#}").contains("needs --device cuda, or --backend mpi"), "{err:#}");
        let cli = Cli::try_parse_from(["train", "--backend", "gloo"]).err().expect("an unknown backend is refused");
        assert!(cli.to_string().contains("expected local, mpi, nccl or mpi-nccl"), "{cli}");
    }

    #[test]
    fn the_backend_help_names_the_build_command() {
        assert!(cfg!(feature = "mpi") || BACKEND_BUILD.contains(device::MPI_BUILD), "{BACKEND_BUILD}");
        let help = command().render_long_help().to_string();
        assert!(help.contains(BACKEND_BUILD) && !help.contains("bench comm` only"), "{help}");
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
            let (Some(long), Some(key)) = (arg.get_long(), keys::key_of(arg)) else { continue };
            let owners = trainer::config::owners(&key);
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
            (&["--method", "vanilla", "--replica-cache", "on"], "--replica-cache is a setting of --method cdfgnn"),
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
            let Some(key) = keys::key_of(arg) else {
                assert!(cli_only.contains(&long), "--{long} sets no configuration key");
                continue;
            };
            let owners = trainer::config::owners(&key);
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
        let with_settings: Vec<&str> =
            Method::ALL.iter().map(|m| m.as_str()).filter(|m| !["single", "data-parallel"].contains(m)).collect();
        assert_eq!(
            sections.into_iter().collect::<std::collections::BTreeSet<_>>(),
            with_settings.into_iter().collect()
        );
    }

    /// Every method against every cut, on the command line and in a config file: the cut a
    /// method trains on is accepted, any other is refused naming the method (never trained on
    /// another cut than asked), and the configuration holds the cut the run trains on.
    #[test]
    fn a_cut_the_method_does_not_train_on_is_refused() {
        use trainer::config::{BatchMode, CutRule};
        for method in Method::ALL {
            let rules = method.rules();
            let name = method.as_str();
            let batch = if rules.batches.contains(&BatchMode::Full) { &[][..] } else { &["--batch-size", "16"][..] };
            for cut in [CutKind::EdgeCut, CutKind::VertexCut] {
                let argv = [&["--method", name, "--cut", cut.as_str()][..], batch].concat();
                let args = parse(&argv);
                match rules.cut {
                    CutRule::Configured => assert_eq!(args.resolve().unwrap().distributed.cut, cut, "{argv:?}"),
                    CutRule::Fixed(own) if own == cut => {
                        assert_eq!(args.resolve().unwrap().distributed.cut, cut, "{argv:?}")
                    }
                    CutRule::Fixed(own) => {
                        let err = args.resolve().unwrap_err().to_string();
                        let want = format!("--cut {cut}: --method {name} trains on {}", own.with_article());
                        assert!(err.starts_with(&want), "{argv:?}: {err}");
                        let toml = format!("method = \"{name}\"\n[distributed]\ncut = \"{cut}\"\n");
                        let toml =
                            format!("{toml}{}", if batch.is_empty() { "" } else { "[minibatch]\nbatch-size = 16\n" });
                        let err = TrainConfig::from_toml_str(&toml, "run.toml").unwrap_err().to_string();
                        assert!(err.starts_with(&format!("run.toml:3: key `cut`: {name} trains on")), "{err}");
                    }
                    CutRule::None => {
                        let err = checked(&args).unwrap_err().to_string();
                        let want = if trainer::plan::in_one_process(
                            &parse(&[&["--method", name][..], batch].concat()).resolve().unwrap(),
                        ) {
                            format!("--cut has no effect with --method {name}")
                        } else {
                            format!("--cut {cut}: --method {name} cuts no graph")
                        };
                        assert!(err.starts_with(&want), "{argv:?}: {err}");
                    }
                }
            }
            let c = parse(&[&["--method", name][..], batch].concat()).resolve().unwrap();
            assert_eq!(c.distributed.cut, method.cut().unwrap_or(CutKind::EdgeCut), "{name}: the cut it trains on");
        }
        for (method, read) in [
            ("vanilla", &["cut", "partitioner", "partition-book"][..]),
            ("adaqp", &["cut", "partitioner", "partition-book"]),
            ("adgraph", &["cut", "partitioner"]),
            ("featpart", &[]),
        ] {
            let batch = if method == "adgraph" || method == "featpart" { &["--batch-size", "16"][..] } else { &[] };
            let c = parse(&[&["--method", method][..], batch].concat()).resolve().unwrap();
            assert_eq!(trainer::plan::partition_keys(&c), read, "{method}");
        }
        let err = parse(&["--method", "adaqp", "--cut", "vertex"]).resolve().unwrap_err().to_string();
        assert!(err.contains("--method adaqp trains on an edge-cut"), "{err}");
        let err = parse(&["--method", "ecgraph", "--cut", "vertex"]).resolve().unwrap_err().to_string();
        assert!(err.contains("--method ecgraph trains on an edge-cut"), "{err}");
    }

    /// Every method against the partition's flags: a flag its data plan does not read is
    /// refused, naming the method; one it reads is accepted.
    #[test]
    fn partition_flags_the_method_does_not_read_are_refused() {
        use trainer::config::BatchMode;
        for method in Method::ALL {
            let name = method.as_str();
            let full = method.rules().batches.contains(&BatchMode::Full);
            let batch = if full { &[][..] } else { &["--batch-size", "16"][..] };
            let config = parse(&[&["--method", name][..], batch].concat()).resolve().unwrap();
            let partitioner = if method.cut() == Some(CutKind::VertexCut) { "ebv" } else { "random" };
            for (key, value) in [("partitioner", partitioner), ("partition-book", "book")] {
                let flag = format!("--{key}");
                let argv = [&["--method", name, &flag, value][..], batch].concat();
                let reads = trainer::plan::partition_keys(&config).contains(&key);
                match parse(&argv).resolve() {
                    Ok(_) => assert!(reads || trainer::plan::in_one_process(&config), "{argv:?} is accepted"),
                    Err(err) => {
                        let want = format!("{flag}: --method {name} does not read it");
                        assert!(!reads && err.to_string().starts_with(&want), "{argv:?}: {err}");
                    }
                }
            }
        }
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
