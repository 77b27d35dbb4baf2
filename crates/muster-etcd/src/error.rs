//! Failures talking to etcd.

use crate::security::EtcdSecurityError;

/// An etcd request that failed, or an endpoint that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// An endpoint is not a usable URL (`http://host:port`, `https://host:port` or
    /// `host:port`), or its scheme does not match the TLS settings.
    #[error("invalid etcd endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    /// The cluster name cannot be a key prefix.
    #[error(transparent)]
    InvalidClusterName(#[from] crate::keys::InvalidClusterName),
    /// No endpoints were given.
    #[error("no etcd endpoints given")]
    NoEndpoints,
    /// The TLS files or the credentials cannot be used.
    #[error(transparent)]
    Security(#[from] EtcdSecurityError),
    /// etcd refused the user name or password.
    #[error(
        "etcd refused user {user:?}: wrong user name or password (etcd: authentication failed)"
    )]
    AuthFailed { user: String },
    /// etcd has authentication enabled and the client has no user to authenticate as.
    #[error(
        "etcd has authentication enabled and no etcd user is configured (etcd: user name is \
         empty): give the etcd user and its password"
    )]
    AuthRequired,
    /// The user's roles do not allow reading and writing under the cluster's prefix.
    #[error(
        "{who} may not read and write under {prefix} (etcd: permission denied): grant its role \
         readwrite on that prefix (etcdctl role grant-permission ROLE readwrite {prefix} \
         --prefix=true; docs/cluster.md \"etcd users and roles\")"
    )]
    PermissionDenied { who: String, prefix: String },
    /// No member answered within the request timeout; the last member's failure is given.
    /// Over TLS it says how a refused certificate shows.
    #[error(
        "no etcd member answered: {}{}",
        describe(status),
        if *tls { TLS_HINT } else { "" }
    )]
    Unreachable { status: tonic::Status, tls: bool },
    /// etcd answered with an error, or could not be reached (the gRPC status says which, and
    /// its causes: a TLS handshake refused says why).
    #[error("etcd request failed: {}", describe(.0))]
    Status(#[from] tonic::Status),
    /// The client's runtime could not be started.
    #[error("cannot start the etcd client's runtime: {0}")]
    Runtime(String),
}

impl EtcdError {
    /// Whether the failure may pass by itself: no member answered, or etcd answered that it
    /// cannot serve the request now (no leader, a leader change, a request timed out, too many
    /// requests). A node starting while etcd elects a leader waits for these; a refusal (wrong
    /// credentials, no rights, a bad endpoint or certificate) never passes by waiting.
    pub fn is_transient(&self) -> bool {
        use tonic::Code;
        match self {
            // etcd's certificate refused by this client: deterministic, waiting changes
            // nothing. (etcd refusing ours shows as a closed connection, which a restarting
            // member can cause too: that one is waited for.)
            Self::Unreachable { status, tls } => {
                !(*tls && describe(status).contains("invalid peer certificate"))
            }
            Self::Status(status) => matches!(
                status.code(),
                Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::Cancelled
                    | Code::Unknown
                    | Code::Aborted
                    | Code::ResourceExhausted
            ),
            _ => false,
        }
    }
}

/// How refused certificates show over TLS, for an operator reading why etcd was unreachable.
const TLS_HINT: &str = " (over TLS: \"invalid peer certificate\" means etcd's certificate is not \
     signed by the etcd CA given, or does not name the endpoint's host; a connection closed \
     right after the handshake (broken pipe, reset, alert BadCertificate) means etcd refused this client's \
     certificate: it must be signed by a CA in etcd's --trusted-ca-file)";

/// A status's code, message and chain of causes (where a connection or TLS failure says what
/// went wrong), without its metadata.
fn describe(status: &tonic::Status) -> String {
    let mut out = format!("{}: {}", status.code(), status.message());
    let mut source = std::error::Error::source(status);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !out.contains(&cause_text) {
            out.push_str(": ");
            out.push_str(&cause_text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_that_pass_by_waiting_are_transient() {
        let status = |code, message: &str| EtcdError::Status(tonic::Status::new(code, message));
        assert!(status(tonic::Code::Unavailable, "etcdserver: no leader").is_transient());
        assert!(status(tonic::Code::Unavailable, "etcdserver: leader changed").is_transient());
        assert!(status(tonic::Code::DeadlineExceeded, "context deadline exceeded").is_transient());
        assert!(EtcdError::Unreachable {
            status: tonic::Status::unavailable("connection refused"),
            tls: false
        }
        .is_transient());
        assert!(!status(
            tonic::Code::PermissionDenied,
            "etcdserver: permission denied"
        )
        .is_transient());
        assert!(!status(tonic::Code::InvalidArgument, "etcdserver: key not found").is_transient());
        assert!(!EtcdError::AuthFailed { user: "u".into() }.is_transient());
        assert!(!EtcdError::NoEndpoints.is_transient());
    }
}
