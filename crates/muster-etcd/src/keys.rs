//! Where cluster state lives in etcd (docs/cluster.md "Key layout"). All keys of one cluster
//! start with `/<cluster name>/`, so clusters can share an etcd:
//!
//! | key                                                      | value                              |
//! |----------------------------------------------------------|------------------------------------|
//! | `/<c>/owner/<shard>`                                     | owning node (ownership module)     |
//! | `/<c>/group/<shard>/<group>`                             | group record (redb format v5)      |
//! | `/<c>/offset/<shard>/<group>/<topic>/<partition>`        | committed offset (redb format v5)  |
//! | `/<c>/topic/<topic>`                                     | partition count, decimal ASCII     |
//! | `/<c>/journal/<shard>/<group>/<generation>`              | rebalance journal entry (redb v5)  |
//! | `/<c>/history/<shard>/<group>/<topic>/<partition>/<seq>` | offset history entry (redb v5)     |
//! | `/<c>/quarantine/<shard>/<group>/<topic>/<partition>`    | quarantined offset (redb v5)       |
//! | `/<c>/quota/groups/<principal>/<group>`                  | the group's shard, decimal ASCII   |
//! | `/<c>/charge/<shard>/<group>`                            | principal charged, raw bytes       |
//!
//! A principal's cluster-wide `max_groups` usage is the number of keys under
//! `quota/groups/<principal>/` (one per group charged to it); `charge/<shard>/` says the same
//! by shard, so that a node taking a shard over finds the units its groups hold (store/quota.rs).
//! Group ids and topic names are escaped ([`escape`]) so that they never contain `/`: a
//! group's keys are then exactly those under its prefix (`g`'s range never reaches `g/x` or
//! `g2`), and a shard's are exactly those under `group/<shard>/`, `offset/<shard>/`,
//! `journal/<shard>/`, `history/<shard>/` and `quarantine/<shard>/`, which is how a node taking
//! a shard over loads it. Shards and partitions are decimal; journal generations are 10-digit
//! zero-padded decimal (generations are never negative) and history sequence numbers 20-digit
//! zero-padded decimal (every `u64`), so that key order is generation order and, within a
//! partition's history prefix (which ends in `/`, so partition 1's never reaches 10's), seq
//! order: trimming a partition's history is one range delete.
//!
//! Values carry no format version (etcd holds no format key): they are the bytes of
//! `muster_coordinator::storage::codec`, and a group value written by a release before redb
//! format 5 (no ownership epochs) or format 4 (no consumer part either) is still read, until
//! its group is written again.

use std::fmt::Write as _;

/// Builds and parses the keys of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    prefix: String,
}

/// A cluster name that cannot be a key prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cluster name {0:?}: it must be non-empty and contain no '/'")]
pub struct InvalidClusterName(pub String);

/// Escapes a name for a key: bytes outside `[A-Za-z0-9._~-]` become `%XX` (upper-case hex),
/// so `/` and `%` never appear raw.
pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'~' | b'-') {
            out.push(char::from(byte));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Reverses [`escape`]; `None` if `escaped` is not something [`escape`] produces.
pub fn unescape(escaped: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(escaped.len());
    let mut i = 0;
    while i < escaped.len() {
        if escaped[i] == b'%' {
            let hex = std::str::from_utf8(escaped.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(escaped[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The smallest key greater than every key starting with `prefix` (etcd's `range_end` for a
/// prefix range). Prefixes here always end in `/`, so incrementing the last byte suffices.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (never for our prefixes): "to the end of the keyspace".
    vec![0]
}

/// A parsed offset key (or quarantine key: the same parts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetKey {
    pub group_id: String,
    pub topic: String,
    pub partition: i32,
}

/// A parsed offset history key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryKey {
    pub group_id: String,
    pub topic: String,
    pub partition: i32,
    pub seq: u64,
}

/// Digits of a history key's sequence number: every `u64` fits, zero-padded.
const SEQ_DIGITS: usize = 20;

impl KeyLayout {
    pub fn new(cluster: &str) -> Result<Self, InvalidClusterName> {
        if cluster.is_empty() || cluster.contains('/') {
            return Err(InvalidClusterName(cluster.to_owned()));
        }
        Ok(KeyLayout {
            prefix: format!("/{cluster}/"),
        })
    }

    /// Everything of this cluster.
    pub fn cluster_prefix(&self) -> Vec<u8> {
        self.prefix.clone().into_bytes()
    }

    /// The key whose holder owns `shard` (attached to the owner's lease; fencing compares its
    /// mod revision).
    pub fn owner(&self, shard: u32) -> Vec<u8> {
        format!("{}owner/{shard}", self.prefix).into_bytes()
    }

    /// Every shard's owner key.
    pub fn owners_prefix(&self) -> Vec<u8> {
        format!("{}owner/", self.prefix).into_bytes()
    }

    /// The shard of a key from [`KeyLayout::owner`].
    pub fn parse_owner(&self, key: &[u8]) -> Option<u32> {
        let rest = key.strip_prefix(self.owners_prefix().as_slice())?;
        std::str::from_utf8(rest).ok()?.parse().ok()
    }

    /// A live node's registration (on its lease; the value is its advertised `host:port`).
    pub fn node(&self, node_id: &str) -> Vec<u8> {
        format!("{}node/{}", self.prefix, escape(node_id)).into_bytes()
    }

    pub fn nodes_prefix(&self) -> Vec<u8> {
        format!("{}node/", self.prefix).into_bytes()
    }

    /// The node id of a key from [`KeyLayout::node`].
    pub fn parse_node(&self, key: &[u8]) -> Option<String> {
        unescape(key.strip_prefix(self.nodes_prefix().as_slice())?)
    }

    /// The cluster's shard count, fixed when the cluster is first created.
    pub fn shard_count(&self) -> Vec<u8> {
        format!("{}shards", self.prefix).into_bytes()
    }

    pub fn groups_prefix(&self) -> Vec<u8> {
        format!("{}group/", self.prefix).into_bytes()
    }

    pub fn shard_groups_prefix(&self, shard: u32) -> Vec<u8> {
        format!("{}group/{shard}/", self.prefix).into_bytes()
    }

    pub fn group(&self, shard: u32, group_id: &str) -> Vec<u8> {
        format!("{}group/{shard}/{}", self.prefix, escape(group_id)).into_bytes()
    }

    pub fn offsets_prefix(&self) -> Vec<u8> {
        format!("{}offset/", self.prefix).into_bytes()
    }

    pub fn shard_offsets_prefix(&self, shard: u32) -> Vec<u8> {
        format!("{}offset/{shard}/", self.prefix).into_bytes()
    }

    /// All offsets of one group.
    pub fn group_offsets_prefix(&self, shard: u32, group_id: &str) -> Vec<u8> {
        format!("{}offset/{shard}/{}/", self.prefix, escape(group_id)).into_bytes()
    }

    pub fn offset(&self, shard: u32, group_id: &str, topic: &str, partition: i32) -> Vec<u8> {
        format!(
            "{}offset/{shard}/{}/{}/{partition}",
            self.prefix,
            escape(group_id),
            escape(topic)
        )
        .into_bytes()
    }

    pub fn journals_prefix(&self) -> Vec<u8> {
        format!("{}journal/", self.prefix).into_bytes()
    }

    pub fn shard_journals_prefix(&self, shard: u32) -> Vec<u8> {
        format!("{}journal/{shard}/", self.prefix).into_bytes()
    }

    /// The whole rebalance journal of one group.
    pub fn group_journal_prefix(&self, shard: u32, group_id: &str) -> Vec<u8> {
        format!("{}journal/{shard}/{}/", self.prefix, escape(group_id)).into_bytes()
    }

    /// One journal entry: the generation it reached, zero-padded so keys sort by it.
    pub fn journal(&self, shard: u32, group_id: &str, generation: i32) -> Vec<u8> {
        format!(
            "{}journal/{shard}/{}/{generation:010}",
            self.prefix,
            escape(group_id)
        )
        .into_bytes()
    }

    /// The group id and generation of a key from [`KeyLayout::journal`].
    pub fn parse_journal(&self, key: &[u8]) -> Option<(String, i32)> {
        let rest = key.strip_prefix(self.journals_prefix().as_slice())?;
        let (_shard, rest) = split_once(rest)?;
        let (group, generation) = split_once(rest)?;
        Some((
            unescape(group)?,
            std::str::from_utf8(generation).ok()?.parse().ok()?,
        ))
    }

    pub fn histories_prefix(&self) -> Vec<u8> {
        format!("{}history/", self.prefix).into_bytes()
    }

    pub fn shard_history_prefix(&self, shard: u32) -> Vec<u8> {
        format!("{}history/{shard}/", self.prefix).into_bytes()
    }

    /// The offset history of every partition of one group.
    pub fn group_history_prefix(&self, shard: u32, group_id: &str) -> Vec<u8> {
        format!("{}history/{shard}/{}/", self.prefix, escape(group_id)).into_bytes()
    }

    /// One history entry: its partition's prefix, then `seq` zero-padded so keys sort by it.
    pub fn history(
        &self,
        shard: u32,
        group_id: &str,
        topic: &str,
        partition: i32,
        seq: u64,
    ) -> Vec<u8> {
        format!(
            "{}history/{shard}/{}/{}/{partition}/{seq:0width$}",
            self.prefix,
            escape(group_id),
            escape(topic),
            width = SEQ_DIGITS
        )
        .into_bytes()
    }

    /// The parts of a key from [`KeyLayout::history`]; the seq must have all its digits.
    pub fn parse_history(&self, key: &[u8]) -> Option<HistoryKey> {
        let rest = key.strip_prefix(self.histories_prefix().as_slice())?;
        let (_shard, rest) = split_once(rest)?;
        let (group, rest) = split_once(rest)?;
        let (topic, rest) = split_once(rest)?;
        let (partition, seq) = split_once(rest)?;
        if seq.len() != SEQ_DIGITS || !seq.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(HistoryKey {
            group_id: unescape(group)?,
            topic: unescape(topic)?,
            partition: std::str::from_utf8(partition).ok()?.parse().ok()?,
            seq: std::str::from_utf8(seq).ok()?.parse().ok()?,
        })
    }

    pub fn quarantines_prefix(&self) -> Vec<u8> {
        format!("{}quarantine/", self.prefix).into_bytes()
    }

    pub fn shard_quarantine_prefix(&self, shard: u32) -> Vec<u8> {
        format!("{}quarantine/{shard}/", self.prefix).into_bytes()
    }

    /// The whole expiry quarantine of one group.
    pub fn group_quarantine_prefix(&self, shard: u32, group_id: &str) -> Vec<u8> {
        format!("{}quarantine/{shard}/{}/", self.prefix, escape(group_id)).into_bytes()
    }

    pub fn quarantine(&self, shard: u32, group_id: &str, topic: &str, partition: i32) -> Vec<u8> {
        format!(
            "{}quarantine/{shard}/{}/{}/{partition}",
            self.prefix,
            escape(group_id),
            escape(topic)
        )
        .into_bytes()
    }

    /// The parts of a key from [`KeyLayout::quarantine`].
    pub fn parse_quarantine(&self, key: &[u8]) -> Option<OffsetKey> {
        let rest = key.strip_prefix(self.quarantines_prefix().as_slice())?;
        parse_group_partition(rest)
    }

    pub fn topics_prefix(&self) -> Vec<u8> {
        format!("{}topic/", self.prefix).into_bytes()
    }

    pub fn topic(&self, topic: &str) -> Vec<u8> {
        format!("{}topic/{}", self.prefix, escape(topic)).into_bytes()
    }

    /// Every principal's units of cluster-wide `max_groups`.
    pub fn quota_groups_prefix(&self) -> Vec<u8> {
        format!("{}quota/groups/", self.prefix).into_bytes()
    }

    /// One principal's units: one key per group charged to it.
    pub fn principal_groups_prefix(&self, principal: &str) -> Vec<u8> {
        format!("{}quota/groups/{}/", self.prefix, escape(principal)).into_bytes()
    }

    /// The unit of `principal`'s `max_groups` that `group_id` holds.
    pub fn principal_group(&self, principal: &str, group_id: &str) -> Vec<u8> {
        format!(
            "{}quota/groups/{}/{}",
            self.prefix,
            escape(principal),
            escape(group_id)
        )
        .into_bytes()
    }

    /// The charges of a shard's groups (which principal each is charged to).
    pub fn shard_charges_prefix(&self, shard: u32) -> Vec<u8> {
        format!("{}charge/{shard}/", self.prefix).into_bytes()
    }

    pub fn charge(&self, shard: u32, group_id: &str) -> Vec<u8> {
        format!("{}charge/{shard}/{}", self.prefix, escape(group_id)).into_bytes()
    }

    /// The group id of a key from [`KeyLayout::charge`].
    pub fn parse_charge(&self, key: &[u8]) -> Option<String> {
        let rest = key.strip_prefix(format!("{}charge/", self.prefix).as_bytes())?;
        let (_shard, group) = split_once(rest)?;
        unescape(group)
    }

    /// The group id of a key from [`KeyLayout::group`].
    pub fn parse_group(&self, key: &[u8]) -> Option<String> {
        let rest = key.strip_prefix(self.groups_prefix().as_slice())?;
        let (_shard, group) = split_once(rest)?;
        unescape(group)
    }

    /// The parts of a key from [`KeyLayout::offset`].
    pub fn parse_offset(&self, key: &[u8]) -> Option<OffsetKey> {
        let rest = key.strip_prefix(self.offsets_prefix().as_slice())?;
        parse_group_partition(rest)
    }

    /// The topic name of a key from [`KeyLayout::topic`].
    pub fn parse_topic(&self, key: &[u8]) -> Option<String> {
        unescape(key.strip_prefix(self.topics_prefix().as_slice())?)
    }
}

/// `<shard>/<group>/<topic>/<partition>`, as offset and quarantine keys end.
fn parse_group_partition(rest: &[u8]) -> Option<OffsetKey> {
    let (_shard, rest) = split_once(rest)?;
    let (group, rest) = split_once(rest)?;
    let (topic, partition) = split_once(rest)?;
    Some(OffsetKey {
        group_id: unescape(group)?,
        topic: unescape(topic)?,
        partition: std::str::from_utf8(partition).ok()?.parse().ok()?,
    })
}

fn split_once(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&b| b == b'/')?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

#[cfg(test)]
mod tests {
    use super::{escape, prefix_end, unescape, HistoryKey, KeyLayout, OffsetKey};

    #[test]
    fn escaping_round_trips_and_hides_slashes() {
        for name in ["g", "g/x", "g%2F", "a b", "g\0", "grüppe", "", "..", "~-_."] {
            let escaped = escape(name);
            assert!(!escaped.contains('/'), "{escaped}");
            assert_eq!(unescape(escaped.as_bytes()).as_deref(), Some(name));
        }
        assert_eq!(escape("a/b c"), "a%2Fb%20c");
        assert_eq!(unescape(b"%2"), None);
        assert_eq!(unescape(b"%ZZ"), None);
    }

    #[test]
    fn keys_are_laid_out_as_documented_and_parse_back() {
        let keys = KeyLayout::new("prod").expect("a valid name");
        assert_eq!(keys.owner(7), b"/prod/owner/7");
        assert_eq!(keys.group(7, "my/group"), b"/prod/group/7/my%2Fgroup");
        assert_eq!(
            keys.offset(7, "g", "orders", 3),
            b"/prod/offset/7/g/orders/3"
        );
        assert_eq!(keys.topic("orders"), b"/prod/topic/orders");
        assert_eq!(keys.node("n 1"), b"/prod/node/n%201");
        assert_eq!(keys.parse_node(&keys.node("n/1")).as_deref(), Some("n/1"));
        assert_eq!(keys.shard_count(), b"/prod/shards");
        assert_eq!(keys.parse_owner(&keys.owner(63)), Some(63));
        assert_eq!(keys.parse_owner(b"/prod/owner/x"), None);
        assert_eq!(
            keys.parse_group(&keys.group(3, "a/b")).as_deref(),
            Some("a/b")
        );
        assert_eq!(
            keys.parse_offset(&keys.offset(3, "g 1", "t/x", -1)),
            Some(OffsetKey {
                group_id: "g 1".into(),
                topic: "t/x".into(),
                partition: -1
            })
        );
        assert_eq!(keys.parse_topic(&keys.topic("a b")).as_deref(), Some("a b"));
        assert_eq!(keys.parse_offset(b"/prod/offset/3/g"), None);
        assert_eq!(
            keys.principal_group("a/b", "g 1"),
            b"/prod/quota/groups/a%2Fb/g%201"
        );
        assert!(keys
            .principal_group("a", "g")
            .starts_with(&keys.principal_groups_prefix("a")));
        assert!(!keys
            .principal_group("ab", "g")
            .starts_with(&keys.principal_groups_prefix("a")));
        assert_eq!(keys.charge(3, "g/1"), b"/prod/charge/3/g%2F1");
        assert_eq!(
            keys.parse_charge(&keys.charge(3, "g/1")).as_deref(),
            Some("g/1")
        );
        assert!(keys
            .charge(1, "g")
            .starts_with(&keys.shard_charges_prefix(1)));
        assert!(!keys
            .charge(10, "g")
            .starts_with(&keys.shard_charges_prefix(1)));
        assert!(KeyLayout::new("").is_err());
        assert!(KeyLayout::new("a/b").is_err());
    }

    #[test]
    fn a_group_prefix_holds_only_that_group() {
        let keys = KeyLayout::new("c").expect("a valid name");
        let prefix = keys.group_offsets_prefix(1, "g");
        assert!(keys.offset(1, "g", "t", 0).starts_with(&prefix));
        for other in ["g2", "g/x", "g\0", "g "] {
            assert!(
                !keys.offset(1, other, "t", 0).starts_with(&prefix),
                "{other}"
            );
        }
        assert_eq!(prefix_end(b"/c/offset/1/g/"), b"/c/offset/1/g0");
    }

    #[test]
    fn history_and_quarantine_keys_are_laid_out_as_documented_and_parse_back() {
        let keys = KeyLayout::new("prod").expect("a valid name");
        assert_eq!(
            keys.history(7, "g", "orders", 3, 42),
            b"/prod/history/7/g/orders/3/00000000000000000042"
        );
        assert_eq!(
            keys.parse_history(&keys.history(7, "g 1", "t/x", -1, u64::MAX)),
            Some(HistoryKey {
                group_id: "g 1".into(),
                topic: "t/x".into(),
                partition: -1,
                seq: u64::MAX
            })
        );
        // A seq without all its digits is no key of ours (it would sort out of place).
        assert_eq!(keys.parse_history(b"/prod/history/7/g/orders/3/42"), None);
        assert_eq!(keys.parse_history(b"/prod/history/7/g/orders/3"), None);
        assert_eq!(
            keys.quarantine(7, "my/group", "orders", 3),
            b"/prod/quarantine/7/my%2Fgroup/orders/3"
        );
        assert_eq!(
            keys.parse_quarantine(&keys.quarantine(2, "g", "t", 9)),
            Some(OffsetKey {
                group_id: "g".into(),
                topic: "t".into(),
                partition: 9
            })
        );
        assert!(keys
            .history(1, "g", "t", 0, 0)
            .starts_with(&keys.group_history_prefix(1, "g")));
        assert!(keys
            .quarantine(1, "g", "t", 0)
            .starts_with(&keys.group_quarantine_prefix(1, "g")));
    }

    /// Within a partition keys sort by seq, and no other partition's key falls between its
    /// first and last (partition 1 and 10, topic t and t2).
    #[test]
    fn history_keys_sort_by_seq_within_their_partition() {
        let keys = KeyLayout::new("c").expect("a valid name");
        let seqs = [0, 1, 9, 10, 99, 1 << 40, u64::MAX];
        for pair in seqs.windows(2) {
            assert!(keys.history(1, "g", "t", 1, pair[0]) < keys.history(1, "g", "t", 1, pair[1]));
        }
        let (first, last) = (
            keys.history(1, "g", "t", 1, 0),
            keys.history(1, "g", "t", 1, u64::MAX),
        );
        for (topic, partition) in [("t", 10), ("t", 0), ("t2", 1), ("t", 11)] {
            let other = keys.history(1, "g", topic, partition, 5);
            assert!(other < first || other > last, "{topic}/{partition}");
        }
    }
}
