//! Source hygiene under `crates/`, `xtask/` and `benches/`: no placeholder or debugging macros,
//! a `// SAFETY:` comment on every `unsafe`, and no `.rs` file that no `mod` declaration reaches.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{assert_clean, rust_files, subdirectories, workspace_root};

/// The folders whose Rust sources these rules cover.
const TREES: [&str; 3] = ["crates", "xtask", "benches"];

/// Macros that must not ship (text inside string literals does not count, so listing them is fine).
const FORBIDDEN: [&str; 3] = ["todo!(", "unimplemented!(", "dbg!("];

/// How many lines of code (comment lines are free) may separate `unsafe` from its `SAFETY:` comment.
const SAFETY_WINDOW: usize = 3;

/// Where the scanner is at the end of a line: literals and block comments can span lines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    Str,
    /// A raw string closed by `"` and this many `#`.
    RawStr(usize),
    /// A block comment at this nesting depth.
    Block(usize),
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Each line of `src` reduced to its code: string and char literal contents blanked, comments
/// removed. Words that appear only in text or comments then never match a rule.
pub(super) fn code_lines(src: &str) -> Vec<String> {
    let mut state = State::Code;
    src.lines()
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            let mut out = String::new();
            let mut i = 0;
            while i < chars.len() {
                let (c, next) = (chars[i], chars.get(i + 1).copied());
                match state {
                    State::Str if c == '\\' => i += 1,
                    State::Str if c == '"' => {
                        state = State::Code;
                        out.push('"');
                    }
                    State::RawStr(hashes)
                        if c == '"' && chars[i + 1..].iter().take_while(|&&h| h == '#').count() >= hashes =>
                    {
                        state = State::Code;
                        out.push('"');
                        i += hashes;
                    }
                    State::Block(depth) if c == '*' && next == Some('/') => {
                        state = if depth == 1 { State::Code } else { State::Block(depth - 1) };
                        i += 1;
                    }
                    State::Block(depth) if c == '/' && next == Some('*') => {
                        state = State::Block(depth + 1);
                        i += 1;
                    }
                    State::Str | State::RawStr(_) | State::Block(_) => {}
                    State::Code => match c {
                        '/' if next == Some('/') => break,
                        '/' if next == Some('*') => {
                            state = State::Block(1);
                            i += 1;
                        }
                        '"' => {
                            state = State::Str;
                            out.push('"');
                        }
                        'r' if raw_string_start(&chars, i) => {
                            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
                            state = State::RawStr(hashes);
                            out.push('"');
                            i += hashes + 1;
                        }
                        // Char literals (`'"'`, `'\''`); a lifetime's quote is kept as code.
                        '\'' if next == Some('\\') => {
                            i += 2;
                            while i + 1 < chars.len() && chars[i + 1] != '\'' {
                                i += 1;
                            }
                            i += 1;
                        }
                        '\'' if chars.get(i + 2) == Some(&'\'') => i += 2,
                        _ => out.push(c),
                    },
                }
                i += 1;
            }
            out
        })
        .collect()
}

/// True when the `r` at `i` opens a raw (byte) string: `r"`, `r#"`, `br"`, not an identifier's `r`.
fn raw_string_start(chars: &[char], i: usize) -> bool {
    let prefix_ok = match i.checked_sub(1).map(|p| chars[p]) {
        None => true,
        Some('b') => i < 2 || !is_ident(chars[i - 2]),
        Some(p) => !is_ident(p),
    };
    let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
    prefix_ok && chars.get(i + 1 + hashes) == Some(&'"')
}

/// Columns where the keyword `unsafe` starts in a code line.
fn unsafe_keywords(code: &str) -> impl Iterator<Item = usize> + '_ {
    code.match_indices("unsafe").map(|(at, _)| at).filter(move |&at| {
        let before = code[..at].chars().next_back();
        let after = code[at + "unsafe".len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Violations in one file's text: forbidden macros, and `unsafe` without a nearby `SAFETY:`
/// comment (a `# Safety` doc section also counts, for `unsafe fn` and `unsafe trait`).
fn check_source(path: &str, src: &str) -> Vec<String> {
    let raw: Vec<&str> = src.lines().collect();
    let code = code_lines(src);
    let mut violations = Vec::new();
    for (i, line) in code.iter().enumerate() {
        for pattern in FORBIDDEN.iter().filter(|p| line.contains(*p)) {
            violations.push(format!("{path}:{}: `{pattern}` must not be committed", i + 1));
        }
        if unsafe_keywords(line).next().is_some() && !has_safety_comment(&raw, &code, i) {
            violations.push(format!(
                "{path}:{}: `unsafe` without a `// SAFETY:` comment within {SAFETY_WINDOW} lines above it",
                i + 1
            ));
        }
    }
    violations
}

fn has_safety_comment(raw: &[&str], code: &[String], line: usize) -> bool {
    let justifies = |text: &str| text.contains("SAFETY:") || text.contains("# Safety");
    let unsafe_at = raw[line].find("unsafe").unwrap_or(raw[line].len());
    if justifies(&raw[line][..unsafe_at]) {
        return true;
    }
    let mut budget = SAFETY_WINDOW;
    for above in (0..line).rev() {
        if justifies(raw[above]) {
            return true;
        }
        let comment_only = code[above].trim().is_empty() && !raw[above].trim().is_empty();
        if !comment_only {
            budget -= 1;
            if budget == 0 {
                return false;
            }
        }
    }
    false
}

/// `mod name;` declarations (not inline `mod name { .. }`) with their `#[path = ".."]`, if any.
fn declared_modules(src: &str) -> Vec<(String, Option<String>)> {
    let mut modules = Vec::new();
    let mut path_attr = None;
    for (raw, code) in src.lines().zip(code_lines(src)) {
        if let Some(rest) = raw.trim().strip_prefix("#[path") {
            path_attr = rest.split('"').nth(1).map(str::to_owned);
        }
        let mut decl = code.trim();
        while let Some(rest) = decl.strip_prefix("#[") {
            decl = rest.split_once(']').map_or("", |(_, after)| after).trim_start();
        }
        if decl.is_empty() {
            continue;
        }
        if let Some(rest) = decl.strip_prefix("pub(") {
            decl = rest.split_once(')').map_or("", |(_, after)| after).trim_start();
        } else if let Some(rest) = decl.strip_prefix("pub ") {
            decl = rest.trim_start();
        }
        let name = decl.strip_prefix("mod ").and_then(|r| r.trim().strip_suffix(';')).map(str::trim);
        match name {
            Some(name) if name.chars().all(is_ident) => modules.push((name.to_owned(), path_attr.take())),
            _ => path_attr = None,
        }
    }
    modules
}

/// `.rs` files under `src_dir` that no chain of `mod` declarations from a crate root reaches.
fn unreachable_files(src_dir: &Path) -> Vec<PathBuf> {
    let all: BTreeSet<PathBuf> = rust_files(src_dir).into_iter().collect();
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"].iter().map(|r| src_dir.join(r)).collect();
    let bin = src_dir.join("bin");
    roots.extend(all.iter().filter(|f| f.parent() == Some(&bin)).cloned());
    roots.extend(subdirectories_if_any(&bin).into_iter().map(|d| d.join("main.rs")));
    // (file, whether its child modules live beside it rather than in a folder named after it)
    let mut stack: Vec<(PathBuf, bool)> = roots.into_iter().filter(|r| r.is_file()).map(|r| (r, true)).collect();
    let mut reached = BTreeSet::new();
    while let Some((file, owns_dir)) = stack.pop() {
        if !reached.insert(file.clone()) {
            continue;
        }
        let Ok(src) = fs::read_to_string(&file) else { continue };
        let dir = file.parent().unwrap_or(src_dir).to_owned();
        let child_dir = if owns_dir { dir.clone() } else { dir.join(file.file_stem().unwrap_or_default()) };
        for (name, path_attr) in declared_modules(&src) {
            if let Some(explicit) = path_attr {
                stack.push((dir.join(explicit), true));
            } else if child_dir.join(format!("{name}.rs")).is_file() {
                stack.push((child_dir.join(format!("{name}.rs")), false));
            } else {
                stack.push((child_dir.join(name).join("mod.rs"), true));
            }
        }
    }
    all.difference(&reached).cloned().collect()
}

fn subdirectories_if_any(dir: &Path) -> Vec<PathBuf> {
    if dir.is_dir() { subdirectories(dir) } else { Vec::new() }
}

/// Relative path for messages.
fn display(path: &Path) -> String {
    path.strip_prefix(workspace_root()).unwrap_or(path).display().to_string()
}

#[test]
fn sources_have_no_placeholders_and_justify_unsafe() {
    let root = workspace_root();
    let mut violations = Vec::new();
    for tree in TREES {
        for file in rust_files(&root.join(tree)) {
            let src = fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            violations.extend(check_source(&display(&file), &src));
        }
    }
    assert_clean("source hygiene", &violations);
}

#[test]
fn every_source_file_is_reachable_from_its_crate_root() {
    let root = workspace_root();
    let mut src_dirs: Vec<PathBuf> = subdirectories(&root.join("crates")).into_iter().map(|c| c.join("src")).collect();
    src_dirs.extend(["benches/src", "xtask/src"].iter().map(|d| root.join(d)));
    let orphans: Vec<String> = src_dirs
        .iter()
        .flat_map(|d| unreachable_files(d))
        .map(|f| format!("{} is not reachable from its crate root (missing `mod` declaration?)", display(&f)))
        .collect();
    assert_clean("module reachability", &orphans);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(src: &[&str]) -> String {
        src.join("\n")
    }

    #[test]
    fn code_lines_drop_comments_and_literal_contents() {
        let src = lines(&[
            "let a = \"todo!( in text\"; // dbg!(x)",
            "let b = r#\"unsafe { \"quoted\" }\"#; let c = '\"';",
            "/* block unsafe",
            "   still comment */ let d = 'x'; fn f<'a>(x: &'a str) {}",
            "let e = \"multi",
            "line unsafe {\";",
        ]);
        let code = code_lines(&src);
        assert_eq!(code[0].trim(), "let a = \"\";");
        assert_eq!(code[1].trim(), "let b = \"\"; let c = ;");
        assert_eq!(code[2], "");
        assert_eq!(code[3].trim(), "let d = ; fn f<'a>(x: &'a str) {}");
        assert_eq!(code[5], "\";");
    }

    #[test]
    fn forbidden_macros_are_reported_with_their_line() {
        let src = lines(&["fn f() {", "    let x = dbg!(1);", "    todo!()", "}", "// unimplemented!() in a comment"]);
        let v = check_source("crates/x/src/lib.rs", &src);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].starts_with("crates/x/src/lib.rs:2: `dbg!(`"), "{v:#?}");
        assert!(v[1].starts_with("crates/x/src/lib.rs:3: `todo!(`"), "{v:#?}");
    }

    #[test]
    fn unsafe_needs_a_nearby_safety_comment() {
        let justified = lines(&[
            "// SAFETY: the index was bounds-checked above;",
            "// the slice outlives the call.",
            "let v = unsafe { *p.add(i) };",
            "/// Reads one byte.",
            "///",
            "/// # Safety",
            "/// `p` must be valid for reads.",
            "#[inline]",
            "pub unsafe fn read(p: *const u8) -> u8 {",
            "    // SAFETY: the caller upholds `read`'s contract.",
            "    unsafe { *p }",
            "}",
            "#![forbid(unsafe_code)]",
        ]);
        assert_eq!(check_source("ok.rs", &justified), Vec::<String>::new());

        let bare = lines(&[
            "// SAFETY: for something else",
            "let a = 1;",
            "let b = 2;",
            "let c = 3;",
            "unsafe impl Send for X {}",
        ]);
        let v = check_source("bad.rs", &bare);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert!(v[0].starts_with("bad.rs:5: `unsafe` without"), "{v:#?}");
        assert_eq!(check_source("bad.rs", "fn f() { unsafe { g() } }").len(), 1);
    }

    #[test]
    fn module_declarations_are_parsed() {
        let src = lines(&[
            "mod a;",
            "pub mod b;",
            "#[cfg(test)]",
            "pub(crate) mod c;",
            "#[cfg(test)] mod d;",
            "#[path = \"gen/e_impl.rs\"]",
            "mod e;",
            "mod inline { fn f() {} }",
            "// mod commented;",
        ]);
        let names: Vec<(String, Option<String>)> = declared_modules(&src);
        let expected = [("a", None), ("b", None), ("c", None), ("d", None), ("e", Some("gen/e_impl.rs"))];
        assert_eq!(names, expected.map(|(n, p)| (n.to_owned(), p.map(str::to_owned))));
    }

    #[test]
    fn orphan_files_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path();
        let write = |rel: &str, text: &str| {
            let p = src.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write("lib.rs", "mod a;\nmod b;\n#[path = \"gen/c.rs\"]\nmod c;\n");
        write("a.rs", "mod nested;\n");
        write("a/nested.rs", "");
        write("b/mod.rs", "mod inner;\n");
        write("b/inner.rs", "");
        write("gen/c.rs", "");
        write("bin/tool.rs", "mod helper;\n");
        write("bin/helper.rs", "");
        write("forgotten.rs", "");
        write("a/lost.rs", "");
        let orphans: Vec<PathBuf> =
            unreachable_files(src).iter().map(|f| f.strip_prefix(src).unwrap().into()).collect();
        assert_eq!(orphans, [PathBuf::from("a/lost.rs"), PathBuf::from("forgotten.rs")]);
    }
}
