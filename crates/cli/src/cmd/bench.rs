//! `halo bench comm`: times all-to-all and all-reduce on a communicator backend and reports
//! the measured throughput next to the traffic ledger and the cost model's projection.
//! `halo bench memory` (`bench/memory.rs`): peak memory per vertex of `halo train` runs.
//!
//! Both commands measure through one `measure_with` over a `Collectives` target: the host
//! communicators, or NCCL on GPU buffers (`bench/nccl.rs`, feature `nccl`); under an MPI launcher
//! the launcher detection of `halo train` applies.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::{Subcommand, ValueEnum};
use comm_hierarchy::{CommError, Communicator, LedgerSnapshot, LinkModel, LocalCluster, PairFit, Topology, cost, wire};
use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Time all-to-all and all-reduce; report throughput, ledger totals and modeled time.
    Comm(CommArgs),
    /// Run `halo train` once per dataset, each in its own process; report the peak resident
    /// memory per vertex next to the estimate.
    Memory(memory::MemoryArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
enum Backend {
    /// One thread per worker in this process.
    Local,
    /// One process per rank under an MPI launcher (`mpirun -np P halo bench comm ...`).
    Mpi,
    /// NCCL on GPU buffers. Alone: one GPU per worker thread of this process (worker `i` on
    /// GPU `i`; --workers defaults to every GPU). Under an MPI launcher (`mpirun -np P halo
    /// bench comm --backend nccl`): one process per GPU, each on the GPU of its index among
    /// its host's ranks. Needs a build with `--features nccl` (and `mpi` under mpirun).
    Nccl,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Mpi => "mpi",
            Backend::Nccl => "nccl",
        }
    }
}

mod memory;
mod nccl;

#[derive(Debug, clap::Args)]
struct CommArgs {
    /// Communicator backend.
    #[arg(long, value_enum, default_value_t = Backend::Local)]
    backend: Backend,
    /// Number of workers [local default: 4]. Under MPI the world size is the worker count;
    /// if given, it must match.
    #[arg(long)]
    workers: Option<usize>,
    /// Hosts the workers are spread over, in equal blocks [local default: 1]. Under MPI,
    /// omit it to group ranks by processor name.
    #[arg(long)]
    hosts: Option<usize>,
    /// Bytes every worker sends every other worker in one all-to-all; also the all-reduce
    /// payload (rounded down to whole f32 values).
    #[arg(long, default_value_t = 1 << 20)]
    bytes: usize,
    /// Timed repetitions of each collective.
    #[arg(long, default_value_t = 5)]
    iterations: usize,
    /// TOML file with `[intra]` / `[inter]` link tables (`bandwidth_gb_s`, `latency_us`) for
    /// the cost model; defaults are CDFGNN's measured links.
    #[arg(long)]
    links: Option<PathBuf>,
    /// Seconds a worker waits for a peer before failing.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    /// Write the JSON report here (rank 0 writes it under MPI).
    #[arg(long)]
    report: Option<PathBuf>,
}

/// Message sizes of the per-pair link fit (MPI only), 1 KiB to 4 MiB.
const FIT_SIZES: [usize; 7] = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22];
const FIT_REPETITIONS: usize = 3;

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Comm(args) => run_comm(args),
        BenchCommand::Memory(args) => memory::run(args),
    }
}

fn run_comm(args: CommArgs) -> anyhow::Result<()> {
    ensure!(args.iterations >= 1, "--iterations must be at least 1");
    if let Some(path) = &args.report {
        super::output::check_writable(path, "--report")?;
    }
    let links = match &args.links {
        Some(path) => LinkModel::from_toml_file(path)?,
        None => LinkModel::default(),
    };
    let timeout = Duration::from_secs(args.timeout_s);
    match args.backend {
        Backend::Local => run_local(&args, links, timeout),
        Backend::Mpi => run_mpi(&args, links, timeout),
        Backend::Nccl => nccl::run(&args, links, timeout),
    }
}

/// The topology of `workers` threads on `--hosts` hosts.
fn local_topology(args: &CommArgs, workers: usize, links: LinkModel) -> anyhow::Result<Topology> {
    let hosts = args.hosts.unwrap_or(1);
    ensure!(workers >= 1, "--workers must be at least 1");
    ensure!(hosts >= 1, "--hosts must be at least 1");
    ensure!(workers.is_multiple_of(hosts), "--workers {workers} is not divisible by --hosts {hosts}");
    Ok(Topology::for_workers(workers, hosts, links)?)
}

fn run_local(args: &CommArgs, links: LinkModel, timeout: Duration) -> anyhow::Result<()> {
    let topology = local_topology(args, args.workers.unwrap_or(4), links)?;
    let plan = Plan { backend: Backend::Local, bytes: args.bytes, iterations: args.iterations };
    let mut reports = LocalCluster::run_with_timeout(&topology, timeout, |comm| measure(comm, &plan))?;
    let report = reports.swap_remove(0).context("rank 0 returned no report")?;
    finish(&report, args.report.as_deref())
}

#[cfg(feature = "mpi")]
fn run_mpi(args: &CommArgs, links: LinkModel, timeout: Duration) -> anyhow::Result<()> {
    run_mpi_with(args, links, timeout, Backend::Mpi, |comm, plan| Ok(measure(comm, plan)?))
}

/// One rank of `backend`'s benchmark under an MPI launcher: `rank_measure` runs this rank's
/// share with the MPI communicator (barriers, timings, ledgers); rank 0 writes the report.
#[cfg(feature = "mpi")]
fn run_mpi_with(
    args: &CommArgs,
    links: LinkModel,
    timeout: Duration,
    backend: Backend,
    rank_measure: impl FnOnce(&comm_hierarchy::mpi_backend::MpiCommunicator, &Plan) -> anyhow::Result<Option<Report>>,
) -> anyhow::Result<()> {
    use comm_hierarchy::mpi_backend::{self, MpiOptions};

    let options = MpiOptions { hosts: args.hosts, links, timeout, fault: None };
    let plan = Plan { backend, bytes: args.bytes, iterations: args.iterations };
    mpi_backend::run(&options, |comm| -> anyhow::Result<()> {
        if let Some(workers) = args.workers {
            ensure!(workers == comm.size(), "--workers {workers} does not match the MPI world size {}", comm.size());
        }
        match rank_measure(&comm, &plan)? {
            Some(report) => finish(&report, args.report.as_deref()),
            None => Ok(()),
        }
    })
    .with_context(|| match args.hosts {
        Some(hosts) => format!("cannot place the MPI ranks on --hosts {hosts}"),
        None => "cannot group the MPI ranks into hosts by processor name (pass --hosts)".to_owned(),
    })
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &CommArgs, _: LinkModel, _: Duration) -> anyhow::Result<()> {
    anyhow::bail!(
        "--backend mpi: this halo was built without MPI support; install a build with it: cargo install --path crates/cli --features mpi"
    )
}

/// What every rank measures. Per-pair link fits are measured under MPI only: between
/// threads they would time memory copies, not links.
struct Plan {
    backend: Backend,
    bytes: usize,
    iterations: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    backend: Backend,
    workers: usize,
    hosts: usize,
    devices_per_host: usize,
    bytes: usize,
    iterations: usize,
    topology: Topology,
    /// The cost model behind every `modeled_s` ([`cost::MODEL`]).
    cost_model: &'static str,
    all_to_all: AllToAllReport,
    all_reduce: AllReduceReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    link_fits: Option<Vec<PairFit>>,
}

/// Ledger and cost-model figures of one call, merged over all ranks.
#[derive(Debug, Serialize)]
struct CallFigures {
    bytes_intra: u64,
    bytes_inter: u64,
    messages: u64,
    modeled_s: f64,
}

/// Wall-clock seconds of one call: the slowest rank per repetition, then over repetitions.
#[derive(Debug, Serialize)]
struct Timing {
    mean_s: f64,
    min_s: f64,
    max_s: f64,
}

#[derive(Debug, Serialize)]
struct AllToAllReport {
    #[serde(flatten)]
    figures: CallFigures,
    measured: Timing,
    /// The same call modeled on the links the probe fitted (MPI only): the measured time over
    /// it checks the link model on these links.
    #[serde(skip_serializing_if = "Option::is_none")]
    modeled_on_fits_s: Option<f64>,
    /// Bytes moved between distinct workers per second, all workers together (GB/s).
    throughput_gb_s: f64,
}

#[derive(Debug, Serialize)]
struct AllReduceReport {
    payload_bytes: usize,
    #[serde(flatten)]
    figures: CallFigures,
    measured: Timing,
    /// Payload per second (GB/s).
    algbw_gb_s: f64,
    /// `algbw * 2 (P - 1) / P`, the per-link rate of a ring all-reduce (GB/s).
    busbw_gb_s: f64,
}

/// The two timed collectives on one backend, with their buffers made up front so that timed
/// calls do not include building the payload.
trait Collectives {
    /// Ledger of the calls so far (this rank).
    fn ledger(&self) -> LedgerSnapshot;
    fn all_to_all(&mut self) -> Result<(), CommError>;
    fn all_reduce(&mut self) -> Result<(), CommError>;
    /// Bytes of one all-reduce.
    fn payload_bytes(&self) -> usize;
}

/// The host backends: byte blocks through [`Communicator::all_to_all_v`].
struct HostCollectives<'a> {
    comm: &'a dyn Communicator,
    /// One send set per remaining all-to-all call, so no call times copying its payload.
    inputs: Vec<Vec<Vec<u8>>>,
    values: Vec<f32>,
}

impl<'a> HostCollectives<'a> {
    fn new(comm: &'a dyn Communicator, plan: &Plan) -> Self {
        let (rank, size) = (comm.rank(), comm.size());
        let blocks: Vec<Vec<u8>> = (0..size).map(|dst| vec![(rank * size + dst) as u8; plan.bytes]).collect();
        Self { comm, inputs: vec![blocks; plan.iterations + 1], values: vec![rank as f32; plan.bytes / 4] }
    }
}

impl Collectives for HostCollectives<'_> {
    fn ledger(&self) -> LedgerSnapshot {
        self.comm.ledger()
    }

    fn all_to_all(&mut self) -> Result<(), CommError> {
        let send = self.inputs.pop().unwrap_or_default();
        self.comm.all_to_all_v("bench/all_to_all", send).map(drop)
    }

    fn all_reduce(&mut self) -> Result<(), CommError> {
        self.comm.all_reduce_sum_f32("bench/all_reduce", &mut self.values)
    }

    fn payload_bytes(&self) -> usize {
        self.values.len() * 4
    }
}

/// Runs the benchmark on one rank over a host backend; rank 0 returns the report.
fn measure(comm: &dyn Communicator, plan: &Plan) -> Result<Option<Report>, CommError> {
    measure_with(comm, plan, &mut HostCollectives::new(comm, plan))
}

/// Runs the benchmark of `target`, with `comm` (the host communicator) for barriers, timings
/// and ledgers; rank 0 returns the report.
fn measure_with(
    comm: &dyn Communicator,
    plan: &Plan,
    target: &mut dyn Collectives,
) -> Result<Option<Report>, CommError> {
    let size = comm.size();
    let a2a_figures = figures_of(comm, target, |t| t.all_to_all())?;
    let a2a_times = time_call(comm, plan.iterations, target, |t| t.all_to_all())?;
    let reduce_figures = figures_of(comm, target, |t| t.all_reduce())?;
    let reduce_times = time_call(comm, plan.iterations, target, |t| t.all_reduce())?;

    let link_fits = if plan.backend == Backend::Mpi {
        comm_hierarchy::probe_links(comm, "bench/probe", &FIT_SIZES, FIT_REPETITIONS)?
    } else {
        None
    };
    let (Some((a2a_figures, a2a_merged)), Some(a2a_times), Some((reduce_figures, _)), Some(reduce_times)) =
        (a2a_figures, a2a_times, reduce_figures, reduce_times)
    else {
        return Ok(None);
    };

    let t = comm.topology();
    // Fits whose links a topology refuses (a zero bandwidth) give no figure.
    let modeled_on_fits_s = link_fits.as_ref().and_then(|fits| {
        let links = comm_hierarchy::measured_links(*t.links(), fits);
        let fitted = Topology::new(t.hosts(), t.devices_per_host(), links).ok()?;
        Some(cost::model(&fitted, &a2a_merged).total_s)
    });
    let pair_bytes = (size * size.saturating_sub(1) * plan.bytes) as f64;
    let payload_bytes = target.payload_bytes();
    let algbw = payload_bytes as f64 / reduce_times.mean_s / 1e9;
    Ok(Some(Report {
        backend: plan.backend,
        workers: size,
        hosts: t.hosts(),
        devices_per_host: t.devices_per_host(),
        bytes: plan.bytes,
        iterations: plan.iterations,
        topology: t.clone(),
        cost_model: cost::MODEL,
        all_to_all: AllToAllReport {
            figures: a2a_figures,
            modeled_on_fits_s,
            throughput_gb_s: pair_bytes / a2a_times.mean_s / 1e9,
            measured: a2a_times,
        },
        all_reduce: AllReduceReport {
            payload_bytes,
            figures: reduce_figures,
            measured: reduce_times,
            algbw_gb_s: algbw,
            busbw_gb_s: algbw * 2.0 * (size - 1) as f64 / size as f64,
        },
        link_fits,
    }))
}

/// Runs `call` once and returns, on rank 0, the merged ledger figures of that one call and the
/// merged ledger itself.
fn figures_of(
    comm: &dyn Communicator,
    target: &mut dyn Collectives,
    call: impl FnOnce(&mut dyn Collectives) -> Result<(), CommError>,
) -> Result<Option<(CallFigures, LedgerSnapshot)>, CommError> {
    let before = target.ledger();
    call(target)?;
    let delta = target.ledger().delta_since(&before)?;
    Ok(comm.gather_ledger(0, &delta)?.map(|merged| {
        let totals = merged.totals();
        let figures = CallFigures {
            bytes_intra: totals.bytes_intra,
            bytes_inter: totals.bytes_inter,
            messages: totals.messages(),
            modeled_s: cost::model(comm.topology(), &merged).total_s,
        };
        (figures, merged)
    }))
}

/// Times `iterations` calls, each started together after a barrier; returns, on rank 0, the
/// slowest rank's time per call summarised over the calls.
fn time_call(
    comm: &dyn Communicator,
    iterations: usize,
    target: &mut dyn Collectives,
    mut call: impl FnMut(&mut dyn Collectives) -> Result<(), CommError>,
) -> Result<Option<Timing>, CommError> {
    let mut seconds = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        comm.barrier("bench/sync")?;
        let start = Instant::now();
        call(target)?;
        seconds.push(start.elapsed().as_secs_f64());
    }
    let Some(all) = comm.gather("bench/timing", 0, wire::encode(&seconds))? else {
        return Ok(None);
    };
    let mut slowest = vec![0.0f64; iterations];
    for (src, bytes) in all.iter().enumerate() {
        let mut times = vec![0.0f64; iterations];
        wire::decode_into(bytes, &mut times).map_err(|e| CommError::Malformed {
            phase: "bench/timing".into(),
            peer: src,
            detail: e.to_string(),
        })?;
        slowest.iter_mut().zip(times).for_each(|(s, t)| *s = s.max(t));
    }
    Ok(Some(Timing {
        mean_s: slowest.iter().sum::<f64>() / iterations as f64,
        min_s: slowest.iter().copied().fold(f64::INFINITY, f64::min),
        max_s: slowest.iter().copied().fold(0.0, f64::max),
    }))
}

/// Prints the summary and writes the JSON report.
fn finish(report: &Report, path: Option<&Path>) -> anyhow::Result<()> {
    let (a, r) = (&report.all_to_all, &report.all_reduce);
    println!(
        "halo bench comm: {} backend, {} workers on {} hosts, {} bytes per pair, {} iterations",
        report.backend.name(),
        report.workers,
        report.hosts,
        report.bytes,
        report.iterations
    );
    println!(
        "all-to-all: {} B intra-host + {} B inter-host in {} messages; modeled {:.3} ms; measured {:.3} ms ({:.2} GB/s)",
        a.figures.bytes_intra,
        a.figures.bytes_inter,
        a.figures.messages,
        a.figures.modeled_s * 1e3,
        a.measured.mean_s * 1e3,
        a.throughput_gb_s
    );
    println!(
        "all-reduce: {} B payload; {} B intra-host + {} B inter-host moved; modeled {:.3} ms; measured {:.3} ms ({:.2} GB/s algbw)",
        r.payload_bytes,
        r.figures.bytes_intra,
        r.figures.bytes_inter,
        r.figures.modeled_s * 1e3,
        r.measured.mean_s * 1e3,
        r.algbw_gb_s
    );
    if let Some(fitted) = a.modeled_on_fits_s {
        println!(
            "all-to-all on the fitted links: modeled {:.3} ms; measured / modeled {:.2} (a check of the link model that `--links` prices with)",
            fitted * 1e3,
            a.measured.mean_s / fitted
        );
    }
    if let Some(fits) = &report.link_fits {
        for f in fits {
            println!(
                "link {} -> {} ({}): time = {:.3e} s/MB * MB + {:.3e} s (r2 {:.3})",
                f.src, f.dst, f.link, f.fit.theta_s_per_mb, f.fit.gamma_s, f.fit.r_squared
            );
        }
    }
    if let Some(path) = path {
        let json = serde_json::to_string_pretty(report)?;
        super::output::write_atomically(path, &(json + "\n"), "--report")?;
    }
    Ok(())
}
