//! Values in etcd that cannot be decoded, and what a shard load does with them: the group a
//! bad key belongs to is quarantined whole (none of its record, offsets, journal, history or
//! expiry quarantine is loaded), the shard's other groups load as usual, and a key that cannot
//! even be attributed to a group is skipped. The ownership loop keeps the shard either way
//! (docs/cluster.md "Unreadable keys"): one bad value must not make every group of its shard
//! unavailable, nor the shard bounce between nodes.
//!
//! A whole group rather than the one value: serving a group without one of its offsets would
//! look like a partition never committed (its consumer would reset to the earliest or latest
//! offset), and serving it without its record would recreate it empty under its old offsets.

use std::collections::BTreeSet;

use muster_coordinator::storage::StoredState;

/// One key whose value (or the key itself) could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableKey {
    /// The full etcd key, as stored.
    pub key: Vec<u8>,
    /// The group the key belongs to; `None` if the key itself could not be parsed.
    pub group_id: Option<String>,
    /// Why it could not be decoded.
    pub reason: String,
}

impl UnreadableKey {
    /// The key as text (lossy: keys Muster writes are ASCII).
    pub fn key_text(&self) -> String {
        String::from_utf8_lossy(&self.key).into_owned()
    }
}

impl std::fmt::Display for UnreadableKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "etcd key {:?}: {}", self.key_text(), self.reason)
    }
}

/// A shard (or one group) as read from etcd: what could be decoded, and what could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardLoad {
    /// The decoded state, without any group of [`ShardLoad::quarantined`].
    pub state: StoredState,
    /// Every key that could not be decoded, in key order.
    pub unreadable: Vec<UnreadableKey>,
}

impl ShardLoad {
    /// Builds a load from everything decoded and the keys that were not: the groups those
    /// keys belong to are taken out of `state` whole (module docs).
    pub(super) fn new(mut state: StoredState, mut unreadable: Vec<UnreadableKey>) -> Self {
        unreadable.sort_by(|a, b| a.key.cmp(&b.key));
        let quarantined: BTreeSet<&str> = unreadable
            .iter()
            .filter_map(|u| u.group_id.as_deref())
            .collect();
        if !quarantined.is_empty() {
            let keep = |group_id: &str| !quarantined.contains(group_id);
            state.groups.retain(|g| keep(&g.group_id));
            state.offsets.retain(|(g, _)| keep(g));
            state.journals.retain(|(g, _)| keep(g));
            state.history.retain(|(g, _)| keep(g));
            state.quarantine.retain(|(g, _)| keep(g));
        }
        ShardLoad { state, unreadable }
    }

    /// The groups not loaded because a key of theirs could not be decoded.
    pub fn quarantined(&self) -> BTreeSet<&str> {
        self.unreadable
            .iter()
            .filter_map(|u| u.group_id.as_deref())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use muster_coordinator::storage::{CommittedOffset, GroupRecord, OffsetWrite};

    use super::*;

    fn offsets(group_id: &str) -> (String, Vec<OffsetWrite>) {
        (
            group_id.into(),
            vec![OffsetWrite {
                topic: "t".into(),
                partition: 0,
                committed: CommittedOffset {
                    offset: 7,
                    metadata: None,
                    commit_timestamp_ms: 1,
                },
            }],
        )
    }

    #[test]
    fn a_bad_key_takes_its_whole_group_out_and_nothing_else() {
        let state = StoredState {
            groups: vec![
                GroupRecord::empty("bad".into(), 1),
                GroupRecord::empty("good".into(), 1),
            ],
            offsets: vec![offsets("bad"), offsets("good"), offsets("offsets-only")],
            journals: vec![("bad".into(), vec![])],
            history: vec![("bad".into(), vec![]), ("good".into(), vec![])],
            quarantine: vec![("bad".into(), vec![])],
            topics: vec![],
        };
        let unreadable = vec![
            UnreadableKey {
                key: b"/c/offset/1/bad/t/1".to_vec(),
                group_id: Some("bad".into()),
                reason: "truncated".into(),
            },
            UnreadableKey {
                key: b"/c/group/1/%ZZ".to_vec(),
                group_id: None,
                reason: "not a group key".into(),
            },
        ];
        let load = ShardLoad::new(state, unreadable);
        assert_eq!(load.quarantined(), BTreeSet::from(["bad"]));
        let ids: Vec<_> = load
            .state
            .groups
            .iter()
            .map(|g| g.group_id.as_str())
            .collect();
        assert_eq!(ids, ["good"]);
        let with_offsets: Vec<_> = load.state.offsets.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(with_offsets, ["good", "offsets-only"]);
        assert!(load.state.journals.is_empty());
        assert_eq!(load.state.history.len(), 1);
        assert!(load.state.quarantine.is_empty());
        // Sorted by key; the unattributable key is named, not lost.
        assert_eq!(load.unreadable[0].key_text(), "/c/group/1/%ZZ");
        assert_eq!(
            load.unreadable[1].to_string(),
            "etcd key \"/c/offset/1/bad/t/1\": truncated"
        );
    }
}
