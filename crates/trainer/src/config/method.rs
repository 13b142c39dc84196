//! The registry of methods: which method trains, and each method's own settings.
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
//! The macro `methods!` lists every method once, one line each. [`Method`] and
//! [`MethodConfig`] are made from that list here, and `crate::plan::lookup` above the methods.
//! Everything else a method is lives in its folder `method/<name>/` (`docs/ARCHITECTURE.md`,
//! "Adding a method"; the tidy test `xtask/src/tidy/method_names.rs` checks that shared code
//! names a method on at most two lines and reads no method's settings).

use graph_partition::book::CutKind;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{BatchMode, ConfigError, CutRule, MethodSettings, Rules, TrainConfig};

/// The registry: every method, one line each under its doc comment (its help in `halo train
/// --help`): its variant, its name on the command line, in TOML and in reports, its folder
/// `method/<folder>/`, and the type of its `[method.<name>]` table where it has one.
///
/// The folder holds the rest: `rules.rs` (`RULES`, its [`Rules`]), `settings.rs` (its table,
/// whose public items the configuration re-exports), `mod.rs` (`Def`, its
/// `crate::method::MethodDef`), and its own runner where its data plan needs one.
/// `methods!(then)` hands the list to the macro `then`.
macro_rules! methods {
    ($then:ident) => {
        $then! {
            /// One process holds the whole graph; no communication.
            #[default]
            Single("single") => single,
            /// Distributed full-batch training with an exact exchange (see `[distributed]` / `--cut`).
            Vanilla("vanilla") => vanilla: VanillaSettings,
            /// Every worker holds the whole graph and trains on its share of each sampled global
            /// mini-batch; gradients are all-reduced every step (needs `[minibatch] batch-size`).
            DataParallel("data-parallel") => data_parallel,
            /// Distributed full-batch edge-cut training with AdaQP's stochastic message quantization
            /// and adaptive bit-widths (`[method.adaqp]`).
            Adaqp("adaqp") => adaqp: AdaqpSettings,
            /// ADGraph: a part per worker extended by the l-hop neighbourhood of its training
            /// vertices, mini-batches sampled inside it, gradients all-reduced (needs `[minibatch]
            /// batch-size`; settings in `[method.adgraph]`).
            Adgraph("adgraph") => adgraph: AdgraphSettings,
            /// Vertex-cut full-batch training whose replica sync goes through CDFGNN's adaptive cache
            /// and quantized deltas (`[method.cdfgnn]`).
            Cdfgnn("cdfgnn") => cdfgnn: CdfgnnSettings,
            /// Feature-only partition: every worker holds the structure and a block of feature columns,
            /// and fetches the other columns every tau iterations (needs `[minibatch] batch-size`).
            Featpart("featpart") => featpart: FeatpartSettings,
            /// Distributed full-batch edge-cut training with EC-Graph's bucket compression, ReqEC-FP,
            /// ResEC-BP and bit tuner (`[method.ecgraph]`).
            Ecgraph("ecgraph") => ecgraph: EcgraphSettings,
        }
    };
}
pub(crate) use methods;

/// Makes [`Method`] and [`MethodConfig`] from the registry's list, and re-exports each
/// method's settings.
macro_rules! registry {
    ($( $(#[$doc:meta])* $variant:ident($name:literal) => $folder:ident $(: $settings:ident)?, )*) => {
        /// The training methods.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
        #[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
        #[serde(rename_all = "kebab-case")]
        pub enum Method {
            $( $(#[$doc])* $variant, )*
        }

        impl Method {
            /// Every method, in the order of `halo train --help`.
            pub const ALL: [Method; [$($name),*].len()] = [$(Method::$variant),*];

            /// What the method fixes and accepts (its folder's `RULES`).
            pub fn rules(self) -> Rules {
                match self {
                    $( Method::$variant => crate::method::$folder::rules::RULES, )*
                }
            }

            /// The name used on the command line, in TOML and in reports.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Method::$variant => $name, )*
                }
            }
        }

        $( $(
            #[allow(unused_imports, reason = "the glob adds the other public items of the settings where there are any")]
            pub use crate::method::$folder::settings::{$settings, *};
        )? )*

        /// The method and the settings tables of every method.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
        #[cfg_attr(feature = "clap", derive(clap::Args))]
        #[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
        pub struct MethodConfig {
            /// Training method.
            #[cfg_attr(feature = "clap", arg(long = "method", value_enum))]
            pub name: Method,
            $( $(
                #[doc = concat!("Settings of `", $name, "`.")]
                #[cfg_attr(feature = "clap", command(flatten, next_help_heading = concat!("Method ", $name)))]
                pub $folder: $settings,
            )? )*
        }

        impl MethodConfig {
            /// The named method's `[method.<name>]` table; `None` for a method without one.
            pub fn settings(&self) -> Option<&dyn MethodSettings> {
                match self.name {
                    $( Method::$variant => { $( let own: &$settings = &self.$folder; return Some(own); )? } )*
                }
                None
            }
        }
    };
}
methods!(registry);

impl Method {
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

    /// The names of the methods whose rules `keep`, joined by `sep`.
    pub(crate) fn names_where(keep: impl Fn(&Rules) -> bool, sep: &str) -> String {
        let names: Vec<&str> = Method::ALL.iter().filter(|m| keep(&m.rules())).map(|m| m.as_str()).collect();
        names.join(sep)
    }
}

impl MethodConfig {
    /// The default settings of `method`.
    pub fn named(method: Method) -> Self {
        Self { name: method, ..Self::default() }
    }

    /// Checks the batch mode and learning-rate scaling of `config` against the method's
    /// [`Rules`], then the method's own settings; the error names the key at fault.
    pub fn validate(&self, config: &TrainConfig) -> Result<(), ConfigError> {
        let (name, minibatch) = (self.name.as_str(), &config.minibatch);
        let batches = self.name.rules().batches;
        let mode = BatchMode::of(minibatch);
        if !batches.contains(&mode) {
            let with = |mode: BatchMode| Method::names_where(|r| r.batches.contains(&mode), ", ");
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
            let message = format!(
                "{name} does not scale the learning rate, so `{}` would be ignored; {} take it",
                scaling.as_str(),
                Method::names_where(|r| r.lr_scaling.is_some(), " and ")
            );
            return Err(ConfigError::Invalid { key: "lr-scaling", message });
        }
        self.settings().map_or(Ok(()), |settings| settings.check(config))
    }

    /// The input-feature dropout rate of a model with hidden dropout `dropout` when the
    /// configuration names none (`input-dropout`): the same, unless the method's settings say
    /// otherwise ([`MethodSettings::input_dropout`]).
    pub fn input_dropout(&self, dropout: f32) -> f32 {
        self.settings().map_or(dropout, |settings| settings.input_dropout(dropout))
    }
}

/// Accepts `method = "name"` as well as the table.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<MethodConfig, D::Error> {
    struct Either;

    impl<'de> Visitor<'de> for Either {
        type Value = MethodConfig;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a method name ({}) or a [method] table", Method::names_where(|_| true, ", "))
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

    /// The method table of `docs/ARCHITECTURE.md` lists every method with the batches and cut its
    /// rules give.
    #[test]
    fn the_docs_method_table_follows_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ARCHITECTURE.md");
        let text = std::fs::read_to_string(path).unwrap();
        for method in Method::ALL {
            let start = format!("| `{}` |", method.as_str());
            let row = text.lines().find(|l| l.starts_with(&start)).unwrap_or_else(|| panic!("{path}: no row {start}"));
            // | Method | Data plan | Cut | Batches | Settings |
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let rules = method.rules();
            let batches: Vec<&str> = rules.batches.iter().map(|b| b.as_str()).collect();
            assert_eq!(cells[4], batches.join(", "), "{row}");
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
