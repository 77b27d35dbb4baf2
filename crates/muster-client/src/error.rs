//! The client's error type, [`ClientError`], and how protocol error codes are classified
//! ([`ErrorCodeExt`]: retriable, needs a rejoin, fatal for a member).
//!
//! Every error the server sends keeps its raw wire code (`i16`), so a code this version does
//! not know is still reported faithfully; [`ClientError::error_code`] names the known ones.

use std::sync::Arc;
use std::time::Duration;

use muster_protocol::{DecodeError, EncodeError, ErrorCode};

use crate::partition::{display_partitions, TopicPartition};

/// Everything that can go wrong in this crate.
///
/// It is `Clone` (I/O errors are shared behind an `Arc`) so that one failure can be handed to
/// every request waiting on a connection and to the event stream of a group member.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error code.
    #[error("{context}: {}", describe_code(*.code))]
    Protocol {
        /// The raw wire code; see [`ClientError::error_code`] for its name.
        code: i16,
        /// What was being done (the request, and the partition or group where it applies),
        /// or the server's message for a `Response::Error`.
        context: String,
    },
    /// No answer within the request's timeout.
    #[error("{request} timed out after {after:?}")]
    Timeout {
        /// The request's name, e.g. `"JoinGroup"`.
        request: &'static str,
        after: Duration,
    },
    /// The connection closed (or broke) before the answer arrived.
    #[error("connection to the server closed before the answer arrived")]
    Disconnected,
    /// Connecting, reading or writing failed.
    #[error("I/O error: {0}")]
    Io(#[source] Arc<std::io::Error>),
    /// The server answered with a response of the wrong kind (its name is given).
    #[error("unexpected response {0} from the server")]
    Unexpected(&'static str),
    /// A request could not be encoded (or is larger than the frame limit).
    #[error("cannot encode request: {0}")]
    Encode(#[from] EncodeError),
    /// The server sent a payload that does not decode.
    #[error("cannot decode response: {0}")]
    Decode(#[from] DecodeError),
    /// The operation needs a current group generation (the member has not joined yet, or
    /// lost its membership); nothing was sent.
    #[error("not a member of group {group_id} with a current generation")]
    NotMember { group_id: String },
    /// The group chose an assignor this member does not have (only possible when members
    /// of one group are configured inconsistently).
    #[error("the group chose assignor {0:?}, which this member does not have")]
    UnknownAssignor(String),
    /// An OffsetCommit was refused for these partitions with `PARTITION_NOT_OWNED` (205): the
    /// member does not own them in the generation (consumer protocol: the member epoch) the
    /// commit named. Its other partitions were committed, unless refused for another reason
    /// (this error takes precedence, and does not report those).
    ///
    /// The member has lost these partitions: another member owns them, or will, and works
    /// from the offsets *it* commits. Stop processing them, as after
    /// [`Event::Lost`](crate::Event::Lost), and do not retry the commit. (Kafka's consumer
    /// treats a commit for a revoked partition the same way.) A member that still counted
    /// them as its own drops them and emits `Lost` for them. Classified like its wire code:
    /// [`ClientError::code`] is 205.
    #[error(
        "OffsetCommit group {group_id}: server answered PARTITION_NOT_OWNED (205) for {}: the \
         member does not own them; stop processing them",
        display_partitions(.partitions)
    )]
    PartitionsNotOwned {
        group_id: String,
        /// The refused partitions, sorted.
        partitions: Vec<TopicPartition>,
    },
    /// The member has been closed or has stopped after a fatal error.
    #[error("the group member is closed")]
    Closed,
    /// TLS could not be set up (a CA, certificate or key file, or the server name), or the
    /// TLS handshake failed (the server's certificate is not trusted, or the server refused
    /// ours). Not retried: it will not get better by itself.
    #[error("{0}")]
    Tls(Arc<crate::tls::TlsError>),
    /// A configuration value is unusable; nothing was started.
    #[error("invalid configuration: {0}")]
    Config(String),
}

fn describe_code(code: i16) -> String {
    match ErrorCode::from_code(code) {
        Some(known) => format!("server answered {known}"),
        None => format!("server answered unknown error code {code}"),
    }
}

impl ClientError {
    /// A protocol error from a raw wire code.
    pub fn protocol(code: i16, context: impl Into<String>) -> Self {
        ClientError::Protocol {
            code,
            context: context.into(),
        }
    }

    /// `Ok(())` for `NONE` (0), else a [`ClientError::Protocol`] with `context`.
    pub fn check(code: i16, context: impl FnOnce() -> String) -> Result<(), ClientError> {
        if code == ErrorCode::None.code() {
            Ok(())
        } else {
            Err(ClientError::protocol(code, context()))
        }
    }

    /// The raw wire code of a [`ClientError::Protocol`] (and 205 for
    /// [`ClientError::PartitionsNotOwned`]).
    pub fn code(&self) -> Option<i16> {
        match self {
            ClientError::Protocol { code, .. } => Some(*code),
            ClientError::PartitionsNotOwned { .. } => Some(ErrorCode::PartitionNotOwned.code()),
            _ => None,
        }
    }

    /// The named code of [`ClientError::code`], when this version knows it.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.code().and_then(ErrorCode::from_code)
    }

    /// Whether the same request may succeed if sent again later (after a backoff): transport
    /// failures, timeouts and the retriable protocol codes ([`ErrorCodeExt::is_retriable`]).
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Timeout { .. } | ClientError::Disconnected | ClientError::Io(_) => true,
            ClientError::Protocol { .. } => self.error_code().is_some_and(|c| c.is_retriable()),
            _ => false,
        }
    }

    /// Whether the error is a transport failure (no answer from the server).
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            ClientError::Timeout { .. } | ClientError::Disconnected | ClientError::Io(_)
        )
    }
}

impl From<crate::tls::TlsError> for ClientError {
    fn from(err: crate::tls::TlsError) -> Self {
        ClientError::Tls(Arc::new(err))
    }
}

impl From<std::io::Error> for ClientError {
    fn from(err: std::io::Error) -> Self {
        ClientError::Io(Arc::new(err))
    }
}

/// What a protocol error code means for a client. `ErrorCode` lives in `muster-protocol`, so
/// the classification is an extension trait.
pub trait ErrorCodeExt {
    /// The request may succeed if retried after a backoff, unchanged (Kafka's
    /// `RetriableException`s: the coordinator codes 14/15/16, `UNKNOWN_TOPIC_OR_PARTITION`,
    /// and `TOO_MANY_CONNECTIONS`).
    fn is_retriable(&self) -> bool;
    /// A group member must rejoin (keeping or, for `UNKNOWN_MEMBER_ID`, dropping its
    /// member id): `REBALANCE_IN_PROGRESS`, `ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`.
    fn needs_rejoin(&self) -> bool;
    /// A group member cannot go on: another process took its static identity, or its
    /// configuration is refused (`FENCED_INSTANCE_ID`, `INCONSISTENT_GROUP_PROTOCOL`,
    /// `INVALID_SESSION_TIMEOUT`, `INVALID_GROUP_ID`, `GROUP_AUTHORIZATION_FAILED`,
    /// `GROUP_MAX_SIZE_REACHED`, `AUTHENTICATION_FAILED`, `UNSUPPORTED_VERSION`).
    fn is_fatal_for_member(&self) -> bool;
    /// The node that answered does not (or cannot yet) serve the group: find its coordinator
    /// again and retry there (`NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`,
    /// `COORDINATOR_LOAD_IN_PROGRESS`; protocol §6.19). Each of these is also retriable.
    fn is_coordinator_error(&self) -> bool;
}

impl ErrorCodeExt for ErrorCode {
    fn is_retriable(&self) -> bool {
        matches!(
            self,
            ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::NotCoordinator
                | ErrorCode::UnknownTopicOrPartition
                | ErrorCode::TooManyConnections
        )
    }

    fn needs_rejoin(&self) -> bool {
        matches!(
            self,
            ErrorCode::RebalanceInProgress
                | ErrorCode::IllegalGeneration
                | ErrorCode::UnknownMemberId
        )
    }

    fn is_fatal_for_member(&self) -> bool {
        matches!(
            self,
            ErrorCode::FencedInstanceId
                | ErrorCode::InconsistentGroupProtocol
                | ErrorCode::InvalidSessionTimeout
                | ErrorCode::InvalidGroupId
                | ErrorCode::GroupAuthorizationFailed
                | ErrorCode::GroupMaxSizeReached
                | ErrorCode::AuthenticationFailed
                | ErrorCode::UnsupportedVersion
        )
    }

    fn is_coordinator_error(&self) -> bool {
        matches!(
            self,
            ErrorCode::NotCoordinator
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_errors_keep_the_raw_code_and_name_it() {
        let err = ClientError::protocol(27, "Heartbeat orders");
        assert_eq!(err.code(), Some(27));
        assert_eq!(err.error_code(), Some(ErrorCode::RebalanceInProgress));
        assert_eq!(
            err.to_string(),
            "Heartbeat orders: server answered REBALANCE_IN_PROGRESS (27)"
        );
        let unknown = ClientError::protocol(999, "Hello");
        assert_eq!(unknown.error_code(), None);
        assert_eq!(
            unknown.to_string(),
            "Hello: server answered unknown error code 999"
        );
        assert!(!unknown.is_retriable());
    }

    #[test]
    fn partitions_not_owned_name_the_partitions_and_their_code() {
        let err = ClientError::PartitionsNotOwned {
            group_id: "g".into(),
            partitions: vec![TopicPartition::new("t", 1), TopicPartition::new("t", 3)],
        };
        assert_eq!(err.error_code(), Some(ErrorCode::PartitionNotOwned));
        assert!(!err.is_retriable());
        assert_eq!(
            err.to_string(),
            "OffsetCommit group g: server answered PARTITION_NOT_OWNED (205) for t-[1,3]: the \
             member does not own them; stop processing them"
        );
    }

    #[test]
    fn classification() {
        assert!(ClientError::Disconnected.is_retriable());
        assert!(ClientError::Timeout {
            request: "Heartbeat",
            after: Duration::from_secs(1)
        }
        .is_retriable());
        assert!(ClientError::protocol(15, "x").is_retriable());
        assert!(!ClientError::protocol(82, "x").is_retriable());
        assert!(ErrorCode::FencedInstanceId.is_fatal_for_member());
        assert!(ErrorCode::UnknownMemberId.needs_rejoin());
        assert!(!ErrorCode::RebalanceInProgress.is_retriable());
        for code in ErrorCode::ALL {
            // No code is both retriable and fatal, or both fatal and a rejoin.
            assert!(
                !(code.is_retriable() && code.is_fatal_for_member()),
                "{code}"
            );
            assert!(
                !(code.needs_rejoin() && code.is_fatal_for_member()),
                "{code}"
            );
            assert!(
                !code.is_coordinator_error() || code.is_retriable(),
                "{code}"
            );
        }
        assert_eq!(ClientError::check(0, || unreachable!()).ok(), Some(()));
        assert_eq!(
            ClientError::check(25, || "Join".into())
                .err()
                .and_then(|e| e.error_code()),
            Some(ErrorCode::UnknownMemberId)
        );
    }
}
