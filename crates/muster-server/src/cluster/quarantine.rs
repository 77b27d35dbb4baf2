//! The groups this node holds back because a key of theirs in etcd cannot be decoded (issue
//! #24 item 5, docs/cluster.md "Unreadable keys"), per owned shard: which groups (requests for
//! them are refused with COORDINATOR_NOT_AVAILABLE through the shard table, so they are never
//! recreated empty nor written over), which keys and why (the `/readyz` counts, the
//! dashboard's `/api/quarantine` and the `muster_quarantined_keys` gauge), and when each
//! group was last read again.
//!
//! The ownership loop fills it when it loads a shard, reads each quarantined group again every
//! [`RECHECK`] (a key fixed or removed with etcdctl lets the group load), and empties a
//! shard's entry when the shard goes. The routing path asks only [`Quarantine::holds`]: one
//! atomic per shard, and a lock only for a shard that has something quarantined.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

use muster_etcd::UnreadableKey;

/// How often a quarantined group is read again from etcd (at most).
pub const RECHECK: Duration = Duration::from_secs(2);

/// Most quarantined groups read again per round of the ownership loop (one a second), the
/// longest unread first: many groups held back at once (values of a newer release, say) must
/// not turn into a storm of reads against etcd; each is then read again every
/// `groups / RECHECK_BATCH` seconds or so.
pub const RECHECK_BATCH: usize = 16;

/// One shard's quarantined groups and unattributable keys.
#[derive(Debug, Default)]
struct ShardEntry {
    groups: BTreeMap<String, GroupEntry>,
    /// Keys that name no group: skipped, shown until the shard is loaded again.
    stray: Vec<UnreadableKey>,
}

#[derive(Debug)]
struct GroupEntry {
    keys: Vec<UnreadableKey>,
    checked_at: Instant,
}

impl ShardEntry {
    fn key_count(&self) -> usize {
        self.stray.len() + self.groups.values().map(|g| g.keys.len()).sum::<usize>()
    }
}

/// The quarantine (module docs).
#[derive(Debug)]
pub struct Quarantine {
    /// Per shard: whether anything of it is quarantined.
    marked: Box<[AtomicBool]>,
    shards: RwLock<BTreeMap<u32, ShardEntry>>,
}

impl Quarantine {
    pub fn new(shards: u32) -> Self {
        Self {
            marked: (0..shards.max(1)).map(|_| AtomicBool::new(false)).collect(),
            shards: RwLock::new(BTreeMap::new()),
        }
    }

    fn mark(&self, shard: u32, marked: bool) {
        if let Some(flag) = self.marked.get(shard as usize) {
            flag.store(marked, Ordering::Release);
        }
    }

    /// Replaces what is quarantined of `shard` (just loaded) with `unreadable`, read at `now`.
    /// Returns how many keys that is (for the gauge).
    pub fn set(&self, shard: u32, unreadable: &[UnreadableKey], now: Instant) -> usize {
        let mut entry = ShardEntry::default();
        for bad in unreadable {
            match &bad.group_id {
                Some(group_id) => entry
                    .groups
                    .entry(group_id.clone())
                    .or_insert_with(|| GroupEntry {
                        keys: Vec::new(),
                        checked_at: now,
                    })
                    .keys
                    .push(bad.clone()),
                None => entry.stray.push(bad.clone()),
            }
        }
        let count = entry.key_count();
        let mut shards = self.shards.write().unwrap_or_else(PoisonError::into_inner);
        if count == 0 {
            shards.remove(&shard);
        } else {
            shards.insert(shard, entry);
        }
        self.mark(shard, count > 0);
        count
    }

    /// Forgets `shard` (given away or lost). Returns whether anything of it was quarantined.
    pub fn clear(&self, shard: u32) -> bool {
        self.mark(shard, false);
        self.shards
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&shard)
            .is_some()
    }

    /// Whether `group_id` (of `shard`) is quarantined.
    pub fn holds(&self, shard: u32, group_id: &str) -> bool {
        let marked = self
            .marked
            .get(shard as usize)
            .is_some_and(|m| m.load(Ordering::Acquire));
        marked
            && self
                .shards
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&shard)
                .is_some_and(|e| e.groups.contains_key(group_id))
    }

    /// The quarantined groups due to be read again at `now` (last read [`RECHECK`] ago or
    /// more), at most [`RECHECK_BATCH`], the longest unread first, as `(shard, group id)`;
    /// each is counted as read at `now`.
    pub fn due(&self, now: Instant) -> Vec<(u32, String)> {
        let mut shards = self.shards.write().unwrap_or_else(PoisonError::into_inner);
        let mut due: Vec<(Instant, u32, String)> = Vec::new();
        for (&shard, entry) in shards.iter() {
            for (group_id, group) in &entry.groups {
                if now.saturating_duration_since(group.checked_at) >= RECHECK {
                    due.push((group.checked_at, shard, group_id.clone()));
                }
            }
        }
        due.sort();
        due.truncate(RECHECK_BATCH);
        for (_, shard, group_id) in &due {
            if let Some(group) = shards
                .get_mut(shard)
                .and_then(|e| e.groups.get_mut(group_id))
            {
                group.checked_at = now;
            }
        }
        due.into_iter().map(|(_, s, g)| (s, g)).collect()
    }

    /// A quarantined group read again and still undecodable: its keys now are `unreadable`.
    /// Returns the keys it did not have before (each is logged once, when first found), and
    /// the shard's key count; `None` if the group is no longer quarantined here.
    pub fn still_bad(
        &self,
        shard: u32,
        group_id: &str,
        unreadable: Vec<UnreadableKey>,
    ) -> Option<(Vec<UnreadableKey>, usize)> {
        let mut shards = self.shards.write().unwrap_or_else(PoisonError::into_inner);
        let entry = shards.get_mut(&shard)?;
        let group = entry.groups.get_mut(group_id)?;
        let new: Vec<_> = unreadable
            .iter()
            .filter(|u| !group.keys.iter().any(|k| k.key == u.key))
            .cloned()
            .collect();
        group.keys = unreadable;
        Some((new, entry.key_count()))
    }

    /// Lifts the quarantine of a group whose keys all decode now (its state is loaded).
    /// Returns the shard's key count left; `None` if it was not quarantined here.
    pub fn lift(&self, shard: u32, group_id: &str) -> Option<usize> {
        let mut shards = self.shards.write().unwrap_or_else(PoisonError::into_inner);
        let entry = shards.get_mut(&shard)?;
        entry.groups.remove(group_id)?;
        let count = entry.key_count();
        if count == 0 {
            shards.remove(&shard);
            self.mark(shard, false);
        }
        Some(count)
    }

    /// The bad keys per shard that has any, in shard order (`/readyz`: counts only, no
    /// group data there).
    pub fn counts(&self) -> Vec<(u32, usize)> {
        self.shards
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(&shard, entry)| (shard, entry.key_count()))
            .collect()
    }

    /// Every quarantined key (the dashboard's `/api/quarantine`, which filters them by the
    /// principal's rights), in shard, group, key order; stray keys last in their shard.
    pub fn entries(&self) -> Vec<QuarantinedKey> {
        let shards = self.shards.read().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for (&shard, entry) in shards.iter() {
            let keys = entry
                .groups
                .values()
                .flat_map(|g| g.keys.iter())
                .chain(entry.stray.iter());
            out.extend(keys.map(|bad| QuarantinedKey {
                shard,
                group_id: bad.group_id.clone(),
                key: bad.key_text(),
                error: bad.reason.clone(),
            }));
        }
        out
    }
}

/// One quarantined key, as shown to operators.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QuarantinedKey {
    pub shard: u32,
    /// The group held back; `None` for a key that names no group (skipped).
    pub group_id: Option<String>,
    /// The full etcd key.
    pub key: String,
    /// Why it could not be decoded.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(key: &str, group_id: Option<&str>) -> UnreadableKey {
        UnreadableKey {
            key: key.as_bytes().to_vec(),
            group_id: group_id.map(str::to_owned),
            reason: "garbage".into(),
        }
    }

    #[test]
    fn a_quarantined_group_is_held_rechecked_at_intervals_and_lifted() {
        let q = Quarantine::new(4);
        let t0 = Instant::now();
        let keys = [
            bad("/c/group/1/g", Some("g")),
            bad("/c/offset/1/g/t/0", Some("g")),
            bad("/c/group/1/%ZZ", None),
        ];
        assert_eq!(q.set(1, &keys, t0), 3);
        assert!(q.holds(1, "g"));
        assert!(!q.holds(1, "h"));
        assert!(!q.holds(2, "g"));
        assert_eq!(q.counts(), vec![(1, 3)]);
        let entries = q.entries();
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[0],
            QuarantinedKey {
                shard: 1,
                group_id: Some("g".into()),
                key: "/c/group/1/g".into(),
                error: "garbage".into(),
            }
        );
        assert_eq!(entries[2].group_id, None);

        assert!(q.due(t0 + RECHECK / 2).is_empty());
        assert_eq!(q.due(t0 + RECHECK), vec![(1, "g".to_owned())]);
        // Counted as read: not due again at once.
        assert!(q.due(t0 + RECHECK).is_empty());

        // Read again: one key fixed, one new: only the new one is reported.
        let (new, count) = q
            .still_bad(
                1,
                "g",
                vec![
                    bad("/c/group/1/g", Some("g")),
                    bad("/c/journal/1/g/1", Some("g")),
                ],
            )
            .expect("quarantined");
        assert_eq!(new, vec![bad("/c/journal/1/g/1", Some("g"))]);
        assert_eq!(count, 3);

        assert_eq!(q.lift(1, "g"), Some(1));
        assert!(!q.holds(1, "g"));
        assert_eq!(q.lift(1, "g"), None);
        // The stray key stays until the shard goes.
        assert_eq!(q.counts(), vec![(1, 1)]);
        assert!(q.clear(1));
        assert!(q.entries().is_empty());
        assert!(!q.clear(1));

        // A load with nothing bad leaves nothing behind.
        assert_eq!(q.set(2, &[], t0), 0);
        assert!(q.counts().is_empty());
    }

    /// Many groups held back at once are read again a batch at a time, the longest unread
    /// first.
    #[test]
    fn many_quarantined_groups_are_rechecked_a_batch_at_a_time() {
        let q = Quarantine::new(4);
        let t0 = Instant::now();
        let groups = 7 * RECHECK_BATCH + 4;
        let keys: Vec<_> = (0..groups)
            .map(|i| bad(&format!("/c/group/3/g{i:04}"), Some(&format!("g{i:04}"))))
            .collect();
        assert_eq!(q.set(3, &keys, t0), groups);

        let first = q.due(t0 + RECHECK);
        assert_eq!(first.len(), RECHECK_BATCH);
        // The next round takes the others, not the ones just read.
        let second = q.due(t0 + RECHECK + Duration::from_secs(1));
        assert_eq!(second.len(), RECHECK_BATCH);
        assert!(second.iter().all(|g| !first.contains(g)));
        // The rest are read in later rounds; then the longest unread (the first batch) come
        // first again.
        let mut t = t0 + RECHECK + Duration::from_secs(1);
        while q.due(t).len() == RECHECK_BATCH {
            t += Duration::from_millis(1);
        }
        let again = q.due(t0 + 2 * RECHECK + Duration::from_secs(1));
        assert_eq!(again, first);
    }
}
