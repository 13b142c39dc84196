//! A rank's index among the ranks of its machine, as its MPI launcher states it: what picks a
//! rank's GPU wherever ranks on one machine share its GPUs (`halo bench comm --backend nccl`,
//! the trainer's device workers).

use thiserror::Error;

/// Variables holding a rank's index in the whole job: Open MPI, MPICH and Intel MPI (PMI),
/// PMIx launchers (Slurm's `srun --mpi=pmix`).
pub const WORLD_RANK_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"];

/// Variables holding a rank's index among the ranks of its machine: Open MPI's, MPICH's Hydra's.
pub const LOCAL_RANK_VARIABLES: [&str; 2] = ["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"];

/// A launcher variable that holds no rank.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{variable}={value:?} is not a local rank")]
pub struct LocalRankError {
    /// The variable, one of [`LOCAL_RANK_VARIABLES`].
    pub variable: &'static str,
    /// What it held.
    pub value: String,
}

/// The launcher's local rank, read through `var` from the first of [`LOCAL_RANK_VARIABLES`]
/// that is set; `None` when none is (no MPI launcher, or one that does not say).
pub fn launcher_local_rank(var: impl Fn(&str) -> Option<String>) -> Result<Option<usize>, LocalRankError> {
    match LOCAL_RANK_VARIABLES.into_iter().find_map(|name| Some((name, var(name)?))) {
        Some((variable, value)) => match value.trim().parse() {
            Ok(index) => Ok(Some(index)),
            Err(_) => Err(LocalRankError { variable, value }),
        },
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    /// Open MPI's variable wins over MPICH's; neither set is no local rank; a non-number names
    /// its variable and value.
    #[test]
    fn the_first_set_variable_gives_the_local_rank() {
        assert_eq!(launcher_local_rank(env(&[])).unwrap(), None);
        let both = env(&[("OMPI_COMM_WORLD_LOCAL_RANK", " 5 "), ("MPI_LOCALRANKID", "1")]);
        assert_eq!(launcher_local_rank(both).unwrap(), Some(5));
        assert_eq!(launcher_local_rank(env(&[("MPI_LOCALRANKID", "2")])).unwrap(), Some(2));
        let err = launcher_local_rank(env(&[("MPI_LOCALRANKID", "x")])).unwrap_err();
        assert_eq!(err, LocalRankError { variable: "MPI_LOCALRANKID", value: "x".to_string() });
        assert_eq!(err.to_string(), "MPI_LOCALRANKID=\"x\" is not a local rank");
    }
}
