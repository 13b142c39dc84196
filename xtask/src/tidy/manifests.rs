//! Workspace manifest rules: the release profile, and shared dependencies declared once.

use toml::{Table, Value};

use super::{assert_clean, dependency_tables, members, read_toml, workspace_dependencies, workspace_root};

/// The release profile must keep thin LTO and one codegen unit: benchmark figures depend on it.
fn check_release_profile(root_manifest: &Table) -> Vec<String> {
    let release = root_manifest.get("profile").and_then(|p| p.get("release"));
    let mut violations = Vec::new();
    for (key, want) in [("lto", Value::from("thin")), ("codegen-units", Value::from(1))] {
        let got = release.and_then(|r| r.get(key));
        if got != Some(&want) {
            let got = got.map_or_else(|| "unset".to_owned(), Value::to_string);
            violations.push(format!("Cargo.toml: [profile.release] {key} must be {want} (is {got})"));
        }
    }
    violations
}

/// Dependencies that `[workspace.dependencies]` declares must be inherited with
/// `workspace = true`, never given their own version, path or git source.
fn check_inherited_dependencies(member: &str, manifest: &Table, workspace_deps: &Table) -> Vec<String> {
    let mut violations = Vec::new();
    for (header, deps) in dependency_tables(manifest) {
        for (key, spec) in deps {
            let inherited = spec.get("workspace").and_then(Value::as_bool) == Some(true);
            if workspace_deps.contains_key(key) && !inherited {
                violations.push(format!(
                    "{member}/Cargo.toml: `{key}` in {header} is declared in [workspace.dependencies]; \
                     use `{key}.workspace = true` (plus `features`/`optional` if needed)"
                ));
            }
        }
    }
    violations
}

#[test]
fn release_profile_keeps_thin_lto_and_one_codegen_unit() {
    assert_clean("release profile", &check_release_profile(&read_toml(&workspace_root().join("Cargo.toml"))));
}

#[test]
fn members_inherit_workspace_dependencies() {
    let root = workspace_root();
    let root_manifest = read_toml(&root.join("Cargo.toml"));
    let workspace_deps = workspace_dependencies(&root_manifest);
    let members = members(&root_manifest);
    assert!(members.iter().any(|m| m == "xtask"), "xtask should be a workspace member: {members:?}");
    let violations: Vec<String> = members
        .iter()
        .flat_map(|m| check_inherited_dependencies(m, &read_toml(&root.join(m).join("Cargo.toml")), &workspace_deps))
        .collect();
    assert_clean("workspace dependencies", &violations);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_profile_rules() {
        let good: Table = "[profile.release]\nlto = \"thin\"\ncodegen-units = 1\ndebug = 1".parse().unwrap();
        assert_eq!(check_release_profile(&good), Vec::<String>::new());
        let bad: Table = "[profile.release]\nlto = true".parse().unwrap();
        let v = check_release_profile(&bad);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].contains("lto must be \"thin\" (is true)"), "{v:#?}");
        assert!(v[1].contains("codegen-units must be 1 (is unset)"), "{v:#?}");
        assert_eq!(check_release_profile(&Table::new()).len(), 2);
    }

    #[test]
    fn duplicated_versions_of_workspace_dependencies_fail() {
        let ws: Table = "serde = \"1\"\nrayon = \"1\"".parse().unwrap();
        let manifest: Table = r#"
            [dependencies]
            serde = { workspace = true, features = ["rc"] }
            rayon = "1.10"
            ureq = "3"
            [target.'cfg(unix)'.dev-dependencies]
            serde = { version = "1" }
        "#
        .parse()
        .unwrap();
        let v = check_inherited_dependencies("crates/x", &manifest, &ws);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].contains("crates/x/Cargo.toml: `rayon` in [dependencies]"), "{v:#?}");
        assert!(v[1].contains("`serde` in [target.'cfg(unix)'.dev-dependencies]"), "{v:#?}");
    }
}
