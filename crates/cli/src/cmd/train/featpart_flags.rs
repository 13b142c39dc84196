//! `--method featpart`'s flags: the fetch plan and the target accuracy.

use trainer::config::{BiasEstimate, Eq20Step, Tau, TauRule, TrainConfig};

/// Flags of `[method.featpart]`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FeatpartFlags {
    /// featpart: local iterations between feature fetches: auto (tau* of eq. 20, recomputed at
    /// every fetch), inf (never fetch) or a count (0 fetches every iteration) [default: auto].
    #[arg(long, value_name = "auto|inf|N")]
    tau: Option<Tau>,
    /// featpart: the cap on tau* [default: 32].
    #[arg(long, value_name = "N")]
    tau_max: Option<usize>,
    /// featpart: how tau = auto applies eq. 20: eq20 (as it comes at every fetch) or
    /// non-increasing (at most the tau before: Remark 2's decreasing tau as a rule)
    /// [default: eq20].
    #[arg(long, value_name = "RULE")]
    tau_rule: Option<TauRule>,
    /// featpart: where tau = auto's sigma_bias comes from: trials (estimated at w_1 before
    /// training) or running-max (the largest of that and the one measured at every fetch,
    /// which costs a forward-backward and a gradient all-reduce more per fetch)
    /// [default: trials].
    #[arg(long, value_name = "ESTIMATE")]
    bias_estimate: Option<BiasEstimate>,
    /// featpart: what tau = auto's eq. 20 reads as eta: lr, or effective (the optimizer's
    /// ||delta w|| / ||g|| over the steps since the last fetch) [default: lr].
    #[arg(long, value_name = "STEP")]
    eq20_step: Option<Eq20Step>,
    /// featpart: report the modeled time to this test accuracy (held with variance below 1e-4
    /// over the epochs that cover 30 iterations).
    #[arg(long, value_name = "F")]
    target_acc: Option<f64>,
    /// featpart: trial iterations before training that estimate eq. 20's terms [default: 8].
    #[arg(long, value_name = "N")]
    fetch_trials: Option<usize>,
}

impl FeatpartFlags {
    /// Writes the given flags over `config`'s `[method.featpart]`.
    pub fn apply(&self, config: &mut TrainConfig) {
        let s = &mut config.method.featpart;
        if let Some(tau) = self.tau {
            s.tau = tau;
        }
        if let Some(n) = self.tau_max {
            s.tau_max = n;
        }
        if let Some(rule) = self.tau_rule {
            s.tau_rule = rule;
        }
        if let Some(estimate) = self.bias_estimate {
            s.bias_estimate = estimate;
        }
        if let Some(step) = self.eq20_step {
            s.eq20_step = step;
        }
        if self.target_acc.is_some() {
            s.target_acc = self.target_acc;
        }
        if let Some(n) = self.fetch_trials {
            s.trials = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use trainer::config::{BiasEstimate, Eq20Step, Tau, TauRule};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: FeatpartFlags,
    }

    #[test]
    fn flags_set_the_featpart_table() {
        let cli = Cli::try_parse_from(["t", "--tau", "inf", "--tau-max", "12", "--target-acc", "0.7"]).unwrap();
        let mut c = TrainConfig::default();
        cli.flags.apply(&mut c);
        let s = &c.method.featpart;
        assert_eq!(
            (s.tau, s.tau_max, s.tau_rule, s.target_acc, s.trials),
            (Tau::Never, 12, TauRule::Eq20, Some(0.7), 8)
        );
        let cli = Cli::try_parse_from(["t", "--tau-rule", "non-increasing"]).unwrap();
        cli.flags.apply(&mut c);
        assert_eq!(c.method.featpart.tau_rule, TauRule::NonIncreasing);
        let cli = Cli::try_parse_from(["t", "--bias-estimate", "running-max", "--eq20-step", "effective"]).unwrap();
        cli.flags.apply(&mut c);
        let s = &c.method.featpart;
        assert_eq!((s.bias_estimate, s.eq20_step), (BiasEstimate::RunningMax, Eq20Step::Effective));
        for (flag, value) in [("--bias-estimate", "max"), ("--eq20-step", "adam")] {
            let err = Cli::try_parse_from(["t", flag, value]).err().unwrap().to_string();
            assert!(err.contains(flag) && err.contains(value), "{err}");
        }
        let err = Cli::try_parse_from(["t", "--tau", "often"]).err().unwrap().to_string();
        assert!(err.contains("often") && err.contains("auto"), "{err}");
    }
}
