//! Module layering inside `crates/trainer`: its top-level modules form one order, bottom to top,
//! and a module may name (`crate::<module>`, a crate-root re-export of it, or `super::` up to the
//! root) only modules below it. No import cycle can then form between them. Test code (a
//! `#[cfg(test)]` item, and the files of a `#[cfg(test)] mod`) is exempt: tests drive a module
//! through the whole run. `lib.rs` declares the modules and re-exports; it is the top.
//!
//! A method's folder (`method/<name>/`) is a vertical slice ([`slice`]): its `rules.rs` and
//! `settings.rs` are part of `config` (the configuration holds every method's rules and
//! settings), and the rest (its parts, controllers and own runner) is the `methods` layer above
//! the shared runners. `method/mod.rs`, what every method is made of, is the `method` layer.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use super::source::code_lines;
use super::{assert_clean, rust_files, workspace_root};

/// The trainer's top-level modules, bottom to top.
const ORDER: [&str; 21] = [
    "config",      // every setting, TOML loading and validation
    "features",    // feature preprocessing
    "data",        // the dataset a run trains on, and where it comes from (`Source`)
    "error",       // `TrainError` and every error type it wraps
    "guard",       // non-finite checks
    "measure",     // how workers' compute is measured
    "memory",      // peak memory: estimates, ceiling, RSS
    "report",      // the report contract, `Best`, `TrainedModel`
    "checkpoint",  // checkpoint files and exact resume
    "train_loop",  // the epoch loop every strategy runs in
    "progress",    // the progress display on stderr
    "harness",     // under every runner: cluster, gate, clock, per-rank data, the one report
    "export",      // trained weights as safetensors, and prediction
    "method",      // what every method is made of: its parts
    "distributed", // the runner of a cut graph
    "single",      // the whole graph in one process
    "minibatch",   // the runners of sampled mini-batches
    "methods",     // each method's folder `method/<name>/` but its rules and settings
    "plan",        // one checked plan per run, and the built-in methods' lookup
    "run",         // `run`, `run_on`, `run_method`: a method's runner chosen
    "experiment",  // grids of variants x seeds over `run`
];

/// Upward imports not yet removed, as (file under `crates/trainer/src`, module it reaches up to).
/// This list only shrinks: an entry that no longer matches is itself a violation. It is empty,
/// and stays so: a new entry needs a reason stronger than the order.
const ALLOWED: [(&str, &str); 0] = [];

/// The layer of `module` in [`ORDER`].
fn layer(module: &str) -> Option<usize> {
    ORDER.iter().position(|&m| m == module)
}

/// The crate-root names that `pub use` re-exports in `lib.rs`, with the module each comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for line in code_lines(lib) {
        let Some(path) = line.trim().strip_prefix("pub use ").and_then(|p| p.strip_suffix(';')) else { continue };
        let Some((module, rest)) = path.split_once("::") else { continue };
        let rest = rest.trim_start_matches('{').trim_end_matches('}');
        for entry in rest.split(',') {
            let name = entry.trim().rsplit("::").next().unwrap_or_default();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    names
}

/// The file's code with its `#[cfg(test)]` items left out, and the names of the out-of-line
/// test modules it declares (`#[cfg(test)] mod tests;`).
fn non_test_code(src: &str) -> (String, Vec<String>) {
    let mut kept = String::new();
    let mut test_mods = Vec::new();
    let mut lines = code_lines(src).into_iter();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            kept.push_str(&line);
            kept.push('\n');
            continue;
        }
        // Skip the item the attribute applies to: one line up to `;`, or a braced block.
        let mut depth = 0i32;
        let mut opened = false;
        for item in lines.by_ref() {
            let decl = item.trim();
            if let Some(name) = decl.rsplit_once("mod ").and_then(|(_, n)| n.strip_suffix(';')) {
                test_mods.push(name.trim().to_owned());
            }
            depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
            opened |= item.contains('{');
            if (opened && depth <= 0) || (!opened && decl.ends_with(';')) {
                break;
            }
        }
    }
    (kept, test_mods)
}

/// The non-test code of a crate's `files` (path under `src/`, text): each file without its
/// `#[cfg(test)]` items, and without the files of its `#[cfg(test)] mod`s.
pub(super) fn production_code(files: &[(String, String)]) -> Vec<(&String, String)> {
    let mut test_files: Vec<String> = Vec::new();
    let mut checked = Vec::new();
    for (file, src) in files {
        let (code, test_mods) = non_test_code(src);
        let dir = match file
            .strip_suffix("mod.rs")
            .or_else(|| file.strip_suffix("lib.rs"))
            .or_else(|| file.strip_suffix("main.rs"))
        {
            Some(dir) => dir.to_owned(),
            None => format!("{}/", file.trim_end_matches(".rs")),
        };
        test_files.extend(test_mods.iter().flat_map(|m| [format!("{dir}{m}.rs"), format!("{dir}{m}/")]));
        checked.push((file, code));
    }
    checked.retain(|(file, _)| {
        !test_files.iter().any(|t| *file == t || (t.ends_with('/') && file.starts_with(t.as_str())))
    });
    checked
}

pub(super) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first names of the paths that start at the crate root in `code`, with each path as
/// written: `crate::a::B`, `crate::{a, b::C}` (one per entry), and `super::` chains that climb
/// `depth` modules (the file's depth below the root) or more.
fn root_paths(code: &str, depth: usize) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let starts_path = i == 0 || !(is_ident(bytes[i - 1] as char) || bytes[i - 1] == b':');
        let rest = &code[i..];
        let after = if !starts_path {
            None
        } else if let Some(r) = rest.strip_prefix("crate::") {
            Some(r)
        } else if rest.starts_with("super::") {
            let mut r = rest;
            let mut climbed = 0;
            while let Some(next) = r.strip_prefix("super::") {
                r = next;
                climbed += 1;
            }
            (climbed >= depth).then_some(r)
        } else {
            None
        };
        let Some(after) = after else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let start = code.len() - after.len();
        if let Some(group) = after.strip_prefix('{') {
            let mut level = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    level += i32::from(c == '{') - i32::from(c == '}');
                    level == 0
                })
                .map_or(group.len(), |(e, _)| e);
            let mut level = 0;
            let mut entry = String::new();
            for c in group[..end].chars().chain([',']) {
                level += i32::from(c == '{') - i32::from(c == '}');
                if c == ',' && level == 0 {
                    let text: String = entry.split_whitespace().collect::<Vec<_>>().join(" ");
                    let name: String = text.chars().take_while(|&c| is_ident(c)).collect();
                    if !name.is_empty() && name != "self" {
                        found.push((name, format!("crate::{text}")));
                    }
                    entry.clear();
                } else {
                    entry.push(c);
                }
            }
            i = start + 1 + end;
        } else {
            // A macro's metavariable (`$folder`) is a segment too: its path lands in a slice.
            let path: String = after.chars().take_while(|&c| is_ident(c) || c == ':' || c == '$').collect();
            let path = path.trim_end_matches(':').to_owned();
            let name: String = path.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                found.push((name, format!("crate::{path}")));
            }
            i = start + path.len().max(1);
        }
    }
    found
}

/// The layer that the module path `segments` (below the crate root) lands in where it is in a
/// method's folder (one of `folders`, or a macro's metavariable such as `$folder`): its rules and
/// settings are `config`'s, the rest is `methods`.
fn slice(segments: &[&str], folders: &BTreeSet<String>) -> Option<&'static str> {
    match segments {
        ["method", folder, rest @ ..] if folder.starts_with('$') || folders.contains(*folder) => match rest {
            ["rules" | "settings", ..] => Some("config"),
            _ => Some("methods"),
        },
        _ => None,
    }
}

/// The method folders among `files`: the folders under `method/`.
fn method_folders(files: &[(String, String)]) -> BTreeSet<String> {
    files
        .iter()
        .filter_map(|(f, _)| f.strip_prefix("method/")?.split_once('/').map(|(folder, _)| folder.to_owned()))
        .collect()
}

/// The module a file belongs to (its top-level module, or its method slice's layer) and its depth
/// below the crate root: `a.rs` and `a/mod.rs` are `a` at depth 1, `a/b.rs` is `a` at depth 2.
fn owner(file: &str, folders: &BTreeSet<String>) -> (String, usize) {
    let parts: Vec<&str> = file.split('/').map(|p| p.trim_end_matches(".rs")).collect();
    let depth = if parts.last() == Some(&"mod") { parts.len() - 1 } else { parts.len() };
    let module = slice(&parts, folders).unwrap_or(parts[0]);
    (module.to_owned(), depth)
}

/// Violations among `files` (path under `src/` with `/` separators, text): a top-level module
/// missing from [`ORDER`], a root path naming neither a module nor a re-export, and an import of
/// a module at or above the file's own (but its own), less the `allowed` ones; and every
/// `allowed` entry that matches nothing.
fn check_order(files: &[(String, String)], allowed: &[(&str, &str)]) -> Vec<String> {
    let lib = files.iter().find(|(f, _)| f == "lib.rs").map_or("", |(_, s)| s.as_str());
    let names = reexports(lib);
    let folders = method_folders(files);
    let mut violations = Vec::new();
    let mut used = BTreeSet::new();
    for (file, code) in production_code(files) {
        if file == "lib.rs" {
            continue;
        }
        let (own, depth) = owner(file, &folders);
        let Some(own_layer) = layer(&own) else {
            violations.push(format!("{file}: module `{own}` is not in ORDER in xtask/src/tidy/trainer_modules.rs"));
            continue;
        };
        for (name, path) in root_paths(&code, depth) {
            let segments: Vec<&str> = path.trim_start_matches("crate::").split("::").map(str::trim).collect();
            let target = match slice(&segments, &folders) {
                Some(module) => Some(module.to_owned()),
                None if layer(&name).is_some() => Some(name.clone()),
                None => names.get(&name).cloned(),
            };
            let Some(target) = target else {
                violations.push(format!("{file}: `{path}` names neither a module in ORDER nor a re-export of lib.rs"));
                continue;
            };
            let Some(target_layer) = layer(&target) else { continue };
            if target == own || target_layer < own_layer {
                continue;
            }
            if allowed.iter().any(|&(f, m)| f == file && m == target) {
                used.insert((file.clone(), target));
                continue;
            }
            violations.push(format!(
                "{file}: `{path}` reaches up from `{own}` (layer {own_layer}) to `{target}` (layer {target_layer}); \
                 move what it needs below `{own}`"
            ));
        }
    }
    for &(file, module) in allowed {
        if !used.contains(&(file.to_owned(), module.to_owned())) {
            violations.push(format!("ALLOWED entry ({file}, {module}) matches no import any more: remove it"));
        }
    }
    violations
}

#[test]
fn trainer_modules_import_only_downward() {
    let src = workspace_root().join("crates/trainer/src");
    let files = sources(&src);
    assert!(files.iter().any(|(f, _)| f == "lib.rs"), "expected {} to hold lib.rs", src.display());
    let declared = declared_top_modules(&files);
    let unlisted: Vec<String> = declared
        .iter()
        .filter(|m| layer(m).is_none())
        .map(|m| format!("lib.rs declares `mod {m}`, which is not in ORDER in xtask/src/tidy/trainer_modules.rs"))
        .collect();
    assert_clean("trainer module order", &unlisted);
    assert_clean("trainer module layering", &check_order(&files, &ALLOWED));
}

/// Every `.rs` file under `src` as (path under `src` with `/` separators, text).
pub(super) fn sources(src: &std::path::Path) -> Vec<(String, String)> {
    rust_files(src)
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap_or(&f);
            let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            let text = fs::read_to_string(&f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
            (rel, text)
        })
        .collect()
}

/// The modules `lib.rs` declares.
fn declared_top_modules(files: &[(String, String)]) -> Vec<String> {
    let lib = files.iter().find(|(f, _)| f == "lib.rs").map_or("", |(_, s)| s.as_str());
    code_lines(lib)
        .iter()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ").and_then(|n| n.strip_suffix(';')).map(str::to_owned)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        let lib = "pub mod config;\npub mod report;\npub use error::TrainError;\npub use run::{run, run_on};\n";
        std::iter::once(("lib.rs".to_owned(), lib.to_owned()))
            .chain(list.iter().map(|&(f, s)| (f.to_owned(), s.to_owned())))
            .collect()
    }

    #[test]
    fn downward_imports_pass() {
        let v = check_order(
            &files(&[
                ("report.rs", "use crate::config::TrainConfig;\nuse crate::{memory::Limit, error::TrainError};\n"),
                ("checkpoint/mod.rs", "use crate::report::{Best, EpochRecord};\nuse self::store;\n"),
                ("checkpoint/store.rs", "use super::Manifest;\nuse crate::TrainError;\nuse crate::checkpoint::x;\n"),
                ("experiment/grid.rs", "fn f() { crate::run(c, s, o); }\n"),
            ]),
            &[],
        );
        assert_eq!(v, Vec::<String>::new());
    }

    /// A method's settings are `config`'s and may be read by it; the rest of its folder stands on
    /// the shared runners; its settings reach up to neither.
    #[test]
    fn a_method_folder_is_a_vertical_slice() {
        let v = check_order(
            &files(&[
                ("config/method.rs", "pub use crate::method::adaqp::settings::AdaqpSettings;\n"),
                ("method/adaqp/settings.rs", "use crate::config::ConfigError;\n"),
                ("method/featpart/runner/mod.rs", "use crate::minibatch::trainer::T;\nuse crate::method::Parts;\n"),
                ("run.rs", "fn f() { crate::method::featpart::runner::run(); }\n"),
                ("method/featpart/mod.rs", "use crate::method::featpart::runner::ColumnFactory;\n"),
                ("method/ecgraph/settings.rs", "use crate::method::Parts;\n"),
                ("method/mod.rs", "pub use crate::method::featpart::FetchSpec;\n"),
                ("distributed/mod.rs", "use crate::method::Parts;\nuse crate::method::adaqp::Controller;\n"),
            ]),
            &[],
        );
        assert_eq!(v.len(), 3, "{v:#?}");
        assert!(v[0].contains("method/ecgraph/settings.rs: `crate::method::Parts` reaches up from `config`"));
        assert!(v[1].contains("method/mod.rs: `crate::method::featpart::FetchSpec` reaches up from `method`"));
        assert!(v[2].contains("distributed/mod.rs: `crate::method::adaqp::Controller` reaches up"), "{v:#?}");
    }

    #[test]
    fn an_upward_import_fails_in_every_spelling() {
        let v = check_order(
            &files(&[
                ("train_loop.rs", "use crate::checkpoint::Checkpoints;\nuse crate::export::TrainedModel;\n"),
                ("checkpoint/store.rs", "use crate::{report::EpochRecord, train_loop::Best};\n"),
                ("error/mod.rs", "    Distributed(#[from] crate::distributed::DistError),\n"),
                ("minibatch/data_parallel.rs", "use crate::run_on;\n"),
                ("config/memory.rs", "use super::super::method::HaloFeatures;\n"),
            ]),
            &[],
        );
        assert_eq!(v.len(), 5, "{v:#?}");
        assert!(v[0].contains("train_loop.rs: `crate::export::TrainedModel` reaches up from `train_loop` (layer 9)"));
        assert!(v[1].contains("checkpoint/store.rs: `crate::train_loop::Best` reaches up"), "{v:#?}");
        assert!(v[2].contains("error/mod.rs: `crate::distributed::DistError` reaches up"));
        assert!(v[3].contains("`crate::run_on` reaches up from `minibatch` (layer 16) to `run` (layer 19)"));
        assert!(v[4].contains("config/memory.rs: `crate::method::HaloFeatures` reaches up from `config`"));
    }

    #[test]
    fn test_code_comments_and_strings_are_exempt() {
        let v = check_order(
            &files(&[
                ("checkpoint/mod.rs", "#[cfg(test)]\nmod tests;\n// see crate::run\nconst S: &str = \"crate::run\";\n"),
                ("checkpoint/tests.rs", "use crate::{LocalOptions, run_on};\n"),
                ("memory/limit.rs", "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { crate::run_on(); }\n}\n"),
                ("single.rs", "#[cfg(test)]\nuse crate::minibatch::x;\nuse crate::report::Report;\n"),
            ]),
            &[],
        );
        assert_eq!(v, Vec::<String>::new());
    }

    #[test]
    fn allowed_entries_pass_and_stale_ones_fail() {
        let list = [("method/mod.rs", "use crate::minibatch::trainer::BatchTrainer;\n")];
        assert_eq!(check_order(&files(&list), &[("method/mod.rs", "minibatch")]), Vec::<String>::new());
        let v = check_order(&files(&list), &[("method/mod.rs", "minibatch"), ("single.rs", "harness")]);
        assert_eq!(v, ["ALLOWED entry (single.rs, harness) matches no import any more: remove it"]);
    }

    #[test]
    fn unknown_modules_and_names_fail() {
        let v = check_order(&files(&[("newmod.rs", ""), ("report.rs", "use crate::Nowhere;\n")]), &[]);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].contains("module `newmod` is not in ORDER"));
        assert!(v[1].contains("`crate::Nowhere` names neither a module in ORDER nor a re-export"));
    }
}
