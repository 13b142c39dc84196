//! Crate layering: a crate under `crates/` may depend only on Halo crates in lower layers.

use toml::{Table, Value};

use super::{assert_clean, dependency_package, dependency_tables, read_toml, subdirectories, workspace_root};

/// Halo's crates from the bottom layer (0) up; every folder under `crates/` must be listed.
/// `python` (the Python package) sits on `trainer`, beside `cli`.
const LAYERS: [&str; 7] = ["graph-partition", "comm-hierarchy", "cache-quant", "gnn-core", "trainer", "python", "cli"];

fn layer_of(package: &str) -> Option<usize> {
    LAYERS.iter().position(|&l| l == package)
}

/// Violations of the layer order among `crates`, given as (folder name under `crates/`, parsed
/// `Cargo.toml`): unlisted crates, and dependencies (normal, dev, build, target-specific) on a Halo
/// crate in the same or a higher layer.
fn check_layering(crates: &[(String, Table)], workspace_deps: &Table) -> Vec<String> {
    let mut violations = Vec::new();
    for (dir, manifest) in crates {
        let package = manifest.get("package").and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or(dir);
        let Some(own) = layer_of(dir).filter(|_| package == dir) else {
            violations.push(format!(
                "crates/{dir} (package `{package}`) is not in the layer list; add it to LAYERS in \
                 xtask/src/tidy/layering.rs (folder and package names must match)"
            ));
            continue;
        };
        for (header, deps) in dependency_tables(manifest) {
            for (key, spec) in deps {
                let dep = dependency_package(key, spec, workspace_deps);
                if let Some(layer) = layer_of(dep)
                    && layer >= own
                {
                    violations.push(format!(
                        "crate `{package}` (layer {own}) depends on `{dep}` (layer {layer}) in {header}; \
                         a crate may only depend on crates below it"
                    ));
                }
            }
        }
    }
    violations
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let root = workspace_root();
    let workspace_deps = super::workspace_dependencies(&read_toml(&root.join("Cargo.toml")));
    let crates: Vec<(String, Table)> = subdirectories(&root.join("crates"))
        .into_iter()
        .map(|dir| {
            let name = dir.file_name().expect("folder name").to_string_lossy().into_owned();
            (name, read_toml(&dir.join("Cargo.toml")))
        })
        .collect();
    assert!(crates.len() >= LAYERS.len(), "expected every layered crate under {}", root.join("crates").display());
    assert_clean("crate layering", &check_layering(&crates, &workspace_deps));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str, body: &str) -> (String, Table) {
        (name.to_owned(), format!("[package]\nname = \"{name}\"\n{body}").parse().unwrap())
    }

    fn check(crates: &[(String, Table)]) -> Vec<String> {
        let ws: Table = r#"
            trainer = { path = "crates/trainer" }
            gp = { path = "crates/graph-partition", package = "graph-partition" }
        "#
        .parse()
        .unwrap();
        check_layering(crates, &ws)
    }

    #[test]
    fn downward_dependencies_pass() {
        let crates = [
            manifest("graph-partition", "[dependencies]\nrayon = \"1\""),
            manifest(
                "trainer",
                "[dependencies]\ngraph-partition.workspace = true\ngnn-core = { path = \"../gnn-core\" }",
            ),
            manifest(
                "cli",
                "[dependencies]\ntrainer.workspace = true\n[dev-dependencies]\ncache-quant.workspace = true",
            ),
        ];
        assert_eq!(check(&crates), Vec::<String>::new());
    }

    #[test]
    fn upward_dependencies_fail_in_every_table_kind() {
        let crates = [
            manifest("graph-partition", "[dependencies]\ntrainer.workspace = true"),
            manifest("comm-hierarchy", "[dev-dependencies]\ncli = { path = \"../cli\" }"),
            manifest("cache-quant", "[build-dependencies]\ngnn-core.workspace = true"),
            manifest("gnn-core", "[target.'cfg(unix)'.dependencies]\ntrainer.workspace = true"),
        ];
        let v = check(&crates);
        assert_eq!(v.len(), 4, "{v:#?}");
        assert!(v[0].contains("`graph-partition` (layer 0) depends on `trainer` (layer 4) in [dependencies]"));
        assert!(v[1].contains("`comm-hierarchy` (layer 1) depends on `cli` (layer 6) in [dev-dependencies]"));
        assert!(v[2].contains("`cache-quant` (layer 2) depends on `gnn-core` (layer 3) in [build-dependencies]"));
        assert!(v[3].contains("in [target.'cfg(unix)'.dependencies]"));
    }

    #[test]
    fn same_layer_and_renamed_dependencies_fail() {
        let crates = [
            manifest("graph-partition", "[dependencies]\nself-again = { path = \".\", package = \"graph-partition\" }"),
            manifest("graph-partition", "[dev-dependencies]\ngp.workspace = true"),
        ];
        let v = check(&crates);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v.iter().all(|m| m.contains("depends on `graph-partition` (layer 0)")), "{v:#?}");
    }

    #[test]
    fn unlisted_or_misnamed_crates_fail() {
        let crates =
            [manifest("new-crate", ""), ("trainer".to_owned(), "[package]\nname = \"train\"".parse().unwrap())];
        let v = check(&crates);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].contains("crates/new-crate (package `new-crate`) is not in the layer list"));
        assert!(v[1].contains("crates/trainer (package `train`)"));
    }
}
