//! What the chaos crate's tests share: the `musterd` they run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The musterd to run: `$MUSTER_BIN_DIR/musterd` when that is set; otherwise the test's cargo
/// builds it into the test's own target directory and profile (a no-op when up to date), so
/// a test never runs an old server.
pub fn musterd() -> PathBuf {
    if let Some(dir) = std::env::var_os("MUSTER_BIN_DIR") {
        return PathBuf::from(dir).join("musterd");
    }
    let exe = std::env::current_exe().expect("the test knows its own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from <target>/<profile>/deps");
    let target_dir = profile_dir.parent().expect("a target directory");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    // Only what the build needs from cargo's test environment: variables it set for this
    // test would make build scripts that watch them run again.
    let output = Command::new(env!("CARGO"))
        .args([
            "build",
            "--locked",
            "-p",
            "muster-server",
            "--bin",
            "musterd",
        ])
        .args(["--profile", profile, "--target-dir"])
        .arg(target_dir)
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| {
            let k = k.to_string_lossy();
            !(k == "OUT_DIR"
                || k.starts_with("CARGO_MANIFEST_")
                || k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_CRATE_")
                || k.starts_with("CARGO_BIN_")
                || k.starts_with("CARGO_PRIMARY_PACKAGE")
                || k.starts_with("CARGO_TARGET_TMPDIR")
                || k.starts_with("CARGO_RUSTC_CURRENT_DIR"))
        }))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo build musterd failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    profile_dir.join("musterd")
}
