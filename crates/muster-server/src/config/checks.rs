//! The checks of the settings whose values a range cannot describe (`check(...)` in the
//! `settings!` table of `../config.rs`): addresses, node and cluster names, etcd endpoints,
//! the consumer protocol's default assignor, the log filter.

use super::{table, ConfigError};
use crate::node::{check_cluster_name, check_node_id, HostPort};

/// A listening address: `HOST:PORT` (a name is resolved when binding, not here).
pub(super) fn address(name: &str, addr: &str) -> Result<(), ConfigError> {
    if addr.parse::<std::net::SocketAddr>().is_err() && !addr.contains(':') {
        return Err(ConfigError::Invalid {
            setting: table::flag(name),
            value: addr.to_owned(),
            allowed: "expected HOST:PORT".into(),
        });
    }
    Ok(())
}

/// [`address`], or `off`.
pub(super) fn address_or_off(name: &str, addr: &str) -> Result<(), ConfigError> {
    if addr == "off" {
        return Ok(());
    }
    address(name, addr)
}

/// One of the consumer protocol's server assignors.
pub(super) fn server_assignor(name: &str, assignor: &str) -> Result<(), ConfigError> {
    if muster_coordinator::ASSIGNORS.contains(&assignor) {
        return Ok(());
    }
    Err(ConfigError::Invalid {
        setting: table::flag(name),
        value: assignor.to_owned(),
        allowed: format!("one of {}", muster_coordinator::ASSIGNORS.join(", ")),
    })
}

/// A node id, or empty for the host name.
pub(super) fn node_id(name: &str, id: &str) -> Result<(), ConfigError> {
    if id.is_empty() {
        return Ok(());
    }
    check_node_id(id).map_err(|allowed| ConfigError::Invalid {
        setting: table::flag(name),
        value: id.to_owned(),
        allowed: format!("{allowed} (or empty for the host name)"),
    })
}

/// A `HOST:PORT` clients can connect to, or empty for the listen address.
pub(super) fn advertise(name: &str, addr: &str) -> Result<(), ConfigError> {
    if addr.is_empty() {
        return Ok(());
    }
    addr.parse::<HostPort>()
        .map(drop)
        .map_err(|e| ConfigError::Invalid {
            setting: table::flag(name),
            value: addr.to_owned(),
            allowed: e.to_string(),
        })
}

pub(super) fn etcd_endpoints(name: &str, value: &str) -> Result<(), ConfigError> {
    let bad = value
        .split(',')
        .map(str::trim)
        .any(|e| e.is_empty() || e.chars().any(char::is_whitespace));
    if !value.is_empty() && bad {
        return Err(ConfigError::Invalid {
            setting: table::flag(name),
            value: value.to_owned(),
            allowed: "expected etcd URLs separated by commas (http://host:port or host:port)"
                .into(),
        });
    }
    Ok(())
}

pub(super) fn cluster_name(name: &str, cluster: &str) -> Result<(), ConfigError> {
    check_cluster_name(cluster).map_err(|allowed| ConfigError::Invalid {
        setting: table::flag(name),
        value: cluster.to_owned(),
        allowed: allowed.into(),
    })
}

/// A log filter must say something (its syntax is checked when logging starts).
pub(super) fn log_filter(name: &str, level: &str) -> Result<(), ConfigError> {
    if level.trim().is_empty() {
        return Err(ConfigError::Invalid {
            setting: table::flag(name),
            value: String::new(),
            allowed: "expected a filter such as \"info\"".into(),
        });
    }
    Ok(())
}
