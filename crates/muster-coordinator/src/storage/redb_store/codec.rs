//! The on-disk encoding of [`RedbStore`](super::RedbStore) values, format version 2, and the
//! decoding of version 1 group values for the migration (`super::migrate`). The cluster
//! store (muster-etcd) writes the same value bytes to etcd, through `storage::codec`.
//!
//! Version 2 appends the owners to version 1's group value: each member's principal and the
//! group's creator (`Option<String>`, last field of each), so that a restart charges quotas
//! again. Offsets are unchanged (`OffsetV1`). Version 3 adds the rebalance journal's entries
//! (`RebalanceV1`); group and offset values are as in version 2.
//!
//! Records are encoded with wincode from storage-only mirror structs, never from the engine's
//! or the wire's types: a field added to `GroupRecord` or to a protocol message must not change
//! what is on disk behind the format version's back. Field order here *is* the format; change
//! it only together with `FORMAT_VERSION` (and a migration). The `format_is_pinned` test holds
//! the exact bytes.

use muster_protocol::{AssignorMetadata, TopicPartitions};
use wincode::config::Configuration;
use wincode::{SchemaRead, SchemaWrite};

use muster_protocol::{MemberChange, MemberWait, RebalanceCause};

use crate::storage::{CommittedOffset, GroupRecord, MemberRecord, RebalanceRecord};
use crate::types::GroupState;

/// The largest single sequence a decode may preallocate. Far above any real group (it allows
/// hundreds of thousands of members) while still bounding what a damaged length can allocate.
const PREALLOCATION_LIMIT: usize = 64 << 20;

type Format = Configuration<true, PREALLOCATION_LIMIT>;

const FORMAT: Format = Configuration::new();

/// Why a stored value could not be decoded, or a record encoded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CodecError(String);

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct GroupV1 {
    state: u8,
    generation: i32,
    assignor: Option<String>,
    leader: Option<String>,
    members: Vec<MemberV1>,
    state_since_ms: u64,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct MemberV1 {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: u32,
    rebalance_timeout_ms: u32,
    topics: Vec<String>,
    assignors: Vec<AssignorV1>,
    owned_partitions: Vec<TopicPartitionsV1>,
    assignment: Vec<TopicPartitionsV1>,
    assignment_user_data: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct GroupV2 {
    state: u8,
    generation: i32,
    assignor: Option<String>,
    leader: Option<String>,
    members: Vec<MemberV2>,
    state_since_ms: u64,
    created_by: Option<String>,
}

/// A version 1 member with its principal appended.
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct MemberV2 {
    member: MemberV1,
    principal: Option<String>,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct AssignorV1 {
    name: String,
    user_data: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct TopicPartitionsV1 {
    topic: String,
    partitions: Vec<i32>,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct OffsetV1 {
    offset: i64,
    commit_timestamp_ms: u64,
    metadata: Option<String>,
}

/// One rebalance journal entry (format version 3), field for field as `RebalanceRecord` (field
/// names are not in the bytes; their order and types are).
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct RebalanceV1 {
    generation_id: i32,
    trigger: CauseV1,
    started_at_ms: u64,
    barrier_ms: u64,
    sync_ms: Option<u64>,
    assignor: Option<String>,
    leader_id: String,
    members: u32,
    waited_for: Vec<WaitV1>,
    evicted: Vec<String>,
    joined: Vec<String>,
    left: Vec<String>,
    moved: Option<u32>,
    changes: Vec<ChangeV1>,
    omitted: u32,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct CauseV1 {
    kind: String,
    member_id: String,
    client_id: String,
    client_host: String,
    detail: Option<String>,
}

/// A member the barrier waited for: the bytes of a `(String, Option<u64>)` pair.
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct WaitV1 {
    member_id: String,
    rejoin_ms: Option<u64>,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct ChangeV1 {
    member_id: String,
    gained: Vec<TopicPartitionsV1>,
    revoked: Vec<TopicPartitionsV1>,
}

/// A journal entry's value (its key holds the group and the generation).
pub fn encode_rebalance(entry: RebalanceRecord) -> Result<Vec<u8>, CodecError> {
    wincode::config::serialize(&RebalanceV1::from(entry), FORMAT)
        .map_err(|e| CodecError(format!("cannot encode a rebalance journal entry: {e}")))
}

pub fn decode_rebalance(bytes: &[u8]) -> Result<RebalanceRecord, CodecError> {
    let stored: RebalanceV1 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("rebalance journal value: {e}")))?;
    Ok(stored.into())
}

/// Stored state numbers: explicit, never renumbered.
fn state_to_u8(state: GroupState) -> u8 {
    match state {
        GroupState::Empty => 0,
        GroupState::PreparingRebalance => 1,
        GroupState::CompletingRebalance => 2,
        GroupState::Stable => 3,
        GroupState::Dead => 4,
        GroupState::Assigning => 5,
        GroupState::Reconciling => 6,
    }
}

fn state_from_u8(value: u8) -> Result<GroupState, CodecError> {
    Ok(match value {
        0 => GroupState::Empty,
        1 => GroupState::PreparingRebalance,
        2 => GroupState::CompletingRebalance,
        3 => GroupState::Stable,
        4 => GroupState::Dead,
        5 => GroupState::Assigning,
        6 => GroupState::Reconciling,
        other => return Err(CodecError(format!("unknown group state number {other}"))),
    })
}

/// `From` both ways between a storage mirror and its domain type, field for field: the plain
/// fields moved as they are, `into` fields (one mirrored value) and `each` fields (a sequence
/// of mirrored values) converted; `unstored` fields of the domain type, which the mirror does
/// not hold, get the given value when read back. Field names only pair the fields up: the
/// mirror's declaration order is what is on disk.
macro_rules! mirror {
    (
        $stored:ident <=> $domain:ident {
            $($field:ident),* $(,)?
            $(; into $($conv:ident),+ $(,)?)?
            $(; each $($each:ident),+ $(,)?)?
            $(; unstored $($extra:ident: $default:expr),+ $(,)?)?
        }
    ) => {
        impl From<$domain> for $stored {
            fn from(d: $domain) -> Self {
                Self {
                    $($field: d.$field,)*
                    $($($conv: d.$conv.into(),)+)?
                    $($($each: d.$each.into_iter().map(Into::into).collect(),)+)?
                }
            }
        }

        impl From<$stored> for $domain {
            fn from(s: $stored) -> Self {
                Self {
                    $($field: s.$field,)*
                    $($($conv: s.$conv.into(),)+)?
                    $($($each: s.$each.into_iter().map(Into::into).collect(),)+)?
                    $($($extra: $default,)+)?
                }
            }
        }
    };
}

mirror!(TopicPartitionsV1 <=> TopicPartitions { topic, partitions });
mirror!(AssignorV1 <=> AssignorMetadata { name, user_data });
mirror!(OffsetV1 <=> CommittedOffset { offset, commit_timestamp_ms, metadata });
mirror!(CauseV1 <=> RebalanceCause { kind, member_id, client_id, client_host, detail });
mirror!(WaitV1 <=> MemberWait { member_id, rejoin_ms });
mirror!(ChangeV1 <=> MemberChange { member_id; each gained, revoked });
mirror!(RebalanceV1 <=> RebalanceRecord {
    generation_id, started_at_ms, barrier_ms, sync_ms, assignor, leader_id, members, evicted,
    joined, left, moved, omitted;
    into trigger;
    each waited_for, changes
});
// A version 1 member recorded no principal.
mirror!(MemberV1 <=> MemberRecord {
    member_id, group_instance_id, client_id, client_host, session_timeout_ms,
    rebalance_timeout_ms, topics, assignment_user_data;
    each assignors, owned_partitions, assignment;
    unstored principal: None
});

impl From<MemberRecord> for MemberV2 {
    fn from(mut m: MemberRecord) -> Self {
        let principal = m.principal.take();
        MemberV2 {
            member: m.into(),
            principal,
        }
    }
}

impl From<MemberV2> for MemberRecord {
    fn from(m: MemberV2) -> Self {
        Self {
            principal: m.principal,
            ..m.member.into()
        }
    }
}

/// Splits a record into its key (the group id) and its encoded value.
pub fn encode_group(record: GroupRecord) -> Result<(String, Vec<u8>), CodecError> {
    let GroupRecord {
        group_id,
        state,
        generation,
        assignor,
        leader,
        members,
        state_since_ms,
        created_by,
        consumer: _,
    } = record;
    let stored = GroupV2 {
        state: state_to_u8(state),
        generation,
        assignor,
        leader,
        members: members.into_iter().map(Into::into).collect(),
        state_since_ms,
        created_by,
    };
    let bytes = wincode::config::serialize(&stored, FORMAT)
        .map_err(|e| CodecError(format!("cannot encode group {group_id:?}: {e}")))?;
    Ok((group_id, bytes))
}

pub fn decode_group(group_id: &str, bytes: &[u8]) -> Result<GroupRecord, CodecError> {
    let stored: GroupV2 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("group {group_id:?}: {e}")))?;
    group_record(group_id, stored)
}

/// A format version 1 group value (for the migration to version 2): no owners recorded.
pub(super) fn decode_group_v1(group_id: &str, bytes: &[u8]) -> Result<GroupRecord, CodecError> {
    let GroupV1 {
        state,
        generation,
        assignor,
        leader,
        members,
        state_since_ms,
    } = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("group {group_id:?} (format version 1): {e}")))?;
    let members = members
        .into_iter()
        .map(|member| MemberV2 {
            member,
            principal: None,
        })
        .collect();
    let stored = GroupV2 {
        state,
        generation,
        assignor,
        leader,
        members,
        state_since_ms,
        created_by: None,
    };
    group_record(group_id, stored)
}

/// The record of `group_id` from its decoded value.
fn group_record(group_id: &str, stored: GroupV2) -> Result<GroupRecord, CodecError> {
    Ok(GroupRecord {
        group_id: group_id.to_owned(),
        state: state_from_u8(stored.state)
            .map_err(|e| CodecError(format!("group {group_id:?}: {e}")))?,
        generation: stored.generation,
        assignor: stored.assignor,
        leader: stored.leader,
        members: stored.members.into_iter().map(Into::into).collect(),
        state_since_ms: stored.state_since_ms,
        created_by: stored.created_by,
        consumer: None,
    })
}

/// Encodes a group in format version 1, as the previous release wrote it (tests make v1
/// stores with it to test the migration).
#[cfg(test)]
pub(super) fn encode_group_v1(record: GroupRecord) -> Result<(String, Vec<u8>), CodecError> {
    let stored = GroupV1 {
        state: state_to_u8(record.state),
        generation: record.generation,
        assignor: record.assignor,
        leader: record.leader,
        members: record.members.into_iter().map(MemberV1::from).collect(),
        state_since_ms: record.state_since_ms,
    };
    let bytes = wincode::config::serialize(&stored, FORMAT)
        .map_err(|e| CodecError(format!("cannot encode group {:?}: {e}", record.group_id)))?;
    Ok((record.group_id, bytes))
}

pub fn encode_offset(committed: CommittedOffset) -> Result<Vec<u8>, CodecError> {
    wincode::config::serialize(&OffsetV1::from(committed), FORMAT)
        .map_err(|e| CodecError(format!("cannot encode an offset: {e}")))
}

pub fn decode_offset(bytes: &[u8]) -> Result<CommittedOffset, CodecError> {
    let stored: OffsetV1 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("offset value: {e}")))?;
    Ok(stored.into())
}

#[cfg(test)]
mod tests {
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
}
