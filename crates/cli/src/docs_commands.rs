//! Every `halo` command in the docs parses with today's flags. The commands are read from the code
//! blocks (fenced, or indented by four spaces) of `README.md`, `docs/*.md` and `docs/*/*.md`, and
//! each goes through the binary's own parser ([`Cli`]), in process, so a renamed or removed flag
//! fails here. Parsing is all that is checked: nothing runs, and checks made after parsing (a
//! dataset that must exist, flags that exclude each other) are not made.
//!
//! How a command is found: a code line is cut at ` # ` (a comment), `\` continuations are joined,
//! and the line is split at `&&`, `;` and `|` into commands. A command is a `halo` command when
//! its first word (after `KEY=VALUE` assignments, `env` and `/usr/bin/time -v`) is `halo` or a
//! path ending in `/halo` (`target/release/halo`), or when it starts with `mpirun` and one of its
//! words is: the words after that one are the arguments. `cargo xtask bench-ab REV -- ARGS` runs
//! `halo ARGS`, so its ARGS are checked too, and so are the `halo train` arguments that `halo bench
//! memory ... -- ARGS` passes on. A `[...]` group is optional: the command is parsed without it and
//! with it. Left out, as templates rather than commands: a command with a shell expansion (`$M`),
//! an `<angle placeholder>` or an ellipsis (`...`).

use clap::Parser;

use crate::Cli;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The Markdown files whose commands are checked, relative to the repository root.
fn doc_files() -> Vec<String> {
    let mut files = vec!["README.md".to_owned()];
    for dir in ["docs", "docs/methods"] {
        let entries = std::fs::read_dir(format!("{REPO}/{dir}")).unwrap_or_else(|e| panic!("listing {dir}: {e}"));
        for entry in entries {
            let name = entry.expect("directory entry").file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    files
}

/// The code lines of `text` with their 1-based numbers: fenced blocks and blocks indented by
/// four spaces after a blank line.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut in_indented = false;
    let mut previous_blank = true;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push((i + 1, line.trim().to_owned()));
            continue;
        }
        in_indented = line.starts_with("    ") && (in_indented || previous_blank);
        previous_blank = line.trim().is_empty();
        if in_indented {
            out.push((i + 1, line.trim().to_owned()));
        }
    }
    out
}

/// The commands of the code lines: comments cut, continuations joined, chains split.
fn commands(lines: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut joined: Vec<(usize, String)> = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in lines {
        let code = if line.starts_with('#') { "" } else { line.split(" # ").next().unwrap_or_default().trim() };
        let (code, continues) = match code.strip_suffix('\\') {
            Some(head) => (head.trim(), true),
            None => (code, false),
        };
        let current = match open.take() {
            Some((start, text)) => (start, format!("{text} {code}")),
            None => (*n, code.to_owned()),
        };
        if continues {
            open = Some(current);
        } else {
            joined.push(current);
        }
    }
    joined.extend(open);
    joined
        .into_iter()
        .flat_map(|(n, text)| {
            text.replace("&&", ";").replace('|', ";").split(';').map(|c| (n, c.trim().to_owned())).collect::<Vec<_>>()
        })
        .filter(|(_, c)| !c.is_empty())
        .collect()
}

/// The arguments after `halo` in `command`, or `None` when it does not run `halo`.
fn halo_arguments(command: &str) -> Option<Vec<String>> {
    let words = shell_words(command);
    let is_halo = |w: &str| w == "halo" || w.ends_with("/halo");
    let mut at = 0;
    while at < words.len() {
        let w = words[at].as_str();
        if w == "env" || (w.contains('=') && !w.starts_with('-')) {
            at += 1;
        } else if w == "/usr/bin/time" {
            at += 1;
            while words.get(at).is_some_and(|w| w.starts_with('-')) {
                at += 1;
            }
        } else {
            break;
        }
    }
    let first = words.get(at)?;
    let halo = if is_halo(first) {
        at
    } else if first == "mpirun" {
        at + words[at..].iter().position(|w| is_halo(w))?
    } else if words[at..].starts_with(&["cargo".to_owned(), "xtask".to_owned(), "bench-ab".to_owned()]) {
        at + words[at..].iter().position(|w| w == "--")?
    } else {
        return None;
    };
    Some(words[halo + 1..].to_vec())
}

/// The argument lists `args` asks the parser to accept: `args` itself, and for `bench memory ...
/// -- ARGS` also `train ARGS`, which the bench passes to every run.
fn parsed_forms(args: Vec<String>) -> Vec<Vec<String>> {
    let passes_on = args.starts_with(&["bench".to_owned(), "memory".to_owned()]);
    let train = match args.iter().position(|a| a == "--") {
        Some(at) if passes_on => {
            Some(std::iter::once("train".to_owned()).chain(args[at + 1..].iter().cloned()).collect())
        }
        _ => None,
    };
    std::iter::once(args).chain(train).collect()
}

/// `command` split into words, with single and double quotes grouping (and removed).
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}

/// Whether `command` is a template rather than a command (see the module doc).
fn is_template(command: &str) -> bool {
    command.contains('$') || command.contains('<') || command.contains("...") || command.contains('…')
}

/// `command` without its `[...]` groups, and with them (their brackets dropped).
fn variants(command: &str) -> Vec<String> {
    if !command.contains('[') {
        return vec![command.to_owned()];
    }
    let mut without = String::new();
    let mut depth = 0;
    for c in command.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if depth == 0 => without.push(c),
            _ => {}
        }
    }
    vec![without, command.replace(['[', ']'], "")]
}

/// Why `args` does not parse, or `None` when it does (help and version requests parse).
fn parse_error(args: &[String]) -> Option<String> {
    let argv = std::iter::once("halo".to_owned()).chain(args.iter().cloned());
    match Cli::try_parse_from(argv) {
        Ok(_) => None,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {
            None
        }
        Err(e) => Some(e.to_string().lines().next().unwrap_or_default().to_owned()),
    }
}

#[test]
fn every_halo_command_in_the_docs_parses() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(format!("{REPO}/{file}")).unwrap_or_else(|e| panic!("reading {file}: {e}"));
        for (line, command) in commands(&code_lines(&text)) {
            if is_template(&command) {
                continue;
            }
            for variant in variants(&command) {
                let Some(args) = halo_arguments(&variant) else { continue };
                for args in parsed_forms(args) {
                    checked += 1;
                    if let Some(error) = parse_error(&args) {
                        failures.push(format!("{file}:{line}: `{variant}`: {error}"));
                    }
                }
            }
        }
    }
    assert!(checked >= 10, "only {checked} halo commands found in the docs: is the extraction broken?");
    assert!(failures.is_empty(), "{} doc command(s) do not parse:\n  {}", failures.len(), failures.join("\n  "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_joined_split_and_found() {
        let text = "text\n\n    halo train --dataset d \\\n        --epochs 2   # a comment\n    \
                    mkdir -p x && halo compare a.json b.json\n\n```\nmpirun -np 4 --oversubscribe \
                    target/release/halo train --backend mpi\nHALO_LOG=info halo datasets info d\n```\n";
        let found: Vec<(usize, Option<Vec<String>>)> =
            commands(&code_lines(text)).into_iter().map(|(n, c)| (n, halo_arguments(&c))).collect();
        let words = |s: &str| Some(s.split_whitespace().map(str::to_owned).collect::<Vec<_>>());
        assert_eq!(
            found,
            [
                (3, words("train --dataset d --epochs 2")),
                (5, None),
                (5, words("compare a.json b.json")),
                (8, words("train --backend mpi")),
                (9, words("datasets info d")),
            ]
        );
    }

    #[test]
    fn a_renamed_flag_fails_and_templates_are_left_out() {
        let args = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert!(parse_error(&args("train --dataset d --epochs 2")).is_none());
        assert!(parse_error(&args("train --dataset d --no-such-flag")).is_some());
        assert!(parse_error(&args("train --help")).is_none());
        assert!(is_template("halo train $M") && is_template("halo <halo-base> train") && !is_template("halo train"));
        assert_eq!(variants("halo a [--b c] d"), ["halo a  d", "halo a --b c d"]);
    }

    #[test]
    fn arguments_passed_on_to_halo_are_checked_too() {
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let ab = halo_arguments("cargo xtask bench-ab abc1234 --rounds 3 -- train --epochs 2");
        assert_eq!(ab, Some(words("train --epochs 2")));
        let forms = parsed_forms(words("bench memory --dataset d -- --epochs 2 --no-such-flag"));
        assert_eq!(
            forms,
            [words("bench memory --dataset d -- --epochs 2 --no-such-flag"), words("train --epochs 2 --no-such-flag")]
        );
        assert!(parse_error(&forms[0]).is_none() && parse_error(&forms[1]).is_some());
    }
}
