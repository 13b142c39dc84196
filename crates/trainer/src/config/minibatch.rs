//! Mini-batch settings (`[minibatch]` in the TOML config; `--batch-size`, `--fanouts`,
//! `--gcn-norm`, `--eval-batch-size` and `--lr-warmup` on the command line).
//!
//! Training is mini-batch when `batch-size` is set: each step samples the neighbourhoods of
//! `batch-size` training vertices (per worker, for data-parallel training), one fanout per layer.
//! Evaluation then runs full-neighbour inference one layer at a time over every vertex, in
//! batches of `eval-batch-size` vertices.
//!
//! `fanouts` without `batch-size` keeps training full-batch, each layer over in-edges sampled
//! anew every epoch (`single`, `vanilla` and `ecgraph` on an edge-cut: EC-Graph's sampled mode);
//! evaluation uses every edge.

use gnn_core::GcnNorm;
use graph_partition::sample::Fanouts;
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Settings of mini-batch training (unused without `batch_size`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct MiniBatchConfig {
    /// Seed vertices per step and worker; `None` trains full-batch.
    pub batch_size: Option<usize>,
    /// Neighbours sampled per vertex and layer, input layer first (`"10,25"`; `-1` takes all);
    /// `None` takes every neighbour at every layer. Without `batch_size`: in-edges kept per
    /// vertex and layer in full-batch training, drawn every epoch.
    #[serde(with = "fanouts_text")]
    pub fanouts: Option<Fanouts>,
    /// Degrees GCN normalises a sampled block with (see `gnn_core::block`).
    pub gcn_norm: GcnNorm,
    /// Destination vertices per batch of layer-wise evaluation.
    pub eval_batch_size: usize,
    /// Epochs over which a scaled learning rate rises linearly, step by step, from the rate as
    /// given to the scaled rate (Goyal et al.'s gradual warm-up for the linear scaling rule);
    /// 0 starts at the scaled rate. Only a method that scales the rate (`lr-scaling`) uses it.
    pub lr_warmup_epochs: usize,
}

impl Default for MiniBatchConfig {
    fn default() -> Self {
        Self {
            batch_size: None,
            fanouts: None,
            gcn_norm: GcnNorm::default(),
            eval_batch_size: 4096,
            lr_warmup_epochs: 0,
        }
    }
}

impl MiniBatchConfig {
    /// Checks the settings against a model of `layers` layers; the error names the key (= flag).
    pub fn validate(&self, layers: usize) -> Result<(), ConfigError> {
        let invalid = |key, message| Err(ConfigError::Invalid { key, message });
        if self.batch_size == Some(0) {
            return invalid("batch-size", "must be at least 1, got 0".to_string());
        }
        if self.eval_batch_size == 0 {
            return invalid("eval-batch-size", "must be at least 1, got 0".to_string());
        }
        if self.lr_warmup_epochs > 0 && self.batch_size.is_none() {
            return invalid("lr-warmup-epochs", "applies to mini-batch training only: set batch-size too".to_string());
        }
        if let Some(fanouts) = &self.fanouts {
            if self.batch_size.is_none() && self.gcn_norm == GcnNorm::Sampled {
                return invalid(
                    "gcn-norm",
                    "full-batch layers on sampled in-edges (fanouts without batch-size) normalise with the global \
                     degrees: use global, or set batch-size for mini-batch blocks"
                        .to_string(),
                );
            }
            if fanouts.num_layers() != layers {
                return invalid(
                    "fanouts",
                    format!(
                        "`{fanouts}` has {} entries for a model of {layers} layers (one per layer, input layer first)",
                        fanouts.num_layers()
                    ),
                );
            }
        }
        Ok(())
    }
}

/// `fanouts` in TOML: the command line's text form (`"10,25"`).
mod fanouts_text {
    use graph_partition::sample::Fanouts;
    use serde::{Deserialize, Deserializer, Serializer, de};

    pub fn serialize<S: Serializer>(fanouts: &Option<Fanouts>, serializer: S) -> Result<S::Ok, S::Error> {
        match fanouts {
            Some(f) => serializer.serialize_str(&f.to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Fanouts>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            Some(text) => text.parse().map(Some).map_err(de::Error::custom),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    fn key_of(config: &MiniBatchConfig, layers: usize) -> &'static str {
        match config.validate(layers) {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("expected an invalid key, got {other:?}"),
        }
    }

    #[test]
    fn reads_the_table_and_round_trips() {
        let text = "layers = 3\n[minibatch]\nbatch-size = 1024\nfanouts = \"15,10,5\"\ngcn-norm = \"sampled\"\nlr-warmup-epochs = 5\n";
        let c = TrainConfig::from_toml_str(text, "m.toml").unwrap();
        assert_eq!(c.minibatch.batch_size, Some(1024));
        assert_eq!(c.minibatch.fanouts, Some("15,10,5".parse().unwrap()));
        assert_eq!(c.minibatch.gcn_norm, GcnNorm::Sampled);
        assert_eq!(c.minibatch.lr_warmup_epochs, 5);
        assert_eq!(TrainConfig::from_toml_str(&toml::to_string(&c).unwrap(), "round-trip").unwrap(), c);
        assert_eq!(TrainConfig::default().minibatch, MiniBatchConfig::default());
        // Reports carry the configuration as JSON, where an absent value is null.
        for config in [c, TrainConfig::default()] {
            let json = serde_json::to_string(&config).unwrap();
            assert_eq!(serde_json::from_str::<TrainConfig>(&json).unwrap(), config);
        }
    }

    #[test]
    fn bad_settings_name_their_key() {
        let sized = MiniBatchConfig { batch_size: Some(8), ..MiniBatchConfig::default() };
        assert!(sized.validate(2).is_ok());
        assert_eq!(key_of(&MiniBatchConfig { batch_size: Some(0), ..MiniBatchConfig::default() }, 2), "batch-size");
        assert_eq!(key_of(&MiniBatchConfig { eval_batch_size: 0, ..sized.clone() }, 2), "eval-batch-size");
        let fanouts = Some("10,25".parse().unwrap());
        // Without a batch size, fanouts sample the full batch's in-edges (global degrees only).
        let full_batch = MiniBatchConfig { fanouts: fanouts.clone(), ..MiniBatchConfig::default() };
        assert!(full_batch.validate(2).is_ok());
        assert_eq!(key_of(&full_batch, 3), "fanouts");
        assert_eq!(key_of(&MiniBatchConfig { gcn_norm: GcnNorm::Sampled, ..full_batch }, 2), "gcn-norm");
        assert_eq!(key_of(&MiniBatchConfig { fanouts, ..sized.clone() }, 3), "fanouts");
        let warm = MiniBatchConfig { lr_warmup_epochs: 5, ..MiniBatchConfig::default() };
        assert_eq!(key_of(&warm, 2), "lr-warmup-epochs");
        assert!(MiniBatchConfig { lr_warmup_epochs: 5, ..sized }.validate(2).is_ok());
        let msg = TrainConfig::from_toml_str("[minibatch]\nfanouts = \"10,x\"\n", "m.toml").unwrap_err().to_string();
        assert!(msg.starts_with("m.toml:2: key `fanouts`") && msg.contains("not an integer"), "{msg}");
    }
}
