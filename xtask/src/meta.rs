//! `meta.json` beside `raw/` and `split/`: what the dataset is and where it came from, in the
//! shape of `datasets/cora/meta.json`.

use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{Context, Result};
use flate2::read::GzDecoder;
use serde_json::{Map, Value};

use crate::datasets::{OgbDataset, Payload};

/// Writes `root/meta.json` for `ds`, reading node/edge counts and feature widths from the small
/// head of the CSV files (binary payloads get the static fields only).
pub fn write(ds: &OgbDataset, root: &Path) -> Result<()> {
    let mut fields = Map::new();
    fields.insert("name".into(), ds.name.into());
    fields.insert("num_classes".into(), ds.num_classes.into());
    fields.insert("num_tasks".into(), ds.num_tasks.into());
    fields.insert("task".into(), ds.task.into());
    fields.insert("split".into(), ds.split.into());
    fields.insert("edges".into(), ds.edges.into());
    fields.insert("source".into(), ds.url().into());
    match ds.payload {
        Payload::Csv { node_feat, edge_feat } => {
            fields.insert("num_nodes".into(), count(root, "raw/num-node-list.csv.gz")?);
            fields.insert("num_edges_stored".into(), count(root, "raw/num-edge-list.csv.gz")?);
            if node_feat {
                fields.insert("num_features".into(), width(root, "raw/node-feat.csv.gz")?);
            }
            if edge_feat {
                fields.insert("num_edge_features".into(), width(root, "raw/edge-feat.csv.gz")?);
            }
            fields.insert(
                "layout".into(),
                "OGB node-property-prediction raw layout (raw/*.csv.gz, split/<name>/*.csv.gz)".into(),
            );
        }
        Payload::Npz => {
            fields.insert(
                "layout".into(),
                "OGB binary layout (raw/data.npz, raw/node-label.npz, split/<name>/*.csv.gz); Halo's loader \
                 reads the CSV layout only: convert it with `halo datasets import`"
                    .into(),
            );
        }
    }
    let path = root.join("meta.json");
    let text = serde_json::to_string_pretty(&Value::Object(fields))? + "\n";
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// The number on the first line of a one-number `.csv.gz` (OGB's count lists).
fn count(root: &Path, relative: &str) -> Result<Value> {
    let line = first_line(&root.join(relative))?;
    let n: u64 = line.trim().parse().with_context(|| format!("{relative}: line 1 `{line}` is not a count"))?;
    Ok(n.into())
}

/// The number of comma-separated columns on the first line of a `.csv.gz`.
fn width(root: &Path, relative: &str) -> Result<Value> {
    Ok((first_line(&root.join(relative))?.split(',').count() as u64).into())
}

fn first_line(path: &Path) -> Result<String> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut line = String::new();
    BufReader::new(GzDecoder::new(file)).read_line(&mut line).with_context(|| format!("reading {}", path.display()))?;
    Ok(line.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::lookup;
    use crate::testutil::{arxiv_entries, gz};

    #[test]
    fn csv_meta_reads_counts_and_feature_width() {
        let tmp = tempfile::tempdir().unwrap();
        for (name, data) in arxiv_entries(&[]) {
            let p = tmp.path().join(name.strip_prefix("arxiv/").unwrap());
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, data).unwrap();
        }
        write(lookup("ogbn-arxiv").unwrap(), tmp.path()).unwrap();
        let meta: Value = serde_json::from_str(&fs::read_to_string(tmp.path().join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["name"], "ogbn-arxiv");
        assert_eq!(meta["num_classes"], 40);
        assert_eq!(meta["num_nodes"], 3);
        assert_eq!(meta["num_edges_stored"], 3);
        assert_eq!(meta["num_features"], 3);
        assert_eq!(meta["source"], "https://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip");
    }

    #[test]
    fn a_bad_count_names_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("raw")).unwrap();
        fs::write(tmp.path().join("raw/num-node-list.csv.gz"), gz("many\n")).unwrap();
        let err = write(lookup("ogbn-products").unwrap(), tmp.path()).unwrap_err().to_string();
        assert!(err.contains("raw/num-node-list.csv.gz: line 1 `many`"), "{err}");
    }

    #[test]
    fn binary_meta_says_how_to_convert_it() {
        let tmp = tempfile::tempdir().unwrap();
        write(lookup("ogbn-papers100M").unwrap(), tmp.path()).unwrap();
        let meta: Value = serde_json::from_str(&fs::read_to_string(tmp.path().join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["num_classes"], 172);
        assert!(meta["layout"].as_str().unwrap().contains("halo datasets import"));
    }
}
