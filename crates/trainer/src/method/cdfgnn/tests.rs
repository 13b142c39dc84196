use graph_partition::book::CutKind;

use super::*;
use crate::config::{FirstLayerCache, Method, MethodConfig};

fn parts_of(cache: bool, quant_bits: u8) -> Parts {
    let mut config = TrainConfig { method: MethodConfig::named(Method::Cdfgnn), ..TrainConfig::default() };
    config.method.cdfgnn.replica_cache = cache;
    config.method.cdfgnn.quant_bits = quant_bits;
    config.validate().unwrap();
    crate::plan::lookup(Method::Cdfgnn).parts(&config)
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
fn input_dropout_is_the_models_unless_the_first_layer_is_cached() {
    let mut config =
        TrainConfig { method: MethodConfig::named(Method::Cdfgnn), dropout: 0.5, ..TrainConfig::default() };
    assert_eq!(config.method.cdfgnn.cache_first_layer, FirstLayerCache::Auto);
    assert_eq!(config.model_config(8, 2).input_dropout, 0.5, "auto keeps vanilla's model");
    assert_eq!(config.model_config(8, 2).dropout, 0.5);
    config.method.cdfgnn.cache_first_layer = FirstLayerCache::On;
    assert_eq!(config.model_config(8, 2).input_dropout, 0.0, "a cached first layer turns it off");
    config.input_dropout = Some(0.25);
    assert_eq!(config.model_config(8, 2).input_dropout, 0.25, "unless asked");
    config.method = MethodConfig::named(Method::Vanilla);
    assert_eq!(config.model_config(8, 2).input_dropout, 0.25);
    config.input_dropout = None;
    assert_eq!(config.model_config(8, 2).input_dropout, 0.5);
}

/// The first layer's forward sync skips the cache exactly when the first layer is not cached:
/// `auto` caches it when the model has no input dropout.
#[test]
fn the_first_layer_skips_the_cache_when_input_dropout_masks_it() {
    let uncached = |first: FirstLayerCache, dropout: f32, input_dropout: Option<f32>| {
        let mut config = TrainConfig {
            method: MethodConfig::named(Method::Cdfgnn),
            dropout,
            input_dropout,
            ..TrainConfig::default()
        };
        config.method.cdfgnn.cache_first_layer = first;
        config.validate().unwrap();
        let stack = (crate::plan::lookup(Method::Cdfgnn).parts(&config).exchange.expect("a cached stack"))();
        stack.replica_cache.expect("the cache").uncached_forward_layers
    };
    assert_eq!(uncached(FirstLayerCache::Auto, 0.5, None), 1);
    assert_eq!(uncached(FirstLayerCache::Auto, 0.0, None), 0);
    assert_eq!(uncached(FirstLayerCache::Auto, 0.5, Some(0.0)), 0);
    assert_eq!(uncached(FirstLayerCache::Auto, 0.0, Some(0.2)), 1);
    assert_eq!(uncached(FirstLayerCache::On, 0.5, None), 0);
    assert_eq!(uncached(FirstLayerCache::On, 0.5, Some(0.5)), 0, "on caches it even under input dropout");
    assert_eq!(uncached(FirstLayerCache::Off, 0.0, None), 1);
}
