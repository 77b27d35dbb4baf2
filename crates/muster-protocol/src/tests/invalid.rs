//! Hand-made invalid payloads: each is refused with the right error, quickly, without panicking
//! or allocating for a hostile length.

use super::samples;
use super::Msg;
use crate::*;

fn le32(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}

fn le64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// correlation id 7, then `tag`, then `rest`.
fn payload(tag: u32, rest: &[&[u8]]) -> Vec<u8> {
    let mut p = le32(7).to_vec();
    p.extend_from_slice(&le32(tag));
    for part in rest {
        p.extend_from_slice(part);
    }
    p
}

fn string(s: &str) -> Vec<u8> {
    let mut v = le64(s.len() as u64).to_vec();
    v.extend_from_slice(s.as_bytes());
    v
}

#[test]
fn hand_built_hello_decodes() {
    // Sanity check of the helpers: Hello { 1, "c", None }.
    let p = payload(0, &[&1u16.to_le_bytes(), &string("c"), &[0]]);
    assert_eq!(
        decode_request(&p),
        Ok(samples::req(
            7,
            HelloRequest {
                protocol_version: 1,
                client_id: "c".into(),
                auth_token: None,
            }
        ))
    );
}

#[test]
fn bool_byte_two_is_refused() {
    // Heartbeat response frame is too simple; use JoinGroup's skip_assignment.
    let mut ok = Msg::Resp(samples::resp(
        7,
        JoinGroupResponse {
            skip_assignment: true,
            ..Default::default()
        },
    ))
    .payload();
    // error_code i16, generation i32, assignor None, leader "", member "", then the bool.
    let at = 4 + 4 + 2 + 4 + 1 + 8 + 8;
    assert_eq!(ok[at], 1);
    ok[at] = 2;
    assert_eq!(decode_response(&ok), Err(DecodeError::InvalidBool(2)));
    ok[at] = 0xff;
    assert_eq!(decode_response(&ok), Err(DecodeError::InvalidBool(0xff)));
}

#[test]
fn option_tag_two_is_refused() {
    let p = payload(0, &[&1u16.to_le_bytes(), &string("c"), &[2], &string("t")]);
    assert!(
        matches!(decode_request(&p), Err(DecodeError::InvalidTag(_))),
        "{:?}",
        decode_request(&p)
    );
    // The same bytes with tag 1 are valid: only the tag is wrong.
    let p = payload(0, &[&1u16.to_le_bytes(), &string("c"), &[1], &string("t")]);
    assert!(decode_request(&p).is_ok());
}

#[test]
fn enum_tag_out_of_range_is_refused() {
    // Request has tags 0..=22; Response 0..=23.
    for tag in [23, 24, 255, 0x0100, u32::MAX] {
        let p = payload(tag, &[&[0; 32]]);
        assert!(
            matches!(decode_request(&p), Err(DecodeError::InvalidTag(_))),
            "request tag {tag}"
        );
    }
    for tag in [24, 25, u32::MAX] {
        let p = payload(tag, &[&[0; 32]]);
        assert!(
            matches!(decode_response(&p), Err(DecodeError::InvalidTag(_))),
            "response tag {tag}"
        );
    }
    // Tag 23 is a valid response (OffsetRestore) but not a valid request: error_code,
    // error_message None, executed false, quarantined_at_ms, drop_at_ms, no topics.
    let p = payload(
        23,
        &[
            &0i16.to_le_bytes(),
            &[0],
            &[0],
            &le64(0),
            &le64(0),
            &le64(0),
        ],
    );
    assert_eq!(
        decode_response(&p),
        Ok(samples::resp(7, OffsetRestoreResponse::default()))
    );
    assert!(matches!(
        decode_request(&p),
        Err(DecodeError::InvalidTag(_))
    ));
}

/// The offset-protection requests sit at tags 19..=22 and their answers one above: tag 19 is
/// OwnershipEpochs as a request and GroupSimulate as a response, and the bytes of an
/// OffsetRestore request (22) are no OffsetReset response (22).
#[test]
fn offset_protection_tags_decode_as_their_messages() {
    let p = payload(
        19,
        &[&string("orders"), &3i32.to_le_bytes(), &string("c-1"), &[0]],
    );
    assert_eq!(
        decode_request(&p),
        Ok(samples::req(
            7,
            OwnershipEpochsRequest {
                group_id: "orders".into(),
                generation_id: 3,
                member_id: "c-1".into(),
                group_instance_id: None,
            }
        ))
    );
    assert!(decode_response(&p).is_err());
    let p = payload(22, &[&string("orders"), &[1]]);
    assert_eq!(
        decode_request(&p),
        Ok(samples::req(
            7,
            OffsetRestoreRequest {
                group_id: "orders".into(),
                execute: true,
            }
        ))
    );
    assert!(decode_response(&p).is_err());
    // `execute` is a bool: a byte of 2 is refused.
    let mut bad = p.clone();
    let last = bad.len() - 1;
    bad[last] = 2;
    assert_eq!(decode_request(&bad), Err(DecodeError::InvalidBool(2)));
}

/// `ResetTo` has variants 0..=3 (Time, EarliestRecorded, ShiftBy, Offset): a fifth is refused.
#[test]
fn reset_target_tag_out_of_range_is_refused() {
    // OffsetReset { "g", ResetTo::EarliestRecorded, [], false }, then the same with tag 4.
    let reset = |target: u32| payload(21, &[&string("g"), &le32(target), &le64(0), &[0]]);
    assert_eq!(
        decode_request(&reset(1)),
        Ok(samples::req(
            7,
            OffsetResetRequest {
                group_id: "g".into(),
                to: ResetTo::EarliestRecorded,
                topics: vec![],
                execute: false,
            }
        ))
    );
    for target in [4, 5, u32::MAX] {
        assert!(
            matches!(
                decode_request(&reset(target)),
                Err(DecodeError::InvalidTag(_))
            ),
            "reset target {target}"
        );
    }
}

/// The consumer protocol's requests sit at tags 16..=18 and their answers one above: the bytes
/// of a ConsumerGroupDescribe request (17) are a different message as a response (18).
#[test]
fn consumer_protocol_tags_decode_as_their_messages() {
    let p = payload(17, &[&le64(1), &string("orders")]);
    assert_eq!(
        decode_request(&p),
        Ok(samples::req(
            7,
            ConsumerGroupDescribeRequest {
                group_ids: vec!["orders".into()],
            }
        ))
    );
    // As response 17 (ConsumerGroupHeartbeat) the same bytes are truncated.
    assert!(decode_response(&p).is_err());
    // A heartbeat answer with no assignment: error_code, error_message None, member_id,
    // member_epoch, heartbeat_interval_ms, assignment None.
    let p = payload(
        17,
        &[
            &ErrorCode::FencedMemberEpoch.code().to_le_bytes(),
            &[0],
            &string("m"),
            &0i32.to_le_bytes(),
            &0i32.to_le_bytes(),
            &[0],
        ],
    );
    assert_eq!(
        decode_response(&p),
        Ok(samples::resp(
            7,
            ConsumerGroupHeartbeatResponse {
                error_code: 110,
                member_id: "m".into(),
                ..ConsumerGroupHeartbeatResponse::default()
            }
        ))
    );
    // An Option byte of 2 for `assignment` is refused.
    let mut bad = p.clone();
    let last = bad.len() - 1;
    bad[last] = 2;
    assert!(matches!(
        decode_response(&bad),
        Err(DecodeError::InvalidTag(_))
    ));
}

#[test]
fn request_and_response_tags_differ_after_error() {
    // Response 12 is Error, so the answer to request tag 12 (FindCoordinator) is response tag
    // 13, and to 13 (DescribeCluster) 14: a FindCoordinator request's bytes are no response.
    let p = payload(12, &[&string("orders")]);
    assert_eq!(
        decode_request(&p),
        Ok(samples::req(
            7,
            FindCoordinatorRequest {
                key: "orders".into()
            }
        ))
    );
    assert!(decode_response(&p).is_err());
    let p = payload(13, &[]);
    assert_eq!(
        decode_request(&p),
        Ok(samples::req(7, DescribeClusterRequest {}))
    );
}

#[test]
fn invalid_utf8_is_refused() {
    for bad in [
        &[0xff][..],
        &[0xc3],
        &[0xed, 0xa0, 0x80],
        &[b'a', 0x80, b'b'],
    ] {
        let mut s = le64(bad.len() as u64).to_vec();
        s.extend_from_slice(bad);
        let p = payload(0, &[&1u16.to_le_bytes(), &s, &[0]]);
        assert!(
            matches!(decode_request(&p), Err(DecodeError::InvalidUtf8(_))),
            "{bad:?}: {:?}",
            decode_request(&p)
        );
    }
}

#[test]
fn huge_sequence_lengths_fail_fast() {
    let started = std::time::Instant::now();
    // Vec<String> (DescribeGroups.group_ids) claiming u64::MAX elements.
    let p = payload(7, &[&le64(u64::MAX)]);
    assert!(
        matches!(decode_request(&p), Err(DecodeError::LengthLimit(_))),
        "{:?}",
        decode_request(&p)
    );
    // A String claiming u64::MAX bytes (Hello.client_id).
    let p = payload(0, &[&1u16.to_le_bytes(), &le64(u64::MAX)]);
    assert!(decode_request(&p).is_err());
    // Vec<u8> claiming u64::MAX bytes (SyncGroup response user_data), and just over 4 MiB.
    for len in [u64::MAX, (4 << 20) + 1, u64::from(u32::MAX)] {
        let p = payload(
            2,
            &[&0i16.to_le_bytes(), &[0], &le64(0), &le64(len), &[1, 2, 3]],
        );
        assert!(decode_response(&p).is_err(), "{len}");
    }
    // A plausible length (within limits) that the payload does not back is merely truncated.
    let p = payload(7, &[&le64(1000), &string("only one")]);
    assert!(
        matches!(decode_request(&p), Err(DecodeError::Truncated(_))),
        "{:?}",
        decode_request(&p)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn truncated_and_empty_payloads_are_refused() {
    assert!(matches!(
        decode_request(&[]),
        Err(DecodeError::Truncated(_))
    ));
    assert!(matches!(
        decode_response(&[1, 2, 3]),
        Err(DecodeError::Truncated(_))
    ));
    // A correlation id alone, without a request.
    assert!(matches!(
        decode_request(&le32(5)),
        Err(DecodeError::Truncated(_))
    ));
    assert_eq!(correlation_hint(&le32(5)), 5);
}

#[test]
fn decode_errors_have_readable_messages() {
    let e = decode_request(&payload(99, &[])).expect_err("bad tag");
    assert!(
        e.to_string().starts_with("invalid enum or option tag"),
        "{e}"
    );
    assert_eq!(
        DecodeError::TrailingBytes.to_string(),
        "payload has trailing bytes after a complete message"
    );
    assert_eq!(
        DecodeError::InvalidBool(2).to_string(),
        "invalid bool byte 2 (must be 0 or 1)"
    );
}

#[test]
fn encode_leaves_dst_unchanged_on_error() {
    // A sequence over wincode's 4 MiB preallocation limit cannot be encoded (the peer could not
    // decode it): the call fails and `dst` keeps only what it had.
    let frame = samples::resp(
        1,
        SyncGroupResponse {
            user_data: vec![0; (4 << 20) + 1],
            ..Default::default()
        },
    );
    let mut dst = vec![1, 2, 3];
    let err = encode_response(&frame, &mut dst).expect_err("too large");
    assert!(matches!(err, EncodeError::Encode(_)), "{err}");
    assert_eq!(dst, [1, 2, 3]);
}
