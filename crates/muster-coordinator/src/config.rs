//! Settings the group engine obeys (protocol §8), shared by every group.

use muster_protocol::{DescribedMember, JoinedMember, ListedGroup};

/// Server-wide rules for every group. Cheap to share behind an `Arc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// Smallest session timeout a member may ask for.
    pub min_session_timeout_ms: u32,
    /// Largest session timeout a member may ask for.
    pub max_session_timeout_ms: u32,
    /// How long the first rebalance out of Empty waits for more members.
    pub initial_rebalance_delay_ms: u32,
    /// Most members a group may hold; 0 = unlimited.
    pub max_group_size: u32,
    /// A brand-new member's first JoinGroup is held at most this long (Kafka: 5 minutes).
    pub new_member_join_timeout_ms: u32,
    /// Longest offset-commit metadata accepted, in bytes.
    pub max_offset_metadata_bytes: usize,
    /// Offsets of a group that has been Empty this long expire (Kafka's
    /// `offsets.retention.minutes`, 7 days); a commit made while Empty restarts its own clock.
    pub offsets_retention_ms: u64,
    /// An Empty group with no offsets and no pending members is removed once it has been
    /// Empty this long (Kafka removes such groups at its next retention check).
    pub empty_group_removal_ms: u64,
    /// Rebalances each group's journal keeps (protocol §6.20); 0 keeps none.
    pub journal_size: u32,
    /// What protects a group's offsets (protocol §6.13, §6.23–§6.25).
    pub offsets: OffsetsConfig,
    /// A group is in a rebalance storm when more than this many rebalances started within
    /// [`GroupConfig::storm_window_ms`].
    pub storm_rebalances: u32,
    pub storm_window_ms: u64,
    /// The request limits of protocol §6.18 (ids, names, list lengths, timeouts, capacities).
    pub limits: Limits,
    /// The consumer protocol's settings (protocol-v1 §7).
    pub consumer: ConsumerConfig,
    /// A group with nothing but data left (`Group::is_parkable`: Empty, no member, nothing in
    /// flight) and no request for this long is parked: kept as data by the supervisor, with
    /// no actor, until a request, an admin call or its next deadline wakes it. 0 = never
    /// parked. Read by the actor shell; the engine only says whether a group may be.
    pub park_after_ms: u64,
}

/// What protects a group's offsets (protocol §6.13, §6.23–§6.25).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetsConfig {
    /// Refuse (PARTITION_NOT_OWNED) a member's commit for a partition it does not own
    /// (protocol §6.13); off for clients that commit partitions they were never assigned.
    pub ownership_check: bool,
    /// Entries each partition's offset history keeps (protocol §6.24); 0 keeps none.
    pub history_entries: u32,
    /// How long a commit's history entries may wait to be written, gathered with the other
    /// commits' of that time into one write (0: in the commit's own write). Offsets are
    /// durable when acknowledged either way; a crash can lose the newest history entries.
    pub history_flush_ms: u64,
    /// Bytes each partition's history may weigh ([`HistoryEntry::weight`]
    /// (crate::storage::HistoryEntry::weight)); the oldest entries go first.
    pub history_bytes: usize,
    /// How long offsets past retention stay in the expiry quarantine before they are dropped
    /// (protocol §6.25); 0 drops them at once.
    pub quarantine_ms: u64,
    /// A member joining a group whose offsets are quarantined gets them restored first.
    pub restore_on_join: bool,
}

impl Default for OffsetsConfig {
    fn default() -> Self {
        OffsetsConfig {
            ownership_check: true,
            history_entries: 100,
            history_bytes: 64 << 10,
            history_flush_ms: 200,
            quarantine_ms: 10_080 * 60_000,
            restore_on_join: true,
        }
    }
}

/// Settings of consumer-protocol groups (protocol-v1 §7; Kafka 4's `group.consumer.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// How often members heartbeat (Kafka's `group.consumer.heartbeat.interval.ms`, 5 s).
    pub heartbeat_interval_ms: u32,
    /// A member not heard from this long is removed (Kafka's
    /// `group.consumer.session.timeout.ms`, 45 s).
    pub session_timeout_ms: u32,
    /// The assignor of a group none of whose members asks for one.
    pub default_assignor: String,
    /// A target of at most this many members × partitions is computed on the group's turn;
    /// a larger one on a blocking thread, so that it never holds up other groups
    /// (`engine/consumer/assign.rs`).
    pub inline_assignment_limit: usize,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            heartbeat_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            default_assignor: "uniform".to_owned(),
            inline_assignment_limit: 100_000,
        }
    }
}

/// What one request may ask for and how much the server holds in total (protocol §6.18
/// "Limits"). A request over a per-request limit gets REQUEST_LIMIT_EXCEEDED (or the Kafka code
/// the protocol names); a server-wide capacity that is full answers RESOURCE_LIMIT_REACHED.
/// Every limit here is a musterd setting of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest client id in Hello, in bytes (checked by the session).
    pub max_client_id_bytes: usize,
    /// Longest member id a request may carry, in bytes (generated ids are shorter).
    pub max_member_id_bytes: usize,
    /// Longest `group_instance_id`, in bytes (Kafka: 249).
    pub max_instance_id_bytes: usize,
    /// Most assignors one JoinGroup may name.
    pub max_assignors: usize,
    /// Longest assignor name, in bytes.
    pub max_assignor_name_bytes: usize,
    /// Most assignor `user_data` bytes one JoinGroup may carry, summed over its assignors.
    pub max_assignor_metadata_bytes: usize,
    /// Most topics one JoinGroup may subscribe to.
    pub max_subscribed_topics: usize,
    /// Most partitions one OffsetCommit or OffsetFetch (or one JoinGroup's owned partitions)
    /// may name, summed over its topics.
    pub max_partitions_per_request: usize,
    /// Most group ids one DescribeGroups or DeleteGroups may name.
    pub max_groups_per_request: usize,
    /// Most topics one CreateTopics or DescribeTopics may name.
    pub max_topics_per_request: usize,
    /// Longest `reason` in JoinGroup or LeaveGroup, in bytes.
    pub max_reason_bytes: usize,
    /// Largest `rebalance_timeout_ms` a member may ask for.
    pub max_rebalance_timeout_ms: u32,
    /// Most member ids handed out with MEMBER_ID_REQUIRED and not yet joined, over all groups.
    pub max_pending_member_ids: usize,
    /// Most groups the server holds.
    pub max_groups: usize,
    /// Most topics in the catalog.
    pub max_topics: usize,
    /// Most partitions one topic may have.
    pub max_partitions_per_topic: i32,
    /// Most admin requests (DescribeGroups, ListGroups, DeleteGroups, CreateTopics,
    /// DescribeTopics, GroupHistory, GroupDiagnosis) in flight at once on the server, from
    /// every connection and the dashboard together: sent to the supervisor and not yet
    /// answered. Checked by the server before a request is sent (the supervisor's mailbox is
    /// not bounded), so past it a request is answered at once, never queued.
    pub max_admin_requests_in_flight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_client_id_bytes: 255,
            max_member_id_bytes: 255,
            max_instance_id_bytes: 249,
            max_assignors: 16,
            max_assignor_name_bytes: 255,
            max_assignor_metadata_bytes: 131_072,
            max_subscribed_topics: 1_000,
            max_partitions_per_request: 50_000,
            max_groups_per_request: 1_000,
            max_topics_per_request: 1_000,
            max_reason_bytes: 1_024,
            max_rebalance_timeout_ms: 1_800_000,
            max_pending_member_ids: 20_000,
            max_groups: 50_000,
            max_topics: 100_000,
            max_partitions_per_topic: 100_000,
            max_admin_requests_in_flight: 4_096,
        }
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_group_size: 0,
            new_member_join_timeout_ms: 300_000,
            max_offset_metadata_bytes: 4_096,
            offsets_retention_ms: 10_080 * 60_000,
            empty_group_removal_ms: 600_000,
            journal_size: 50,
            offsets: OffsetsConfig::default(),
            storm_rebalances: 5,
            storm_window_ms: 300_000,
            limits: Limits::default(),
            consumer: ConsumerConfig::default(),
            park_after_ms: 60_000,
        }
    }
}

impl GroupConfig {
    /// Whether a group of `size` members (pending ids included, as Kafka counts them) is
    /// already at the size cap.
    pub(crate) fn is_full(&self, size: usize) -> bool {
        size >= self.effective_max_group_size()
    }

    /// `max_group_size`, but never over [`MAX_ENCODABLE_GROUP_SIZE`] (0 means that ceiling).
    pub fn effective_max_group_size(&self) -> usize {
        match self.max_group_size as usize {
            0 => MAX_ENCODABLE_GROUP_SIZE,
            n => n.min(MAX_ENCODABLE_GROUP_SIZE),
        }
    }
}

/// Most entries one sequence of a response can hold: wincode refuses, when encoding and when
/// decoding, a sequence whose elements need more than 4 MiB of memory (its preallocation
/// limit, which a client decoding with the default configuration also applies).
pub const fn encodable<T>() -> usize {
    wincode::config::DEFAULT_PREALLOCATION_SIZE_LIMIT / std::mem::size_of::<T>()
}

/// The largest group whose answers encode: the leader's JoinGroup lists every member, and so
/// does DescribeGroups (26 214 members with 160-byte `DescribedMember`s). `max_group_size`
/// is capped here (protocol §6.18), so no answer about one group fails to encode.
pub const MAX_ENCODABLE_GROUP_SIZE: usize = {
    let join = encodable::<JoinedMember>();
    let describe = encodable::<DescribedMember>();
    if join < describe {
        join
    } else {
        describe
    }
};

/// The most groups one ListGroups answer can list (74 898).
pub const MAX_LISTED_GROUPS: usize = encodable::<ListedGroup>();
