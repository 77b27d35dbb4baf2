//! This node as clients and a cluster see it: its id, the address it tells clients to connect
//! to (its *advertised* address), and the name of its cluster; and a single node's answers to
//! FindCoordinator and DescribeCluster (protocol §6.19), which are made from those alone.
//!
//! The advertised address is fixed once the client listener is bound ([`NodeIdentity::new`]):
//! the `advertise` setting when given, else the listen address with the port actually bound
//! (a `listen` port of 0 becomes the real one) and, for an unspecified address (`0.0.0.0`,
//! `[::]`), which no client can connect to, the machine's host name instead.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use muster_protocol::{
    validate_group_id, ClusterNode, DescribeClusterResponse, ErrorCode, FindCoordinatorRequest,
    FindCoordinatorResponse,
};

/// The cluster name when none is set.
pub const DEFAULT_CLUSTER_NAME: &str = "muster";

/// Longest node id or cluster name, in bytes (as a group id).
pub const MAX_NAME_BYTES: usize = 255;

/// How the node presents itself, as [`crate::ServerOptions`] takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOptions {
    /// `None` = the machine's host name ([`host_name`]).
    pub node_id: Option<String>,
    /// `None` = derived from the listen address ([`NodeIdentity::new`]).
    pub advertise: Option<HostPort>,
    pub cluster_name: String,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            node_id: None,
            advertise: None,
            cluster_name: DEFAULT_CLUSTER_NAME.to_owned(),
        }
    }
}

/// A `HOST:PORT` to connect to. `host` is a name or an IP address, an IPv6 address without
/// its brackets (as it goes on the wire); [`fmt::Display`] brackets it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

/// Why a `HOST:PORT` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected HOST:PORT with a port in 1..=65535 (an IPv6 address in brackets): {0}")]
pub struct BadHostPort(pub String);

impl FromStr for HostPort {
    type Err = BadHostPort;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadHostPort(s.to_owned());
        let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let host = match host.strip_prefix('[') {
            Some(v6) => {
                let v6 = v6.strip_suffix(']').ok_or_else(bad)?;
                v6.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
                v6
            }
            // An unbracketed colon would make the port ambiguous.
            None if host.contains(':') => return Err(bad()),
            None => host,
        };
        let printable = !host.is_empty()
            && host.len() <= MAX_NAME_BYTES
            && !host.chars().any(|c| c.is_control() || c.is_whitespace());
        if port == 0 || !printable {
            return Err(bad());
        }
        Ok(HostPort {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// This node, as the answers of protocol §6.19 name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node_id: String,
    pub advertised: HostPort,
    pub cluster_name: String,
}

impl NodeIdentity {
    /// The identity of a node whose client listener, configured as `listen`, is bound to
    /// `bound`. `host_name` is the machine's host name ([`host_name`]), asked for only when
    /// needed.
    pub fn new(
        options: &NodeOptions,
        listen: &str,
        bound: SocketAddr,
        host_name: impl Fn() -> String,
    ) -> Self {
        let advertised = match &options.advertise {
            Some(advertise) => advertise.clone(),
            None => HostPort {
                host: listen_host(listen, bound.ip()).unwrap_or_else(&host_name),
                port: bound.port(),
            },
        };
        Self {
            node_id: options.node_id.clone().unwrap_or_else(host_name),
            advertised,
            cluster_name: options.cluster_name.clone(),
        }
    }

    /// A single node coordinates every group: itself, for any valid group id.
    pub fn find_coordinator(&self, request: &FindCoordinatorRequest) -> FindCoordinatorResponse {
        match validate_group_id(&request.key) {
            Ok(()) => FindCoordinatorResponse {
                error_code: ErrorCode::None.code(),
                node_id: self.node_id.clone(),
                host: self.advertised.host.clone(),
                port: self.advertised.port,
            },
            Err(code) => FindCoordinatorResponse {
                error_code: code.code(),
                ..FindCoordinatorResponse::default()
            },
        }
    }

    /// A single node is the whole cluster: one shard, shard 0, its own.
    pub fn describe_cluster(&self) -> DescribeClusterResponse {
        DescribeClusterResponse {
            error_code: ErrorCode::None.code(),
            cluster: self.cluster_name.clone(),
            shards: 1,
            nodes: vec![ClusterNode {
                node_id: self.node_id.clone(),
                host: self.advertised.host.clone(),
                port: self.advertised.port,
                shards: vec![0],
            }],
        }
    }
}

/// The host of `listen` that clients can use: as written when it is a name (a DNS name is what
/// an operator wants advertised) or a specific IP address; `None` for an unspecified address,
/// which names no host to connect to.
fn listen_host(listen: &str, bound: IpAddr) -> Option<String> {
    if bound.is_unspecified() {
        return None;
    }
    let host = listen.rsplit_once(':').map_or(listen, |(host, _)| host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match host.parse::<IpAddr>() {
        // A name that resolved to an unspecified address was handled above.
        Ok(ip) if ip.is_unspecified() => None,
        Ok(ip) => Some(ip.to_string()),
        Err(_) if host.is_empty() => Some(bound.to_string()),
        Err(_) => Some(host.to_owned()),
    }
}

/// The machine's host name: the kernel's (`/proc/sys/kernel/hostname`), else
/// `/etc/hostname`, else the `HOSTNAME` variable, else `localhost`. Read from files rather
/// than `gethostname(2)`, which needs unsafe code or another dependency; Linux, where
/// `musterd` runs in production, always has the first.
pub fn host_name() -> String {
    let from_file = |path: &str| std::fs::read_to_string(path).ok();
    [
        from_file("/proc/sys/kernel/hostname"),
        from_file("/etc/hostname"),
        std::env::var("HOSTNAME").ok(),
    ]
    .into_iter()
    .flatten()
    .find_map(|name| usable_host_name(&name))
    .unwrap_or_else(|| "localhost".to_owned())
}

/// A host name as read (trailing newline and all), if it is one.
fn usable_host_name(raw: &str) -> Option<String> {
    let name = raw.trim();
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.chars().any(|c| c.is_control() || c.is_whitespace());
    ok.then(|| name.to_owned())
}

/// A node id: 1..=255 bytes, no whitespace or control characters (it is shown in tables and,
/// in a cluster, is part of storage keys).
pub fn check_node_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty()
        || id.len() > MAX_NAME_BYTES
        || id.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err("expected 1 to 255 bytes without whitespace or control characters");
    }
    Ok(())
}

/// A cluster name: 1..=255 bytes of `[A-Za-z0-9._-]` (in a cluster it prefixes every storage
/// key, so clusters can share one store).
pub fn check_cluster_name(name: &str) -> Result<(), &'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME_BYTES || !name.chars().all(allowed) {
        return Err("expected 1 to 255 bytes of [A-Za-z0-9._-]");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("a socket address")
    }

    fn host(s: &str) -> HostPort {
        s.parse().expect("a HOST:PORT")
    }

    fn identity(options: &NodeOptions, listen: &str, bound: &str) -> NodeIdentity {
        NodeIdentity::new(options, listen, addr(bound), || "box-7".to_owned())
    }

    #[test]
    fn host_port_parses_names_ipv4_and_bracketed_ipv6() {
        assert_eq!(
            host("muster-1.internal:7450"),
            HostPort {
                host: "muster-1.internal".into(),
                port: 7450
            }
        );
        assert_eq!(host("10.0.0.7:1").host, "10.0.0.7");
        let v6 = host("[fd00::7]:7450");
        assert_eq!(v6.host, "fd00::7");
        assert_eq!(v6.to_string(), "[fd00::7]:7450");
        assert_eq!(host("a:65535").to_string(), "a:65535");
    }

    #[test]
    fn host_port_refuses_what_a_client_cannot_connect_to() {
        for bad in [
            "",
            "host",
            ":7450",
            "host:0",
            "host:65536",
            "host:port",
            "fd00::7:7450",
            "[fd00::7:7450",
            "[not-v6]:7450",
            "two words:7450",
            "tab\t:7450",
        ] {
            assert!(bad.parse::<HostPort>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn advertise_given_is_used_as_is() {
        let options = NodeOptions {
            advertise: Some(host("muster.example:9999")),
            ..NodeOptions::default()
        };
        let node = identity(&options, "0.0.0.0:0", "0.0.0.0:41234");
        assert_eq!(node.advertised, host("muster.example:9999"));
    }

    #[test]
    fn advertise_defaults_to_the_listen_address_with_the_bound_port() {
        let defaults = NodeOptions::default();
        assert_eq!(
            identity(&defaults, "127.0.0.1:0", "127.0.0.1:41234").advertised,
            host("127.0.0.1:41234")
        );
        assert_eq!(
            identity(&defaults, "[::1]:7450", "[::1]:7450").advertised,
            host("[::1]:7450")
        );
        // A name stays the name the operator wrote.
        assert_eq!(
            identity(&defaults, "localhost:7450", "127.0.0.1:7450").advertised,
            host("localhost:7450")
        );
    }

    #[test]
    fn an_unspecified_listen_address_advertises_the_host_name() {
        let defaults = NodeOptions::default();
        assert_eq!(
            identity(&defaults, "0.0.0.0:7450", "0.0.0.0:7450").advertised,
            host("box-7:7450")
        );
        assert_eq!(
            identity(&defaults, "[::]:0", "[::]:5555").advertised,
            host("box-7:5555")
        );
    }

    #[test]
    fn node_id_defaults_to_the_host_name_and_cluster_to_muster() {
        let node = identity(&NodeOptions::default(), "127.0.0.1:7450", "127.0.0.1:7450");
        assert_eq!(node.node_id, "box-7");
        assert_eq!(node.cluster_name, "muster");
        let named = NodeOptions {
            node_id: Some("n1".into()),
            cluster_name: "prod".into(),
            ..NodeOptions::default()
        };
        let node = identity(&named, "127.0.0.1:7450", "127.0.0.1:7450");
        assert_eq!(
            (node.node_id.as_str(), node.cluster_name.as_str()),
            ("n1", "prod")
        );
    }

    #[test]
    fn find_coordinator_names_this_node_for_a_valid_group_only() {
        let node = NodeIdentity {
            node_id: "n1".into(),
            advertised: host("10.0.0.7:7450"),
            cluster_name: "muster".into(),
        };
        let found = node.find_coordinator(&FindCoordinatorRequest {
            key: "orders".into(),
        });
        assert_eq!(
            found,
            FindCoordinatorResponse {
                error_code: 0,
                node_id: "n1".into(),
                host: "10.0.0.7".into(),
                port: 7450,
            }
        );
        for key in [String::new(), "a\nb".into(), "x".repeat(256)] {
            assert_eq!(
                node.find_coordinator(&FindCoordinatorRequest { key }),
                FindCoordinatorResponse {
                    error_code: ErrorCode::InvalidGroupId.code(),
                    node_id: String::new(),
                    host: String::new(),
                    port: 0,
                }
            );
        }
    }

    #[test]
    fn describe_cluster_is_this_node_owning_the_one_shard() {
        let node = NodeIdentity {
            node_id: "n1".into(),
            advertised: host("[fd00::7]:7450"),
            cluster_name: "prod".into(),
        };
        let described = node.describe_cluster();
        assert_eq!(described.error_code, 0);
        assert_eq!(described.cluster, "prod");
        assert_eq!(described.shards, 1);
        assert_eq!(
            described.nodes,
            vec![ClusterNode {
                node_id: "n1".into(),
                host: "fd00::7".into(),
                port: 7450,
                shards: vec![0],
            }]
        );
    }

    #[test]
    fn host_names_are_trimmed_and_checked() {
        assert_eq!(usable_host_name("box-7\n").as_deref(), Some("box-7"));
        assert_eq!(usable_host_name("  \n"), None);
        assert_eq!(usable_host_name("two words"), None);
        let name = host_name();
        assert!(check_node_id(&name).is_ok(), "{name:?}");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_node_id("muster-1").is_ok());
        assert!(check_node_id("").is_err());
        assert!(check_node_id("a b").is_err());
        assert!(check_node_id(&"n".repeat(256)).is_err());
        assert!(check_cluster_name("prod.eu-1_a").is_ok());
        assert!(check_cluster_name("").is_err());
        assert!(check_cluster_name("a/b").is_err());
        assert!(check_cluster_name(&"c".repeat(256)).is_err());
    }
}
