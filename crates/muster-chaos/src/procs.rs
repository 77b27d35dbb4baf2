//! The processes of a run: etcd members, `musterd` nodes and worker processes, each started
//! behind its proxy ([`crate::proxy`]), with its output in a log file, and the signals the
//! nemesis sends them. A restarted process keeps its identity (name, data directory,
//! proxy); a restarted worker is a new incarnation with a history of its own.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rustix::process::{kill_process, Pid, Signal};

use crate::proxy::{Network, Proxy};

/// The programs a run starts.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub musterd: PathBuf,
    pub etcd: PathBuf,
    /// This program, started as `muster-chaos worker`.
    pub chaos: PathBuf,
}

impl Binaries {
    /// `musterd` next to this program unless given; etcd from `$MUSTER_ETCD_BIN` or `PATH`.
    pub fn find(musterd: Option<PathBuf>) -> Result<Binaries> {
        let chaos = std::env::current_exe().context("the harness's own path")?;
        let musterd = match musterd {
            Some(m) => m,
            None => chaos.with_file_name("musterd"),
        };
        if !musterd.is_file() {
            bail!(
                "no musterd at {}: build it first (cargo build --release --locked -p \
                 muster-server --bin musterd) or pass --musterd",
                musterd.display()
            );
        }
        let etcd = match std::env::var_os("MUSTER_ETCD_BIN") {
            Some(e) => PathBuf::from(e),
            None => std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("etcd"))
                .find(|p| p.is_file())
                .unwrap_or_default(),
        };
        if !etcd.is_file() {
            bail!(
                "etcd is not installed: the chaos harness runs a real three-member etcd. \
                 Install it (Debian/Ubuntu: `sudo apt-get install etcd-server`; .ci/run does \
                 this) or set MUSTER_ETCD_BIN to an etcd v3.4+ binary"
            );
        }
        Ok(Binaries {
            musterd,
            etcd,
            chaos,
        })
    }
}

/// Sends `signal` to `pid` (an error means the process is gone, which is fine here).
pub fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process(pid, signal);
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One running (or killed) process, whose output goes to a log file.
#[derive(Debug, Default)]
pub struct Running {
    child: Option<Child>,
}

impl Running {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, and reaped. The caller unregisters it from the network.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), Signal::CONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid() {
            signal(pid, sig);
        }
    }

    /// Whether it has exited by itself (reaped if so).
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(_))) | Some(Err(_)) => {
                self.child = None;
                true
            }
            _ => false,
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

fn log_file(path: &Path) -> Result<(File, File)> {
    let f = File::options()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("log {}", path.display()))?;
    let g = f.try_clone()?;
    Ok((f, g))
}

/// One etcd member behind two proxies: its client port (nodes reach it there) and its peer
/// port (what it advertises to the other members, so peer links can be cut too).
#[derive(Debug)]
pub struct EtcdMember {
    pub name: String,
    pub client: Proxy,
    pub peer: Proxy,
    client_port: u16,
    peer_port: u16,
    data: PathBuf,
    log: PathBuf,
    pub proc: Running,
}

impl EtcdMember {
    pub async fn new(net: &Network, name: &str, dir: &Path) -> Result<EtcdMember> {
        let entity = format!("etcd:{name}");
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let client = net.proxy(&entity).await?;
        let peer = net.proxy(&entity).await?;
        client.set_target(SocketAddr::from(([127, 0, 0, 1], client_port)));
        peer.set_target(SocketAddr::from(([127, 0, 0, 1], peer_port)));
        Ok(EtcdMember {
            name: name.to_owned(),
            client,
            peer,
            client_port,
            peer_port,
            data: dir.join(format!("etcd-{name}")),
            log: dir.join(format!("etcd-{name}.log")),
            proc: Running::default(),
        })
    }

    /// `name=http://<peer proxy>` for `--initial-cluster`.
    pub fn cluster_entry(&self) -> String {
        format!("{}=http://{}", self.name, self.peer.addr())
    }

    pub fn entity(&self) -> String {
        format!("etcd:{}", self.name)
    }

    /// Starts (or restarts, on its data directory) the member.
    pub fn start(&mut self, bin: &Path, cluster: &str, net: &Network) -> Result<()> {
        let (out, err) = log_file(&self.log)?;
        let child = Command::new(bin)
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--listen-client-urls")
            .arg(format!("http://127.0.0.1:{}", self.client_port))
            .arg("--advertise-client-urls")
            .arg(format!("http://{}", self.client.addr()))
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{}", self.peer_port))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://{}", self.peer.addr()))
            .args(["--initial-cluster", cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "muster-chaos"])
            // Elections a little slower than etcd's tests use: the machine is busy.
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        net.register(child.id(), &self.entity());
        self.proc.child = Some(child);
        Ok(())
    }

    /// Whether the member answers `/health` healthy on its own port (not through a proxy).
    pub fn healthy(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.client_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.contains("\"health\":\"true\"")
    }
}

/// One `musterd` of the cluster, reached (and advertised) through its proxy.
#[derive(Debug)]
pub struct Node {
    pub id: String,
    pub proxy: Proxy,
    args: Vec<String>,
    dir: PathBuf,
    log: PathBuf,
    pub proc: Running,
}

impl Node {
    pub async fn new(net: &Network, id: &str, dir: &Path, args: Vec<String>) -> Result<Node> {
        Ok(Node {
            id: id.to_owned(),
            proxy: net.proxy(&format!("node:{id}")).await?,
            args,
            dir: dir.join(format!("node-{id}")),
            log: dir.join(format!("node-{id}.log")),
            proc: Running::default(),
        })
    }

    pub fn entity(&self) -> String {
        format!("node:{}", self.id)
    }

    /// Starts (or restarts) the node; returns at once. Its proxy forwards to it once it has
    /// reported its address (a restarted node may first wait out its old registration).
    pub fn start(&mut self, bin: &Path, net: &Network) -> Result<mpsc::Receiver<SocketAddr>> {
        std::fs::create_dir_all(&self.dir)?;
        let mut log = File::options().create(true).append(true).open(&self.log)?;
        let mut child = Command::new(bin)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "off"])
            .arg("--data-dir")
            .arg(&self.dir)
            .arg("--advertise")
            .arg(self.proxy.addr().to_string())
            .args(["--node-id", &self.id])
            .args(&self.args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        net.register(child.id(), &self.entity());
        let stderr = child.stderr.take().context("musterd's stderr")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if !sent && line.contains("musterd listening") {
                    let addr = line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("local_addr="))
                        .and_then(|a| a.parse::<SocketAddr>().ok());
                    if let Some(addr) = addr {
                        sent = tx.send(addr).is_ok();
                    }
                }
            }
        });
        self.proc.child = Some(child);
        Ok(rx)
    }
}

/// One worker process: one member of a group, one incarnation at a time.
#[derive(Debug)]
pub struct Worker {
    pub group: String,
    pub name: String,
    pub protocol: String,
    pub incarnation: u32,
    pub proc: Running,
}

impl Worker {
    pub fn entity(&self) -> String {
        format!("worker:{}/{}", self.group, self.name)
    }

    /// Starts incarnation `self.incarnation` (the caller bumps it for a restart).
    pub fn start(
        &mut self,
        bins: &Binaries,
        args: &[String],
        out: &Path,
        net: &Network,
    ) -> Result<()> {
        let dir = out.join("workers").join(&self.group);
        std::fs::create_dir_all(&dir)?;
        let stem = format!("{}.{}", self.name, self.incarnation);
        let history = dir.join(format!("{stem}.jsonl"));
        let (o, e) = log_file(&out.join("logs").join(format!("{}-{stem}.log", self.group)))?;
        let child = Command::new(&bins.chaos)
            .arg("worker")
            .args(["--group", &self.group, "--name", &self.name])
            .args(["--incarnation", &self.incarnation.to_string()])
            .args(["--protocol", &self.protocol])
            .arg("--history")
            .arg(&history)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(o)
            .stderr(e)
            .spawn()
            .with_context(|| format!("start {}", bins.chaos.display()))?;
        net.register(child.id(), &self.entity());
        self.proc.child = Some(child);
        Ok(())
    }
}
