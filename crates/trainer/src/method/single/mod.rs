//! `single`: one process, the whole graph, no communication (the reference every distributed
//! method is compared with); full-batch, or on sampled mini-batches with `[minibatch]
//! batch-size`.

pub(crate) mod rules;

use super::{BatchSource, DataPlan, MethodDef, Parts};
use crate::config::TrainConfig;

/// The `single` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "single"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        // One process: its sampler threads share the machine with no worker, whatever
        // `[distributed] workers` says.
        let mut alone = config.clone();
        alone.distributed.workers = 1;
        Parts { batches: BatchSource::from_config(&alone), ..Parts::exact(DataPlan::Whole) }
    }
}
