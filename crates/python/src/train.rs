//! `halo.train`'s native half: one run of `trainer::run_on` with the interpreter released.
//!
//! The run trains on a thread of its own. The calling thread, which Python's signal handlers
//! run on, waits for it with the interpreter released and takes the interpreter back every few
//! milliseconds to run them: Ctrl-C's `KeyboardInterrupt` asks the run to stop. The observer
//! holds every epoch, shows the progress display of `halo train` and calls the `on_epoch`
//! callback, which may stop the run too. A stopped run ends before its next epoch
//! ([`EpochObserver::stop_requested`]) with the epochs so far.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use graph_partition::Dataset;
use graph_partition::fs::write_atomic;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trainer::report::{Best, EpochRecord, PartialReport, Report, to_json};
use trainer::train_loop::EpochObserver;
use trainer::{LocalOptions, TrainConfig, TrainError};

use crate::dataset::NativeDataset;
use crate::model::NativeModel;
use crate::{settings, value_error};

/// How often the waiting thread runs Python's signal handlers.
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Why a run ended before its last epoch.
enum Stop {
    /// `on_epoch` returned `False`.
    Callback,
    /// A Python exception: Ctrl-C's `KeyboardInterrupt`, or one `on_epoch` raised.
    Raised(PyErr),
}

/// The epoch observer of a run from Python.
struct Observer<'s> {
    display: trainer::progress::Progress,
    callback: Option<Py<PyAny>>,
    epochs: Vec<EpochRecord>,
    /// Set by the callback.
    stop: Option<Stop>,
    /// Set by the waiting thread when a signal handler raised.
    interrupted: &'s AtomicBool,
}

impl Observer<'_> {
    /// The callback's part of an epoch's end.
    fn call_back(&mut self, py: Python<'_>, record: &EpochRecord) -> PyResult<()> {
        let Some(callback) = &self.callback else { return Ok(()) };
        let text = serde_json::to_string(record).map_err(|e| value_error(e.to_string()))?;
        let record = py.import("json")?.getattr("loads")?.call1((text,))?;
        let answer = callback.bind(py).call1((record,))?;
        if answer.is_instance_of::<pyo3::types::PyBool>() && !answer.extract::<bool>()? {
            self.stop = Some(Stop::Callback);
        }
        Ok(())
    }
}

impl EpochObserver for Observer<'_> {
    fn on_epoch(&mut self, record: &EpochRecord, best: &Best) {
        self.epochs.push(record.clone());
        self.display.on_epoch(record, best);
        if self.stop.is_none()
            && self.callback.is_some()
            && let Err(err) = Python::attach(|py| self.call_back(py, record))
        {
            self.stop = Some(Stop::Raised(err));
        }
    }

    fn shows_progress(&self) -> bool {
        self.display.shows_progress()
    }

    fn stop_requested(&self) -> bool {
        self.stop.is_some() || self.interrupted.load(Ordering::Relaxed)
    }
}

/// What a run hands back to Python: the report's JSON, whether it is complete, the model, and
/// the exception to raise (Ctrl-C's, or the callback's) with the report kept.
#[pyclass(frozen, module = "halo._halo", name = "NativeRun")]
pub struct NativeRun {
    #[pyo3(get)]
    report: String,
    #[pyo3(get)]
    complete: bool,
    #[pyo3(get)]
    model: Option<Py<NativeModel>>,
    #[pyo3(get)]
    error: Option<Py<PyAny>>,
}

/// Trains on `dataset` as `settings` say (see `halo.train`).
#[pyfunction]
#[pyo3(signature = (dataset, settings, on_epoch=None, progress=true, terminal=false))]
pub fn train(
    py: Python<'_>,
    dataset: &NativeDataset,
    settings: &Bound<'_, PyDict>,
    on_epoch: Option<Py<PyAny>>,
    progress: bool,
    terminal: bool,
) -> PyResult<NativeRun> {
    let config = settings::config(settings)?;
    let interrupted = AtomicBool::new(false);
    let signal: Mutex<Option<PyErr>> = Mutex::new(None);
    let mut observer = Observer {
        display: trainer::progress::Progress::new(config.epochs, !progress, terminal),
        callback: on_epoch,
        epochs: Vec::new(),
        stop: None,
        interrupted: &interrupted,
    };
    let data = Arc::clone(&dataset.dataset);
    let outcome = py.detach(|| {
        std::thread::scope(|scope| {
            let run = scope.spawn(|| {
                let prepared = prepared(&config, &data);
                trainer::run_on(&config, &prepared, LocalOptions::default(), &mut observer)
            });
            while !run.is_finished() {
                std::thread::park_timeout(SIGNAL_POLL);
                if let Err(err) = Python::attach(|py| py.check_signals()) {
                    signal.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert(err);
                    interrupted.store(true, Ordering::Relaxed);
                }
            }
            run.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    });
    observer.display.finish();
    let signal = signal.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    match (outcome, observer.stop.or(signal.map(Stop::Raised))) {
        (Ok(report), _) => {
            let text = keep(&config, &to_json(&report).map_err(|e| value_error(e.to_string()))?)?;
            let model = model_of(py, &report, dataset)?;
            Ok(NativeRun { report: text, complete: true, model, error: None })
        }
        (Err(_), Some(stop)) => {
            let after = observer.epochs.len();
            let (reason, error) = match stop {
                Stop::Callback => (format!("stopped by on_epoch after epoch {after}"), None),
                Stop::Raised(err) => {
                    let name = err.get_type(py).name().map(|n| n.to_string()).unwrap_or_default();
                    (format!("interrupted by {name} after epoch {after}"), Some(err.into_value(py).into_any()))
                }
            };
            let partial = PartialReport::new(&config, &observer.epochs, &reason);
            let text = keep(&config, &to_json(&partial).map_err(|e| value_error(e.to_string()))?)?;
            Ok(NativeRun { report: text, complete: false, model: None, error })
        }
        (Err(err), None) => {
            let reason = err.to_string();
            let partial = PartialReport::new(&config, &observer.epochs, &reason);
            if let Ok(text) = to_json(&partial) {
                keep(&config, &text)?;
            }
            Err(match err {
                TrainError::Config(_) | TrainError::NoTrainingNodes { .. } | TrainError::Parts { .. } => {
                    value_error(reason)
                }
                _ => pyo3::exceptions::PyRuntimeError::new_err(reason),
            })
        }
    }
}

/// The dataset as the configuration prepares it: its features normalised, in a copy, where the
/// configuration asks for it (`feature-norm`), as `trainer::data::prepare_dataset` does.
fn prepared<'d>(config: &TrainConfig, dataset: &'d Dataset) -> std::borrow::Cow<'d, Dataset> {
    use trainer::config::FeatureNorm;
    if config.feature_norm == FeatureNorm::None {
        return std::borrow::Cow::Borrowed(dataset);
    }
    let mut copy = dataset.clone();
    trainer::features::normalize(&mut copy.features, config.feature_norm);
    std::borrow::Cow::Owned(copy)
}

/// Writes `text` to the configuration's report path, if it names one; hands `text` back.
fn keep(config: &TrainConfig, text: &str) -> PyResult<String> {
    if let Some(path) = &config.report {
        write_atomic(path, |tmp| std::fs::write(tmp, text)).map_err(|e| {
            pyo3::exceptions::PyOSError::new_err(format!("cannot {} report {}: {}", e.action, path.display(), e.source))
        })?;
    }
    Ok(text.to_string())
}

/// The model of `report`, trained on `dataset`.
fn model_of(py: Python<'_>, report: &Report, dataset: &NativeDataset) -> PyResult<Option<Py<NativeModel>>> {
    let Some(trained) = &report.trained else { return Ok(None) };
    let sidecar = trainer::export::sidecar_of(report, trained, dataset.dir.as_deref());
    let model = NativeModel::new(trained.clone(), sidecar)?;
    Ok(Some(Py::new(py, model)?))
}
