//! Memory settings (`[memory]` in the TOML config, `--max-memory` on the command line). See
//! `docs/RELIABILITY.md`.

use serde::{Deserialize, Deserializer, Serialize};

/// The ceiling a run's estimated peak is checked against, before partitioning and before
/// training.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct MemoryConfig {
    /// Fail before partitioning or training when the estimated peak memory exceeds SIZE (bytes,
    /// or with K, M, G, T: powers of 1024, e.g. 8G, 512M; TOML also takes a number of bytes)
    /// [default: the machine's available memory, MemAvailable, when the run starts].
    #[serde(deserialize_with = "deserialize_size")]
    #[cfg_attr(feature = "clap", arg(long, value_name = "SIZE", value_parser = parse_size))]
    pub max_memory: Option<u64>,
}

/// A size: a whole number of bytes, optionally followed by `K`, `M`, `G` or `T` (powers of
/// 1024; a trailing `B` or `iB` is allowed, case is ignored), e.g. `8G`, `512M`, `1048576`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let unit_start = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(unit_start);
    let shift = match unit.trim_start() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown unit `{other}` in `{t}`; expected a size such as 8G, 512M or bytes")),
    };
    let value: u64 =
        digits.parse().map_err(|_| format!("`{t}` is not a size such as 8G, 512M or a number of bytes"))?;
    if value == 0 {
        return Err(format!("`{t}` is zero; give a size above 0"));
    }
    value.checked_mul(1 << shift).ok_or_else(|| format!("`{t}` is larger than 16 EiB"))
}

fn deserialize_size<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bytes(u64),
        Text(String),
    }
    // `null` (a report's configuration read back) is the default.
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Bytes(0)) => Err(serde::de::Error::custom("max-memory: 0 bytes; give a size above 0")),
        Some(Raw::Bytes(b)) => Ok(Some(b)),
        Some(Raw::Text(t)) => {
            parse_size(&t).map(Some).map_err(|e| serde::de::Error::custom(format!("max-memory: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::TrainConfig;
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("2 GiB"), Ok(2 << 30));
        assert_eq!(parse_size("4kb"), Ok(4096));
        for bad in ["", "G", "8X", "-1G", "1.5G", "0", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn toml_takes_bytes_or_sizes_and_errors_name_the_key() {
        let c = TrainConfig::from_toml_str("[memory]\nmax-memory = \"3G\"\n", "run.toml").unwrap();
        assert_eq!(c.memory.max_memory, Some(3 << 30));
        let c = TrainConfig::from_toml_str("[memory]\nmax-memory = 4096\n", "run.toml").unwrap();
        assert_eq!(c.memory.max_memory, Some(4096));
        assert_eq!(TrainConfig::default().memory.max_memory, None);
        let msg = TrainConfig::from_toml_str("[memory]\nmax-memory = \"lots\"\n", "run.toml").unwrap_err().to_string();
        assert!(msg.contains("max-memory") && msg.contains("run.toml"), "{msg}");
    }
}
