//! A worker's GPU: placed by its local index (`placement`), and opened once the workers that
//! share it are known to fit in its free memory; under `backend = "nccl"` joined to the other
//! workers' GPUs by NCCL, one worker per GPU, which sums their gradients and carries the
//! messages of their exchange calls on the device's rows.

use gnn_core::gpu::Device;
use gnn_core::gpu::footprint::Footprint;

use super::{Rank, placement};
use crate::error::{DistError, TrainError};
use crate::memory::device::{self, GpuClaim};
use crate::report::DeviceSummary;

/// A worker's GPU: its device (its own stream) and what the memory check before upload found.
pub(crate) struct Gpu {
    /// Under `backend = "nccl"` joined to the other workers' devices by NCCL
    /// (`Device::join_peers`), which sums their gradients and carries their exchanges'
    /// messages.
    pub(crate) dev: Device,
    /// `final.device` but the peak, which is read at the end.
    summary: DeviceSummary,
}

/// Joins `dev` to the other workers' devices by NCCL: a collective over `comm` (rank 0's id
/// broadcast under `nccl-init`).
#[cfg(feature = "nccl")]
fn join(comm: &dyn comm_hierarchy::Communicator, dev: &Device) -> Result<(), TrainError> {
    Ok(dev.join_peers(comm)?)
}

#[cfg(not(feature = "nccl"))]
fn join(_comm: &dyn comm_hierarchy::Communicator, _dev: &Device) -> Result<(), TrainError> {
    Err(TrainError::NoNccl)
}

impl Gpu {
    /// GPU `ordinal` for a run of one process that needs `footprint`, once it is known to fit
    /// in the GPU's free memory.
    pub(crate) fn alone(ordinal: usize, footprint: Footprint) -> Result<Self, TrainError> {
        let dev = Device::new(ordinal)?;
        let memory = dev.memory()?;
        device::check(ordinal, 1, footprint, memory.free)?;
        dev.reset_peak()?;
        let summary = DeviceSummary {
            ordinal,
            estimated_gpu_bytes: footprint.total(),
            free_gpu_bytes: memory.free,
            total_gpu_bytes: memory.total,
            peak_gpu_bytes: 0,
        };
        Ok(Self { dev, summary })
    }

    /// `final.device`: the GPU, the estimate of every worker on it, its free and total memory
    /// before upload, and the pool's peak so far.
    pub(crate) fn summary(&self) -> Result<DeviceSummary, TrainError> {
        Ok(DeviceSummary { peak_gpu_bytes: self.dev.peak_bytes()?, ..self.summary })
    }
}

/// The GPU of worker `rank` (`placement::worker_gpu` of its local index), with its own stream,
/// once the workers sharing it are known to fit in its free memory: every worker's
/// `footprint` goes to every worker by one all-reduce under `memory`, read after each has read
/// its GPU's free memory and before any uploads.
pub(crate) fn open(rank: &Rank<'_>, footprint: Footprint) -> Result<Gpu, TrainError> {
    if !cfg!(feature = "cuda") {
        return Err(TrainError::NoCuda);
    }
    let (comm, clock, config) = (rank.comm, &rank.clock, rank.config());
    let index = placement::local_index(comm.rank(), comm.topology(), rank.backend(), |name| std::env::var(name).ok())?;
    let ordinal = placement::worker_gpu(config.device, index, Device::count()?)?;
    let dev = Device::new(ordinal)?;
    // Read before this worker uploads, and (the all-reduce below is a barrier) before any does.
    let memory = dev.memory()?;
    dev.reset_peak()?;
    // In process every worker is on this machine. An MPI rank's machine is the one it runs
    // on, by name: hosts declared with --hosts may share a machine, and its GPUs.
    let machine = match (rank.backend().in_process(), this_machine()) {
        (true, _) => 0,
        (false, Some(name)) => machine_key(&name),
        (false, None) => comm.topology().host_of(comm.rank()),
    };
    const FIELDS: usize = 4;
    let mut table = vec![0.0f64; comm.size() * FIELDS];
    table[comm.rank() * FIELDS..][..FIELDS].copy_from_slice(&[
        machine as f64,
        ordinal as f64,
        footprint.resident as f64,
        footprint.step as f64,
    ]);
    clock.call(|| comm.all_reduce_sum_f64("memory", &mut table)).map_err(DistError::from)?;
    let claims: Vec<GpuClaim> = table
        .chunks_exact(FIELDS)
        .map(|w| GpuClaim {
            machine: w[0] as usize,
            ordinal: w[1] as usize,
            footprint: Footprint { resident: w[2] as u64, step: w[3] as u64 },
        })
        .collect();
    // NCCL takes one rank per GPU. Every worker sees every claim, so all refuse together (none
    // is left waiting for the others in NCCL's set-up).
    if rank.backend().nccl()
        && let Some((ordinal, workers)) = crowded_gpu(&claims)
    {
        return Err(TrainError::NcclSharedGpu { ordinal, workers, visible: Device::count()? });
    }
    let (workers, on_gpu) = device::shared_gpu(&claims, comm.rank());
    device::check(ordinal, workers, on_gpu, memory.free)?;
    // A collective that blocks until every worker joins: a call, so a worker waiting in it
    // gives up the compute gate.
    if rank.backend().nccl() {
        clock.call(|| join(comm, &dev))?;
    }
    let summary = DeviceSummary {
        ordinal,
        estimated_gpu_bytes: on_gpu.total(),
        free_gpu_bytes: memory.free,
        total_gpu_bytes: memory.total,
        peak_gpu_bytes: 0,
    };
    Ok(Gpu { dev, summary })
}

/// The first GPU that more than one worker claims, with their number.
fn crowded_gpu(claims: &[GpuClaim]) -> Option<(usize, usize)> {
    claims.iter().find_map(|c| {
        let on_it = claims.iter().filter(|d| (d.machine, d.ordinal) == (c.machine, c.ordinal)).count();
        (on_it > 1).then_some((c.ordinal, on_it))
    })
}

/// This machine's host name (Linux: `/proc/sys/kernel/hostname`), where it can be read.
fn this_machine() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

/// A machine's key in the memory all-reduce: the 32-bit FNV-1a hash of its name, which an f64
/// carries exactly.
fn machine_key(name: &str) -> usize {
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    hash as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU two workers of one machine claim is crowded; the same ordinal on two machines is not.
    #[test]
    fn a_gpu_claimed_twice_on_one_machine_is_crowded() {
        let claim = |machine, ordinal| GpuClaim { machine, ordinal, footprint: Footprint { resident: 1, step: 1 } };
        assert_eq!(crowded_gpu(&[claim(0, 0), claim(0, 1), claim(1, 0)]), None);
        assert_eq!(crowded_gpu(&[claim(0, 0), claim(0, 1), claim(0, 1), claim(0, 1)]), Some((1, 3)));
    }

    /// Ranks on one machine share its key whatever hosts they were declared on; another name is
    /// another key; every key survives the f64 all-reduce.
    #[test]
    fn a_machine_is_keyed_by_its_name() {
        let name = this_machine().expect("Linux names its host");
        assert_eq!(machine_key(&name), machine_key(&name.clone()));
        assert_ne!(machine_key("node-a"), machine_key("node-b"));
        for key in [machine_key(&name), machine_key("node-a"), machine_key("")] {
            assert_eq!(key as f64 as usize, key);
        }
        // Two ranks declared on two hosts of this machine claim the same GPU.
        let claim = |machine| GpuClaim { machine, ordinal: 0, footprint: Footprint { resident: 10, step: 1 } };
        let claims = [claim(machine_key(&name)), claim(machine_key(&name)), claim(machine_key("elsewhere"))];
        let (workers, sum) = device::shared_gpu(&claims, 0);
        assert_eq!((workers, sum), (2, Footprint { resident: 20, step: 2 }));
    }
}
