//! `device`: where a run computes, `cpu` or `cuda[:N]` (GPU N, default 0).
//!
//! A GPU trains every method: `single`, the full-batch methods on the cut-graph runner's
//! workers, the mini-batch methods on theirs. It needs full batches on every edge or sampled
//! mini-batches (not in-edges sampled without a batch size). Every model trains on every cut,
//! as on the CPU. `backend = "nccl"` (the gradients summed by NCCL on the workers' GPUs) needs a
//! GPU, a method whose workers' sync is the gradient all-reduce alone ([`super::Rules::nccl`]: not
//! `single` nor featpart), and the all-reduce rather than parameter servers.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ConfigError, Method, ParamSync, TrainConfig};

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
    /// Refuses what a GPU or NCCL cannot train (see the module docs); the error names the key at
    /// fault.
    pub(super) fn validate(self, config: &TrainConfig) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, message: String| Err(ConfigError::Invalid { key, message });
        let (method, minibatch) = (config.method.name, &config.minibatch);
        let backend = config.distributed.backend;
        let nccl = backend.nccl();
        // Where a refusal sends the user: the same workers, their gradients summed on the host.
        let host_sum = if backend.in_process() { "--backend local" } else { "--backend mpi" };
        match self {
            Device::Cpu if nccl => invalid(
                "backend",
                format!(
                    "{} sums the workers' gradients on their GPUs: it needs --device cuda, or {host_sum}",
                    backend.as_str()
                ),
            ),
            Device::Cpu => Ok(()),
            Device::Cuda(_) if minibatch.batch_size.is_none() && minibatch.fanouts.is_some() => invalid(
                "device",
                format!(
                    "{self} trains full batches on every edge or sampled mini-batches; sampled in-edges without a \
                     batch size (fanouts) need --device cpu"
                ),
            ),
            Device::Cuda(_) if nccl && !method.rules().nccl => invalid(
                "backend",
                format!(
                    "{} sums the workers' gradients on their GPUs (methods {}); method {} needs {host_sum} \
                     (single trains one process; featpart's workers sum more than the gradients on the host)",
                    backend.as_str(),
                    Method::names_where(|rules| rules.nccl, ", "),
                    method.as_str()
                ),
            ),
            Device::Cuda(_) if nccl && config.distributed.param_sync == ParamSync::Ps => invalid(
                "param-sync",
                format!(
                    "ps sums and steps on the host's parameter servers, --backend {0} sums on the GPUs: use \
                     param-sync = \"allreduce\" with {0}, or {host_sum}",
                    backend.as_str()
                ),
            ),
            Device::Cuda(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Backend;

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
        TrainConfig::from_toml_str("device = \"cuda\"\nmethod = \"vanilla\"\n", "d.toml").unwrap();
        let text = "device = \"cuda\"\n[minibatch]\nfanouts = \"5,5\"\n";
        let msg = TrainConfig::from_toml_str(text, "d.toml").unwrap_err().to_string();
        assert!(msg.contains("`device`") && msg.contains("fanouts"), "{msg}");
    }

    /// Sampled mini-batches of every model train on a device, for every mini-batch method.
    #[test]
    fn device_mini_batches_take_every_model() {
        for method in ["single", "data-parallel", "adgraph", "featpart"] {
            for model in ["gcn", "sage", "gat"] {
                let text = format!(
                    "device = \"cuda\"\nmethod = \"{method}\"\nmodel = \"{model}\"\n[minibatch]\nbatch-size = 8\n"
                );
                TrainConfig::from_toml_str(&text, "d.toml").unwrap_or_else(|e| panic!("{text}: {e}"));
            }
        }
    }

    /// A cut graph's device workers take every method, cut and model the CPU workers take:
    /// GAT on a vertex-cut and with ecgraph's halo feature cache included.
    #[test]
    fn cut_graph_device_workers_take_what_the_cpu_workers_take() {
        let accepted = [
            "method = \"vanilla\"\nmodel = \"gat\"\n",
            "method = \"vanilla\"\nmodel = \"gat\"\n[distributed]\ncut = \"vertex\"\n",
            "method = \"cdfgnn\"\nmodel = \"gat\"\n",
            "method = \"ecgraph\"\nmodel = \"gat\"\n",
            "method = \"vanilla\"\n[distributed]\ncut = \"vertex\"\nmasters-only = true\n",
            "method = \"adaqp\"\n",
            "method = \"adaqp\"\n[distributed]\noverlap = true\n",
            "method = \"vanilla\"\n[distributed]\noverlap = true\n",
            "method = \"vanilla\"\n[distributed]\nparam-sync = \"ps\"\n",
            "method = \"ecgraph\"\n[distributed]\nparam-sync = \"ps\"\n",
            "method = \"vanilla\"\noptimizer = \"sgd\"\n",
            "method = \"cdfgnn\"\n",
            "[method]\nname = \"ecgraph\"\n[method.ecgraph]\nhalo-cache = false\n",
            "method = \"ecgraph\"\n",
            "model = \"gat\"\n[method]\nname = \"ecgraph\"\n[method.ecgraph]\nhalo-cache = false\n",
        ];
        for text in accepted {
            let text = format!("device = \"cuda\"\n{text}");
            TrainConfig::from_toml_str(&text, "d.toml").unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    /// NCCL sums GPU workers' gradients: taken for every method whose workers' sync is the
    /// gradient all-reduce alone; refused without a GPU, for single and featpart, and under
    /// parameter servers, each naming its key.
    #[test]
    fn nccl_takes_the_gradient_all_reducing_gpu_workers_only() {
        let nccl = "[distributed]\nbackend = \"nccl\"\nworkers = 2\n";
        let batches = "[minibatch]\nbatch-size = 8\n";
        for (method, extra) in [
            ("vanilla", ""),
            ("adaqp", ""),
            ("cdfgnn", ""),
            ("ecgraph", ""),
            ("data-parallel", batches),
            ("adgraph", batches),
        ] {
            let text = format!("device = \"cuda\"\nmethod = \"{method}\"\n{extra}{nccl}");
            let c = TrainConfig::from_toml_str(&text, "d.toml").unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(c.distributed.backend, Backend::Nccl);
        }
        let refused = [
            (format!("method = \"vanilla\"\n{nccl}"), "`backend`", "--device cuda"),
            (
                format!("device = \"cuda\"\nmethod = \"featpart\"\n{batches}{nccl}"),
                "`backend`",
                "vanilla, data-parallel, adaqp, adgraph, cdfgnn, ecgraph",
            ),
            (
                format!("device = \"cuda\"\nmethod = \"ecgraph\"\n{nccl}param-sync = \"ps\"\n"),
                "`param-sync`",
                "--backend local",
            ),
        ];
        // Across MPI processes the same, each refusal naming the host-summing backend of
        // processes.
        let mpi_nccl = "[distributed]\nbackend = \"mpi-nccl\"\nworkers = 2\n";
        let c = TrainConfig::from_toml_str(&format!("device = \"cuda\"\nmethod = \"adaqp\"\n{mpi_nccl}"), "d.toml")
            .unwrap();
        assert_eq!(c.distributed.backend, Backend::MpiNccl);
        let refused = refused.into_iter().chain([
            (format!("method = \"vanilla\"\n{mpi_nccl}"), "`backend`", "--device cuda, or --backend mpi"),
            (
                format!("device = \"cuda\"\nmethod = \"ecgraph\"\n{mpi_nccl}param-sync = \"ps\"\n"),
                "`param-sync`",
                "--backend mpi",
            ),
        ]);
        for (text, key, hint) in refused {
            let msg = TrainConfig::from_toml_str(&text, "d.toml").unwrap_err().to_string();
            assert!(msg.contains(key) && msg.contains(hint), "{text}: {msg}");
        }
    }
}
