//! Trained weights on disk and predictions from them (`halo train --save-model`, `halo predict`).
//!
//! The weights go in a safetensors file, one `F32` tensor per parameter under its gnn-core name
//! (`conv0.weight`, ...) with shape `[rows, cols]`, readable by Python's `safetensors`. Beside it,
//! `<file>.json` (`m.safetensors.json`) holds what the weights mean: the model configuration, the
//! training configuration (which names the dataset and its feature normalisation), the dataset's
//! absolute directory and the fingerprint of its files, and the epoch they come from. The
//! safetensors header's metadata repeats the model configuration, so the file alone still says
//! what it holds.
//!
//! Loading checks every tensor's name, shape and type against the model configuration; `predict`
//! runs the weights over a prepared dataset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gnn_core::{AggGraph, ForwardCtx, Model, ModelConfig, NoExchange};
use graph_partition::fs::{WriteError, write_atomic};
use graph_partition::{Dataset, Labels};
use ndarray::Array2;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::report::{Report, TrainedModel};
use crate::train_loop::{EvalStats, accuracies};
use gnn_core::objective::Objective;

/// The JSON file beside the weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// The model the weights belong to.
    pub model: ModelConfig,
    /// The training run's configuration.
    pub train: TrainConfig,
    /// The dataset trained on.
    pub dataset: String,
    /// The absolute directory the dataset was loaded from (`None`: the built-in synthetic
    /// graph), so that the weights find it from any working directory.
    #[serde(default)]
    pub dataset_dir: Option<PathBuf>,
    /// The fingerprint of the dataset's raw files ([`Dataset::source_fingerprint`]), which tells
    /// whether a dataset found later is the one trained on.
    #[serde(default)]
    pub dataset_fingerprint: Option<u64>,
    /// The epoch the weights come from: the best validation epoch.
    pub epoch: usize,
    /// Validation and test accuracy of the weights as the run measured them.
    pub val_acc: f64,
    pub test_acc: f64,
}

/// Why weights could not be saved or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {detail}", path.display())]
    Invalid { path: PathBuf, detail: String },
    #[error("the run kept no model to save (it ran no epoch, or its method does not expose its model)")]
    NoModel,
}

/// The sidecar of the weights at `weights`: the same path with `.json` appended
/// (`m.safetensors.json`), a name no other output of the run takes by accident.
pub fn sidecar_path(weights: &Path) -> PathBuf {
    let mut name = weights.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// The sidecar to read for `weights`: [`sidecar_path`], else the `<stem>.json` that earlier
/// versions wrote, where only that one exists.
fn existing_sidecar(weights: &Path) -> PathBuf {
    let sidecar = sidecar_path(weights);
    let stem_json = weights.with_extension("json");
    if !sidecar.exists() && stem_json != weights && stem_json.is_file() { stem_json } else { sidecar }
}

/// Key of the model configuration in the safetensors header's metadata.
const META_MODEL: &str = "halo.model";

/// Writes `report`'s best-validation model to `path` (safetensors) and its sidecar, each
/// through a temporary file and a rename; `dataset_dir` is the directory the run loaded its
/// dataset from (made absolute here).
pub fn save(path: &Path, report: &Report, dataset_dir: Option<&Path>) -> Result<(), ExportError> {
    let trained = report.trained.as_ref().ok_or(ExportError::NoModel)?;
    write(path, trained, &sidecar_of(report, trained, dataset_dir))
}

/// The sidecar of `trained`, the model of `report`; `dataset_dir` as in [`save`].
pub fn sidecar_of(report: &Report, trained: &TrainedModel, dataset_dir: Option<&Path>) -> Sidecar {
    Sidecar {
        model: trained.config.clone(),
        train: report.config.clone(),
        dataset: report.dataset.clone(),
        dataset_dir: dataset_dir.map(|dir| std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())),
        dataset_fingerprint: dataset_dir.and_then(|dir| Dataset::source_fingerprint(dir).ok()),
        epoch: trained.epoch,
        val_acc: report.final_.best_val_acc,
        test_acc: report.final_.test_acc_at_best_val,
    }
}

/// Writes the weights of `trained` to `path` (safetensors) and `sidecar` beside it, each through
/// a temporary file and a rename.
pub fn write(path: &Path, trained: &TrainedModel, sidecar: &Sidecar) -> Result<(), ExportError> {
    let invalid = |detail: String| ExportError::Invalid { path: path.to_path_buf(), detail };
    let model = Model::new(trained.config.clone()).map_err(|e| invalid(e.to_string()))?;
    let bytes: Vec<u8> = trained.params.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut tensors = Vec::new();
    for info in model.param_info() {
        let range = info.slot.range();
        let view =
            TensorView::new(Dtype::F32, vec![info.slot.rows, info.slot.cols], &bytes[4 * range.start..4 * range.end])
                .map_err(|e| invalid(e.to_string()))?;
        tensors.push((info.name.clone(), view));
    }
    let config = serde_json::to_string(&trained.config).expect("a model configuration serialises");
    let metadata = HashMap::from([(META_MODEL.to_string(), config), ("format".to_string(), "pt".to_string())]);
    let file = safetensors::serialize(tensors, Some(metadata)).map_err(|e| invalid(e.to_string()))?;
    let json = serde_json::to_string_pretty(sidecar).expect("a sidecar serialises") + "\n";
    let write = |target: &Path, contents: &[u8]| {
        write_atomic(target, |tmp| std::fs::write(tmp, contents))
            .map_err(|WriteError { action, path, source }| ExportError::Io { action, path, source })
    };
    write(path, &file)?;
    write(&sidecar_path(path), json.as_bytes())
}

/// Reads the weights at `path` and their sidecar into a model. Every tensor the model needs must
/// be there with its shape and type; errors name the file and the tensor.
pub fn load(path: &Path) -> Result<(Model, Sidecar), ExportError> {
    let sidecar_file = existing_sidecar(path);
    let read =
        |p: &Path| std::fs::read(p).map_err(|source| ExportError::Io { action: "read", path: p.to_path_buf(), source });
    // The weights first: a wrong path is named as given, not through its sidecar.
    let bytes = read(path)?;
    let sidecar: Sidecar = serde_json::from_slice(&read(&sidecar_file)?)
        .map_err(|e| ExportError::Invalid { path: sidecar_file.clone(), detail: e.to_string() })?;
    let invalid = |detail: String| ExportError::Invalid { path: path.to_path_buf(), detail };
    let tensors = SafeTensors::deserialize(&bytes).map_err(|e| invalid(format!("not a safetensors file: {e}")))?;
    let mut model =
        Model::new(sidecar.model.clone()).map_err(|e| invalid(format!("model of {}: {e}", sidecar_file.display())))?;
    let mut params = vec![0.0f32; model.num_params()];
    for info in model.param_info() {
        let tensor = tensors.tensor(&info.name).map_err(|_| invalid(format!("no tensor `{}`", info.name)))?;
        let shape = [info.slot.rows, info.slot.cols];
        if tensor.dtype() != Dtype::F32 || tensor.shape() != shape {
            return Err(invalid(format!(
                "tensor `{}` is {:?} {:?}, the model needs F32 {shape:?}",
                info.name,
                tensor.dtype(),
                tensor.shape()
            )));
        }
        for (value, chunk) in params[info.slot.range()].iter_mut().zip(tensor.data().chunks_exact(4)) {
            *value = f32::from_le_bytes(chunk.try_into().expect("chunks of 4 bytes"));
        }
    }
    model.set_params(&params).map_err(|e| invalid(e.to_string()))?;
    Ok((model, sidecar))
}

/// What a model predicts on a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Predictions {
    /// Per vertex: the class (single-label), or the labels with a positive logit (multi-label).
    pub labels: Vec<Vec<u32>>,
    /// Accuracies on the dataset's splits.
    pub eval: EvalStats,
}

/// Runs `model` over the whole of `dataset` (prepared as the model's training run prepared its
/// own: same feature normalisation) in inference mode.
pub fn predict(model: &mut Model, dataset: &Dataset) -> Result<Predictions, TrainError> {
    let logits = logits(model, dataset)?;
    let eval = accuracies(&Objective::new(&dataset.labels), &logits, &dataset.splits)?;
    let labels = logits
        .rows()
        .into_iter()
        .map(|row| match &dataset.labels {
            Labels::Classes(_) => {
                let best = row.iter().enumerate().fold(0, |b, (i, &v)| if v > row[b] { i } else { b });
                vec![best as u32]
            }
            Labels::MultiLabel(_) => row.iter().enumerate().filter(|(_, v)| **v > 0.0).map(|(i, _)| i as u32).collect(),
        })
        .collect();
    Ok(Predictions { labels, eval })
}

/// The logits of `model` on every vertex of `dataset` (prepared as for [`predict`]), one row
/// per vertex.
pub fn logits(model: &mut Model, dataset: &Dataset) -> Result<Array2<f32>, TrainError> {
    let (in_dim, out_dim) = (model.config().in_dim, model.config().out_dim);
    if dataset.num_features() != in_dim || dataset.num_classes != out_dim {
        return Err(TrainError::Parts {
            method: "predict".to_string(),
            detail: format!(
                "the model takes {in_dim} features and predicts {out_dim} classes; dataset {} has {} and {}",
                dataset.name,
                dataset.num_features(),
                dataset.num_classes
            ),
        });
    }
    let graph = AggGraph::single_shared(std::sync::Arc::clone(&dataset.graph))?;
    Ok(model.forward(&graph, &dataset.features, &mut NoExchange, ForwardCtx::eval())?.clone())
}

#[cfg(test)]
mod tests {
    use gnn_core::gpu::plan::DevicePlan;
    use gnn_core::{ConvKind, LayerOrder};
    use graph_partition::SynthConfig;

    use super::*;
    use crate::report::TrainedModel;

    /// The host half of `--save-model` on the device: parameters cut into the device's
    /// per-tensor buffers (as they are uploaded) and joined back (as the device run joins what
    /// it downloads at a best epoch) are a model that the one writer saves and `load` reads back
    /// equal, tensor for tensor and prediction for prediction, for every conv kind with
    /// LayerNorm.
    #[test]
    fn device_tensors_joined_back_save_and_load_as_the_model() {
        let dataset =
            SynthConfig { nodes: 60, avg_degree: 4.0, features: 6, classes: 3, seed: 4, ..Default::default() }
                .generate()
                .unwrap();
        for model in [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat] {
            let config = TrainConfig {
                model,
                hidden: 4,
                heads: 2,
                layers: 3,
                layer_norm: true,
                layer_order: Some(LayerOrder::DropoutFirst),
                epochs: 1,
                ..TrainConfig::default()
            };
            let mut report = crate::single::run("single", &config, &dataset, &mut ()).unwrap();
            let mut original = Model::new(config.model_config(6, 3)).unwrap();
            // Distinct values in every slot, so a tensor joined into the wrong place shows.
            let distinct: Vec<f32> = (0..original.num_params()).map(|i| ((i % 17) as f32 - 8.0) / 16.0).collect();
            original.set_params(&distinct).unwrap();
            let plan = DevicePlan::of(&original).unwrap();
            let downloaded: Vec<Vec<f32>> =
                plan.split(original.params()).unwrap().into_iter().map(<[f32]>::to_vec).collect();
            let params = plan.join(&downloaded).unwrap();
            report.trained = Some(TrainedModel { config: original.config().clone(), params, epoch: 1 });

            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("m.safetensors");
            save(&path, &report, Some(Path::new("datasets/toy"))).unwrap();
            let (mut loaded, sidecar) = load(&path).unwrap();
            assert_eq!(loaded.config(), original.config(), "{model}");
            assert_eq!(loaded.params(), distinct.as_slice(), "{model}");
            assert_eq!((sidecar.epoch, sidecar.val_acc), (1, report.final_.best_val_acc), "{model}");
            let dataset_dir = sidecar.dataset_dir.as_deref().unwrap();
            assert!(dataset_dir.is_absolute() && dataset_dir.ends_with("datasets/toy"), "{dataset_dir:?}");
            assert_eq!(predict(&mut loaded, &dataset).unwrap(), predict(&mut original, &dataset).unwrap(), "{model}");
        }
    }

    /// The sidecar is `<weights>.json`; a `<stem>.json` sidecar of an earlier version is read
    /// where it is the only one.
    #[test]
    fn the_sidecar_appends_json_and_an_old_one_is_still_read() {
        assert_eq!(sidecar_path(Path::new("out/m.safetensors")), Path::new("out/m.safetensors.json"));
        assert_eq!(sidecar_path(Path::new("m.json")), Path::new("m.json.json"));
        let dataset = SynthConfig { nodes: 40, avg_degree: 4.0, features: 4, classes: 3, ..Default::default() }
            .generate()
            .unwrap();
        let config = TrainConfig { hidden: 4, epochs: 1, ..TrainConfig::default() };
        let report = crate::single::run("single", &config, &dataset, &mut ()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        save(&path, &report, None).unwrap();
        assert!(path.with_extension("safetensors.json").is_file() && !path.with_extension("json").exists());
        std::fs::rename(sidecar_path(&path), path.with_extension("json")).unwrap();
        let (_, sidecar) = load(&path).unwrap();
        assert_eq!(
            (sidecar.epoch, sidecar.dataset_dir, sidecar.dataset_fingerprint),
            (report.trained.unwrap().epoch, None, None)
        );
    }
}
