//! Wire error codes (protocol §4). The numbers are Kafka's where Kafka has the error; they are
//! part of the wire contract, so a number is never changed or reused. A retired code keeps its
//! number forever; new codes take new numbers.
//!
//! On the wire an error code is a raw `i16` (so that a peer newer than us, with codes we do not
//! know, still decodes). [`ErrorCode::from_code`] names the values this version knows.
//!
//! Every code is written once, in the table at the end of this file: number, variant, wire
//! name (as in `docs/protocol.md` §4) and a one-line description. The enum, [`ErrorCode::ALL`],
//! [`ErrorCode::from_code`], [`ErrorCode::name`] and [`ErrorCode::description`] are generated
//! from it, so they cannot disagree; `tests/doc_error_codes.rs` checks the doc's §4 table
//! against it.

use core::fmt;

/// Generates [`ErrorCode`] and its lookups from one table of
/// `number => Variant, "WIRE_NAME", "description";` rows, in ascending numeric order.
macro_rules! error_codes {
    ($($code:literal => $variant:ident, $name:literal, $description:literal;)*) => {
        /// A protocol error code. On the wire it is a raw `i16`; see [`ErrorCode::code`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i16)]
        pub enum ErrorCode {
            $(
                #[doc = concat!("`", $name, "` (", stringify!($code), "): ", $description, ".")]
                $variant = $code,
            )*
        }

        impl ErrorCode {
            /// Every code of protocol v1, in ascending numeric order.
            pub const ALL: [ErrorCode; [$($code),*].len()] = [$(ErrorCode::$variant),*];

            /// The code for a wire value, or `None` for a number this version does not know (a
            /// newer peer may send one: treat it as an error you cannot interpret, not as a
            /// decode failure).
            pub const fn from_code(code: i16) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }

            /// The protocol name of the code, as in `docs/protocol.md` (e.g.
            /// `"REBALANCE_IN_PROGRESS"`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                }
            }

            /// What the code means, in a few words (e.g. `"the group is rebalancing"`), for
            /// messages shown to people. `docs/protocol.md` §4 says when each code is sent.
            pub const fn description(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $description,)*
                }
            }
        }
    };
}

error_codes! {
    -1 => UnknownServerError, "UNKNOWN_SERVER_ERROR", "the server failed unexpectedly; see its log";
    0 => None, "NONE", "no error";
    3 => UnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION", "no such topic or partition";
    10 => MessageTooLarge, "MESSAGE_TOO_LARGE", "the request is larger than the server accepts";
    12 => OffsetMetadataTooLarge, "OFFSET_METADATA_TOO_LARGE", "the offset metadata is too long";
    14 => CoordinatorLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS", "the server is still loading; try again";
    15 => CoordinatorNotAvailable, "COORDINATOR_NOT_AVAILABLE", "the coordinator is not available; try again";
    16 => NotCoordinator, "NOT_COORDINATOR", "this server is not the group's coordinator";
    17 => InvalidTopic, "INVALID_TOPIC", "topic names are 1 to 249 characters of [A-Za-z0-9._-]";
    22 => IllegalGeneration, "ILLEGAL_GENERATION", "the group's generation changed";
    23 => InconsistentGroupProtocol, "INCONSISTENT_GROUP_PROTOCOL", "no assignor in common with the group, or not the group's assignor";
    24 => InvalidGroupId, "INVALID_GROUP_ID", "group ids are 1 to 255 bytes without control characters";
    25 => UnknownMemberId, "UNKNOWN_MEMBER_ID", "the group does not know this member";
    26 => InvalidSessionTimeout, "INVALID_SESSION_TIMEOUT", "the session timeout is outside the server's range";
    27 => RebalanceInProgress, "REBALANCE_IN_PROGRESS", "the group is rebalancing";
    29 => TopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED", "this principal may not touch the topic";
    30 => GroupAuthorizationFailed, "GROUP_AUTHORIZATION_FAILED", "this principal may not touch the group";
    31 => ClusterAuthorizationFailed, "CLUSTER_AUTHORIZATION_FAILED", "the operation needs the cluster admin permission";
    35 => UnsupportedVersion, "UNSUPPORTED_VERSION", "the server does not speak this protocol version";
    37 => InvalidPartitions, "INVALID_PARTITIONS", "a partition count must be at least 1 and can only be raised";
    42 => InvalidRequest, "INVALID_REQUEST", "the request could not be decoded, or a field is out of range";
    58 => AuthenticationFailed, "AUTHENTICATION_FAILED", "the auth token was missing or refused";
    68 => NonEmptyGroup, "NON_EMPTY_GROUP", "the group still has members";
    69 => GroupIdNotFound, "GROUP_ID_NOT_FOUND", "no such group";
    79 => MemberIdRequired, "MEMBER_ID_REQUIRED", "the server asks the member to rejoin with an id";
    81 => GroupMaxSizeReached, "GROUP_MAX_SIZE_REACHED", "the group is full";
    82 => FencedInstanceId, "FENCED_INSTANCE_ID", "another member took over this instance id";
    110 => FencedMemberEpoch, "FENCED_MEMBER_EPOCH", "the member's epoch is not the one the group holds for it; rejoin with epoch 0";
    111 => UnreleasedInstanceId, "UNRELEASED_INSTANCE_ID", "the static member with this instance id has not released it yet";
    112 => UnsupportedAssignor, "UNSUPPORTED_ASSIGNOR", "the server has no assignor of that name (uniform, range)";
    113 => StaleMemberEpoch, "STALE_MEMBER_EPOCH", "the member's epoch is older than the group's for it";
    200 => IllegalState, "ILLEGAL_STATE", "the server expected Hello first";
    201 => TooManyConnections, "TOO_MANY_CONNECTIONS", "the server, or the principal, is at its connection limit; try again";
    202 => QuotaExceeded, "QUOTA_EXCEEDED", "the principal is at its max_groups or max_members quota";
    203 => ResourceLimitReached, "RESOURCE_LIMIT_REACHED", "a server-wide capacity limit is reached; try again later";
    204 => RequestLimitExceeded, "REQUEST_LIMIT_EXCEEDED", "a field of the request is over a server limit";
    205 => PartitionNotOwned, "PARTITION_NOT_OWNED", "the member does not own this partition in the generation or epoch it names";
}

// The table must stay in ascending numeric order: `ALL` promises it, and duplicates of a number
// are already refused by the enum's explicit discriminants.
const _: () = {
    let mut i = 1;
    while i < ErrorCode::ALL.len() {
        assert!(
            ErrorCode::ALL[i - 1].code() < ErrorCode::ALL[i].code(),
            "error_codes! rows must be in ascending numeric order"
        );
        i += 1;
    }
};

impl ErrorCode {
    /// The wire value.
    #[inline]
    pub const fn code(self) -> i16 {
        self as i16
    }
}

/// `NAME (code)`, e.g. `REBALANCE_IN_PROGRESS (27)`.
impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl From<ErrorCode> for i16 {
    #[inline]
    fn from(code: ErrorCode) -> i16 {
        code.code()
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    /// The numbers of protocol §4, pinned one by one: changing any of them breaks every client.
    #[test]
    fn codes_match_protocol_section_4() {
        let pinned: [(ErrorCode, i16, &str); 37] = [
            (ErrorCode::None, 0, "NONE"),
            (ErrorCode::UnknownServerError, -1, "UNKNOWN_SERVER_ERROR"),
            (
                ErrorCode::UnknownTopicOrPartition,
                3,
                "UNKNOWN_TOPIC_OR_PARTITION",
            ),
            (ErrorCode::MessageTooLarge, 10, "MESSAGE_TOO_LARGE"),
            (
                ErrorCode::OffsetMetadataTooLarge,
                12,
                "OFFSET_METADATA_TOO_LARGE",
            ),
            (
                ErrorCode::CoordinatorLoadInProgress,
                14,
                "COORDINATOR_LOAD_IN_PROGRESS",
            ),
            (
                ErrorCode::CoordinatorNotAvailable,
                15,
                "COORDINATOR_NOT_AVAILABLE",
            ),
            (ErrorCode::NotCoordinator, 16, "NOT_COORDINATOR"),
            (ErrorCode::InvalidTopic, 17, "INVALID_TOPIC"),
            (ErrorCode::IllegalGeneration, 22, "ILLEGAL_GENERATION"),
            (
                ErrorCode::InconsistentGroupProtocol,
                23,
                "INCONSISTENT_GROUP_PROTOCOL",
            ),
            (ErrorCode::InvalidGroupId, 24, "INVALID_GROUP_ID"),
            (ErrorCode::UnknownMemberId, 25, "UNKNOWN_MEMBER_ID"),
            (
                ErrorCode::InvalidSessionTimeout,
                26,
                "INVALID_SESSION_TIMEOUT",
            ),
            (ErrorCode::RebalanceInProgress, 27, "REBALANCE_IN_PROGRESS"),
            (
                ErrorCode::TopicAuthorizationFailed,
                29,
                "TOPIC_AUTHORIZATION_FAILED",
            ),
            (
                ErrorCode::GroupAuthorizationFailed,
                30,
                "GROUP_AUTHORIZATION_FAILED",
            ),
            (
                ErrorCode::ClusterAuthorizationFailed,
                31,
                "CLUSTER_AUTHORIZATION_FAILED",
            ),
            (ErrorCode::UnsupportedVersion, 35, "UNSUPPORTED_VERSION"),
            (ErrorCode::InvalidPartitions, 37, "INVALID_PARTITIONS"),
            (ErrorCode::InvalidRequest, 42, "INVALID_REQUEST"),
            (ErrorCode::AuthenticationFailed, 58, "AUTHENTICATION_FAILED"),
            (ErrorCode::NonEmptyGroup, 68, "NON_EMPTY_GROUP"),
            (ErrorCode::GroupIdNotFound, 69, "GROUP_ID_NOT_FOUND"),
            (ErrorCode::MemberIdRequired, 79, "MEMBER_ID_REQUIRED"),
            (ErrorCode::GroupMaxSizeReached, 81, "GROUP_MAX_SIZE_REACHED"),
            (ErrorCode::FencedInstanceId, 82, "FENCED_INSTANCE_ID"),
            (ErrorCode::FencedMemberEpoch, 110, "FENCED_MEMBER_EPOCH"),
            (
                ErrorCode::UnreleasedInstanceId,
                111,
                "UNRELEASED_INSTANCE_ID",
            ),
            (ErrorCode::UnsupportedAssignor, 112, "UNSUPPORTED_ASSIGNOR"),
            (ErrorCode::StaleMemberEpoch, 113, "STALE_MEMBER_EPOCH"),
            (ErrorCode::IllegalState, 200, "ILLEGAL_STATE"),
            (ErrorCode::TooManyConnections, 201, "TOO_MANY_CONNECTIONS"),
            (ErrorCode::QuotaExceeded, 202, "QUOTA_EXCEEDED"),
            (
                ErrorCode::ResourceLimitReached,
                203,
                "RESOURCE_LIMIT_REACHED",
            ),
            (
                ErrorCode::RequestLimitExceeded,
                204,
                "REQUEST_LIMIT_EXCEEDED",
            ),
            (ErrorCode::PartitionNotOwned, 205, "PARTITION_NOT_OWNED"),
        ];
        for (code, number, name) in pinned {
            assert_eq!(code.code(), number, "{name}");
            assert_eq!(code as i16, number, "{name}");
            assert_eq!(i16::from(code), number, "{name}");
            assert_eq!(code.name(), name);
            assert_eq!(ErrorCode::from_code(number), Some(code), "{name}");
            assert_eq!(code.to_string(), format!("{name} ({number})"));
        }
        // `ALL` lists exactly the pinned codes, ascending, without duplicates.
        assert_eq!(ErrorCode::ALL.len(), pinned.len());
        assert!(ErrorCode::ALL.windows(2).all(|w| w[0].code() < w[1].code()));
        for (code, _, _) in pinned {
            assert!(ErrorCode::ALL.contains(&code));
        }
    }

    #[test]
    fn unknown_numbers_have_no_code() {
        let known: Vec<i16> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
        for n in i16::MIN..=i16::MAX {
            assert_eq!(ErrorCode::from_code(n).is_some(), known.contains(&n), "{n}");
        }
    }
}
