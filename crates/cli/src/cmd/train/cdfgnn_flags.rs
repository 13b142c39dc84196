//! `--method cdfgnn`'s flags: the cache, the quantization of what the replica sync sends, and
//! the cache threshold's controller (`[method.cdfgnn]` in a config file).

use graph_partition::book::CutKind;
use trainer::config::{EpsRule, Method, TrainConfig};

/// A switch spelled `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum OnOff {
    On,
    Off,
}

#[derive(Debug, Clone, Default, clap::Args)]
pub(super) struct CdfgnnFlags {
    /// cdfgnn: the adaptive vertex cache on the replica sync (Alg. 2) [default: on].
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
    /// The flags given on the command line.
    pub(super) fn given(&self) -> Vec<&'static str> {
        let given = [
            ("--cache", self.cache.is_some()),
            ("--quant-bits", self.quant_bits.is_some()),
            ("--eps-controller", self.eps_controller.is_some()),
            ("--eps", self.eps.is_some()),
        ];
        given.into_iter().filter(|(_, given)| *given).map(|(flag, _)| flag).collect()
    }

    /// Overrides `[method.cdfgnn]` with the flags given. cdfgnn is vertex-cut by definition, so
    /// it sets the cut too (`--partitioner` is then checked against it).
    pub(super) fn apply(&self, c: &mut TrainConfig) {
        let s = &mut c.method.cdfgnn;
        if let Some(cache) = self.cache {
            s.cache = cache == OnOff::On;
        }
        s.quant_bits = self.quant_bits.unwrap_or(s.quant_bits);
        s.eps_controller = self.eps_controller.unwrap_or(s.eps_controller);
        s.eps = self.eps.unwrap_or(s.eps);
        if c.method.name == Method::Cdfgnn {
            c.distributed.cut = CutKind::VertexCut;
        }
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

    fn applied(argv: &[&str], method: Method) -> (TrainConfig, Vec<&'static str>) {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(argv.iter().copied())).unwrap();
        let mut c = TrainConfig::default();
        c.method.name = method;
        cli.flags.apply(&mut c);
        (c, cli.flags.given())
    }

    #[test]
    fn flags_set_the_settings_and_the_cut() {
        let argv = ["--cache", "off", "--quant-bits", "4", "--eps-controller", "error-target", "--eps", "0.2"];
        let (c, given) = applied(&argv, Method::Cdfgnn);
        let s = &c.method.cdfgnn;
        assert_eq!((s.cache, s.quant_bits, s.eps_controller, s.eps), (false, 4, EpsRule::ErrorTarget, 0.2));
        assert_eq!(c.distributed.cut, CutKind::VertexCut);
        assert_eq!(given, ["--cache", "--quant-bits", "--eps-controller", "--eps"]);
        let (c, given) = applied(&[], Method::Vanilla);
        let vanilla =
            TrainConfig { method: trainer::config::MethodConfig::named(Method::Vanilla), ..Default::default() };
        assert_eq!((c, given.is_empty()), (vanilla, true));
        assert!(Cli::try_parse_from(["t", "--cache", "maybe"]).is_err());
    }
}
