//! `device`: where a run computes, `cpu` or `cuda[:N]` (GPU N, default 0).
//!
//! A GPU needs a method whose `Rules` allow CUDA (today `single`), full batches and every edge
//! (no `fanouts`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ConfigError, Method, MiniBatchConfig, OptimizerKind};

/// The compute device of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    #[default]
    Cpu,
    /// CUDA GPU `ordinal`.
    Cuda(usize),
}

/// A device name that is neither `cpu` nor `cuda[:N]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown device `{0}`; expected cpu, cuda or cuda:N (N the GPU's ordinal)")]
pub struct UnknownDevice(pub String);

impl std::str::FromStr for Device {
    type Err = UnknownDevice;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| UnknownDevice(s.to_string())),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl Serialize for Device {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Device {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

impl Device {
    /// The device path trains one model on the whole graph in one process for now.
    pub(super) fn validate(
        self,
        method: Method,
        minibatch: &MiniBatchConfig,
        optimizer: OptimizerKind,
    ) -> Result<(), ConfigError> {
        let invalid = |message: String| Err(ConfigError::Invalid { key: "device", message });
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(_) if !method.rules().cuda => invalid(format!(
                "{self} trains single-process full-batch only for now; method {} needs --device cpu",
                method.as_str()
            )),
            Device::Cuda(_) if minibatch.batch_size.is_some() => {
                invalid(format!("{self} trains full-batch only for now; mini-batches (batch-size) need --device cpu"))
            }
            Device::Cuda(_) if minibatch.fanouts.is_some() => {
                invalid(format!("{self} trains on every edge for now; sampled in-edges (fanouts) need --device cpu"))
            }
            Device::Cuda(_) if optimizer != OptimizerKind::Adam => Err(ConfigError::Invalid {
                key: "optimizer",
                message: format!("{self} steps adam only for now; optimizer {} needs --device cpu", optimizer.as_str()),
            }),
            Device::Cuda(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TrainConfig;

    #[test]
    fn device_names_parse_and_print_back() {
        for (text, device) in [("cpu", Device::Cpu), ("cuda", Device::Cuda(0)), ("cuda:3", Device::Cuda(3))] {
            assert_eq!(text.parse::<Device>().unwrap(), device);
            assert_eq!(device.to_string().parse::<Device>().unwrap(), device);
        }
        for bad in ["gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA"] {
            assert!(bad.parse::<Device>().unwrap_err().to_string().contains(&format!("`{bad}`")), "{bad}");
        }
    }

    #[test]
    fn the_device_key_is_read_and_checked() {
        let c = TrainConfig::from_toml_str("device = \"cuda:1\"\n", "d.toml").unwrap();
        assert_eq!(c.device, Device::Cuda(1));
        let err = TrainConfig::from_toml_str("device = \"tpu\"\n", "d.toml").unwrap_err().to_string();
        assert!(err.starts_with("d.toml:1: key `device`") && err.contains("unknown device `tpu`"), "{err}");
        let err = TrainConfig::from_toml_str("device = \"cuda\"\nmethod = \"vanilla\"\n", "d.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("`device`") && msg.contains("single-process") && msg.contains("vanilla"), "{msg}");
        let text = "device = \"cuda\"\n[minibatch]\nfanouts = \"5,5\"\n";
        let msg = TrainConfig::from_toml_str(text, "d.toml").unwrap_err().to_string();
        assert!(msg.contains("`device`") && msg.contains("fanouts"), "{msg}");
        let text = "device = \"cuda\"\n[minibatch]\nbatch-size = 8\n";
        let msg = TrainConfig::from_toml_str(text, "d.toml").unwrap_err().to_string();
        assert!(msg.contains("`device`") && msg.contains("full-batch"), "{msg}");
    }
}
