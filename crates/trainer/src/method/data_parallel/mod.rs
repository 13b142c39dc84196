//! `data-parallel`: every worker holds the whole graph and trains on a disjoint share of each
//! sampled global mini-batch (`workers x batch-size` seed vertices); gradients are all-reduced
//! every step, so every worker applies the same update. `[minibatch] lr-scaling` scales the
//! learning rate with the number of workers.

pub(crate) mod rules;

use super::{BatchSource, DataPlan, GradSync, HaloFeatures, MethodDef, Parts, Sampling};
use crate::config::TrainConfig;

/// The `data-parallel` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "data-parallel"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        let sampling = Sampling::from_config(config).expect("validated: data-parallel has a batch size");
        Parts {
            data: DataPlan::Replicated,
            batches: BatchSource::Sampled(sampling),
            exchange: None,
            sync: GradSync::AllReduce,
            halo_features: HaloFeatures::Pulled,
        }
    }
}
