//! Running the containers for real: finding a Docker engine and a compose tool (or saying why
//! the test is skipped), building the images with deploy/docker/build-image.sh (and, for the
//! cluster compose, build-etcd-image.sh) once per test process, and a [`Compose`] project
//! with a unique name that is always taken down (`down -v`) when the test ends, passed or not.
//!
//! A test calls [`engine`] first and returns when it gives `None`: no engine is reachable and
//! the run does not require one. CI (`CI` set) or `MUSTER_REQUIRE_DOCKER=1` turns that into a
//! failure; `MUSTER_REQUIRE_DOCKER=0` skips them even with an engine (but not with `CI` set). Skips are written straight to the terminal (not to the captured test output), so
//! `cargo test` shows them.
//!
//! Services are reached inside their containers (`docker exec`), and the compose files'
//! published ports are set to 0 (any free port), so parallel runs never collide. A container
//! can be cut off its network and put back under the same names ([`Compose::disconnect`]).
//! Works with `docker compose` (v2) and Debian's `docker-compose` (1.29).
#![allow(dead_code)]

pub mod group;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the run asked for no container tests (`MUSTER_REQUIRE_DOCKER=0`, which
/// `cargo xtask test --no-containers` sets): each one then says SKIPPED, even with an engine.
fn refused() -> bool {
    std::env::var("MUSTER_REQUIRE_DOCKER").is_ok_and(|v| v == "0")
}

/// Why this run must have an engine, if it must.
fn required() -> Option<&'static str> {
    if std::env::var("MUSTER_REQUIRE_DOCKER").is_ok_and(|v| v == "1") {
        Some("MUSTER_REQUIRE_DOCKER=1")
    } else if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        Some("CI is set")
    } else {
        None
    }
}

/// A reachable Docker engine and the compose command that drives it.
#[derive(Debug)]
pub struct Engine {
    compose: Vec<String>,
}

/// The engine, or `None` after telling the terminal that `test` is skipped and why. Panics
/// instead when the run requires an engine.
pub fn engine(test: &str) -> Option<&'static Engine> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    let found: Result<&'static Engine, String> = if refused() {
        Err("MUSTER_REQUIRE_DOCKER=0 (cargo xtask test --no-containers)".to_owned())
    } else {
        ENGINE.get_or_init(probe).as_ref().map_err(Clone::clone)
    };
    match found {
        Ok(engine) => Some(engine),
        Err(why) => {
            if let Some(reason) = required() {
                panic!("container test {test} cannot run, and {reason} requires it: {why}");
            }
            // Straight to stderr: libtest captures only the print macros.
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED container test {test}: {why} (CI or MUSTER_REQUIRE_DOCKER=1 make this a failure)"
            );
            None
        }
    }
}

fn probe() -> Result<Engine, String> {
    let info = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .map_err(|e| format!("no docker command ({e})"))?;
    if !info.status.success() {
        return Err(format!(
            "no Docker engine reachable (docker info: {})",
            String::from_utf8_lossy(&info.stderr).trim()
        ));
    }
    let works = |cmd: &[&str]| {
        Command::new(cmd[0])
            .args(&cmd[1..])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let compose: &[&str] = if works(&["docker", "compose", "version"]) {
        &["docker", "compose"]
    } else if works(&["docker-compose", "version"]) {
        &["docker-compose"]
    } else {
        return Err(
            "a Docker engine but no compose tool (docker compose or docker-compose)".into(),
        );
    };
    Ok(Engine {
        compose: compose.iter().map(|s| (*s).to_owned()).collect(),
    })
}

/// Runs `cmd`, panicking with its output when it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `docker ARGS`, which must succeed; its stdout.
pub fn docker(args: &[&str]) -> String {
    stdout(&run(Command::new("docker").args(args)))
}

/// A tag for this checkout: two checkouts on one machine never run each other's images.
fn checkout_tag(name: &str) -> String {
    format!(
        "{name}:test-{:08x}",
        repo()
            .to_string_lossy()
            .bytes()
            .fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b))
                .wrapping_mul(0x0100_0193))
    )
}

/// Runs the build script `script` (under deploy/docker/) with `var` = `tag`; the tag.
fn build(script: &str, var: &str, tag: String) -> Result<String, String> {
    let root = repo();
    let out = Command::new("sh")
        .arg(root.join("deploy/docker").join(script))
        .env(var, &tag)
        .current_dir(&root)
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if out.status.success() {
        Ok(tag)
    } else {
        Err(format!(
            "{script} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The image the tests run, built once per test process by deploy/docker/build-image.sh
/// (quick when `.ci/run` or an earlier run built it). Tagged per checkout.
pub fn image() -> &'static str {
    static IMAGE: OnceLock<Result<String, String>> = OnceLock::new();
    match IMAGE.get_or_init(|| build("build-image.sh", "MUSTER_IMAGE", checkout_tag("muster"))) {
        Ok(tag) => tag,
        Err(e) => panic!("{e}"),
    }
}

/// The etcd image of the cluster compose, built once per test process by
/// deploy/docker/build-etcd-image.sh (quick once its base exists). Tagged per checkout.
pub fn etcd_image() -> &'static str {
    static IMAGE: OnceLock<Result<String, String>> = OnceLock::new();
    let built = IMAGE.get_or_init(|| {
        build(
            "build-etcd-image.sh",
            "MUSTER_ETCD_IMAGE",
            checkout_tag("muster-etcd"),
        )
    });
    match built {
        Ok(tag) => tag,
        Err(e) => panic!("{e}"),
    }
}

/// Polls `probe` every 250 ms until it gives a value; panics after `timeout` with what it
/// last said.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let started = Instant::now();
    let deadline = started + timeout;
    loop {
        match probe() {
            Ok(v) => {
                eprintln!("{what}: after {:.1?}", started.elapsed());
                return v;
            }
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// One compose project under a unique name, taken down with its volumes on drop.
pub struct Compose {
    engine: &'static Engine,
    project: String,
    dir: PathBuf,
    files: Vec<PathBuf>,
    env: Vec<(String, String)>,
    down: bool,
}

impl Compose {
    /// The project of compose file `file` (its directory is the project directory, where
    /// `.env` and relative paths are read), running `image` with every port published on an
    /// ephemeral 127.0.0.1 port.
    pub fn new(engine: &'static Engine, file: &Path, image: &str) -> Self {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let project = format!(
            "muster-test-{}-{}-{nanos:x}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = file
            .parent()
            .expect("the compose file's directory")
            .to_owned();
        let env = [
            ("MUSTER_IMAGE", image),
            ("MUSTER_PUBLISH", "127.0.0.1"),
            ("MUSTER_PORT", "0"),
            ("MUSTER_ADMIN_PORT", "0"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        Compose {
            engine,
            project,
            dir,
            files: vec![file.to_owned()],
            env,
            down: false,
        }
    }

    /// Adds an override file (`-f`), merged over the ones before as compose merges them.
    pub fn with_file(mut self, file: &Path) -> Self {
        self.files.push(file.to_owned());
        self
    }

    /// Sets `key` in the environment compose reads the file with (`${KEY}` substitutions).
    pub fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn project(&self) -> &str {
        &self.project
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.engine.compose[0]);
        cmd.args(&self.engine.compose[1..])
            .arg("-p")
            .arg(&self.project);
        for file in &self.files {
            cmd.arg("-f").arg(file);
        }
        cmd.args(args)
            .current_dir(&self.dir)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// `compose ARGS`, which must succeed; its stdout.
    pub fn compose(&self, args: &[&str]) -> String {
        let started = Instant::now();
        let out = stdout(&run(&mut self.command(args)));
        eprintln!("compose {}: {:.1?}", args.join(" "), started.elapsed());
        out
    }

    /// `up -d`: returns once musterd is healthy and the workers started (they depend on it).
    pub fn up(&self) {
        self.compose(&["up", "-d"]);
    }

    /// The container of `service` (one replica).
    pub fn container(&self, service: &str) -> String {
        let id = self.compose(&["ps", "-q", service]);
        assert!(!id.is_empty(), "{service} has a container");
        id
    }

    /// `docker exec` in `service`'s container with `env`; the output, failed or not.
    pub fn exec(&self, service: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut cmd = Command::new("docker");
        cmd.arg("exec");
        for (k, v) in env {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.arg(self.container(service)).args(args);
        cmd.output().expect("docker exec runs")
    }

    /// The health of `service`'s container: starting, healthy or unhealthy.
    pub fn health(&self, service: &str) -> String {
        docker(&[
            "inspect",
            "-f",
            "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}",
            &self.container(service),
        ])
    }

    pub fn wait_healthy(&self, service: &str, timeout: Duration) {
        wait_for(&format!("{service} healthy"), timeout, || {
            match self.health(service).as_str() {
                "healthy" => Ok(()),
                other => Err(other.to_owned()),
            }
        });
    }

    /// The networks `service`'s container is on.
    pub fn networks(&self, service: &str) -> Vec<String> {
        docker(&[
            "inspect",
            "-f",
            "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}",
            &self.container(service),
        ])
        .split_whitespace()
        .map(str::to_owned)
        .collect()
    }

    /// Cuts `service`'s container off its one network (`docker network disconnect`). What
    /// [`Compose::reconnect`] needs to put it back as it was.
    pub fn disconnect(&self, service: &str) -> Cut {
        let container = self.container(service);
        let networks: Value = serde_json::from_str(&docker(&[
            "inspect",
            "-f",
            "{{json .NetworkSettings.Networks}}",
            &container,
        ]))
        .expect("docker inspect's networks are JSON");
        let (network, settings) = networks
            .as_object()
            .and_then(|n| n.iter().next())
            .unwrap_or_else(|| panic!("{service} is on no network: {networks}"));
        // Compose's aliases (the service name the others resolve): a plain `network connect`
        // would not give them back. Docker adds the short container id itself.
        let aliases = settings["Aliases"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|a| !container.starts_with(a))
            .map(str::to_owned)
            .collect();
        docker(&["network", "disconnect", network, &container]);
        Cut {
            container,
            network: network.clone(),
            aliases,
        }
    }

    /// Puts a container cut off by [`Compose::disconnect`] back on its network, under the
    /// same names.
    pub fn reconnect(&self, cut: Cut) {
        let mut args = vec!["network", "connect"];
        for alias in &cut.aliases {
            args.extend(["--alias", alias]);
        }
        args.extend([cut.network.as_str(), cut.container.as_str()]);
        docker(&args);
    }

    /// Whether `service`'s container is running.
    pub fn running(&self, service: &str) -> bool {
        docker(&[
            "inspect",
            "-f",
            "{{.State.Running}}",
            &self.container(service),
        ]) == "true"
    }

    /// The last lines `service` logged, for a failure message.
    pub fn logs(&self, service: &str) -> String {
        self.logs_tail(service, "40")
    }

    /// The last `lines` lines `service` logged ("all": everything).
    pub fn logs_tail(&self, service: &str, lines: &str) -> String {
        let out = self
            .command(&["logs", "--no-color", "--tail", lines, service])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        out.unwrap_or_default()
    }

    /// What docker still holds of this project: containers, volumes, networks.
    pub fn leftovers(&self) -> Vec<String> {
        let label = format!("label=com.docker.compose.project={}", self.project);
        ["ps -a", "volume ls", "network ls"]
            .iter()
            .flat_map(|what| {
                let mut args: Vec<&str> = what.split(' ').collect();
                args.extend(["-q", "--filter", &label]);
                docker(&args)
                    .lines()
                    .map(|id| format!("{what}: {id}"))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// `down -v`: containers, network and volumes go.
    pub fn down(&mut self) {
        self.down = true;
        self.compose(&["down", "-v", "--remove-orphans", "--timeout", "5"]);
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        if !self.down {
            let _ = self
                .command(&["down", "-v", "--remove-orphans", "--timeout", "5"])
                .output();
        }
    }
}

/// A container cut off its network by [`Compose::disconnect`].
#[derive(Debug)]
pub struct Cut {
    container: String,
    network: String,
    aliases: Vec<String>,
}

/// Parses a command's JSON output, or says what it printed instead.
pub fn json(out: &Output) -> Result<Value, String> {
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{e}: {}", stdout(out)))
}
