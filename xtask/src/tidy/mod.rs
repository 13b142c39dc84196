//! Repository checks, run as tests so that `cargo test --workspace` enforces them: crate layering
//! ([`layering`]), no import circle between a crate's files ([`file_cycles`]), workspace
//! manifests ([`manifests`]), source hygiene ([`source`]), unused dependencies
//! ([`unused_deps`]), what a clone on another machine needs ([`portable`]), the order of the
//! trainer's modules ([`trainer_modules`]), where a method may be named ([`method_names`]),
//! the runners written once over both backends ([`backends`]) and what the docs may say
//! ([`docs`]: no issue numbers, every figure table dated and tied to a commit).
//!
//! Each check is a function over parsed data returning its violations, so the unit tests can feed
//! it small bad inputs and prove it fails; one test per check then runs it on the real workspace.

mod backends;
mod docs;
mod file_cycles;
mod layering;
mod manifests;
mod method_names;
mod portable;
mod source;
mod trainer_modules;
mod unused_deps;

use std::fs;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

/// The workspace root (xtask lives one level below it).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent folder").to_owned()
}

/// Every Markdown file the checks read, relative to the root: `README.md` and `docs/**/*.md`.
fn markdown_files() -> Vec<String> {
    let root = workspace_root();
    let mut files = vec!["README.md".to_owned()];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path.strip_prefix(&root).expect("under the root").display().to_string());
            }
        }
    }
    files.sort();
    files
}

/// Reads and parses a TOML file, panicking with the path on failure (these run only in tests).
fn read_toml(path: &Path) -> Table {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.parse().unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The root manifest's `[workspace.dependencies]` (empty when absent).
fn workspace_dependencies(root_manifest: &Table) -> Table {
    root_manifest
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default()
}

const DEPENDENCY_KINDS: [&str; 3] = ["dependencies", "dev-dependencies", "build-dependencies"];

/// Every dependency table of a manifest with its TOML header, including `[target.'cfg(..)'.*]`.
fn dependency_tables(manifest: &Table) -> Vec<(String, &Table)> {
    let mut tables = Vec::new();
    for kind in DEPENDENCY_KINDS {
        if let Some(t) = manifest.get(kind).and_then(Value::as_table) {
            tables.push((format!("[{kind}]"), t));
        }
    }
    for (target, spec) in manifest.get("target").and_then(Value::as_table).into_iter().flatten() {
        for kind in DEPENDENCY_KINDS {
            if let Some(t) = spec.get(kind).and_then(Value::as_table) {
                tables.push((format!("[target.'{target}'.{kind}]"), t));
            }
        }
    }
    tables
}

/// The package a dependency entry names: its `package` key when renamed, else its key. A
/// `workspace = true` entry takes the rename, if any, from `[workspace.dependencies]`.
fn dependency_package<'a>(key: &'a str, spec: &'a Value, workspace_deps: &'a Table) -> &'a str {
    let renamed = |v: &'a Value| v.get("package").and_then(Value::as_str);
    if let Some(name) = renamed(spec) {
        return name;
    }
    if spec.get("workspace").and_then(Value::as_bool) == Some(true)
        && let Some(name) = workspace_deps.get(key).and_then(renamed)
    {
        return name;
    }
    key
}

/// The folders directly inside `dir`, sorted.
fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
    let mut dirs: Vec<PathBuf> = entries.map(|e| e.expect("directory entry").path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs
}

/// Every `.rs` file under `dir`, skipping build output and hidden folders.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for entry in entries {
            let path = entry.expect("directory entry").path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The member folders listed in `[workspace] members`, with `dir/*` globs expanded.
fn members(root_manifest: &Table) -> Vec<String> {
    let root = workspace_root();
    let listed = root_manifest.get("workspace").and_then(|w| w.get("members")).and_then(Value::as_array);
    let mut members = Vec::new();
    for member in listed.into_iter().flatten().filter_map(Value::as_str) {
        match member.strip_suffix("/*") {
            Some(parent) => members.extend(
                subdirectories(&root.join(parent))
                    .into_iter()
                    .map(|d| format!("{parent}/{}", d.file_name().expect("folder name").to_string_lossy())),
            ),
            None => members.push(member.to_owned()),
        }
    }
    members
}

/// Fails the calling test with every violation listed, one per line.
fn assert_clean(check: &str, violations: &[String]) {
    assert!(violations.is_empty(), "{check}: {} violation(s):\n  {}", violations.len(), violations.join("\n  "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_tables_include_target_specific_ones() {
        let manifest: Table = r#"
            [dependencies]
            a = "1"
            [dev-dependencies]
            b = "1"
            [target.'cfg(unix)'.build-dependencies]
            c = "1"
        "#
        .parse()
        .unwrap();
        let headers: Vec<String> = dependency_tables(&manifest).into_iter().map(|(h, _)| h).collect();
        assert_eq!(headers, ["[dependencies]", "[dev-dependencies]", "[target.'cfg(unix)'.build-dependencies]"]);
    }

    #[test]
    fn renamed_dependencies_resolve_to_their_package() {
        let ws: Table = r#"alias = { package = "real", version = "1" }"#.parse().unwrap();
        let deps: Table = r#"
            plain = "1"
            renamed = { package = "other", version = "1" }
            alias = { workspace = true }
        "#
        .parse()
        .unwrap();
        assert_eq!(dependency_package("plain", &deps["plain"], &ws), "plain");
        assert_eq!(dependency_package("renamed", &deps["renamed"], &ws), "other");
        assert_eq!(dependency_package("alias", &deps["alias"], &ws), "real");
    }
}
