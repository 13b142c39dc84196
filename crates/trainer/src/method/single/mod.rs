//! `single`: one process, the whole graph, no communication (the reference every distributed
//! method is compared with); full-batch, or on sampled mini-batches with `[minibatch]
//! batch-size`.

use super::{BatchSource, DataPlan, MethodDef, Parts};
use crate::config::TrainConfig;

pub(super) struct Single;

impl MethodDef for Single {
    fn name(&self) -> &str {
        "single"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        Parts { batches: BatchSource::from_config(config), ..Parts::exact(DataPlan::Whole) }
    }
}
