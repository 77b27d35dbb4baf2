//! The import-loop check (`cargo xtask layout`, and the test at the end of this file): no
//! crate of the workspace may have two modules that depend on each other, directly or around
//! a longer loop.
//!
//! # What a loop is
//!
//! A module *depends on* another when its code (a `use`, or a path in a type, an expression,
//! a pattern or a macro's tokens) names an item that the other module *defines*. Names are
//! followed through `use` declarations and re-exports to where the item is defined: a child
//! that reaches a sibling's function through its parent's `pub use` depends on the sibling,
//! not on the parent. Code compiled only for tests (`#[cfg(test)]`, such as `mod tests`) is
//! left out: tests may reach anywhere.
//!
//! A module and its own ancestors are one unit: a child uses its parent's items (`super::Group`)
//! and the parent uses its children's, which is how a module is split into files. Every other
//! dependency is lifted to the siblings it runs between: for a dependency of module A on module
//! B, take their closest common ancestor P; the children of P that hold A and B are siblings,
//! and the dependency is an arrow between them (`engine::absent` → `engine::topic_access`, or
//! `dashboard` → `session` for `dashboard::api` → `session::routing`).
//!
//! A **loop** is a cycle among the arrows between the children of one module: the files and
//! directories beside each other must form a hierarchy, each depending only on those below it,
//! so that each can be read, tested and moved without the others it does not name.
//!
//! It reads every crate root of the workspace (`src/lib.rs`, `src/main.rs` under `crates/`,
//! and xtask's own) and the modules they declare; integration tests, benches and examples are
//! crates of their own that see only the libraries' public APIs.
//!
//! What it does not see: method calls (`group.join(…)` names no path), names a macro builds
//! out of pieces, and items a glob import brings in from outside the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::modtree::{self, ModPath, Module};

/// One arrow between siblings, with the reference that makes it (the first one found).
#[derive(Debug, Clone)]
struct Arrow {
    file: PathBuf,
    line: usize,
    path: String,
    target: ModPath,
}

/// A loop found: the crate, the module whose children it runs between, and its arrows in
/// order (each one's `to` is the next one's `from`).
#[derive(Debug)]
pub struct Loop {
    pub krate: String,
    pub parent: ModPath,
    steps: Vec<(String, String, Arrow)>,
}

impl Loop {
    /// The siblings around the loop, first one repeated at the end.
    pub fn members(&self) -> Vec<String> {
        let mut names: Vec<String> = self.steps.iter().map(|(from, _, _)| from.clone()).collect();
        if let Some(first) = names.first().cloned() {
            names.push(first);
        }
        names
    }
}

impl std::fmt::Display for Loop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let within = if self.parent.is_empty() {
            "the crate root".to_owned()
        } else {
            format!("`{}`", self.parent.join("::"))
        };
        writeln!(
            f,
            "{}: import loop between the children of {within}: {}",
            self.krate,
            self.members().join(" -> ")
        )?;
        for (from, to, arrow) in &self.steps {
            writeln!(
                f,
                "    {from} -> {to}: {}:{} names `{}` (defined in `{}`)",
                arrow.file.display(),
                arrow.line,
                arrow.path,
                display(&arrow.target)
            )?;
        }
        Ok(())
    }
}

fn display(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".to_owned()
    } else {
        format!("crate::{}", path.join("::"))
    }
}

/// Every crate root of the workspace: `src/lib.rs` and `src/main.rs` of each member under
/// `crates/`, and xtask's own.
pub fn crate_roots(repo: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut roots = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(repo.join("crates"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.push(repo.join("xtask"));
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (root, what) in [("src/lib.rs", "lib"), ("src/main.rs", "bin")] {
            let file = dir.join(root);
            if file.is_file() {
                roots.push((format!("{name} ({what})"), file));
            }
        }
    }
    Ok(roots)
}

/// The import loops of every crate of the workspace at `repo`.
pub fn workspace_loops(repo: &Path) -> Result<Vec<Loop>> {
    let mut loops = Vec::new();
    for (name, root) in crate_roots(repo)? {
        let tree = modtree::read_crate(&modtree::Disk, &root)?;
        loops.extend(crate_loops(&name, &tree, repo));
    }
    Ok(loops)
}

/// The import loops of one crate's module tree. File names in the report are relative to
/// `base`.
pub fn crate_loops(krate: &str, tree: &BTreeMap<ModPath, Module>, base: &Path) -> Vec<Loop> {
    // parent module -> (from sibling, to sibling) -> the first reference making that arrow.
    let mut arrows: BTreeMap<ModPath, BTreeMap<(String, String), Arrow>> = BTreeMap::new();
    for (path, module) in tree {
        for r in &module.refs {
            let Some(target) = resolve(tree, path, &r.segments) else {
                continue;
            };
            let common = path.iter().zip(&target).take_while(|(a, b)| a == b).count();
            // The same module, or one is the other's ancestor: one unit.
            if common == path.len() || common == target.len() {
                continue;
            }
            let parent = path[..common].to_vec();
            let key = (path[common].clone(), target[common].clone());
            arrows
                .entry(parent)
                .or_default()
                .entry(key)
                .or_insert_with(|| Arrow {
                    file: module
                        .file
                        .strip_prefix(base)
                        .unwrap_or(&module.file)
                        .to_path_buf(),
                    line: r.line,
                    path: r.segments.join("::"),
                    target: target.clone(),
                });
        }
    }
    let mut loops = Vec::new();
    for (parent, edges) in arrows {
        for cycle in cycles(&edges) {
            let steps = cycle
                .windows(2)
                .map(|w| {
                    let key = (w[0].clone(), w[1].clone());
                    (w[0].clone(), w[1].clone(), edges[&key].clone())
                })
                .collect();
            loops.push(Loop {
                krate: krate.to_owned(),
                parent: parent.clone(),
                steps,
            });
        }
    }
    loops
}

/// One cycle through each strongly connected group of two or more siblings (Tarjan's
/// algorithm finds the groups; a shortest path back to the start gives the cycle), as the
/// list of siblings with the first repeated at the end.
fn cycles(edges: &BTreeMap<(String, String), Arrow>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    let mut groups = Vec::new();
    let mut tarjan = Tarjan {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        counter: 0,
        groups: &mut groups,
    };
    for node in next.keys() {
        if !tarjan.index.contains_key(node) {
            tarjan.connect(node);
        }
    }
    groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .filter_map(|group| {
            let inside: BTreeSet<&str> = group.iter().copied().collect();
            let start = *inside.iter().next()?;
            shortest_way_back(&next, &inside, start)
        })
        .collect()
}

struct Tarjan<'a, 'b> {
    next: &'b BTreeMap<&'a str, Vec<&'a str>>,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    on_stack: BTreeSet<&'a str>,
    counter: usize,
    groups: &'b mut Vec<Vec<&'a str>>,
}

impl<'a> Tarjan<'a, '_> {
    fn connect(&mut self, node: &'a str) {
        self.index.insert(node, self.counter);
        self.low.insert(node, self.counter);
        self.counter += 1;
        self.stack.push(node);
        self.on_stack.insert(node);
        let next = self.next;
        for &to in next.get(node).into_iter().flatten() {
            if !self.index.contains_key(to) {
                self.connect(to);
                let low = self.low[node].min(self.low[to]);
                self.low.insert(node, low);
            } else if self.on_stack.contains(to) {
                let low = self.low[node].min(self.index[to]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == self.index[node] {
            let mut group = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack.remove(top);
                group.push(top);
                if top == node {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}

/// A shortest cycle from `start` back to itself inside `inside` (breadth first).
fn shortest_way_back(
    next: &BTreeMap<&str, Vec<&str>>,
    inside: &BTreeSet<&str>,
    start: &str,
) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut frontier = std::collections::VecDeque::from([start]);
    while let Some(node) = frontier.pop_front() {
        for &to in next.get(node).into_iter().flatten() {
            if !inside.contains(to) {
                continue;
            }
            if to == start {
                let mut way = vec![start.to_owned(), node.to_owned()];
                let mut at = node;
                while at != start {
                    at = came_from[at];
                    way.push(at.to_owned());
                }
                way.reverse();
                return Some(way);
            }
            if !came_from.contains_key(to) {
                came_from.insert(to, node);
                frontier.push_back(to);
            }
        }
    }
    None
}

/// How many `use` hops a name may take before the search gives up (a `use` loop is a
/// compile error anyway).
const MAX_HOPS: usize = 32;

/// The module that defines what `segments`, named in module `from`, refers to: `None` for
/// names from outside the crate (other crates, the prelude, locals).
pub fn resolve(
    tree: &BTreeMap<ModPath, Module>,
    from: &[String],
    segments: &[String],
) -> Option<ModPath> {
    resolve_hops(tree, from, segments, 0)
}

fn resolve_hops(
    tree: &BTreeMap<ModPath, Module>,
    from: &[String],
    segments: &[String],
    hops: usize,
) -> Option<ModPath> {
    if hops > MAX_HOPS {
        return None;
    }
    let (first, rest) = segments.split_first()?;
    let mut base: ModPath = from.to_vec();
    let mut rest = rest;
    match first.as_str() {
        "crate" => base.clear(),
        "self" => {}
        "super" => {
            base.pop();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        _ => {
            let module = tree.get(from)?;
            let local = module.children.contains(first)
                || module.items.contains(first)
                || module.imports.contains_key(first)
                || !module.globs.is_empty();
            if !local {
                return None;
            }
            rest = segments;
        }
    }
    walk(tree, base, rest, false, hops)
}

/// Follows `rest` down from module `at`. `via_glob`: the name came in through a glob import,
/// which sees only the module's public imports.
fn walk(
    tree: &BTreeMap<ModPath, Module>,
    at: ModPath,
    rest: &[String],
    via_glob: bool,
    hops: usize,
) -> Option<ModPath> {
    let Some((name, after)) = rest.split_first() else {
        return Some(at);
    };
    let module = tree.get(&at)?;
    if module.children.contains(name) {
        let mut child = at.clone();
        child.push(name.clone());
        return walk(tree, child, after, false, hops);
    }
    if module.items.contains(name) {
        return Some(at);
    }
    if let Some(import) = module.imports.get(name).filter(|i| i.public || !via_glob) {
        let mut full = import.target.clone();
        full.extend_from_slice(after);
        return resolve_hops(tree, &at, &full, hops + 1);
    }
    module
        .globs
        .iter()
        .filter(|g| g.public || !via_glob)
        .find_map(|glob| {
            // The glob's module, then the name inside it as a glob import sees it.
            let target = resolve_hops(tree, &at, &glob.target, hops + 1)?;
            walk(tree, target, rest, true, hops + 1)
        })
}

/// The report of [`workspace_loops`]: empty when there is none.
pub fn report(loops: &[Loop]) -> String {
    let mut out = String::new();
    for l in loops {
        let _ = write!(out, "{l}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modtree::Sources;

    /// Source files in memory.
    struct Files(BTreeMap<PathBuf, String>);

    impl Sources for Files {
        fn read(&self, path: &Path) -> Option<String> {
            self.0.get(path).cloned()
        }
    }

    fn loops_of(files: &[(&str, &str)]) -> Vec<Loop> {
        let files = Files(
            files
                .iter()
                .map(|(p, text)| (PathBuf::from(p), (*text).to_owned()))
                .collect(),
        );
        let tree = modtree::read_crate(&files, Path::new("src/lib.rs")).expect("reads");
        crate_loops("demo", &tree, Path::new(""))
    }

    fn members(loops: &[Loop]) -> Vec<Vec<String>> {
        loops.iter().map(Loop::members).collect()
    }

    #[test]
    fn a_direct_loop_between_siblings_is_found() {
        let loops = loops_of(&[
            ("src/lib.rs", "mod a; mod b;"),
            ("src/a.rs", "use crate::b::Bee; pub struct Ay;"),
            (
                "src/b.rs",
                "pub struct Bee; fn f() -> super::a::Ay { todo!() }",
            ),
        ]);
        assert_eq!(members(&loops), [["a", "b", "a"]]);
        let text = report(&loops);
        assert!(text.contains("src/a.rs:1 names `crate::b::Bee`"), "{text}");
    }

    #[test]
    fn a_loop_through_a_parents_re_export_is_found() {
        // As engine/topic_access.rs once called `super::error_for`, defined in absent.rs,
        // which used topic_access.rs.
        let loops = loops_of(&[
            ("src/lib.rs", "mod engine;"),
            (
                "src/engine/mod.rs",
                "mod absent; mod access; pub use absent::error_for;",
            ),
            (
                "src/engine/absent.rs",
                "use super::access::deny; pub fn error_for() {}",
            ),
            (
                "src/engine/access.rs",
                "pub fn deny() {} pub fn refusal() { super::error_for() }",
            ),
        ]);
        assert_eq!(members(&loops), [["absent", "access", "absent"]]);
        assert_eq!(loops[0].parent, ["engine"]);
    }

    #[test]
    fn a_loop_across_subtrees_is_lifted_to_the_siblings() {
        let loops = loops_of(&[
            ("src/lib.rs", "mod dashboard; mod session;"),
            ("src/dashboard/mod.rs", "mod api;"),
            (
                "src/dashboard/api.rs",
                "use crate::session::routing::route;",
            ),
            (
                "src/session/mod.rs",
                "pub mod routing; pub struct Settings;",
            ),
            (
                "src/session/routing.rs",
                "pub fn route() { let _ = crate::dashboard::Page; }",
            ),
        ]);
        // `crate::dashboard::Page` is not defined anywhere: no arrow back.
        assert!(loops.is_empty(), "{}", report(&loops));
        let loops = loops_of(&[
            ("src/lib.rs", "mod dashboard; mod session;"),
            ("src/dashboard/mod.rs", "mod api; pub struct Page;"),
            (
                "src/dashboard/api.rs",
                "use crate::session::routing::route;",
            ),
            ("src/session/mod.rs", "pub mod routing;"),
            (
                "src/session/routing.rs",
                "pub fn route() { let _ = crate::dashboard::Page; }",
            ),
        ]);
        assert_eq!(members(&loops), [["dashboard", "session", "dashboard"]]);
    }

    #[test]
    fn parent_and_child_using_each_other_is_no_loop() {
        let loops = loops_of(&[
            ("src/lib.rs", "mod engine; pub struct Config;"),
            (
                "src/engine/mod.rs",
                "mod join; use join::Pending; pub struct Group { p: Pending, c: crate::Config }",
            ),
            (
                "src/engine/join.rs",
                "use super::Group; pub struct Pending; impl Group { fn f(&self) {} }",
            ),
        ]);
        assert!(loops.is_empty(), "{}", report(&loops));
    }

    #[test]
    fn test_code_and_other_crates_are_left_out() {
        let loops = loops_of(&[
            ("src/lib.rs", "mod a; mod b; #[cfg(test)] mod tests;"),
            ("src/a.rs", "use crate::b::Bee; pub struct Ay;"),
            (
                "src/b.rs",
                "pub struct Bee; use other_crate::a::Ay; \
                 #[cfg(test)] fn t() { let _ = super::a::Ay; } \
                 #[cfg(all(unix, test))] use crate::a::Ay as A2;",
            ),
            ("src/tests.rs", "use crate::a::Ay; use crate::b::Bee;"),
        ]);
        assert!(loops.is_empty(), "{}", report(&loops));
    }

    #[test]
    fn paths_inside_macros_and_globs_count() {
        let loops = loops_of(&[
            ("src/lib.rs", "mod a; mod b;"),
            (
                "src/a.rs",
                "use crate::b::*; pub struct Ay; fn f() { g(); }",
            ),
            (
                "src/b.rs",
                "pub fn g() {} fn h() { assert!(matches!(x, crate::a::Ay)); }",
            ),
        ]);
        assert_eq!(members(&loops), [["a", "b", "a"]]);
    }

    #[test]
    fn a_glob_sees_public_imports_only() {
        // As muster-protocol's root: `crate::TopicPartitions` is types.rs's, although
        // insight.rs imports it too (privately) and its glob comes first.
        let files = Files(
            [
                (
                    "src/lib.rs",
                    "mod insight; mod types; pub use insight::*; pub use types::*;",
                ),
                (
                    "src/insight.rs",
                    "use crate::TopicPartitions; pub struct History;",
                ),
                ("src/types.rs", "pub struct TopicPartitions;"),
            ]
            .iter()
            .map(|(p, text)| (PathBuf::from(p), (*text).to_owned()))
            .collect(),
        );
        let tree = modtree::read_crate(&files, Path::new("src/lib.rs")).expect("reads");
        let path = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            resolve(&tree, &path("insight"), &path("crate::TopicPartitions")),
            Some(path("types"))
        );
        assert_eq!(resolve(&tree, &[], &path("History")), Some(path("insight")));
        assert_eq!(resolve(&tree, &[], &path("std::sync::Arc")), None);
    }

    #[test]
    fn a_longer_loop_is_reported_once_in_order() {
        let loops = loops_of(&[
            ("src/lib.rs", "mod a; mod b; mod c;"),
            ("src/a.rs", "pub struct A; use crate::b::B;"),
            ("src/b.rs", "pub struct B; use crate::c::C;"),
            ("src/c.rs", "pub struct C; use crate::a::A;"),
        ]);
        assert_eq!(members(&loops), [["a", "b", "c", "a"]]);
    }

    /// The check itself, on this workspace.
    #[test]
    fn the_workspace_has_no_import_loops() {
        let repo = crate::repo().expect("the workspace root");
        let loops = workspace_loops(&repo).expect("every crate's sources read");
        assert!(
            loops.is_empty(),
            "import loops (see xtask/src/import_loops.rs for what counts):\n{}",
            report(&loops)
        );
    }
}
