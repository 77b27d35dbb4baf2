//! Topic catalog writes by compare-and-swap: a change is put only if its topic is still as the
//! node planned it against — absent for a create (`create_revision == 0`), the partition count
//! it read for a grow (the value; counts only grow, so a value seen again is the same write).
//! Two nodes changing one topic at once: one transaction wins, the other reads what won back
//! (its failure branch) and the supervisor plans it again against that. Catalog writes are
//! cluster-wide: no shard fence.
//!
//! Changes go in transactions of at most `max_ops` topics (etcd's `--max-txn-ops` bounds
//! compares and operations alike), one after another; the first that meets a conflict ends the
//! write, and what the ones before it wrote is reported with what the conflict found.

use muster_coordinator::storage::{StoreError, TopicChange, TopicsWritten};

use super::plan::TxnLimits;
use crate::client::EtcdClient;
use crate::generated::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::generated::etcdserverpb::request_op::Request;
use crate::generated::etcdserverpb::response_op::Response;
use crate::generated::etcdserverpb::{Compare, PutRequest, RangeRequest, RequestOp, TxnRequest};
use crate::keys::KeyLayout;

/// A topic's stored value: its partition count, decimal.
pub(super) fn topic_value(partitions: i32) -> Vec<u8> {
    partitions.to_string().into_bytes()
}

/// The condition a change is written under: the topic as it was planned against.
fn unchanged_since_planned(key: Vec<u8>, based_on: Option<i32>) -> Compare {
    match based_on {
        None => Compare {
            result: CompareResult::Equal as i32,
            target: CompareTarget::Create as i32,
            key,
            target_union: Some(TargetUnion::CreateRevision(0)),
            ..Compare::default()
        },
        Some(partitions) => Compare {
            result: CompareResult::Equal as i32,
            target: CompareTarget::Value as i32,
            key,
            target_union: Some(TargetUnion::Value(topic_value(partitions))),
            ..Compare::default()
        },
    }
}

/// One transaction: put every change of `chunk` if every topic is as planned, else read them
/// all back.
pub(super) fn cas_request(keys: &KeyLayout, chunk: &[TopicChange]) -> TxnRequest {
    let mut request = TxnRequest::default();
    for change in chunk {
        let key = keys.topic(&change.topic.topic);
        request
            .compare
            .push(unchanged_since_planned(key.clone(), change.based_on));
        request.success.push(RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: key.clone(),
                value: topic_value(change.topic.partitions),
                ..PutRequest::default()
            })),
        });
        request.failure.push(RequestOp {
            request: Some(Request::RequestRange(RangeRequest {
                key,
                ..RangeRequest::default()
            })),
        });
    }
    request
}

/// Writes `changes`, each only if its topic is as planned (module docs).
pub(super) async fn put(
    client: &EtcdClient,
    keys: &KeyLayout,
    limits: TxnLimits,
    changes: Vec<TopicChange>,
) -> Result<TopicsWritten, StoreError> {
    let mut outcome = TopicsWritten::default();
    for chunk in changes.chunks(limits.max_ops.max(1)) {
        let response = client
            .txn(cas_request(keys, chunk))
            .await
            .map_err(|e| StoreError::Unavailable(format!("writing topics to etcd: {e}")))?;
        if response.succeeded {
            outcome
                .written
                .extend(chunk.iter().map(|change| change.topic.clone()));
            continue;
        }
        outcome.conflicted = true;
        for op in response.responses {
            let Some(Response::ResponseRange(range)) = op.response else {
                continue;
            };
            for kv in range.kvs {
                outcome
                    .found
                    .push(super::load::topic(keys, &kv.key, &kv.value)?);
            }
        }
        break;
    }
    Ok(outcome)
}
