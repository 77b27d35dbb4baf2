//! The codec's pinned bytes, round trips, migrations' decoders and damaged values.

use super::*;

/// A group with owners recorded (as format version 2 stores it).
fn sample_group() -> GroupRecord {
    let mut group = sample_group_v1();
    group.created_by = Some("orders".into());
    group.members[0].principal = Some("svc".into());
    group
}

/// The same group with no owners (all format version 1 could store).
fn sample_group_v1() -> GroupRecord {
    GroupRecord {
        group_id: "g".into(),
        state: GroupState::Stable,
        generation: 7,
        assignor: Some("range".into()),
        leader: Some("m1".into()),
        members: vec![MemberRecord {
            member_id: "m1".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            session_timeout_ms: 10,
            rebalance_timeout_ms: 20,
            topics: vec!["t".into()],
            assignors: vec![AssignorMetadata {
                name: "range".into(),
                user_data: vec![9],
            }],
            owned_partitions: vec![],
            assignment: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![0, 1],
            }],
            assignment_user_data: vec![],
            principal: None,
        }],
        state_since_ms: 1234,
        created_by: None,
        consumer: None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn group_round_trips() {
    let record = sample_group();
    let (key, bytes) = encode_group(record.clone()).expect("encodes");
    assert_eq!(key, "g");
    assert_eq!(decode_group("g", &bytes).expect("decodes"), record);
}

#[test]
fn every_state_round_trips() {
    for state in GroupState::ALL {
        assert_eq!(state_from_u8(state_to_u8(state)).ok(), Some(state));
    }
    assert!(state_from_u8(7).is_err());
}

#[test]
fn offset_round_trips() {
    let committed = CommittedOffset {
        offset: -1,
        metadata: Some("meta".into()),
        commit_timestamp_ms: u64::MAX,
    };
    let bytes = encode_offset(committed.clone()).expect("encodes");
    assert_eq!(decode_offset(&bytes).expect("decodes"), committed);
}

const GROUP_V1_HEX: &str = concat!(
    "030700000001050000000000000072616e67650102000000000000006d310100",
    "00000000000002000000000000006d3100010000000000000063010000000000",
    "0000680a00000014000000010000000000000001000000000000007401000000",
    "00000000050000000000000072616e6765010000000000000009000000000000",
    "0000010000000000000001000000000000007402000000000000000000000001",
    "0000000000000000000000d204000000000000",
);

/// Format version 2: version 1's bytes with the member's principal after each member and
/// the creator at the end.
const GROUP_V2_HEX: &str = concat!(
    "030700000001050000000000000072616e67650102000000000000006d310100",
    "00000000000002000000000000006d3100010000000000000063010000000000",
    "0000680a00000014000000010000000000000001000000000000007401000000",
    "00000000050000000000000072616e6765010000000000000009000000000000",
    "0000010000000000000001000000000000007402000000000000000000000001",
    "0000000000000000000000010300000000000000737663d20400000000000001",
    "06000000000000006f7264657273",
);

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Format version 2, byte for byte. If this fails, the on-disk format changed: bump
/// `FORMAT_VERSION` and teach `open` to migrate, or undo the change.
#[test]
fn format_is_pinned() {
    let (_, group) = encode_group(sample_group()).expect("encodes");
    assert_eq!(hex(&group), GROUP_V2_HEX);
    // The version 1 encoder (tests' maker of v1 stores) still writes version 1.
    let (_, v1) = encode_group_v1(sample_group_v1()).expect("encodes");
    assert_eq!(hex(&v1), GROUP_V1_HEX);
    let offset = encode_offset(CommittedOffset {
        offset: 42,
        metadata: Some("m".into()),
        commit_timestamp_ms: 7,
    })
    .expect("encodes");
    assert_eq!(
        hex(&offset),
        "2a0000000000000007000000000000000101000000000000006d"
    );
}

/// A journal entry with every field set, including a member that never rejoined.
fn sample_rebalance() -> RebalanceRecord {
    RebalanceRecord {
        generation_id: 3,
        trigger: RebalanceCause {
            kind: "member_left".into(),
            member_id: "m2".into(),
            client_id: "c".into(),
            client_host: "h".into(),
            detail: Some("bye".into()),
        },
        started_at_ms: 100,
        barrier_ms: 5,
        sync_ms: Some(2),
        assignor: Some("range".into()),
        leader_id: "m1".into(),
        members: 1,
        waited_for: vec![
            MemberWait {
                member_id: "m1".into(),
                rejoin_ms: Some(4),
            },
            MemberWait {
                member_id: "m2".into(),
                rejoin_ms: None,
            },
        ],
        evicted: vec!["m2".into()],
        joined: vec![],
        left: vec!["m2".into()],
        moved: Some(1),
        changes: vec![MemberChange {
            member_id: "m1".into(),
            gained: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![1],
            }],
            revoked: vec![],
        }],
        omitted: 0,
    }
}

/// Format version 3's journal entry, byte for byte (as `format_is_pinned` for groups).
#[test]
fn rebalance_format_is_pinned() {
    let entry = sample_rebalance();
    let bytes = encode_rebalance(entry.clone()).expect("encodes");
    assert_eq!(hex(&bytes), REBALANCE_V1_HEX);
    assert_eq!(decode_rebalance(&bytes).expect("decodes"), entry);
    for len in 0..bytes.len() {
        assert!(
            decode_rebalance(&bytes[..len]).is_err(),
            "prefix of {len} bytes"
        );
    }
}

const REBALANCE_V1_HEX: &str = concat!(
    "030000000b000000000000006d656d6265725f6c65667402000000000000006d",
    "3201000000000000006301000000000000006801030000000000000062796564",
    "0000000000000005000000000000000102000000000000000105000000000000",
    "0072616e676502000000000000006d3101000000020000000000000002000000",
    "000000006d3101040000000000000002000000000000006d3200010000000000",
    "000002000000000000006d320000000000000000010000000000000002000000",
    "000000006d320101000000010000000000000002000000000000006d31010000",
    "0000000000010000000000000074010000000000000001000000000000000000",
    "000000000000",
);

/// Version 1 bytes, as the previous release wrote them, read as owner-less records; they
/// are not version 2 bytes (the migration must not be skipped).
#[test]
fn version_1_values_decode_with_no_owners() {
    let v1 = unhex(GROUP_V1_HEX);
    assert_eq!(
        decode_group_v1("g", &v1).expect("decodes"),
        sample_group_v1()
    );
    assert!(decode_group("g", &v1).is_err());
}

#[test]
fn every_truncated_prefix_fails_to_decode() {
    let (_, group) = encode_group(sample_group()).expect("encodes");
    for len in 0..group.len() {
        assert!(
            decode_group("g", &group[..len]).is_err(),
            "prefix of {len} bytes"
        );
    }
    let offset = encode_offset(CommittedOffset {
        offset: 1,
        metadata: None,
        commit_timestamp_ms: 2,
    })
    .expect("encodes");
    for len in 0..offset.len() {
        assert!(
            decode_offset(&offset[..len]).is_err(),
            "prefix of {len} bytes"
        );
    }
}

#[test]
fn trailing_bytes_are_rejected() {
    let mut bytes = encode_offset(CommittedOffset {
        offset: 1,
        metadata: None,
        commit_timestamp_ms: 2,
    })
    .expect("encodes");
    bytes.push(0);
    assert!(decode_offset(&bytes).is_err());
}
