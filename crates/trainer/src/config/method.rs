//! Which method trains, and each method's own settings.
//!
//! In TOML either `method = "vanilla"`, or a table naming the method next to one table of
//! settings per method:
//!
//! ```toml
//! [method]
//! name = "vanilla"
//! [method.vanilla]
//! skip-repeats = true
//! ```
//!
//! Settings of every method can sit in one file; only the named method's are used.
//!
//! [`Method::rules`] is the registry of what each method fixes and accepts ([`Rules`]: the cut it
//! trains on, its batch modes, its device, its default layer order); validation, the command line
//! and the docs' method table follow it. Adding a method adds its name, its rules, its settings
//! module (`<name>.rs` here) and its settings table here, and its [`crate::method::MethodDef`]
//! (`docs/ARCHITECTURE.md`, "Adding a method", lists every touch; the tidy test
//! `xtask/src/tidy/method_names.rs` keeps other code from naming a method).

use gnn_core::LayerOrder;
use graph_partition::book::CutKind;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{ConfigError, MiniBatchConfig, OptimizerKind};

pub use crate::method::adaqp::settings::{AdaqpSettings, Beta, Bits};
pub use crate::method::adgraph::settings::AdgraphSettings;
pub use crate::method::cdfgnn::settings::{CdfgnnSettings, EpsRule, FirstLayerCache, QUANT_BITS};
pub use crate::method::ecgraph::settings::{ECGRAPH_BITS, EcgraphSettings};
pub use crate::method::featpart::settings::{BiasEstimate, Eq20Step, FeatpartSettings, Tau, TauError, TauRule};

/// The training methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// One process holds the whole graph; no communication.
    #[default]
    Single,
    /// Distributed full-batch training with an exact exchange (see `[distributed]` / `--cut`).
    Vanilla,
    /// Every worker holds the whole graph and trains on its share of each sampled global
    /// mini-batch; gradients are all-reduced every step (needs `[minibatch] batch-size`).
    DataParallel,
    /// Distributed full-batch edge-cut training with AdaQP's stochastic message quantization
    /// and adaptive bit-widths (`[method.adaqp]`).
    Adaqp,
    /// ADGraph: a part per worker extended by the l-hop neighbourhood of its training
    /// vertices, mini-batches sampled inside it, gradients all-reduced (needs `[minibatch]
    /// batch-size`; settings in `[method.adgraph]`).
    Adgraph,
    /// Vertex-cut full-batch training whose replica sync goes through CDFGNN's adaptive cache
    /// and quantized deltas (`[method.cdfgnn]`).
    Cdfgnn,
    /// Feature-only partition: every worker holds the structure and a block of feature columns,
    /// and fetches the other columns every tau iterations (needs `[minibatch] batch-size`).
    Featpart,
    /// Distributed full-batch edge-cut training with EC-Graph's bucket compression, ReqEC-FP,
    /// ResEC-BP and bit tuner (`[method.ecgraph]`).
    Ecgraph,
}

impl Method {
    /// Every method, in the order of `halo train --help`.
    pub const ALL: [Method; 8] = [
        Method::Single,
        Method::Vanilla,
        Method::DataParallel,
        Method::Adaqp,
        Method::Adgraph,
        Method::Cdfgnn,
        Method::Featpart,
        Method::Ecgraph,
    ];

    /// What the method fixes and accepts ([`Rules`]).
    pub fn rules(self) -> Rules {
        use BatchMode::{Full, MiniBatch, SampledEdges};
        let distributed = Rules {
            cut: CutRule::Fixed(CutKind::EdgeCut),
            cuts_traffic: true,
            batches: &[Full],
            cuda: false,
            nccl: true,
            layer_order: LayerOrder::DropoutLast,
            lr_scaling: None,
        };
        match self {
            // One process: there is nothing to sum.
            Method::Single => Rules {
                cut: CutRule::None,
                cuts_traffic: false,
                batches: &[Full, SampledEdges, MiniBatch],
                cuda: true,
                nccl: false,
                ..distributed
            },
            Method::Vanilla => Rules {
                cut: CutRule::Configured,
                cuts_traffic: false,
                batches: &[Full, SampledEdges],
                cuda: true,
                ..distributed
            },
            // The full-batch methods' workers compute on GPUs with their codecs on the host.
            Method::Ecgraph => Rules { batches: &[Full, SampledEdges], cuda: true, ..distributed },
            Method::Adaqp => Rules { layer_order: LayerOrder::DropoutFirst, cuda: true, ..distributed },
            Method::Cdfgnn => Rules { cut: CutRule::Fixed(CutKind::VertexCut), cuda: true, ..distributed },
            Method::DataParallel => {
                let lr = LrDefaults { adam: LrScaling::None, sgd: LrScaling::None };
                Rules {
                    cut: CutRule::None,
                    cuts_traffic: false,
                    batches: &[MiniBatch],
                    lr_scaling: Some(lr),
                    cuda: true,
                    ..distributed
                }
            }
            // The paper derives the linear rule for SGD; under Adam it loses 2.4 points on Cora
            // at 8 workers while the rate as given holds (experiments/adgraph-defaults.toml).
            Method::Adgraph => {
                let lr = LrDefaults { adam: LrScaling::None, sgd: LrScaling::Linear };
                Rules { batches: &[MiniBatch], lr_scaling: Some(lr), cuda: true, ..distributed }
            }
            // Its hooks also sum its own columns' bias gradients and its trials on the host.
            Method::Featpart => {
                Rules { cut: CutRule::None, batches: &[MiniBatch], cuda: true, nccl: false, ..distributed }
            }
        }
    }

    /// The cut the method always trains on, whatever `[distributed] cut` says (cdfgnn's replica
    /// sync is a vertex-cut's); `None` where the configured cut holds or no graph is cut.
    pub fn cut(self) -> Option<CutKind> {
        match self.rules().cut {
            CutRule::Fixed(cut) => Some(cut),
            CutRule::Configured | CutRule::None => None,
        }
    }

    /// Why the method would ignore a `cut` given to it, as `--method <name> ...` ends; `None`
    /// where it trains on that cut.
    pub fn ignores_cut(self, cut: CutKind) -> Option<String> {
        let name = self.as_str();
        match self.rules().cut {
            CutRule::Fixed(own) if own != cut => Some(format!("{name} trains on {}", own.with_article())),
            CutRule::None => Some(format!("{name} cuts no graph")),
            CutRule::Fixed(_) | CutRule::Configured => None,
        }
    }

    /// The name used on the command line, in TOML and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Single => "single",
            Method::Vanilla => "vanilla",
            Method::DataParallel => "data-parallel",
            Method::Adaqp => "adaqp",
            Method::Adgraph => "adgraph",
            Method::Cdfgnn => "cdfgnn",
            Method::Featpart => "featpart",
            Method::Ecgraph => "ecgraph",
        }
    }
}

/// How a method's steps take their vertices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchMode {
    /// Every training vertex on every edge, one step per epoch.
    Full,
    /// Every training vertex, each layer on in-edges sampled anew every epoch (`fanouts`
    /// without `batch-size`).
    SampledEdges,
    /// Sampled mini-batches of training vertices (`batch-size`).
    MiniBatch,
}

impl BatchMode {
    /// The mode as the docs' method table names it.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchMode::Full => "full",
            BatchMode::SampledEdges => "sampled in-edges",
            BatchMode::MiniBatch => "mini-batch",
        }
    }

    /// The mode `minibatch` asks for.
    pub fn of(minibatch: &MiniBatchConfig) -> Self {
        match (minibatch.batch_size, &minibatch.fanouts) {
            (Some(_), _) => BatchMode::MiniBatch,
            (None, Some(_)) => BatchMode::SampledEdges,
            (None, None) => BatchMode::Full,
        }
    }
}

/// What a method fixes and accepts, whatever else the configuration says: a method's entry in
/// the registry ([`Method::rules`]), which validation, `halo train --help` and the method table
/// of `docs/ARCHITECTURE.md` follow (tested).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The cut it trains on.
    pub cut: CutRule,
    /// Whether it sends less than exact distributed training would (the five papers' methods),
    /// so that its modeled time shows what it saves.
    pub cuts_traffic: bool,
    /// The batch modes it trains with.
    pub batches: &'static [BatchMode],
    /// Whether it trains on a CUDA device (`device = "cuda"`); the others train on the CPU.
    pub cuda: bool,
    /// Whether its GPU workers can sum their gradients by NCCL (`backend = "nccl"`): their
    /// sync is the gradient all-reduce alone.
    pub nccl: bool,
    /// Its hidden layers' order where `layer-order` is not set (adaqp's paper puts dropout
    /// before LayerNorm and the activation).
    pub layer_order: LayerOrder,
    /// How its learning rate follows the number of workers where `lr-scaling` is not set, per
    /// optimizer; `None`: it takes no `lr-scaling`.
    pub lr_scaling: Option<LrDefaults>,
}

/// What a method does with `[distributed] cut`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutRule {
    /// It trains on the configured cut (vanilla).
    Configured,
    /// It always trains on this cut (adaqp's and ecgraph's halo exchanges, adgraph's parts,
    /// cdfgnn's replica sync); another `cut` would be ignored, so it is refused.
    Fixed(CutKind),
    /// It cuts no graph: one process, a replicated graph, or feature columns.
    None,
}

/// A method's learning-rate scaling where `lr-scaling` is not set, under each optimizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LrDefaults {
    pub adam: LrScaling,
    pub sgd: LrScaling,
}

impl LrDefaults {
    /// The scaling under `optimizer`.
    pub fn under(self, optimizer: OptimizerKind) -> LrScaling {
        match optimizer {
            OptimizerKind::Adam => self.adam,
            OptimizerKind::Sgd => self.sgd,
        }
    }
}

/// `[method.vanilla]`: exact distributed training.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct VanillaSettings {
    /// Send only the rows a receiver does not already hold bit for bit (lossless; it pays off
    /// where rows repeat across epochs, e.g. input features pulled without input dropout).
    #[cfg_attr(feature = "clap", arg(long))]
    pub skip_repeats: bool,
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

/// The method and the settings tables of every method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct MethodConfig {
    /// Training method.
    #[cfg_attr(feature = "clap", arg(long = "method", value_enum))]
    pub name: Method,
    /// Settings of `vanilla`.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = "Method vanilla"))]
    pub vanilla: VanillaSettings,
    /// Settings of `adaqp`.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = "Method adaqp"))]
    pub adaqp: AdaqpSettings,
    /// Settings of `adgraph`.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = "Method adgraph"))]
    pub adgraph: AdgraphSettings,
    /// Settings of `cdfgnn`.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = "Method cdfgnn"))]
    pub cdfgnn: CdfgnnSettings,
    /// Settings of `featpart`.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = "Method featpart"))]
    pub featpart: FeatpartSettings,
    /// Settings of `ecgraph`.
    #[cfg_attr(feature = "clap", command(flatten, next_help_heading = "Method ecgraph"))]
    pub ecgraph: EcgraphSettings,
}

impl MethodConfig {
    /// The default settings of `method`.
    pub fn named(method: Method) -> Self {
        Self { name: method, ..Self::default() }
    }

    /// Checks the settings, and the batch mode of the mini-batch ones against the method's
    /// [`Rules`]; the error names the key at fault.
    pub fn validate(&self, minibatch: &MiniBatchConfig) -> Result<(), ConfigError> {
        let name = self.name.as_str();
        let batches = self.name.rules().batches;
        let mode = BatchMode::of(minibatch);
        if !batches.contains(&mode) {
            let with = |mode: BatchMode| -> String {
                let names: Vec<&str> =
                    Method::ALL.iter().filter(|m| m.rules().batches.contains(&mode)).map(|m| m.as_str()).collect();
                names.join(", ")
            };
            let (key, message) = match mode {
                BatchMode::MiniBatch => {
                    ("batch-size", format!("{name} trains full-batch; mini-batches need {}", with(mode)))
                }
                _ if !batches.contains(&BatchMode::Full) => (
                    "batch-size",
                    format!("{name} trains on sampled mini-batches: set batch-size (seed vertices per worker)"),
                ),
                _ => (
                    "fanouts",
                    format!(
                        "without batch-size, fanouts sample every layer's in-edges per epoch, which {} do; {name} \
                         trains on every edge",
                        with(BatchMode::SampledEdges)
                    ),
                ),
            };
            return Err(ConfigError::Invalid { key, message });
        }
        if let Some(scaling) = minibatch.lr_scaling
            && self.name.rules().lr_scaling.is_none()
        {
            let takers: Vec<&str> =
                Method::ALL.iter().filter(|m| m.rules().lr_scaling.is_some()).map(|m| m.as_str()).collect();
            let message = format!(
                "{name} does not scale the learning rate, so `{}` would be ignored; {} take it",
                scaling.as_str(),
                takers.join(" and ")
            );
            return Err(ConfigError::Invalid { key: "lr-scaling", message });
        }
        match self.name {
            Method::Adaqp => self.adaqp.validate(),
            Method::Cdfgnn => self.cdfgnn.validate(),
            Method::Ecgraph => self.ecgraph.validate(),
            Method::Featpart => self.featpart.validate(),
            Method::Single | Method::Vanilla | Method::DataParallel | Method::Adgraph => Ok(()),
        }
    }

    /// The input-feature dropout rate of a model with hidden dropout `dropout` when the
    /// configuration names none (`input-dropout`): the same, except under `cdfgnn` with
    /// `cache-first-layer = "on"` (a new mask every epoch would defeat the first layer's cache).
    pub fn input_dropout(&self, dropout: f32) -> f32 {
        match (self.name, self.cdfgnn.cache_first_layer) {
            (Method::Cdfgnn, FirstLayerCache::On) => 0.0,
            _ => dropout,
        }
    }
}

/// Accepts `method = "name"` as well as the table.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<MethodConfig, D::Error> {
    struct Either;

    impl<'de> Visitor<'de> for Either {
        type Value = MethodConfig;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(
                "a method name (single, vanilla, data-parallel, adaqp, adgraph, cdfgnn, featpart, ecgraph) or a [method] table",
            )
        }

        fn visit_str<E: de::Error>(self, name: &str) -> Result<MethodConfig, E> {
            Method::deserialize(de::value::StrDeserializer::<E>::new(name)).map(MethodConfig::named)
        }

        fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<MethodConfig, M::Error> {
            MethodConfig::deserialize(de::value::MapAccessDeserializer::new(map))
        }
    }

    deserializer.deserialize_any(Either)
}

#[cfg(test)]
mod tests {
    use super::CutRule;
    use crate::config::{LrScaling, Method, TrainConfig, VanillaSettings};

    #[test]
    fn a_name_or_a_table_selects_the_method() {
        let c = TrainConfig::from_toml_str("method = \"vanilla\"\n", "m.toml").unwrap();
        assert_eq!(c.method.name, Method::Vanilla);
        let text = "[method]\nname = \"vanilla\"\n[method.vanilla]\nskip-repeats = true\n";
        let c = TrainConfig::from_toml_str(text, "m.toml").unwrap();
        assert_eq!((c.method.name, &c.method.vanilla), (Method::Vanilla, &VanillaSettings { skip_repeats: true }));
    }

    #[test]
    fn bad_method_settings_name_file_line_and_key() {
        let msg = TrainConfig::from_toml_str("method = \"magic\"\n", "m.toml").unwrap_err().to_string();
        assert!(msg.starts_with("m.toml:1: key `method`") && msg.contains("single"), "{msg}");
        let text = "[method]\nname = \"vanilla\"\n[method.vanilla]\nskip-repeat = true\n";
        let msg = TrainConfig::from_toml_str(text, "m.toml").unwrap_err().to_string();
        assert!(msg.starts_with("m.toml:4: key `skip-repeat`") && msg.contains("unknown field"), "{msg}");
    }

    #[test]
    fn data_parallel_needs_a_batch_size_and_vanilla_refuses_one() {
        let text = "method = \"data-parallel\"\n[minibatch]\nlr-scaling = \"linear\"\n";
        let msg = TrainConfig::from_toml_str(text, "m.toml").unwrap_err().to_string();
        assert!(msg.contains("key `batch-size`") && msg.contains("data-parallel"), "{msg}");
        let c = TrainConfig::from_toml_str(&format!("{text}batch-size = 32\n"), "m.toml").unwrap();
        assert_eq!((c.method.name, c.lr_scaling()), (Method::DataParallel, LrScaling::Linear));
        let text = "method = \"adgraph\"\n[minibatch]\nbatch-size = 32\n";
        let c = TrainConfig::from_toml_str(text, "m.toml").unwrap();
        assert_eq!(c.lr_scaling(), LrScaling::None, "adgraph's default under adam");
        let c = TrainConfig::from_toml_str(&format!("optimizer = \"sgd\"\n{text}"), "m.toml").unwrap();
        assert_eq!(c.lr_scaling(), LrScaling::Linear, "adgraph's default under sgd: the paper's rule");
        let text = "method = \"featpart\"\n[minibatch]\nbatch-size = 32\nlr-scaling = \"linear\"\n";
        let msg = TrainConfig::from_toml_str(text, "m.toml").unwrap_err().to_string();
        assert!(msg.starts_with("m.toml:4: key `lr-scaling`: featpart does not scale"), "{msg}");
        assert_eq!((LrScaling::Linear.factor(4), LrScaling::None.factor(4)), (4.0, 1.0));
        for method in ["adaqp", "cdfgnn"] {
            let text = format!("method = \"{method}\"\n[minibatch]\nfanouts = \"5,5\"\n");
            let msg = TrainConfig::from_toml_str(&text, "m.toml").unwrap_err().to_string();
            assert!(msg.contains("key `fanouts`") && msg.contains(method), "{msg}");
        }
        for method in ["single", "vanilla", "ecgraph"] {
            let text = format!("method = \"{method}\"\n[minibatch]\nfanouts = \"5,5\"\n");
            assert!(TrainConfig::from_toml_str(&text, "m.toml").is_ok(), "{method}");
        }
        let text = "method = \"vanilla\"\n[minibatch]\nbatch-size = 32\n";
        let msg = TrainConfig::from_toml_str(text, "m.toml").unwrap_err().to_string();
        assert!(msg.starts_with("m.toml:3: key `batch-size`") && msg.contains("full-batch"), "{msg}");
    }

    /// The method table of `docs/ARCHITECTURE.md` lists every method with the batches, cut and
    /// device its rules give.
    #[test]
    fn the_docs_method_table_follows_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ARCHITECTURE.md");
        let text = std::fs::read_to_string(path).unwrap();
        for method in Method::ALL {
            let start = format!("| `{}` |", method.as_str());
            let row = text.lines().find(|l| l.starts_with(&start)).unwrap_or_else(|| panic!("{path}: no row {start}"));
            // | Method | Data plan | Cut | Batches | Device | Settings |
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let rules = method.rules();
            let batches: Vec<&str> = rules.batches.iter().map(|b| b.as_str()).collect();
            assert_eq!(cells[4], batches.join(", "), "{row}");
            assert_eq!(cells[5].contains("CUDA"), rules.cuda, "{row}");
            match rules.cut {
                CutRule::Fixed(cut) => assert!(cells[3].starts_with(cut.as_str()), "{row}"),
                CutRule::Configured => assert!(cells[3].starts_with("configured"), "{row}"),
                CutRule::None => assert!(["none", "feature"].contains(&cells[3]), "{row}"),
            }
        }
    }

    #[test]
    fn the_report_form_reads_back() {
        let mut c = TrainConfig::default();
        c.method.name = Method::Vanilla;
        c.method.vanilla.skip_repeats = true;
        let text = toml::to_string(&c).unwrap();
        assert_eq!(TrainConfig::from_toml_str(&text, "round-trip").unwrap(), c);
    }
}
