//! Where a method is named, and where its settings are read.
//!
//! The registry (`config/method.rs` in trainer, the `methods!` list) holds one line per method:
//! its variant, its name, its folder `method/<folder>/` and its settings type. Everything else a
//! method is lives in its folder. In the code of trainer and cli (test code and comments exempt):
//!
//! - a `Method::<Variant>` sits only in the registry and in the method's own folder
//!   ([`misplaced_variants`]);
//! - a method's settings (`method.<folder>`, its `[method.<name>]` table in the configuration) are
//!   read only in its own folder ([`foreign_settings_reads`]): a check of adaqp's `time-fit` in
//!   `config/mod.rs` is a violation;
//! - adding a method is one registry line plus its folder ([`shared_lines`]).

use super::assert_clean;
use super::trainer_modules::{is_ident, production_code, sources};
use super::workspace_root;

/// The registry, under trainer's `src/`.
const REGISTRY: &str = "config/method.rs";
/// The parent of the method folders, under trainer's `src/`: it declares each folder's module.
const FOLDERS: &str = "method/mod.rs";
/// The most lines of shared code that may name one method: its registry line and the `mod` line
/// of its folder.
const MAX_SHARED_LINES: usize = 2;

/// One line of the registry's list.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// `DataParallel`.
    variant: String,
    /// `data_parallel`: the folder `method/data_parallel/`, and the settings' field.
    folder: String,
    /// `VanillaSettings`, where the method has a `[method.<name>]` table.
    settings: Option<String>,
}

/// The entries of the registry's list: its lines `Variant("name") => folder` and `Variant("name")
/// => folder: Settings,`.
fn entries(registry: &str) -> Vec<Entry> {
    registry
        .lines()
        .filter_map(|line| {
            let line = line.trim().strip_suffix(',')?;
            let (head, tail) = line.split_once(") => ")?;
            let (variant, name) = head.split_once('(')?;
            let (folder, settings) = match tail.split_once(": ") {
                Some((folder, settings)) => (folder, Some(settings)),
                None => (tail, None),
            };
            let idents = [variant, folder].into_iter().chain(settings);
            let well_formed =
                name.starts_with('"') && idents.into_iter().all(|s| !s.is_empty() && s.chars().all(is_ident));
            well_formed.then(|| Entry {
                variant: variant.to_owned(),
                folder: folder.to_owned(),
                settings: settings.map(str::to_owned),
            })
        })
        .collect()
}

/// The identifiers of `code`, in order.
fn idents(code: &str) -> Vec<&str> {
    code.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()).collect()
}

/// Whether `code` has the path `first::second` (spaces around `::` allowed).
fn has_path(code: &str, first: &str, second: &str) -> bool {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let needle = format!("{first}::{second}");
    compact.match_indices(&needle).any(|(at, _)| {
        let before = compact[..at].chars().next_back();
        let after = compact[at + needle.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Whether `code` reads the settings field `folder` of a method configuration: `.method.<folder>`
/// (`config.method.adaqp.time_fit`).
fn reads_settings(code: &str, folder: &str) -> bool {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let needle = format!(".method.{folder}");
    compact.match_indices(&needle).any(|(at, _)| !compact[at + needle.len()..].chars().next().is_some_and(is_ident))
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

/// Whether `file` (trainer's, under `src/`) is in `entry`'s own folder.
fn own(file: &str, entry: &Entry) -> bool {
    file.starts_with(&format!("method/{}/", entry.folder))
}

/// The sources of trainer and cli, per crate: (path under `src/`, text).
type Sources = Vec<(&'static str, Vec<(String, String)>)>;

/// The production code of trainer and cli, as (crate, path under `src/`, code).
type Code<'a> = Vec<(&'a str, &'a str, String)>;

/// The production code of `files`.
fn code_of<'a>(files: &'a [(&'static str, Vec<(String, String)>)]) -> Code<'a> {
    files
        .iter()
        .flat_map(|(krate, sources)| {
            production_code(sources).into_iter().map(move |(file, code)| (*krate, file.as_str(), code))
        })
        .collect()
}

/// `Method::<Variant>` outside the registry and the method's own folder (and any variant the
/// registry does not list).
fn misplaced_variants(code: &Code<'_>, entries: &[Entry]) -> Vec<String> {
    let mut violations = Vec::new();
    for (krate, file, text) in code {
        for variant in named(text) {
            let entry = entries.iter().find(|e| e.variant == variant);
            let allowed = *krate == "trainer" && (*file == REGISTRY || entry.is_some_and(|entry| own(file, entry)));
            if !allowed {
                violations.push(format!(
                    "crates/{krate}/src/{file}: names `Method::{variant}` outside the registry (trainer's {REGISTRY}) \
                     and the method's own folder; read a property of `Method::rules` or the method's parts instead"
                ));
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

/// A method's settings read outside its own folder.
fn foreign_settings_reads(code: &Code<'_>, entries: &[Entry]) -> Vec<String> {
    let mut violations = Vec::new();
    for (krate, file, text) in code {
        for entry in entries.iter().filter(|e| e.settings.is_some()) {
            if reads_settings(text, &entry.folder) && !(*krate == "trainer" && own(file, entry)) {
                violations.push(format!(
                    "crates/{krate}/src/{file}: reads `method.{}` outside trainer's method/{}/; move the check or \
                     the use into the method's folder (its `MethodSettings`, its parts)",
                    entry.folder, entry.folder
                ));
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

/// The lines of shared code (outside the method's own folder) that name `entry`: in the registry
/// any line with its variant, folder or settings type; in the folders' parent any line with its
/// folder's name (its `mod` line); anywhere else `Method::<Variant>`, a path `method::<folder>`,
/// its settings type or a read of its settings.
fn lines_naming(code: &Code<'_>, entry: &Entry) -> Vec<String> {
    let mut found = Vec::new();
    for (krate, file, text) in code {
        if *krate == "trainer" && own(file, entry) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let words = idents(line);
            let has = |word: &str| words.contains(&word);
            let settings = entry.settings.as_deref().is_some_and(has);
            let names = match (*krate, *file) {
                ("trainer", REGISTRY) => has(&entry.variant) || has(&entry.folder) || settings,
                ("trainer", FOLDERS) => has(&entry.folder) || named(line).contains(&entry.variant),
                _ => {
                    named(line).contains(&entry.variant)
                        || has_path(line, "method", &entry.folder)
                        || settings
                        || reads_settings(line, &entry.folder)
                }
            };
            if names {
                found.push(format!("crates/{krate}/src/{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

/// Methods named on more shared lines than [`MAX_SHARED_LINES`], and method folders short of
/// their files (`files`: trainer's paths under `src/`).
fn shared_lines(code: &Code<'_>, entries: &[Entry], files: &[&str]) -> Vec<String> {
    let mut violations = Vec::new();
    for entry in entries {
        let lines = lines_naming(code, entry);
        if lines.len() > MAX_SHARED_LINES {
            violations.push(format!(
                "method `{}` is named on {} lines of shared code, at most {MAX_SHARED_LINES} (its registry line and \
                 its `mod` line): {lines:#?}",
                entry.variant,
                lines.len()
            ));
        }
        let settings = entry.settings.is_some().then_some("settings.rs");
        for needed in ["mod.rs", "rules.rs"].into_iter().chain(settings) {
            let path = format!("method/{}/{needed}", entry.folder);
            if !files.contains(&path.as_str()) {
                violations.push(format!("method `{}` has no crates/trainer/src/{path}", entry.variant));
            }
        }
    }
    violations
}

/// trainer's and cli's sources, and the registry's entries.
fn workspace() -> (Sources, Vec<Entry>) {
    let root = workspace_root();
    let files: Sources =
        ["trainer", "cli"].into_iter().map(|k| (k, sources(&root.join("crates").join(k).join("src")))).collect();
    assert!(files.iter().all(|(_, f)| !f.is_empty()), "expected the trainer and cli sources");
    let registry = files[0].1.iter().find(|(f, _)| f == REGISTRY).map(|(_, s)| s.as_str()).unwrap_or_default();
    let entries = entries(registry);
    assert!(entries.len() >= 8, "expected the registry's list in crates/trainer/src/{REGISTRY}: {entries:?}");
    (files, entries)
}

#[test]
fn methods_are_named_only_by_the_registry_and_their_own_folders() {
    let (files, entries) = workspace();
    assert_clean("method names", &misplaced_variants(&code_of(&files), &entries));
}

#[test]
fn a_methods_settings_are_read_only_in_its_folder() {
    let (files, entries) = workspace();
    assert_clean("method settings", &foreign_settings_reads(&code_of(&files), &entries));
}

/// Adding a method is one registry line plus its folder: for every method of the registry, the
/// lines of trainer's and cli's non-test code outside `method/<folder>/` that name it (its
/// variant, its folder's module, its settings type, a read of its settings; comments and string
/// contents do not count) are at most two, its registry line and the `mod` line of its folder,
/// and the folder holds `mod.rs`, `rules.rs` and, for a method with a settings table,
/// `settings.rs`.
#[test]
fn adding_a_method_is_one_registry_line_plus_its_folder() {
    let (files, entries) = workspace();
    let paths: Vec<&str> = files[0].1.iter().map(|(f, _)| f.as_str()).collect();
    assert_clean("shared lines per method", &shared_lines(&code_of(&files), &entries, &paths));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> (String, String) {
        (path.to_string(), text.to_string())
    }

    const REGISTRY_TEXT: &str = "macro_rules! methods {\n    /// One process.\n    Single(\"single\") => single,\n    \
                                 Ecgraph(\"ecgraph\") => ecgraph: EcgraphSettings,\n}\n";

    #[test]
    fn the_registry_lists_variant_folder_and_settings() {
        let found = entries(REGISTRY_TEXT);
        let single = Entry { variant: "Single".into(), folder: "single".into(), settings: None };
        let ecgraph =
            Entry { variant: "Ecgraph".into(), folder: "ecgraph".into(), settings: Some("EcgraphSettings".into()) };
        assert_eq!(found, [single, ecgraph]);
    }

    #[test]
    fn a_method_named_elsewhere_is_a_violation() {
        let trainer = vec![
            file(REGISTRY, REGISTRY_TEXT),
            file("method/ecgraph/mod.rs", "const M: Method = Method::Ecgraph;"),
            file("method/data_parallel.rs", "Method::DataParallel"),
            file("run.rs", "if m == Method::Ecgraph {}\n#[cfg(test)]\nmod tests { fn t() { Method::Single; } }"),
            file("lib.rs", "x == Method::ALL[0]; MyMethod::Foo;"),
        ];
        let cli = vec![file("main.rs", "let m = config::Method::Single;")];
        let files = [("trainer", trainer), ("cli", cli)];
        let found = misplaced_variants(&code_of(&files), &entries(REGISTRY_TEXT));
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found[0].starts_with("crates/cli/src/main.rs: names `Method::Single`"), "{found:#?}");
        assert!(found[1].starts_with("crates/trainer/src/method/data_parallel.rs: names `Method::DataParallel`"));
        assert!(found[2].starts_with("crates/trainer/src/run.rs: names `Method::Ecgraph`"), "{found:#?}");
    }

    #[test]
    fn a_settings_read_outside_the_folder_is_a_violation() {
        let trainer = vec![
            file(REGISTRY, REGISTRY_TEXT),
            file("config/mod.rs", "if self.method.ecgraph.bits > 2 {}\nlet m = self.method.name;"),
            file("method/ecgraph/mod.rs", "let s = &config.method.ecgraph;"),
            file("method/vanilla/mod.rs", "let b = config\n    .method\n    .ecgraph_like;"),
        ];
        let files = [("trainer", trainer), ("cli", vec![file("main.rs", "c.method . ecgraph.x")])];
        let found = foreign_settings_reads(&code_of(&files), &entries(REGISTRY_TEXT));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found[0].starts_with("crates/cli/src/main.rs: reads `method.ecgraph`"), "{found:#?}");
        assert!(found[1].starts_with("crates/trainer/src/config/mod.rs: reads `method.ecgraph`"), "{found:#?}");
    }

    #[test]
    fn a_third_shared_line_or_a_missing_file_is_a_violation() {
        let folders = "mod ecgraph;\nmod single;\nfn lookup() { single::Def }\n";
        let trainer = vec![
            file(REGISTRY, REGISTRY_TEXT),
            file(FOLDERS, folders),
            file("method/ecgraph/mod.rs", "use super::settings::EcgraphSettings;"),
            file(
                "run.rs",
                "use crate::method::ecgraph::runner;\n#[cfg(test)]\nmod tests { use crate::method::single; }",
            ),
        ];
        let files = [("trainer", trainer), ("cli", Vec::new())];
        let paths = ["method/ecgraph/mod.rs", "method/ecgraph/rules.rs", "method/single/mod.rs"];
        let found = shared_lines(&code_of(&files), &entries(REGISTRY_TEXT), &paths);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(found[0].starts_with("method `Single` is named on 3 lines"), "{found:#?}");
        assert!(found[1].contains("method `Single` has no crates/trainer/src/method/single/rules.rs"), "{found:#?}");
        assert!(found[2].starts_with("method `Ecgraph` is named on 3 lines"), "{found:#?}");
        assert!(found[3].contains("method `Ecgraph` has no crates/trainer/src/method/ecgraph/settings.rs"));
    }
}
