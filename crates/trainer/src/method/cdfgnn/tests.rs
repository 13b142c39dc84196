use graph_partition::book::CutKind;

use super::*;
use crate::config::{Method, MethodConfig};

fn parts_of(cache: bool, quant_bits: u8) -> Parts {
    let mut config = TrainConfig { method: MethodConfig::named(Method::Cdfgnn), ..TrainConfig::default() };
    config.method.cdfgnn.replica_cache = cache;
    config.method.cdfgnn.quant_bits = quant_bits;
    config.validate().unwrap();
    crate::method::lookup(Method::Cdfgnn).parts(&config)
}

#[test]
fn the_stack_follows_cache_and_quant_bits() {
    let both = parts_of(true, 8);
    assert_eq!(both.data, DataPlan::Cut(CutKind::VertexCut));
    let stack = (both.exchange.expect("a cached stack"))();
    assert!(stack.replica_cache.is_some() && stack.controller.is_some());
    let stream = Stream {
        id: cache_quant::StreamId {
            tag: cache_quant::Tag::new(0, cache_quant::Direction::Forward, cache_quant::Step::Aggregate),
            route: cache_quant::Route::ToPrimary,
            peer: 1,
            side: cache_quant::Side::Encode,
        },
        rows: Arc::from(Vec::new()),
    };
    assert_eq!((stack.codecs)(&stream).name(), "linear8");
    let quant_only = (parts_of(false, 4).exchange.expect("a quantizing stack"))();
    assert!(quant_only.replica_cache.is_none() && quant_only.controller.is_none());
    assert_eq!((quant_only.codecs)(&stream).name(), "linear4");
    let cache_only = (parts_of(true, 0).exchange.expect("a cached stack"))();
    assert_eq!((cache_only.codecs)(&stream).name(), "identity");
    assert!(parts_of(false, 0).exchange.is_none(), "neither: the exact sync");
}

#[test]
fn input_dropout_is_off_unless_asked() {
    let mut config =
        TrainConfig { method: MethodConfig::named(Method::Cdfgnn), dropout: 0.5, ..TrainConfig::default() };
    assert_eq!(config.model_config(8, 2).input_dropout, 0.0);
    assert_eq!(config.model_config(8, 2).dropout, 0.5);
    config.input_dropout = Some(0.25);
    assert_eq!(config.model_config(8, 2).input_dropout, 0.25);
    config.method = MethodConfig::named(Method::Vanilla);
    assert_eq!(config.model_config(8, 2).input_dropout, 0.25);
    config.input_dropout = None;
    assert_eq!(config.model_config(8, 2).input_dropout, 0.5);
}
