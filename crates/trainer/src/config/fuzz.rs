//! Fuzzing of the TOML configuration on stable Rust: proptest mutates a valid file that sets
//! keys of every table (byte overwrites, then a cut) and parsing must give a configuration or
//! an error naming the file, never a panic. 5k inputs; `HALO_FUZZ_CASES=100000` is the long
//! run (`docs/RELIABILITY.md`).

use proptest::prelude::*;
use proptest::sample::Index;

use super::TrainConfig;

const VALID: &str = r#"dataset = "cora"
model = "gat"
layers = 3
hidden = 8
epochs = 50
lr = 0.005
dropout = 0.6
seed = 7
patience = 10

[method]
name = "cdfgnn"

[method.cdfgnn]
quant-bits = 8

[distributed]
cut = "vertex"
workers = 4
hosts = 2
topology = "adaqp"

[minibatch]
eval-batch-size = 512

[reliability]
checkpoint-dir = "ck"
checkpoint-every = 5
peer-timeout = 30.0
"#;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: crate::checkpoint::fuzz_cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_configs_parse_or_name_the_file(
        edits in proptest::collection::vec((any::<Index>(), any::<u8>()), 0..6),
        cut in proptest::option::of(any::<Index>()),
    ) {
        let mut bytes = VALID.as_bytes().to_vec();
        for (at, value) in &edits {
            let i = at.index(bytes.len());
            bytes[i] = *value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = TrainConfig::from_toml_str(&text, "fuzz.toml") {
            prop_assert!(e.to_string().contains("fuzz.toml"), "{e}");
        }
    }
}

#[test]
fn the_seed_file_is_valid() {
    TrainConfig::from_toml_str(VALID, "fuzz.toml").unwrap();
}
