//! The offset-protection messages (docs/protocol.md §6.23–§6.25) beyond what `messages.rs`
//! checks for every message: their pinned tags, their top-level error codes, every
//! [`ResetTo`] variant on the wire, and the element size that bounds an OffsetHistory answer.

use super::messages::{
    check_bincode_identical, check_every_strict_prefix_fails, check_round_trip,
    check_whole_buffer_consumed,
};
use super::samples::{self, req};
use super::Msg;
use crate::*;

/// The requests are appended at 19..=22, and answered (as every request after `Error`) one
/// above: 20..=23.
#[test]
fn offset_protection_tags_are_pinned() {
    let tags = |f: RequestFrame| f.request.tag();
    assert_eq!(tags(samples::ownership_epochs_request()), 19);
    assert_eq!(tags(samples::offset_history_request()), 20);
    assert_eq!(tags(samples::offset_reset_request()), 21);
    assert_eq!(tags(samples::offset_restore_request()), 22);
    let tags = |f: ResponseFrame| f.response.tag();
    assert_eq!(tags(samples::ownership_epochs_response()), 20);
    assert_eq!(tags(samples::offset_history_response()), 21);
    assert_eq!(tags(samples::offset_reset_response()), 22);
    assert_eq!(tags(samples::offset_restore_response()), 23);
}

/// `Response::error_code` reads each answer's top-level code, not its per-partition ones.
#[test]
fn offset_answers_report_their_error_code() {
    let epochs = Response::from(OwnershipEpochsResponse {
        error_code: ErrorCode::StaleMemberEpoch.code(),
        ..OwnershipEpochsResponse::default()
    });
    assert_eq!(epochs.error_code(), 113);
    // Its only partition is denied, yet the answer as a whole has no error.
    let history = Response::from(OffsetHistoryResponse {
        topics: vec![TopicHistory {
            topic: "t".into(),
            partitions: vec![PartitionHistory {
                partition: 0,
                error_code: ErrorCode::TopicAuthorizationFailed.code(),
                entries: Vec::new(),
            }],
        }],
        ..OffsetHistoryResponse::default()
    });
    assert_eq!(history.error_code(), 0);
    let reset = Response::from(OffsetResetResponse {
        error_code: ErrorCode::NonEmptyGroup.code(),
        error_message: Some("members: m-1 (1 in all)".into()),
        ..OffsetResetResponse::default()
    });
    assert_eq!(reset.error_code(), 68);
    assert_eq!(samples::offset_reset_response().response.error_code(), 42);
    let restore = Response::from(OffsetRestoreResponse {
        error_code: ErrorCode::GroupIdNotFound.code(),
        ..OffsetRestoreResponse::default()
    });
    assert_eq!(restore.error_code(), 69);
}

fn reset_with(to: ResetTo) -> Msg {
    Msg::Req(req(
        9,
        OffsetResetRequest {
            group_id: "g".into(),
            to,
            topics: vec![samples::tp("t", &[0])],
            execute: false,
        },
    ))
}

/// Each reset target encodes as its `u32` variant index (0 Time, 1 EarliestRecorded, 2 ShiftBy,
/// 3 Offset) then its field, right after the group id; and every one passes the checks every
/// message gets.
#[test]
fn every_reset_target_is_its_index_then_its_field() {
    let expected: [(u32, &[u8]); 4] = [
        (0, &u64::MAX.to_le_bytes()),
        (1, &[]),
        (2, &(-1i64).to_le_bytes()),
        (3, &i64::MAX.to_le_bytes()),
    ];
    for (to, (index, field)) in samples::reset_targets().into_iter().zip(expected) {
        let msg = reset_with(to.clone());
        check_round_trip(&msg);
        check_whole_buffer_consumed(&msg);
        check_every_strict_prefix_fails(&msg);
        check_bincode_identical(&msg);
        // correlation id, tag, group_id "g" (8 + 1 bytes), then the target.
        let payload = msg.payload();
        let at = 4 + 4 + 8 + 1;
        assert_eq!(&payload[at..at + 4], &index.to_le_bytes(), "{to:?}");
        assert_eq!(&payload[at + 4..at + 4 + field.len()], field, "{to:?}");
    }
}

/// The server caps an OffsetHistory answer at 10 000 entries (§6.24); one partition's entries
/// are one sequence, and wincode refuses a sequence needing more than 4 MiB, so the cap must
/// stay under what that many `OffsetHistoryEntry`s take.
#[cfg(target_pointer_width = "64")]
#[test]
fn a_capped_history_answer_encodes() {
    use std::mem::size_of;
    assert_eq!(size_of::<OffsetHistoryEntry>(), 152);
    let limit = wincode::config::DEFAULT_PREALLOCATION_SIZE_LIMIT;
    assert_eq!(limit / size_of::<OffsetHistoryEntry>(), 27_594);
    let entry = OffsetHistoryEntry {
        kind: "commit".into(),
        ..OffsetHistoryEntry::default()
    };
    let answer = samples::resp(
        1,
        OffsetHistoryResponse {
            error_code: 0,
            topics: vec![TopicHistory {
                topic: "t".into(),
                partitions: vec![PartitionHistory {
                    partition: 0,
                    error_code: 0,
                    entries: vec![entry; 10_000],
                }],
            }],
            omitted: 0,
        },
    );
    let mut wire = Vec::new();
    encode_response(&answer, &mut wire).expect("10 000 entries encode");
    let (payload, _) = split_frame(&wire, u32::MAX)
        .expect("valid length")
        .expect("whole frame");
    assert_eq!(decode_response(payload), Ok(answer));
}
