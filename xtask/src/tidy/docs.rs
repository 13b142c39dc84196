//! The docs state the current truth, and say where each figure comes from. Two checks over every
//! Markdown file of `docs/` (folders included) and `README.md`:
//!
//! - **No issue numbers.** Prose names no issue: neither `issue 37` nor `issues 33` (any case),
//!   nor `#37`. Code is exempt: fenced blocks, indented blocks and `` `spans` ``. A `#` run of
//!   exactly 6 or 8 digits is read as a colour (`#000000`), not an issue.
//! - **Every figure table names its date and commit.** A Markdown table (a `|` row followed by a
//!   `|---|` row) is a *figure table* when its header names a unit or a measure, or when at least
//!   half of its body cells are numbers:
//!   - a header unit: a header cell that holds one of the words of [`UNIT_WORDS`] (`s`, `ms`,
//!     `MiB`, `ratio`, `acc`, `epoch`, `peak`, ...) as a whole word;
//!   - a number cell: a cell whose text, after leading `*`, `+`, `-`, `~`, `<`, `>`, `=` and
//!     spaces, starts with a digit (`1.340`, `94%`, `**0.41**`, `<= 0.5`).
//!
//!   A figure table needs, somewhere between the nearest heading above it and its own last row,
//!   a date (`2026-12-06`) and a commit in backticks (7 to 40 hex digits with at least one
//!   letter and one digit, `` `28f92f2` ``). Usually both sit in the paragraph just above the
//!   table; a section that holds one sitting states them once, above its first table. Tables of
//!   flags, mappings or rules have neither units nor numbers and are exempt.
//!
//! And one over the links: every `docs/....md` path the docs name, and every relative Markdown
//! link (`[text](path)`, its `#anchor` cut), names a file that exists.

use super::{assert_clean, markdown_files, workspace_root};

/// Header words that make a table a figure table (compared case-insensitively, as whole words).
const UNIT_WORDS: &str = "s ms us x ratio acc accuracy mib gib gb mb kb speed-up epoch step peak rss wall bytes gb/s \
                          time throughput";

/// The prose lines of `text` (1-based numbers), code blocks left out and code spans blanked.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut previous_blank_or_code = true;
    let mut in_indented = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let indented = line.starts_with("    ") || line.starts_with('\t');
        in_indented = indented && (in_indented || previous_blank_or_code);
        previous_blank_or_code = line.trim().is_empty() || in_indented;
        if in_indented {
            continue;
        }
        // Blank every `code span`: the text between pairs of backticks.
        let mut prose = String::with_capacity(line.len());
        for (k, piece) in line.split('`').enumerate() {
            if k % 2 == 0 {
                prose.push_str(piece);
            } else {
                prose.push_str(&" ".repeat(piece.len() + 2));
            }
        }
        out.push((i + 1, prose));
    }
    out
}

/// Whether `prose` names an issue number: `issue N`, `issues N` or `#N`.
fn names_issue(prose: &str) -> bool {
    let lower = prose.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    for word in ["issue ", "issues "] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(word) {
            let start = from + at;
            let end = start + word.len();
            let word_start = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
            let after = lower[end..].trim_start_matches('#');
            if word_start && after.starts_with(|c: char| c.is_ascii_digit()) {
                return true;
            }
            from = end;
        }
    }
    for (at, _) in lower.match_indices('#') {
        let before_ok = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'&');
        let digits = lower[at + 1..].bytes().take_while(u8::is_ascii_digit).count();
        let after_ok = lower[at + 1 + digits..].bytes().next().is_none_or(|b| !b.is_ascii_alphanumeric());
        if before_ok && digits > 0 && after_ok && digits != 6 && digits != 8 {
            return true;
        }
    }
    false
}

/// Violations of the issue-number rule in `file`'s `text`.
fn issue_numbers(file: &str, text: &str) -> Vec<String> {
    prose_lines(text)
        .into_iter()
        .filter(|(_, prose)| names_issue(prose))
        .map(|(n, _)| {
            format!("{file}:{n}: names an issue number: {}", text.lines().nth(n - 1).unwrap_or_default().trim())
        })
        .collect()
}

/// The cells of a table row `| a | b |`.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

fn is_separator(row: &str) -> bool {
    let row = row.trim();
    row.starts_with('|') && row.contains("---") && row.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

fn is_number_cell(cell: &str) -> bool {
    cell.trim_start_matches(['*', '+', '-', '~', '<', '>', '=', ' ']).starts_with(|c: char| c.is_ascii_digit())
}

fn header_names_unit(header: &[String]) -> bool {
    header.iter().any(|cell| {
        let lower = cell.to_ascii_lowercase();
        lower
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '/'))
            .any(|word| UNIT_WORDS.split_whitespace().any(|unit| unit == word))
    })
}

/// Whether a table with this header and these body rows is a figure table.
fn is_figure_table(header: &[String], body: &[Vec<String>]) -> bool {
    let all: Vec<&String> = body.iter().flatten().filter(|c| !c.is_empty()).collect();
    let numbers = all.iter().filter(|c| is_number_cell(c)).count();
    header_names_unit(header) || (!all.is_empty() && 2 * numbers >= all.len())
}

/// Whether `text` holds a date `20YY-MM-DD`.
fn has_date(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(9)).any(|i| {
        let d = |k: usize| b[i + k].is_ascii_digit();
        b[i] == b'2'
            && b[i + 1] == b'0'
            && d(2)
            && d(3)
            && b[i + 4] == b'-'
            && d(5)
            && d(6)
            && b[i + 7] == b'-'
            && d(8)
            && d(9)
    })
}

/// Whether `text` holds a commit in backticks: 7 to 40 hex digits, at least one a letter and one
/// a digit.
fn has_commit(text: &str) -> bool {
    text.split('`').skip(1).step_by(2).any(|span| {
        (7..=40).contains(&span.len())
            && span.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            && span.chars().any(|c| c.is_ascii_digit())
            && span.chars().any(|c| c.is_ascii_alphabetic())
    })
}

/// Violations of the figure-table rule in `file`'s `text`.
fn undated_figure_tables(file: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut violations = Vec::new();
    let mut fenced = false;
    let mut section_start = 0;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') {
            section_start = i;
        }
        let starts_table =
            !fenced && line.trim_start().starts_with('|') && lines.get(i + 1).is_some_and(|l| is_separator(l));
        if !starts_table {
            i += 1;
            continue;
        }
        let header = cells(line);
        let mut end = i + 2;
        while end < lines.len() && lines[end].trim_start().starts_with('|') {
            end += 1;
        }
        let body: Vec<Vec<String>> = lines[i + 2..end].iter().map(|r| cells(r)).collect();
        if is_figure_table(&header, &body) {
            let context = lines[section_start..end].join("\n");
            let missing: Vec<&str> = [(has_date(&context), "a date"), (has_commit(&context), "a commit")]
                .into_iter()
                .filter(|(ok, _)| !ok)
                .map(|(_, what)| what)
                .collect();
            if !missing.is_empty() {
                violations.push(format!(
                    "{file}:{}: figure table without {} above it: {line}",
                    i + 1,
                    missing.join(" or ")
                ));
            }
        }
        i = end;
    }
    violations
}

/// The doc paths `text` names (`docs/X.md`, relative `[text](path)` links), as `(line, path
/// from the root)`; `file` is the naming doc, which relative links start from.
fn named_paths(file: &str, text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let folder = std::path::Path::new(file).parent().unwrap_or(std::path::Path::new(""));
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("docs/") {
            let path: String =
                rest[at..].chars().take_while(|&c| c.is_ascii_alphanumeric() || "/._-".contains(c)).collect();
            if path.ends_with(".md") {
                found.push((i + 1, path.clone()));
            }
            rest = &rest[at + path.len().max(1)..];
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let target: String = rest[at + 2..].chars().take_while(|&c| c != ')').collect();
            let target = target.split('#').next().unwrap_or_default();
            if !target.is_empty() && !target.contains("://") && !target.starts_with('/') {
                found.push((i + 1, folder.join(target).display().to_string()));
            }
            rest = &rest[at + 2..];
        }
    }
    found
}

#[test]
fn doc_links_name_files_that_exist() {
    let root = workspace_root();
    let violations: Vec<String> = markdown_files()
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(root.join(f)).expect("readable doc");
            named_paths(f, &text)
                .into_iter()
                .filter(|(_, path)| !root.join(path).exists())
                .map(|(n, path)| format!("{f}:{n}: names {path}, which does not exist"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_clean("doc links", &violations);
}

#[test]
fn docs_name_no_issue_number() {
    let root = workspace_root();
    let violations: Vec<String> = markdown_files()
        .iter()
        .flat_map(|f| issue_numbers(f, &std::fs::read_to_string(root.join(f)).expect("readable doc")))
        .collect();
    assert_clean("issue numbers in docs", &violations);
}

#[test]
fn every_figure_table_names_its_date_and_commit() {
    let root = workspace_root();
    let violations: Vec<String> = markdown_files()
        .iter()
        .flat_map(|f| undated_figure_tables(f, &std::fs::read_to_string(root.join(f)).expect("readable doc")))
        .collect();
    assert_clean("figure tables without date and commit", &violations);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_numbers_in_prose_are_found_and_code_is_exempt() {
        let text = "Fixed in issue 37.\nSee Issues 33 and 34.\nAs #12 says.\n\
                    `issue 5` in a span.\n\n    issue 6 in an indented block\n\n```\n#7\n```\n\
                    Colour #000000 and &#39; and item#3 and issue tracker.\n";
        let found = issue_numbers("d.md", text);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found[0].starts_with("d.md:1: ") && found[1].starts_with("d.md:2: ") && found[2].starts_with("d.md:3: ")
        );
    }

    #[test]
    fn a_figure_table_needs_a_date_and_a_commit_above_it() {
        let bad = "## Speed\n\nMeasured on a 2-core machine.\n\n| run | epoch (s) |\n|---|---|\n| a | 1.5 |\n";
        let found = undated_figure_tables("b.md", bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("b.md:5: ") && found[0].contains("a date or a commit"), "{found:?}");
        let dated = bad.replace("Measured on", "2026-12-06, `28f92f2`: measured on");
        assert!(undated_figure_tables("b.md", &dated).is_empty());
        // The date above another heading does not count.
        let other = format!("2026-12-06, `28f92f2`\n{bad}");
        assert_eq!(undated_figure_tables("b.md", &other).len(), 1);
        // Mostly numbers with no unit in the header is a figure table too.
        let numbers = "| graph | a | b |\n|---|---|---|\n| x | 1 | 2 |\n";
        assert_eq!(undated_figure_tables("c.md", numbers).len(), 1);
    }

    #[test]
    fn doc_paths_and_relative_links_are_found() {
        let text = "See `docs/CUDA.md`, \"GPU runs\", and [the guide](GUIDE.md#build).\n\
                    A [site](https://example.org) and docs/methods/<name>.md are no files.\n";
        let found = named_paths("docs/ARCHITECTURE.md", text);
        assert_eq!(found, [(1, "docs/CUDA.md".to_owned()), (1, "docs/GUIDE.md".to_owned())]);
    }

    #[test]
    fn tables_of_words_are_exempt() {
        let flags = "| flag | what |\n|---|---|\n| `--seed` | the seed |\n| `--epochs N` | how many |\n";
        assert!(undated_figure_tables("f.md", flags).is_empty());
        assert!(!has_commit("`deadbeefcafe`") && has_commit("`8716c8b`") && !has_commit("`1234567`"));
        assert!(has_date("on 2026-11-27.") && !has_date("2026-11"));
    }
}
