//! Settings the group engine obeys (protocol §5 "Settings named here"), shared by every group.

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
        }
    }
}

impl GroupConfig {
    /// Whether a group of `size` members is already at the size cap.
    pub(crate) fn is_full(&self, size: usize) -> bool {
        self.max_group_size != 0 && size >= self.max_group_size as usize
    }
}
