//! `[method.ecgraph]`: EC-Graph's compressed edge-cut exchange (`--fp-bits`, `--bp-bits`,
//! `--reqec`, `--resec`, `--bit-tuner`, `--trend`, `--send-change-rate`, the tuner's
//! thresholds `tuner-up` / `tuner-down`) and its halo feature cache (`--halo-cache`).

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, MethodSettings, TrainConfig};

/// Bucket widths a direction may use; 32 sends the rows exactly (no compression).
pub const ECGRAPH_BITS: [u8; 6] = [1, 2, 4, 8, 16, 32];

/// Settings of `ecgraph`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct EcgraphSettings {
    /// Bucket bits of the forward halo rows, 1, 2, 4, 8, 16 or 32 (exact); the bit tuner's
    /// start.
    #[cfg_attr(feature = "clap", arg(long, value_name = "B"))]
    pub fp_bits: u8,
    /// Bucket bits of the backward halo gradients, 1, 2, 4, 8, 16 or 32 (exact).
    #[cfg_attr(feature = "clap", arg(long, value_name = "B"))]
    pub bp_bits: u8,
    /// ReqEC-FP (trend prediction and per-row selection) on the forward rows.
    #[cfg_attr(feature = "clap", arg(long))]
    pub reqec: bool,
    /// ResEC-BP (residual feedback) on the backward rows.
    #[cfg_attr(feature = "clap", arg(long))]
    pub resec: bool,
    /// Alg. 3's bit tuner on each layer's forward bits (needs --reqec on).
    #[cfg_attr(feature = "clap", arg(long))]
    pub bit_tuner: bool,
    /// Trend group length T_tr in epochs.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub trend: usize,
    /// Ship the change rate M_cr with every full round (the paper's bytes) instead of deriving
    /// it at the receiver.
    #[cfg_attr(feature = "clap", arg(long))]
    pub send_change_rate: bool,
    /// The tuner doubles a layer's bits above this predicted share.
    #[cfg_attr(feature = "clap", arg(long, value_name = "F"))]
    pub tuner_up: f64,
    /// The tuner halves a layer's bits below this predicted share.
    #[cfg_attr(feature = "clap", arg(long, value_name = "F"))]
    pub tuner_down: f64,
    /// The halo feature cache: fetch the halo rows' input features once at setup, so that layer
    /// 0 exchanges nothing; not the dataset cache (--no-cache) nor cdfgnn's replica cache
    /// (--replica-cache).
    #[cfg_attr(feature = "clap", arg(long))]
    pub halo_cache: bool,
}

impl Default for EcgraphSettings {
    fn default() -> Self {
        Self {
            fp_bits: 2,
            bp_bits: 4,
            reqec: true,
            resec: true,
            bit_tuner: true,
            trend: 10,
            send_change_rate: false,
            tuner_up: 0.6,
            tuner_down: 0.4,
            halo_cache: true,
        }
    }
}

impl EcgraphSettings {
    /// Checks the ranges; the error names the key (= flag).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        for (key, bits) in [("fp-bits", self.fp_bits), ("bp-bits", self.bp_bits)] {
            if !ECGRAPH_BITS.contains(&bits) {
                return invalid(key, format!("must be 1, 2, 4, 8, 16 or 32 (exact), got {bits}"));
            }
        }
        if self.fp_bits == 32 && (self.reqec || self.bit_tuner) {
            return invalid("fp-bits", "is 32 (exact): turn reqec and bit-tuner off".to_string());
        }
        if self.bp_bits == 32 && self.resec {
            return invalid("bp-bits", "is 32 (exact): turn resec off".to_string());
        }
        if self.bit_tuner && !self.reqec {
            return invalid("bit-tuner", "follows ReqEC-FP's predicted share: needs reqec on".to_string());
        }
        if self.trend == 0 {
            return invalid("trend", "must be at least 1, got 0".to_string());
        }
        let share = |x: f64| (0.0..=1.0).contains(&x);
        if !(share(self.tuner_down) && share(self.tuner_up) && self.tuner_down <= self.tuner_up) {
            return invalid(
                "tuner-up",
                format!(
                    "and tuner-down must satisfy 0 <= down <= up <= 1, got {} and {}",
                    self.tuner_up, self.tuner_down
                ),
            );
        }
        Ok(())
    }
}

impl MethodSettings for EcgraphSettings {
    fn check(&self, _config: &TrainConfig) -> Result<(), ConfigError> {
        self.validate()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Method, TrainConfig};

    #[test]
    fn the_table_reads_and_bad_values_name_their_key() {
        let text = "[method]\nname = \"ecgraph\"\n[method.ecgraph]\nfp-bits = 4\ntrend = 5\ntuner-up = 0.7\n";
        let c = TrainConfig::from_toml_str(text, "e.toml").unwrap();
        let s = &c.method.ecgraph;
        assert_eq!((c.method.name, s.fp_bits, s.bp_bits, s.trend, s.tuner_up), (Method::Ecgraph, 4, 4, 5, 0.7));
        assert!(s.halo_cache, "the paper fetches the halo features once: on by default");
        let off = TrainConfig::from_toml_str(&format!("{text}halo-cache = false\n"), "e.toml").unwrap();
        assert!(!off.method.ecgraph.halo_cache);
        let msg = TrainConfig::from_toml_str(&text.replace("= 4", "= 3"), "e.toml").unwrap_err().to_string();
        assert!(msg.starts_with("e.toml:4: key `fp-bits`"), "{msg}");
        let msg = TrainConfig::from_toml_str(&text.replace("= 5", "= 0"), "e.toml").unwrap_err().to_string();
        assert!(msg.contains("`trend`"), "{msg}");
        let msg = TrainConfig::from_toml_str(&format!("{text}reqec = false\n"), "e.toml").unwrap_err().to_string();
        assert!(msg.contains("`bit-tuner`"), "{msg}");
        let exact = "[method]\nname = \"ecgraph\"\n[method.ecgraph]\nbp-bits = 32\n";
        let msg = TrainConfig::from_toml_str(exact, "e.toml").unwrap_err().to_string();
        assert!(msg.contains("`bp-bits`") && msg.contains("resec off"), "{msg}");
    }
}
