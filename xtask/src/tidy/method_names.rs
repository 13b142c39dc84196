//! Where a method is named: a `Method::<Variant>` in the code of trainer and cli (test code
//! exempt) sits only in the registry (`config/method.rs`: the variant, its name, its `Rules`
//! and its settings table), the lookup (`method/mod.rs`) and the method's own folder
//! (`method/<name>/`). Everything else reads a
//! property of the registry, so adding a method edits those two shared files and the method
//! table of `docs/ARCHITECTURE.md` (its "Adding a method" section).

use super::assert_clean;
use super::trainer_modules::{is_ident, production_code, sources};
use super::workspace_root;

/// The shared files of trainer that may name any method.
const SHARED: [&str; 2] = ["config/method.rs", "method/mod.rs"];

/// `DataParallel` -> `data_parallel`.
fn snake(variant: &str) -> String {
    let mut out = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// The variants `code` names as `Method::<Variant>`.
fn named(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("Method::") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "Method::".len()..];
        let name: String = after.chars().take_while(|&c| is_ident(c)).collect();
        if !before.is_some_and(is_ident) && name.starts_with(|c: char| c.is_uppercase()) && name != "ALL" {
            found.push(name);
        }
        rest = after;
    }
    found
}

/// Violations in `files` (crate name, path under its `src/`, text).
fn check(files: &[(&str, Vec<(String, String)>)]) -> Vec<String> {
    let mut violations = Vec::new();
    for (krate, sources) in files {
        for (file, code) in production_code(sources) {
            for variant in named(&code) {
                let own = snake(&variant);
                let allowed = *krate == "trainer"
                    && (SHARED.contains(&file.as_str()) || file.starts_with(&format!("method/{own}/")));
                if !allowed {
                    violations.push(format!(
                        "crates/{krate}/src/{file}: names `Method::{variant}` outside the registry \
                         (trainer's config/method.rs), the lookup (method/mod.rs) and the method's own files; \
                         read a property of `Method::rules` or `method::lookup` instead"
                    ));
                }
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

#[test]
fn methods_are_named_only_by_the_registry_the_lookup_and_their_own_files() {
    let root = workspace_root();
    let files: Vec<(&str, Vec<(String, String)>)> =
        ["trainer", "cli"].into_iter().map(|k| (k, sources(&root.join("crates").join(k).join("src")))).collect();
    assert!(files.iter().all(|(_, f)| !f.is_empty()), "expected the trainer and cli sources");
    assert_clean("method names", &check(&files));
}

#[test]
fn a_method_named_elsewhere_is_a_violation() {
    let file = |path: &str, text: &str| (path.to_string(), text.to_string());
    let trainer = vec![
        file("config/method.rs", "fn rules() { Method::Ecgraph }"),
        file("method/ecgraph/settings.rs", "const M: Method = Method::Ecgraph;"),
        file("method/data_parallel/mod.rs", "Method::DataParallel"),
        file("run.rs", "if m == Method::Ecgraph {}\n#[cfg(test)]\nmod tests { fn t() { Method::Single; } }"),
        file("lib.rs", "x == Method::ALL[0]; MyMethod::Foo;"),
    ];
    let cli = vec![file("main.rs", "let m = config::Method::Single;")];
    let found = check(&[("trainer", trainer), ("cli", cli)]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("crates/cli/src/main.rs: names `Method::Single`"), "{found:#?}");
    assert!(found[1].starts_with("crates/trainer/src/run.rs: names `Method::Ecgraph`"), "{found:#?}");
}
