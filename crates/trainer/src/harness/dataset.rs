//! How each rank of a [`Cluster`] run gets the dataset. In process it is loaded once, before
//! any worker starts (so the job can be checked against it first); MPI ranks load their own.

use std::borrow::Cow;
use std::sync::{Mutex, PoisonError};

use graph_partition::Dataset;

use super::cluster::Cluster;
use crate::config::TrainConfig;
use crate::data::Source;
use crate::error::TrainError;

/// The dataset of a cluster run, as its ranks get it ([`RankData::get`]).
pub(crate) struct RankData<'a> {
    config: &'a TrainConfig,
    held: Held<'a>,
}

/// Where the dataset is until a rank asks for it.
enum Held<'a> {
    /// In process: one copy, which every rank that asks borrows.
    Shared(Cow<'a, Dataset>),
    /// In process: one copy, which rank 0 alone takes (and can drop once it has handed out
    /// the workers' shares).
    Root(Mutex<Option<Cow<'a, Dataset>>>),
    /// MPI: every rank that asks loads its own.
    PerRank(Source<'a>),
}

impl<'a> RankData<'a> {
    /// A dataset any rank of `cluster` may ask for; `progress`: whether loading it in process
    /// shows progress.
    pub(crate) fn shared(cluster: &Cluster<'a>, progress: bool) -> Result<Self, TrainError> {
        let (config, source) = (cluster.config(), cluster.source());
        let held = match cluster.backend().in_process() {
            true => Held::Shared(source.dataset(config, progress)?),
            false => Held::PerRank(source),
        };
        Ok(Self { config, held })
    }

    /// A dataset that rank 0 of `cluster` alone asks for, once. In process, `check` sees it
    /// before any worker starts.
    pub(crate) fn handed_to_root(
        cluster: &Cluster<'a>,
        progress: bool,
        check: impl FnOnce(&Dataset) -> Result<(), TrainError>,
    ) -> Result<Self, TrainError> {
        let (config, source) = (cluster.config(), cluster.source());
        let held = match cluster.backend().in_process() {
            true => {
                let dataset = source.dataset(config, progress)?;
                check(&dataset)?;
                Held::Root(Mutex::new(Some(dataset)))
            }
            false => Held::PerRank(source),
        };
        Ok(Self { config, held })
    }

    /// The dataset, for a rank allowed to ask; `progress`: whether loading it shows progress.
    pub(crate) fn get(&self, progress: bool) -> Result<Cow<'_, Dataset>, TrainError> {
        Ok(match &self.held {
            Held::Shared(dataset) => Cow::Borrowed(&**dataset),
            Held::Root(holder) => {
                let taken = holder.lock().unwrap_or_else(PoisonError::into_inner).take();
                taken.expect("rank 0 takes the loaded dataset once")
            }
            Held::PerRank(source) => source.dataset(self.config, progress)?,
        })
    }
}
