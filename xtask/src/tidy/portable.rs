//! What a fresh clone on another machine needs: no tracked symlink pointing outside the
//! repository (it dangles in every clone), and no absolute path of one machine in the docs (a
//! user's machine has none of them).

use std::path::{Component, Path};
use std::process::Command;

use super::{assert_clean, markdown_files, workspace_root};

/// Top-level folders whose absolute paths belong to one machine; `/tmp` is everywhere, and
/// system tools (`/usr/bin/time`) are fine.
const MACHINE_ROOTS: [&str; 7] = ["/work/", "/home/", "/Users/", "/root/", "/mnt/", "/data/", "/scratch/"];

/// The tracked symlinks among `links` (path in the repository, target as stored) whose target
/// is absolute or leaves the repository.
fn escaping_links(links: &[(String, String)]) -> Vec<String> {
    links
        .iter()
        .filter(|(path, target)| {
            let target = Path::new(target);
            if target.has_root() {
                return true;
            }
            // Depth below the repository root while walking from the link's folder.
            let mut depth = Path::new(path).components().count() as isize - 1;
            for part in target.components() {
                match part {
                    Component::ParentDir => depth -= 1,
                    Component::Normal(_) => depth += 1,
                    _ => {}
                }
                if depth < 0 {
                    return true;
                }
            }
            false
        })
        .map(|(path, target)| format!("{path} -> {target} points outside the repository"))
        .collect()
}

/// `path:line: text` for every line of `text` that names a path under one of [`MACHINE_ROOTS`]
/// (at the start of a word, so `a/work/b` does not count).
fn machine_paths(path: &str, text: &str) -> Vec<String> {
    let word_start = |line: &str, at: usize| {
        line[..at].chars().next_back().is_none_or(|c| c.is_whitespace() || "`'\"(=[<:,".contains(c))
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            MACHINE_ROOTS.iter().any(|root| line.match_indices(root).any(|(at, _)| word_start(line, at)))
        })
        .map(|(n, line)| format!("{path}:{}: absolute machine path in `{}`", n + 1, line.trim()))
        .collect()
}

/// `git ls-files` in the workspace with `args`, one entry per line; `None` outside a git
/// checkout (a source archive has no tracked files to check).
fn git_ls_files(args: &[&str]) -> Option<Vec<String>> {
    let out = Command::new("git").arg("ls-files").args(args).current_dir(workspace_root()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
}

#[test]
fn no_tracked_symlink_points_outside_the_repository() {
    let Some(staged) = git_ls_files(&["-s"]) else {
        eprintln!("not a git checkout: no tracked symlinks to check");
        return;
    };
    // `<mode> <object> <stage>\t<path>`; mode 120000 is a symlink.
    let links: Vec<(String, String)> = staged
        .iter()
        .filter_map(|l| l.strip_prefix("120000 ").and_then(|rest| rest.split_once('\t')))
        .map(|(_, path)| {
            let target = std::fs::read_link(workspace_root().join(path))
                .unwrap_or_else(|e| panic!("reading the symlink {path}: {e}"));
            (path.to_owned(), target.to_string_lossy().into_owned())
        })
        .collect();
    assert_clean("symlinks", &escaping_links(&links));
}

#[test]
fn docs_name_no_absolute_machine_path() {
    let root = workspace_root();
    let mut docs = markdown_files();
    docs.push("datasets/README.md".to_owned());
    let violations: Vec<String> = docs
        .iter()
        .flat_map(|doc| {
            let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("reading {doc}: {e}"));
            machine_paths(doc, &text)
        })
        .collect();
    assert_clean("absolute machine paths in docs", &violations);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(path: &str, target: &str) -> (String, String) {
        (path.to_owned(), target.to_owned())
    }

    #[test]
    fn links_that_leave_the_repository_are_reported() {
        let links = [
            link("datasets/synth", "/work/data/synth"),
            link("datasets/up", "../../elsewhere"),
            link("datasets/sneaky", "../datasets/../../x"),
            link("datasets/cora-alias", "cora"),
            link("docs/img/plot.svg", "../../experiments/plot.svg"),
        ];
        let found = escaping_links(&links);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("datasets/synth -> /work/data/synth"), "{found:?}");
        assert!(found[1].starts_with("datasets/up") && found[2].starts_with("datasets/sneaky"), "{found:?}");
    }

    #[test]
    fn machine_paths_are_reported_with_their_line() {
        let text = "intro\n    halo train --dataset /work/data/synth-1m\n\
                    out `/tmp/synth` and /usr/bin/time -v\nsee (/home/me/x) and src/work/y\n--out=/data/z\n";
        let found = machine_paths("doc.md", text);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("doc.md:2: "), "{found:?}");
        assert!(found[1].starts_with("doc.md:4: ") && found[2].starts_with("doc.md:5: "), "{found:?}");
        assert!(machine_paths("doc.md", "datasets/cora and /tmp/x\n").is_empty());
    }
}
