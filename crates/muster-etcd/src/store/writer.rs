//! The store's writer task: takes queued batches in submission order, packs them into fenced
//! transactions (plan.rs), sends one transaction at a time, and resolves each batch's
//! `Durable` once every transaction carrying it has been accepted.
//!
//! A transaction whose ownership compare fails applied nothing: the failure branch reads the
//! owner keys back, the shards whose key changed are marked lost, the batches writing to them
//! resolve with `Fenced`, and the rest are planned again. A transport error (etcd unreachable,
//! a timeout) fails the batches in hand with `Unavailable` and marks the store unhealthy until
//! a transaction succeeds: a timed-out transaction may still have been applied, so what is in
//! hand is not retried behind the caller's back.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use muster_coordinator::storage::{DurableSender, HistoryKind, Mutation, StoreError};
use tokio::sync::mpsc;

use super::plan::{prepare, Added, FencedOp, KeyOp, TxnPlan};
use super::quota::{release_ops, Charges};
use super::{Fence, Queued, ShardStatus, Shared};
use crate::client::EtcdClient;
use crate::generated::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::generated::etcdserverpb::request_op::Request;
use crate::generated::etcdserverpb::response_op::Response;
use crate::generated::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};

/// Batches taken from the queue per round: bounds what one error can fail at once.
const MAX_BATCHES_PER_ROUND: usize = 4096;

/// A batch being written: its operations, how many are already in etcd, and whom to tell.
struct InFlight {
    ops: Vec<FencedOp>,
    next: usize,
    /// An offset reset or restore: all of it in one transaction, or refused (never a mix).
    atomic: bool,
    sender: DurableSender,
    /// The ownership the batch was made under (`Shared::fence`).
    fence: Fence,
    /// Groups the batch deletes whose quota units it gives back (quota.rs): forgotten as
    /// charged once it is durable.
    released: Vec<String>,
}

pub(super) async fn run(
    shared: Arc<Shared>,
    charges: Arc<Charges>,
    client: EtcdClient,
    mut queue: mpsc::UnboundedReceiver<Queued>,
) {
    let mut taken = Vec::new();
    while queue.recv_many(&mut taken, MAX_BATCHES_PER_ROUND).await > 0 {
        let mut batches = VecDeque::with_capacity(taken.len());
        for (batch, sender, fence) in taken.drain(..) {
            let atomic = must_be_atomic(&batch);
            let released = charged_deletions(&charges, &batch);
            match prepare(&shared.keys, shared.shards, batch) {
                Ok(mut ops) => {
                    // In the deletion's own transaction: the unit and the record go together.
                    for (group_id, shard, principal) in &released {
                        ops.extend(release_ops(&shared.keys, *shard, group_id, principal));
                    }
                    batches.push_back(InFlight {
                        ops,
                        next: 0,
                        atomic,
                        sender,
                        fence,
                        released: released.into_iter().map(|(g, _, _)| g).collect(),
                    });
                }
                Err(e) => sender.complete(Err(e)),
            }
        }
        write_all(&shared, &charges, &client, batches).await;
    }
}

/// The groups `batch` deletes that hold a quota unit, with their shard and principal.
fn charged_deletions(charges: &Charges, batch: &[Mutation]) -> Vec<(String, u32, Arc<str>)> {
    batch
        .iter()
        .filter_map(|m| match m {
            Mutation::DeleteGroup { group_id } => {
                let (shard, principal) = charges.charged(group_id)?;
                Some((group_id.clone(), shard, principal))
            }
            _ => None,
        })
        .collect()
}

/// The first shard of `fence` this node may not write to now, as the error to report: one no
/// longer owned, or owned under another claim than the batch was made under.
fn ownership_error(shared: &Shared, fence: &Fence) -> Option<StoreError> {
    fence.iter().find_map(
        |&(shard, made_under)| match (made_under, shared.status(shard)) {
            (ShardStatus::Owned { .. }, now) if now == made_under => None,
            // Made while the shard was not ours, or not ours now.
            (ShardStatus::NotOwned, _) | (_, ShardStatus::NotOwned) => {
                Some(StoreError::NotOwner { shard })
            }
            // Made under a claim that is over (lost, or replaced by a newer one).
            _ => Some(StoreError::Fenced { shard }),
        },
    )
}

async fn write_all(
    shared: &Shared,
    charges: &Charges,
    client: &EtcdClient,
    mut batches: VecDeque<InFlight>,
) {
    while !batches.is_empty() {
        // Batches for shards this node cannot write fail now, without a round trip.
        let mut writable = VecDeque::with_capacity(batches.len());
        for batch in batches.drain(..) {
            match ownership_error(shared, &batch.fence) {
                Some(error) => batch.sender.complete(Err(error)),
                None => writable.push_back(batch),
            }
        }
        batches = writable;
        if let Some(error) = batches
            .front()
            .and_then(|b| too_large_to_be_atomic(shared, b))
        {
            if let Some(batch) = batches.pop_front() {
                tracing::warn!(%error, "offset reset or restore refused");
                batch.sender.complete(Err(error));
            }
            continue;
        }
        let Some((plan, whole, partial)) = plan_next(shared, &batches) else {
            return;
        };
        let Some((request, compared)) = txn_request(shared, plan) else {
            // An ownership vanished while planning: the check above reports it next turn.
            continue;
        };
        match client.txn(request).await {
            Ok(response) if response.succeeded => {
                shared.healthy.store(true, Ordering::Relaxed);
                for _ in 0..whole {
                    if let Some(batch) = batches.pop_front() {
                        // Forgotten before the deletion is reported: the group may be created
                        // (and charged) again only after that.
                        charges.forget(&batch.released);
                        batch.sender.complete(Ok(()));
                    }
                }
                if let (Some(sent), Some(batch)) = (partial, batches.front_mut()) {
                    batch.next += sent;
                }
            }
            Ok(response) => {
                // The failure branch read each compared owner key, in `compared` order.
                let mut changed: Vec<(u32, i64)> = compared
                    .iter()
                    .zip(&response.responses)
                    .filter(|((_, expected), op)| {
                        let now = match &op.response {
                            Some(Response::ResponseRange(range)) => {
                                range.kvs.first().map_or(0, |kv| kv.mod_revision)
                            }
                            _ => 0,
                        };
                        now != *expected
                    })
                    .map(|(compared, _)| *compared)
                    .collect();
                if changed.is_empty() {
                    // Cannot tell which compare failed (changed and back?): trust none.
                    changed = compared;
                }
                let lost = shared.mark_lost(&changed);
                tracing::warn!(shards = ?lost, "fenced: another node owns these shards now");
            }
            Err(e) => {
                shared.healthy.store(false, Ordering::Relaxed);
                let reason = format!("writing to etcd: {e}");
                tracing::warn!(%reason, batches = batches.len(), "etcd write failed");
                for batch in batches.drain(..) {
                    batch
                        .sender
                        .complete(Err(StoreError::Unavailable(reason.clone())));
                }
            }
        }
    }
}

/// Whether a batch must land whole or not at all: an offset reset's or restore's (its history
/// holds the reset's or restore's own entries). A commit of many partitions may be spread over
/// transactions: each partition's offset is its own, as in Kafka.
fn must_be_atomic(batch: &[Mutation]) -> bool {
    batch.iter().any(|m| match m {
        Mutation::PutHistory { entries, .. } => entries
            .iter()
            .any(|w| matches!(w.entry.kind, HistoryKind::Reset | HistoryKind::Restore)),
        _ => false,
    })
}

/// The refusal of an atomic batch that one transaction cannot hold (etcd's `--max-txn-ops`,
/// 128 by default, and its request size): spreading it would let a crash between
/// transactions leave some partitions reset and others not.
fn too_large_to_be_atomic(shared: &Shared, batch: &InFlight) -> Option<StoreError> {
    if !batch.atomic || batch.next > 0 {
        return None;
    }
    let mut plan = TxnPlan::default();
    let fits = batch
        .ops
        .iter()
        .all(|op| plan.add(op, shared.limits) == Added::Yes);
    (!fits).then(|| {
        StoreError::Rejected(format!(
            "an offset reset or restore of {} etcd operations does not fit one etcd transaction \
             (at most {} operations and {} bytes; etcd's --max-txn-ops and \
             --max-request-bytes), and it must be applied whole: reset fewer partitions at a \
             time (muster offsets reset --topic T:P,...)",
            batch.ops.len(),
            shared.limits.max_ops,
            shared.limits.max_bytes,
        ))
    })
}

/// The next transaction: whole batches from the front while they fit, or, when the first one
/// alone does not fit, as much of it as does. Returns the plan, how many whole batches it
/// holds, and how many operations of a partly sent first batch (`None` when whole ones).
fn plan_next(
    shared: &Shared,
    batches: &VecDeque<InFlight>,
) -> Option<(TxnPlan, usize, Option<usize>)> {
    let limits = shared.limits;
    let mut plan = TxnPlan::default();
    let mut whole = 0;
    for batch in batches {
        let mut attempt = plan.clone();
        let remaining = &batch.ops[batch.next..];
        let fitted = remaining
            .iter()
            .take_while(|op| attempt.add(op, limits) == Added::Yes)
            .count();
        if fitted == remaining.len() {
            plan = attempt;
            whole += 1;
            continue;
        }
        if whole == 0 {
            // The first batch does not fit whole: send the part that does, alone.
            return (fitted > 0).then_some((attempt, 0, Some(fitted)));
        }
        break;
    }
    (whole > 0).then_some((plan, whole, None))
}

/// The transaction for a plan: compare every shard's owner key, apply the plan's operations
/// if all match, else read the owner keys back; and the (shard, owner mod revision) pairs
/// compared, in order. `None` if a shard is no longer owned.
fn txn_request(shared: &Shared, plan: TxnPlan) -> Option<(TxnRequest, Vec<(u32, i64)>)> {
    let mut compared = Vec::with_capacity(plan.shards.len());
    let mut compare = Vec::with_capacity(plan.shards.len());
    let mut failure = Vec::with_capacity(plan.shards.len());
    for &shard in &plan.shards {
        let ShardStatus::Owned { owner_mod_revision } = shared.status(shard) else {
            return None;
        };
        compared.push((shard, owner_mod_revision));
        let owner = shared.keys.owner(shard);
        compare.push(Compare {
            result: CompareResult::Equal as i32,
            target: CompareTarget::Mod as i32,
            key: owner.clone(),
            target_union: Some(TargetUnion::ModRevision(owner_mod_revision)),
            ..Compare::default()
        });
        failure.push(RequestOp {
            request: Some(Request::RequestRange(RangeRequest {
                key: owner,
                ..RangeRequest::default()
            })),
        });
    }
    let success = plan
        .into_ops()
        .into_iter()
        .map(|op| RequestOp {
            request: Some(match op {
                KeyOp::Put { key, value } => Request::RequestPut(PutRequest {
                    key,
                    value,
                    ..PutRequest::default()
                }),
                KeyOp::Delete { key } => Request::RequestDeleteRange(DeleteRangeRequest {
                    key,
                    ..DeleteRangeRequest::default()
                }),
                KeyOp::DeleteRange { start, end } => {
                    Request::RequestDeleteRange(DeleteRangeRequest {
                        key: start,
                        range_end: end,
                        ..DeleteRangeRequest::default()
                    })
                }
            }),
        })
        .collect();
    let request = TxnRequest {
        compare,
        success,
        failure,
    };
    Some((request, compared))
}

#[cfg(test)]
mod fence_tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    use muster_coordinator::storage::{Mutation, StoreError};
    use tokio::sync::watch;

    use super::ownership_error;
    use crate::keys::KeyLayout;
    use crate::store::{ShardStatus, Shared, TxnLimits};

    fn shared() -> Shared {
        Shared {
            keys: KeyLayout::new("t").expect("a valid name"),
            shards: 64,
            limits: TxnLimits::default(),
            ownership: Mutex::new(BTreeMap::new()),
            lost: watch::channel(BTreeSet::new()).0,
            healthy: AtomicBool::new(true),
        }
    }

    fn commit_to(group: &str) -> Vec<Mutation> {
        vec![Mutation::DeleteOffsets {
            group_id: group.into(),
            partitions: vec![("t".into(), 0)],
        }]
    }

    #[test]
    fn a_batch_is_written_only_under_the_claim_it_was_made_under() {
        let shared = shared();
        let shard = crate::shard_of("orders", 64);
        let owned = |r| ShardStatus::Owned {
            owner_mod_revision: r,
        };
        // Made before the shard was ours: never written.
        let early = shared.fence(&commit_to("orders"));
        shared.ownership().insert(shard, owned(5));
        assert_eq!(
            ownership_error(&shared, &early),
            Some(StoreError::NotOwner { shard })
        );
        // Made under claim 5: written while claim 5 holds.
        let made = shared.fence(&commit_to("orders"));
        assert_eq!(ownership_error(&shared, &made), None);
        // The shard was lost and claimed again (revision 9): the old batch is fenced, a new
        // one is written.
        shared.ownership().insert(shard, ShardStatus::Lost);
        assert_eq!(
            ownership_error(&shared, &made),
            Some(StoreError::Fenced { shard })
        );
        shared.ownership().insert(shard, owned(9));
        assert_eq!(
            ownership_error(&shared, &made),
            Some(StoreError::Fenced { shard })
        );
        assert_eq!(
            ownership_error(&shared, &shared.fence(&commit_to("orders"))),
            None
        );
        // Released: NotOwner. Topics are not fenced at all.
        shared.ownership().remove(&shard);
        assert_eq!(
            ownership_error(&shared, &made),
            Some(StoreError::NotOwner { shard })
        );
        let topic = vec![Mutation::PutTopic(muster_protocol::TopicInfo {
            topic: "t".into(),
            partitions: 1,
        })];
        assert!(shared.fence(&topic).is_empty());
    }
}
