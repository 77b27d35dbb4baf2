//! Failures talking to etcd.

/// An etcd request that failed, or an endpoint that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// An endpoint is not a usable URL (`http://host:port` or `host:port`).
    #[error("invalid etcd endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    /// The cluster name cannot be a key prefix.
    #[error(transparent)]
    InvalidClusterName(#[from] crate::keys::InvalidClusterName),
    /// No endpoints were given.
    #[error("no etcd endpoints given")]
    NoEndpoints,
    /// etcd answered with an error, or could not be reached (the gRPC status says which).
    #[error("etcd request failed: {0}")]
    Status(#[from] tonic::Status),
    /// The client's runtime could not be started.
    #[error("cannot start the etcd client's runtime: {0}")]
    Runtime(String),
}
