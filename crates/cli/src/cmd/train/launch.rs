//! The mpirun trap: `mpirun -np 4 halo train --method vanilla` without `--backend mpi` would run
//! four independent local jobs that all write the same report. A process started by an MPI
//! launcher is spotted from the variables the launcher sets, and either switched to the MPI
//! backend (when this build has it; `--backend nccl` to `mpi-nccl`, NCCL across the processes)
//! or stopped with the command that builds it.

use anyhow::bail;
use trainer::config::{Backend, TrainConfig};
use trainer::plan;

use super::device::MPI_BUILD;

/// Variables holding the world size: Open MPI; MPICH, Intel MPI and Slurm's `srun --mpi=pmi2`
/// (PMI); MPICH's Hydra (ranks on this node, which also tells a launch apart).
const SIZE_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"];

/// A process started by an MPI launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiLaunch {
    /// The variable the world size was read from, for messages.
    pub variable: &'static str,
    /// Processes the launcher started.
    pub size: usize,
    /// This process's rank, when the launcher says.
    pub rank: Option<usize>,
}

impl MpiLaunch {
    /// The launch this process belongs to, if any.
    pub fn from_env() -> Option<Self> {
        Self::detect(|name| std::env::var(name).ok())
    }

    fn detect(var: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let number = |name: &str| var(name).and_then(|v| v.trim().parse::<usize>().ok());
        let (variable, size) = SIZE_VARIABLES.into_iter().find_map(|name| Some((name, number(name)?)))?;
        let rank = comm_hierarchy::local_rank::WORLD_RANK_VARIABLES.into_iter().find_map(number);
        Some(Self { variable, size, rank })
    }

    /// Whether this process writes the run's files: rank 0 reports for every rank.
    pub fn is_root(&self) -> bool {
        self.rank.is_none_or(|rank| rank == 0)
    }
}

/// The backend a run started by `launch` must use, when it differs from the configured one.
///
/// A launch of one process changes nothing. Otherwise the method must split the graph, this
/// build must have MPI (`mpi_built`), and the backend must be MPI: chosen with `--backend mpi`
/// (or `mpi-nccl`), or switched to here when `backend_flag` is not `--backend local` (a `backend`
/// key in a config file cannot be told from the default and is switched too); `--backend nccl`
/// becomes `mpi-nccl`: the processes sum their gradients by NCCL, one GPU each.
pub fn backend_for(
    launch: Option<&MpiLaunch>,
    config: &TrainConfig,
    backend_flag: Option<Backend>,
    mpi_built: bool,
) -> anyhow::Result<Option<Backend>> {
    let Some(launch) = launch.filter(|l| l.size > 1) else { return Ok(None) };
    let started =
        format!("started by an MPI launcher as {} processes ({}={})", launch.size, launch.variable, launch.size);
    let method = config.method.name;
    if plan::in_one_process(config) {
        bail!(
            "{started}, but --method {} trains in one process: every process would run the same job and \
             write the same report; use a distributed method (e.g. --method vanilla) or run halo without mpirun",
            method.as_str()
        );
    }
    if !mpi_built {
        bail!(
            "{started}, but this halo was built without MPI, so every process would run its own \
             {}-worker job; install a build with MPI (`{MPI_BUILD}`, which replaces the `halo` on the PATH) \
             and run it under mpirun",
            config.distributed.workers
        );
    }
    match (config.distributed.backend, backend_flag) {
        (Backend::Mpi | Backend::MpiNccl, _) => Ok(None),
        (Backend::Local, Some(Backend::Local)) => bail!(
            "{started}, but --backend local runs a whole job in every process; drop --backend local to \
             train one worker per process"
        ),
        (Backend::Local, _) => Ok(Some(Backend::Mpi)),
        (Backend::Nccl, _) => Ok(Some(Backend::MpiNccl)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainer::config::Method;

    fn launch(vars: &[(&str, &str)]) -> Option<MpiLaunch> {
        MpiLaunch::detect(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
    }

    fn vanilla() -> TrainConfig {
        let mut config = TrainConfig::default();
        config.method.name = Method::Vanilla;
        config
    }

    #[test]
    fn every_launcher_is_recognised_with_its_rank() {
        assert_eq!(launch(&[]), None);
        assert_eq!(launch(&[("OMPI_COMM_WORLD_RANK", "1")]), None, "a rank alone is no launch");
        let open_mpi = launch(&[("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "2")]).unwrap();
        assert_eq!(open_mpi, MpiLaunch { variable: "OMPI_COMM_WORLD_SIZE", size: 4, rank: Some(2) });
        assert!(!open_mpi.is_root());
        let pmi = launch(&[("PMI_SIZE", "8"), ("PMI_RANK", "0")]).unwrap();
        assert_eq!((pmi.variable, pmi.size, pmi.rank), ("PMI_SIZE", 8, Some(0)));
        assert!(pmi.is_root());
        let hydra = launch(&[("MPI_LOCALNRANKS", "2")]).unwrap();
        assert_eq!((hydra.size, hydra.rank), (2, None));
        assert!(hydra.is_root(), "without a rank the process writes, as before");
        assert_eq!(launch(&[("PMI_SIZE", "many")]), None, "garbage is no launch");
    }

    #[test]
    fn a_launch_of_one_process_changes_nothing() {
        let one = launch(&[("PMI_SIZE", "1")]);
        assert_eq!(backend_for(one.as_ref(), &TrainConfig::default(), None, false).unwrap(), None);
        assert_eq!(backend_for(None, &vanilla(), None, false).unwrap(), None);
    }

    #[test]
    fn a_multi_process_launch_switches_to_mpi_or_says_how_to_build_it() {
        let four = launch(&[("OMPI_COMM_WORLD_SIZE", "4")]);
        let four = four.as_ref();
        assert_eq!(backend_for(four, &vanilla(), None, true).unwrap(), Some(Backend::Mpi));
        let mut mpi = vanilla();
        mpi.distributed.backend = Backend::Mpi;
        assert_eq!(backend_for(four, &mpi, Some(Backend::Mpi), true).unwrap(), None);
        let err = backend_for(four, &vanilla(), None, false).unwrap_err().to_string();
        assert!(err.contains("OMPI_COMM_WORLD_SIZE=4") && err.contains(MPI_BUILD), "{err}");
        let err = backend_for(four, &vanilla(), Some(Backend::Local), true).unwrap_err().to_string();
        assert!(err.contains("--backend local"), "{err}");
        let err = backend_for(four, &TrainConfig::default(), None, true).unwrap_err().to_string();
        assert!(err.contains("--method single trains in one process"), "{err}");
    }

    /// `--backend nccl` under a launcher sums the processes' gradients by NCCL: `mpi-nccl`,
    /// which a launch keeps; a build without MPI is refused as for any launch.
    #[test]
    fn nccl_under_a_launcher_becomes_mpi_nccl() {
        let four = launch(&[("OMPI_COMM_WORLD_SIZE", "4")]);
        let mut nccl = vanilla();
        nccl.distributed.backend = Backend::Nccl;
        assert_eq!(backend_for(four.as_ref(), &nccl, Some(Backend::Nccl), true).unwrap(), Some(Backend::MpiNccl));
        let err = backend_for(four.as_ref(), &nccl, Some(Backend::Nccl), false).unwrap_err().to_string();
        assert!(err.contains(MPI_BUILD), "{err}");
        nccl.distributed.backend = Backend::MpiNccl;
        assert_eq!(backend_for(four.as_ref(), &nccl, Some(Backend::MpiNccl), true).unwrap(), None);
    }
}
