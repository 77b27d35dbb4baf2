//! The Python package's step of `cargo xtask test` (python/, docs/clients.md): a virtual
//! environment under the target directory (`python-venv`) with maturin, pytest and mypy from
//! PyPI (installed when missing), the package built and installed into it with pip as a user
//! would (`pip install ./python`, the extension built by maturin in release mode), then its
//! pytest suite against the `musterd` the workspace build made, and `mypy --strict` on the
//! examples against the package's stubs. Any failure fails the step, with the command named.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::{say, tools};

/// What the step installs from PyPI when the environment lacks it.
const TOOLS: &[&str] = &["maturin>=1.5,<2", "pytest>=7", "mypy>=1.5"];

/// Builds and installs the package, and runs its tests and type checks. `target` is Cargo's
/// target directory, `bin_dir` where `musterd` was built.
pub fn test(repo: &Path, target: &Path, bin_dir: &Path) -> Result<()> {
    let venv = target.join("python-venv");
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        say(&format!(
            "  creating the virtual environment {}",
            venv.display()
        ));
        tools::run_checked(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    let has_tools =
        tools::succeeds(Command::new(&python).args(["-c", "import maturin, pytest, mypy"]));
    if !has_tools {
        say(&format!("  installing {} from PyPI", TOOLS.join(", ")));
        tools::run_checked(
            Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--upgrade"])
                .args(TOOLS),
        )?;
    }

    say("  pip install ./python (maturin builds the extension, release mode)");
    // The venv's maturin rather than an isolated build environment (no second download);
    // the extension's build directory stays under the target directory.
    tools::run_checked(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--force-reinstall",
                "--no-deps",
            ])
            .arg("--no-build-isolation")
            .arg(repo.join("python"))
            .env("CARGO_TARGET_DIR", target.join("python"))
            .env("PATH", path_with(&venv.join("bin"))?),
    )?;

    say("  pytest python/tests");
    // Run from the repository root, so that `import muster` finds the installed package and
    // not the sources in python/muster (which lack the extension).
    tools::run_checked(
        Command::new(venv.join("bin").join("pytest"))
            .args(["-q", "-p", "no:cacheprovider"])
            .arg(repo.join("python").join("tests"))
            .env("MUSTER_BIN_DIR", bin_dir)
            .current_dir(repo),
    )?;

    say("  mypy --strict python/examples");
    tools::run_checked(
        Command::new(venv.join("bin").join("mypy"))
            .args(["--strict", "--no-incremental"])
            .arg(repo.join("python").join("examples"))
            .current_dir(repo),
    )?;
    Ok(())
}

/// `PATH` with `dir` first (pip runs `maturin` from it).
fn path_with(dir: &Path) -> Result<std::ffi::OsString> {
    let mut paths: Vec<PathBuf> = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).context("PATH with the virtual environment")
}
