//! A crate's module tree as its source files declare it, read with `syn`: for each module, the
//! modules it declares, the names it defines, what its `use` declarations bind, and every path
//! its code names. Code compiled only for tests (`#[cfg(test)]` items, such as `mod tests`) is
//! left out: a test may reach anywhere. What the paths resolve to is `import_loops.rs`'s
//! business; this file only reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module's path inside its crate: `["engine", "absent"]`; the crate root is `[]`.
pub type ModPath = Vec<String>;

/// One module of a crate.
#[derive(Debug, Default)]
pub struct Module {
    /// The file that holds it (an inline `mod x { … }` shares its parent's file).
    pub file: PathBuf,
    /// The modules it declares (test-only ones left out).
    pub children: BTreeSet<String>,
    /// The names its items define: functions, types, traits, constants, statics, macros.
    pub items: BTreeSet<String>,
    /// What its module-level `use` declarations bind: a name to the path it stands for.
    pub imports: BTreeMap<String, Import>,
    /// Its glob imports (`use x::*`): the paths whose names it takes in.
    pub globs: Vec<Import>,
    /// Every path its (non-test) code names, `use` declarations included.
    pub refs: Vec<Ref>,
}

/// What one `use` binds (or, for a glob, takes in).
#[derive(Debug, Clone)]
pub struct Import {
    /// The path, as written (`super::answers::join_error`).
    pub target: Vec<String>,
    /// A `pub` (or `pub(…)`) import, seen by glob imports of the module; a private one is seen
    /// only by the module and its descendants.
    pub public: bool,
}

/// A path named in a module's code, as written (`super::answers::join_error`).
#[derive(Debug, Clone)]
pub struct Ref {
    pub segments: Vec<String>,
    /// The line it is on (1-based), for the report.
    pub line: usize,
}

/// Where a crate's source files come from (the disk, or a map in tests).
pub trait Sources {
    fn read(&self, path: &Path) -> Option<String>;
}

/// The source files on disk.
pub struct Disk;

impl Sources for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// Reads the module tree of the crate whose root file is `root` (`src/lib.rs`, `src/main.rs`).
pub fn read_crate(sources: &dyn Sources, root: &Path) -> Result<BTreeMap<ModPath, Module>> {
    let mut tree = BTreeMap::new();
    let dir = root.parent().context("a crate root has a directory")?;
    read_file_module(sources, &mut tree, Vec::new(), root, dir.to_path_buf())?;
    Ok(tree)
}

/// Reads the module `path`, held by `file`, whose child modules' files are under `dir`.
fn read_file_module(
    sources: &dyn Sources,
    tree: &mut BTreeMap<ModPath, Module>,
    path: ModPath,
    file: &Path,
    dir: PathBuf,
) -> Result<()> {
    let text = sources
        .read(file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let parsed =
        syn::parse_file(&text).with_context(|| format!("cannot parse {}", file.display()))?;
    read_items(sources, tree, path, file, &dir, &parsed.items)
}

fn read_items(
    sources: &dyn Sources,
    tree: &mut BTreeMap<ModPath, Module>,
    path: ModPath,
    file: &Path,
    dir: &Path,
    items: &[syn::Item],
) -> Result<()> {
    let mut module = Module {
        file: file.to_path_buf(),
        ..Module::default()
    };
    let mut nested = Vec::new();
    for item in items {
        if test_only(item_attrs(item)) {
            continue;
        }
        if let Some(name) = defined_name(item) {
            module.items.insert(name);
        }
        match item {
            syn::Item::Mod(m) => {
                let name = m.ident.to_string();
                module.children.insert(name.clone());
                nested.push(m);
            }
            syn::Item::Use(u) => {
                let public = !matches!(u.vis, syn::Visibility::Inherited);
                bind(&u.tree, Vec::new(), public, &mut module);
                let mut refs = Refs::default();
                refs.visit_item_use(u);
                module.refs.extend(refs.found);
            }
            other => {
                let mut refs = Refs::default();
                refs.visit_item(other);
                module.refs.extend(refs.found);
            }
        }
    }
    tree.insert(path.clone(), module);
    for m in nested {
        let name = m.ident.to_string();
        let mut child = path.clone();
        child.push(name.clone());
        match &m.content {
            Some((_, items)) => {
                read_items(sources, tree, child, file, &dir.join(&name), items)?;
            }
            None => {
                let (child_file, child_dir) = module_file(sources, m, dir, &name)?;
                read_file_module(sources, tree, child, &child_file, child_dir)?;
            }
        }
    }
    Ok(())
}

/// The file of `mod name;` declared by a module whose children are under `dir`, and the
/// directory of that module's own children.
fn module_file(
    sources: &dyn Sources,
    m: &syn::ItemMod,
    dir: &Path,
    name: &str,
) -> Result<(PathBuf, PathBuf)> {
    if let Some(path) = path_attr(&m.attrs) {
        let file = dir.join(path);
        let child_dir = file.parent().unwrap_or(dir).to_path_buf();
        return Ok((file, child_dir));
    }
    let flat = dir.join(format!("{name}.rs"));
    if sources.read(&flat).is_some() {
        return Ok((flat, dir.join(name)));
    }
    let nested = dir.join(name).join("mod.rs");
    if sources.read(&nested).is_some() {
        return Ok((nested, dir.join(name)));
    }
    bail!("no file for `mod {name};` under {}", dir.display())
}

/// `#[path = "…"]`, if the declaration has one.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Whether these attributes compile the item for tests only: a `cfg` that names `test`
/// other than under `not(…)` (`cfg(test)`, `cfg(all(test, unix))`).
pub fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let syn::Meta::List(list) = &a.meta else {
            return false;
        };
        list.path.is_ident("cfg") && names_test(&list.tokens, false)
    })
}

fn names_test(tokens: &TokenStream, negated: bool) -> bool {
    let mut under_not = false;
    for tree in tokens.clone() {
        match tree {
            TokenTree::Ident(i) if i == "test" && !negated => return true,
            TokenTree::Ident(i) => under_not = i == "not",
            TokenTree::Group(g) => {
                if names_test(&g.stream(), negated || under_not) {
                    return true;
                }
                under_not = false;
            }
            _ => {}
        }
    }
    false
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The name an item defines in its module's namespace, if any (modules are `children`).
fn defined_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::ExternCrate(i) => i.rename.as_ref().map_or(&i.ident, |(_, r)| r),
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Records what a `use` tree binds in `module`. `prefix` is the path above this subtree.
fn bind(tree: &syn::UseTree, mut prefix: Vec<String>, public: bool, module: &mut Module) {
    let import = |target| Import { target, public };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            bind(&p.tree, prefix, public, module);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                // `use a::b::{self}` binds `b`.
                if let Some(last) = prefix.last().cloned() {
                    module.imports.insert(last, import(prefix));
                }
            } else {
                prefix.push(name.clone());
                module.imports.insert(name, import(prefix));
            }
        }
        syn::UseTree::Rename(r) => {
            let alias = r.rename.to_string();
            if r.ident != "self" {
                prefix.push(r.ident.to_string());
            }
            if alias != "_" {
                module.imports.insert(alias, import(prefix));
            }
        }
        syn::UseTree::Glob(_) => module.globs.push(import(prefix)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                bind(t, prefix.clone(), public, module);
            }
        }
    }
}

/// Collects the paths named in code, skipping test-only items inside it.
#[derive(Default)]
struct Refs {
    found: Vec<Ref>,
}

impl Refs {
    fn push(&mut self, segments: Vec<String>, span: proc_macro2::Span) {
        if !segments.is_empty() {
            self.found.push(Ref {
                segments,
                line: span.start().line,
            });
        }
    }

    /// The paths in a macro's tokens, which `syn` leaves unparsed: every run of
    /// `ident (:: ident)*`, inside groups too.
    fn scan(&mut self, tokens: TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut start = None;
        let mut colons = 0;
        for tree in tokens {
            match tree {
                TokenTree::Ident(i) if run.is_empty() || colons == 2 => {
                    start.get_or_insert(i.span());
                    run.push(i.to_string());
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !run.is_empty() && colons < 2 => {
                    colons += 1;
                }
                other => {
                    self.flush(&mut run, &mut start);
                    colons = 0;
                    match other {
                        TokenTree::Group(g) => self.scan(g.stream()),
                        TokenTree::Ident(i) => {
                            start = Some(i.span());
                            run.push(i.to_string());
                        }
                        _ => {}
                    }
                }
            }
        }
        self.flush(&mut run, &mut start);
    }

    fn flush(&mut self, run: &mut Vec<String>, start: &mut Option<proc_macro2::Span>) {
        if let Some(span) = start.take() {
            self.push(std::mem::take(run), span);
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_use_tree(&mut self, tree: &'ast syn::UseTree) {
        // Each leaf of a `use` tree is one path.
        fn leaves(tree: &syn::UseTree, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
            match tree {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    leaves(&p.tree, prefix, out);
                }
                syn::UseTree::Name(n) => {
                    if n.ident != "self" {
                        prefix.push(n.ident.to_string());
                    }
                    out.push(prefix);
                }
                syn::UseTree::Rename(r) => {
                    if r.ident != "self" {
                        prefix.push(r.ident.to_string());
                    }
                    out.push(prefix);
                }
                syn::UseTree::Glob(_) => out.push(prefix),
                syn::UseTree::Group(g) => {
                    for t in &g.items {
                        leaves(t, prefix.clone(), out);
                    }
                }
            }
        }
        let mut paths = Vec::new();
        leaves(tree, Vec::new(), &mut paths);
        let span = syn::spanned::Spanned::span(tree);
        for p in paths {
            self.push(p, span);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // `use ::x` names an external crate.
        if u.leading_colon.is_none() {
            self.visit_use_tree(&u.tree);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let span = path
                .segments
                .first()
                .map_or_else(proc_macro2::Span::call_site, |s| s.ident.span());
            self.push(segments, span);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.scan(mac.tokens.clone());
    }
}
