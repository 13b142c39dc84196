//! The experiment file: its TOML layout (see the [module docs](super)) and its validation.
//!
//! Every error names the file, the line and the key at fault, through the same
//! [`ConfigError::Toml`] that `halo train --config` reports.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{ConfigError, toml_error};

/// A validated experiment: a grid of variants x seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentSpec {
    /// The experiment's name, echoed in the results.
    pub name: String,
    /// Seeds every variant runs with, in order; distinct.
    pub seeds: Vec<u64>,
    /// `halo train` flags shared by every variant, placed before the variant's own.
    pub base: Vec<String>,
    /// The 1-based line of each of `base`'s flags, for errors about them.
    pub base_lines: Vec<usize>,
    /// Name of the variant the others are compared with.
    pub baseline: String,
    /// The variants, in file order; names distinct and usable in file names.
    pub variants: Vec<Variant>,
}

/// One named set of `halo train` flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Name, used in the results and in the file names of its runs.
    pub name: String,
    /// The variant's own flags (after the experiment's `base`).
    pub flags: Vec<String>,
    /// 1-based line of its `flags` (of its `name` when it has none), for errors about its flags.
    pub line: usize,
}

/// Flags the runner sets itself for every run; a value in the file would be silently replaced.
const RUNNER_FLAGS: [&str; 2] = ["--seed", "--report"];
/// Outputs every run of the grid would write to one path, each over the one before.
const SHARED_OUTPUTS: [&str; 2] = ["--save-model", "--checkpoint-dir"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Spanned<String>,
    seeds: Spanned<Vec<Spanned<u64>>>,
    #[serde(default)]
    base: Vec<Spanned<String>>,
    baseline: Spanned<String>,
    variant: Spanned<Vec<RawVariant>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    name: Spanned<String>,
    flags: Option<Spanned<Vec<Spanned<String>>>>,
}

impl ExperimentSpec {
    /// Reads and validates an experiment file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Parses and validates experiment TOML; `origin` names it in errors (usually the file path).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let raw: RawSpec = toml::from_str(text).map_err(|err| toml_error(text, origin, &err))?;
        let line = |span: std::ops::Range<usize>| text[..span.start.min(text.len())].matches('\n').count() + 1;
        let at = |span: std::ops::Range<usize>, key: String, message: String| ConfigError::Toml {
            origin: origin.to_string(),
            line: line(span),
            key: Some(key),
            message,
        };

        if raw.name.get_ref().trim().is_empty() {
            return Err(at(raw.name.span(), "name".into(), "must not be empty".into()));
        }
        if raw.seeds.get_ref().is_empty() {
            return Err(at(raw.seeds.span(), "seeds".into(), "must list at least one seed".into()));
        }
        let mut seen = HashSet::new();
        for seed in raw.seeds.get_ref() {
            if !seen.insert(*seed.get_ref()) {
                return Err(at(seed.span(), "seeds".into(), format!("seed {} is listed twice", seed.get_ref())));
            }
        }
        check_flags(&raw.base, "base", &at)?;
        if raw.variant.get_ref().is_empty() {
            return Err(at(raw.variant.span(), "variant".into(), "at least one [[variant]] is needed".into()));
        }
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (i, v) in raw.variant.get_ref().iter().enumerate() {
            let key = format!("variant[{i}].name");
            let name = v.name.get_ref().as_str();
            if let Some(message) = file_name_problem(name) {
                return Err(at(v.name.span(), key, message));
            }
            if let Some(first) = names.insert(name, i) {
                return Err(at(v.name.span(), key, format!("`{name}` is also the name of variant[{first}]")));
            }
            check_flags(v.flags.as_ref().map_or(&[], |f| f.get_ref()), &format!("variant[{i}].flags"), &at)?;
        }
        let baseline = raw.baseline.get_ref();
        if !names.contains_key(baseline.as_str()) {
            let mut known: Vec<&str> = raw.variant.get_ref().iter().map(|v| v.name.get_ref().as_str()).collect();
            known.sort_unstable();
            let message = format!("`{baseline}` is not a variant (variants: {})", known.join(", "));
            return Err(at(raw.baseline.span(), "baseline".into(), message));
        }

        let strings = |flags: Vec<Spanned<String>>| flags.into_iter().map(Spanned::into_inner).collect();
        Ok(Self {
            name: raw.name.into_inner(),
            seeds: raw.seeds.into_inner().into_iter().map(Spanned::into_inner).collect(),
            base_lines: raw.base.iter().map(|flag| line(flag.span())).collect(),
            base: strings(raw.base),
            baseline: raw.baseline.into_inner(),
            variants: raw
                .variant
                .into_inner()
                .into_iter()
                .map(|v| Variant {
                    line: line(v.flags.as_ref().map_or(v.name.span(), Spanned::span)),
                    name: v.name.into_inner(),
                    flags: v.flags.map_or_else(Vec::new, |f| strings(f.into_inner())),
                })
                .collect(),
        })
    }

    /// The line of the base flag that `message` (an error about flags) names: the first flag of
    /// `base` it quotes, else `base`'s first line; `None` without base flags.
    pub fn base_line_named(&self, message: &str) -> Option<usize> {
        let named = self.base.iter().position(|flag| flag.starts_with("--") && message.contains(flag.as_str()));
        self.base_lines.get(named.unwrap_or(0)).copied()
    }

    /// The full `halo train` flags of `variant`: the base flags, then its own.
    pub fn train_flags(&self, variant: &Variant) -> Vec<String> {
        self.base.iter().chain(&variant.flags).cloned().collect()
    }
}

/// Rejects the flags the runner sets itself (`--seed`, `--report`, also as `--seed=N`) and the
/// outputs every run would write alike (`--save-model`, `--checkpoint-dir`).
fn check_flags(
    flags: &[Spanned<String>],
    key: &str,
    at: &impl Fn(std::ops::Range<usize>, String, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for (i, flag) in flags.iter().enumerate() {
        let name = flag.get_ref().split('=').next().unwrap_or_default();
        let message = if RUNNER_FLAGS.contains(&name) {
            format!("`{name}` is set by the runner for every run (seeds come from `seeds`)")
        } else if SHARED_OUTPUTS.contains(&name) {
            format!("`{name}` would be written by every run of the grid, each run over the one before")
        } else {
            continue;
        };
        return Err(at(flag.span(), format!("{key}[{i}]"), message));
    }
    Ok(())
}

/// Why `name` cannot name a variant (it becomes part of file names), if it cannot.
fn file_name_problem(name: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() {
        Some("must not be empty".into())
    } else if name.starts_with(['.', '-']) || !name.chars().all(allowed) {
        Some(format!("`{name}` must be made of ASCII letters, digits, `-`, `_` and `.`, not starting with `.` or `-`"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOKE: &str = r#"
name = "t"
seeds = [0, 1, 2]
base = ["--epochs", "3"]
baseline = "vanilla"

[[variant]]
name = "single"

[[variant]]
name = "vanilla"
flags = ["--method", "vanilla", "--workers", "2"]
"#;

    fn error(text: &str) -> String {
        ExperimentSpec::from_toml_str(text, "e.toml").unwrap_err().to_string()
    }

    #[test]
    fn base_flags_know_their_lines() {
        let text =
            SMOKE.replace("base = [\"--epochs\", \"3\"]", "base = [\n  \"--epochs\", \"3\",\n  \"--lr\", \"x\",\n]");
        let spec = ExperimentSpec::from_toml_str(&text, "e.toml").unwrap();
        assert_eq!(spec.base_lines, [5, 5, 6, 6]);
        assert_eq!(spec.base_line_named("invalid value 'x' for '--lr <F>'"), Some(6));
        assert_eq!(spec.base_line_named("something else"), Some(5), "the first line when no flag is named");
    }

    #[test]
    fn parses_the_grid_and_prefixes_the_base_flags() {
        let spec = ExperimentSpec::from_toml_str(SMOKE, "e.toml").unwrap();
        assert_eq!(spec.name, "t");
        assert_eq!(spec.seeds, [0, 1, 2]);
        assert_eq!(spec.baseline, "vanilla");
        let names: Vec<&str> = spec.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["single", "vanilla"]);
        assert!(spec.variants[0].flags.is_empty(), "flags default to none");
        assert_eq!((spec.variants[0].line, spec.variants[1].line), (8, 12), "flags' line, else the name's");
        assert_eq!(spec.train_flags(&spec.variants[1]), ["--epochs", "3", "--method", "vanilla", "--workers", "2"]);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let cases = [
            (SMOKE.replace("seeds = [0, 1, 2]", "seeds = [0, 1, 1]"), "e.toml:3: key `seeds`: seed 1 is listed twice"),
            (SMOKE.replace("seeds = [0, 1, 2]", "seeds = []"), "e.toml:3: key `seeds`: must list at least one"),
            (SMOKE.replace("baseline = \"vanilla\"", "baseline = \"fast\""), "e.toml:5: key `baseline`: `fast` is not"),
            (SMOKE.replace("name = \"single\"", "name = \"vanilla\""), "e.toml:11: key `variant[1].name`: `vanilla`"),
            (SMOKE.replace("name = \"single\"", "name = \"a/b\""), "e.toml:8: key `variant[0].name`: `a/b` must"),
            (SMOKE.replace("\"--epochs\", \"3\"", "\"--seed=3\""), "e.toml:4: key `base[0]`: `--seed` is set by"),
            (
                SMOKE.replace("\"--workers\", \"2\"", "\"--report\", \"r.json\""),
                "e.toml:12: key `variant[1].flags[2]`: `--report`",
            ),
            (
                SMOKE.replace("\"--workers\", \"2\"", "\"--save-model\", \"m.safetensors\""),
                "e.toml:12: key `variant[1].flags[2]`: `--save-model` would be written by every run",
            ),
            (
                SMOKE.replace("\"--epochs\", \"3\"", "\"--checkpoint-dir=ck\""),
                "e.toml:4: key `base[0]`: `--checkpoint-dir` would be written by every run",
            ),
            (SMOKE.replace("name = \"t\"", "name = \" \""), "e.toml:2: key `name`: must not be empty"),
        ];
        for (text, want) in cases {
            let got = error(&text);
            assert!(got.starts_with(want), "want `{want}`, got `{got}`");
        }
    }

    #[test]
    fn serde_errors_name_the_line_and_key_too() {
        let got = error(&SMOKE.replace("name = \"single\"", "name = \"single\"\nflagz = []"));
        assert!(got.starts_with("e.toml:9: key `flagz`: unknown field `flagz`"), "{got}");
        let got = error(&SMOKE.replace("seeds = [0, 1, 2]", "seeds = [0, -1]"));
        assert!(got.starts_with("e.toml:3: key `seeds`"), "{got}");
        let got = error("name = \"t\"\nseeds = [0]\nbaseline = \"a\"\n");
        assert!(got.contains("variant"), "a missing table is named: {got}");
    }

    #[test]
    fn no_variant_is_an_error() {
        let got = error("name = \"t\"\nseeds = [0]\nbaseline = \"a\"\nvariant = []\n");
        assert!(got.starts_with("e.toml:4: key `variant`: at least one"), "{got}");
    }

    #[test]
    fn missing_file_is_named() {
        let err = ExperimentSpec::from_file(Path::new("/nonexistent/grid.toml")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/grid.toml"), "{err}");
    }
}
