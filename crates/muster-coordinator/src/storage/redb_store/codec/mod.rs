//! The on-disk encoding of [`RedbStore`](super::RedbStore) values, format version 6, and the
//! decoding of the group values of earlier versions for the migration (`super::migrate`). The
//! cluster store (muster-etcd) writes the same value bytes to etcd, through `storage::codec`.
//!
//! | store format | group value | offset value | journal entry | history entry | quarantined    |
//! |--------------|-------------|--------------|---------------|---------------|----------------|
//! | 1            | `GroupV1`   | `OffsetV1`   | (none)        | (none)        | (none)         |
//! | 2            | `GroupV2`   | `OffsetV1`   | (none)        | (none)        | (none)         |
//! | 3            | `GroupV2`   | `OffsetV1`   | `RebalanceV1` | (none)        | (none)         |
//! | 4            | `GroupV3`   | `OffsetV1`   | `RebalanceV1` | (none)        | (none)         |
//! | 5            | `GroupV4`   | `OffsetV1`   | `RebalanceV1` | `HistoryV1`   | `QuarantineV1` |
//! | 6            | `GroupV4`   | `OffsetV1`   | `RebalanceV1` | `HistoryRunV1`| `QuarantineV1` |
//!
//! `GroupV2` appends the owners to `GroupV1`: each member's principal and the group's creator
//! (`Option<String>`, last field of each), so that a restart charges quotas again. `GroupV3`
//! appends the consumer protocol's part (protocol-v1 §7) to `GroupV2`: an `Option` (one tag
//! byte, 0 for a classic group) of the target assignment's epoch, the assignor and each
//! consumer member (`ConsumerV1`, `ConsumerMemberV1`), so that a restart or a failover resumes
//! with the same epochs. A member's reconciliation state is stored as its number (0 Stable,
//! 1 UnrevokedPartitions, 2 UnreleasedPartitions, never renumbered); any other number is
//! refused when encoding and when decoding. `GroupV4` appends each partition's ownership epoch
//! and owner (`OwnershipV1`, protocol §6.23), so that an epoch is never reused across a restart
//! or a failover. The offset history's entries and the expiry quarantine's offsets are in
//! [`history`]; format 6 stores the history in runs, one row per partition per write
//! (`history_run`), and etcd still one key per entry (`HistoryV1`).
//!
//! The layout of a `GroupV4` value (wincode: integers little-endian, lengths u64, `Option` a
//! tag byte then the value):
//!
//! ```text
//! GroupV2 (unchanged)     state u8, generation i32, assignor, leader, members, state_since_ms,
//!                         created_by
//! consumer  Option<ConsumerV1>                                      (GroupV3 ends here)
//!   assignment_epoch      i32
//!   assignor              String
//!   members               Vec<ConsumerMemberV1>
//!     member_id String, group_instance_id Option<String>, rack_id Option<String>,
//!     client_id String, client_host String, principal Option<String>,
//!     rebalance_timeout_ms u32, subscribed_topics Vec<String>,
//!     subscribed_topic_regex Option<String>, server_assignor Option<String>, state u8,
//!     member_epoch i32, previous_member_epoch i32, assigned, pending_revocation, target
//!     (each Vec<TopicPartitionsV1>),
//!     classic Option<ClassicMemberV1 { session_timeout_ms u32, assignors Vec<AssignorV1> }>
//! ownership Vec<OwnershipV1>, sorted by topic then partition
//!   topic String, partition i32, epoch i32, owner String
//! ```
//!
//! Each group value format is the one before plus at least one byte, and decoding is exact
//! (trailing bytes are an error): a `GroupV2` value is never a valid `GroupV3` or `GroupV4`
//! one, a `GroupV3` value never a `GroupV4` one, nor the reverse. That is what lets a store
//! without a format version of its own (etcd) read all three ([`decode_group_or_earlier`]).
//!
//! Records are encoded with wincode from storage-only mirror structs, never from the engine's
//! or the wire's types: a field added to `GroupRecord` or to a protocol message must not change
//! what is on disk behind the format version's back. Field order here *is* the format; change
//! it only together with `FORMAT_VERSION` (and a migration). The `format_is_pinned` test holds
//! the exact bytes. Decoding never trusts a length: no sequence preallocates more than
//! `PREALLOCATION_LIMIT`, truncated, trailing or out-of-range bytes are a [`CodecError`].

pub(super) mod history;
mod history_run;

pub use history::{decode_history, decode_quarantine, encode_history, encode_quarantine};
pub use history_run::{decode_history_run, encode_history_run, history_run_last_seq};

use muster_protocol::{AssignorMetadata, TopicPartitions};
use wincode::config::Configuration;
use wincode::{SchemaRead, SchemaWrite};

use muster_protocol::{MemberChange, MemberWait, RebalanceCause};

use crate::storage::records::ClassicMemberRecord;
use crate::storage::{
    CommittedOffset, ConsumerGroupRecord, ConsumerMemberRecord, GroupRecord, MemberRecord,
    OwnershipRecord, RebalanceRecord,
};
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

impl CodecError {
    /// An error saying `why`.
    pub(super) fn new(why: String) -> Self {
        CodecError(why)
    }
}

/// Decodes a group value of one store format (for the migration).
pub(super) type GroupDecoder = fn(&str, &[u8]) -> Result<GroupRecord, CodecError>;

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

/// A version 2 group with the consumer protocol's part appended (store format 4).
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct GroupV3 {
    group: GroupV2,
    consumer: Option<ConsumerV1>,
}

/// A version 3 group with each partition's ownership epoch appended (store format 5).
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct GroupV4 {
    group: GroupV3,
    ownership: Vec<OwnershipV1>,
}

/// One partition's owner and ownership epoch, field for field as `OwnershipRecord`.
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct OwnershipV1 {
    topic: String,
    partition: i32,
    epoch: i32,
    owner: String,
}

/// The durable part of a consumer-protocol group, field for field as `ConsumerGroupRecord`.
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct ConsumerV1 {
    assignment_epoch: i32,
    assignor: String,
    members: Vec<ConsumerMemberV1>,
}

/// One consumer member, field for field as `ConsumerMemberRecord`.
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct ConsumerMemberV1 {
    member_id: String,
    group_instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    principal: Option<String>,
    rebalance_timeout_ms: u32,
    subscribed_topics: Vec<String>,
    subscribed_topic_regex: Option<String>,
    server_assignor: Option<String>,
    state: u8,
    member_epoch: i32,
    previous_member_epoch: i32,
    assigned: Vec<TopicPartitionsV1>,
    pending_revocation: Vec<TopicPartitionsV1>,
    target: Vec<TopicPartitionsV1>,
    classic: Option<ClassicMemberV1>,
}

/// A classic member inside a consumer group (an online upgrade): its JoinGroup's session
/// timeout and assignors.
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct ClassicMemberV1 {
    session_timeout_ms: u32,
    assignors: Vec<AssignorV1>,
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

/// The reconciliation states a consumer member may be stored in: 0 Stable,
/// 1 UnrevokedPartitions, 2 UnreleasedPartitions (never renumbered).
const MEMBER_STATES: std::ops::RangeInclusive<u8> = 0..=2;

/// Refuses a consumer member state number outside [`MEMBER_STATES`]: on encoding (a value that
/// could not be read back must never be written) and on decoding (damaged bytes).
fn check_member_states<'a>(members: impl IntoIterator<Item = (&'a str, u8)>) -> Result<(), String> {
    for (member_id, state) in members {
        if !MEMBER_STATES.contains(&state) {
            return Err(format!(
                "consumer member {member_id:?}: unknown reconciliation state number {state}"
            ));
        }
    }
    Ok(())
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

// By hand: `classic` is an `Option` of a mirror, which the macro does not convert.
impl From<ConsumerMemberRecord> for ConsumerMemberV1 {
    fn from(d: ConsumerMemberRecord) -> Self {
        let each = |v: Vec<TopicPartitions>| v.into_iter().map(Into::into).collect();
        Self {
            member_id: d.member_id,
            group_instance_id: d.group_instance_id,
            rack_id: d.rack_id,
            client_id: d.client_id,
            client_host: d.client_host,
            principal: d.principal,
            rebalance_timeout_ms: d.rebalance_timeout_ms,
            subscribed_topics: d.subscribed_topics,
            subscribed_topic_regex: d.subscribed_topic_regex,
            server_assignor: d.server_assignor,
            state: d.state,
            member_epoch: d.member_epoch,
            previous_member_epoch: d.previous_member_epoch,
            assigned: each(d.assigned),
            pending_revocation: each(d.pending_revocation),
            target: each(d.target),
            classic: d.classic.map(Into::into),
        }
    }
}

impl From<ConsumerMemberV1> for ConsumerMemberRecord {
    fn from(s: ConsumerMemberV1) -> Self {
        let each = |v: Vec<TopicPartitionsV1>| v.into_iter().map(Into::into).collect();
        Self {
            member_id: s.member_id,
            group_instance_id: s.group_instance_id,
            rack_id: s.rack_id,
            client_id: s.client_id,
            client_host: s.client_host,
            principal: s.principal,
            rebalance_timeout_ms: s.rebalance_timeout_ms,
            subscribed_topics: s.subscribed_topics,
            subscribed_topic_regex: s.subscribed_topic_regex,
            server_assignor: s.server_assignor,
            state: s.state,
            member_epoch: s.member_epoch,
            previous_member_epoch: s.previous_member_epoch,
            assigned: each(s.assigned),
            pending_revocation: each(s.pending_revocation),
            target: each(s.target),
            classic: s.classic.map(Into::into),
        }
    }
}
mirror!(ClassicMemberV1 <=> ClassicMemberRecord { session_timeout_ms; each assignors });
mirror!(ConsumerV1 <=> ConsumerGroupRecord { assignment_epoch, assignor; each members });
mirror!(OwnershipV1 <=> OwnershipRecord { topic, partition, epoch, owner });

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

/// Splits a record into its key (the group id) and its encoded value (`GroupV4`). Refuses a
/// consumer member whose state number is not one of [`MEMBER_STATES`].
pub fn encode_group(record: GroupRecord) -> Result<(String, Vec<u8>), CodecError> {
    let (group_id, stored) = stored_group(record)?;
    let bytes = serialize_group(&group_id, &stored)?;
    Ok((group_id, bytes))
}

/// The mirror of a record, and its group id.
fn stored_group(record: GroupRecord) -> Result<(String, GroupV4), CodecError> {
    let GroupRecord {
        group_id,
        state,
        generation,
        assignor,
        leader,
        members,
        state_since_ms,
        created_by,
        consumer,
        ownership,
    } = record;
    if let Some(consumer) = &consumer {
        check_member_states(
            consumer
                .members
                .iter()
                .map(|m| (m.member_id.as_str(), m.state)),
        )
        .map_err(|e| CodecError(format!("cannot encode group {group_id:?}: {e}")))?;
    }
    let stored = GroupV4 {
        group: GroupV3 {
            group: GroupV2 {
                state: state_to_u8(state),
                generation,
                assignor,
                leader,
                members: members.into_iter().map(Into::into).collect(),
                state_since_ms,
                created_by,
            },
            consumer: consumer.map(Into::into),
        },
        ownership: ownership.into_iter().map(Into::into).collect(),
    };
    Ok((group_id, stored))
}

fn serialize_group<T: SchemaWrite<Format, Src = T>>(
    group_id: &str,
    stored: &T,
) -> Result<Vec<u8>, CodecError> {
    wincode::config::serialize(stored, FORMAT)
        .map_err(|e| CodecError(format!("cannot encode group {group_id:?}: {e}")))
}

/// A group value of the current format (`GroupV4`, store format 5).
pub fn decode_group(group_id: &str, bytes: &[u8]) -> Result<GroupRecord, CodecError> {
    let stored: GroupV4 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("group {group_id:?}: {e}")))?;
    group_record(group_id, stored)
}

/// A group value of the current format or of an earlier one still read (`GroupV3`, written by
/// store format 4: no ownership epochs; `GroupV2`, written by formats 2 and 3: no consumer part
/// either), for a store that keeps no format version of its own (etcd), where a value stays as
/// an earlier release wrote it until its group is written again. At most one of the three can
/// match (module docs).
pub fn decode_group_or_earlier(group_id: &str, bytes: &[u8]) -> Result<GroupRecord, CodecError> {
    decode_group(group_id, bytes).or_else(|current| {
        decode_group_v3(group_id, bytes)
            .or_else(|_| decode_group_v2(group_id, bytes))
            .map_err(|_| {
                CodecError(format!(
                    "{current} (nor is it a group value of store format 2, 3 or 4)"
                ))
            })
    })
}

/// A `GroupV3` value (store format 4, for the migration to 5): no ownership epochs.
pub(super) fn decode_group_v3(group_id: &str, bytes: &[u8]) -> Result<GroupRecord, CodecError> {
    let group: GroupV3 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("group {group_id:?} (store format 4): {e}")))?;
    group_record(
        group_id,
        GroupV4 {
            group,
            ownership: Vec::new(),
        },
    )
}

/// A `GroupV2` value (store formats 2 and 3, for the migration): no consumer part, no
/// ownership epochs.
pub(super) fn decode_group_v2(group_id: &str, bytes: &[u8]) -> Result<GroupRecord, CodecError> {
    let group: GroupV2 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("group {group_id:?} (store format 2 or 3): {e}")))?;
    group_record(group_id, GroupV4::from_v2(group))
}

impl GroupV4 {
    /// A group of a format before the consumer part: none, and no ownership epochs.
    fn from_v2(group: GroupV2) -> Self {
        GroupV4 {
            group: GroupV3 {
                group,
                consumer: None,
            },
            ownership: Vec::new(),
        }
    }
}

/// A format version 1 group value (for the migration): no owners, no consumer part.
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
    let group = GroupV2 {
        state,
        generation,
        assignor,
        leader,
        members,
        state_since_ms,
        created_by: None,
    };
    group_record(group_id, GroupV4::from_v2(group))
}

/// The record of `group_id` from its decoded value; refuses unknown state numbers.
fn group_record(group_id: &str, stored: GroupV4) -> Result<GroupRecord, CodecError> {
    let GroupV4 {
        group: GroupV3 { group, consumer },
        ownership,
    } = stored;
    let invalid = |e: String| CodecError(format!("group {group_id:?}: {e}"));
    if let Some(consumer) = &consumer {
        check_member_states(
            consumer
                .members
                .iter()
                .map(|m| (m.member_id.as_str(), m.state)),
        )
        .map_err(invalid)?;
    }
    Ok(GroupRecord {
        group_id: group_id.to_owned(),
        state: state_from_u8(group.state).map_err(|e| invalid(e.0))?,
        generation: group.generation,
        assignor: group.assignor,
        leader: group.leader,
        members: group.members.into_iter().map(Into::into).collect(),
        state_since_ms: group.state_since_ms,
        created_by: group.created_by,
        consumer: consumer.map(Into::into),
        ownership: ownership.into_iter().map(Into::into).collect(),
    })
}

/// Encodes a group as store format 4 wrote it (`GroupV3`), dropping its ownership epochs:
/// tests make format 4 stores and earlier etcd values with it.
#[cfg(any(test, feature = "store-suite"))]
pub fn encode_group_v3(record: GroupRecord) -> Result<(String, Vec<u8>), CodecError> {
    let (group_id, stored) = stored_group(record)?;
    let bytes = serialize_group(&group_id, &stored.group)?;
    Ok((group_id, bytes))
}

/// Encodes a group as store formats 2 and 3 wrote it (`GroupV2`), dropping its consumer part
/// and its ownership epochs: tests make format 3 stores and earlier etcd values with it.
#[cfg(any(test, feature = "store-suite"))]
pub fn encode_group_v2(record: GroupRecord) -> Result<(String, Vec<u8>), CodecError> {
    let (group_id, stored) = stored_group(record)?;
    let bytes = serialize_group(&group_id, &stored.group.group)?;
    Ok((group_id, bytes))
}

/// Encodes a group in format version 1, as the first release wrote it (tests make v1
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
mod tests;
