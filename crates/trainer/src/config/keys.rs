//! Where every key of the configuration sits, and its default, read off the configuration's own
//! serialized form (so a new key needs no entry here): the TOML sections that hold it, and the
//! methods whose settings it is. The command line refuses a method's flag under another method
//! with it and shows the defaults in its help, and a key in the wrong TOML section is told the
//! section it belongs in.

use std::sync::OnceLock;

use serde_json::Value;

use super::{Method, TrainConfig};

/// A key of the configuration.
struct Key {
    name: String,
    /// `""` for the top level, else the dotted path of its table (`distributed`,
    /// `method.cdfgnn`).
    section: String,
    /// Its default value, serialized.
    default: Value,
}

/// Every key, in the order of the configuration's fields.
fn all() -> &'static [Key] {
    static KEYS: OnceLock<Vec<Key>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = Vec::new();
        let config = serde_json::to_value(TrainConfig::default()).expect("the configuration serializes");
        collect(&config, "", &mut keys);
        keys
    })
}

/// Appends the keys of the table `value` at `section`, and those of its tables.
fn collect(value: &Value, section: &str, keys: &mut Vec<Key>) {
    let Value::Object(map) = value else { return };
    for (key, value) in map {
        if value.is_object() {
            let inner = if section.is_empty() { key.clone() } else { format!("{section}.{key}") };
            collect(value, &inner, keys);
        } else {
            keys.push(Key { name: key.clone(), section: section.to_string(), default: value.clone() });
        }
    }
}

/// The sections that hold `key` (none for a key of no section).
pub fn sections_of(key: &str) -> Vec<&'static str> {
    all().iter().filter(|k| k.name == key).map(|k| k.section.as_str()).collect()
}

/// `key`'s default as a flag's value spells it (`on`/`off` for a switch); `None` for an
/// unknown key or one whose default is to leave it unset (its help says what then holds).
pub fn default_text(key: &str) -> Option<String> {
    let key = all().iter().find(|k| k.name == key)?;
    match &key.default {
        Value::Null => None,
        Value::Bool(on) => Some(if *on { "on" } else { "off" }.to_string()),
        Value::String(text) => Some(text.clone()),
        // A float field serializes through f64: print it as the f32 it rounds to, so that
        // 5e-4f32 reads 0.0005 and not 0.0005000000237487257.
        Value::Number(n) if n.is_f64() => n.as_f64().map(|x| (x as f32).to_string()),
        other => Some(other.to_string()),
    }
}

/// The method whose settings table (`[method.<name>]`) holds `key` (as a list, empty for a key
/// of no method's table).
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
        assert!(owners("lr-scaling").is_empty(), "a [minibatch] key; methods that do not scale refuse it");
        assert!(owners("epochs").is_empty() && owners("workers").is_empty());
        assert!(is_distributed("overlap") && !is_distributed("batch-size"));
        assert!(sections_of("no-such-key").is_empty());
        // Every method with settings has a table, so each owns at least one key.
        for method in Method::ALL.into_iter().filter(|m| !matches!(m, Method::Single | Method::DataParallel)) {
            assert!(all().iter().any(|k| k.section == format!("method.{}", method.as_str())), "{method:?}");
        }
    }

    /// A key is one flag: no two sections share a name.
    #[test]
    fn every_key_has_one_section() {
        for key in all() {
            assert_eq!(sections_of(&key.name).len(), 1, "`{}` sits in several sections", key.name);
        }
    }

    #[test]
    fn defaults_read_as_flags_spell_them() {
        assert_eq!(default_text("weight-decay").as_deref(), Some("0.0005"));
        assert_eq!(default_text("epochs").as_deref(), Some("200"));
        assert_eq!(default_text("halo-cache").as_deref(), Some("on"));
        assert_eq!(default_text("overlap").as_deref(), Some("off"));
        assert_eq!(default_text("bits").as_deref(), Some("adaptive"));
        assert_eq!(default_text("peer-timeout").as_deref(), Some("60"));
        assert_eq!(default_text("batch-size"), None);
        assert_eq!(default_text("no-such-key"), None);
    }
}
