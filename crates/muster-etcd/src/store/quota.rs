//! Cluster-wide `max_groups` (issue #24): a principal's groups are counted across every node
//! of the cluster, in etcd, not per node.
//!
//! Each group charged to a principal holds one key, `quota/groups/<principal>/<group>`, and
//! the same fact by shard, `charge/<shard>/<group>` → principal ([`KeyLayout`]); the
//! principal's usage is the number of keys under its prefix. Charging a new group
//! ([`charge`]) reads that count and whether the group holds a unit already at one revision,
//! then puts both keys in a transaction that compares the group's shard ownership (only the
//! owner creates the group) and, when the principal has a limit, that no key under its prefix
//! was created or changed since the read (`mod_revision < read + 1` over the range): of two
//! nodes racing for the last unit exactly one transaction passes; the other counts again and
//! answers `QuotaExceeded`. A unit given back only lowers the count, which no compare needs
//! to catch. This node's charges of one principal take turns, so they never fail each other's
//! compares.
//!
//! The unit is given back in the transaction that deletes the group's record: the writer adds
//! [`release_ops`] to a `DeleteGroup` of a group this node knows is charged ([`Charges`]). A
//! group that never had a record (it lived only in the memory of a node that died, or moved
//! shards before its first record) leaves a charge behind: the node taking its shard over
//! gives every charge back whose group it did not load charged to that principal, and
//! charges the loaded groups recorded with a creator but holding no unit (written before
//! units existed) — [`reconcile`], before the shard's groups are served. So no unit leaks
//! past a shard's next owner, and none is counted twice (a unit is one key per group,
//! whichever node holds the group).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use muster_coordinator::storage::{StoreError, StoredState};

use super::plan::{FencedOp, KeyOp};
use super::{ShardStatus, Shared};
use crate::client::EtcdClient;
use crate::generated::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::generated::etcdserverpb::request_op::Request;
use crate::generated::etcdserverpb::response_op::Response;
use crate::generated::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RangeResponse, RequestOp, TxnRequest,
    TxnResponse,
};
use crate::keys::{prefix_end, KeyLayout};
use crate::shard::shard_of;

/// Reads and compares of one charge while other nodes' charges of the principal keep landing
/// first; each failed compare means one of theirs succeeded.
const MAX_CHARGE_ATTEMPTS: u32 = 64;

/// The units this node's groups hold (what a `DeleteGroup` gives back), and one turn per
/// principal being charged.
#[derive(Debug, Default)]
pub(super) struct Charges {
    /// Group id → its shard and the principal it is charged to.
    by_group: Mutex<HashMap<String, (u32, Arc<str>)>>,
    turns: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
}

impl Charges {
    fn groups(&self) -> MutexGuard<'_, HashMap<String, (u32, Arc<str>)>> {
        // Plain data, consistent after any panic.
        self.by_group.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shard and principal of a charged group.
    pub(super) fn charged(&self, group_id: &str) -> Option<(u32, Arc<str>)> {
        self.groups().get(group_id).cloned()
    }

    /// The units of these groups were given back (their deletion is durable).
    pub(super) fn forget(&self, group_ids: &[String]) {
        let mut groups = self.groups();
        for group_id in group_ids {
            groups.remove(group_id);
        }
    }

    /// The shard is no longer this node's: its groups' units are the next owner's to know.
    pub(super) fn forget_shard(&self, shard: u32) {
        self.groups().retain(|_, (s, _)| *s != shard);
    }

    fn record(&self, group_id: &str, shard: u32, principal: &Arc<str>) {
        self.groups()
            .insert(group_id.to_owned(), (shard, Arc::clone(principal)));
    }

    /// The principal's turn: this node charges it one group at a time.
    fn turn(&self, principal: &Arc<str>) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(turns.entry(Arc::clone(principal)).or_default())
    }

    /// Drops the principal's turn once no one waits for it.
    fn end_turn(&self, principal: &Arc<str>, turn: Arc<tokio::sync::Mutex<()>>) {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        drop(turn);
        if turns
            .get(principal)
            .is_some_and(|t| Arc::strong_count(t) == 1)
        {
            turns.remove(principal);
        }
    }
}

/// The operations that give a group's unit back (added to the transaction deleting it).
pub(super) fn release_ops(
    keys: &KeyLayout,
    shard: u32,
    group_id: &str,
    principal: &str,
) -> [FencedOp; 2] {
    [
        FencedOp {
            shard: Some(shard),
            op: KeyOp::Delete {
                key: keys.principal_group(principal, group_id),
            },
        },
        FencedOp {
            shard: Some(shard),
            op: KeyOp::Delete {
                key: keys.charge(shard, group_id),
            },
        },
    ]
}

fn unavailable(error: crate::error::EtcdError) -> StoreError {
    StoreError::Unavailable(format!("charging a group's quota unit in etcd: {error}"))
}

fn owner_unchanged(keys: &KeyLayout, shard: u32, owner_mod_revision: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: keys.owner(shard),
        target_union: Some(TargetUnion::ModRevision(owner_mod_revision)),
        ..Compare::default()
    }
}

/// No key under `prefix` created or changed after `revision` (a key deleted since passes:
/// only fewer units).
fn nothing_new_under(prefix: Vec<u8>, revision: i64) -> Compare {
    Compare {
        result: CompareResult::Less as i32,
        target: CompareTarget::Mod as i32,
        range_end: prefix_end(&prefix),
        key: prefix,
        target_union: Some(TargetUnion::ModRevision(revision.saturating_add(1))),
    }
}

/// A planned key operation as a transaction's operation.
fn request_op(op: KeyOp) -> RequestOp {
    let request = match op {
        KeyOp::Put { key, value } => Request::RequestPut(PutRequest {
            key,
            value,
            ..PutRequest::default()
        }),
        KeyOp::Delete { key } => Request::RequestDeleteRange(DeleteRangeRequest {
            key,
            ..DeleteRangeRequest::default()
        }),
        KeyOp::DeleteRange { start, end } => Request::RequestDeleteRange(DeleteRangeRequest {
            key: start,
            range_end: end,
            ..DeleteRangeRequest::default()
        }),
    };
    RequestOp {
        request: Some(request),
    }
}

fn range_op(range: RangeRequest) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestRange(range)),
    }
}

fn put_op(key: Vec<u8>, value: Vec<u8>) -> RequestOp {
    request_op(KeyOp::Put { key, value })
}

fn range_of(response: &TxnResponse, index: usize) -> Option<&RangeResponse> {
    match response.responses.get(index)?.response.as_ref()? {
        Response::ResponseRange(range) => Some(range),
        _ => None,
    }
}

/// The read a charge is decided on: the principal's units now, whether `group_id` holds one,
/// and the revision read at.
fn usage_request(keys: &KeyLayout, principal: &str, group_id: &str) -> TxnRequest {
    let prefix = keys.principal_groups_prefix(principal);
    TxnRequest {
        compare: Vec::new(),
        success: vec![
            range_op(RangeRequest {
                range_end: prefix_end(&prefix),
                key: prefix,
                count_only: true,
                ..RangeRequest::default()
            }),
            range_op(RangeRequest {
                key: keys.principal_group(principal, group_id),
                count_only: true,
                ..RangeRequest::default()
            }),
        ],
        failure: Vec::new(),
    }
}

/// The charge itself: both keys, if the shard is still ours and (`read_at`: a limit applies)
/// nothing was added under the principal's prefix since the read; else the owner key back.
pub(super) fn charge_request(
    keys: &KeyLayout,
    shard: u32,
    owner_mod_revision: i64,
    group_id: &str,
    principal: &str,
    read_at: Option<i64>,
) -> TxnRequest {
    let mut compare = vec![owner_unchanged(keys, shard, owner_mod_revision)];
    if let Some(revision) = read_at {
        compare.push(nothing_new_under(
            keys.principal_groups_prefix(principal),
            revision,
        ));
    }
    TxnRequest {
        compare,
        success: vec![
            put_op(
                keys.principal_group(principal, group_id),
                shard.to_string().into_bytes(),
            ),
            put_op(keys.charge(shard, group_id), principal.as_bytes().to_vec()),
        ],
        failure: vec![range_op(RangeRequest {
            key: keys.owner(shard),
            ..RangeRequest::default()
        })],
    }
}

/// Charges `group_id` to `principal` unless it holds `max` groups (module docs).
pub(super) async fn charge(
    client: &EtcdClient,
    shared: &Shared,
    charges: &Charges,
    group_id: String,
    principal: Arc<str>,
    max: Option<u32>,
) -> Result<(), StoreError> {
    let turn = charges.turn(&principal);
    let result = {
        let _turn = turn.lock().await;
        charge_in_turn(client, shared, charges, &group_id, &principal, max).await
    };
    charges.end_turn(&principal, turn);
    result
}

async fn charge_in_turn(
    client: &EtcdClient,
    shared: &Shared,
    charges: &Charges,
    group_id: &str,
    principal: &Arc<str>,
    max: Option<u32>,
) -> Result<(), StoreError> {
    let keys = &shared.keys;
    let shard = shard_of(group_id, shared.shards);
    let owner_mod_revision = match shared.status(shard) {
        ShardStatus::Owned { owner_mod_revision } => owner_mod_revision,
        ShardStatus::NotOwned => return Err(StoreError::NotOwner { shard }),
        ShardStatus::Lost => return Err(StoreError::Fenced { shard }),
    };
    for _ in 0..MAX_CHARGE_ATTEMPTS {
        let read_at = match max {
            // No limit to keep: nothing to count, and no compare (a put of both keys is the
            // same unit however often it lands).
            None => None,
            Some(max) => {
                let usage = client
                    .txn(usage_request(keys, principal, group_id))
                    .await
                    .map_err(unavailable)?;
                let held = range_of(&usage, 0).map_or(0, |r| r.count);
                if range_of(&usage, 1).is_some_and(|r| r.count > 0) {
                    // Charged already (a creation whose answer was lost, or a group this node
                    // forgot while its unit stayed): the group holds that unit.
                    charges.record(group_id, shard, principal);
                    return Ok(());
                }
                let held = u64::try_from(held).unwrap_or_default();
                if held >= u64::from(max) {
                    return Err(StoreError::QuotaExceeded {
                        principal: principal.to_string(),
                        held,
                        max,
                    });
                }
                Some(usage.header.as_ref().map_or(0, |h| h.revision))
            }
        };
        let request = charge_request(
            keys,
            shard,
            owner_mod_revision,
            group_id,
            principal,
            read_at,
        );
        let response = client.txn(request).await.map_err(unavailable)?;
        if response.succeeded {
            charges.record(group_id, shard, principal);
            return Ok(());
        }
        let owner_now = range_of(&response, 0)
            .and_then(|r| r.kvs.first())
            .map_or(0, |kv| kv.mod_revision);
        if owner_now != owner_mod_revision {
            shared.mark_lost(&[(shard, owner_mod_revision)]);
            return Err(StoreError::Fenced { shard });
        }
        // Another node charged the principal since the read: count again.
    }
    Err(StoreError::Unavailable(format!(
        "principal {principal}'s groups kept changing on other nodes while this one counted \
         them ({MAX_CHARGE_ATTEMPTS} attempts)"
    )))
}

/// What reconciling a shard's charges with its loaded groups writes: the units to give back
/// (charged to a principal the group was not loaded with) and to take (a loaded group with a
/// creator and no unit), as `(group, principal)`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Reconciliation {
    pub release: Vec<(String, String)>,
    pub charge: Vec<(String, String)>,
}

/// Compares a shard's charges (`found`: group → principal) with its loaded groups.
pub(super) fn reconciliation(
    found: &BTreeMap<String, String>,
    state: &StoredState,
) -> Reconciliation {
    let wanted: BTreeMap<&str, &str> = state
        .groups
        .iter()
        .filter_map(|g| Some((g.group_id.as_str(), g.created_by.as_deref()?)))
        .collect();
    let mut out = Reconciliation::default();
    for (group, principal) in found {
        if wanted.get(group.as_str()) != Some(&principal.as_str()) {
            out.release.push((group.clone(), principal.clone()));
        }
    }
    for (group, principal) in wanted {
        if found.get(group).map(String::as_str) != Some(principal) {
            out.charge.push((group.to_owned(), principal.to_owned()));
        }
    }
    out
}

/// Makes a shard's charges match the groups loaded from it (module docs) and records them as
/// this node's. Called with the shard owned and not yet served.
pub(super) async fn reconcile(
    client: &EtcdClient,
    shared: &Shared,
    charges: &Charges,
    shard: u32,
    state: &StoredState,
    held_back: &BTreeSet<&str>,
) -> Result<(), StoreError> {
    let keys = &shared.keys;
    let ShardStatus::Owned { owner_mod_revision } = shared.status(shard) else {
        return Ok(());
    };
    let read_failed = |e| StoreError::Unavailable(format!("reading a shard's charges: {e}"));
    let (kvs, _) = client
        .range_prefix(&keys.shard_charges_prefix(shard), 0)
        .await
        .map_err(read_failed)?;
    let mut found = BTreeMap::new();
    for kv in kvs {
        let (Some(group), Ok(principal)) =
            (keys.parse_charge(&kv.key), String::from_utf8(kv.value))
        else {
            tracing::warn!(key = %String::from_utf8_lossy(&kv.key), "unreadable quota charge in etcd; ignored");
            continue;
        };
        found.insert(group, principal);
    }
    // A group held back for an undecodable key (unreadable.rs) is not in `state` but still
    // exists: its unit is neither given back nor charged again, and stays this node's.
    let (kept, found): (BTreeMap<String, String>, BTreeMap<String, String>) = found
        .into_iter()
        .partition(|(group, _)| held_back.contains(group.as_str()));
    let plan = reconciliation(&found, state);
    // One operation per key (etcd refuses a transaction naming a key twice): a group charged
    // to another principal than found loses its old unit and its charge key is put anew.
    let mut writes: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for (group, principal) in &plan.release {
        for op in release_ops(keys, shard, group, principal) {
            if let KeyOp::Delete { key } = op.op {
                writes.insert(key, None);
            }
        }
    }
    for (group, principal) in &plan.charge {
        writes.insert(
            keys.principal_group(principal, group),
            Some(shard.to_string().into_bytes()),
        );
        writes.insert(
            keys.charge(shard, group),
            Some(principal.as_bytes().to_vec()),
        );
    }
    let ops: Vec<RequestOp> = writes
        .into_iter()
        .map(|(key, value)| match value {
            Some(value) => request_op(KeyOp::Put { key, value }),
            None => request_op(KeyOp::Delete { key }),
        })
        .collect();
    // Recorded whatever the writes do: the units the groups hold are theirs to give back.
    charges.forget_shard(shard);
    for group in &state.groups {
        if let Some(principal) = &group.created_by {
            charges.record(&group.group_id, shard, &Arc::from(principal.as_str()));
        }
    }
    for (group, principal) in &kept {
        charges.record(group, shard, &Arc::from(principal.as_str()));
    }
    if !plan.release.is_empty() || !plan.charge.is_empty() {
        tracing::info!(
            shard,
            released = plan.release.len(),
            charged = plan.charge.len(),
            "quota units of the shard's groups reconciled"
        );
    }
    // Each operation stands alone (a unit's two keys may land in two transactions): a
    // reconciliation cut short is finished by the shard's next load.
    for chunk in ops.chunks(shared.limits.max_ops.max(1)) {
        let request = TxnRequest {
            compare: vec![owner_unchanged(keys, shard, owner_mod_revision)],
            success: chunk.to_vec(),
            failure: Vec::new(),
        };
        let response = client
            .txn(request)
            .await
            .map_err(|e| StoreError::Unavailable(format!("writing a shard's quota units: {e}")))?;
        if !response.succeeded {
            return Err(StoreError::Fenced { shard });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use muster_coordinator::storage::suite::group;
    use muster_coordinator::storage::StoredState;

    use super::{charge_request, reconciliation, Reconciliation};
    use crate::generated::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
    use crate::keys::{prefix_end, KeyLayout};

    fn recorded(id: &str, by: Option<&str>) -> muster_coordinator::storage::GroupRecord {
        let mut record = group(id, 1);
        record.created_by = by.map(str::to_owned);
        record
    }

    /// A shard's units against its loaded groups: a unit whose group was not loaded, or was
    /// loaded charged to someone else or to no one, goes back; a loaded group recorded with a
    /// creator and no unit (or another principal's) is charged; a match writes nothing.
    #[test]
    fn a_shard_keeps_exactly_the_units_of_the_groups_it_loaded() {
        let found: BTreeMap<String, String> = [
            ("kept", "alice"),
            ("memory-only", "alice"),
            ("moved", "bob"),
            ("ownerless", "alice"),
        ]
        .into_iter()
        .map(|(g, p)| (g.to_owned(), p.to_owned()))
        .collect();
        let state = StoredState {
            groups: vec![
                recorded("kept", Some("alice")),
                recorded("moved", Some("carol")),
                recorded("ownerless", None),
                recorded("uncharged", Some("bob")),
            ],
            ..StoredState::default()
        };
        let pair = |g: &str, p: &str| (g.to_owned(), p.to_owned());
        assert_eq!(
            reconciliation(&found, &state),
            Reconciliation {
                release: vec![
                    pair("memory-only", "alice"),
                    pair("moved", "bob"),
                    pair("ownerless", "alice"),
                ],
                charge: vec![pair("moved", "carol"), pair("uncharged", "bob")],
            }
        );
        // Once written, loading again finds nothing to do.
        let after: BTreeMap<String, String> =
            [("kept", "alice"), ("moved", "carol"), ("uncharged", "bob")]
                .into_iter()
                .map(|(g, p)| (g.to_owned(), p.to_owned()))
                .collect();
        assert_eq!(reconciliation(&after, &state), Reconciliation::default());
    }

    /// A charge under a limit compares the shard's ownership and that nothing new appeared
    /// under the principal's prefix since the read; without a limit, the ownership only. Both
    /// put the unit and the shard's charge, and read the owner key back on failure.
    #[test]
    fn a_limited_charge_compares_the_principals_whole_prefix() {
        let keys = KeyLayout::new("c").expect("a valid name");
        let limited = charge_request(&keys, 3, 41, "g", "alice", Some(100));
        assert_eq!(limited.compare.len(), 2);
        let owner = &limited.compare[0];
        assert_eq!(owner.key, keys.owner(3));
        assert_eq!(owner.target_union, Some(TargetUnion::ModRevision(41)));
        let prefix = &limited.compare[1];
        assert_eq!(prefix.key, keys.principal_groups_prefix("alice"));
        assert_eq!(
            prefix.range_end,
            prefix_end(&keys.principal_groups_prefix("alice"))
        );
        assert_eq!(prefix.result, CompareResult::Less as i32);
        assert_eq!(prefix.target, CompareTarget::Mod as i32);
        assert_eq!(prefix.target_union, Some(TargetUnion::ModRevision(101)));
        assert_eq!(limited.success.len(), 2);
        assert_eq!(limited.failure.len(), 1);
        let unlimited = charge_request(&keys, 3, 41, "g", "alice", None);
        assert_eq!(unlimited.compare.len(), 1, "the ownership only");
        assert_eq!(unlimited.success, limited.success);
    }
}
