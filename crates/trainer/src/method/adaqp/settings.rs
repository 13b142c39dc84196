//! `[method.adaqp]`: AdaQP's message quantization (`--bits`, `--group-size`, `--lambda`,
//! `--assign-period`, `--beta`, `--solver-time-limit`, `--time-fit`); the overlap of central compute with
//! marginal communication is `[distributed] overlap`.

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, MethodSettings, TrainConfig};

/// How wide the quantized rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Bits {
    /// Every row at 2 bits.
    #[serde(rename = "2")]
    #[cfg_attr(feature = "clap", value(name = "2"))]
    Two,
    /// Every row at 4 bits.
    #[serde(rename = "4")]
    #[cfg_attr(feature = "clap", value(name = "4"))]
    Four,
    /// Every row at 8 bits.
    #[serde(rename = "8")]
    #[cfg_attr(feature = "clap", value(name = "8"))]
    Eight,
    /// 8 bits until the first assignment, then problem (12)'s solution every `assign-period`.
    #[default]
    #[serde(rename = "adaptive")]
    #[cfg_attr(feature = "clap", value(name = "adaptive"))]
    Adaptive,
    /// As adaptive, but every group gets a width drawn uniformly from {2, 4, 8} (the paper's
    /// Table 6 baseline).
    #[serde(rename = "random")]
    #[cfg_attr(feature = "clap", value(name = "random"))]
    Random,
    /// As adaptive, but each problem moves at most the bytes of the widths `random` draws at
    /// the same step (Table 6's comparison at no more bytes).
    #[serde(rename = "adaptive-random-budget")]
    #[cfg_attr(feature = "clap", value(name = "adaptive-random-budget"))]
    AdaptiveRandomBudget,
}

impl Bits {
    /// Whether the widths are reassigned every `assign-period` epochs.
    pub fn assigned(self) -> bool {
        matches!(self, Bits::Adaptive | Bits::Random | Bits::AdaptiveRandomBudget)
    }

    /// The width every row travels at before (or without) an assignment.
    pub fn initial(self) -> u8 {
        match self {
            Bits::Two => 2,
            Bits::Four => 4,
            Bits::Eight | Bits::Adaptive | Bits::Random | Bits::AdaptiveRandomBudget => 8,
        }
    }

    /// The name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Bits::Two => "2",
            Bits::Four => "4",
            Bits::Eight => "8",
            Bits::Adaptive => "adaptive",
            Bits::Random => "random",
            Bits::AdaptiveRandomBudget => "adaptive-random-budget",
        }
    }
}

/// A row's aggregation weight `beta` from the coefficients `alpha` of its receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Beta {
    /// `sum alpha^2`, as the paper's variance bound states it.
    #[default]
    SumOfSquares,
    /// `(sum alpha)^2`, as the authors' code computes it.
    SquareOfSum,
}

impl Beta {
    /// The name in TOML and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Beta::SumOfSquares => "sum-of-squares",
            Beta::SquareOfSum => "square-of-sum",
        }
    }
}

/// Settings of `adaqp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct AdaqpSettings {
    /// Bits per quantized row: 2, 4, 8, adaptive (problem (12) per group of rows), random (a
    /// random width per group), or adaptive-random-budget (adaptive within the bytes of
    /// random's widths).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub bits: Bits,
    /// Rows per group of the bit-width assignment (one width per group); the paper takes 100 on
    /// Reddit, a few tens keeps Cora's problem non-trivial.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub group_size: usize,
    /// Weight of the variance objective against the time objective (which gets 1 - lambda), in
    /// [0, 1].
    #[cfg_attr(feature = "clap", arg(long, value_name = "F"))]
    pub lambda: f64,
    /// Epochs between bit-width assignments (8 bits until the first).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub assign_period: usize,
    /// A row's aggregation weight: the paper's sum of squared coefficients or the authors'
    /// code's squared sum.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub beta: Beta,
    /// Seconds the MILP solver may take per layer and direction before it returns its best
    /// assignment so far.
    #[cfg_attr(feature = "clap", arg(long, value_name = "S"))]
    pub solver_time_limit: f64,
    /// The report of `halo bench comm --backend mpi --report FILE.json`, whose per-pair fits
    /// replace the topology's links in the time model (MPI runs only).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE.json"))]
    pub time_fit: Option<std::path::PathBuf>,
}

impl Default for AdaqpSettings {
    fn default() -> Self {
        Self {
            bits: Bits::default(),
            group_size: 20,
            lambda: 0.5,
            assign_period: 50,
            beta: Beta::default(),
            solver_time_limit: 10.0,
            time_fit: None,
        }
    }
}

impl AdaqpSettings {
    /// Checks the ranges; the error names the key (= flag).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message| Err(ConfigError::Invalid { key, message });
        if self.group_size == 0 {
            return invalid("group-size", "must be at least 1, got 0".to_string());
        }
        if self.assign_period == 0 {
            return invalid("assign-period", "must be at least 1, got 0".to_string());
        }
        if !(0.0..=1.0).contains(&self.lambda) {
            return invalid("lambda", format!("must be in [0, 1], got {}", self.lambda));
        }
        if !(self.solver_time_limit.is_finite() && self.solver_time_limit > 0.0) {
            return invalid(
                "solver-time-limit",
                format!("must be a number of seconds > 0, got {}", self.solver_time_limit),
            );
        }
        Ok(())
    }
}

impl MethodSettings for AdaqpSettings {
    /// The ranges, and a time fit only where it can be measured: across MPI processes.
    fn check(&self, config: &TrainConfig) -> Result<(), ConfigError> {
        self.validate()?;
        if self.time_fit.is_some() && config.distributed.backend.in_process() {
            let message = "needs backend mpi or mpi-nccl (a fit measured on the in-memory backend means nothing; the \
                           local backend's time model comes from the topology)";
            return Err(ConfigError::Invalid { key: "time-fit", message: message.to_string() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Bits, Method, TrainConfig};

    #[test]
    fn the_table_reads_and_bad_values_name_their_key() {
        let text =
            "[method]\nname = \"adaqp\"\n[method.adaqp]\nbits = \"4\"\ngroup-size = 10\nbeta = \"square-of-sum\"\n";
        let c = TrainConfig::from_toml_str(text, "a.toml").unwrap();
        assert_eq!((c.method.name, c.method.adaqp.bits, c.method.adaqp.group_size), (Method::Adaqp, Bits::Four, 10));
        let msg = TrainConfig::from_toml_str(&text.replace("10", "0"), "a.toml").unwrap_err().to_string();
        assert!(msg.starts_with("a.toml:5: key `group-size`"), "{msg}");
        let msg = TrainConfig::from_toml_str(&format!("{text}lambda = 1.5\n"), "a.toml").unwrap_err().to_string();
        assert!(msg.contains("`lambda`") && msg.contains("[0, 1]"), "{msg}");
        let msg = TrainConfig::from_toml_str(&text.replace("\"4\"", "\"3\""), "a.toml").unwrap_err().to_string();
        assert!(msg.starts_with("a.toml:4: key `bits`"), "{msg}");
    }
}
