//! `halo.train`'s settings: keyword arguments written as the TOML document `halo train --config`
//! reads, then read and validated by the same code (`TrainConfig::from_toml_str`). Keys take
//! `_` for `-` (`weight_decay` is `weight-decay`); a dict is a TOML section
//! (`distributed={"workers": 4}` is `[distributed] workers = 4`).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use toml::{Table, Value};
use trainer::TrainConfig;
use trainer::config::ConfigError;

use crate::value_error;

/// Keys that `halo.train` takes from its dataset argument instead.
const FROM_THE_DATASET: [(&str, &str); 2] = [
    ("dataset", "pass the dataset as train's first argument (a halo.Dataset, or a folder or name to open)"),
    ("split", "choose the split when the dataset is opened: halo.Dataset.open(path, split=...)"),
];

/// The validated configuration of `settings`.
pub fn config(settings: &Bound<'_, PyDict>) -> PyResult<TrainConfig> {
    let table = table(settings, "")?;
    for (key, why) in FROM_THE_DATASET {
        if table.contains_key(key) {
            return Err(value_error(format!("setting `{key}`: {why}")));
        }
    }
    let text = toml::to_string(&table).map_err(|e| value_error(format!("settings: {e}")))?;
    TrainConfig::from_toml_str(&text, "settings").map_err(|err| value_error(message(err)))
}

/// The CLI's message, less the line of the TOML text (which the caller never saw).
fn message(err: ConfigError) -> String {
    match err {
        ConfigError::Toml { key: Some(key), message, .. } => format!("setting `{key}`: {message}"),
        ConfigError::Toml { key: None, message, .. } => format!("settings: {message}"),
        other => other.to_string(),
    }
}

/// The TOML table of a dict of settings; `section` names it in errors.
fn table(dict: &Bound<'_, PyDict>, section: &str) -> PyResult<Table> {
    let mut table = Table::new();
    for (key, value) in dict.iter() {
        let key: String = key.extract().map_err(|_| value_error(format!("{section}settings: keys are strings")))?;
        let key = key.replace('_', "-");
        let value = toml_value(&value, &format!("{section}{key}"))?;
        table.insert(key, value);
    }
    Ok(table)
}

/// `value` as TOML; `path` names its key in errors.
fn toml_value(value: &Bound<'_, PyAny>, path: &str) -> PyResult<Value> {
    if value.is_instance_of::<PyBool>() {
        return Ok(Value::Boolean(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        let int: i64 = value.extract().map_err(|_| value_error(format!("setting `{path}`: {value} is too large")))?;
        return Ok(Value::Integer(int));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(Value::Float(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(Value::String(value.extract()?));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        return Ok(Value::Table(table(dict, &format!("{path}."))?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = value.try_iter()?.collect::<PyResult<_>>()?;
        return items.iter().map(|item| toml_value(item, path)).collect::<PyResult<_>>().map(Value::Array);
    }
    let fspath = value.py().import("os")?.getattr("fspath")?;
    if let Ok(path_text) = fspath.call1((value,)).and_then(|p| p.extract::<String>()) {
        return Ok(Value::String(path_text));
    }
    let kind = value.get_type().name()?;
    let hint = if value.is_none() { " (leave the key out for its default)" } else { "" };
    Err(value_error(format!(
        "setting `{path}`: a {kind} is not a setting's value{hint}; settings are bool, int, float, str, path, list or dict"
    )))
}
