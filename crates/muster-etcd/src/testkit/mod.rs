//! A real etcd for tests: [`EtcdCluster::single`] or [`EtcdCluster::three`] members on free
//! loopback ports, each with a temporary data directory, ready (healthy, with a leader) when
//! returned, and killed when dropped. [`EtcdCluster::secure`] starts one as production runs
//! it: TLS with client certificates (`pki.rs`) and etcd users (`secure.rs`).
//!
//! The binary is `$MUSTER_ETCD_BIN` or `etcd` on `PATH` (Debian: `apt-get install
//! etcd-server`; `.ci/run` installs it). When it is missing, starting a cluster fails with a
//! message saying how to install it, in CI and everywhere else: a test that needs etcd never
//! passes without one.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod pki;
mod secure;

pub use pki::{Issued, Pki, CLIENT_COMMON_NAME};
pub use secure::{SecureOptions, TestUser, ROOT_PASSWORD};

/// How long a cluster may take to elect a leader and answer `/health`.
const READY_DEADLINE: Duration = Duration::from_secs(30);

/// Why a test etcd could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    #[error(
        "etcd is not installed: the cluster-mode tests run a real etcd. Install it \
         (Debian/Ubuntu: `sudo apt-get install etcd-server`; .ci/run does this) or set \
         MUSTER_ETCD_BIN to an etcd v3.4+ binary. Looked for {0}"
    )]
    NotInstalled(String),
    #[error("cannot start etcd: {0}")]
    Start(String),
    #[error("etcd did not become ready within {READY_DEADLINE:?}: {0}")]
    NotReady(String),
}

/// One etcd process.
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// Plain HTTP `/health` (etcd's metrics listener), whatever the client port speaks.
    health_port: u16,
    child: Option<Child>,
    log: PathBuf,
}

/// A running etcd cluster (module docs).
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    /// Set: the client port speaks TLS with these certificates.
    pki: Option<Pki>,
    _dir: tempfile::TempDir,
}

/// The etcd binary to run.
fn etcd_binary() -> Result<PathBuf, TestkitError> {
    find_etcd(
        std::env::var_os("MUSTER_ETCD_BIN"),
        std::env::var_os("PATH").unwrap_or_default(),
    )
}

/// `explicit` (`$MUSTER_ETCD_BIN`) if set, else `etcd` in one of `path`'s directories.
fn find_etcd(explicit: Option<OsString>, path: OsString) -> Result<PathBuf, TestkitError> {
    if let Some(explicit) = explicit {
        let explicit = PathBuf::from(explicit);
        return if explicit.is_file() {
            Ok(explicit)
        } else {
            Err(TestkitError::NotInstalled(format!(
                "MUSTER_ETCD_BIN={}, which is not a file",
                explicit.display()
            )))
        };
    }
    std::env::split_paths(&path)
        .map(|dir| dir.join("etcd"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| TestkitError::NotInstalled("`etcd` on PATH".into()))
}

/// A port nothing listens on right now (etcd binds it a moment later; a race with another
/// process shows as etcd exiting, which [`EtcdCluster::start`] retries).
fn free_port() -> Result<u16, TestkitError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| TestkitError::Start(format!("no free port: {e}")))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| TestkitError::Start(e.to_string()))
}

impl EtcdCluster {
    /// One member.
    pub fn single() -> Result<Self, TestkitError> {
        Self::start(1)
    }

    /// Three members (for "etcd loses a member").
    pub fn three() -> Result<Self, TestkitError> {
        Self::start(3)
    }

    /// `size` members serving TLS with client certificates required, with the users of
    /// `options` and authentication enabled if it has any.
    pub fn secure(size: usize, options: &SecureOptions) -> Result<Self, TestkitError> {
        let cluster = Self::start_with(size, Some(options))?;
        cluster.set_up_auth(options)?;
        Ok(cluster)
    }

    /// The certificates of a secure cluster.
    pub fn pki(&self) -> Option<&Pki> {
        self.pki.as_ref()
    }

    fn start(size: usize) -> Result<Self, TestkitError> {
        Self::start_with(size, None)
    }

    fn start_with(size: usize, secure: Option<&SecureOptions>) -> Result<Self, TestkitError> {
        let binary = etcd_binary()?;
        let mut last = None;
        for _attempt in 0..3 {
            match Self::start_once(&binary, size, secure) {
                Ok(cluster) => return Ok(cluster),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| TestkitError::Start("no attempt made".into())))
    }

    fn start_once(
        binary: &PathBuf,
        size: usize,
        secure: Option<&SecureOptions>,
    ) -> Result<Self, TestkitError> {
        let dir = tempfile::tempdir().map_err(|e| TestkitError::Start(e.to_string()))?;
        let pki = secure.map(|_| Pki::new(dir.path())).transpose()?;
        let mut members = Vec::with_capacity(size);
        for i in 0..size {
            members.push(Member {
                name: format!("m{i}"),
                client_port: free_port()?,
                peer_port: free_port()?,
                health_port: free_port()?,
                child: None,
                log: dir.path().join(format!("m{i}.log")),
            });
        }
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("muster-test-{}", std::process::id());
        let mut cluster = EtcdCluster {
            members,
            pki,
            _dir: dir,
        };
        let scheme = cluster.scheme();
        for member in &mut cluster.members {
            let log = std::fs::File::create(&member.log)
                .map_err(|e| TestkitError::Start(format!("log file: {e}")))?;
            let log_err = log
                .try_clone()
                .map_err(|e| TestkitError::Start(format!("log file: {e}")))?;
            let client = format!("{scheme}://127.0.0.1:{}", member.client_port);
            let peer = format!("http://127.0.0.1:{}", member.peer_port);
            let health = format!("http://127.0.0.1:{}", member.health_port);
            let data = cluster._dir.path().join(&member.name);
            let mut command = Command::new(binary);
            if let (Some(pki), Some(secure)) = (&cluster.pki, secure) {
                command
                    .arg("--cert-file")
                    .arg(&pki.server.cert)
                    .arg("--key-file")
                    .arg(&pki.server.key)
                    .arg("--client-cert-auth")
                    .arg("--trusted-ca-file")
                    .arg(&pki.ca)
                    // Fast password checks: tests authenticate often.
                    .args(["--bcrypt-cost", "4"]);
                if secure.jwt {
                    let (private, public) = pki::jwt_keys(cluster._dir.path())?;
                    let ttl = secure.auth_token_ttl_s.unwrap_or(300);
                    command.arg("--auth-token").arg(format!(
                        "jwt,pub-key={},priv-key={},sign-method=ES256,ttl={ttl}s",
                        public.display(),
                        private.display()
                    ));
                } else if let Some(ttl) = secure.auth_token_ttl_s {
                    command.args(["--auth-token-ttl", &ttl.to_string()]);
                }
            }
            let child = command
                .arg("--name")
                .arg(&member.name)
                .arg("--data-dir")
                .arg(&data)
                .args(["--listen-client-urls", &client])
                .args(["--advertise-client-urls", &client])
                .args(["--listen-peer-urls", &peer])
                .args(["--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &initial_cluster])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", &token])
                .args(["--listen-metrics-urls", &health])
                // Fast elections on loopback: tests wait less for a leader.
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err)
                .spawn()
                .map_err(|e| TestkitError::Start(format!("{}: {e}", binary.display())))?;
            member.child = Some(child);
        }
        cluster.wait_ready()?;
        Ok(cluster)
    }

    /// Polls every member's `/health` until all answer healthy (a leader is elected).
    fn wait_ready(&mut self) -> Result<(), TestkitError> {
        let deadline = Instant::now() + READY_DEADLINE;
        for i in 0..self.members.len() {
            loop {
                let member = &mut self.members[i];
                if let Some(child) = member.child.as_mut() {
                    if let Ok(Some(status)) = child.try_wait() {
                        return Err(TestkitError::Start(format!(
                            "etcd member {} exited ({status}); its log:\n{}",
                            member.name,
                            log_tail(&member.log)
                        )));
                    }
                }
                if healthy(member.health_port) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(TestkitError::NotReady(format!(
                        "member {}'s log:\n{}",
                        member.name,
                        log_tail(&member.log)
                    )));
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        Ok(())
    }

    /// Client URLs of the members still running (`https://` for a secure cluster).
    pub fn endpoints(&self) -> Vec<String> {
        let scheme = self.scheme();
        self.members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| format!("{scheme}://127.0.0.1:{}", m.client_port))
            .collect()
    }

    fn scheme(&self) -> &'static str {
        if self.pki.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Kills member `index` (SIGKILL) and waits for it to exit.
    pub fn kill_member(&mut self, index: usize) {
        if let Some(member) = self.members.get_mut(index) {
            member.kill();
        }
    }
}

impl Member {
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            member.kill();
        }
    }
}

/// Whether etcd on `port` answers `GET /health` with `"health":"true"`.
fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.contains("\"health\":\"true\"")
}

fn log_tail(path: &PathBuf) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::{find_etcd, EtcdCluster, TestkitError};

    #[test]
    fn a_missing_etcd_says_how_to_install_it() {
        let empty = tempfile::tempdir().expect("a temp dir");
        let error = find_etcd(None, empty.path().as_os_str().to_owned())
            .expect_err("no etcd in an empty directory");
        assert!(matches!(error, TestkitError::NotInstalled(_)));
        assert!(
            error.to_string().contains("apt-get install etcd-server"),
            "{error}"
        );
        let error = find_etcd(Some(empty.path().join("etcd").into()), "".into())
            .expect_err("MUSTER_ETCD_BIN names no file");
        assert!(error.to_string().contains("MUSTER_ETCD_BIN"), "{error}");
    }

    #[test]
    fn a_cluster_serves_and_its_processes_end_with_it() {
        let cluster = EtcdCluster::three().expect("etcd starts (see the message to install it)");
        let endpoints = cluster.endpoints();
        assert_eq!(endpoints.len(), 3);
        assert!(cluster
            .members
            .iter()
            .all(|m| super::healthy(m.health_port)));
        let ports: Vec<u16> = cluster.members.iter().map(|m| m.client_port).collect();
        drop(cluster);
        for port in ports {
            assert!(
                std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
                "member on {port} is gone"
            );
        }
    }
}
