//! `[method.vanilla]`: exact distributed training's one setting.

use serde::{Deserialize, Serialize};

use crate::config::MethodSettings;

/// `[method.vanilla]`: exact distributed training.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct VanillaSettings {
    /// Send only the rows a receiver does not already hold bit for bit (lossless; it pays off
    /// where rows repeat across epochs, e.g. input features pulled without input dropout).
    #[cfg_attr(feature = "clap", arg(long))]
    pub skip_repeats: bool,
}

impl MethodSettings for VanillaSettings {}
