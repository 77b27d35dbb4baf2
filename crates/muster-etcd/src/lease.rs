//! Leases and lease-bound claims: what shard ownership is made of. A node grants itself a
//! lease, keeps it alive, and claims a shard by creating its owner key on that lease only if
//! the key does not exist; the claim's revision is what its writes are then fenced on
//! (`EtcdStore::own_shard`). When the lease expires or is revoked, etcd deletes the key and
//! another node can claim the shard, with a new revision the old owner's writes never match.

use std::time::Duration;

use futures_util::stream;

use crate::client::EtcdClient;
use crate::error::EtcdError;
use crate::generated::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::generated::etcdserverpb::lease_client::LeaseClient;
use crate::generated::etcdserverpb::request_op::Request;
use crate::generated::etcdserverpb::{
    Compare, LeaseGrantRequest, LeaseKeepAliveRequest, LeaseRevokeRequest, PutRequest, RequestOp,
    TxnRequest,
};

/// A granted lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    /// Seconds etcd keeps it without a keep-alive.
    pub ttl_s: i64,
}

impl EtcdClient {
    /// Grants a lease of `ttl_s` seconds (etcd may round it up to its minimum).
    pub async fn lease_grant(&self, ttl_s: i64) -> Result<Lease, EtcdError> {
        let request = LeaseGrantRequest { ttl: ttl_s, id: 0 };
        let response = self
            .call(|channel| async move { LeaseClient::new(channel).lease_grant(request).await })
            .await?;
        if !response.error.is_empty() {
            return Err(EtcdError::Status(tonic::Status::failed_precondition(
                response.error,
            )));
        }
        Ok(Lease {
            id: response.id,
            ttl_s: response.ttl,
        })
    }

    /// Renews a lease once; `None` if it has already expired (its keys are gone). Each attempt
    /// at a member gets at most `attempt`: a member that stopped answering (killed, cut off:
    /// its packets vanish rather than being refused) must not use up the lease's margin before
    /// the next member is tried.
    pub async fn lease_keep_alive_once(
        &self,
        lease: i64,
        attempt: Duration,
    ) -> Result<Option<i64>, EtcdError> {
        let response = self
            .call_within(Some(attempt), |channel| async move {
                let request = stream::iter([LeaseKeepAliveRequest { id: lease }]);
                let mut responses = LeaseClient::new(channel).lease_keep_alive(request).await?;
                // The answer is read within the attempt too.
                let first = responses.get_mut().message().await?;
                Ok(tonic::Response::new(first))
            })
            .await?;
        match response {
            Some(response) if response.ttl > 0 => Ok(Some(response.ttl)),
            _ => Ok(None),
        }
    }

    /// Revokes a lease: its keys are deleted at once. A lease etcd no longer has (expired,
    /// or revoked already) is no failure: its keys are gone either way.
    pub async fn lease_revoke(&self, lease: i64) -> Result<(), EtcdError> {
        let revoked = self
            .call(|channel| async move {
                LeaseClient::new(channel)
                    .lease_revoke(LeaseRevokeRequest { id: lease })
                    .await
            })
            .await;
        match revoked {
            Ok(_) => Ok(()),
            Err(EtcdError::Status(status)) if status.code() == tonic::Code::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates `key` on `lease` if it does not exist. Returns the key's mod revision when this
    /// call created it, `None` when someone holds it. (If an attempt landed but its answer was
    /// lost, the retry on another member finds the key held, by this very lease: a caller
    /// that gets `None` can read the key and compare its lease.)
    pub async fn claim(
        &self,
        key: &[u8],
        value: &[u8],
        lease: i64,
    ) -> Result<Option<i64>, EtcdError> {
        let request = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal as i32,
                target: CompareTarget::Create as i32,
                key: key.to_vec(),
                target_union: Some(TargetUnion::CreateRevision(0)),
                ..Compare::default()
            }],
            success: vec![RequestOp {
                request: Some(Request::RequestPut(PutRequest {
                    key: key.to_vec(),
                    value: value.to_vec(),
                    lease,
                    ..PutRequest::default()
                })),
            }],
            failure: Vec::new(),
        };
        let response = self.txn(request).await?;
        // A put in a transaction is written at the transaction's revision.
        Ok(response
            .succeeded
            .then(|| response.header.map_or(0, |h| h.revision)))
    }
}

impl EtcdClient {
    /// Deletes `key` only if it is still as written at `mod_revision` (a shard's owner key as
    /// this node claimed it): a release never deletes a key another node has since claimed.
    /// Returns whether it was deleted.
    pub async fn delete_if_unchanged(
        &self,
        key: &[u8],
        mod_revision: i64,
    ) -> Result<bool, EtcdError> {
        use crate::generated::etcdserverpb::DeleteRangeRequest;
        let request = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal as i32,
                target: CompareTarget::Mod as i32,
                key: key.to_vec(),
                target_union: Some(TargetUnion::ModRevision(mod_revision)),
                ..Compare::default()
            }],
            success: vec![RequestOp {
                request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
                    key: key.to_vec(),
                    ..DeleteRangeRequest::default()
                })),
            }],
            failure: Vec::new(),
        };
        Ok(self.txn(request).await?.succeeded)
    }
}
