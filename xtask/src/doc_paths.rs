//! The check that docs/architecture.md names only files that exist (`cargo xtask layout`, and
//! the test at the end of this file): the architecture document points readers at files, and a
//! file that moves must take the document with it.
//!
//! The document's convention, which this check reads:
//!
//! - a repository path is written in backticks from the repository root
//!   (`crates/muster-server/src/lib.rs`; a directory ends with `/`, as
//!   `crates/muster-coordinator/src/actors/supervisor/`), and must exist;
//! - a shorter path in backticks (`session/auth.rs`, `tls/`, `index.html`: a span ending in a
//!   source file's extension or in `/`) is read relative to the directories its section (the
//!   text since the last heading) named from the root before it: it must exist under one of
//!   them, under one of their parents inside the repository, or under their `src/`. One that
//!   fits none, such as a file that moved, is reported;
//! - a relative link (`[text](protocol.md)`) must point at a file beside the document.
//!
//! Code blocks (```` ``` ````) are drawings, not read.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// The document checked, from the repository root.
pub const DOC: &str = "docs/architecture.md";

/// Where a repository path starts: the repository's top-level entries that hold files.
const ROOTS: &[&str] = &[
    "crates/", "docs/", "tests/", "xtask/", "deploy/", "fuzz/", ".ci/", ".cargo/",
];

/// What a shorter path ends with: a directory, or a file of one of these kinds.
const SHORT_ENDINGS: &[&str] = &["/", ".rs", ".toml", ".html", ".css", ".js", ".sh", ".proto"];

/// The paths [`DOC`] names that do not exist, each with why it was not found.
pub fn missing_paths(repo: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(repo.join(DOC)).with_context(|| format!("reading {DOC}"))?;
    let doc_dir = repo.join("docs");
    Ok(named_paths(&text)
        .into_iter()
        .filter_map(|named| match named {
            Named::Repo(p) => (!repo.join(&p).exists()).then_some(p),
            Named::Link(p) => (!doc_dir.join(&p).exists()).then(|| format!("{p} (a link)")),
            Named::Short { path, after } => {
                let found = after
                    .iter()
                    .flat_map(|dir| bases(dir))
                    .any(|base| repo.join(base).join(&path).exists());
                (!found).then(|| {
                    format!(
                        "{path} (not under any directory its section names before it: {})",
                        if after.is_empty() {
                            "none".to_owned()
                        } else {
                            after.join(", ")
                        }
                    )
                })
            }
        })
        .collect())
}

/// A path the document names.
#[derive(Debug, PartialEq, Eq)]
enum Named {
    /// In backticks, from the repository root.
    Repo(String),
    /// The target of a relative Markdown link, from the document's directory.
    Link(String),
    /// A shorter path in backticks, and the directories its section named from the root
    /// before it.
    Short { path: String, after: Vec<String> },
}

/// Where a shorter path named after the repository path `named` may be: the directory `named`
/// is (or holds, for a file), its parents below the repository root, and their `src/`.
fn bases(named: &str) -> Vec<PathBuf> {
    let mut dir = PathBuf::from(named);
    if !named.ends_with('/') {
        dir.pop();
    }
    let mut out = Vec::new();
    while !dir.as_os_str().is_empty() {
        out.push(dir.join("src"));
        out.push(dir.clone());
        dir.pop();
    }
    out
}

fn named_paths(text: &str) -> Vec<Named> {
    let mut found = Vec::new();
    let mut in_fence = false;
    // The repository paths the current section named so far.
    let mut section: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if line.starts_with('#') {
            section.clear();
            continue;
        }
        // Backticked spans: the odd pieces between backticks.
        for (i, span) in line.split('`').enumerate() {
            let span = span.trim();
            if i % 2 == 0 || span.is_empty() || span.contains(char::is_whitespace) {
                continue;
            }
            if ROOTS.iter().any(|r| span.starts_with(r)) {
                found.push(Named::Repo(span.to_owned()));
                section.push(span.to_owned());
            } else if SHORT_ENDINGS.iter().any(|e| span.ends_with(e)) && !span.contains("::") {
                found.push(Named::Short {
                    path: span.to_owned(),
                    after: section.clone(),
                });
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split('#').next().unwrap_or_default();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                found.push(Named::Link(target.to_owned()));
            }
            rest = &rest[end..];
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_links_and_shorter_paths_are_read() {
        let text = "\
# One
The engine is `crates/muster-coordinator/src/engine/` (`mod.rs` holds the data).
See [the protocol](protocol.md#6-groups) and [Kafka](https://kafka.apache.org/).
A `GroupState` is no path, nor is `a b.rs`, nor `storage::codec`.
```text
`crates/in/a/fence.rs` is a drawing
```
# Two
`join.rs` is named after a heading, with nothing before it.
";
        let short = |path: &str, after: &[&str]| Named::Short {
            path: path.into(),
            after: after.iter().map(|s| (*s).to_owned()).collect(),
        };
        assert_eq!(
            named_paths(text),
            [
                Named::Repo("crates/muster-coordinator/src/engine/".into()),
                short("mod.rs", &["crates/muster-coordinator/src/engine/"]),
                Named::Link("protocol.md".into()),
                short("join.rs", &[]),
            ]
        );
    }

    #[test]
    fn a_shorter_path_may_sit_under_a_parent_or_its_src() {
        assert_eq!(
            bases("crates/muster-server/src/session/mod.rs"),
            [
                "crates/muster-server/src/session/src",
                "crates/muster-server/src/session",
                "crates/muster-server/src/src",
                "crates/muster-server/src",
                "crates/muster-server/src",
                "crates/muster-server",
                "crates/src",
                "crates",
            ]
            .map(PathBuf::from)
        );
    }

    /// The check itself, on this workspace's document.
    #[test]
    fn every_path_docs_architecture_names_exists() {
        let repo = crate::repo().expect("the workspace root");
        let missing = missing_paths(&repo).expect("the document reads");
        assert!(
            missing.is_empty(),
            "{DOC} names paths that do not exist:\n  {}",
            missing.join("\n  ")
        );
    }
}
