//! Mini-batch settings (`[minibatch]` in the TOML config; `--batch-size`, `--fanouts`,
//! `--gcn-norm`, `--eval-batch-size`, `--lr-scaling` and `--lr-warmup` on the command line).
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
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct MiniBatchConfig {
    /// Mini-batch training: seed vertices per step, per worker for data-parallel [default: full
    /// batch].
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub batch_size: Option<usize>,
    /// Neighbours sampled per vertex and layer, input layer first, -1 for all (e.g. 10,25): per
    /// mini-batch block, or without --batch-size (single, vanilla, ecgraph) each layer's
    /// in-edges drawn anew every epoch, full-batch [default: every neighbour].
    #[serde(with = "fanouts_text")]
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST"))]
    pub fanouts: Option<Fanouts>,
    /// Mini-batch GCN: normalise a block with its sampled degrees or the global ones.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NORM"))]
    pub gcn_norm: GcnNorm,
    /// Mini-batch: vertices per batch of layer-wise evaluation.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub eval_batch_size: usize,
    /// data-parallel, adgraph: the learning rate times the number of workers (linear, Goyal et
    /// al.'s rule for a K times larger global batch) or as given (none) [default: the method's:
    /// adgraph scales linearly under sgd, as its paper derives, and not under adam, where
    /// scaling loses 2.4 points on Cora at 8 workers; data-parallel does not scale].
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub lr_scaling: Option<LrScaling>,
    /// Mini-batch: threads that sample batches ahead of training, each one batch ahead (the
    /// batches are the same whatever the number) [default: the machine's cores, shared among
    /// this process's workers].
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub sampler_threads: Option<usize>,
    /// Mini-batch: raise a scaled learning rate linearly, step by step, from the rate as given
    /// over the first N epochs (Goyal et al.'s gradual warm-up for --lr-scaling linear).
    #[cfg_attr(feature = "clap", arg(long = "lr-warmup", value_name = "N"))]
    pub lr_warmup_epochs: usize,
}

impl Default for MiniBatchConfig {
    fn default() -> Self {
        Self {
            batch_size: None,
            fanouts: None,
            gcn_norm: GcnNorm::default(),
            eval_batch_size: 4096,
            lr_scaling: None,
            sampler_threads: None,
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
        if self.sampler_threads == Some(0) {
            return invalid("sampler-threads", "must be at least 1, got 0".to_string());
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

/// How the learning rate follows the global batch of data-parallel training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum LrScaling {
    /// `lr` as given, whatever the number of workers.
    #[default]
    None,
    /// `lr` times the number of workers (Goyal et al.'s linear scaling rule: K workers take a
    /// K times larger global batch).
    Linear,
}

impl LrScaling {
    /// The name in TOML and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            LrScaling::None => "none",
            LrScaling::Linear => "linear",
        }
    }

    /// The factor applied to `lr` with `workers` data-parallel workers.
    pub fn factor(self, workers: usize) -> f32 {
        match self {
            LrScaling::None => 1.0,
            LrScaling::Linear => workers as f32,
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
