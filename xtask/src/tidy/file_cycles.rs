//! Import circles between the files of a crate: no file of a crate's `src/` may take a name from
//! a file that takes one from it, directly or around a loop.
//!
//! A file takes a name from another through a `use` of a `crate::`, `super::` or `self::` path
//! or of a child module by its bare name (`use child::Name`), or through a path expression that
//! starts at `crate`, `super` or `self` (`crate::a::f(..)`). The path lands in the longest
//! of its prefixes that is a module file (`a/b.rs` or `a/b/mod.rs`; `lib.rs` and `main.rs` are
//! the root); where that file only re-exports the name (`pub use child::Name`), the path goes on
//! to the file the re-export names, so the edge ends where the name is defined. A file's `pub use`
//! of its own descendants is its facade, not an import: a parent that declares and re-exports a
//! child does not depend on it the way the child depends on what it imports from the parent.
//! Module declarations (`mod x;`) are not imports either. Test code (a `#[cfg(test)]` item and
//! the files it declares) is exempt, and so are the binaries under `src/bin` (one file each).

use std::collections::{BTreeMap, BTreeSet};

use super::source::code_lines;
use super::trainer_modules::{is_ident, sources};
use super::{assert_clean, subdirectories, workspace_root};

/// A module's path below its crate root (`[]` is the root).
type ModPath = Vec<String>;

/// How many re-exports a path may go through before the check gives up following it.
const MAX_REEXPORTS: usize = 8;

/// One leaf of a `use` tree, or one path expression.
#[derive(Debug, Clone)]
struct Import {
    /// The path as written, `self` leaves dropped (`use a::{self}` is `a`).
    segments: Vec<String>,
    /// The name it binds here (a `use`'s leaf or its `as` alias).
    alias: String,
    glob: bool,
    /// A `pub use` (at any visibility): a re-export.
    public: bool,
    /// The inline modules (`mod m { .. }`) it sits in, outermost first.
    scope: Vec<String>,
}

/// What one file's code declares and imports.
#[derive(Debug, Default)]
struct Scan {
    /// Out-of-line modules it declares (`mod x;`, without `#[path]`), outside test code.
    modules: Vec<String>,
    imports: Vec<Import>,
}

/// The code of `src` as tokens: identifiers, `::`, and single punctuation characters; comments
/// and literal contents are gone.
fn tokens(src: &str) -> Vec<String> {
    let code = code_lines(src).join("\n");
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_ident(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
            continue;
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
        i += 1;
    }
    out
}

/// Index just past the item starting at `i`: up to its `;`, or its braced body.
fn skip_item(t: &[String], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < t.len() {
        match t[i].as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            ";" if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Whether the `use` at `i` has a visibility (`pub`, `pub(crate)`, ..) before it.
fn is_public(t: &[String], i: usize) -> bool {
    match i.checked_sub(1).map(|p| t[p].as_str()) {
        Some("pub") => true,
        Some(")") => t[..i - 1].iter().rposition(|s| s == "(").is_some_and(|o| o > 0 && t[o - 1] == "pub"),
        _ => false,
    }
}

/// Parses the use tree at `i` under `prefix` into `out`; returns the index after it.
fn use_tree(t: &[String], mut i: usize, prefix: Vec<String>, leaf: &Import, out: &mut Vec<Import>) -> usize {
    let mut segments = prefix;
    while i < t.len() {
        match t[i].as_str() {
            "::" => i += 1,
            "{" => {
                i += 1;
                while i < t.len() && t[i] != "}" {
                    i = use_tree(t, i, segments.clone(), leaf, out);
                    if t.get(i).is_some_and(|s| s == ",") {
                        i += 1;
                    }
                }
                return i + 1;
            }
            "*" => {
                out.push(Import { segments, alias: "*".to_owned(), glob: true, ..leaf.clone() });
                return i + 1;
            }
            s if s.chars().all(is_ident) => {
                segments.push(s.to_owned());
                i += 1;
                if t.get(i).is_some_and(|s| s == "::") {
                    continue;
                }
                if segments.len() > 1 && segments.last().is_some_and(|s| s == "self") {
                    segments.pop();
                }
                let mut alias = segments.last().cloned().unwrap_or_default();
                if t.get(i).is_some_and(|s| s == "as") {
                    alias = t.get(i + 1).cloned().unwrap_or_default();
                    i += 2;
                }
                out.push(Import { segments, alias, glob: false, ..leaf.clone() });
                return i;
            }
            _ => return i,
        }
    }
    i
}

/// The token at `i`, or nothing past the end.
fn tok(t: &[String], i: usize) -> &str {
    t.get(i).map_or("", String::as_str)
}

/// The modules `src` declares and the paths it takes, test code left out.
fn scan(src: &str) -> Scan {
    let t = tokens(src);
    let mut found = Scan::default();
    // Inline modules open at this brace depth.
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut path_attr = false;
    let mut i = 0;
    while i < t.len() {
        let here: Vec<String> = scope.iter().map(|(m, _)| m.clone()).collect();
        match tok(&t, i) {
            "#" if tok(&t, i + 1) == "["
                && tok(&t, i + 2) == "cfg"
                && tok(&t, i + 3) == "("
                && tok(&t, i + 4) == "test"
                && tok(&t, i + 5) == ")" =>
            {
                i = skip_item(&t, i + 7);
                continue;
            }
            "#" if tok(&t, i + 1) == "[" && tok(&t, i + 2) == "path" => path_attr = true,
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if scope.last().is_some_and(|&(_, d)| d == depth) {
                    scope.pop();
                }
            }
            "mod" if tok(&t, i + 2) == ";" => {
                if !std::mem::take(&mut path_attr) {
                    found.modules.push(tok(&t, i + 1).to_owned());
                }
                i += 3;
                continue;
            }
            "mod" if tok(&t, i + 2) == "{" => {
                scope.push((tok(&t, i + 1).to_owned(), depth));
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                let leaf = Import {
                    segments: Vec::new(),
                    alias: String::new(),
                    glob: false,
                    public: is_public(&t, i),
                    scope: here,
                };
                i = use_tree(&t, i + 1, Vec::new(), &leaf, &mut found.imports);
                continue;
            }
            "crate" | "super" | "self"
                if tok(&t, i + 1) == "::" && !matches!(i.checked_sub(1).map(|p| t[p].as_str()), Some("::" | "$")) =>
            {
                let mut segments = vec![tok(&t, i).to_owned()];
                i += 1;
                while tok(&t, i) == "::" && tok(&t, i + 1).chars().next().is_some_and(is_ident) {
                    segments.push(tok(&t, i + 1).to_owned());
                    i += 2;
                }
                let alias = segments.last().cloned().unwrap_or_default();
                found.imports.push(Import { segments, alias, glob: false, public: false, scope: here });
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// A crate's module files, by module path, walked from its root through `mod` declarations.
fn module_files(files: &BTreeMap<String, String>, root: &str) -> BTreeMap<ModPath, String> {
    let mut modules = BTreeMap::new();
    let mut stack = vec![(ModPath::new(), root.to_owned())];
    while let Some((path, file)) = stack.pop() {
        let Some(src) = files.get(&file) else { continue };
        // The root and `mod.rs` files hold their children beside them, `a.rs` in `a/`.
        let dir = match file.strip_suffix("mod.rs").filter(|d| d.is_empty() || d.ends_with('/')) {
            _ if file == root => String::new(),
            Some(dir) => dir.to_owned(),
            None => format!("{}/", file.trim_end_matches(".rs")),
        };
        for name in scan(src).modules {
            let child =
                [format!("{dir}{name}.rs"), format!("{dir}{name}/mod.rs")].into_iter().find(|f| files.contains_key(f));
            if let Some(child) = child {
                stack.push(([path.clone(), vec![name]].concat(), child));
            }
        }
        modules.insert(path, file);
    }
    modules
}

/// The files that take names from each other (from -> to -> names) in one crate.
type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// One crate root's module files and what each imports.
struct Tree {
    modules: BTreeMap<ModPath, String>,
    paths: BTreeMap<String, ModPath>,
    scans: BTreeMap<String, Scan>,
}

impl Tree {
    fn new(files: &BTreeMap<String, String>, root: &str) -> Self {
        let modules = module_files(files, root);
        let paths = modules.iter().map(|(p, f)| (f.clone(), p.clone())).collect();
        let scans = modules.values().map(|f| (f.clone(), scan(&files[f]))).collect();
        Self { modules, paths, scans }
    }

    /// The absolute module path `import` names from `file`; `None` for paths that start
    /// elsewhere (other crates, names in scope).
    fn absolute(&self, file: &str, import: &Import) -> Option<ModPath> {
        let mut base = [self.paths[file].clone(), import.scope.clone()].concat();
        let mut rest = import.segments.iter().peekable();
        match rest.peek().map(|s| s.as_str()) {
            Some("crate") => base.clear(),
            Some("self" | "super") => {}
            // A child module by its bare name (`pub use child::Name`).
            Some(child) if self.modules.contains_key(&[base.clone(), vec![child.to_owned()]].concat()) => {}
            _ => return None,
        }
        if rest.peek().is_some_and(|s| *s == "crate" || *s == "self") {
            rest.next();
        }
        while rest.peek().is_some_and(|s| *s == "super") {
            base.pop()?;
            rest.next();
        }
        Some(base.into_iter().chain(rest.cloned()).collect())
    }

    /// The file `path` lands in and the name it takes there (`None`: the module itself),
    /// following re-exports to the file that defines the name.
    fn land(&self, path: &[String], hops: usize) -> (String, Option<String>) {
        let k = (0..=path.len()).rev().find(|&k| self.modules.contains_key(&path[..k])).unwrap_or(0);
        let file = self.modules.get(&path[..k]).cloned().unwrap_or_default();
        let name = path.get(k).cloned();
        if let Some(name) = &name
            && hops < MAX_REEXPORTS
            && let Some(scan) = self.scans.get(&file)
            && let Some(reexport) =
                scan.imports.iter().find(|i| i.public && !i.glob && i.scope.is_empty() && &i.alias == name)
            && let Some(target) = self.absolute(&file, reexport)
        {
            return self.land(&target, hops + 1);
        }
        (file, name)
    }

    /// Every file-to-file import, facades left out.
    fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        for (file, scan) in &self.scans {
            let own = &self.paths[file];
            for import in &scan.imports {
                let Some(path) = self.absolute(file, import) else { continue };
                let (target, name) = self.land(&path, 0);
                let descendant = self.paths.get(&target).is_some_and(|t| t.len() > own.len() && t.starts_with(own));
                if target == *file || target.is_empty() || (import.public && descendant) {
                    continue;
                }
                let name = if import.glob { "*".to_owned() } else { name.unwrap_or_else(|| import.alias.clone()) };
                edges.entry(file.clone()).or_default().entry(target).or_default().insert(name);
            }
        }
        edges
    }
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn circles(edges: &Edges) -> Vec<Vec<String>> {
    struct State<'e> {
        edges: &'e Edges,
        index: BTreeMap<&'e str, usize>,
        low: BTreeMap<&'e str, usize>,
        stack: Vec<&'e str>,
        on_stack: BTreeSet<&'e str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'e>(s: &mut State<'e>, v: &'e str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flat_map(|m| m.keys()) {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let low = s.low[w.as_str()].min(s.low[v]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.index[w.as_str()].min(s.low[v]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found.sort();
    s.found
}

/// Every import circle among a crate's `files` (path under `src/` with `/` separators, text),
/// each with its files and the names that tie them; `crate` prefixes the paths in messages.
fn check_circles(krate: &str, files: &[(String, String)]) -> Vec<String> {
    let files: BTreeMap<String, String> = files.iter().filter(|(f, _)| !f.starts_with("bin/")).cloned().collect();
    let mut violations = Vec::new();
    for root in ["lib.rs", "main.rs"].into_iter().filter(|r| files.contains_key(*r)) {
        let edges = Tree::new(&files, root).edges();
        for circle in circles(&edges) {
            let mut text = format!("{krate}: {} files import each other: {}", circle.len(), circle.join(", "));
            for from in &circle {
                for (to, names) in edges[from].iter().filter(|(to, _)| circle.contains(to)) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    text.push_str(&format!("\n    {from} -> {to}: {}", names.join(", ")));
                }
            }
            violations.push(text);
        }
    }
    violations
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let mut violations = Vec::new();
    for dir in subdirectories(&workspace_root().join("crates")) {
        let krate = format!("crates/{}/src", dir.file_name().expect("folder name").to_string_lossy());
        violations.extend(check_circles(&krate, &sources(&dir.join("src"))));
    }
    assert_clean("import circles between files (move what both need below both)", &violations);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(list: &[(&str, &str)]) -> Vec<String> {
        let files: Vec<(String, String)> = list.iter().map(|&(f, s)| (f.to_owned(), s.to_owned())).collect();
        check_circles("src", &files)
    }

    /// A crate whose files import one way only: a facade re-exporting its children, children
    /// taking names from their parent, and test code importing anything.
    const TIDY: [(&str, &str); 6] = [
        ("lib.rs", "pub mod codec;\nmod base;\npub use codec::Codec;\n"),
        ("base.rs", "pub struct Base;\n#[cfg(test)]\nmod tests {\n    use crate::codec::Codec;\n}\n"),
        (
            "codec/mod.rs",
            "mod linear;\nmod kernel;\npub use kernel::{Kernel, Measured as M};\npub use linear::Linear;\n\
             pub struct Codec;\n",
        ),
        ("codec/kernel.rs", "use super::Codec;\nuse crate::base::Base;\npub struct Kernel;\npub struct Measured;\n"),
        ("codec/linear.rs", "use super::{Codec, M};\nuse crate::codec::kernel::{self, Kernel};\npub struct Linear;\n"),
        ("codec/tests.rs", "use crate::codec::linear::Linear;\n"),
    ];

    #[test]
    fn files_importing_one_way_pass() {
        assert_eq!(check(&TIDY), Vec::<String>::new());
    }

    #[test]
    fn two_files_importing_each_other_fail_with_the_names() {
        let mut files = TIDY.to_vec();
        // kernel.rs takes `Linear` through the crate root's and codec's re-exports.
        files[3] =
            ("codec/kernel.rs", "use super::Codec;\npub struct Kernel;\nfn f() { crate::codec::Linear::new(); }\n");
        let v = check(&files);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!(
            v[0],
            "src: 2 files import each other: codec/kernel.rs, codec/linear.rs\n    \
             codec/kernel.rs -> codec/linear.rs: Linear\n    \
             codec/linear.rs -> codec/kernel.rs: Kernel, Measured, kernel"
        );
    }

    #[test]
    fn a_loop_through_three_files_and_a_parent_importing_its_child_fail() {
        let v = check(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            ("b.rs", "pub struct B;\nfn f() -> crate::c::C { todo() }\n"),
            ("c.rs", "use super::{a::A, d};\npub struct C;\n"),
            ("d/mod.rs", "mod e;\nuse e::E;\npub struct D;\n"),
            ("d/e.rs", "pub struct E;\nmod inner {\n    use super::super::D;\n}\n"),
        ]);
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].starts_with("src: 3 files import each other: a.rs, b.rs, c.rs"), "{v:#?}");
        assert!(v[0].contains("\n    c.rs -> a.rs: A"), "{v:#?}");
        assert!(v[1].starts_with("src: 2 files import each other: d/e.rs, d/mod.rs"), "{v:#?}");
        assert!(v[1].contains("d/mod.rs -> d/e.rs: E") && v[1].contains("d/e.rs -> d/mod.rs: D"), "{v:#?}");
    }

    #[test]
    fn use_trees_expand_to_their_leaves() {
        let s = scan(
            "pub(crate) use super::{a::{self, B as C}, d::*};\nuse std::fmt;\nmod x;\n#[path = \"y.rs\"]\nmod y;\n",
        );
        let leaves: Vec<(String, &str, bool)> =
            s.imports.iter().map(|i| (i.segments.join("::"), i.alias.as_str(), i.public)).collect();
        let expected =
            [("super::a", "a", true), ("super::a::B", "C", true), ("super::d", "*", true), ("std::fmt", "fmt", false)];
        assert_eq!(leaves, expected.map(|(p, a, public)| (p.to_owned(), a, public)));
        assert_eq!(s.modules, ["x"]);
    }
}
