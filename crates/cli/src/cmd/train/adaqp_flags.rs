//! `halo train` flags of the `adaqp` method (`[method.adaqp]`).

use trainer::config::{Beta, Bits, TrainConfig};

/// Flags of `--method adaqp` (any `[method.adaqp]` key).
#[derive(Debug, clap::Args)]
pub struct AdaqpFlags {
    /// adaqp: bits per quantized row: 2, 4, 8, adaptive (problem (12) per group of rows), or
    /// random (a random width per group), or adaptive-random-budget (adaptive within the bytes
    /// of random's widths) [default: adaptive].
    #[arg(long, value_enum)]
    bits: Option<Bits>,
    /// adaqp: rows per group of the bit-width assignment [default: 20].
    #[arg(long, value_name = "N")]
    group_size: Option<usize>,
    /// adaqp: weight of the variance objective against the time objective, in [0, 1]
    /// [default: 0.5].
    #[arg(long, value_name = "F")]
    lambda: Option<f64>,
    /// adaqp: epochs between bit-width assignments (8 bits until the first) [default: 50].
    #[arg(long, value_name = "N")]
    assign_period: Option<usize>,
    /// adaqp: a row's aggregation weight: the paper's sum of squared coefficients or the
    /// authors' code's squared sum [default: sum-of-squares].
    #[arg(long, value_enum)]
    beta: Option<Beta>,
    /// adaqp: seconds the MILP solver may take per layer and direction [default: 10].
    #[arg(long, value_name = "S")]
    solver_time_limit: Option<f64>,
    /// adaqp: the report of `halo bench comm --backend mpi --report FILE.json`, whose per-pair
    /// fits replace the topology's links in the time model (MPI runs only).
    #[arg(long, value_name = "FILE.json")]
    time_fit: Option<std::path::PathBuf>,
}

/// Parses `on` / `off` (shared by the flags of several methods).
pub(super) fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("expected on or off, got `{other}`")),
    }
}

impl AdaqpFlags {
    /// Writes the given flags over `config`.
    pub fn apply(&self, config: &mut TrainConfig) {
        let settings = &mut config.method.adaqp;
        settings.bits = self.bits.unwrap_or(settings.bits);
        settings.group_size = self.group_size.unwrap_or(settings.group_size);
        settings.lambda = self.lambda.unwrap_or(settings.lambda);
        settings.assign_period = self.assign_period.unwrap_or(settings.assign_period);
        settings.beta = self.beta.unwrap_or(settings.beta);
        settings.solver_time_limit = self.solver_time_limit.unwrap_or(settings.solver_time_limit);
        settings.time_fit = self.time_fit.clone().or(settings.time_fit.take());
    }
}

#[cfg(test)]
mod tests {
    use gnn_core::LayerOrder;
    use trainer::config::{Beta, Bits, Method};

    use crate::cmd::train::config_from_flags;

    fn flags(argv: &[&str]) -> anyhow::Result<trainer::config::TrainConfig> {
        config_from_flags(&argv.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn adaqp_flags_set_the_method_table_and_layer_norm() {
        let argv = ["--method", "adaqp", "--bits", "4", "--group-size", "10", "--lambda", "0.25"];
        let c =
            flags(&[&argv[..], &["--assign-period", "5", "--beta", "square-of-sum", "--layer-norm", "on"]].concat())
                .unwrap();
        let s = &c.method.adaqp;
        assert_eq!((c.method.name, s.bits, s.group_size, s.assign_period), (Method::Adaqp, Bits::Four, 10, 5));
        assert_eq!((s.lambda, s.beta, c.layer_norm), (0.25, Beta::SquareOfSum, true));
        assert_eq!(c.layer_order(), LayerOrder::DropoutFirst, "adaqp's default order");
        let c = flags(&["--method", "adaqp", "--layer-order", "dropout-last"]).unwrap();
        assert_eq!(c.layer_order(), LayerOrder::DropoutLast);
        assert_eq!(flags(&["--method", "vanilla"]).unwrap().layer_order(), LayerOrder::DropoutLast);
        let err = flags(&["--layer-order", "paper"]).unwrap_err();
        assert!(format!("{err:#}").contains("--layer-order"), "{err:#}");
        let err = flags(&["--method", "adaqp", "--lambda", "2"]).unwrap_err();
        assert!(format!("{err:#}").contains("`lambda`"), "{err:#}");
        let err = flags(&["--method", "adaqp", "--time-fit", "fit.json"]).unwrap_err();
        assert!(format!("{err:#}").contains("`time-fit`") && format!("{err:#}").contains("mpi"), "{err:#}");
        let c = flags(&["--method", "adaqp", "--backend", "mpi", "--time-fit", "fit.json"]).unwrap();
        assert_eq!(c.method.adaqp.time_fit.as_deref(), Some(std::path::Path::new("fit.json")));
        let err = flags(&["--bits", "3"]).unwrap_err();
        assert!(err.to_string().contains("--bits"), "{err}");
    }
}
