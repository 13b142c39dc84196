//! `single`: one process, the whole graph, no communication (the reference every distributed
//! method is compared with).

use super::{DataPlan, MethodDef, Parts};
use crate::config::TrainConfig;

pub(super) struct Single;

impl MethodDef for Single {
    fn name(&self) -> &str {
        "single"
    }

    fn parts(&self, _config: &TrainConfig) -> Parts {
        Parts::exact(DataPlan::Whole)
    }
}
