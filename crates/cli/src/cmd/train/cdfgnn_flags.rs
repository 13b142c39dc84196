//! `--method cdfgnn`'s flags: the cache, the quantization of what the replica sync sends, and
//! the cache threshold's controller (`[method.cdfgnn]` in a config file).

use trainer::config::{EpsRule, TrainConfig};

/// A switch spelled `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum OnOff {
    On,
    Off,
}

#[derive(Debug, Clone, Default, clap::Args)]
pub(super) struct CdfgnnFlags {
    /// cdfgnn: the replica cache, CDFGNN's adaptive vertex cache on the replica sync (Alg. 2);
    /// not the dataset cache (--no-cache) nor ecgraph's halo feature cache (--halo-cache)
    /// [default: on].
    #[arg(long, value_enum, value_name = "on|off")]
    cache: Option<OnOff>,
    /// cdfgnn: bits of the linear quantization of what the sync sends (the deltas with the
    /// cache), 0 (off), 2, 4, 8 or 16 [default: 8].
    #[arg(long, value_name = "B")]
    quant_bits: Option<u8>,
    /// cdfgnn: how the cache threshold eps moves between epochs: prose (eq. 6 as the text
    /// describes it), printed (eq. 6 as printed), fixed, error-target [default: prose].
    #[arg(long, value_enum)]
    eps_controller: Option<EpsRule>,
    /// cdfgnn: the cache threshold, initial (constant with --eps-controller fixed) [default: 0.05].
    #[arg(long, value_name = "F", allow_negative_numbers = true)]
    eps: Option<f64>,
}

impl CdfgnnFlags {
    /// Overrides `[method.cdfgnn]` with the flags given (the method sets its vertex-cut itself:
    /// [`trainer::config::Method::cut`]).
    pub(super) fn apply(&self, c: &mut TrainConfig) {
        let s = &mut c.method.cdfgnn;
        if let Some(cache) = self.cache {
            s.cache = cache == OnOff::On;
        }
        s.quant_bits = self.quant_bits.unwrap_or(s.quant_bits);
        s.eps_controller = self.eps_controller.unwrap_or(s.eps_controller);
        s.eps = self.eps.unwrap_or(s.eps);
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: CdfgnnFlags,
    }

    fn applied(argv: &[&str]) -> TrainConfig {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(argv.iter().copied())).unwrap();
        let mut c = TrainConfig::default();
        cli.flags.apply(&mut c);
        c
    }

    #[test]
    fn flags_set_the_settings() {
        let argv = ["--cache", "off", "--quant-bits", "4", "--eps-controller", "error-target", "--eps", "0.2"];
        let s = applied(&argv).method.cdfgnn;
        assert_eq!((s.cache, s.quant_bits, s.eps_controller, s.eps), (false, 4, EpsRule::ErrorTarget, 0.2));
        assert_eq!(applied(&[]), TrainConfig::default());
        assert!(Cli::try_parse_from(["t", "--cache", "maybe"]).is_err());
    }
}
