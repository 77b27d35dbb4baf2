//! Per message type: for a non-trivial sample and for the all-defaults value, the encoding
//! round-trips, a trailing byte is refused, every strict prefix is refused, the whole frame
//! carries the right length prefix, and the bytes are bincode 1.3's.

use super::samples::{self, req, resp};
use super::Msg;
use crate::*;

pub fn check_round_trip(msg: &Msg) {
    let payload = msg.payload();
    assert_eq!(msg.decode_like(&payload).as_ref(), Ok(msg));
    let frame = msg.frame();
    let (body, consumed) = split_frame(&frame, u32::MAX)
        .expect("valid length")
        .expect("whole frame");
    assert_eq!(consumed, frame.len());
    assert_eq!(body, &payload[..]);
    assert_eq!(
        u32::from_be_bytes(frame[..4].try_into().expect("4 bytes")) as usize,
        payload.len()
    );
}

pub fn check_whole_buffer_consumed(msg: &Msg) {
    for extra in [&[0u8][..], &[0xff], &[0, 0, 0, 0]] {
        let mut payload = msg.payload();
        payload.extend_from_slice(extra);
        assert_eq!(
            msg.decode_like(&payload),
            Err(DecodeError::TrailingBytes),
            "trailing {extra:?}"
        );
    }
}

pub fn check_every_strict_prefix_fails(msg: &Msg) {
    let payload = msg.payload();
    for cut in 0..payload.len() {
        let result = msg.decode_like(&payload[..cut]);
        assert!(
            result.is_err(),
            "prefix of {cut}/{} bytes decoded: {result:?}",
            payload.len()
        );
    }
}

pub fn check_bincode_identical(msg: &Msg) {
    let ours = msg.payload();
    assert_eq!(ours, msg.bincode(), "wincode and bincode 1.3 bytes differ");
    // Each side decodes the other's bytes.
    assert_eq!(&msg.bincode_decode_like(&ours), msg);
    assert_eq!(msg.decode_like(&msg.bincode()).as_ref(), Ok(msg));
}

/// The all-defaults value of a message; for OffsetReset, which has no `Default` (no reset target
/// is a natural default), its smallest value.
trait Minimal {
    fn minimal() -> Self;
}

impl<T: Default> Minimal for T {
    fn minimal() -> Self {
        T::default()
    }
}

impl Minimal for OffsetResetRequest {
    fn minimal() -> Self {
        OffsetResetRequest {
            group_id: String::new(),
            to: ResetTo::EarliestRecorded,
            topics: Vec::new(),
            execute: false,
        }
    }
}

macro_rules! message_tests {
    ($($kind:ident $name:ident => $inner:ident;)*) => {$(
        mod $name {
            use super::*;

            fn values() -> [Msg; 2] {
                [
                    message_tests!(@wrap $kind samples::$name()),
                    message_tests!(@default $kind $inner),
                ]
            }

            #[test]
            fn round_trip() {
                values().iter().for_each(check_round_trip);
            }

            #[test]
            fn whole_buffer_consumed() {
                values().iter().for_each(check_whole_buffer_consumed);
            }

            #[test]
            fn every_strict_prefix_fails() {
                values().iter().for_each(check_every_strict_prefix_fails);
            }

            #[test]
            fn bytes_identical_to_bincode() {
                values().iter().for_each(check_bincode_identical);
            }
        }
    )*};
    (@wrap request $e:expr) => { Msg::Req($e) };
    (@wrap response $e:expr) => { Msg::Resp($e) };
    (@default request $inner:ident) => { Msg::Req(req(0, <$inner as Minimal>::minimal())) };
    (@default response $inner:ident) => { Msg::Resp(resp(0, <$inner as Minimal>::minimal())) };
}

message_tests! {
    request hello_request => HelloRequest;
    request join_group_request => JoinGroupRequest;
    request sync_group_request => SyncGroupRequest;
    request heartbeat_request => HeartbeatRequest;
    request leave_group_request => LeaveGroupRequest;
    request offset_commit_request => OffsetCommitRequest;
    request offset_fetch_request => OffsetFetchRequest;
    request describe_groups_request => DescribeGroupsRequest;
    request list_groups_request => ListGroupsRequest;
    request delete_groups_request => DeleteGroupsRequest;
    request create_topics_request => CreateTopicsRequest;
    request describe_topics_request => DescribeTopicsRequest;
    request find_coordinator_request => FindCoordinatorRequest;
    request describe_cluster_request => DescribeClusterRequest;
    request group_history_request => GroupHistoryRequest;
    request group_diagnosis_request => GroupDiagnosisRequest;
    request consumer_group_heartbeat_request => ConsumerGroupHeartbeatRequest;
    request consumer_group_describe_request => ConsumerGroupDescribeRequest;
    request group_simulate_request => GroupSimulateRequest;
    request ownership_epochs_request => OwnershipEpochsRequest;
    request offset_history_request => OffsetHistoryRequest;
    request offset_reset_request => OffsetResetRequest;
    request offset_restore_request => OffsetRestoreRequest;
    response hello_response => HelloResponse;
    response join_group_response => JoinGroupResponse;
    response sync_group_response => SyncGroupResponse;
    response heartbeat_response => HeartbeatResponse;
    response leave_group_response => LeaveGroupResponse;
    response offset_commit_response => OffsetCommitResponse;
    response offset_fetch_response => OffsetFetchResponse;
    response describe_groups_response => DescribeGroupsResponse;
    response list_groups_response => ListGroupsResponse;
    response delete_groups_response => DeleteGroupsResponse;
    response create_topics_response => CreateTopicsResponse;
    response describe_topics_response => DescribeTopicsResponse;
    response error_response => ErrorResponse;
    response find_coordinator_response => FindCoordinatorResponse;
    response describe_cluster_response => DescribeClusterResponse;
    response group_history_response => GroupHistoryResponse;
    response group_diagnosis_response => GroupDiagnosisResponse;
    response consumer_group_heartbeat_response => ConsumerGroupHeartbeatResponse;
    response consumer_group_describe_response => ConsumerGroupDescribeResponse;
    response group_simulate_response => GroupSimulateResponse;
    response ownership_epochs_response => OwnershipEpochsResponse;
    response offset_history_response => OffsetHistoryResponse;
    response offset_reset_response => OffsetResetResponse;
    response offset_restore_response => OffsetRestoreResponse;
}

/// The samples above cover every variant; the `match`es have no wildcard, so a new variant
/// does not compile until it is given a sample here.
#[test]
fn samples_cover_every_variant() {
    let requests = [
        samples::hello_request(),
        samples::join_group_request(),
        samples::sync_group_request(),
        samples::heartbeat_request(),
        samples::leave_group_request(),
        samples::offset_commit_request(),
        samples::offset_fetch_request(),
        samples::describe_groups_request(),
        samples::list_groups_request(),
        samples::delete_groups_request(),
        samples::create_topics_request(),
        samples::describe_topics_request(),
        samples::find_coordinator_request(),
        samples::describe_cluster_request(),
        samples::group_history_request(),
        samples::group_diagnosis_request(),
        samples::consumer_group_heartbeat_request(),
        samples::consumer_group_describe_request(),
        samples::group_simulate_request(),
        samples::ownership_epochs_request(),
        samples::offset_history_request(),
        samples::offset_reset_request(),
        samples::offset_restore_request(),
    ];
    let tags: Vec<u32> = requests
        .iter()
        .map(|f| match &f.request {
            Request::Hello(_)
            | Request::JoinGroup(_)
            | Request::SyncGroup(_)
            | Request::Heartbeat(_)
            | Request::LeaveGroup(_)
            | Request::OffsetCommit(_)
            | Request::OffsetFetch(_)
            | Request::DescribeGroups(_)
            | Request::ListGroups(_)
            | Request::DeleteGroups(_)
            | Request::CreateTopics(_)
            | Request::DescribeTopics(_)
            | Request::FindCoordinator(_)
            | Request::DescribeCluster(_)
            | Request::GroupHistory(_)
            | Request::GroupDiagnosis(_)
            | Request::ConsumerGroupHeartbeat(_)
            | Request::ConsumerGroupDescribe(_)
            | Request::GroupSimulate(_)
            | Request::OwnershipEpochs(_)
            | Request::OffsetHistory(_)
            | Request::OffsetReset(_)
            | Request::OffsetRestore(_) => f.request.tag(),
        })
        .collect();
    assert_eq!(tags, (0..23).collect::<Vec<_>>());
    // REQUEST_NAMES (metrics labels) is indexed by tag.
    for f in &requests {
        assert_eq!(REQUEST_NAMES[f.request.tag() as usize], f.request.name());
    }
    assert_eq!(REQUEST_NAMES.len(), requests.len());

    let responses = [
        samples::hello_response(),
        samples::join_group_response(),
        samples::sync_group_response(),
        samples::heartbeat_response(),
        samples::leave_group_response(),
        samples::offset_commit_response(),
        samples::offset_fetch_response(),
        samples::describe_groups_response(),
        samples::list_groups_response(),
        samples::delete_groups_response(),
        samples::create_topics_response(),
        samples::describe_topics_response(),
        samples::error_response(),
        samples::find_coordinator_response(),
        samples::describe_cluster_response(),
        samples::group_history_response(),
        samples::group_diagnosis_response(),
        samples::consumer_group_heartbeat_response(),
        samples::consumer_group_describe_response(),
        samples::group_simulate_response(),
        samples::ownership_epochs_response(),
        samples::offset_history_response(),
        samples::offset_reset_response(),
        samples::offset_restore_response(),
    ];
    let tags: Vec<u32> = responses
        .iter()
        .map(|f| match &f.response {
            Response::Hello(_)
            | Response::JoinGroup(_)
            | Response::SyncGroup(_)
            | Response::Heartbeat(_)
            | Response::LeaveGroup(_)
            | Response::OffsetCommit(_)
            | Response::OffsetFetch(_)
            | Response::DescribeGroups(_)
            | Response::ListGroups(_)
            | Response::DeleteGroups(_)
            | Response::CreateTopics(_)
            | Response::DescribeTopics(_)
            | Response::Error(_)
            | Response::FindCoordinator(_)
            | Response::DescribeCluster(_)
            | Response::GroupHistory(_)
            | Response::GroupDiagnosis(_)
            | Response::ConsumerGroupHeartbeat(_)
            | Response::ConsumerGroupDescribe(_)
            | Response::GroupSimulate(_)
            | Response::OwnershipEpochs(_)
            | Response::OffsetHistory(_)
            | Response::OffsetReset(_)
            | Response::OffsetRestore(_) => f.response.tag(),
        })
        .collect();
    assert_eq!(tags, (0..24).collect::<Vec<_>>());
    // Every response but `Error` answers the request of the same name.
    for f in &responses {
        let name = f.response.name();
        assert!(
            name == "Error" || REQUEST_NAMES.contains(&name),
            "{name} answers no request"
        );
    }
}

/// The tag that `tag()` reports is the u32 LE that the encoding puts after the correlation id.
#[test]
fn tag_is_the_encoded_variant_index() {
    for f in [
        samples::hello_request(),
        samples::describe_topics_request(),
        samples::find_coordinator_request(),
        samples::describe_cluster_request(),
        samples::consumer_group_heartbeat_request(),
        samples::consumer_group_describe_request(),
        samples::group_simulate_request(),
        samples::ownership_epochs_request(),
        samples::offset_history_request(),
        samples::offset_reset_request(),
        samples::offset_restore_request(),
    ] {
        let payload = Msg::Req(f.clone()).payload();
        assert_eq!(&payload[4..8], &f.request.tag().to_le_bytes());
    }
    for f in [
        samples::hello_response(),
        samples::error_response(),
        samples::find_coordinator_response(),
        samples::describe_cluster_response(),
        samples::consumer_group_heartbeat_response(),
        samples::consumer_group_describe_response(),
        samples::group_simulate_response(),
        samples::ownership_epochs_response(),
        samples::offset_history_response(),
        samples::offset_reset_response(),
        samples::offset_restore_response(),
    ] {
        let payload = Msg::Resp(f.clone()).payload();
        assert_eq!(&payload[4..8], &f.response.tag().to_le_bytes());
    }
}

#[test]
fn names_match_variants() {
    assert_eq!(samples::join_group_request().request.name(), "JoinGroup");
    assert_eq!(
        samples::describe_topics_request().request.name(),
        "DescribeTopics"
    );
    assert_eq!(
        samples::offset_fetch_response().response.name(),
        "OffsetFetch"
    );
    assert_eq!(samples::error_response().response.name(), "Error");
    assert_eq!(
        samples::find_coordinator_request().request.name(),
        "FindCoordinator"
    );
    assert_eq!(
        samples::describe_cluster_request().request.name(),
        "DescribeCluster"
    );
    assert_eq!(
        samples::find_coordinator_response().response.name(),
        "FindCoordinator"
    );
    assert_eq!(
        samples::describe_cluster_response().response.name(),
        "DescribeCluster"
    );
    for (frame, name) in [
        (
            samples::consumer_group_heartbeat_request(),
            "ConsumerGroupHeartbeat",
        ),
        (
            samples::consumer_group_describe_request(),
            "ConsumerGroupDescribe",
        ),
        (samples::group_simulate_request(), "GroupSimulate"),
        (samples::ownership_epochs_request(), "OwnershipEpochs"),
        (samples::offset_history_request(), "OffsetHistory"),
        (samples::offset_reset_request(), "OffsetReset"),
        (samples::offset_restore_request(), "OffsetRestore"),
    ] {
        assert_eq!(frame.request.name(), name);
    }
    for (frame, name) in [
        (
            samples::consumer_group_heartbeat_response(),
            "ConsumerGroupHeartbeat",
        ),
        (
            samples::consumer_group_describe_response(),
            "ConsumerGroupDescribe",
        ),
        (samples::group_simulate_response(), "GroupSimulate"),
        (samples::ownership_epochs_response(), "OwnershipEpochs"),
        (samples::offset_history_response(), "OffsetHistory"),
        (samples::offset_reset_response(), "OffsetReset"),
        (samples::offset_restore_response(), "OffsetRestore"),
    ] {
        assert_eq!(frame.response.name(), name);
    }
}

/// The consumer protocol's requests answer with the tag one above their own (protocol-v1 §7:
/// request 16, 17, 18 → response 17, 18, 19, as for every request after `Error`).
#[test]
fn consumer_protocol_tags_are_pinned() {
    let tags = |f: RequestFrame| f.request.tag();
    assert_eq!(tags(samples::consumer_group_heartbeat_request()), 16);
    assert_eq!(tags(samples::consumer_group_describe_request()), 17);
    assert_eq!(tags(samples::group_simulate_request()), 18);
    let tags = |f: ResponseFrame| f.response.tag();
    assert_eq!(tags(samples::consumer_group_heartbeat_response()), 17);
    assert_eq!(tags(samples::consumer_group_describe_response()), 18);
    assert_eq!(tags(samples::group_simulate_response()), 19);
}

/// `Response::error_code` reads the top-level code of the new answers; ConsumerGroupDescribe,
/// like DescribeGroups, has only per-group codes and answers 0.
#[test]
fn consumer_answers_report_their_error_code() {
    let fenced = Response::from(ConsumerGroupHeartbeatResponse {
        error_code: ErrorCode::FencedMemberEpoch.code(),
        ..ConsumerGroupHeartbeatResponse::default()
    });
    assert_eq!(fenced.error_code(), 110);
    let simulate = Response::from(GroupSimulateResponse {
        error_code: ErrorCode::InvalidPartitions.code(),
        ..GroupSimulateResponse::default()
    });
    assert_eq!(simulate.error_code(), 37);
    // Its only entry is GROUP_ID_NOT_FOUND, yet the answer as a whole has no error.
    let describe = Response::from(ConsumerGroupDescribeResponse {
        groups: vec![DescribedConsumerGroup {
            error_code: ErrorCode::GroupIdNotFound.code(),
            ..DescribedConsumerGroup::default()
        }],
    });
    assert_eq!(describe.error_code(), 0);
}

/// DescribeCluster has no fields: its payload is the correlation id and the tag, nothing more.
#[test]
fn describe_cluster_request_is_its_tag_alone() {
    let payload = Msg::Req(samples::describe_cluster_request()).payload();
    let mut expected = (u32::MAX - 1).to_le_bytes().to_vec();
    expected.extend_from_slice(&13u32.to_le_bytes());
    assert_eq!(payload, expected);
}

/// The top-level error code of the cluster answers is what `Response::error_code` reports.
#[test]
fn cluster_answers_report_their_error_code() {
    let find = Response::from(FindCoordinatorResponse {
        error_code: ErrorCode::InvalidGroupId.code(),
        ..FindCoordinatorResponse::default()
    });
    assert_eq!(find.error_code(), 24);
    let describe = Response::from(DescribeClusterResponse {
        error_code: ErrorCode::CoordinatorNotAvailable.code(),
        ..DescribeClusterResponse::default()
    });
    assert_eq!(describe.error_code(), 15);
    assert_eq!(
        samples::describe_cluster_response().response.error_code(),
        0
    );
}

#[test]
fn hello_debug_never_shows_the_token() {
    let hello = crate::HelloRequest {
        protocol_version: 1,
        client_id: "c".into(),
        auth_token: Some("s3cret-token".into()),
    };
    let shown = format!("{:?}", crate::Request::Hello(hello));
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(
        shown.contains("<redacted>") && shown.contains("client_id"),
        "{shown}"
    );
}

/// The element sizes docs/protocol.md §2 and §6.18 count with ("The largest answer"): wincode
/// refuses a sequence needing more than 4 MiB, so these sizes bound how many entries an answer
/// can hold (26 214 `DescribedMember`s, 18 724 `ConsumerMember`s, 34 952 `SimulatedMember`s).
#[cfg(target_pointer_width = "64")]
#[test]
fn answer_element_sizes_are_the_documented_ones() {
    use std::mem::size_of;
    assert_eq!(size_of::<DescribedMember>(), 160);
    assert_eq!(size_of::<JoinedMember>(), 120);
    assert_eq!(size_of::<ListedGroup>(), 56);
    assert_eq!(size_of::<ConsumerMember>(), 224);
    assert_eq!(size_of::<SimulatedMember>(), 120);
    let limit = wincode::config::DEFAULT_PREALLOCATION_SIZE_LIMIT;
    assert_eq!(limit / size_of::<DescribedMember>(), 26_214);
    assert_eq!(limit / size_of::<ConsumerMember>(), 18_724);
    assert_eq!(limit / size_of::<SimulatedMember>(), 34_952);
}
