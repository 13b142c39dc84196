//! The OGB node-property datasets `cargo xtask download` knows, and the files each must ship.

use anyhow::{Result, bail};

/// Where OGB hosts its node-property zips (OGB's `master.csv` names the same host over plain HTTP;
/// it serves HTTPS too, which keeps a 57 GB download from being silently tampered with).
pub const URL_BASE: &str = "https://snap.stanford.edu/ogb/data/nodeproppred/";

/// How a dataset's graph, features and labels are stored inside `raw/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `edge.csv.gz`, `node-label.csv.gz`, the count lists, plus node or edge features.
    Csv { node_feat: bool, edge_feat: bool },
    /// `data.npz` and `node-label.npz` (NumPy archives): `halo datasets import` converts them.
    Npz,
}

/// One OGB node-property dataset, as described by OGB's `master.csv`.
#[derive(Debug, PartialEq, Eq)]
pub struct OgbDataset {
    /// The name users type and the folder under `datasets/`, e.g. `ogbn-arxiv`.
    pub name: &'static str,
    /// The zip's file stem on the OGB host (also its top-level folder), e.g. `arxiv`.
    pub download_name: &'static str,
    pub num_classes: u32,
    /// Number of prediction targets per node (112 binary tasks for proteins, else 1).
    pub num_tasks: u32,
    pub task: &'static str,
    /// The folder under `split/` holding `{train,valid,test}.csv.gz`.
    pub split: &'static str,
    /// How the edge list must be read: OGB stores undirected graphs with each edge once.
    pub edges: &'static str,
    pub payload: Payload,
}

const DIRECTED: &str = "directed, as stored";
const UNDIRECTED: &str = "undirected, each stored once: add the reverse edge";

/// Every dataset `cargo xtask download` accepts.
pub const DATASETS: [OgbDataset; 4] = [
    OgbDataset {
        name: "ogbn-arxiv",
        download_name: "arxiv",
        num_classes: 40,
        num_tasks: 1,
        task: "multiclass classification",
        split: "time",
        edges: DIRECTED,
        payload: Payload::Csv { node_feat: true, edge_feat: false },
    },
    OgbDataset {
        name: "ogbn-products",
        download_name: "products",
        num_classes: 47,
        num_tasks: 1,
        task: "multiclass classification",
        split: "sales_ranking",
        edges: UNDIRECTED,
        payload: Payload::Csv { node_feat: true, edge_feat: false },
    },
    OgbDataset {
        name: "ogbn-papers100M",
        download_name: "papers100M-bin",
        num_classes: 172,
        num_tasks: 1,
        task: "multiclass classification",
        split: "time",
        edges: DIRECTED,
        payload: Payload::Npz,
    },
    OgbDataset {
        name: "ogbn-proteins",
        download_name: "proteins",
        num_classes: 2,
        num_tasks: 112,
        task: "binary classification (112 tasks)",
        split: "species",
        edges: UNDIRECTED,
        payload: Payload::Csv { node_feat: false, edge_feat: true },
    },
];

/// Finds a dataset by the name the user typed; the error lists every choice.
pub fn lookup(name: &str) -> Result<&'static OgbDataset> {
    match DATASETS.iter().find(|d| d.name == name) {
        Some(d) => Ok(d),
        None => bail!("unknown dataset `{name}`; choose one of: {}", names().join(", ")),
    }
}

/// The accepted dataset names, in a fixed order.
pub fn names() -> Vec<&'static str> {
    DATASETS.iter().map(|d| d.name).collect()
}

impl OgbDataset {
    /// The zip's address on the OGB host.
    pub fn url(&self) -> String {
        format!("{URL_BASE}{}.zip", self.download_name)
    }

    /// Paths, relative to the dataset folder, that a complete download contains.
    pub fn required_files(&self) -> Vec<String> {
        let mut files: Vec<String> = match self.payload {
            Payload::Csv { node_feat, edge_feat } => {
                let mut raw = vec!["edge.csv.gz", "node-label.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz"];
                if node_feat {
                    raw.push("node-feat.csv.gz");
                }
                if edge_feat {
                    raw.push("edge-feat.csv.gz");
                }
                raw.into_iter().map(|f| format!("raw/{f}")).collect()
            }
            Payload::Npz => vec!["raw/data.npz".to_owned(), "raw/node-label.npz".to_owned()],
        };
        files.extend(["train", "valid", "test"].map(|s| format!("split/{}/{s}.csv.gz", self.split)));
        files
    }

    /// True when Halo's loader can read the unpacked files as they are.
    pub fn loadable(&self) -> bool {
        matches!(self.payload, Payload::Csv { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_each_dataset_and_lists_choices_on_error() {
        for d in &DATASETS {
            assert_eq!(lookup(d.name).unwrap().name, d.name);
        }
        let err = lookup("ogbn-mag").unwrap_err().to_string();
        assert!(err.contains("`ogbn-mag`"), "{err}");
        for name in names() {
            assert!(err.contains(name), "{err} should list {name}");
        }
    }

    #[test]
    fn urls_follow_ogb_download_names() {
        assert_eq!(lookup("ogbn-arxiv").unwrap().url(), "https://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip");
        assert_eq!(
            lookup("ogbn-papers100M").unwrap().url(),
            "https://snap.stanford.edu/ogb/data/nodeproppred/papers100M-bin.zip"
        );
    }

    #[test]
    fn required_files_depend_on_the_payload() {
        let arxiv = lookup("ogbn-arxiv").unwrap().required_files();
        assert!(arxiv.contains(&"raw/node-feat.csv.gz".to_owned()));
        assert!(arxiv.contains(&"split/time/valid.csv.gz".to_owned()));
        assert_eq!(arxiv.len(), 8);

        let proteins = lookup("ogbn-proteins").unwrap().required_files();
        assert!(proteins.contains(&"raw/edge-feat.csv.gz".to_owned()));
        assert!(!proteins.contains(&"raw/node-feat.csv.gz".to_owned()));
        assert!(proteins.contains(&"split/species/test.csv.gz".to_owned()));

        let papers = lookup("ogbn-papers100M").unwrap();
        assert!(papers.required_files().contains(&"raw/data.npz".to_owned()));
        assert!(!papers.loadable());
    }
}
