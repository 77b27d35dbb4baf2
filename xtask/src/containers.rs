//! What the container tests need before they start: a Docker engine that answers (started
//! when it is installed but down), and the images they run (deploy/docker/build-image.sh and
//! build-etcd-image.sh, from the dev-profile binaries the tests use anyway), so the first
//! test does not spend minutes making the Debian base images.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

use crate::tools::{as_root, find_program, is_root, run_checked, succeeds};

/// How long a Docker daemon that was just started may take to answer.
const ENGINE_PATIENCE: Duration = Duration::from_secs(60);

/// Makes sure `docker info` succeeds: starts the daemon when it is installed but not
/// answering (`service docker start`, else `dockerd` in the background, logging to
/// `log`). Fails saying what is missing otherwise.
pub fn ensure_engine(log: &Path) -> Result<()> {
    if engine_answers() {
        return Ok(());
    }
    if find_program("dockerd").is_none() {
        bail!(
            "no Docker engine answers (`docker info` fails) and there is no dockerd to start: \
             the container tests need one (Debian package docker.io, or Docker's own packages). \
             Point DOCKER_HOST at one, or run the rest with `cargo xtask test --no-containers` \
             (the container tests then print SKIPPED)"
        );
    }
    crate::say("the Docker engine is down: starting it");
    let service = as_root("service", &[]).map(|mut c| {
        c.args(["docker", "start"]);
        c
    });
    if !service.is_ok_and(|mut c| succeeds(&mut c)) || !wait_for_engine(Duration::from_secs(10)) {
        let out = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut dockerd = as_root("dockerd", &[])?;
        dockerd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("cannot start dockerd")?;
        crate::say(&format!("started dockerd (its log: {})", log.display()));
    }
    if !wait_for_engine(ENGINE_PATIENCE) {
        bail!(
            "the Docker engine did not answer within {} s of being started (its log: {}; in a \
             container it needs --privileged, or mount the host's /var/run/docker.sock)",
            ENGINE_PATIENCE.as_secs(),
            log.display()
        );
    }
    Ok(())
}

fn engine_answers() -> bool {
    succeeds(Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]))
}

fn wait_for_engine(patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    while Instant::now() < deadline {
        if engine_answers() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    engine_answers()
}

/// Builds muster's image and etcd's (their Debian bases once per machine, with debootstrap,
/// which needs root: the scripts run through sudo when this is not root) from the binaries in
/// `bin_dir`. The tests build their own per-checkout tags from the same binaries, which then
/// takes seconds.
pub fn build_images(repo: &Path, bin_dir: &Path) -> Result<()> {
    let bin_dir = bin_dir.to_string_lossy();
    let path = std::env::var("PATH").unwrap_or_default();
    for script in ["build-image.sh", "build-etcd-image.sh"] {
        let script_path = repo.join("deploy/docker").join(script);
        let mut cmd = as_root("sh", &[("MUSTER_BIN_DIR", &bin_dir), ("PATH", &path)])
            .context("the Debian base images are made with debootstrap, which needs root")?;
        cmd.arg(&script_path).current_dir(repo);
        run_checked(&mut cmd)?;
    }
    if !is_root() {
        // The scripts staged their build contexts as root: give them back, or the tests'
        // own run of build-image.sh could not update them.
        let owner = format!("{}:{}", id("-u")?, id("-g")?);
        let mut chown = as_root("chown", &[])?;
        chown
            .args(["-R", &owner])
            .arg(repo.join("target/image"))
            .arg(repo.join("target/image-etcd"));
        run_checked(&mut chown)?;
    }
    Ok(())
}

fn id(flag: &str) -> Result<String> {
    let out = Command::new("id")
        .arg(flag)
        .output()
        .context("cannot run id")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
