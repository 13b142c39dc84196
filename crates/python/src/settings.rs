//! `halo.train`'s settings: keyword arguments written as the TOML document `halo train --config`
//! reads, then read and validated by the same code (`TrainConfig::from_toml_str`). Keys take
//! `_` for `-` (`weight_decay` is `weight-decay`); a dict is a TOML section
//! (`distributed={"workers": 4}` is `[distributed] workers = 4`), and a method's settings sit at
//! the top level beside `method` (`method="adaqp", adaqp={"bits": 4}` is `[method] name =
//! "adaqp"` with `[method.adaqp] bits = 4`).

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
    let table = with_method_tables(table(settings, "")?);
    for (key, why) in FROM_THE_DATASET {
        if table.contains_key(key) {
            return Err(value_error(format!("setting `{key}`: {why}")));
        }
    }
    let text = toml::to_string(&table).map_err(|e| value_error(format!("settings: {e}")))?;
    TrainConfig::from_toml_str(&text, "settings").map_err(|err| value_error(message(err)))
}

/// `table` with each method's settings table moved under `method`, as the TOML holds them.
fn with_method_tables(mut table: Table) -> Table {
    let defaults = toml::Table::try_from(TrainConfig::default()).unwrap_or_default();
    let Some(Value::Table(methods)) = defaults.get("method") else { return table };
    let mut method = match table.remove("method") {
        Some(Value::String(name)) => Table::from_iter([("name".to_string(), Value::String(name))]),
        Some(Value::Table(given)) => given,
        Some(other) => {
            table.insert("method".into(), other);
            return table;
        }
        None => Table::new(),
    };
    let mut moved = false;
    for folder in methods.keys().filter(|key| *key != "name") {
        if let Some(settings @ Value::Table(_)) = table.remove(folder) {
            method.insert(folder.clone(), settings);
            moved = true;
        }
    }
    match method.remove("name") {
        // `method = "name"` alone stays as given, so that errors name the key given.
        Some(name) if !moved && method.is_empty() => {
            table.insert("method".into(), name);
        }
        name => {
            method.extend(name.map(|name| ("name".to_string(), name)));
            if !method.is_empty() {
                table.insert("method".into(), Value::Table(method));
            }
        }
    }
    table
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
