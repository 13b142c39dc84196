//! `halo.Model`'s native half: trained weights and what they mean (the sidecar of
//! `halo train --save-model`), run over a dataset, written, read and listed by name.

use std::path::PathBuf;
use std::sync::Mutex;

use gnn_core::Model;
use numpy::{PyArray2, ToPyArray};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trainer::export::{self, Sidecar};
use trainer::report::TrainedModel;

use crate::dataset::NativeDataset;
use crate::value_error;

/// A trained model.
#[pyclass(frozen, module = "halo._halo", name = "NativeModel")]
pub struct NativeModel {
    trained: TrainedModel,
    sidecar: Sidecar,
    /// The model the weights are loaded into; a forward pass needs it mutable.
    model: Mutex<Model>,
}

impl NativeModel {
    pub fn new(trained: TrainedModel, sidecar: Sidecar) -> PyResult<Self> {
        let mut model = Model::new(trained.config.clone()).map_err(|e| value_error(e.to_string()))?;
        model.set_params(&trained.params).map_err(|e| value_error(e.to_string()))?;
        Ok(Self { trained, sidecar, model: Mutex::new(model) })
    }
}

#[pymethods]
impl NativeModel {
    /// Reads weights that `save` (or `halo train --save-model`) wrote, and their sidecar.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        let (model, sidecar) = export::load(&path).map_err(|e| PyOSError::new_err(e.to_string()))?;
        let trained = TrainedModel::of_host(&model, sidecar.epoch);
        Ok(Self { trained, sidecar, model: Mutex::new(model) })
    }

    /// Writes the weights (safetensors) and their sidecar (`<path>.json`), as the CLI does.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        export::write(&path, &self.trained, &self.sidecar).map_err(|e| PyOSError::new_err(e.to_string()))
    }

    /// The logits of every node of `dataset`, (N, C) float32, with the features normalised as
    /// in training.
    fn predict<'py>(&self, py: Python<'py>, dataset: &NativeDataset) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let norm = self.sidecar.train.feature_norm;
        let logits = py.detach(|| {
            let mut copy;
            let data = if norm == trainer::config::FeatureNorm::None {
                &*dataset.dataset
            } else {
                copy = (*dataset.dataset).clone();
                trainer::features::normalize(&mut copy.features, norm);
                &copy
            };
            let mut model = self.model.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            export::logits(&mut model, data)
        });
        Ok(logits.map_err(|e| value_error(e.to_string()))?.to_pyarray(py))
    }

    /// Every parameter by its Halo name (`conv0.weight`, ...), as (rows, cols) float32 arrays.
    fn parameters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        let model = self.model.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for info in model.param_info() {
            let values = self.trained.params[info.slot.range()].to_vec();
            let array = ndarray::Array2::from_shape_vec((info.slot.rows, info.slot.cols), values)
                .map_err(|e| value_error(e.to_string()))?;
            dict.set_item(&info.name, array.to_pyarray(py))?;
        }
        Ok(dict)
    }

    /// The sidecar as JSON: the model configuration, the training configuration, the epoch.
    #[getter]
    fn sidecar(&self) -> PyResult<String> {
        serde_json::to_string(&self.sidecar).map_err(|e| value_error(e.to_string()))
    }
}
