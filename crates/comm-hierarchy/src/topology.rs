//! Cluster shape: `hosts x devices_per_host` workers, the rank <-> (host, device) map, and the
//! two link classes (within a host, across hosts) with their bandwidth and latency.
//!
//! Ranks are placed in contiguous blocks per host: rank `r` lives on host
//! `r / devices_per_host` as device `r % devices_per_host`. This is the placement MPI launchers
//! use by default (`--map-by slot`), and the one the hierarchical partitioners assume.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Bandwidth of the PCIe peer-to-peer link inside a host, from CDFGNN's Table 2 (GB/s).
pub const CDFGNN_INTRA_BANDWIDTH_GB_S: f64 = 22.70;
/// Bandwidth of the InfiniBand peer-to-peer link across hosts, from CDFGNN's Table 2 (GB/s).
pub const CDFGNN_INTER_BANDWIDTH_GB_S: f64 = 8.27;
/// Assumed per-message latency inside a host (µs). CDFGNN reports bandwidths only; 5 µs is a
/// typical PCIe peer-to-peer small-message latency through NCCL. Override it from TOML.
pub const DEFAULT_INTRA_LATENCY_US: f64 = 5.0;
/// Assumed per-message latency across hosts (µs); see [`DEFAULT_INTRA_LATENCY_US`].
pub const DEFAULT_INTER_LATENCY_US: f64 = 10.0;

const BYTES_PER_GB: f64 = 1e9;
const SECONDS_PER_US: f64 = 1e-6;

/// Which kind of link joins two distinct workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// Both workers sit on the same host (PCIe / NVLink / shared memory).
    Intra,
    /// The workers sit on different hosts (network).
    Inter,
}

impl fmt::Display for LinkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkClass::Intra => "intra-host",
            LinkClass::Inter => "inter-host",
        })
    }
}

/// Performance of one link class: `time(bytes) = latency + bytes / bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    /// Sustained bandwidth in bytes per second.
    pub bandwidth_bytes_per_s: f64,
    /// Fixed cost of one message in seconds.
    pub latency_s: f64,
}

impl LinkSpec {
    /// A link from the units people quote: GB/s (10^9 bytes per second) and microseconds.
    pub fn from_gb_s_us(bandwidth_gb_s: f64, latency_us: f64) -> Self {
        Self { bandwidth_bytes_per_s: bandwidth_gb_s * BYTES_PER_GB, latency_s: latency_us * SECONDS_PER_US }
    }

    /// Modeled seconds to move one message of `bytes` over this link.
    pub fn transfer_s(&self, bytes: f64) -> f64 {
        self.latency_s + bytes / self.bandwidth_bytes_per_s
    }

    fn validate(&self, class: LinkClass) -> Result<(), TopologyError> {
        let bw = self.bandwidth_bytes_per_s;
        if !(bw.is_finite() && bw > 0.0) {
            return Err(TopologyError::Bandwidth { class, value: bw / BYTES_PER_GB });
        }
        let lat = self.latency_s;
        if !(lat.is_finite() && lat >= 0.0) {
            return Err(TopologyError::Latency { class, value: lat / SECONDS_PER_US });
        }
        Ok(())
    }
}

/// The two link classes of a cluster.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkModel {
    /// Link between two workers on one host.
    pub intra: LinkSpec,
    /// Link between two workers on different hosts.
    pub inter: LinkSpec,
}

impl Default for LinkModel {
    /// CDFGNN's measured peer-to-peer bandwidths with the assumed latencies above.
    fn default() -> Self {
        Self {
            intra: LinkSpec::from_gb_s_us(CDFGNN_INTRA_BANDWIDTH_GB_S, DEFAULT_INTRA_LATENCY_US),
            inter: LinkSpec::from_gb_s_us(CDFGNN_INTER_BANDWIDTH_GB_S, DEFAULT_INTER_LATENCY_US),
        }
    }
}

impl LinkModel {
    /// Both link classes with their bandwidth multiplied by `factor` (latencies kept): a
    /// preset's cluster made slower or faster, e.g. to study a communication-bound regime.
    pub fn with_bandwidth_scale(self, factor: f64) -> Self {
        let scale = |l: LinkSpec| LinkSpec { bandwidth_bytes_per_s: l.bandwidth_bytes_per_s * factor, ..l };
        Self { intra: scale(self.intra), inter: scale(self.inter) }
    }

    /// The spec of one link class.
    pub fn get(&self, class: LinkClass) -> &LinkSpec {
        match class {
            LinkClass::Intra => &self.intra,
            LinkClass::Inter => &self.inter,
        }
    }

    /// Parses `[intra]` / `[inter]` tables (`bandwidth_gb_s`, `latency_us`); every table and
    /// field is optional and falls back to the defaults.
    pub fn from_toml_str(text: &str) -> Result<Self, TopologyError> {
        let raw: LinksToml = toml::from_str(text).map_err(|e| TopologyError::parse("<string>", e))?;
        raw.resolve()
    }

    /// [`LinkModel::from_toml_str`] on a file; errors name the file.
    pub fn from_toml_file(path: &Path) -> Result<Self, TopologyError> {
        load_toml(path, LinksToml::resolve)
    }

    fn validate(&self) -> Result<(), TopologyError> {
        self.intra.validate(LinkClass::Intra)?;
        self.inter.validate(LinkClass::Inter)
    }
}

/// Why a topology or link model was rejected. Messages name the field or file at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopologyError {
    #[error("hosts must be at least 1")]
    NoHosts,
    #[error("devices_per_host must be at least 1")]
    NoDevices,
    #[error("{class} link: bandwidth_gb_s must be a positive finite number, got {value}")]
    Bandwidth { class: LinkClass, value: f64 },
    #[error("{class} link: latency_us must be a non-negative finite number, got {value}")]
    Latency { class: LinkClass, value: f64 },
    #[error("{workers} workers cannot be split evenly over {hosts} hosts")]
    Uneven { workers: usize, hosts: usize },
    #[error("the topology has {workers} workers but the job has {ranks} ranks")]
    RankCount { workers: usize, ranks: usize },
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error(
        "ranks are not placed in equal contiguous blocks per host ({detail}); launch with `--map-by slot` or give the host count explicitly"
    )]
    Placement { detail: String },
}

impl TopologyError {
    fn parse(path: &str, err: toml::de::Error) -> Self {
        TopologyError::Parse { path: path.to_owned(), message: err.to_string() }
    }
}

/// A validated cluster shape. Construct with [`Topology::new`], [`Topology::for_workers`],
/// [`Topology::from_host_names`] or from TOML; deserialisation validates too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TopologyToml", into = "TopologyToml")]
pub struct Topology {
    hosts: usize,
    devices_per_host: usize,
    links: LinkModel,
}

impl Topology {
    /// `hosts x devices_per_host` workers joined by `links`.
    pub fn new(hosts: usize, devices_per_host: usize, links: LinkModel) -> Result<Self, TopologyError> {
        if hosts == 0 {
            return Err(TopologyError::NoHosts);
        }
        if devices_per_host == 0 {
            return Err(TopologyError::NoDevices);
        }
        links.validate()?;
        Ok(Self { hosts, devices_per_host, links })
    }

    /// `workers` spread evenly over `hosts` (which must divide it).
    pub fn for_workers(workers: usize, hosts: usize, links: LinkModel) -> Result<Self, TopologyError> {
        if hosts == 0 {
            return Err(TopologyError::NoHosts);
        }
        if workers == 0 {
            return Err(TopologyError::NoDevices);
        }
        if !workers.is_multiple_of(hosts) {
            return Err(TopologyError::Uneven { workers, hosts });
        }
        Self::new(hosts, workers / hosts, links)
    }

    /// Derives hosts from one name per rank (e.g. `MPI_Get_processor_name`): equal names share
    /// a host. Every host must hold the same number of ranks, in one contiguous block.
    pub fn from_host_names(names: &[String], links: LinkModel) -> Result<Self, TopologyError> {
        let mut blocks: Vec<(&str, usize)> = Vec::new();
        for name in names {
            match blocks.last_mut() {
                Some((last, count)) if *last == name.as_str() => *count += 1,
                _ => {
                    if blocks.iter().any(|(seen, _)| *seen == name.as_str()) {
                        return Err(TopologyError::Placement {
                            detail: format!("host {name:?} holds ranks that are not contiguous"),
                        });
                    }
                    blocks.push((name.as_str(), 1));
                }
            }
        }
        let Some(&(_, per_host)) = blocks.first() else {
            return Err(TopologyError::NoHosts);
        };
        if let Some((name, count)) = blocks.iter().find(|(_, count)| *count != per_host) {
            return Err(TopologyError::Placement {
                detail: format!("host {name:?} holds {count} ranks but the first host holds {per_host}"),
            });
        }
        Self::new(blocks.len(), per_host, links)
    }

    /// Parses `hosts`, `devices_per_host` and optional `[intra]` / `[inter]` link tables.
    pub fn from_toml_str(text: &str) -> Result<Self, TopologyError> {
        let raw: TopologyToml = toml::from_str(text).map_err(|e| TopologyError::parse("<string>", e))?;
        Self::try_from(raw)
    }

    /// [`Topology::from_toml_str`] on a file; errors name the file.
    pub fn from_toml_file(path: &Path) -> Result<Self, TopologyError> {
        load_toml(path, |raw: TopologyToml| Self::try_from(raw))
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.hosts
    }

    /// Workers on each host.
    pub fn devices_per_host(&self) -> usize {
        self.devices_per_host
    }

    /// Total number of workers (ranks).
    pub fn workers(&self) -> usize {
        self.hosts * self.devices_per_host
    }

    /// The link model.
    pub fn links(&self) -> &LinkModel {
        &self.links
    }

    /// Host of `rank`.
    pub fn host_of(&self, rank: usize) -> usize {
        rank / self.devices_per_host
    }

    /// Device index of `rank` within its host.
    pub fn device_of(&self, rank: usize) -> usize {
        rank % self.devices_per_host
    }

    /// Rank of `device` on `host`.
    pub fn rank_of(&self, host: usize, device: usize) -> usize {
        host * self.devices_per_host + device
    }

    /// The link class between two ranks; a rank talking to itself uses no link (`None`).
    pub fn link_class(&self, a: usize, b: usize) -> Option<LinkClass> {
        if a == b {
            None
        } else if self.host_of(a) == self.host_of(b) {
            Some(LinkClass::Intra)
        } else {
            Some(LinkClass::Inter)
        }
    }

    /// The link spec between two distinct ranks (`None` for a rank and itself).
    pub fn link(&self, a: usize, b: usize) -> Option<&LinkSpec> {
        self.link_class(a, b).map(|class| self.links.get(class))
    }
}

/// Reads and parses a TOML file, then validates it with `convert`; every error names the file.
fn load_toml<T: serde::de::DeserializeOwned, R>(
    path: &Path,
    convert: impl FnOnce(T) -> Result<R, TopologyError>,
) -> Result<R, TopologyError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| TopologyError::Read { path: shown.clone(), message: e.to_string() })?;
    let raw: T = toml::from_str(&text).map_err(|e| TopologyError::parse(&shown, e))?;
    convert(raw).map_err(|e| TopologyError::Parse { path: shown, message: e.to_string() })
}

/// One link table as written in TOML: GB/s and µs, both optional.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkToml {
    bandwidth_gb_s: Option<f64>,
    latency_us: Option<f64>,
}

impl LinkToml {
    fn resolve(self, default: LinkSpec) -> LinkSpec {
        LinkSpec {
            bandwidth_bytes_per_s: self.bandwidth_gb_s.map_or(default.bandwidth_bytes_per_s, |v| v * BYTES_PER_GB),
            latency_s: self.latency_us.map_or(default.latency_s, |v| v * SECONDS_PER_US),
        }
    }

    fn from_spec(spec: LinkSpec) -> Self {
        Self {
            bandwidth_gb_s: Some(spec.bandwidth_bytes_per_s / BYTES_PER_GB),
            latency_us: Some(spec.latency_s / SECONDS_PER_US),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinksToml {
    #[serde(default)]
    intra: LinkToml,
    #[serde(default)]
    inter: LinkToml,
}

impl LinksToml {
    fn resolve(self) -> Result<LinkModel, TopologyError> {
        let defaults = LinkModel::default();
        let links = LinkModel { intra: self.intra.resolve(defaults.intra), inter: self.inter.resolve(defaults.inter) };
        links.validate()?;
        Ok(links)
    }
}

/// The serialised form of a [`Topology`] (TOML config files, JSON reports).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyToml {
    hosts: usize,
    devices_per_host: usize,
    #[serde(default)]
    intra: LinkToml,
    #[serde(default)]
    inter: LinkToml,
}

impl TryFrom<TopologyToml> for Topology {
    type Error = TopologyError;

    fn try_from(raw: TopologyToml) -> Result<Self, TopologyError> {
        let links = LinksToml { intra: raw.intra, inter: raw.inter }.resolve()?;
        Topology::new(raw.hosts, raw.devices_per_host, links)
    }
}

impl From<Topology> for TopologyToml {
    fn from(t: Topology) -> Self {
        Self {
            hosts: t.hosts,
            devices_per_host: t.devices_per_host,
            intra: LinkToml::from_spec(t.links.intra),
            inter: LinkToml::from_spec(t.links.inter),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_placement_is_contiguous_per_host() {
        let t = Topology::new(2, 3, LinkModel::default()).unwrap();
        assert_eq!(t.workers(), 6);
        let placed: Vec<(usize, usize)> = (0..6).map(|r| (t.host_of(r), t.device_of(r))).collect();
        assert_eq!(placed, vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
        for r in 0..6 {
            assert_eq!(t.rank_of(t.host_of(r), t.device_of(r)), r);
        }
        assert_eq!(t.link_class(0, 2), Some(LinkClass::Intra));
        assert_eq!(t.link_class(2, 3), Some(LinkClass::Inter));
        assert_eq!(t.link_class(4, 4), None);
    }

    #[test]
    fn defaults_are_the_cdfgnn_measurements() {
        let links = LinkModel::default();
        assert_eq!(links.intra.bandwidth_bytes_per_s, 22.70e9);
        assert_eq!(links.inter.bandwidth_bytes_per_s, 8.27e9);
        let t = Topology::new(2, 2, links).unwrap();
        let one_gb = 1e9;
        assert!((t.link(0, 1).unwrap().transfer_s(one_gb) - (5e-6 + 1.0 / 22.70)).abs() < 1e-12);
        assert!((t.link(0, 2).unwrap().transfer_s(one_gb) - (10e-6 + 1.0 / 8.27)).abs() < 1e-12);
    }

    #[test]
    fn toml_overrides_only_the_fields_given() {
        let t = Topology::from_toml_str("hosts = 2\ndevices_per_host = 4\n[inter]\nbandwidth_gb_s = 12.5\n").unwrap();
        assert_eq!((t.hosts(), t.devices_per_host()), (2, 4));
        assert_eq!(t.links().inter.bandwidth_bytes_per_s, 12.5e9);
        assert_eq!(t.links().inter.latency_s, DEFAULT_INTER_LATENCY_US * 1e-6);
        assert_eq!(t.links().intra, LinkModel::default().intra);
    }

    #[test]
    fn toml_round_trips_through_serde() {
        let t = Topology::new(3, 2, LinkModel::default()).unwrap();
        let text = toml::to_string(&t).unwrap();
        assert_eq!(Topology::from_toml_str(&text).unwrap(), t);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Topology>(&json).unwrap(), t);
    }

    #[test]
    fn bad_configs_name_the_field_at_fault() {
        let err = Topology::from_toml_str("hosts = 0\ndevices_per_host = 1\n").unwrap_err();
        assert_eq!(err, TopologyError::NoHosts);
        let err = Topology::from_toml_str("hosts = 1\ndevices_per_host = 1\n[intra]\nlatency_us = -1.0\n").unwrap_err();
        assert!(err.to_string().contains("intra-host link: latency_us"), "{err}");
        let err = LinkModel::from_toml_str("[inter]\nbandwidth_gb_s = 0.0\n").unwrap_err();
        assert!(err.to_string().contains("inter-host link: bandwidth_gb_s"), "{err}");
        let err = Topology::from_toml_str("hosts = 1\ndevices_per_host = 1\nbandwith = 3\n").unwrap_err();
        assert!(err.to_string().contains("bandwith"), "{err}");
    }

    #[test]
    fn toml_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topo.toml");
        std::fs::write(&path, "hosts = 2\ndevices_per_host = 0\n").unwrap();
        let err = Topology::from_toml_file(&path).unwrap_err();
        assert!(err.to_string().contains("topo.toml") && err.to_string().contains("devices_per_host"), "{err}");
        let err = Topology::from_toml_file(&dir.path().join("missing.toml")).unwrap_err();
        assert!(err.to_string().contains("missing.toml"), "{err}");
    }

    #[test]
    fn workers_must_divide_over_hosts() {
        assert_eq!(
            Topology::for_workers(6, 4, LinkModel::default()).unwrap_err(),
            TopologyError::Uneven { workers: 6, hosts: 4 }
        );
        let t = Topology::for_workers(8, 2, LinkModel::default()).unwrap();
        assert_eq!((t.hosts(), t.devices_per_host()), (2, 4));
    }

    #[test]
    fn host_names_group_contiguous_equal_blocks() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let t = Topology::from_host_names(&names(&["a", "a", "b", "b"]), LinkModel::default()).unwrap();
        assert_eq!((t.hosts(), t.devices_per_host()), (2, 2));
        let err = Topology::from_host_names(&names(&["a", "b", "a", "b"]), LinkModel::default()).unwrap_err();
        assert!(matches!(err, TopologyError::Placement { .. }), "{err}");
        let err = Topology::from_host_names(&names(&["a", "a", "b"]), LinkModel::default()).unwrap_err();
        assert!(err.to_string().contains("holds 1 ranks"), "{err}");
    }
}
