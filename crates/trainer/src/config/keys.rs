//! Where every key of the configuration sits, read off the configuration's own serialized form
//! (so a new key needs no entry here): the TOML sections that hold it, and the methods whose
//! settings it is. The command line refuses a method's flag under another method with it, and
//! a key in the wrong TOML section is told the section it belongs in.

use std::sync::OnceLock;

use serde_json::Value;

use super::{Method, TrainConfig};

/// Every key with the section that holds it: `""` for the top level, else the dotted path of
/// its table (`distributed`, `method.cdfgnn`). A key may sit in several (`lr-scaling`).
fn all() -> &'static [(String, String)] {
    static KEYS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = Vec::new();
        let config = serde_json::to_value(TrainConfig::default()).expect("the configuration serializes");
        collect(&config, "", &mut keys);
        keys
    })
}

/// Appends the keys of the table `value` at `section`, and those of its tables.
fn collect(value: &Value, section: &str, keys: &mut Vec<(String, String)>) {
    let Value::Object(map) = value else { return };
    for (key, value) in map {
        if value.is_object() {
            let inner = if section.is_empty() { key.clone() } else { format!("{section}.{key}") };
            collect(value, &inner, keys);
        } else {
            keys.push((key.clone(), section.to_string()));
        }
    }
}

/// The sections that hold `key` (none for a key of no section).
pub fn sections_of(key: &str) -> Vec<&'static str> {
    all().iter().filter(|(k, _)| k == key).map(|(_, section)| section.as_str()).collect()
}

/// The methods whose settings table (`[method.<name>]`) holds `key`, in the order of
/// [`Method::ALL`]; none for a key every method reads.
pub fn owners(key: &str) -> Vec<Method> {
    let sections = sections_of(key);
    Method::ALL.into_iter().filter(|m| sections.contains(&format!("method.{}", m.as_str()).as_str())).collect()
}

/// Whether `key` is one of `[distributed]`'s.
pub fn is_distributed(key: &str) -> bool {
    sections_of(key).contains(&"distributed")
}

/// How an error names a section: `[distributed]`, or the top level.
pub(crate) fn describe(section: &str) -> String {
    if section.is_empty() { "the top level".to_string() } else { format!("[{section}]") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_know_their_sections_and_methods() {
        assert_eq!(sections_of("workers"), ["distributed"]);
        assert_eq!(sections_of("epochs"), [""]);
        assert_eq!(owners("quant-bits"), [Method::Cdfgnn]);
        assert_eq!(owners("lr-scaling"), [Method::DataParallel, Method::Adgraph]);
        assert!(owners("epochs").is_empty() && owners("workers").is_empty());
        assert!(is_distributed("overlap") && !is_distributed("batch-size"));
        assert!(sections_of("no-such-key").is_empty());
        // Every method with settings has a table, so each owns at least one key.
        for method in Method::ALL.into_iter().filter(|m| !matches!(m, Method::Single)) {
            assert!(all().iter().any(|(_, s)| *s == format!("method.{}", method.as_str())), "{method:?}");
        }
    }
}
