//! One model over two backends: the trainer's runners are written once over
//! `gnn_core::Learner`, so nothing in `crates/trainer/src` is a CPU or GPU twin of another.
//!
//! - Each runner's model trait ([`MODEL_TRAITS`]) has one implementation outside tests.
//! - Code under `#[cfg(feature = "cuda")]` defines no type, module or trait implementation:
//!   it may open a GPU and place the device model, and nothing more.
//! - No top-level module runs the device path on its own (`device.rs`).

use std::fs;

use super::source::code_lines;
use super::{assert_clean, rust_files, workspace_root};

/// The traits a runner's model implements; one implementation each.
const MODEL_TRAITS: [&str; 2] = ["PartModel", "BatchModel"];

/// Whether `line` implements `name` (`impl ... name for ...`).
fn implements(line: &str, name: &str) -> bool {
    let line = line.trim();
    line.starts_with("impl") && line.contains(&format!(" {name} for ")) || line.contains(&format!("::{name} for "))
}

/// Violations in `files` (path relative to `crates/trainer/src`, code without comments).
fn check(files: &[(String, Vec<String>)]) -> Vec<String> {
    let mut out = Vec::new();
    for name in MODEL_TRAITS {
        let impls: Vec<String> = files
            .iter()
            .filter(|(path, _)| !path.ends_with("tests.rs"))
            .flat_map(|(path, lines)| {
                lines
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| implements(l, name))
                    .map(move |(i, _)| format!("{path}:{}", i + 1))
            })
            .collect();
        if impls.len() != 1 {
            out.push(format!(
                "`{name}` has {} implementations ({}): a runner's model is written once, over `Learner`",
                impls.len(),
                impls.join(", ")
            ));
        }
    }
    for (path, lines) in files {
        if path == "device.rs" {
            out.push("device.rs: the device path runs through `Learner`, not a runner of its own".to_owned());
        }
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "#[cfg(feature = \"cuda\")]" {
                continue;
            }
            let item = lines[i + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty() && !l.starts_with("#["));
            let defines = item.is_some_and(|l| {
                ["impl", "mod ", "struct ", "enum ", "trait "].iter().any(|w| {
                    l.trim_start_matches("pub ")
                        .trim_start_matches("pub(crate) ")
                        .trim_start_matches("pub(super) ")
                        .starts_with(w)
                })
            });
            if defines {
                out.push(format!(
                    "{path}:{}: code behind the `cuda` feature defines a twin ({})",
                    i + 2,
                    item.unwrap_or_default()
                ));
            }
        }
    }
    out
}

#[test]
fn runners_are_written_once_over_the_learner() {
    let src = workspace_root().join("crates/trainer/src");
    let files: Vec<(String, Vec<String>)> = rust_files(&src)
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            (path.strip_prefix(&src).expect("under src").display().to_string(), code_lines(&text))
        })
        .collect();
    assert_clean("one model over two backends", &check(&files));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<String>)> {
        list.iter().map(|(p, s)| (p.to_string(), s.lines().map(str::to_owned).collect())).collect()
    }

    #[test]
    fn one_implementation_each_and_no_cuda_twin() {
        let good = files(&[
            ("distributed/compute.rs", "impl<L: Learner> PartModel for OnPart<'_, L> {}"),
            ("minibatch/compute.rs", "impl<L: Learner> BatchModel for OnBlocks<'_, L> {}"),
            ("minibatch/tests.rs", "impl super::compute::BatchModel for Ahead<'_> {}"),
            ("single.rs", "#[cfg(feature = \"cuda\")]\nfn on_gpu() {}"),
        ]);
        assert_eq!(check(&good), Vec::<String>::new());
        let twin = files(&[
            ("distributed/compute.rs", "impl<L: Learner> PartModel for OnPart<'_, L> {}"),
            ("minibatch/compute.rs", "impl BatchModel for OnCpu {}"),
            (
                "minibatch/on_device.rs",
                "#[cfg(feature = \"cuda\")]\nmod cuda {\n impl BatchModel for OnDevice<'_> {}\n}",
            ),
            ("device.rs", ""),
        ]);
        let v = check(&twin);
        assert_eq!(v.len(), 3, "{v:#?}");
        assert!(v[0].contains("`BatchModel` has 2 implementations"), "{}", v[0]);
        assert!(v[1].contains("minibatch/on_device.rs:2"), "{}", v[1]);
        assert!(v[2].starts_with("device.rs"), "{}", v[2]);
    }
}
