//! `halo bench comm --backend nccl`: the same all-to-all and all-reduce on GPU buffers through
//! NCCL. Alone, one worker thread per GPU of this host, over a local (thread) communicator;
//! under an MPI launcher, one process per GPU, each on the GPU of its index among its host's
//! ranks, over the MPI communicator. Either way the NCCL communicator is bootstrapped from the
//! host one, which also carries the barriers, timings and ledgers of `measure_with`.

use std::time::Duration;

use comm_hierarchy::LinkModel;

use super::CommArgs;

/// The GPU ordinal of `rank` under MPI: its index among its host's ranks. Without `--hosts`
/// the hosts are the machines (ranks grouped by processor name), so the topology says it;
/// with `--hosts` they are declared and need not be machines, so the launcher's local rank
/// (`comm_hierarchy::launcher_local_rank`, read through `var`) says it.
#[cfg(any(all(feature = "nccl", feature = "mpi"), test))]
fn device_ordinal(
    rank: usize,
    topology: &comm_hierarchy::Topology,
    hosts_declared: bool,
    var: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<usize> {
    if !hosts_declared {
        return Ok(topology.device_of(rank));
    }
    match comm_hierarchy::launcher_local_rank(var) {
        Ok(Some(index)) => Ok(index),
        Ok(None) => anyhow::bail!(
            "rank {rank}: with --hosts the GPU of each rank is its rank on its machine, from {}, none of \
             which is set (launch with Open MPI's or MPICH's mpirun, or omit --hosts to group ranks by \
             processor name)",
            comm_hierarchy::LOCAL_RANK_VARIABLES.join(" or ")
        ),
        Err(e) => anyhow::bail!("rank {rank}: {e}"),
    }
}

/// Fails unless GPU `ordinal` exists on a host with `gpus` of them.
#[cfg(any(all(feature = "nccl", feature = "mpi"), test))]
fn check_ordinal(rank: usize, host: usize, ordinal: usize, gpus: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        ordinal < gpus,
        "rank {rank} is rank {ordinal} of host {host}, which has {gpus} GPUs: NCCL needs one GPU per rank, \
         so start at most {gpus} ranks per host (mpirun -np, --map-by)"
    );
    Ok(())
}

#[cfg(feature = "nccl")]
pub(super) fn run(args: &CommArgs, links: LinkModel, timeout: Duration) -> anyhow::Result<()> {
    use crate::cmd::train::launch::MpiLaunch;

    match MpiLaunch::from_env().filter(|launch| launch.size > 1) {
        Some(launch) => run_mpi(args, links, timeout, &launch),
        None => run_threads(args, links, timeout),
    }
}

/// One worker thread per GPU of this host.
#[cfg(feature = "nccl")]
fn run_threads(args: &CommArgs, links: LinkModel, timeout: Duration) -> anyhow::Result<()> {
    use anyhow::{Context, ensure};
    use comm_hierarchy::nccl::{self, NcclComm};
    use comm_hierarchy::{CommError, Communicator, LocalCluster};

    use super::{Backend, Plan};

    let gpus = nccl::device_count()?;
    let workers = args.workers.unwrap_or(gpus);
    ensure!(workers <= gpus, "--workers {workers}: this host has {gpus} GPUs and NCCL needs one per worker");
    let topology = super::local_topology(args, workers, links)?;
    let plan = Plan { backend: Backend::Nccl, bytes: args.bytes, iterations: args.iterations };
    let mut reports = LocalCluster::run_with_timeout(&topology, timeout, |comm| -> Result<_, CommError> {
        let nccl = NcclComm::on_device(comm, comm.rank())?;
        let mut target = device::DeviceCollectives::new(&nccl, &plan)?;
        super::measure_with(comm, &plan, &mut target)
    })?;
    let report = reports.swap_remove(0).context("rank 0 returned no report")?;
    super::finish(&report, args.report.as_deref())
}

/// One process per GPU, started by an MPI launcher.
#[cfg(all(feature = "nccl", feature = "mpi"))]
fn run_mpi(
    args: &CommArgs,
    links: LinkModel,
    timeout: Duration,
    _: &crate::cmd::train::launch::MpiLaunch,
) -> anyhow::Result<()> {
    use comm_hierarchy::Communicator;
    use comm_hierarchy::nccl::{self, NcclComm};

    super::run_mpi_with(args, links, timeout, super::Backend::Nccl, |comm, plan| {
        let (rank, topology) = (comm.rank(), comm.topology());
        let ordinal = device_ordinal(rank, topology, args.hosts.is_some(), |name| std::env::var(name).ok())?;
        check_ordinal(rank, topology.host_of(rank), ordinal, nccl::device_count()?)?;
        let nccl = NcclComm::on_device(comm, ordinal)?;
        let mut target = device::DeviceCollectives::new(&nccl, plan)?;
        Ok(super::measure_with(comm, plan, &mut target)?)
    })
}

#[cfg(all(feature = "nccl", not(feature = "mpi")))]
fn run_mpi(
    _: &CommArgs,
    _: LinkModel,
    _: Duration,
    launch: &crate::cmd::train::launch::MpiLaunch,
) -> anyhow::Result<()> {
    anyhow::bail!(
        "--backend nccl started by an MPI launcher as {} processes ({}={}), but this halo was built without \
         MPI, so every process would run its own one-GPU-per-thread job; rebuild with --features nccl,mpi",
        launch.size,
        launch.variable,
        launch.size
    )
}

#[cfg(not(feature = "nccl"))]
pub(super) fn run(_: &CommArgs, _: LinkModel, _: Duration) -> anyhow::Result<()> {
    anyhow::bail!("--backend nccl: this halo was built without NCCL support; rebuild with --features nccl")
}

#[cfg(feature = "nccl")]
mod device {
    use comm_hierarchy::nccl::{CudaSlice, NcclComm};
    use comm_hierarchy::{CommError, LedgerSnapshot};

    use super::super::{Collectives, Plan};

    /// Device buffers sized as the host benchmark's (rounded down to whole f32 values).
    pub(super) struct DeviceCollectives<'a> {
        nccl: &'a NcclComm,
        send: Vec<CudaSlice<f32>>,
        recv: Vec<CudaSlice<f32>>,
        values: CudaSlice<f32>,
    }

    impl<'a> DeviceCollectives<'a> {
        pub(super) fn new(nccl: &'a NcclComm, plan: &Plan) -> Result<Self, CommError> {
            let per_pair = plan.bytes / 4;
            let buffers = || (0..nccl.size()).map(|_| nccl.zeros(per_pair)).collect::<Result<Vec<_>, _>>();
            Ok(Self { nccl, send: buffers()?, recv: buffers()?, values: nccl.zeros(per_pair)? })
        }
    }

    impl Collectives for DeviceCollectives<'_> {
        fn ledger(&self) -> LedgerSnapshot {
            self.nccl.ledger()
        }

        fn all_to_all(&mut self) -> Result<(), CommError> {
            self.nccl.all_to_all_f32("bench/all_to_all", &self.send, &mut self.recv)
        }

        fn all_reduce(&mut self) -> Result<(), CommError> {
            self.nccl.all_reduce_sum_f32("bench/all_reduce", &mut self.values)
        }

        fn payload_bytes(&self) -> usize {
            self.values.len() * 4
        }
    }
}

#[cfg(test)]
mod tests {
    use comm_hierarchy::{LinkModel, Topology};

    use super::*;

    /// Hosts grouped by processor name are machines: the ordinal is the rank's place in its
    /// host's block. Declared hosts need not be, so the launcher's local rank decides.
    #[test]
    fn the_gpu_of_a_rank_is_its_index_among_its_hosts_ranks() {
        let topology = Topology::new(2, 4, LinkModel::default()).unwrap();
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let ordinals: Vec<usize> = (0..8).map(|r| device_ordinal(r, &topology, false, env(&[])).unwrap()).collect();
        assert_eq!(ordinals, [0, 1, 2, 3, 0, 1, 2, 3]);
        // Two declared hosts on one machine of 8 GPUs: rank 5 is that machine's sixth rank.
        let open_mpi = env(&[("OMPI_COMM_WORLD_LOCAL_RANK", "5"), ("MPI_LOCALRANKID", "1")]);
        assert_eq!(device_ordinal(5, &topology, true, open_mpi).unwrap(), 5);
        assert_eq!(device_ordinal(5, &topology, true, env(&[("MPI_LOCALRANKID", "5")])).unwrap(), 5);
        let err = device_ordinal(5, &topology, true, env(&[])).unwrap_err().to_string();
        assert!(err.contains("OMPI_COMM_WORLD_LOCAL_RANK") && err.contains("--hosts"), "{err}");
        let bad = env(&[("OMPI_COMM_WORLD_LOCAL_RANK", "five")]);
        let err = device_ordinal(5, &topology, true, bad).unwrap_err().to_string();
        assert!(err.contains("OMPI_COMM_WORLD_LOCAL_RANK=\"five\""), "{err}");
    }

    #[test]
    fn more_ranks_than_gpus_on_a_host_is_refused_naming_the_host() {
        check_ordinal(3, 0, 3, 4).unwrap();
        let err = check_ordinal(6, 1, 2, 2).unwrap_err().to_string();
        assert!(err.contains("host 1") && err.contains("2 GPUs") && err.contains("-np"), "{err}");
    }
}
