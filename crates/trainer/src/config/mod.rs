//! The training configuration: every key `halo train` accepts, with defaults, TOML loading and
//! validation.
//!
//! TOML keys are spelled exactly like the command-line flags (`weight-decay`, `feature-norm`), so
//! one name means the same thing in both places; unknown keys are rejected.
//!
//! Each key is spelled once: its field gives the TOML key and, with the `clap` feature, the
//! `halo train` flag (the sections derive `clap::Args`); its doc comment is the help, and its
//! `Default` the default the help shows. `keys.rs` reads keys, sections, owners and defaults off the
//! serialized defaults, [`heading`] names the help sections, and no key sits in two sections. A
//! method's settings are one `[method.<name>]` table each, in its folder (`method.rs` lists them).

mod device;
mod distributed;
#[cfg(test)]
mod fuzz;
pub mod heading;
mod keys;
mod memory;
mod method;
mod minibatch;
mod reliability;
mod rules;

use std::path::{Path, PathBuf};

use gnn_core::{Activation, Adam, ConvKind, LayerOrder, ModelConfig, Optim, Sgd};
use graph_partition::book::CutKind;
use serde::{Deserialize, Serialize};

pub use device::{Device, UnknownDevice};
pub use distributed::{Backend, Compress, DistributedConfig, ParamSync, UnknownBackend};
pub use keys::{default_text, is_distributed, owners, sections_of};
pub use memory::{MemoryConfig, parse_size};
// The registry and every method's settings: adding a method edits its registry line, not this file.
pub use method::*;
pub use minibatch::{LrScaling, MiniBatchConfig};
pub use reliability::ReliabilityConfig;
pub use rules::{BatchMode, CutRule, LrDefaults, MethodSettings, Rules};

/// How input features are normalised before training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum FeatureNorm {
    /// Features are used as stored.
    #[default]
    None,
    /// Each row divided by its L1 norm (PyG's `NormalizeFeatures`); zero rows stay zero.
    Row,
}

/// The optimizer's update rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// PyTorch's Adam: betas (0.9, 0.999), eps 1e-8, L2 weight decay coupled into the gradient.
    #[default]
    Adam,
    /// PyTorch's SGD: `momentum` (heavy-ball, or Nesterov's with `nesterov`), L2 weight decay
    /// coupled into the gradient.
    Sgd,
}

impl OptimizerKind {
    /// The name in TOML, flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            OptimizerKind::Adam => "adam",
            OptimizerKind::Sgd => "sgd",
        }
    }
}

/// Every setting of a training run. `Default` gives the documented defaults.
///
/// Each field is one key, spelled once: its name gives the TOML key and (with the `clap`
/// feature) the `halo train` flag, its doc comment the help, and `Default` the default that
/// help shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct TrainConfig {
    /// Dataset directory in the OGB raw layout, or the name of one under `datasets/` [default: a
    /// built-in synthetic graph].
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::DATA, value_name = "PATH"))]
    pub dataset: Option<String>,
    /// Architecture: gcn, sage or gat.
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL, value_name = "NAME"))]
    pub model: ConvKind,
    /// Number of GNN layers (the last one produces the class logits).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL, value_name = "N"))]
    pub layers: usize,
    /// Hidden width (per head for GAT).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL, value_name = "N"))]
    pub hidden: usize,
    /// Attention heads of GAT's hidden layers (its output layer has one).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL, value_name = "N"))]
    pub heads: usize,
    /// Training epochs.
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_name = "N"))]
    pub epochs: usize,
    /// The optimizer: adam or sgd (PyTorch's update rules).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_enum))]
    pub optimizer: OptimizerKind,
    /// Learning rate.
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_name = "F"))]
    pub lr: f32,
    /// L2 weight decay added to the gradients (PyTorch's `weight_decay`).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_name = "F"))]
    pub weight_decay: f32,
    /// --optimizer sgd: momentum factor, in [0, 1); 0 is plain SGD.
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_name = "F"))]
    pub momentum: f32,
    /// --optimizer sgd: Nesterov's momentum (needs --momentum above 0).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION))]
    pub nesterov: bool,
    /// Dropout probability on the hidden layers' outputs (and GAT's attention coefficients).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL, value_name = "F"))]
    pub dropout: f32,
    /// Dropout probability on the input features [default: --dropout; 0 under cdfgnn with
    /// --cache-first-layer on, where input dropout would change every first-layer partial every
    /// epoch and the cache would skip nothing].
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL, value_name = "F"))]
    pub input_dropout: Option<f32>,
    /// LayerNorm after every hidden conv, before its activation.
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL))]
    pub layer_norm: bool,
    /// Hidden layer order: dropout-last (conv, LayerNorm, activation, dropout) or dropout-first
    /// (conv, dropout, LayerNorm, activation) [default: the method's, dropout-first for adaqp as
    /// in its paper, else dropout-last].
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::MODEL, value_name = "ORDER"))]
    pub layer_order: Option<LayerOrder>,
    /// Seed of parameter initialisation, dropout masks, sampling and the synthetic graph.
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_name = "N"))]
    pub seed: u64,
    /// Feature normalisation after loading: none, or row (each row divided by its L1 norm).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::DATA, value_enum))]
    pub feature_norm: FeatureNorm,
    /// Split under the dataset's `split/` [default: the dataset's default split].
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::DATA, value_name = "NAME"))]
    pub split: Option<String>,
    /// Training method and its settings (`method = "name"`, or a `[method]` table with `name`
    /// and one `[method.<name>]` table per method).
    #[serde(deserialize_with = "method::deserialize")]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub method: MethodConfig,
    /// Compute threads [default: all cores].
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::COMPUTE, value_name = "N"))]
    pub threads: Option<usize>,
    /// Stop after N evaluations without a validation improvement [default: never].
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_name = "N"))]
    pub patience: Option<usize>,
    /// Evaluate every N epochs, and after the last; the epochs between report the last
    /// evaluation's accuracies with its epoch (`eval_epoch`). Evaluation crosses the network
    /// like a step does.
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OPTIMIZATION, value_name = "N"))]
    pub eval_every: usize,
    /// Write the JSON report here (checked before training starts; a run that fails or is
    /// interrupted leaves the epochs so far, marked `"incomplete": true` with the reason).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::OUTPUT, value_name = "FILE.json"))]
    pub report: Option<PathBuf>,
    /// Cut, partitioner, workers, hosts, backend, topology and exchange settings of the
    /// distributed methods.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = heading::DISTRIBUTED))]
    pub distributed: DistributedConfig,
    /// Batch size, fanouts and normalisation of mini-batch training (full-batch without a
    /// batch size).
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = heading::OPTIMIZATION))]
    pub minibatch: MiniBatchConfig,
    /// Where to train: cpu, or cuda / cuda:N for GPU N, worker i on GPU (N + i) mod the visible
    /// GPUs (full batches: single, and the cut-graph methods' workers; mini-batches of GCN and
    /// GraphSAGE: single, data-parallel, adgraph).
    #[cfg_attr(feature = "clap", arg(long, help_heading = heading::COMPUTE, value_name = "DEVICE"))]
    pub device: Device,
    /// Checkpoints, resumption and the communication timeout.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = heading::RELIABILITY))]
    pub reliability: ReliabilityConfig,
    /// The memory ceiling checked against the estimated peak.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = heading::RELIABILITY))]
    pub memory: MemoryConfig,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            dataset: None,
            model: ConvKind::Gcn,
            layers: 2,
            hidden: 16,
            heads: 8,
            epochs: 200,
            optimizer: OptimizerKind::Adam,
            lr: 0.01,
            weight_decay: 5e-4,
            momentum: 0.0,
            nesterov: false,
            dropout: 0.5,
            input_dropout: None,
            layer_norm: false,
            layer_order: None,
            seed: 0,
            feature_norm: FeatureNorm::None,
            split: None,
            method: MethodConfig::default(),
            threads: None,
            patience: None,
            eval_every: 1,
            report: None,
            distributed: Default::default(),
            minibatch: MiniBatchConfig::default(),
            device: Device::Cpu,
            reliability: ReliabilityConfig::default(),
            memory: MemoryConfig::default(),
        }
    }
}

/// Why a configuration could not be read or is not usable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key or a value of the wrong type.
    #[error("{origin}:{line}: {}{message}", key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
    Toml {
        /// The file (or other origin) of the text.
        origin: String,
        /// 1-based line of the offending text.
        line: usize,
        /// The key on that line, when the error sits on a `key = value` line.
        key: Option<String>,
        /// The parser's message.
        message: String,
    },
    /// A key holds a value outside its allowed range.
    #[error("invalid `{key}`: {message}")]
    Invalid {
        /// The key (also the flag name without `--`).
        key: &'static str,
        /// What is wrong, with the offending value.
        message: String,
    },
}

impl TrainConfig {
    /// Reads a TOML file; missing keys take their defaults. The result is validated.
    pub fn from_toml_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Parses TOML text; `origin` names it in errors (usually the file path). The result is validated,
    /// and holds the method's own cut ([`TrainConfig::with_method_cut`]).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|err| {
            let error = toml_error(text, origin, &err);
            misplaced(text, &error).unwrap_or(error)
        })?;
        let at = |key: &'static str, message: String| ConfigError::Toml {
            origin: origin.to_string(),
            line: key_line(text, key).unwrap_or(1),
            key: Some(key.to_string()),
            message,
        };
        if let Some(cut) = config.method.name.cut().filter(|&cut| cut != config.distributed.cut)
            && key_line(text, "cut").is_some()
        {
            let why = config.method.name.ignores_cut(config.distributed.cut).unwrap_or_default();
            return Err(at("cut", format!("{why}; drop the key or set it to \"{cut}\"")));
        }
        let config = config.with_method_cut();
        config.validate().map_err(|err| match err {
            ConfigError::Invalid { key, message } => at(key, message),
            other => other,
        })?;
        Ok(config)
    }

    /// Checks every range constraint; the error names the key at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn invalid(key: &'static str, message: String) -> Result<(), ConfigError> {
            Err(ConfigError::Invalid { key, message })
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return invalid("lr", format!("must be a finite number greater than 0, got {}", self.lr));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return invalid("weight-decay", format!("must be a finite number >= 0, got {}", self.weight_decay));
        }
        match self.optimizer {
            OptimizerKind::Sgd if !(0.0..1.0).contains(&self.momentum) => {
                return invalid("momentum", format!("must be in [0, 1), got {}", self.momentum));
            }
            OptimizerKind::Sgd if self.nesterov && self.momentum == 0.0 => {
                return invalid("nesterov", "needs momentum above 0 (as in PyTorch)".to_string());
            }
            OptimizerKind::Adam if self.momentum != 0.0 || self.nesterov => {
                let key = if self.momentum != 0.0 { "momentum" } else { "nesterov" };
                return invalid(key, "applies to optimizer sgd; adam has its own betas".to_string());
            }
            _ => {}
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return invalid("dropout", format!("must be in [0, 1), got {}", self.dropout));
        }
        if let Some(p) = self.input_dropout.filter(|p| !(0.0..1.0).contains(p)) {
            return invalid("input-dropout", format!("must be in [0, 1), got {p}"));
        }
        for (key, value) in
            [("epochs", self.epochs), ("layers", self.layers), ("hidden", self.hidden), ("heads", self.heads)]
        {
            if value == 0 {
                return invalid(key, "must be at least 1, got 0".to_string());
            }
        }
        if self.distributed.masters_only && self.model == ConvKind::Gat {
            let why = "GAT's softmax spans every replica's edges, so every replica computes".to_string();
            return invalid("masters-only", why);
        }
        if self.threads == Some(0) {
            return invalid("threads", "must be at least 1, got 0".to_string());
        }
        if self.patience == Some(0) {
            return invalid("patience", "must be at least 1, got 0".to_string());
        }
        if self.eval_every == 0 {
            return invalid("eval-every", "must be at least 1, got 0".to_string());
        }
        if self.distributed.serialize_compute && self.reliability.uses_checkpoints() {
            // A checkpoint's agreement is a collective outside the workers' clocks, which
            // hand the machine over only inside their own calls.
            return invalid(
                "serialize-compute",
                "measures each worker's compute and cannot run with checkpoints: drop one of them".to_string(),
            );
        }
        if self.split.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return invalid("split", "must not be empty".to_string());
        }
        if self.dataset.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return invalid("dataset", "must not be empty".to_string());
        }
        self.distributed.validate(self.cut())?;
        self.reliability.validate()?;
        self.minibatch.validate(self.layers)?;
        self.method.validate(self)?;
        self.device.validate(self)
    }
}

impl TrainConfig {
    /// The input-feature dropout rate: `input-dropout`, else the method's default for
    /// `dropout` ([`MethodConfig::input_dropout`]).
    pub fn input_dropout_rate(&self) -> f32 {
        self.input_dropout.unwrap_or_else(|| self.method.input_dropout(self.dropout))
    }

    /// The model this configuration describes, for `in_dim` input features and `out_dim` outputs.
    ///
    /// Dropout applies to the input features (at `input-dropout`) and to every hidden layer's
    /// output (and, for GAT, to the attention coefficients); GAT uses ELU and one output head, GCN and SAGE use ReLU, as in
    /// the PyG reference scripts.
    pub fn model_config(&self, in_dim: usize, out_dim: usize) -> ModelConfig {
        let (activation, attn_dropout) = match self.model {
            ConvKind::Gcn | ConvKind::Sage => (Activation::Relu, 0.0),
            ConvKind::Gat => (Activation::Elu { alpha: 1.0 }, self.dropout),
        };
        ModelConfig {
            kind: self.model,
            in_dim,
            hidden: self.hidden,
            out_dim,
            layers: self.layers,
            heads: self.heads,
            out_heads: 1,
            dropout: self.dropout,
            input_dropout: self.input_dropout_rate(),
            attn_dropout,
            layer_norm: self.layer_norm,
            activation,
            layer_order: self.layer_order(),
            seed: self.seed,
        }
    }

    /// The hidden layers' order: the configured one, else the method's.
    pub fn layer_order(&self) -> LayerOrder {
        self.layer_order.unwrap_or(self.method.name.rules().layer_order)
    }

    /// The cut the run partitions with: the method's own where it has one
    /// ([`Method::cut`]), else `[distributed] cut`.
    pub fn cut(&self) -> CutKind {
        self.method.name.cut().unwrap_or(self.distributed.cut)
    }

    /// This configuration with [`TrainConfig::cut`] in `[distributed] cut`, so that it (and the
    /// report's copy of it) says the cut the run trains on.
    pub fn with_method_cut(mut self) -> Self {
        self.distributed.cut = self.cut();
        self
    }

    /// How the learning rate follows the number of workers: `lr-scaling`, else the method's
    /// under this optimizer ([`Rules::lr_scaling`]), else as given.
    pub fn lr_scaling(&self) -> LrScaling {
        let method = self.method.name.rules().lr_scaling.map(|rule| rule.under(self.optimizer));
        self.minibatch.lr_scaling.or(method).unwrap_or_default()
    }

    /// The optimizer, with L2 weight decay coupled into the gradient (`torch.optim.Adam` or
    /// `torch.optim.SGD`).
    pub fn optimizer(&self) -> Optim {
        match self.optimizer {
            OptimizerKind::Adam => Optim::Adam(Adam::new(self.lr, self.weight_decay)),
            OptimizerKind::Sgd if self.nesterov => Optim::Sgd(Sgd::nesterov(self.lr, self.momentum, self.weight_decay)),
            OptimizerKind::Sgd => Optim::Sgd(Sgd::new(self.lr, self.momentum, self.weight_decay)),
        }
    }
}

/// Turns a TOML error into one that names the file, line and key.
pub(crate) fn toml_error(text: &str, origin: &str, err: &toml::de::Error) -> ConfigError {
    let start = err.span().map_or(0, |s| s.start).min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_text = text[line_start..].lines().next().unwrap_or("");
    let key = line_text
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    ConfigError::Toml {
        origin: origin.to_string(),
        line: text[..line_start].matches('\n').count() + 1,
        key,
        message: err.message().trim().to_string(),
    }
}

/// For an unknown key that another section holds, the error naming the section it sits in and
/// those it belongs in (a top-level `workers = 2` belongs in `[distributed]`).
fn misplaced(text: &str, error: &ConfigError) -> Option<ConfigError> {
    let ConfigError::Toml { origin, line, key: Some(key), message } = error else { return None };
    let homes = sections_of(key);
    if !message.starts_with("unknown field") || homes.is_empty() {
        return None;
    }
    let header = |l: &str| {
        let l = l.trim();
        l.starts_with('[').then(|| l.trim_matches(|c| c == '[' || c == ']').replace(['"', ' '], ""))
    };
    let here = text.lines().take(line - 1).filter_map(header).last().unwrap_or_default();
    let homes: Vec<String> = homes.iter().map(|home| keys::describe(home)).collect();
    Some(ConfigError::Toml {
        origin: origin.clone(),
        line: *line,
        key: Some(key.clone()),
        message: format!("not a key of {}: it belongs in {}", keys::describe(&here), homes.join(" or ")),
    })
}

/// The 1-based line on which `key` is assigned.
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| line.split_once('=').is_some_and(|(k, _)| k.trim().trim_matches('"') == key))
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use graph_partition::book::CutKind;

    use super::*;

    #[test]
    fn empty_toml_gives_defaults() {
        assert_eq!(TrainConfig::from_toml_str("", "t.toml").unwrap(), TrainConfig::default());
    }

    #[test]
    fn every_key_parses_with_flag_spelling() {
        let text = r#"
dataset = "cora"
model = "gat"
layers = 3
hidden = 8
heads = 4
epochs = 50
lr = 0.005
weight-decay = 0.0
dropout = 0.6
input-dropout = 0.25
layer-order = "dropout-first"
seed = 7
feature-norm = "row"
split = "public"
method = "single"
threads = 2
patience = 10
eval-every = 3
report = "out.json"
"#;
        let c = TrainConfig::from_toml_str(text, "t.toml").unwrap();
        let expected = TrainConfig {
            dataset: Some("cora".into()),
            model: ConvKind::Gat,
            layers: 3,
            hidden: 8,
            heads: 4,
            epochs: 50,
            optimizer: OptimizerKind::Adam,
            lr: 0.005,
            weight_decay: 0.0,
            momentum: 0.0,
            nesterov: false,
            dropout: 0.6,
            input_dropout: Some(0.25),
            layer_norm: false,
            layer_order: Some(LayerOrder::DropoutFirst),
            seed: 7,
            feature_norm: FeatureNorm::Row,
            split: Some("public".into()),
            method: MethodConfig::default(),
            threads: Some(2),
            patience: Some(10),
            eval_every: 3,
            report: Some(PathBuf::from("out.json")),
            distributed: Default::default(),
            minibatch: MiniBatchConfig::default(),
            device: Device::Cpu,
            reliability: ReliabilityConfig::default(),
            memory: MemoryConfig::default(),
        };
        assert_eq!(c, expected);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = TrainConfig::from_toml_str("epochs = 3\nlearning-rate = 0.1\n", "run.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("run.toml:2: key `learning-rate`"), "{msg}");
        assert!(msg.contains("unknown field"), "{msg}");
    }

    #[test]
    fn a_key_in_the_wrong_section_is_told_where_it_belongs() {
        let msg = TrainConfig::from_toml_str("epochs = 3\nworkers = 2\n", "run.toml").unwrap_err().to_string();
        assert_eq!(msg, "run.toml:2: key `workers`: not a key of the top level: it belongs in [distributed]");
        let text = "[method]\nname = \"vanilla\"\n[method.vanilla]\nquant-bits = 4\n";
        let msg = TrainConfig::from_toml_str(text, "run.toml").unwrap_err().to_string();
        assert_eq!(msg, "run.toml:4: key `quant-bits`: not a key of [method.vanilla]: it belongs in [method.cdfgnn]");
        let msg = TrainConfig::from_toml_str("[distributed]\nepochs = 3\n", "run.toml").unwrap_err().to_string();
        assert!(msg.ends_with("not a key of [distributed]: it belongs in the top level"), "{msg}");
    }

    /// cdfgnn trains on a vertex-cut whether the configuration comes from TOML, flags or code:
    /// the method sets it, and the partitioner is checked against it.
    #[test]
    fn the_method_sets_its_cut() {
        let c = TrainConfig::from_toml_str("method = \"cdfgnn\"\n", "run.toml").unwrap();
        assert_eq!((c.distributed.cut, c.cut()), (CutKind::VertexCut, CutKind::VertexCut));
        let c = TrainConfig::from_toml_str("method = \"cdfgnn\"\n[distributed]\npartitioner = \"ebv\"\n", "t").unwrap();
        assert_eq!(c.distributed.algorithm_for(c.cut()).to_string(), "ebv");
        let text = "method = \"cdfgnn\"\n[distributed]\npartitioner = \"metis\"\n";
        let msg = TrainConfig::from_toml_str(text, "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:3: key `partitioner`") && msg.contains("vertex-cut"), "{msg}");
        let text = "method = \"cdfgnn\"\n[distributed]\ncut = \"edge\"\n";
        let msg = TrainConfig::from_toml_str(text, "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:3: key `cut`: cdfgnn trains on a vertex-cut"), "{msg}");
        let mut coded = TrainConfig::default();
        coded.method.name = Method::Cdfgnn;
        assert_eq!((coded.distributed.cut, coded.cut()), (CutKind::EdgeCut, CutKind::VertexCut));
        assert_eq!(coded.with_method_cut().distributed.cut, CutKind::VertexCut);
        let vanilla = TrainConfig::from_toml_str("method = \"vanilla\"\n", "run.toml").unwrap();
        assert_eq!(vanilla.cut(), CutKind::EdgeCut, "vanilla takes the configured cut");
    }

    #[test]
    fn wrong_type_names_key() {
        let msg = TrainConfig::from_toml_str("lr = \"fast\"\n", "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:1: key `lr`"), "{msg}");
    }

    #[test]
    fn unknown_model_lists_choices() {
        let msg = TrainConfig::from_toml_str("\nmodel = \"mlp\"\n", "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:2: key `model`"), "{msg}");
        assert!(msg.contains("gcn") && msg.contains("sage") && msg.contains("gat"), "{msg}");
    }

    #[test]
    fn syntax_error_names_line() {
        let msg = TrainConfig::from_toml_str("epochs = 3\nhidden = = 4\n", "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:2"), "{msg}");
    }

    #[test]
    fn validation_names_the_key() {
        type Mutation = fn(&mut TrainConfig);
        let cases: [(&str, Mutation); 15] = [
            ("momentum", |c| c.momentum = 0.9),
            ("momentum", |c| (c.optimizer, c.momentum) = (OptimizerKind::Sgd, 1.0)),
            ("nesterov", |c| (c.optimizer, c.nesterov) = (OptimizerKind::Sgd, true)),
            ("lr", |c| c.lr = 0.0),
            ("lr", |c| c.lr = f32::NAN),
            ("weight-decay", |c| c.weight_decay = -1.0),
            ("dropout", |c| c.dropout = 1.0),
            ("input-dropout", |c| c.input_dropout = Some(-0.1)),
            ("epochs", |c| c.epochs = 0),
            ("layers", |c| c.layers = 0),
            ("heads", |c| c.heads = 0),
            ("threads", |c| c.threads = Some(0)),
            ("patience", |c| c.patience = Some(0)),
            ("eval-every", |c| c.eval_every = 0),
            ("masters-only", |c| {
                (c.model, c.distributed.cut, c.distributed.masters_only) = (ConvKind::Gat, CutKind::VertexCut, true)
            }),
        ];
        for (key, mutate) in cases {
            let mut c = TrainConfig::default();
            mutate(&mut c);
            match c.validate() {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("expected an error for `{key}`, got {other:?}"),
            }
        }
        assert!(TrainConfig::default().validate().is_ok());
    }

    #[test]
    fn validation_runs_on_toml_input() {
        let msg = TrainConfig::from_toml_str("epochs = 3\ndropout = 1.5\n", "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:2: key `dropout`") && msg.contains("1.5"), "{msg}");
    }

    #[test]
    fn missing_file_is_named() {
        let err = TrainConfig::from_toml_file(Path::new("/nonexistent/halo.toml")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/halo.toml"), "{err}");
    }
}
