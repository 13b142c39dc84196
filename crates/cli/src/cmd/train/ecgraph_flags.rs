//! `halo train` flags of the `ecgraph` method (`[method.ecgraph]`).

use trainer::config::TrainConfig;

use super::adaqp_flags::on_off;

/// Flags of `--method ecgraph` (any `[method.ecgraph]` key).
#[derive(Debug, clap::Args)]
pub struct EcgraphFlags {
    /// ecgraph: bucket bits of the forward halo rows, 1, 2, 4, 8, 16 or 32 (exact); the bit
    /// tuner's start [default: 2].
    #[arg(long, value_name = "B")]
    fp_bits: Option<u8>,
    /// ecgraph: bucket bits of the backward halo gradients, 1, 2, 4, 8, 16 or 32 (exact)
    /// [default: 4].
    #[arg(long, value_name = "B")]
    bp_bits: Option<u8>,
    /// ecgraph: ReqEC-FP (trend prediction and per-row selection) on the forward rows
    /// [default: on].
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    reqec: Option<bool>,
    /// ecgraph: ResEC-BP (residual feedback) on the backward rows [default: on].
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    resec: Option<bool>,
    /// ecgraph: Alg. 3's bit tuner on each layer's forward bits (needs --reqec on) [default: on].
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    bit_tuner: Option<bool>,
    /// ecgraph: trend group length T_tr in epochs [default: 10].
    #[arg(long, value_name = "N")]
    trend: Option<usize>,
    /// ecgraph: ship the change rate M_cr with every full round (the paper's bytes) instead of
    /// deriving it at the receiver.
    #[arg(long)]
    send_change_rate: bool,
    /// ecgraph: the tuner doubles a layer's bits above this predicted share [default: 0.6].
    #[arg(long, value_name = "F")]
    tuner_up: Option<f64>,
    /// ecgraph: the tuner halves a layer's bits below this predicted share [default: 0.4].
    #[arg(long, value_name = "F")]
    tuner_down: Option<f64>,
    /// ecgraph: the halo feature cache: fetch the halo rows' input features once at setup, so
    /// that layer 0 exchanges nothing [default: on].
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    halo_cache: Option<bool>,
}

impl EcgraphFlags {
    /// Writes the given flags over `config`.
    pub fn apply(&self, config: &mut TrainConfig) {
        let s = &mut config.method.ecgraph;
        s.fp_bits = self.fp_bits.unwrap_or(s.fp_bits);
        s.bp_bits = self.bp_bits.unwrap_or(s.bp_bits);
        s.reqec = self.reqec.unwrap_or(s.reqec);
        s.resec = self.resec.unwrap_or(s.resec);
        s.bit_tuner = self.bit_tuner.unwrap_or(s.bit_tuner);
        s.trend = self.trend.unwrap_or(s.trend);
        s.send_change_rate |= self.send_change_rate;
        s.tuner_up = self.tuner_up.unwrap_or(s.tuner_up);
        s.tuner_down = self.tuner_down.unwrap_or(s.tuner_down);
        s.halo_cache = self.halo_cache.unwrap_or(s.halo_cache);
    }
}

#[cfg(test)]
mod tests {
    use trainer::config::Method;

    use crate::cmd::train::config_from_flags;

    fn flags(argv: &[&str]) -> anyhow::Result<trainer::config::TrainConfig> {
        config_from_flags(&argv.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn ecgraph_flags_set_the_method_table() {
        let argv = ["--method", "ecgraph", "--fp-bits", "4", "--bp-bits", "8", "--trend", "5", "--send-change-rate"];
        let c = flags(&[&argv[..], &["--resec", "off", "--tuner-up", "0.7"]].concat()).unwrap();
        let s = &c.method.ecgraph;
        assert_eq!((c.method.name, s.fp_bits, s.bp_bits, s.trend), (Method::Ecgraph, 4, 8, 5));
        assert_eq!((s.send_change_rate, s.resec, s.reqec, s.tuner_up), (true, false, true, 0.7));
        assert!(s.halo_cache, "on unless turned off");
        let c = flags(&["--method", "ecgraph", "--halo-cache", "off"]).unwrap();
        assert!(!c.method.ecgraph.halo_cache);
        let off = ["--method", "ecgraph", "--fp-bits", "32", "--bp-bits", "32", "--reqec", "off", "--resec", "off"];
        assert!(flags(&[&off[..], &["--bit-tuner", "off"]].concat()).is_ok());
        let err = flags(&off).unwrap_err();
        assert!(format!("{err:#}").contains("`fp-bits`"), "{err:#}");
        let err = flags(&["--method", "ecgraph", "--reqec", "maybe"]).unwrap_err();
        assert!(err.to_string().contains("--reqec"), "{err}");
    }
}
