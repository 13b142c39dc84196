//! `vanilla`: distributed full-batch training with an exact exchange; equals single-process
//! training (the correctness contract). `[method.vanilla] skip-repeats` adds a lossless codec
//! that sends only rows the receiver does not hold yet. With fanouts (and no batch size) every
//! layer runs on in-edges sampled per epoch, as single-process training on the same draws.

pub(crate) mod rules;
pub(crate) mod settings;

use std::sync::Arc;

use cache_quant::{IdentityCodec, SkipRepeats, Stream};

use super::{BatchSource, DataPlan, ExchangeStack, MethodDef, Parts};
use crate::config::TrainConfig;

/// The `vanilla` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "vanilla"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        let mut parts =
            Parts { batches: BatchSource::from_config(config), ..Parts::exact(DataPlan::Cut(config.distributed.cut)) };
        if config.method.vanilla.skip_repeats {
            parts.exchange = Some(Arc::new(|| ExchangeStack {
                codecs: SkipRepeats::over(Arc::new(|_: &Stream| Box::new(IdentityCodec))),
                controller: None,
                replica_cache: None,
            }));
        }
        parts
    }
}
