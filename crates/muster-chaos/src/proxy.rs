//! The network of a run: every listening endpoint (a node's client port, an etcd member's
//! client and peer ports) is reached through a TCP proxy of the runner's, and the nemesis
//! cuts an *entity* (a node, an etcd member, a worker) by making every proxied connection
//! that it is either end of stop forwarding — in both directions, sockets left open, bytes
//! held, exactly what a partition looks like to TCP — and heals it by letting them flow
//! again (held bytes are delivered late, as after a real partition heals).
//!
//! A connection's destination entity is the proxy's; its source is found when it is
//! accepted, by looking the client's socket up in `/proc/net/tcp` and the registered
//! processes' `/proc/<pid>/fd` (Linux, same user, no root). This is why cuts need no network
//! namespaces: a worker is cut from every node at once, an etcd member from its peers in both
//! directions (a member dials its peers as well as being dialled).

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The cut entities and the processes that connections are attributed to.
#[derive(Debug, Clone)]
pub struct Network {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cut: Mutex<BTreeSet<String>>,
    /// Bumped on every cut and heal; forwarding waits on it.
    changed: watch::Sender<u64>,
    pids: Mutex<HashMap<u32, String>>,
}

impl Default for Network {
    fn default() -> Self {
        Self::new()
    }
}

impl Network {
    pub fn new() -> Self {
        Network {
            inner: Arc::new(Inner {
                cut: Mutex::new(BTreeSet::new()),
                changed: watch::channel(0).0,
                pids: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Connections from process `pid` belong to `entity` from now on.
    pub fn register(&self, pid: u32, entity: &str) {
        lock(&self.inner.pids).insert(pid, entity.to_owned());
    }

    pub fn unregister(&self, pid: u32) {
        lock(&self.inner.pids).remove(&pid);
    }

    pub fn cut(&self, entity: &str) {
        lock(&self.inner.cut).insert(entity.to_owned());
        self.inner.changed.send_modify(|v| *v += 1);
    }

    pub fn heal(&self, entity: &str) {
        lock(&self.inner.cut).remove(entity);
        self.inner.changed.send_modify(|v| *v += 1);
    }

    pub fn heal_all(&self) {
        lock(&self.inner.cut).clear();
        self.inner.changed.send_modify(|v| *v += 1);
    }

    fn is_cut(&self, src: Option<&str>, dst: &str) -> bool {
        let cut = lock(&self.inner.cut);
        cut.contains(dst) || src.is_some_and(|s| cut.contains(s))
    }

    /// Returns once neither end is cut.
    async fn wait_open(&self, rx: &mut watch::Receiver<u64>, src: Option<&str>, dst: &str) {
        loop {
            rx.borrow_and_update();
            if !self.is_cut(src, dst) {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The registered entity whose process holds the client end of a connection accepted
    /// from `peer` on `listen` (module docs); `None` when it is not one of ours.
    fn source_of(&self, peer: SocketAddr, listen: SocketAddr) -> Option<String> {
        let inode = client_inode(peer.port(), listen.port())?;
        let wanted = format!("socket:[{inode}]");
        let pids: Vec<(u32, String)> = lock(&self.inner.pids)
            .iter()
            .map(|(p, e)| (*p, e.clone()))
            .collect();
        pids.into_iter().find_map(|(pid, entity)| {
            let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
            fds.filter_map(Result::ok)
                .any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|target| target.as_os_str() == wanted.as_str())
                })
                .then_some(entity)
        })
    }

    /// Starts a proxy on a free loopback port for the entity `dst` (the process listening
    /// behind it); connections go to [`Proxy::set_target`]'s address.
    pub async fn proxy(&self, dst: &str) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let listen = listener.local_addr()?;
        let target = Arc::new(Mutex::new(None));
        let net = self.clone();
        let dst = dst.to_owned();
        let task_target = Arc::clone(&target);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, peer)) = listener.accept().await else {
                    continue;
                };
                let net = net.clone();
                let dst = dst.clone();
                let target = Arc::clone(&task_target);
                tokio::spawn(async move {
                    let lookup = net.clone();
                    let src = tokio::task::spawn_blocking(move || lookup.source_of(peer, listen))
                        .await
                        .ok()
                        .flatten();
                    let mut rx = net.inner.changed.subscribe();
                    // A cut host does not answer: the connection is held, not refused.
                    net.wait_open(&mut rx, src.as_deref(), &dst).await;
                    let Some(addr) = *lock(&target) else {
                        return;
                    };
                    // A dead process refuses: so does its proxy (the client is dropped).
                    let Ok(server) = TcpStream::connect(addr).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let up = tokio::spawn(pump(cr, sw, net.clone(), src.clone(), dst.clone()));
                    pump(sr, cw, net, src, dst).await;
                    let _ = up.await;
                });
            }
        });
        Ok(Proxy {
            listen,
            target,
            task,
        })
    }
}

/// One proxy (see [`Network::proxy`]); stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    listen: SocketAddr,
    target: Arc<Mutex<Option<SocketAddr>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.listen
    }

    /// Where new connections go (a restarted process may listen elsewhere).
    pub fn set_target(&self, addr: SocketAddr) {
        *lock(&self.target) = Some(addr);
    }

    /// A handle that sets the target from elsewhere (a thread waiting for a restarted
    /// process to report its address).
    pub fn target(&self) -> Target {
        Target(Arc::clone(&self.target))
    }
}

/// See [`Proxy::target`].
#[derive(Debug, Clone)]
pub struct Target(Arc<Mutex<Option<SocketAddr>>>);

impl Target {
    pub fn set(&self, addr: SocketAddr) {
        *lock(&self.0) = Some(addr);
    }

    pub fn get(&self) -> Option<SocketAddr> {
        *lock(&self.0)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Forwards one direction until either side closes, never while an end is cut.
async fn pump(
    mut rd: OwnedReadHalf,
    mut wr: OwnedWriteHalf,
    net: Network,
    src: Option<String>,
    dst: String,
) {
    let mut rx = net.inner.changed.subscribe();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        net.wait_open(&mut rx, src.as_deref(), &dst).await;
        let n = match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Read just before a cut began: held until it heals.
        net.wait_open(&mut rx, src.as_deref(), &dst).await;
        if wr.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    // Not even the close crosses a cut.
    net.wait_open(&mut rx, src.as_deref(), &dst).await;
    let _ = wr.shutdown().await;
}

/// The inode of the socket whose local port is `port` and remote port `remote` (the client
/// end of a loopback connection), from `/proc/net/tcp`.
fn client_inode(port: u16, remote: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    find_inode(&table, port, remote)
}

fn find_inode(table: &str, port: u16, remote: u16) -> Option<u64> {
    let port_of = |field: &str| {
        field
            .rsplit(':')
            .next()
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
    };
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, rem, inode) = (fields.get(1)?, fields.get(2)?, fields.get(9)?);
        (port_of(local)? == port && port_of(rem)? == remote)
            .then(|| inode.parse().ok())
            .flatten()
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_client_socket_is_found_in_the_tcp_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0\n\
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0\n";
        assert_eq!(find_inode(table, 0xC350, 0x1F90), Some(222));
        assert_eq!(find_inode(table, 0x1F90, 0), Some(111));
        assert_eq!(find_inode(table, 1, 2), None);
    }

    #[tokio::test]
    async fn a_cut_holds_bytes_and_a_heal_delivers_them() {
        let echo = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let echo_addr = echo.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let net = Network::new();
        // This test process is the client: registered, it is cut as "me".
        net.register(std::process::id(), "me");
        let proxy = net.proxy("echo").await.expect("proxy");
        proxy.set_target(echo_addr);
        let mut c = TcpStream::connect(proxy.addr()).await.expect("connect");
        let mut buf = [0u8; 4];
        c.write_all(b"ping").await.expect("write");
        c.read_exact(&mut buf).await.expect("echo");
        assert_eq!(&buf, b"ping");

        for entity in ["me", "echo"] {
            net.cut(entity);
            c.write_all(b"pong").await.expect("write");
            let held = tokio::time::timeout(Duration::from_millis(200), c.read(&mut buf)).await;
            assert!(held.is_err(), "nothing crosses a cut of {entity}");
            net.heal(entity);
            tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut buf))
                .await
                .expect("delivered after the heal")
                .expect("read");
            assert_eq!(&buf, b"pong");
        }
        // Unregistered, the client is nobody: cutting "me" no longer touches it.
        net.unregister(std::process::id());
        let mut d = TcpStream::connect(proxy.addr()).await.expect("connect");
        net.cut("me");
        d.write_all(b"abcd").await.expect("write");
        tokio::time::timeout(Duration::from_secs(5), d.read_exact(&mut buf))
            .await
            .expect("not cut")
            .expect("read");
        assert_eq!(&buf, b"abcd");
    }
}
