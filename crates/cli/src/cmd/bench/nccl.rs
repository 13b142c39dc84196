//! `halo bench comm --backend nccl`: the same all-to-all and all-reduce on GPU buffers through
//! NCCL, one worker thread per GPU of this host; barriers, timings and ledgers go over the
//! local (thread) communicator the NCCL one is bootstrapped from.

use std::time::Duration;

use comm_hierarchy::LinkModel;

use super::CommArgs;

#[cfg(feature = "nccl")]
pub(super) fn run(args: &CommArgs, links: LinkModel, timeout: Duration) -> anyhow::Result<()> {
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
