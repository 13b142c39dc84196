//! The settings of the distributed methods (`[distributed]` in the TOML config; `--cut`,
//! `--partitioner`, `--workers`, `--hosts`, `--backend`, `--topology`, `--overlap`, `--serialize-compute`,
//! `--lossy-eval`, `--masters-only` and `--compress` on the command line).

use std::path::Path;

use comm_hierarchy::{LinkModel, Preset};
use graph_partition::book::CutKind;
use graph_partition::partition::Algorithm;
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Where the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// One thread per worker in this process.
    #[default]
    Local,
    /// One process per worker, started by `mpirun`; the world size gives the number of workers.
    Mpi,
    /// One thread per worker in this process, each on a GPU of its own (`--device cuda`): the
    /// gradient all-reduce by NCCL on the GPUs, and the exchanges' messages sent GPU to GPU by
    /// NCCL where the codecs encode on the device (else staged through the host as under
    /// `local`). Needs a build with the `nccl` feature and a GPU per worker.
    Nccl,
    /// One process per worker, started by `mpirun` (`--backend nccl` under a launcher becomes
    /// this), each on the GPU of its index on its machine (`--device cuda`): as `nccl`, across
    /// machines, the exchanges that stay staged through the host sent by MPI as under `mpi`.
    /// Needs a build with the `mpi` and `nccl` features and a GPU per process.
    #[serde(rename = "mpi-nccl")]
    MpiNccl,
}

impl Backend {
    /// Every backend, in declaration order.
    pub const ALL: [Backend; 4] = [Backend::Local, Backend::Mpi, Backend::Nccl, Backend::MpiNccl];

    /// The name used on the command line, in TOML and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Mpi => "mpi",
            Backend::Nccl => "nccl",
            Backend::MpiNccl => "mpi-nccl",
        }
    }

    /// Whether the workers are threads of this process.
    pub fn in_process(self) -> bool {
        matches!(self, Backend::Local | Backend::Nccl)
    }

    /// Whether the workers sum their gradients by NCCL on their GPUs.
    pub fn nccl(self) -> bool {
        matches!(self, Backend::Nccl | Backend::MpiNccl)
    }
}

/// A backend name training does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend `{0}`; expected local, mpi, nccl or mpi-nccl")]
pub struct UnknownBackend(String);

impl std::str::FromStr for Backend {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|b| b.as_str() == s).ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

impl<'de> Deserialize<'de> for Backend {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Settings of the distributed methods (validated with the rest of the configuration, used
/// only by those methods).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct DistributedConfig {
    /// How the graph is split, edge or vertex (cdfgnn always trains on a vertex-cut).
    #[cfg_attr(feature = "clap", arg(long, value_name = "CUT"))]
    pub cut: CutKind,
    /// Partitioner, one of hash, random, metis, bdg (edge-cut) or random-vertex-cut, ebv
    /// (vertex-cut) [default: metis for edge, ebv for vertex].
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub partitioner: Option<Algorithm>,
    /// Use the partition book `halo partition --out DIR` saved instead of partitioning (checked
    /// against the dataset, the workers and the cut).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub partition_book: Option<std::path::PathBuf>,
    /// Workers of the local backend; under MPI the world size.
    #[cfg_attr(feature = "clap", arg(long, value_name = "P"))]
    pub workers: usize,
    /// Hosts the workers are spread over in equal contiguous blocks; must divide the workers.
    #[cfg_attr(feature = "clap", arg(long, value_name = "H"))]
    pub hosts: usize,
    /// Where the workers run: local (in-process threads), mpi (MPI processes, `mpirun -np P
    /// halo ...`; the default when started by mpirun), nccl (in-process threads on a GPU each,
    /// `--device cuda`, their gradients summed and their exchanges sent by NCCL; a build with
    /// `--features nccl`) or mpi-nccl (MPI processes on a GPU each, the same by NCCL; what nccl
    /// becomes under mpirun; a build with `--features mpi,nccl`).
    #[cfg_attr(feature = "clap", arg(long, value_name = "local|mpi|nccl|mpi-nccl"))]
    pub backend: Backend,
    /// The modeled cluster, one of cdfgnn, adaqp, ecgraph, featpart, adgraph (the papers'
    /// clusters).
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub topology: Preset,
    /// Your cluster's links, in place of the topology's: a `halo bench comm --backend mpi
    /// --report` JSON file (its measured fits, the median per link class), or a TOML file with
    /// `[intra]` and `[inter]` tables of `bandwidth_gb_s` and `latency_us`. Every method's
    /// time model prices its bytes on them.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub links: Option<std::path::PathBuf>,
    /// Multiply the topology's link bandwidths (latencies kept).
    #[cfg_attr(feature = "clap", arg(long, value_name = "F"))]
    pub bandwidth_scale: f64,
    /// Split halo exchanges and compute the rows that need no halo row while they are in flight.
    #[cfg_attr(feature = "clap", arg(long))]
    pub overlap: bool,
    /// Vertex-cut: only masters run the dense per-row work; mirrors aggregate their edges and
    /// push partial sums to the master (less memory and compute; the same traffic as a replica
    /// sync). Off, every replica computes (CDFGNN's Algorithm 1).
    #[cfg_attr(feature = "clap", arg(long))]
    pub masters_only: bool,
    /// In-process workers compute one at a time, so each worker's measured compute (and the
    /// modeled epoch) is what it takes with the machine to itself. Results are unchanged; runs
    /// take longer. On without the key when the workers outnumber the cores (and no checkpoints
    /// are written).
    #[cfg_attr(feature = "clap", arg(long))]
    pub serialize_compute: bool,
    /// Evaluate through the method's codecs (advancing their state) instead of exactly.
    #[cfg_attr(feature = "clap", arg(long))]
    pub lossy_eval: bool,
    /// Full-batch methods: agree on the update by an all-reduce of the gradients, or through
    /// parameter servers holding contiguous slices (push gradients, pull slices).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub param_sync: ParamSync,
    /// --param-sync ps: parameter servers, co-located with the first workers [default: one per
    /// worker].
    #[cfg_attr(feature = "clap", arg(long, value_name = "M"))]
    pub servers: Option<usize>,
    /// Methods that compress their exchange: auto weighs, after a warm-up, the CPU seconds
    /// their codecs take against the wire seconds the saved bytes are worth on the modeled
    /// links, and sends exact rows for the rest of the run where compression does not pay;
    /// always keeps the method's codecs (the papers' behaviour).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub compress: Compress,
}

/// Whether a method that compresses its exchange keeps compressing where it does not pay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Compress {
    /// Exact rows from the step where the codecs cost more CPU than their saved bytes are worth
    /// on the wire.
    #[default]
    Auto,
    /// The method's codecs every step.
    Always,
}

impl Compress {
    /// The name used on the command line, in TOML and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Compress::Auto => "auto",
            Compress::Always => "always",
        }
    }
}

/// How workers agree on the parameter update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ParamSync {
    /// Gradients summed by an all-reduce; every worker runs the optimizer.
    #[default]
    Allreduce,
    /// Gradients pushed to parameter servers holding contiguous slices, which run the optimizer
    /// and serve the slices back.
    Ps,
}

impl Default for DistributedConfig {
    fn default() -> Self {
        Self {
            cut: CutKind::EdgeCut,
            partitioner: None,
            partition_book: None,
            workers: 4,
            hosts: 1,
            backend: Backend::Local,
            topology: Preset::default(),
            links: None,
            bandwidth_scale: 1.0,
            overlap: false,
            masters_only: false,
            serialize_compute: false,
            lossy_eval: false,
            param_sync: ParamSync::Allreduce,
            servers: None,
            compress: Compress::Auto,
        }
    }
}

impl DistributedConfig {
    /// The modeled cluster's links: those of `links`' file, else the topology preset's;
    /// bandwidth scaled. An unreadable file is named with the key.
    pub fn links(&self) -> Result<LinkModel, ConfigError> {
        let links = match &self.links {
            None => self.topology.links(),
            Some(path) => read_links(path, self.topology.links())
                .map_err(|message| ConfigError::Invalid { key: "links", message })?,
        };
        Ok(links.with_bandwidth_scale(self.bandwidth_scale))
    }

    /// The partitioner to run for a `cut`: the given one, else METIS for edge-cuts and EBV for
    /// vertex-cuts.
    pub fn algorithm_for(&self, cut: CutKind) -> Algorithm {
        self.partitioner.unwrap_or(match cut {
            CutKind::VertexCut => Algorithm::Ebv,
            CutKind::EdgeCut | CutKind::FeatureCut => Algorithm::Metis,
        })
    }

    /// Whether only the primaries of a `cut` run the dense per-row work: always under edge-cut
    /// (halo rows are pulled), under vertex-cut with `masters-only`.
    pub fn primaries_only(&self, cut: CutKind) -> bool {
        cut == CutKind::EdgeCut || (cut == CutKind::VertexCut && self.masters_only)
    }

    /// The number of parameter servers under `param-sync = "ps"`, else `None`.
    pub fn param_servers(&self) -> Option<usize> {
        (self.param_sync == ParamSync::Ps).then(|| self.servers.unwrap_or(self.workers))
    }

    /// Checks the settings for a run on a `cut` ([`super::TrainConfig::cut`]: the method may fix
    /// it); the error names the key (= flag) at fault.
    pub fn validate(&self, cut: CutKind) -> Result<(), ConfigError> {
        let invalid = |key, message| Err(ConfigError::Invalid { key, message });
        if let Some(m) = self.servers {
            if self.param_sync != ParamSync::Ps {
                return invalid("servers", "needs param-sync = \"ps\"".to_string());
            }
            if m == 0 || m > self.workers {
                return invalid("servers", format!("must be in 1..={} (the workers), got {m}", self.workers));
            }
        }
        if self.workers == 0 {
            return invalid("workers", "must be at least 1, got 0".to_string());
        }
        if self.hosts == 0 || !self.workers.is_multiple_of(self.hosts) {
            return invalid(
                "hosts",
                format!("must be at least 1 and divide workers = {}, got {}", self.workers, self.hosts),
            );
        }
        if !(self.bandwidth_scale.is_finite() && self.bandwidth_scale > 0.0) {
            return invalid("bandwidth-scale", format!("must be finite and > 0, got {}", self.bandwidth_scale));
        }
        self.links()?;
        if cut == CutKind::FeatureCut {
            return invalid("cut", "must be edge or vertex; feature columns are the featpart method's plan".into());
        }
        if self.masters_only && cut != CutKind::VertexCut {
            return invalid("masters-only", format!("is for cut = \"vertex\"; this run is {}", cut.with_article()));
        }
        let algorithm = self.algorithm_for(cut);
        if algorithm.is_vertex_cut() != (cut == CutKind::VertexCut) {
            let fitting =
                if cut == CutKind::VertexCut { "random-vertex-cut or ebv" } else { "hash, random, metis or bdg" };
            return invalid(
                "partitioner",
                format!("`{algorithm}` does not make {}; use {fitting}", cut.with_article()),
            );
        }
        Ok(())
    }
}

/// The links of a `--links` file: a `halo bench comm` report (`.json`) measured over `base`'s
/// classes (each class's pairs' median fit), or a TOML link file.
fn read_links(path: &Path, base: LinkModel) -> Result<LinkModel, String> {
    let shown = path.display();
    if path.extension().is_some_and(|e| e == "json") {
        let report = comm_hierarchy::LinkReport::read(path).map_err(|e| format!("{shown}: {e}"))?;
        Ok(report.links(base))
    } else {
        LinkModel::from_toml_file(path).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(config: &DistributedConfig) -> &'static str {
        match config.validate(config.cut) {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("expected an invalid key, got {other:?}"),
        }
    }

    #[test]
    fn links_come_from_a_measured_report_or_a_toml_file_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fits = dir.path().join("comm.json");
        let fit = |src: usize, dst: usize| {
            serde_json::json!({"src": src, "dst": dst, "link": "inter",
                "fit": {"theta_s_per_mb": 0.008, "gamma_s": 0.0002, "r_squared": 0.99}, "samples": 4})
        };
        std::fs::write(&fits, serde_json::json!({ "link_fits": [fit(0, 1), fit(1, 0)] }).to_string()).unwrap();
        let c = DistributedConfig { links: Some(fits), ..DistributedConfig::default() };
        let links = c.links().unwrap();
        assert!(
            (links.inter.bandwidth_bytes_per_s - 1.25e8).abs() < 1.0 && (links.inter.latency_s - 1e-4).abs() < 1e-12
        );
        assert_eq!(links.intra, Preset::Cdfgnn.links().intra);
        let toml = dir.path().join("links.toml");
        std::fs::write(&toml, "[inter]\nbandwidth_gb_s = 0.125\nlatency_us = 50.0\n").unwrap();
        let c = DistributedConfig { links: Some(toml), bandwidth_scale: 2.0, ..DistributedConfig::default() };
        assert!((c.links().unwrap().inter.bandwidth_bytes_per_s - 2.5e8).abs() < 1.0);
        let c = DistributedConfig { links: Some(dir.path().join("missing.json")), ..DistributedConfig::default() };
        let err = c.validate(CutKind::EdgeCut).unwrap_err().to_string();
        assert!(err.contains("invalid `links`") && err.contains("missing.json: cannot read it"), "{err}");
    }

    #[test]
    fn defaults_are_valid_and_pick_the_cut_partitioner() {
        let c = DistributedConfig::default();
        c.validate(c.cut).unwrap();
        assert_eq!(c.algorithm_for(c.cut), Algorithm::Metis);
        let v = DistributedConfig { cut: CutKind::VertexCut, ..c };
        v.validate(v.cut).unwrap();
        assert_eq!(v.algorithm_for(v.cut), Algorithm::Ebv);
        assert!(v.primaries_only(CutKind::EdgeCut) && !v.primaries_only(CutKind::VertexCut));
        let masters = DistributedConfig { masters_only: true, ..v };
        assert!(masters.primaries_only(CutKind::VertexCut) && !masters.primaries_only(CutKind::FeatureCut));
    }

    #[test]
    fn bad_settings_name_their_key() {
        let ok = DistributedConfig::default();
        assert_eq!(key_of(&DistributedConfig { workers: 0, ..ok.clone() }), "workers");
        assert_eq!(key_of(&DistributedConfig { hosts: 3, ..ok.clone() }), "hosts");
        assert_eq!(key_of(&DistributedConfig { hosts: 0, ..ok.clone() }), "hosts");
        assert_eq!(key_of(&DistributedConfig { cut: CutKind::FeatureCut, ..ok.clone() }), "cut");
        assert_eq!(key_of(&DistributedConfig { masters_only: true, ..ok.clone() }), "masters-only");
        for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(key_of(&DistributedConfig { bandwidth_scale: scale, ..ok.clone() }), "bandwidth-scale");
        }
        let mismatch = DistributedConfig { cut: CutKind::VertexCut, partitioner: Some(Algorithm::Metis), ..ok };
        assert_eq!(key_of(&mismatch), "partitioner");
        assert!(
            mismatch.validate(mismatch.cut).unwrap_err().to_string().contains("`metis` does not make a vertex-cut")
        );
    }

    #[test]
    fn toml_spells_keys_like_the_flags() {
        let c: DistributedConfig = toml::from_str(
            "cut = \"vertex\"\npartitioner = \"random-vertex-cut\"\nworkers = 8\nhosts = 2\nbackend = \"mpi\"\n\
             topology = \"ecgraph\"\nbandwidth-scale = 0.01\noverlap = true\nlossy-eval = true\n\
             serialize-compute = true\nparam-sync = \"ps\"\nservers = 3\nmasters-only = true\ncompress = \"always\"\n",
        )
        .unwrap();
        let expected = DistributedConfig {
            cut: CutKind::VertexCut,
            partitioner: Some(Algorithm::RandomVertexCut),
            partition_book: None,
            workers: 8,
            hosts: 2,
            backend: Backend::Mpi,
            topology: Preset::Ecgraph,
            links: None,
            bandwidth_scale: 0.01,
            overlap: true,
            masters_only: true,
            serialize_compute: true,
            lossy_eval: true,
            param_sync: ParamSync::Ps,
            servers: Some(3),
            compress: Compress::Always,
        };
        assert_eq!(c, expected);
        assert_eq!(c.param_servers(), Some(3));
        assert_eq!(key_of(&DistributedConfig { servers: Some(9), ..c.clone() }), "servers");
        let all_reduce = DistributedConfig { param_sync: ParamSync::Allreduce, ..c.clone() };
        assert_eq!(key_of(&all_reduce), "servers");
        assert_eq!(DistributedConfig { servers: None, ..c.clone() }.param_servers(), Some(8));
        let (preset, scaled) = (Preset::Ecgraph.links(), c.links().unwrap());
        assert_eq!(scaled.inter.bandwidth_bytes_per_s, preset.inter.bandwidth_bytes_per_s * 0.01);
        assert_eq!(scaled.intra.bandwidth_bytes_per_s, preset.intra.bandwidth_bytes_per_s * 0.01);
        assert_eq!(scaled.inter.latency_s, preset.inter.latency_s);
        assert!(toml::from_str::<DistributedConfig>("parts = 2\n").is_err());
    }

    #[test]
    fn a_run_config_takes_them_as_a_table_and_names_bad_lines() {
        use crate::config::{Method, TrainConfig};
        let text = "method = \"vanilla\"\n[distributed]\ncut = \"vertex\"\nworkers = 6\nhosts = 3\n";
        let c = TrainConfig::from_toml_str(text, "run.toml").unwrap();
        assert_eq!(
            (c.method.name, c.distributed.cut, c.distributed.workers, c.distributed.hosts),
            (Method::Vanilla, CutKind::VertexCut, 6, 3)
        );
        let msg =
            TrainConfig::from_toml_str("[distributed]\nworkers = 4\nhosts = 3\n", "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:3: key `hosts`") && msg.contains("divide workers = 4"), "{msg}");
        let msg =
            TrainConfig::from_toml_str("[distributed]\nbackend = \"nccl\"\n", "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:2: key `backend`") && msg.contains("needs --device cuda"), "{msg}");
        let msg =
            TrainConfig::from_toml_str("[distributed]\nbackend = \"gloo\"\n", "run.toml").unwrap_err().to_string();
        assert!(msg.contains("unknown backend `gloo`; expected local, mpi, nccl or mpi-nccl"), "{msg}");
        let msg =
            TrainConfig::from_toml_str("[distributed]\ntopology = \"dgx\"\n", "run.toml").unwrap_err().to_string();
        assert!(msg.starts_with("run.toml:2: key `topology`"), "{msg}");
    }

    /// Serialized compute measures, checkpoints agree over a collective outside the clocks:
    /// asking for both is refused, naming the key.
    #[test]
    fn serialized_compute_with_checkpoints_is_refused() {
        use crate::config::TrainConfig;
        let text = "[distributed]\nserialize-compute = true\n[reliability]\ncheckpoint-dir = \"ck\"\n";
        let msg = TrainConfig::from_toml_str(text, "s.toml").unwrap_err().to_string();
        assert!(msg.contains("`serialize-compute`") && msg.contains("checkpoints"), "{msg}");
        assert!(TrainConfig::from_toml_str("[distributed]\nserialize-compute = true\n", "s.toml").is_ok());
    }
}
