//! Cluster mode's foundation on etcd (v3 API): a small gRPC client ([`EtcdClient`], over
//! checked-in generated code so that no build needs `protoc`), the [`EtcdStore`] backend of the
//! coordinator's `Store` trait with per-shard fencing, and the stable group → shard hash
//! ([`shard_of`]). Shard ownership, leases and failover build on these (docs/cluster.md).
//! The client speaks TLS to etcd and authenticates as an etcd user when configured
//! ([`EtcdSecurity`]).

mod access;
mod auth;
pub mod balance;
mod client;
mod error;
pub mod generated;
pub mod keys;
mod lease;
mod security;
mod shard;
mod store;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
mod watch;

pub use client::{EtcdClient, EtcdClientOptions};
pub use error::EtcdError;
pub use keys::KeyLayout;
pub use lease::Lease;
pub use security::{EtcdCredentials, EtcdSecurity, EtcdSecurityError, EtcdTls};
pub use shard::shard_of;
pub use store::{EtcdStore, EtcdStoreConfig, ShardLoad, ShardStatus, TxnLimits, UnreadableKey};
pub use watch::{Watch, WatchEvent};
