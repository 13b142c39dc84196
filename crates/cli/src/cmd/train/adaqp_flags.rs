//! `halo train` flags of the `adaqp` method (`[method.adaqp]`), and `--layer-norm`, which the
//! paper's model uses.

use trainer::config::{Beta, Bits, TrainConfig};

/// Flags of `--method adaqp` (any `[method.adaqp]` key) and the model's `--layer-norm`.
#[derive(Debug, clap::Args)]
pub struct AdaqpFlags {
    /// adaqp: bits per quantized row: 2, 4, 8, adaptive (problem (12) per group of rows), or
    /// random (a random width per group) [default: adaptive].
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
    /// LayerNorm after every hidden conv (conv, LayerNorm, activation, dropout) [default: off].
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    layer_norm: Option<bool>,
}

fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("expected on or off, got `{other}`")),
    }
}

impl AdaqpFlags {
    /// The adaqp flags given on the command line (they need a distributed method).
    pub fn given(&self) -> Vec<&'static str> {
        let given = [
            ("--bits", self.bits.is_some()),
            ("--group-size", self.group_size.is_some()),
            ("--lambda", self.lambda.is_some()),
            ("--assign-period", self.assign_period.is_some()),
            ("--beta", self.beta.is_some()),
            ("--solver-time-limit", self.solver_time_limit.is_some()),
        ];
        given.into_iter().filter(|(_, given)| *given).map(|(flag, _)| flag).collect()
    }

    /// Writes the given flags over `config`.
    pub fn apply(&self, config: &mut TrainConfig) {
        let settings = &mut config.method.adaqp;
        settings.bits = self.bits.unwrap_or(settings.bits);
        settings.group_size = self.group_size.unwrap_or(settings.group_size);
        settings.lambda = self.lambda.unwrap_or(settings.lambda);
        settings.assign_period = self.assign_period.unwrap_or(settings.assign_period);
        settings.beta = self.beta.unwrap_or(settings.beta);
        settings.solver_time_limit = self.solver_time_limit.unwrap_or(settings.solver_time_limit);
        config.layer_norm = self.layer_norm.unwrap_or(config.layer_norm);
    }
}
