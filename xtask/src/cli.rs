//! Command-line parsing for `cargo xtask` with plain `std::env::args` (no clap: xtask stays light).

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::cluster::{Action, Cpus, Rate, TableSpec};
use crate::datasets::{self, OgbDataset};
use crate::ptx::{Compiler, DEFAULT_ARCH, Mode};

/// Printed for `help` and after usage errors.
pub const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  download <dataset> [--dir DIR]   fetch an OGB node-property dataset into DIR/<dataset>/
                                   (DIR defaults to datasets/ in the workspace; a partial
                                   download is resumed). Datasets: ogbn-arxiv, ogbn-products,
                                   ogbn-papers100M, ogbn-proteins
  ptx [--arch ARCH] [--nvcc] [--check]
                                   compile kernels/*.cu to kernels/ptx/*.ptx and MANIFEST.tsv
                                   through NVRTC (libnvrtc on LD_LIBRARY_PATH), or nvcc with
                                   --nvcc (ARCH defaults to sm_80); --check compares a fresh
                                   compile with the committed files instead of writing
  gpu-test                         run the GPU tests (ignored by `cargo test`; needs a CUDA GPU)
  gpu-bundle DIR [--base REV]      build `halo` (cuda), the GPU test binaries, Cora, the PyG
                                   speed peer and a `run` script into DIR, for a GPU machine
                                   without Rust: `DIR/run [OUTDIR]` (docs/CUDA.md); --base also
                                   builds REV's `halo` (cuda) for the `ab-device` row
  bench-ab REV [--rounds N] -- HALO_ARGS
                                   build REV (a worktree under target/bench-ab/) and the working
                                   tree in release, run `halo HALO_ARGS --report ...` with each
                                   alternately N rounds (default 3), and print each figure's
                                   min/median/max per side and the ratio of the medians
  cluster up [--hosts H] [--ranks R] [--rate RATE] [--cpus-per-host X]
                                   a cluster on this machine (root): H hosts (default 4), each
                                   a network namespace with its own hostname and R MPI slots
                                   (default 1), its link shaped both ways to RATE (default
                                   1gbit; 100mbit, none, ...), its processes in a CPU cgroup of
                                   X cores (default: the hosts share the machine's cores)
  cluster run [--timeout S] -- COMMAND...
                                   COMMAND on every slot under mpirun: TCP between hosts,
                                   shared memory inside one; stopped after S s (default 1800)
  cluster shape --rate RATE        reshape every link
  cluster link HOST down|up        cut or restore one host's link (HOST: 0.. or halo-hN)
  cluster status | down            show the cluster, or remove all it made (also after a crash)
  cluster smoke [--halo PATH]      CI's cluster test with an MPI build of halo (default
                                   target/debug/halo): 2 hosts x 2 ranks, Cora, vanilla and adaqp
  cluster table --dataset DIR [--halo PATH] [--rates R,R|auto] [--hosts H] [--ranks R]
                [--cpus-per-host X] [--epochs N] [-- TRAIN_FLAGS]
                                   vanilla and each full-batch method on H hosts (default 4) of
                                   R ranks (default 1) at each rate (default 100mbit,1gbit,none;
                                   auto: the rate where vanilla's comm share is 60-80%), links
                                   measured first: step, bytes, measured comm share, modeled vs
                                   measured (default 8 epochs); TRAIN_FLAGS go to every run
  cluster faults [--halo PATH] [--trials N] [--seed S]
                                   fault trials on 4 hosts: a link cut mid-run and at start-up, a
                                   rank killed, a link cut for 5 s; N of each (default 20)
  help                             show this message
";

/// A parsed `cargo xtask` invocation.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Download { dataset: &'static OgbDataset, dir: Option<PathBuf> },
    Ptx { arch: String, compiler: Compiler, mode: Mode },
    GpuTest,
    GpuBundle { dir: PathBuf, base: Option<String> },
    BenchAb { rev: String, rounds: usize, halo_args: Vec<String> },
    Cluster(Action),
    Help,
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command> {
    let mut args = args.into_iter();
    let Some(command) = args.next() else { bail!("missing command\n\n{USAGE}") };
    match command.as_str() {
        "download" => {
            let mut dataset = None;
            let mut dir = None;
            while let Some(arg) = args.next() {
                if let Some(value) = flag_value("--dir", &arg, &mut args)? {
                    dir = Some(PathBuf::from(value));
                } else if arg.starts_with('-') {
                    bail!("download: unknown flag `{arg}`\n\n{USAGE}");
                } else if dataset.replace(arg.clone()).is_some() {
                    bail!("download: one dataset at a time (extra argument `{arg}`)");
                }
            }
            let Some(name) = dataset else {
                bail!("download: missing dataset; choose one of: {}", datasets::names().join(", "))
            };
            Ok(Command::Download { dataset: datasets::lookup(&name)?, dir })
        }
        "ptx" => {
            let (mut arch, mut compiler, mut mode) = (DEFAULT_ARCH.to_owned(), Compiler::Nvrtc, Mode::Write);
            while let Some(arg) = args.next() {
                if arg == "--nvcc" {
                    compiler = Compiler::Nvcc;
                    continue;
                }
                if arg == "--check" {
                    mode = Mode::Check;
                    continue;
                }
                match flag_value("--arch", &arg, &mut args)? {
                    Some(value) if is_arch(&value) => arch = value,
                    Some(value) => bail!("ptx: --arch `{value}` is not an sm_XX or compute_XX architecture"),
                    None => bail!("ptx: unexpected argument `{arg}`\n\n{USAGE}"),
                }
            }
            Ok(Command::Ptx { arch, compiler, mode })
        }
        "gpu-test" => match args.next() {
            None => Ok(Command::GpuTest),
            Some(arg) => bail!("gpu-test: unexpected argument `{arg}`\n\n{USAGE}"),
        },
        "gpu-bundle" => {
            let (mut dir, mut base) = (None, None);
            while let Some(arg) = args.next() {
                if let Some(value) = flag_value("--base", &arg, &mut args)? {
                    base = Some(value);
                } else if arg.starts_with('-') {
                    bail!("gpu-bundle: unknown flag `{arg}`\n\n{USAGE}");
                } else if dir.is_some() {
                    bail!("gpu-bundle: one folder only (extra argument `{arg}`)");
                } else {
                    dir = Some(PathBuf::from(arg));
                }
            }
            let dir = dir
                .ok_or_else(|| anyhow::anyhow!("gpu-bundle: missing the folder to write the bundle into\n\n{USAGE}"))?;
            Ok(Command::GpuBundle { dir, base })
        }
        "bench-ab" => {
            let (mut rev, mut rounds) = (None, 3);
            while let Some(arg) = args.next() {
                if arg == "--" {
                    break;
                }
                if let Some(value) = flag_value("--rounds", &arg, &mut args)? {
                    rounds =
                        value.parse().ok().filter(|&n: &usize| n > 0).ok_or_else(|| {
                            anyhow::anyhow!("bench-ab: --rounds `{value}` is not a whole number above 0")
                        })?;
                } else if arg.starts_with('-') {
                    bail!("bench-ab: unknown flag `{arg}` (halo's arguments go after `--`)\n\n{USAGE}");
                } else if rev.replace(arg.clone()).is_some() {
                    bail!("bench-ab: one revision at a time (extra argument `{arg}`; halo's go after `--`)");
                }
            }
            let Some(rev) = rev else { bail!("bench-ab: missing the revision to compare against\n\n{USAGE}") };
            let halo_args: Vec<String> = args.collect();
            if halo_args.is_empty() {
                bail!("bench-ab: missing the workload: `-- train ...` (halo's arguments)");
            }
            if halo_args.iter().any(|a| a == "--report" || a.starts_with("--report=")) {
                bail!("bench-ab: drop --report from halo's arguments; every run writes its own report");
            }
            Ok(Command::BenchAb { rev, rounds, halo_args })
        }
        "cluster" => parse_cluster(args).map(Command::Cluster),
        "help" | "-h" | "--help" => Ok(Command::Help),
        other => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

/// `cargo xtask cluster ...`.
fn parse_cluster(mut args: impl Iterator<Item = String>) -> Result<Action> {
    let Some(action) = args.next() else {
        bail!("cluster: missing the action (up, run, shape, link, status, down, smoke, table, faults)\n\n{USAGE}")
    };
    let number = |flag: &str, value: &str| -> Result<usize> {
        value
            .parse()
            .ok()
            .filter(|&n: &usize| n > 0)
            .ok_or_else(|| anyhow::anyhow!("cluster {action}: {flag} `{value}` is not a whole number above 0"))
    };
    match action.as_str() {
        "up" => {
            let (mut hosts, mut ranks, mut rate, mut cpus) = (4, 1, Rate::parse("1gbit")?, None);
            while let Some(arg) = args.next() {
                if let Some(value) = flag_value("--hosts", &arg, &mut args)? {
                    hosts = number("--hosts", &value)?;
                } else if let Some(value) = flag_value("--ranks", &arg, &mut args)? {
                    ranks = number("--ranks", &value)?;
                } else if let Some(value) = flag_value("--rate", &arg, &mut args)? {
                    rate = Rate::parse(&value)?;
                } else if let Some(value) = flag_value("--cpus-per-host", &arg, &mut args)? {
                    cpus = Some(Cpus::parse(&value)?);
                } else {
                    bail!("cluster up: unexpected argument `{arg}`\n\n{USAGE}");
                }
            }
            Ok(Action::Up { hosts, ranks, rate, cpus })
        }
        "shape" => {
            let mut rate = None;
            while let Some(arg) = args.next() {
                match flag_value("--rate", &arg, &mut args)? {
                    Some(value) => rate = Some(Rate::parse(&value)?),
                    None => bail!("cluster shape: unexpected argument `{arg}`\n\n{USAGE}"),
                }
            }
            Ok(Action::Shape { rate: rate.ok_or_else(|| anyhow::anyhow!("cluster shape: missing --rate"))? })
        }
        "run" => {
            let mut timeout = 1800;
            while let Some(arg) = args.next() {
                if arg == "--" {
                    break;
                }
                match flag_value("--timeout", &arg, &mut args)? {
                    Some(value) => timeout = number("--timeout", &value)?,
                    None => bail!("cluster run: unexpected argument `{arg}` (the command goes after `--`)"),
                }
            }
            let command: Vec<String> = args.collect();
            if command.is_empty() {
                bail!("cluster run: missing the command: `cluster run -- halo train ...`");
            }
            Ok(Action::Run { timeout: std::time::Duration::from_secs(timeout as u64), command })
        }
        "link" => {
            let (Some(host), Some(state), None) = (args.next(), args.next(), args.next()) else {
                bail!("cluster link: expected `cluster link HOST down|up`");
            };
            let index = host.strip_prefix("halo-h").unwrap_or(&host);
            let host =
                index.parse().map_err(|_| anyhow::anyhow!("cluster link: host `{host}` is not 0.. or halo-hN"))?;
            let up = match state.as_str() {
                "up" => true,
                "down" => false,
                other => bail!("cluster link: `{other}` is not down or up"),
            };
            Ok(Action::Link { host, up })
        }
        "status" | "down" => match args.next() {
            Some(arg) => bail!("cluster {action}: unexpected argument `{arg}`"),
            None => Ok(if action == "status" { Action::Status } else { Action::Down }),
        },
        "smoke" | "faults" => {
            let (mut halo, mut trials, mut seed) = (PathBuf::from("target/debug/halo"), 20, 1);
            while let Some(arg) = args.next() {
                if let Some(value) = flag_value("--halo", &arg, &mut args)? {
                    halo = PathBuf::from(value);
                } else if let Some(value) =
                    flag_value("--trials", &arg, &mut args).transpose().filter(|_| action == "faults")
                {
                    trials = number("--trials", &value?)?;
                } else if let Some(value) =
                    flag_value("--seed", &arg, &mut args).transpose().filter(|_| action == "faults")
                {
                    seed = number("--seed", &value?)? as u64;
                } else {
                    bail!("cluster {action}: unexpected argument `{arg}`");
                }
            }
            Ok(if action == "smoke" { Action::Smoke { halo } } else { Action::Faults { halo, trials, seed } })
        }
        "table" => {
            let mut spec = TableSpec {
                halo: PathBuf::from("target/release/halo"),
                dataset: PathBuf::new(),
                rates: ["100mbit", "1gbit", "none"].map(Rate::parse).into_iter().collect::<Result<_>>()?,
                hosts: 4,
                ranks: 1,
                cpus: None,
                epochs: 8,
                train: Vec::new(),
            };
            while let Some(arg) = args.next() {
                if let Some(value) = flag_value("--halo", &arg, &mut args)? {
                    spec.halo = PathBuf::from(value);
                } else if let Some(value) = flag_value("--dataset", &arg, &mut args)? {
                    spec.dataset = PathBuf::from(value);
                } else if let Some(value) = flag_value("--rates", &arg, &mut args)? {
                    spec.rates = match value.as_str() {
                        "auto" => Vec::new(),
                        _ => value.split(',').map(Rate::parse).collect::<Result<_>>()?,
                    };
                } else if let Some(value) = flag_value("--ranks", &arg, &mut args)? {
                    spec.ranks = number("--ranks", &value)?;
                } else if let Some(value) = flag_value("--cpus-per-host", &arg, &mut args)? {
                    spec.cpus = Some(Cpus::parse(&value)?);
                } else if arg == "--" {
                    spec.train = args.by_ref().collect();
                } else if let Some(value) = flag_value("--hosts", &arg, &mut args)? {
                    spec.hosts = number("--hosts", &value)?;
                } else if let Some(value) = flag_value("--epochs", &arg, &mut args)? {
                    spec.epochs = number("--epochs", &value)?;
                } else {
                    bail!("cluster table: unexpected argument `{arg}`");
                }
            }
            if spec.dataset.as_os_str().is_empty() {
                bail!("cluster table: missing --dataset DIR (e.g. a `halo datasets synth` folder)");
            }
            Ok(Action::Table(spec))
        }
        other => bail!("cluster: unknown action `{other}` (up, run, shape, link, status, down, smoke, table, faults)"),
    }
}

/// The value of `--name VALUE` or `--name=VALUE` when `arg` is that flag; `None` for other arguments.
fn flag_value(name: &str, arg: &str, rest: &mut impl Iterator<Item = String>) -> Result<Option<String>> {
    if arg == name {
        match rest.next() {
            Some(value) => Ok(Some(value)),
            None => bail!("{name} needs a value"),
        }
    } else {
        Ok(arg.strip_prefix(name).and_then(|r| r.strip_prefix('=')).map(str::to_owned))
    }
}

fn is_arch(value: &str) -> bool {
    ["sm_", "compute_"].iter().any(|prefix| {
        value.strip_prefix(prefix).is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Command> {
        parse(args.iter().map(|s| s.to_string()))
    }

    fn err(args: &[&str]) -> String {
        run(args).unwrap_err().to_string()
    }

    #[test]
    fn download_takes_a_dataset_and_an_optional_dir() {
        let arxiv = datasets::lookup("ogbn-arxiv").unwrap();
        assert_eq!(run(&["download", "ogbn-arxiv"]).unwrap(), Command::Download { dataset: arxiv, dir: None });
        for args in
            [["download", "--dir", "/data", "ogbn-arxiv"].as_slice(), &["download", "ogbn-arxiv", "--dir=/data"]]
        {
            assert_eq!(run(args).unwrap(), Command::Download { dataset: arxiv, dir: Some("/data".into()) });
        }
    }

    #[test]
    fn cluster_actions_parse_with_defaults_and_named_errors() {
        let up = |hosts, ranks, rate: &str| {
            Command::Cluster(Action::Up { hosts, ranks, rate: Rate::parse(rate).unwrap(), cpus: None })
        };
        assert_eq!(run(&["cluster", "up"]).unwrap(), up(4, 1, "1gbit"));
        assert_eq!(run(&["cluster", "up", "--hosts", "2", "--ranks=2", "--rate", "none"]).unwrap(), up(2, 2, "none"));
        let halves = run(&["cluster", "up", "--cpus-per-host", "0.5"]).unwrap();
        let Command::Cluster(Action::Up { cpus: Some(cpus), .. }) = halves else { panic!("{halves:?}") };
        assert_eq!(cpus.cores(), 0.5);
        assert!(err(&["cluster", "up", "--cpus-per-host", "0"]).contains("--cpus-per-host `0`"));
        let command = vec!["halo".to_string(), "train".into()];
        assert_eq!(
            run(&["cluster", "run", "--timeout", "60", "--", "halo", "train"]).unwrap(),
            Command::Cluster(Action::Run { timeout: std::time::Duration::from_secs(60), command })
        );
        assert_eq!(
            run(&["cluster", "link", "halo-h2", "down"]).unwrap(),
            Command::Cluster(Action::Link { host: 2, up: false })
        );
        assert_eq!(run(&["cluster", "down"]).unwrap(), Command::Cluster(Action::Down));
        assert!(err(&["cluster", "up", "--hosts", "0"]).contains("--hosts `0` is not a whole number above 0"));
        assert!(err(&["cluster", "up", "--rate", "fast"]).contains("--rate `fast`"));
        assert!(err(&["cluster", "run"]).contains("missing the command"));
        assert!(err(&["cluster", "link", "x", "down"]).contains("host `x`"));
        assert!(err(&["cluster", "fly"]).contains("unknown action `fly`"));
        assert_eq!(
            run(&["cluster", "faults", "--trials", "3"]).unwrap(),
            Command::Cluster(Action::Faults { halo: "target/debug/halo".into(), trials: 3, seed: 1 })
        );
        assert!(err(&["cluster", "smoke", "--trials", "3"]).contains("unexpected argument `--trials`"));
    }

    #[test]
    fn download_errors_name_the_problem() {
        assert!(err(&["download"]).contains("missing dataset; choose one of: ogbn-arxiv"));
        assert!(err(&["download", "ogbn-foo"]).contains("unknown dataset `ogbn-foo`"));
        assert!(err(&["download", "ogbn-arxiv", "ogbn-products"]).contains("extra argument `ogbn-products`"));
        assert!(err(&["download", "ogbn-arxiv", "--force"]).contains("unknown flag `--force`"));
        assert!(err(&["download", "ogbn-arxiv", "--dir"]).contains("--dir needs a value"));
    }

    #[test]
    fn ptx_defaults_to_sm_80_and_checks_arch() {
        let ptx = |arch: &str, compiler, mode| Command::Ptx { arch: arch.into(), compiler, mode };
        assert_eq!(run(&["ptx"]).unwrap(), ptx("sm_80", Compiler::Nvrtc, Mode::Write));
        assert_eq!(run(&["ptx", "--arch", "sm_90a"]).unwrap(), ptx("sm_90a", Compiler::Nvrtc, Mode::Write));
        assert_eq!(
            run(&["ptx", "--arch=compute_86", "--nvcc"]).unwrap(),
            ptx("compute_86", Compiler::Nvcc, Mode::Write)
        );
        assert_eq!(run(&["ptx", "--check"]).unwrap(), ptx("sm_80", Compiler::Nvrtc, Mode::Check));
        assert_eq!(run(&["gpu-test"]).unwrap(), Command::GpuTest);
        assert!(err(&["gpu-test", "x"]).contains("unexpected argument `x`"));
        assert!(err(&["ptx", "--arch", "90"]).contains("--arch `90`"));
        assert!(err(&["ptx", "--arch", "sm_"]).contains("--arch `sm_`"));
        assert!(err(&["ptx", "extra"]).contains("unexpected argument `extra`"));
    }

    #[test]
    fn gpu_bundle_takes_one_folder() {
        assert_eq!(run(&["gpu-bundle", "/tmp/b"]).unwrap(), Command::GpuBundle { dir: "/tmp/b".into(), base: None });
        let with_base = Command::GpuBundle { dir: "/tmp/b".into(), base: Some("main".into()) };
        assert_eq!(run(&["gpu-bundle", "/tmp/b", "--base", "main"]).unwrap(), with_base);
        assert_eq!(run(&["gpu-bundle", "--base=main", "/tmp/b"]).unwrap(), with_base);
        assert!(err(&["gpu-bundle", "/tmp/b", "--base"]).contains("--base"));
        assert!(err(&["gpu-bundle"]).contains("missing the folder"));
        assert!(err(&["gpu-bundle", "--out"]).contains("unknown flag `--out`"));
        assert!(err(&["gpu-bundle", "a", "b"]).contains("extra argument `b`"));
    }

    #[test]
    fn bench_ab_takes_a_revision_rounds_and_halo_arguments() {
        let want = |rounds, args: &[&str]| Command::BenchAb {
            rev: "0a0df6d".into(),
            rounds,
            halo_args: args.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(
            run(&["bench-ab", "0a0df6d", "--", "train", "--epochs", "2"]).unwrap(),
            want(3, &["train", "--epochs", "2"])
        );
        assert_eq!(run(&["bench-ab", "--rounds=5", "0a0df6d", "--", "train"]).unwrap(), want(5, &["train"]));
        assert!(err(&["bench-ab", "--", "train"]).contains("missing the revision"));
        assert!(err(&["bench-ab", "main"]).contains("missing the workload"));
        assert!(err(&["bench-ab", "main", "--rounds", "0", "--", "train"]).contains("--rounds `0`"));
        assert!(
            err(&["bench-ab", "main", "--epochs", "2"])
                .contains("unknown flag `--epochs` (halo's arguments go after `--`)")
        );
        assert!(err(&["bench-ab", "main", "other", "--", "train"]).contains("extra argument `other`"));
        assert!(err(&["bench-ab", "main", "--", "train", "--report", "x.json"]).contains("drop --report"));
    }

    #[test]
    fn help_and_unknown_commands() {
        assert_eq!(run(&["help"]).unwrap(), Command::Help);
        assert_eq!(run(&["--help"]).unwrap(), Command::Help);
        assert!(err(&[]).contains("missing command"));
        assert!(err(&["build"]).contains("unknown command `build`"));
    }
}
