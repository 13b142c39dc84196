//! The optional `meta.json` next to `raw/`: a name, the class count and the task, plus
//! descriptive fields. Unknown fields are ignored; known ones are checked against the data.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::DatasetError;
use super::layout;

/// The fields of `meta.json` Halo reads and writes. All are optional on input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Meta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_edges_stored: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_features: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_classes: Option<u64>,
    /// Free text; containing "multi-label" marks a label file with one column as multi-label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Meta {
    /// Reads `dir/meta.json`, or the empty default when there is none.
    pub fn read(dir: &Path) -> Result<Self, DatasetError> {
        let path = dir.join(layout::META);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(DatasetError::io(path, e)),
        };
        serde_json::from_str(&text)
            .map_err(|e| DatasetError::InvalidMeta { path: path.clone(), message: format!("invalid JSON: {e}") })
    }

    pub fn write(&self, dir: &Path) -> Result<(), DatasetError> {
        let path = dir.join(layout::META);
        let mut text = serde_json::to_string_pretty(self).expect("plain struct serialises");
        text.push('\n');
        std::fs::write(&path, text).map_err(|e| DatasetError::io(path, e))
    }

    pub fn is_multi_label(&self) -> bool {
        self.task.as_deref().is_some_and(|t| t.contains("multi-label"))
    }

    /// Fails when `field` is present and differs from what the data says.
    pub fn check(&self, dir: &Path, field: &str, declared: Option<u64>, actual: u64) -> Result<(), DatasetError> {
        match declared {
            Some(d) if d != actual => Err(DatasetError::InvalidMeta {
                path: dir.join(layout::META),
                message: format!("`{field}` is {d} but the data has {actual}"),
            }),
            _ => Ok(()),
        }
    }
}
