//! Wire error codes (protocol §4). The numbers are Kafka's where Kafka has the error; they are
//! part of the wire contract, so a number is never changed or reused. A retired code keeps its
//! number forever; new codes take new numbers.
//!
//! On the wire an error code is a raw `i16` (so that a peer newer than us, with codes we do not
//! know, still decodes). [`ErrorCode::from_code`] names the values this version knows.

use core::fmt;

/// A protocol error code. On the wire it is a raw `i16`; see [`ErrorCode::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ErrorCode {
    None = 0,
    UnknownServerError = -1,
    UnknownTopicOrPartition = 3,
    MessageTooLarge = 10,
    OffsetMetadataTooLarge = 12,
    CoordinatorLoadInProgress = 14,
    CoordinatorNotAvailable = 15,
    NotCoordinator = 16,
    InvalidTopic = 17,
    IllegalGeneration = 22,
    InconsistentGroupProtocol = 23,
    InvalidGroupId = 24,
    UnknownMemberId = 25,
    InvalidSessionTimeout = 26,
    RebalanceInProgress = 27,
    GroupAuthorizationFailed = 30,
    UnsupportedVersion = 35,
    InvalidPartitions = 37,
    InvalidRequest = 42,
    AuthenticationFailed = 58,
    NonEmptyGroup = 68,
    GroupIdNotFound = 69,
    MemberIdRequired = 79,
    GroupMaxSizeReached = 81,
    FencedInstanceId = 82,
    IllegalState = 200,
    TooManyConnections = 201,
}

impl ErrorCode {
    /// Every code of protocol v1, in ascending numeric order.
    pub const ALL: [ErrorCode; 27] = [
        ErrorCode::UnknownServerError,
        ErrorCode::None,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::MessageTooLarge,
        ErrorCode::OffsetMetadataTooLarge,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator,
        ErrorCode::InvalidTopic,
        ErrorCode::IllegalGeneration,
        ErrorCode::InconsistentGroupProtocol,
        ErrorCode::InvalidGroupId,
        ErrorCode::UnknownMemberId,
        ErrorCode::InvalidSessionTimeout,
        ErrorCode::RebalanceInProgress,
        ErrorCode::GroupAuthorizationFailed,
        ErrorCode::UnsupportedVersion,
        ErrorCode::InvalidPartitions,
        ErrorCode::InvalidRequest,
        ErrorCode::AuthenticationFailed,
        ErrorCode::NonEmptyGroup,
        ErrorCode::GroupIdNotFound,
        ErrorCode::MemberIdRequired,
        ErrorCode::GroupMaxSizeReached,
        ErrorCode::FencedInstanceId,
        ErrorCode::IllegalState,
        ErrorCode::TooManyConnections,
    ];

    /// The wire value.
    #[inline]
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// The code for a wire value, or `None` for a number this version does not know (a newer
    /// peer may send one: treat it as an error you cannot interpret, not as a decode failure).
    pub const fn from_code(code: i16) -> Option<ErrorCode> {
        Some(match code {
            0 => ErrorCode::None,
            -1 => ErrorCode::UnknownServerError,
            3 => ErrorCode::UnknownTopicOrPartition,
            10 => ErrorCode::MessageTooLarge,
            12 => ErrorCode::OffsetMetadataTooLarge,
            14 => ErrorCode::CoordinatorLoadInProgress,
            15 => ErrorCode::CoordinatorNotAvailable,
            16 => ErrorCode::NotCoordinator,
            17 => ErrorCode::InvalidTopic,
            22 => ErrorCode::IllegalGeneration,
            23 => ErrorCode::InconsistentGroupProtocol,
            24 => ErrorCode::InvalidGroupId,
            25 => ErrorCode::UnknownMemberId,
            26 => ErrorCode::InvalidSessionTimeout,
            27 => ErrorCode::RebalanceInProgress,
            30 => ErrorCode::GroupAuthorizationFailed,
            35 => ErrorCode::UnsupportedVersion,
            37 => ErrorCode::InvalidPartitions,
            42 => ErrorCode::InvalidRequest,
            58 => ErrorCode::AuthenticationFailed,
            68 => ErrorCode::NonEmptyGroup,
            69 => ErrorCode::GroupIdNotFound,
            79 => ErrorCode::MemberIdRequired,
            81 => ErrorCode::GroupMaxSizeReached,
            82 => ErrorCode::FencedInstanceId,
            200 => ErrorCode::IllegalState,
            201 => ErrorCode::TooManyConnections,
            _ => return None,
        })
    }

    /// The protocol name of the code, as in `docs/protocol.md` (e.g. `"REBALANCE_IN_PROGRESS"`).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::None => "NONE",
            ErrorCode::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            ErrorCode::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            ErrorCode::MessageTooLarge => "MESSAGE_TOO_LARGE",
            ErrorCode::OffsetMetadataTooLarge => "OFFSET_METADATA_TOO_LARGE",
            ErrorCode::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            ErrorCode::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            ErrorCode::NotCoordinator => "NOT_COORDINATOR",
            ErrorCode::InvalidTopic => "INVALID_TOPIC",
            ErrorCode::IllegalGeneration => "ILLEGAL_GENERATION",
            ErrorCode::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            ErrorCode::InvalidGroupId => "INVALID_GROUP_ID",
            ErrorCode::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            ErrorCode::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            ErrorCode::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            ErrorCode::GroupAuthorizationFailed => "GROUP_AUTHORIZATION_FAILED",
            ErrorCode::UnsupportedVersion => "UNSUPPORTED_VERSION",
            ErrorCode::InvalidPartitions => "INVALID_PARTITIONS",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::AuthenticationFailed => "AUTHENTICATION_FAILED",
            ErrorCode::NonEmptyGroup => "NON_EMPTY_GROUP",
            ErrorCode::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            ErrorCode::MemberIdRequired => "MEMBER_ID_REQUIRED",
            ErrorCode::GroupMaxSizeReached => "GROUP_MAX_SIZE_REACHED",
            ErrorCode::FencedInstanceId => "FENCED_INSTANCE_ID",
            ErrorCode::IllegalState => "ILLEGAL_STATE",
            ErrorCode::TooManyConnections => "TOO_MANY_CONNECTIONS",
        }
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
        let pinned: [(ErrorCode, i16, &str); 27] = [
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
                ErrorCode::GroupAuthorizationFailed,
                30,
                "GROUP_AUTHORIZATION_FAILED",
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
            (ErrorCode::IllegalState, 200, "ILLEGAL_STATE"),
            (ErrorCode::TooManyConnections, 201, "TOO_MANY_CONNECTIONS"),
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
