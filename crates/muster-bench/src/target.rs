//! The server under test: a separately started `musterd` (`--server ADDR`), or a `musterd`
//! child process this run starts (`--spawn`) and kills at the end. Also reads what the server
//! holds: a process's resident memory (for `idle`), a data directory's size on disk (for
//! `commit --compare-history`), and the machine's load average that the figures were taken at.
//!
//! A spawned `musterd` is the real binary, not a server in this process, so that the bench
//! does not compile the server and the memory `idle` reads is the server's alone. It listens
//! on `127.0.0.1:0` and says where in its `musterd listening` log line (`local_addr=…`), the
//! line the server's own process tests read; its data directory is a fresh temporary one.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};

/// The flags a spawned `musterd` gets besides its address and data directory:
/// `--initial-rebalance-delay-ms 0` (with the default 3 s every formation would take 3 s) and
/// `--min-session-timeout-ms 100` (for `expiry`). The same as `run-all.sh` used to give a
/// separately started server.
pub const SPAWN_FLAGS: &[&str] = &[
    "--admin-listen",
    "off",
    "--initial-rebalance-delay-ms",
    "0",
    "--min-session-timeout-ms",
    "100",
];

/// The environment variable naming the `musterd` binary for `--spawn`.
pub const MUSTERD_ENV: &str = "MUSTER_BENCH_MUSTERD";

/// How long a spawned `musterd` may take to report its address (loading an empty data
/// directory takes milliseconds; a busy machine may be slow to start a process).
const STARTUP_LIMIT: Duration = Duration::from_secs(30);

/// Where the load goes.
pub struct Target {
    pub addr: SocketAddr,
    /// The server's process id, when known (for `idle`).
    pub pid: Option<u32>,
    /// The admin (HTTP) listener of a server spawned with [`Target::spawn_with_admin`].
    pub admin: Option<SocketAddr>,
    // A spawned server; killed when the target goes.
    spawned: Option<Spawned>,
    // How to start it again ([`Target::restart`]).
    recipe: Option<Recipe>,
}

/// What a spawned server was started with.
#[derive(Clone)]
struct Recipe {
    musterd: PathBuf,
    log: Option<PathBuf>,
    admin: bool,
    /// Flags after the standard ones (the `security` scenario's auth file and TLS files).
    extra: Vec<std::ffi::OsString>,
}

impl Target {
    /// A `musterd` started by someone else, at `server` (process id `pid`, if given).
    pub fn remote(server: &str, pid: Option<u32>) -> Result<Target> {
        let addr = server
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {server}"))?
            .next()
            .ok_or_else(|| anyhow!("{server} resolves to no address"))?;
        Ok(Target {
            addr,
            pid,
            admin: None,
            spawned: None,
            recipe: None,
        })
    }

    /// Starts the `musterd` binary at `musterd` as a child process on `127.0.0.1:0` with a
    /// temporary data directory and [`SPAWN_FLAGS`]. Its log goes to `log` if given (and is
    /// otherwise read and dropped).
    pub fn spawn(musterd: &Path, log: Option<&Path>) -> Result<Target> {
        Self::start(Recipe {
            musterd: musterd.to_owned(),
            log: log.map(Path::to_owned),
            admin: false,
            extra: Vec::new(),
        })
    }

    /// [`Target::spawn`] with `extra` flags after the standard ones (`join-one`: the consumer
    /// protocol's heartbeat interval).
    pub fn spawn_with(
        musterd: &Path,
        log: Option<&Path>,
        extra: Vec<std::ffi::OsString>,
    ) -> Result<Target> {
        Self::start(Recipe {
            musterd: musterd.to_owned(),
            log: log.map(Path::to_owned),
            admin: false,
            extra,
        })
    }

    /// [`Target::spawn`], but with the admin listener on `127.0.0.1:0` (for `hostile`, which
    /// attacks it too); its address is in [`Target::admin`].
    pub fn spawn_with_admin(musterd: &Path, log: Option<&Path>) -> Result<Target> {
        Self::start(Recipe {
            musterd: musterd.to_owned(),
            log: log.map(Path::to_owned),
            admin: true,
            extra: Vec::new(),
        })
    }

    fn start(recipe: Recipe) -> Result<Target> {
        let spawned = Spawned::start(&recipe, false, None)?;
        Ok(Target {
            addr: spawned.addr,
            pid: Some(spawned.child.id()),
            admin: spawned.admin,
            spawned: Some(spawned),
            recipe: Some(recipe),
        })
    }

    /// Whether this run started the server (and so may kill and restart it).
    pub fn is_spawned(&self) -> bool {
        self.recipe.is_some()
    }

    /// Kills a spawned server and starts a fresh one (new address, new empty data directory;
    /// the log, if any, is appended to). For `hostile`, to go on after an attack brought the
    /// server down.
    pub fn restart(&mut self) -> Result<()> {
        let Some(recipe) = self.recipe.clone() else {
            bail!("only a server this run started can be restarted");
        };
        self.spawned.take();
        self.started(Spawned::start(&recipe, true, None)?);
        Ok(())
    }

    /// Kills a spawned server and starts it again on the same data directory (what it wrote
    /// is loaded), with `extra` flags after the standard ones (replacing any given before).
    pub fn restart_on_same_data(&mut self, extra: Vec<std::ffi::OsString>) -> Result<()> {
        let Some(recipe) = self.recipe.as_mut() else {
            bail!("only a server this run started can be restarted");
        };
        recipe.extra = extra;
        let recipe = recipe.clone();
        let data = self.spawned.as_ref().map(|s| Arc::clone(&s.data));
        // Killed here; the directory stays, held by `data`.
        self.spawned.take();
        self.started(Spawned::start(&recipe, true, data)?);
        Ok(())
    }

    fn started(&mut self, spawned: Spawned) {
        self.addr = spawned.addr;
        self.pid = Some(spawned.child.id());
        self.admin = spawned.admin;
        self.spawned = Some(spawned);
    }

    /// Kills a spawned server and starts a fresh one with `extra` flags after the standard
    /// ones (replacing any given before).
    pub fn restart_with(&mut self, extra: Vec<std::ffi::OsString>) -> Result<()> {
        match self.recipe.as_mut() {
            Some(recipe) => recipe.extra = extra,
            None => bail!("only a server this run started can be restarted"),
        }
        self.restart()
    }

    /// The data directory of a spawned server (`None` for a remote one).
    pub fn data_dir(&self) -> Option<&Path> {
        self.spawned.as_ref().map(|s| s.data.path())
    }

    /// Stops a spawned server (a no-op for a remote one).
    pub fn stop(mut self) {
        self.spawned.take();
    }
}

/// A running child `musterd` and its data directory.
struct Spawned {
    child: Child,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    // Removed after the child is gone (fields drop after `Drop::drop` has run), unless a
    // restart on the same data holds it too.
    data: Arc<tempfile::TempDir>,
}

impl Spawned {
    /// Starts the server on `data`, or on a new temporary directory.
    fn start(
        recipe: &Recipe,
        append: bool,
        data: Option<Arc<tempfile::TempDir>>,
    ) -> Result<Spawned> {
        let musterd = recipe.musterd.as_path();
        let data = match data {
            Some(data) => data,
            None => Arc::new(
                tempfile::Builder::new()
                    .prefix("muster-bench-")
                    .tempdir()
                    .context("cannot create a temporary data directory")?,
            ),
        };
        let log = recipe
            .log
            .as_deref()
            .map(|path| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(path)
                    .with_context(|| format!("cannot create {path:?}"))
            })
            .transpose()?;
        let mut command = Command::new(musterd);
        command
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data.path());
        if recipe.admin {
            // SPAWN_FLAGS without its `--admin-listen off`.
            command.args(["--admin-listen", "127.0.0.1:0"]);
            command.args(SPAWN_FLAGS.iter().skip(2));
        } else {
            command.args(SPAWN_FLAGS);
        }
        command.args(&recipe.extra);
        command
            // The address is read from the text log at INFO (RUST_LOG would win over
            // --log-level).
            .args(["--log-format", "text", "--log-level", "info"])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // Exactly the flags above: no MUSTER_* setting of the caller's environment (a config
        // file, another log format) reaches the server under test.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("MUSTER_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", musterd.display()))?;
        let Some(stderr) = child.stderr.take() else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("no stderr pipe to the spawned musterd");
        };
        let (tx, rx) = mpsc::channel();
        // Reads the log for the address, then keeps draining it (a full pipe would stall the
        // server), into `log` when given.
        std::thread::spawn(move || {
            let mut log = log;
            let mut before = String::new();
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(file) = log.as_mut() {
                    let _ = writeln!(file, "{line}");
                }
                if let Some(sender) = &tx {
                    // The `musterd listening` line; the admin listener's own line, before it,
                    // has a `local_addr=` too.
                    let field = |name: &str| {
                        line.split_whitespace()
                            .find_map(|w| w.strip_prefix(name))
                            .map(str::to_owned)
                    };
                    match field("local_addr=") {
                        Some(addr) if !line.contains("admin listener") => {
                            let _ = sender.send(Ok((addr, field("admin_addr="))));
                            tx = None;
                        }
                        _ => {
                            before.push_str(&line);
                            before.push('\n');
                        }
                    }
                }
            }
            // The log ended before the address: the server exited; say what it said.
            if let Some(sender) = tx {
                let _ = sender.send(Err(before));
            }
        });
        let reported = match rx.recv_timeout(STARTUP_LIMIT) {
            Ok(Ok((addr, admin))) => addr
                .parse::<SocketAddr>()
                .with_context(|| format!("musterd reported an unreadable address {addr:?}"))
                .map(|addr| (addr, admin.and_then(|a| a.parse::<SocketAddr>().ok()))),
            Ok(Err(log)) => Err(anyhow!(
                "musterd exited before listening; its log:\n{}",
                log.trim_end()
            )),
            Err(_) => Err(anyhow!(
                "musterd did not report its address within {STARTUP_LIMIT:?}"
            )),
        };
        match reported {
            Ok((addr, admin)) => Ok(Spawned {
                child,
                addr,
                admin,
                data,
            }),
            Err(e) => {
                // Never leave a server behind.
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `musterd` binary for `--spawn`: `explicit` (`--musterd` or `MUSTER_BENCH_MUSTERD`)
/// when given, else the `musterd` next to this executable (the same target directory: cargo
/// puts both binaries of a build there; a test executable lives one level below, in `deps/`).
pub fn locate_musterd(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_owned());
    }
    let exe = std::env::current_exe().context("cannot find this executable's path")?;
    let name = format!("musterd{}", std::env::consts::EXE_SUFFIX);
    let dir = exe.parent().unwrap_or(Path::new("."));
    let mut candidates = vec![dir.join(&name)];
    if dir.file_name().is_some_and(|d| d == "deps") {
        if let Some(profile_dir) = dir.parent() {
            candidates.push(profile_dir.join(&name));
        }
    }
    candidates
        .iter()
        .find(|path| path.is_file())
        .cloned()
        .ok_or_else(|| {
            anyhow!(
                "no musterd binary at {}: build it (cargo build -p muster-server --bin musterd, \
                 with the same profile) or name it with --musterd PATH or {MUSTERD_ENV}",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        })
}

/// Resident set size of process `pid`, in bytes (`VmRSS` of `/proc/PID/status`).
pub fn rss_bytes(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("VmRSS:") {
            let kib: u64 = rest
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .with_context(|| format!("unreadable VmRSS line {line:?}"))?;
            return Ok(kib * 1024);
        }
    }
    bail!("no VmRSS in {path}")
}

/// What the files under `dir` take on disk: (their sizes added up, the blocks allocated to them
/// added up). A file's size can run ahead of its blocks (a sparse file) or behind them
/// (preallocation); both are given.
pub fn disk_bytes(dir: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut total = (0, 0);
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let meta = entry
            .metadata()
            .with_context(|| format!("cannot stat {}", entry.path().display()))?;
        let (size, allocated) = if meta.is_dir() {
            disk_bytes(&entry.path())?
        } else {
            // st_blocks counts 512-byte units, whatever the file system's block size.
            (meta.len(), meta.blocks() * 512)
        };
        total = (total.0 + size, total.1 + allocated);
    }
    Ok(total)
}

/// The machine's 1-minute load average (`/proc/loadavg`), to say how busy it was.
pub fn load_average() -> Result<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").context("cannot read /proc/loadavg")?;
    text.split_whitespace()
        .next()
        .and_then(|first| first.parse().ok())
        .with_context(|| format!("unreadable /proc/loadavg {text:?}"))
}

/// Whether process `pid` is running: it exists and is not a zombie (a killed child of this
/// process stays a zombie until it is reaped).
pub fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("State:"))
            .is_some_and(|state| !state.trim_start().starts_with(['Z', 'X']))
    })
}
