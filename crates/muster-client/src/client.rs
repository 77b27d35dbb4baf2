//! The client's way into Muster, one `musterd` or a cluster of them: a **bootstrap list** (the
//! addresses of some nodes; one is enough), the connection settings every node's connection
//! uses, the connections opened so far (one per node address), and finding which node
//! coordinates a group (FindCoordinator, protocol §6.19).
//!
//! # Finding a group's coordinator
//!
//! [`Client::find_coordinator`] asks the bootstrap nodes in turn (the one that answered last
//! time first) until one answers: a node that cannot be reached, or stays silent, is skipped,
//! and the next round starts after it (a caller whose deadline ends while the first node is
//! still being waited for would otherwise never get past it).
//! An answer from the cluster ends the round, whether it names a node or is an error
//! (`COORDINATOR_NOT_AVAILABLE` while a shard has no owner, `INVALID_GROUP_ID`): the caller
//! backs off and asks again, or gives up.
//!
//! # Which connection reaches the node named
//!
//! A node is named by the address it *advertises*, which is not always the address a client
//! used to reach it (a single `musterd` listening on `0.0.0.0` advertises its host name, one in
//! a container its container name). The named node's connection is, in this order:
//!
//! 1. the connection that asked, when the advertised address is the address it was opened
//!    with, or the socket address it is connected to;
//! 2. the connection already open to that advertised address;
//! 3. the connection that asked, when the node that answered describes its cluster
//!    (DescribeCluster) as that one node alone: a single node coordinates every group,
//!    whatever it advertises. The advertised address is then remembered as this connection's,
//!    so the question is asked once;
//! 4. a new connection to the advertised address.
//!
//! So a single address works against a single `musterd` exactly as before, and each address
//! of a bootstrap list should reach one node (not a load balancer over several).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use muster_protocol::{DescribeClusterRequest, FindCoordinatorRequest, Request, Response};
use tracing::debug;

use crate::cluster::{self, Cluster, Node};
use crate::connection::{Connection, ConnectionConfig, SILENT_SOCKET};
use crate::error::{ClientError, ErrorCodeExt};

/// At most this many node connections are kept (bootstrap nodes always are): a bound on what
/// a misbehaving cluster can make the client hold.
const MAX_NODE_CONNECTIONS: usize = 1024;

/// What a [`Client`] is made from: the bootstrap list and the settings of every connection.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `HOST:PORT` of some of the cluster's nodes, tried in this order. One is enough; more
    /// keep the client working while some are down.
    pub bootstrap: Vec<String>,
    /// Settings of every connection the client opens (client id, token, TLS, timeouts); its
    /// `addr` is replaced by each node's address.
    pub connection: ConnectionConfig,
}

impl ClientConfig {
    /// A client of the nodes at `bootstrap`, with [`ConnectionConfig`]'s defaults.
    pub fn new<S: Into<String>>(bootstrap: impl IntoIterator<Item = S>) -> Self {
        let bootstrap: Vec<String> = bootstrap.into_iter().map(Into::into).collect();
        let first = bootstrap.first().cloned().unwrap_or_default();
        ClientConfig {
            bootstrap,
            connection: ConnectionConfig::new(first),
        }
    }

    /// A bootstrap list written `HOST:PORT,HOST:PORT,…` (spaces around commas allowed).
    pub fn parse_list(list: &str) -> Vec<String> {
        list.split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Changes the connection settings, e.g. `.configure(|c| c.client_id("billing"))`.
    pub fn configure(mut self, change: impl FnOnce(ConnectionConfig) -> ConnectionConfig) -> Self {
        self.connection = change(self.connection);
        self
    }

    fn validate(&self) -> Result<(), ClientError> {
        if self.bootstrap.is_empty() {
            return Err(ClientError::Config("the bootstrap list is empty".into()));
        }
        if let Some(bad) = self.bootstrap.iter().find(|a| a.trim().is_empty()) {
            return Err(ClientError::Config(format!(
                "an empty address in the bootstrap list: {bad:?}"
            )));
        }
        Ok(())
    }
}

impl From<ConnectionConfig> for ClientConfig {
    /// A bootstrap list of the one address `config.addr`.
    fn from(config: ConnectionConfig) -> Self {
        ClientConfig {
            bootstrap: vec![config.addr.clone()],
            connection: config,
        }
    }
}

/// A client of a Muster cluster (or of a single `musterd`): shared by cloning.
///
/// Made with [`Client::connect`], or from an open [`Connection`] (its address is then the
/// bootstrap list). [`crate::MemberConfig::start`] and [`crate::Admin::new`] take either.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    bootstrap: Vec<String>,
    template: ConnectionConfig,
    /// The connection `connect` opened (or the one the client was made from).
    primary: Connection,
    /// Open connections by address (advertised addresses included, see the module docs).
    nodes: Mutex<HashMap<String, Connection>>,
    /// The index in `bootstrap` of the node that answered last: asked first.
    preferred: AtomicUsize,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A map of connections stays consistent across a panic (single inserts and removes).
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("bootstrap", &self.inner.bootstrap)
            .field("client_id", &self.inner.template.client_id)
            .field("nodes", &lock(&self.inner.nodes).len())
            .finish()
    }
}

impl From<Connection> for Client {
    fn from(connection: Connection) -> Self {
        let addr = connection.config().addr.clone();
        let template = connection.config().clone();
        let nodes = HashMap::from([(addr.clone(), connection.clone())]);
        Client {
            inner: Arc::new(Inner {
                bootstrap: vec![addr],
                template,
                primary: connection,
                nodes: Mutex::new(nodes),
                preferred: AtomicUsize::new(0),
            }),
        }
    }
}

impl Client {
    /// Connects to the first bootstrap node that can be reached (and says `Hello`). Fails
    /// when none can, with the last node's error, or at once when a node refuses the client
    /// (TLS, authentication: the others would too).
    pub async fn connect(config: ClientConfig) -> Result<Client, ClientError> {
        config.validate()?;
        let mut last = None;
        for (index, addr) in config.bootstrap.iter().enumerate() {
            let mut settings = config.connection.clone();
            settings.addr = addr.clone();
            match Connection::connect(settings).await {
                Ok(primary) => {
                    let nodes = HashMap::from([(addr.clone(), primary.clone())]);
                    return Ok(Client {
                        inner: Arc::new(Inner {
                            bootstrap: config.bootstrap.clone(),
                            template: config.connection,
                            primary,
                            nodes: Mutex::new(nodes),
                            preferred: AtomicUsize::new(index),
                        }),
                    });
                }
                Err(err) if err.is_transport() => {
                    debug!(%addr, error = %err, "bootstrap node unreachable; trying the next");
                    last = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or(ClientError::Disconnected))
    }

    /// The bootstrap list.
    pub fn bootstrap(&self) -> &[String] {
        &self.inner.bootstrap
    }

    /// The settings of every connection (`addr` aside).
    pub fn connection_config(&self) -> &ConnectionConfig {
        &self.inner.template
    }

    /// The connection [`Client::connect`] opened (or the client was made from).
    pub fn primary(&self) -> &Connection {
        &self.inner.primary
    }

    /// How long one bootstrap node may take to answer a lookup before the next is asked: long
    /// enough for the silent-socket rule to retire a dead link.
    fn lookup_timeout(&self) -> Duration {
        self.inner.template.request_timeout.min(SILENT_SOCKET)
    }

    /// The connection to `addr`: the open one, or a new one (connect + `Hello`, one attempt).
    pub async fn connection_to(&self, addr: &str) -> Result<Connection, ClientError> {
        if let Some(open) = lock(&self.inner.nodes).get(addr) {
            return Ok(open.clone());
        }
        let mut settings = self.inner.template.clone();
        settings.addr = addr.to_owned();
        let connection = Connection::connect(settings).await?;
        Ok(self.remember(addr, connection))
    }

    /// Keeps `connection` as the one to `addr` (or returns the one another caller kept first).
    fn remember(&self, addr: &str, connection: Connection) -> Connection {
        let mut nodes = lock(&self.inner.nodes);
        if let Some(open) = nodes.get(addr) {
            return open.clone();
        }
        if nodes.len() >= MAX_NODE_CONNECTIONS {
            let spare = nodes
                .keys()
                .find(|a| !self.inner.bootstrap.contains(a))
                .cloned();
            if let Some(spare) = spare {
                nodes.remove(&spare);
            }
        }
        nodes.insert(addr.to_owned(), connection.clone());
        connection
    }

    /// The bootstrap nodes in the order to ask them: the last to answer first.
    fn bootstrap_order(&self) -> impl Iterator<Item = (usize, &str)> {
        let n = self.inner.bootstrap.len();
        let start = self.inner.preferred.load(Ordering::Relaxed) % n.max(1);
        (0..n).map(move |i| {
            let index = (start + i) % n;
            (index, self.inner.bootstrap[index].as_str())
        })
    }

    /// The bootstrap node at `index` did not answer: if it was the one asked first, the next
    /// round starts with the one after it. (A caller whose deadline runs out while the first
    /// node is still being waited for would otherwise ask that node first for ever.)
    fn passed_over(&self, index: usize) {
        let n = self.inner.bootstrap.len().max(1);
        let _ = self.inner.preferred.compare_exchange(
            index,
            (index + 1) % n,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Sends `request` to the bootstrap nodes in turn until one answers; the answer (even an
    /// error code) is returned. For requests any node answers: topics, the cluster, lookups.
    pub async fn send_any(
        &self,
        request: impl Into<Request>,
    ) -> Result<(Response, Connection), ClientError> {
        let request = request.into();
        let mut last = None;
        for (index, addr) in self.bootstrap_order() {
            let connection = match self.connection_to(addr).await {
                Ok(connection) => connection,
                Err(err) if err.is_transport() => {
                    self.passed_over(index);
                    last = Some(err);
                    continue;
                }
                Err(err) => return Err(err),
            };
            let timeout = self.inner.template.request_timeout;
            match connection.send_once(request.clone(), timeout).await {
                Err(err) if err.is_transport() => {
                    debug!(%addr, error = %err, "bootstrap node did not answer; trying the next");
                    self.passed_over(index);
                    last = Some(err);
                }
                answer => {
                    self.inner.preferred.store(index, Ordering::Relaxed);
                    return answer.map(|response| (response, connection));
                }
            }
        }
        Err(last.unwrap_or(ClientError::Disconnected))
    }

    /// The node that coordinates `group_id` and a connection to it (module docs): one round
    /// over the bootstrap nodes. `COORDINATOR_NOT_AVAILABLE` (no owner at the moment) is
    /// returned as the error: back off and ask again.
    pub async fn find_coordinator(
        &self,
        group_id: &str,
    ) -> Result<(Node, Connection), ClientError> {
        self.find_coordinator_avoiding(group_id, None).await
    }

    /// As [`Client::find_coordinator`], asking the node at `lost` (the coordinator that just
    /// went silent or away) last: a stopped node's socket accepts and then says nothing, and
    /// asking it first would spend a whole lookup timeout of the member's session.
    pub(crate) async fn find_coordinator_avoiding(
        &self,
        group_id: &str,
        lost: Option<&str>,
    ) -> Result<(Node, Connection), ClientError> {
        let request = FindCoordinatorRequest {
            key: group_id.to_owned(),
        };
        let mut last = None;
        let is_lost = |addr: &str| {
            lost.is_some_and(|lost| {
                addr == lost
                    || lock(&self.inner.nodes)
                        .get(addr)
                        .is_some_and(|open| same_socket(lost, open))
            })
        };
        let (healthy, suspect): (Vec<_>, Vec<_>) =
            self.bootstrap_order().partition(|(_, addr)| !is_lost(addr));
        for (index, addr) in healthy.into_iter().chain(suspect) {
            let asked = match self.connection_to(addr).await {
                Ok(connection) => connection,
                Err(err) if err.is_transport() => {
                    debug!(%addr, error = %err, "bootstrap node unreachable; trying the next");
                    self.passed_over(index);
                    last = Some(err);
                    continue;
                }
                Err(err) => return Err(err),
            };
            let answer = asked
                .send_once(request.clone(), self.lookup_timeout())
                .await
                .and_then(|r| cluster::parse_find_coordinator(group_id, r));
            match answer {
                Ok(node) => {
                    self.inner.preferred.store(index, Ordering::Relaxed);
                    let connection = self.node_connection(&node, addr, &asked, None).await?;
                    return Ok((node, connection));
                }
                Err(err) if err.is_transport() => {
                    debug!(%addr, error = %err, "no FindCoordinator answer; trying the next");
                    self.passed_over(index);
                    last = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or(ClientError::Disconnected))
    }

    /// The cluster as a bootstrap node describes it, and the connection that asked.
    pub async fn describe_cluster(&self) -> Result<(Cluster, Connection), ClientError> {
        let (response, asked) = self.send_any(DescribeClusterRequest {}).await?;
        Ok((cluster::parse_describe_cluster(response)?, asked))
    }

    /// The connection to `node`, which the node behind `asked` (opened to `asked_addr`) named
    /// (module docs). `alone`: whether that node is known to be a cluster of one (`None`: ask
    /// it, if it comes to that).
    pub(crate) async fn node_connection(
        &self,
        node: &Node,
        asked_addr: &str,
        asked: &Connection,
        alone: Option<bool>,
    ) -> Result<Connection, ClientError> {
        let addr = node.address();
        if addr == asked_addr || same_socket(&addr, asked) {
            return Ok(asked.clone());
        }
        if let Some(open) = lock(&self.inner.nodes).get(&addr) {
            return Ok(open.clone());
        }
        let alone = match alone {
            Some(alone) => alone,
            None => self.is_single_node(node, asked).await,
        };
        if alone {
            debug!(node = %node, via = %asked_addr, "a single node: keeping the connection that asked");
            return Ok(self.remember(&addr, asked.clone()));
        }
        self.connection_to(&addr).await
    }

    /// Whether the node behind `asked` describes its cluster as `node` alone.
    async fn is_single_node(&self, node: &Node, asked: &Connection) -> bool {
        let described = asked
            .send_once(DescribeClusterRequest {}, self.lookup_timeout())
            .await
            .and_then(cluster::parse_describe_cluster);
        // No answer says nothing either way: try the advertised address.
        described.is_ok_and(|cluster| {
            matches!(cluster.nodes.as_slice(), [only] if only.node.node_id == node.node_id)
        })
    }
}

/// Whether `addr` is an IP socket address equal to the one `connection` is connected to.
fn same_socket(addr: &str, connection: &Connection) -> bool {
    match (addr.parse::<SocketAddr>(), connection.peer_addr()) {
        (Ok(addr), Some(peer)) => addr == peer,
        _ => false,
    }
}

/// Whether a group request's outcome means its node is not (or no longer) the group's
/// coordinator, or cannot be reached: then the coordinator is found again and the request
/// resent there. A `Response` counts by its top-level `error_code`.
pub(crate) fn coordinator_lost(result: &Result<Response, ClientError>) -> bool {
    match result {
        Err(err) => {
            err.is_transport() || err.error_code().is_some_and(|c| c.is_coordinator_error())
        }
        Ok(response) => group_error_code(response)
            .and_then(muster_protocol::ErrorCode::from_code)
            .is_some_and(|c| c.is_coordinator_error()),
    }
}

/// The top-level error code of a group request's answer.
fn group_error_code(response: &Response) -> Option<i16> {
    Some(match response {
        Response::JoinGroup(r) => r.error_code,
        Response::SyncGroup(r) => r.error_code,
        Response::Heartbeat(r) => r.error_code,
        Response::LeaveGroup(r) => r.error_code,
        Response::OffsetCommit(r) => r.error_code,
        Response::OffsetFetch(r) => r.error_code,
        Response::GroupHistory(r) => r.error_code,
        Response::GroupDiagnosis(r) => r.error_code,
        Response::OwnershipEpochs(r) => r.error_code,
        Response::OffsetHistory(r) => r.error_code,
        Response::OffsetReset(r) => r.error_code,
        Response::OffsetRestore(r) => r.error_code,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::{ErrorCode, HeartbeatResponse, OffsetCommitResponse};

    #[test]
    fn bootstrap_lists_parse_and_validate() {
        assert_eq!(
            ClientConfig::parse_list(" a:1, b:2 ,,c:3"),
            ["a:1", "b:2", "c:3"]
        );
        let config = ClientConfig::new(["a:1", "b:2"]).configure(|c| c.client_id("x"));
        assert_eq!(config.connection.addr, "a:1");
        assert_eq!(config.connection.client_id, "x");
        assert!(config.validate().is_ok());
        assert!(ClientConfig::new(Vec::<String>::new()).validate().is_err());
        assert!(ClientConfig::new(["a:1", " "]).validate().is_err());
        let single = ClientConfig::from(ConnectionConfig::new("h:7450"));
        assert_eq!(single.bootstrap, ["h:7450"]);
    }

    #[test]
    fn coordinator_errors_and_transport_failures_move_the_route() {
        let heartbeat = |code: ErrorCode| {
            Ok(Response::Heartbeat(HeartbeatResponse {
                error_code: code.code(),
            }))
        };
        assert!(coordinator_lost(&heartbeat(ErrorCode::NotCoordinator)));
        assert!(coordinator_lost(&heartbeat(
            ErrorCode::CoordinatorLoadInProgress
        )));
        assert!(!coordinator_lost(&heartbeat(ErrorCode::None)));
        assert!(!coordinator_lost(&heartbeat(
            ErrorCode::RebalanceInProgress
        )));
        assert!(!coordinator_lost(&heartbeat(ErrorCode::UnknownMemberId)));
        let commit = Ok(Response::OffsetCommit(OffsetCommitResponse {
            error_code: ErrorCode::CoordinatorNotAvailable.code(),
            topics: vec![],
        }));
        assert!(coordinator_lost(&commit));
        assert!(coordinator_lost(&Err(ClientError::Disconnected)));
        assert!(coordinator_lost(&Err(ClientError::protocol(
            16,
            "as Response::Error"
        ))));
        assert!(!coordinator_lost(&Err(ClientError::protocol(
            24,
            "invalid id"
        ))));
        assert!(!coordinator_lost(&Err(ClientError::Config("x".into()))));
    }
}
