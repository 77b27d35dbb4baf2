//! The startup check that this client may do everything Muster does in etcd: read and write
//! under the cluster's prefix (`/<cluster>/`, readwrite with `--prefix=true` in etcd's roles).
//! Without it, a read-only user would start, load, and only fail at its first write.

use crate::client::EtcdClient;
use crate::error::EtcdError;
use crate::generated::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::generated::etcdserverpb::request_op::Request;
use crate::generated::etcdserverpb::{Compare, PutRequest, RangeRequest, RequestOp, TxnRequest};
use crate::keys::{prefix_end, KeyLayout};

impl EtcdClient {
    /// Reads (counts) the whole prefix, then sends a transaction whose compare can never hold
    /// (a key's version is never negative) with a put under the prefix in its success branch:
    /// etcd checks the permissions of both branches before evaluating the compare, so a user
    /// without write rights is refused, and nothing is ever written.
    pub async fn check_access(&self, keys: &KeyLayout) -> Result<(), EtcdError> {
        let prefix = keys.cluster_prefix();
        let count = RangeRequest {
            key: prefix.clone(),
            range_end: prefix_end(&prefix),
            count_only: true,
            ..RangeRequest::default()
        };
        self.call(|channel| {
            let count = count.clone();
            async move {
                crate::generated::etcdserverpb::kv_client::KvClient::new(channel)
                    .range(count)
                    .await
            }
        })
        .await?;
        let mut probe = prefix;
        probe.extend_from_slice(b"access-check");
        let never = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Less as i32,
                target: CompareTarget::Version as i32,
                key: probe.clone(),
                target_union: Some(TargetUnion::Version(0)),
                ..Compare::default()
            }],
            success: vec![RequestOp {
                request: Some(Request::RequestPut(PutRequest {
                    key: probe,
                    ..PutRequest::default()
                })),
            }],
            failure: Vec::new(),
        };
        let answer = self.txn(never).await?;
        if answer.succeeded {
            // Cannot happen (etcd versions start at 0); said rather than ignored if it did.
            tracing::warn!("etcd access check: a compare on a negative version held");
        }
        Ok(())
    }
}
