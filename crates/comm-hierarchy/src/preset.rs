//! The papers' clusters as named link models (`--topology NAME`), so a run on this machine is
//! projected onto the cluster a paper measured on.
//!
//! Each paper names its inter-machine link; where it names no link inside a machine, the preset
//! keeps CDFGNN's measured PCIe peer-to-peer bandwidth and says so. Latencies are assumptions
//! typical of each link kind (papers report bandwidths only); a TOML link file overrides both.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::topology::{
    CDFGNN_INTER_BANDWIDTH_GB_S, CDFGNN_INTRA_BANDWIDTH_GB_S, DEFAULT_INTER_LATENCY_US, DEFAULT_INTRA_LATENCY_US,
    LinkModel, LinkSpec,
};

/// A paper's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// CDFGNN: 2 hosts x 4 devices; PCIe 22.70 GB/s inside a host, InfiniBand 8.27 GB/s across.
    #[default]
    Cdfgnn,
    /// AdaQP: 2 hosts on 100 Gb/s Ethernet (12.5 GB/s); inside a host CDFGNN's PCIe figure.
    Adaqp,
    /// EC-Graph: one worker per machine on 1 Gb/s Ethernet.
    Ecgraph,
    /// Feature-partition: every pair of workers joined at 10 Gb/s.
    Featpart,
    /// ADGraph: FDR InfiniBand, 56 Gb/s (7 GB/s) across hosts; inside a host CDFGNN's PCIe figure.
    Adgraph,
}

impl Preset {
    /// Every preset, in declaration order.
    pub const ALL: [Preset; 5] = [Preset::Cdfgnn, Preset::Adaqp, Preset::Ecgraph, Preset::Featpart, Preset::Adgraph];

    /// The name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Preset::Cdfgnn => "cdfgnn",
            Preset::Adaqp => "adaqp",
            Preset::Ecgraph => "ecgraph",
            Preset::Featpart => "featpart",
            Preset::Adgraph => "adgraph",
        }
    }

    /// The preset's links.
    pub fn links(self) -> LinkModel {
        let pcie = LinkSpec::from_gb_s_us(CDFGNN_INTRA_BANDWIDTH_GB_S, DEFAULT_INTRA_LATENCY_US);
        let both =
            |gb_s, us| LinkModel { intra: LinkSpec::from_gb_s_us(gb_s, us), inter: LinkSpec::from_gb_s_us(gb_s, us) };
        match self {
            Preset::Cdfgnn => LinkModel {
                intra: pcie,
                inter: LinkSpec::from_gb_s_us(CDFGNN_INTER_BANDWIDTH_GB_S, DEFAULT_INTER_LATENCY_US),
            },
            Preset::Adaqp => LinkModel { intra: pcie, inter: LinkSpec::from_gb_s_us(12.5, DEFAULT_INTER_LATENCY_US) },
            Preset::Ecgraph => both(0.125, 50.0),
            Preset::Featpart => both(1.25, 20.0),
            Preset::Adgraph => LinkModel { intra: pcie, inter: LinkSpec::from_gb_s_us(7.0, DEFAULT_INTER_LATENCY_US) },
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A topology name that is no preset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown topology `{0}`; expected cdfgnn, adaqp, ecgraph, featpart or adgraph")]
pub struct UnknownPreset(pub String);

impl FromStr for Preset {
    type Err = UnknownPreset;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| UnknownPreset(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_hold_the_papers_links() {
        assert_eq!(Preset::Cdfgnn.links(), LinkModel::default());
        let gb = |l: LinkSpec| (l.bandwidth_bytes_per_s / 1e6).round() / 1e3;
        let gb_s = |p: Preset| (gb(p.links().intra), gb(p.links().inter));
        assert_eq!(gb_s(Preset::Adaqp), (22.70, 12.5));
        assert_eq!(gb_s(Preset::Ecgraph), (0.125, 0.125));
        assert_eq!(gb_s(Preset::Featpart), (1.25, 1.25));
        assert_eq!(gb_s(Preset::Adgraph), (22.70, 7.0));
        for p in Preset::ALL {
            assert_eq!(p.as_str().parse::<Preset>().unwrap(), p);
        }
        assert!("infiniband".parse::<Preset>().unwrap_err().to_string().contains("cdfgnn, adaqp"));
    }
}
