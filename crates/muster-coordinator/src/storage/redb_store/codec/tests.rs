//! The codec's pinned bytes, round trips, migrations' decoders and damaged values.

use super::*;

/// A consumer-protocol group with ownership epochs (as store format 5 stores it): the format 4
/// sample and the owners of two partitions.
fn sample_group() -> GroupRecord {
    let mut group = sample_group_v3();
    group.ownership = vec![
        OwnershipRecord {
            topic: "t".into(),
            partition: 0,
            epoch: 3,
            owner: "c1".into(),
        },
        OwnershipRecord {
            topic: "t".into(),
            partition: 1,
            epoch: 4,
            owner: "c2".into(),
        },
    ];
    group
}

/// A consumer-protocol group (as store format 4 stores it): the version 2 sample, Reconciling,
/// with a consumer part of two members, one with every field set (static, a rack, a regex, a
/// pending revocation) and one with none.
fn sample_group_v3() -> GroupRecord {
    let mut group = sample_group_v2();
    group.state = GroupState::Reconciling;
    group.consumer = Some(ConsumerGroupRecord {
        assignment_epoch: 8,
        assignor: "uniform".into(),
        members: vec![
            ConsumerMemberRecord {
                member_id: "c1".into(),
                group_instance_id: Some("i".into()),
                rack_id: Some("r".into()),
                client_id: "c".into(),
                client_host: "h".into(),
                principal: Some("svc".into()),
                rebalance_timeout_ms: 30,
                subscribed_topics: vec!["t".into()],
                subscribed_topic_regex: Some("t.*".into()),
                server_assignor: Some("uniform".into()),
                state: 1,
                member_epoch: 8,
                previous_member_epoch: 7,
                assigned: vec![TopicPartitions {
                    topic: "t".into(),
                    partitions: vec![0],
                }],
                pending_revocation: vec![TopicPartitions {
                    topic: "t".into(),
                    partitions: vec![1],
                }],
                target: vec![TopicPartitions {
                    topic: "t".into(),
                    partitions: vec![0],
                }],
                classic: Some(ClassicMemberRecord {
                    session_timeout_ms: 9,
                    assignors: vec![AssignorMetadata {
                        name: "a".into(),
                        user_data: vec![5],
                    }],
                }),
            },
            ConsumerMemberRecord {
                member_id: "c2".into(),
                member_epoch: -2,
                previous_member_epoch: 6,
                ..ConsumerMemberRecord::default()
            },
        ],
    });
    group
}

/// A group with owners recorded (as store formats 2 and 3 store it).
fn sample_group_v2() -> GroupRecord {
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
        ownership: Vec::new(),
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
fn a_classic_group_round_trips() {
    let record = sample_group_v2();
    let (_, bytes) = encode_group(record.clone()).expect("encodes");
    assert_eq!(decode_group("g", &bytes).expect("decodes"), record);
}

#[test]
fn every_state_round_trips() {
    for state in GroupState::ALL {
        assert_eq!(state_from_u8(state_to_u8(state)).ok(), Some(state));
    }
    // The consumer protocol's states got the next numbers; none was renumbered.
    assert_eq!(state_to_u8(GroupState::Stable), 3);
    assert_eq!(state_to_u8(GroupState::Assigning), 5);
    assert_eq!(state_to_u8(GroupState::Reconciling), 6);
    assert!(state_from_u8(7).is_err());
}

/// Every reconciliation state a consumer member may be in round trips; a static member on a
/// temporary leave keeps its epoch (-2).
#[test]
fn every_member_state_round_trips() {
    let mut record = sample_group();
    let consumer = record.consumer.as_mut().expect("a consumer part");
    let template = consumer.members[0].clone();
    consumer.members = MEMBER_STATES
        .map(|state| ConsumerMemberRecord {
            member_id: format!("m{state}"),
            state,
            ..template.clone()
        })
        .collect();
    let (_, bytes) = encode_group(record.clone()).expect("encodes");
    assert_eq!(decode_group("g", &bytes).expect("decodes"), record);
}

/// A member state number outside 0..=2 is never written (it could not be read back) and never
/// read (damaged bytes).
#[test]
fn an_unknown_member_state_is_refused_both_ways() {
    let mut record = sample_group();
    let consumer = record.consumer.as_mut().expect("a consumer part");
    consumer.members[1].state = 3;
    let error = encode_group(record).expect_err("state 3 is refused");
    assert!(
        error
            .to_string()
            .contains("unknown reconciliation state number 3"),
        "{error}"
    );

    let (_, mut bytes) = encode_group(sample_group()).expect("encodes");
    // The first member's state byte (1), after its server assignor and before its epochs.
    let at = bytes
        .windows(16)
        .position(|w| w == *b"uniform\x01\x08\0\0\0\x07\0\0\0")
        .expect("the state byte")
        + "uniform".len();
    for state in [3, 0x7f, 0xff] {
        bytes[at] = state;
        let error = decode_group("g", &bytes).expect_err("an unknown state");
        assert!(
            error
                .to_string()
                .contains(&format!("unknown reconciliation state number {state}")),
            "{error}"
        );
    }
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

/// Store format 4's consumer part of `sample_group` (`ConsumerV1`), after its `Some` tag:
/// epoch 8, "uniform", then two members, `c1` with every field set (state 1, epochs 8 and 7,
/// a classic part: session timeout 9, one assignor) and `c2` with none (epochs -2 and 6).
const CONSUMER_V1_HEX: &str = concat!(
    "080000000700000000000000756e69666f726d02000000000000000200000000",
    "0000006331010100000000000000690101000000000000007201000000000000",
    "00630100000000000000680103000000000000007376631e0000000100000000",
    "000000010000000000000074010300000000000000742e2a0107000000000000",
    "00756e69666f726d010800000007000000010000000000000001000000000000",
    "0074010000000000000000000000010000000000000001000000000000007401",
    "0000000000000001000000010000000000000001000000000000007401000000",
    "0000000000000000010900000001000000000000000100000000000000610100",
    "0000000000000502000000000000006332000000000000000000000000000000",
    "00000000000000000000000000000000000000feffffff060000000000000000",
    "0000000000000000000000000000000000000000",
);

/// Store format 5's ownership epochs of `sample_group` (`Vec<OwnershipV1>`): two entries,
/// ("t", 0, epoch 3, "c1") and ("t", 1, epoch 4, "c2").
const OWNERSHIP_V1_HEX: &str = concat!(
    "0200000000000000",
    "010000000000000074",
    "00000000",
    "03000000",
    "02000000000000006331",
    "010000000000000074",
    "01000000",
    "04000000",
    "02000000000000006332",
);

/// The GroupV3 bytes of `sample_group` (store format 4): the GroupV2 bytes (here with state 6,
/// Reconciling), then `Some` (01) and the consumer part.
fn group_v3_hex() -> String {
    format!("06{}01{CONSUMER_V1_HEX}", &GROUP_V2_HEX[2..])
}

/// Store format 5, byte for byte. If this fails, the on-disk format changed: bump
/// `FORMAT_VERSION` and teach `open` to migrate, or undo the change.
#[test]
fn format_is_pinned() {
    // GroupV4: the GroupV3 bytes, then the ownership epochs.
    let (_, group) = encode_group(sample_group()).expect("encodes");
    assert_eq!(hex(&group), format!("{}{OWNERSHIP_V1_HEX}", group_v3_hex()));
    // A classic group with no ownership epochs: the GroupV2 bytes, then `None` (00) and an
    // empty sequence (a zero length).
    let (_, classic) = encode_group(sample_group_v2()).expect("encodes");
    assert_eq!(hex(&classic), format!("{GROUP_V2_HEX}00{}", "00".repeat(8)));
    // The earlier encoders (tests' makers of old stores) still write what they wrote.
    let (_, v3) = encode_group_v3(sample_group()).expect("encodes");
    assert_eq!(hex(&v3), group_v3_hex());
    let (_, v2) = encode_group_v2(sample_group_v2()).expect("encodes");
    assert_eq!(hex(&v2), GROUP_V2_HEX);
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

/// Version 1 bytes, as the first release wrote them, read as owner-less records; they are
/// not version 2 bytes nor current ones (the migration must not be skipped).
#[test]
fn version_1_values_decode_with_no_owners() {
    let v1 = unhex(GROUP_V1_HEX);
    assert_eq!(
        decode_group_v1("g", &v1).expect("decodes"),
        sample_group_v1()
    );
    assert!(decode_group_v2("g", &v1).is_err());
    assert!(decode_group_v3("g", &v1).is_err());
    assert!(decode_group("g", &v1).is_err());
    assert!(decode_group_or_earlier("g", &v1).is_err());
}

/// GroupV2 bytes, as store formats 2 and 3 wrote them, read with no consumer part; they are
/// not current bytes (redb's migration must not be skipped), and current bytes are not
/// GroupV2 ones, so a store without a format version (etcd) tells them apart.
#[test]
fn version_2_values_decode_with_no_consumer_part() {
    let v2 = unhex(GROUP_V2_HEX);
    assert_eq!(
        decode_group_v2("g", &v2).expect("decodes"),
        sample_group_v2()
    );
    assert!(decode_group("g", &v2).is_err());
    assert!(decode_group_v3("g", &v2).is_err());
    assert_eq!(
        decode_group_or_earlier("g", &v2).expect("decodes"),
        sample_group_v2()
    );

    for record in [sample_group(), sample_group_v2()] {
        let (_, current) = encode_group(record.clone()).expect("encodes");
        assert!(decode_group_v2("g", &current).is_err());
        assert_eq!(
            decode_group_or_earlier("g", &current).expect("decodes"),
            record
        );
    }
}

/// GroupV3 bytes, as store format 4 wrote them, read with no ownership epochs; they are
/// neither current nor GroupV2 bytes, and current bytes are not GroupV3 ones, so a store
/// without a format version (etcd) tells all three apart.
#[test]
fn version_3_values_decode_with_no_ownership_epochs() {
    let v3 = unhex(&group_v3_hex());
    assert_eq!(
        decode_group_v3("g", &v3).expect("decodes"),
        sample_group_v3()
    );
    assert!(decode_group("g", &v3).is_err());
    assert!(decode_group_v2("g", &v3).is_err());
    assert_eq!(
        decode_group_or_earlier("g", &v3).expect("decodes"),
        sample_group_v3()
    );
    // A classic group of format 4 too: its consumer tag is the last byte.
    let (_, classic) = encode_group_v3(sample_group_v2()).expect("encodes");
    assert_eq!(hex(&classic), format!("{GROUP_V2_HEX}00"));
    assert_eq!(
        decode_group_or_earlier("g", &classic).expect("decodes"),
        sample_group_v2()
    );

    for record in [sample_group(), sample_group_v3(), sample_group_v2()] {
        let (_, current) = encode_group(record.clone()).expect("encodes");
        assert!(decode_group_v3("g", &current).is_err());
    }
}

#[test]
fn every_truncated_prefix_fails_to_decode() {
    let (_, group) = encode_group(sample_group()).expect("encodes");
    for len in 0..group.len() {
        assert!(
            decode_group("g", &group[..len]).is_err(),
            "prefix of {len} bytes"
        );
        // Only the prefixes that are the GroupV2 part and the GroupV3 part are (format 2 or 3,
        // and format 4) group values.
        let earlier = decode_group_or_earlier("g", &group[..len]);
        let earlier_formats = [GROUP_V2_HEX.len() / 2, group_v3_hex().len() / 2];
        assert_eq!(earlier.is_ok(), earlier_formats.contains(&len), "{len}");
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

/// Every byte of a group value changed to each of a few values: decoding answers (a record or
/// an error) and never panics; a length made huge is an error, not an allocation.
#[test]
fn damaged_group_values_never_panic() {
    let (_, group) = encode_group(sample_group()).expect("encodes");
    for at in 0..group.len() {
        for value in [0x00, 0x01, 0x02, 0x7f, 0x80, 0xff] {
            let mut damaged = group.clone();
            damaged[at] = value;
            let _ = decode_group("g", &damaged);
            let _ = decode_group_or_earlier("g", &damaged);
        }
    }
    // The consumer members' count (after the tag, the epoch and "uniform") made 2^62.
    let members_at = GROUP_V2_HEX.len() / 2 + 1 + 4 + 8 + "uniform".len();
    let mut huge = group.clone();
    assert_eq!(huge[members_at..members_at + 8], 2u64.to_le_bytes());
    huge[members_at..members_at + 8].copy_from_slice(&(1u64 << 62).to_le_bytes());
    assert!(decode_group("g", &huge).is_err());
    // The ownership epochs' count (right after the GroupV3 part) likewise.
    let owners_at = group_v3_hex().len() / 2;
    let mut huge = group;
    assert_eq!(huge[owners_at..owners_at + 8], 2u64.to_le_bytes());
    huge[owners_at..owners_at + 8].copy_from_slice(&(1u64 << 62).to_le_bytes());
    assert!(decode_group("g", &huge).is_err());
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
    for record in [sample_group(), sample_group_v3(), sample_group_v2()] {
        let (_, mut group) = encode_group(record).expect("encodes");
        group.push(0);
        assert!(decode_group("g", &group).is_err());
        assert!(decode_group_or_earlier("g", &group).is_err());
    }
}
