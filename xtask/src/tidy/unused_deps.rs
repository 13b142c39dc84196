//! Unused dependencies: every `[dependencies]` entry of a workspace member must be named by the
//! code under its `src/`, every `[dev-dependencies]` entry by its `tests/`, `benches/`, `examples/`
//! or `src/`, and every `[build-dependencies]` entry by its `build.rs`.
//!
//! A dependency is named by its Rust name (the manifest key with dashes as underscores, which is
//! also the name a `package = ".."` rename gives it) as a path root (`name::`), a macro (`name!`),
//! or after `use` / `extern crate`. Comments and string contents are stripped first, so a doc
//! mention does not count; `#[cfg(..)]`-gated code and attributes (`derive(clap::ValueEnum)`) do.
//!
//! Text matching rather than rustc's `unused_crate_dependencies` lint: the lint needs a build per
//! feature set and reports per compilation target, so every test binary would flag the
//! dev-dependencies it happens not to use. The cost is that a local module named like a dependency
//! (`mod toml;` then `toml::x`) counts as a use, and `src/` counts as a whole, `#[cfg(test)]` code
//! included.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use toml::Table;

use super::source::code_lines;
use super::{assert_clean, dependency_package, dependency_tables, members, read_toml, rust_files, workspace_root};

/// `(member, dependency key)` pairs that no source names but that must stay, each with a comment
/// saying why (say, a dependency that exists only to enable a feature of a transitive one).
const ALLOWED: &[(&str, &str)] = &[];

/// The crate names each kind of target of one member names in its code.
struct Uses {
    /// `src/`: the library and binaries (and their `#[cfg(test)]` code).
    src: BTreeSet<String>,
    /// `tests/`, `benches/` and `examples/`.
    other_targets: BTreeSet<String>,
    /// `build.rs`.
    build_script: BTreeSet<String>,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Identifiers in `code` (already stripped of comments and literal contents) where an external
/// crate's name can stand: the first segment of a path (`name::`, `::name::`, not `a::name::`), a
/// macro (`name!`, not `a::name!` or `name != x`), or the item of `use name` / `extern crate name`.
fn crate_names_used(code: &str) -> BTreeSet<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut names = BTreeSet::new();
    // The two identifiers before the current one, for `use name` and `extern crate name`.
    let mut before: [String; 2] = Default::default();
    let mut i = 0;
    while i < chars.len() {
        let starts_ident = is_ident(chars[i]) && !chars[i].is_ascii_digit();
        if !starts_ident || (i > 0 && is_ident(chars[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let name: String = chars[start..i].iter().collect();
        let heads_path = chars.get(i..i + 2) == Some(&[':', ':']);
        let is_macro = chars.get(i) == Some(&'!') && chars.get(i + 1) != Some(&'=');
        let after_use = before[1] == "use" || before == ["extern", "crate"];
        if (heads_path || is_macro || after_use) && !continues_path(&chars, start) {
            names.insert(name.clone());
        }
        before = [std::mem::take(&mut before[1]), name];
    }
    for keyword in ["crate", "self", "super", "Self"] {
        names.remove(keyword);
    }
    names
}

/// True when the identifier at `start` directly follows `a::` or `<T>::`, so it is not a path's
/// first segment; `use ::name` and `(::name` are. (Paths are matched as rustfmt writes them.)
fn continues_path(chars: &[char], start: usize) -> bool {
    start >= 3 && chars[start - 2..start] == [':', ':'] && (is_ident(chars[start - 3]) || chars[start - 3] == '>')
}

/// The crate names that `files` name, comments and literal contents ignored.
fn names_in(files: impl IntoIterator<Item = impl AsRef<Path>>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for file in files {
        let file = file.as_ref();
        let src = fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        names.extend(crate_names_used(&code_lines(&src).join("\n")));
    }
    names
}

fn uses_of_member(dir: &Path) -> Uses {
    let build_rs = dir.join("build.rs");
    Uses {
        src: names_in(rust_files(&dir.join("src"))),
        other_targets: names_in(["tests", "benches", "examples"].iter().flat_map(|t| rust_files(&dir.join(t)))),
        build_script: names_in(build_rs.is_file().then_some(build_rs)),
    }
}

/// Dependencies of `member` that its code never names, plus `allowed` entries of this member that
/// name no declared dependency or one its code does name (a stale exemption hides nothing).
fn check_unused_dependencies(
    member: &str,
    manifest: &Table,
    uses: &Uses,
    workspace_deps: &Table,
    allowed: &[(&str, &str)],
) -> Vec<String> {
    let mut violations = Vec::new();
    let mut exempted = BTreeSet::new();
    for (header, deps) in dependency_tables(manifest) {
        for (key, spec) in deps {
            let rust_name = key.replace('-', "_");
            let package = dependency_package(key, spec, workspace_deps);
            let shown = if package == key { format!("`{key}`") } else { format!("`{key}` (package `{package}`)") };
            let (used, place, fix) = if header.ends_with("dev-dependencies]") {
                let used = uses.src.contains(&rust_name) || uses.other_targets.contains(&rust_name);
                (used, "src/, tests/, benches/ or examples/", "remove it")
            } else if header.ends_with("build-dependencies]") {
                (uses.build_script.contains(&rust_name), "build.rs", "remove it")
            } else if uses.other_targets.contains(&rust_name) {
                let fix = "only tests, benches or examples name it, so move it to [dev-dependencies]";
                (uses.src.contains(&rust_name), "src/", fix)
            } else {
                (uses.src.contains(&rust_name), "src/", "remove it")
            };
            if allowed.contains(&(member, key.as_str())) {
                exempted.insert(key.as_str());
                if used {
                    violations.push(format!(
                        "{member}/Cargo.toml: {shown} in {header} is used; drop it from ALLOWED in \
                         xtask/src/tidy/unused_deps.rs"
                    ));
                }
            } else if !used {
                violations.push(format!(
                    "{member}/Cargo.toml: {shown} in {header} is never named as `{rust_name}` in {place}; {fix}"
                ));
            }
        }
    }
    for &(_, key) in allowed.iter().filter(|(m, k)| *m == member && !exempted.contains(k)) {
        violations.push(format!(
            "{member}/Cargo.toml declares no dependency `{key}`; drop it from ALLOWED in xtask/src/tidy/unused_deps.rs"
        ));
    }
    violations
}

#[test]
fn every_dependency_is_used() {
    let root = workspace_root();
    let root_manifest = read_toml(&root.join("Cargo.toml"));
    let workspace_deps = super::workspace_dependencies(&root_manifest);
    let members = members(&root_manifest);
    assert!(members.len() > 2, "expected the workspace members in {}", root.join("Cargo.toml").display());
    let mut violations = Vec::new();
    for member in &members {
        let dir = root.join(member);
        let manifest = read_toml(&dir.join("Cargo.toml"));
        assert!(dir.join("src").is_dir(), "{member} has no src/ folder");
        violations.extend(check_unused_dependencies(
            member,
            &manifest,
            &uses_of_member(&dir),
            &workspace_deps,
            ALLOWED,
        ));
    }
    let stale = ALLOWED.iter().filter(|(m, _)| !members.iter().any(|x| x == m));
    violations.extend(stale.map(|(m, k)| format!("ALLOWED names `{m}`/`{k}`, but `{m}` is not a workspace member")));
    assert_clean("unused dependencies", &violations);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(code: &str) -> Vec<String> {
        crate_names_used(&code_lines(code).join("\n")).into_iter().collect()
    }

    #[test]
    fn crate_names_come_from_paths_macros_and_use_items() {
        let code = r#"
            use serde::{Deserialize, Serialize};
            use rayon;
            extern crate alloc;
            pub use ::thiserror::Error as E;
            #[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
            enum Kind {}
            fn f() { let x = ndarray::Array2::<f32>::zeros((1, 1)); proptest! {} }
            #[cfg(feature = "mpi")]
            fn g() { mpi::initialize(); }
        "#;
        assert_eq!(names(code), ["alloc", "clap", "mpi", "ndarray", "proptest", "rayon", "serde", "thiserror"]);
    }

    #[test]
    fn inner_segments_comments_strings_and_keywords_do_not_count() {
        let code = r#"
            //! Uses `tracing::info!` in its docs only.
            use crate::metis::Partition;
            use self::toml as t;
            use super::flate2;
            fn f(v: Vec<u8>) -> bool {
                let s = "indicatif::ProgressBar"; // anyhow::bail!
                /* bincode::encode */
                let a = std::fs::read(s); let b = Vec::<u8>::tempfile::x; let c = <u8 as Tr>::sprs::y;
                a != b && v.len() != 0
            }
        "#;
        assert_eq!(names(code), ["Vec", "std"]);
    }

    fn uses(src: &[&str], other_targets: &[&str], build_script: &[&str]) -> Uses {
        let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
        Uses { src: set(src), other_targets: set(other_targets), build_script: set(build_script) }
    }

    fn check(manifest: &str, uses: &Uses, allowed: &[(&str, &str)]) -> Vec<String> {
        let ws: Table = r#"alias = { package = "real-name", version = "1" }"#.parse().unwrap();
        check_unused_dependencies("crates/x", &manifest.parse().unwrap(), uses, &ws, allowed)
    }

    const MANIFEST: &str = r#"
        [dependencies]
        serde-json = "1"
        clap = { version = "4", optional = true }
        other = { package = "renamed-pkg", version = "1" }
        alias.workspace = true
        [target.'cfg(unix)'.dependencies]
        libc = "0.2"
        [dev-dependencies]
        proptest = "1"
        tempfile = "3"
        [build-dependencies]
        cc = "1"
    "#;

    #[test]
    fn used_dependencies_pass() {
        let u = uses(&["serde_json", "clap", "other", "alias", "libc", "tempfile"], &["proptest"], &["cc"]);
        assert_eq!(check(MANIFEST, &u, &[]), Vec::<String>::new());
    }

    #[test]
    fn unused_dependencies_of_every_kind_fail() {
        // Names under the package (not the Rust) name, or with dashes, do not count.
        let u = uses(&["serde-json", "renamed_pkg", "real_name", "cc"], &["libc"], &["proptest", "tempfile"]);
        let v = check(MANIFEST, &u, &[]);
        assert_eq!(v.len(), 8, "{v:#?}");
        let never = |place: &str| format!(" in {place}; remove it");
        assert!(
            v[0].starts_with("crates/x/Cargo.toml: `alias` (package `real-name`) in [dependencies] is never named")
        );
        assert!(v[1].contains("`clap` in [dependencies] is never named as `clap`") && v[1].ends_with(&never("src/")));
        assert!(v[2].contains("`other` (package `renamed-pkg`) in [dependencies]"), "{v:#?}");
        assert!(v[3].contains("`serde-json` in [dependencies] is never named as `serde_json` in src/"), "{v:#?}");
        for (line, dep) in [(4, "`proptest`"), (5, "`tempfile`")] {
            assert!(v[line].contains(&format!("{dep} in [dev-dependencies]")), "{v:#?}");
            assert!(v[line].ends_with(&never("src/, tests/, benches/ or examples/")), "{v:#?}");
        }
        assert!(v[6].contains("`cc` in [build-dependencies]") && v[6].ends_with(&never("build.rs")), "{v:#?}");
        assert!(v[7].contains("`libc` in [target.'cfg(unix)'.dependencies] is never named as `libc` in src/; only"));
    }

    #[test]
    fn dependencies_used_only_outside_src_must_be_dev_dependencies() {
        let v = check("[dependencies]\nndarray = \"1\"", &uses(&[], &["ndarray"], &[]), &[]);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert!(v[0].ends_with("only tests, benches or examples name it, so move it to [dev-dependencies]"), "{v:#?}");
    }

    #[test]
    fn allowed_entries_exempt_and_must_stay_needed() {
        let manifest = "[dependencies]\nshim = \"1\"\nused = \"1\"";
        let only_used = uses(&["used"], &[], &[]);
        assert_eq!(check(manifest, &only_used, &[("crates/x", "shim"), ("crates/y", "gone")]), Vec::<String>::new());
        let v = check(manifest, &only_used, &[("crates/x", "used"), ("crates/x", "gone")]);
        assert_eq!(v.len(), 3, "{v:#?}");
        assert!(v[0].contains("`shim` in [dependencies] is never named"), "{v:#?}");
        assert!(v[1].contains("`used` in [dependencies] is used; drop it from ALLOWED"), "{v:#?}");
        assert!(v[2].contains("declares no dependency `gone`"), "{v:#?}");
    }

    #[test]
    fn member_sources_are_split_by_target_kind() {
        let tmp = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = tmp.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write("src/lib.rs", "mod m;\nuse serde::Serialize;");
        write("src/m.rs", "#[cfg(test)]\nmod tests { use proptest::prelude::*; }");
        write("src/bin/tool.rs", "fn main() { anyhow::bail!(\"x\") }");
        write("tests/it.rs", "use tempfile::tempdir;");
        write("benches/b.rs", "criterion::criterion_main!(b);");
        write("examples/e.rs", "// rayon::join is not used here");
        write("build.rs", "fn main() { cc::Build::new(); }");
        let u = uses_of_member(tmp.path());
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
        assert_eq!(list(&u.src), ["anyhow", "proptest", "serde"]);
        assert_eq!(list(&u.other_targets), ["criterion", "tempfile"]);
        assert_eq!(list(&u.build_script), ["cc"]);
    }
}
