//! `cargo xtask`: the workspace's own commands (the alias is in .cargo/config.toml).
//!
//! - `cargo xtask test [--no-containers] [-- ARGS]`: every test on a fresh machine. Installs
//!   what the tests run that is missing (etcd, chromium, debootstrap, a Docker CLI and compose
//!   tool, mount, kill) with Debian's packages, starts the Docker engine when it is down,
//!   builds the binaries and the container images, raises the open-files limit, then runs
//!   `cargo test --workspace --locked ARGS` with the container tests required
//!   (`MUSTER_REQUIRE_DOCKER=1`), then the Python package's step (module `python`: build and
//!   install python/ in a virtual environment, pytest, `mypy --strict` on its examples).
//! - `cargo xtask python`: only the Python package's step (and the musterd it runs).
//! - `cargo xtask install TOOL...`: installs the named tools when missing (CI uses it for
//!   protoc and python3).
//! - `cargo xtask layout`: the source layout checks, which `cargo test -p xtask` also runs: no
//!   import loop in any crate (`import_loops.rs` says what counts), and every path
//!   docs/architecture.md names exists (`doc_paths.rs`).

mod containers;
mod doc_paths;
mod import_loops;
mod modtree;
mod python;
mod tools;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "cargo xtask", about = "The Muster workspace's own commands")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Install what the tests need, build what they run, and run every test.
    Test {
        /// Without the container tests: no Docker engine, compose tool or debootstrap is
        /// needed, and each container test prints `SKIPPED` (refused when CI is set).
        #[arg(long)]
        no_containers: bool,
        /// Passed on to `cargo test --workspace --locked` (e.g. `-- --test groups`).
        #[arg(last = true)]
        cargo_args: Vec<String>,
    },
    /// Only the Python package's step of `test` (after building musterd): pip install
    /// ./python in target/python-venv, pytest python/tests, mypy --strict on the examples.
    Python,
    /// Install the named tools when they are missing (Debian packages).
    Install {
        /// Any of: etcd, chromium, mount, kill, docker, compose, debootstrap, protoc, python3.
        #[arg(required = true)]
        tools: Vec<String>,
    },
    /// Check the source layout: no import loop, no stale path in docs/architecture.md.
    Layout {
        /// The checkout to check (default: this one).
        #[arg(long)]
        repo: Option<PathBuf>,
    },
}

/// A step message.
pub fn say(message: &str) {
    eprintln!("xtask: {message}");
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Test {
            no_containers,
            cargo_args,
        } => test(!no_containers, &cargo_args),
        Cmd::Python => python_only(),
        Cmd::Install { tools: names } => {
            let wanted = names
                .iter()
                .map(|n| tools::named(n))
                .collect::<Result<Vec<_>>>()?;
            tools::ensure(&wanted)
        }
        Cmd::Layout { repo: dir } => layout(dir.map_or_else(repo, Ok)?),
    }
}

/// `cargo xtask layout`: both layout checks, every finding listed.
fn layout(repo: PathBuf) -> Result<()> {
    let loops = import_loops::workspace_loops(&repo)?;
    let missing = doc_paths::missing_paths(&repo)?;
    if loops.is_empty() && missing.is_empty() {
        say("no import loop; every path docs/architecture.md names exists");
        return Ok(());
    }
    eprint!("{}", import_loops::report(&loops));
    for path in &missing {
        eprintln!("{}: names `{path}`, which does not exist", doc_paths::DOC);
    }
    bail!(
        "{} import loop(s), {} missing path(s)",
        loops.len(),
        missing.len()
    )
}

/// `cargo xtask python`: musterd, then the Python package's step.
fn python_only() -> Result<()> {
    let repo = repo()?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let needed: Vec<tools::Tool> = ["openssl", "python3", "python3-venv"]
        .iter()
        .map(|n| tools::named(n))
        .collect::<Result<_>>()?;
    tools::ensure(&needed)?;
    say("cargo build --locked -p muster-server --bin musterd");
    tools::run_checked(
        Command::new(&cargo)
            .args([
                "build",
                "--locked",
                "-p",
                "muster-server",
                "--bin",
                "musterd",
            ])
            .current_dir(&repo),
    )?;
    let target = target_dir(&cargo, &repo)?;
    python::test(&repo, &target, &target.join("debug"))
        .context("the Python package's tests failed")?;
    say("the Python package's tests passed");
    Ok(())
}

/// The tools `cargo test --workspace` runs, with or without the container tests.
fn test_tools(containers: bool) -> Vec<tools::Tool> {
    let names: &[&str] = if containers {
        &[
            "make",
            "etcd",
            "chromium",
            "mount",
            "kill",
            "docker",
            "compose",
            "debootstrap",
            "openssl",
            "python3",
            "python3-venv",
        ]
    } else {
        &[
            "make",
            "etcd",
            "chromium",
            "mount",
            "kill",
            "openssl",
            "python3",
            "python3-venv",
        ]
    };
    tools::ALL
        .iter()
        .copied()
        .filter(|t| names.contains(&t.name))
        .collect()
}

fn test(containers: bool, cargo_args: &[String]) -> Result<()> {
    let started = Instant::now();
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    if !containers && ci {
        bail!("--no-containers with CI set: CI runs the container tests, it never skips them");
    }
    let repo = repo()?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let steps = if containers { 6 } else { 5 };
    let mut step = 0;
    let mut next = |what: &str| {
        step += 1;
        say(&format!(
            "[{step}/{steps}] {what} ({:.0} s in)",
            started.elapsed().as_secs_f64()
        ));
    };

    next("the tools the tests run");
    tools::ensure(&test_tools(containers))?;

    next("cargo build --workspace --locked --bins --examples (what the tests spawn)");
    let mut build = Command::new(&cargo);
    build
        .args(["build", "--workspace", "--locked", "--bins", "--examples"])
        .current_dir(&repo);
    tools::run_checked(&mut build)?;
    let target = target_dir(&cargo, &repo)?;
    let bin_dir = target.join("debug");

    if containers {
        next("the Docker engine and the container images");
        containers::ensure_engine(&std::env::temp_dir().join("muster-xtask-dockerd.log"))?;
        containers::build_images(&repo, &bin_dir)?;
    }

    next("the open-files limit (the connection-flood and fd-exhaustion tests)");
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => say(&format!("  open files: {limit}")),
        Err(e) => say(&format!(
            "  cannot raise the open-files limit ({e}); going on"
        )),
    }

    next(&format!(
        "cargo test --workspace --locked {}",
        cargo_args.join(" ")
    ));
    report_disk(&bin_dir);
    let mut test = Command::new(&cargo);
    test.args(["test", "--workspace", "--locked"])
        .args(cargo_args)
        .env("MUSTER_BIN_DIR", &bin_dir)
        .env("MUSTER_REQUIRE_DOCKER", if containers { "1" } else { "0" })
        .current_dir(&repo);
    let status = test.status().context("cannot run cargo test")?;
    if !status.success() {
        report_disk(&bin_dir);
        bail!(
            "cargo test failed ({status}) after {} s",
            started.elapsed().as_secs()
        );
    }

    next("the Python package (python/): pip install, pytest, mypy --strict on the examples");
    python::test(&repo, &target, &bin_dir).context("the Python package's tests failed")?;
    say(&format!(
        "every test passed ({} s)",
        started.elapsed().as_secs()
    ));
    Ok(())
}

/// What the test build needs free where the target directory is: its 60-odd test binaries
/// each link the whole server (about 6 GB in all with the dev profile's line tables).
const TEST_BUILD_BYTES: u64 = 8 << 30;

/// Says how much disk is free under `dir` and warns when it is less than the test build needs
/// (a full disk shows up as a linker's "Bus error", far from its cause).
fn report_disk(dir: &std::path::Path) {
    let Some(free) = tools::free_bytes(dir) else {
        return;
    };
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    if free < TEST_BUILD_BYTES {
        say(&format!(
            "  WARNING: {:.1} GiB free under {}; the test build needs about {:.0} GiB",
            gib(free),
            dir.display(),
            gib(TEST_BUILD_BYTES)
        ));
    } else {
        say(&format!(
            "  disk: {:.1} GiB free under {}",
            gib(free),
            dir.display()
        ));
    }
}

/// The workspace root (this crate's parent directory).
fn repo() -> Result<PathBuf> {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .context("xtask outside the workspace")
}

/// Cargo's target directory for this workspace (honours CARGO_TARGET_DIR and config).
fn target_dir(cargo: &std::ffi::OsStr, repo: &std::path::Path) -> Result<PathBuf> {
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .current_dir(repo)
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata's JSON")?;
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("no target_directory in cargo metadata")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn arguments_after_the_double_dash_go_to_cargo_test() {
        let cli = Cli::try_parse_from(["xtask", "test", "--", "--test", "groups", "--nocapture"])
            .expect("parses");
        match cli.command {
            Cmd::Test {
                no_containers,
                cargo_args,
            } => {
                assert!(!no_containers);
                assert_eq!(cargo_args, ["--test", "groups", "--nocapture"]);
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn without_containers_no_container_tool_is_installed() {
        let with: Vec<_> = test_tools(true).iter().map(|t| t.name).collect();
        let without: Vec<_> = test_tools(false).iter().map(|t| t.name).collect();
        assert!(with.contains(&"debootstrap") && with.contains(&"compose"));
        assert!(without.iter().all(|t| with.contains(t)));
        assert!(!without.contains(&"docker") && !without.contains(&"debootstrap"));
    }
}
