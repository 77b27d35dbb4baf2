//! A thin etcd v3 KV client over the generated gRPC stubs: one lazily connected channel per
//! endpoint, a timeout on every request, failover to the next endpoint when one is
//! unreachable or times out, and ranges read page by page at one revision.
//!
//! Failover retries a request on another member. That is safe for everything this crate
//! sends, even when the first attempt did land: reads, and transactions of plain puts and
//! deletes conditioned on ownership, give the same result applied twice in a row. (tonic's
//! `balance_list` was tried first: it keeps routing some requests to a dead member.)

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tonic::Code;

use tonic::transport::{Channel, Endpoint};

use crate::error::EtcdError;
use crate::generated::etcdserverpb::kv_client::KvClient;
use crate::generated::etcdserverpb::{
    DeleteRangeRequest, PutRequest, RangeRequest, TxnRequest, TxnResponse,
};
use crate::generated::mvccpb::KeyValue;
use crate::keys::prefix_end;

/// Keys per page of a range: well under tonic's 4 MiB response limit for Muster's values.
const PAGE: i64 = 500;

/// A connection to an etcd cluster (cheap to clone; clones share the channel).
#[derive(Debug, Clone)]
pub struct EtcdClient {
    members: Arc<[Channel]>,
    /// The member that answered last: requests start there.
    preferred: Arc<AtomicUsize>,
    /// How long a request keeps trying members (an etcd leader election takes about one
    /// election timeout, 1 s by default: requests ride it out rather than fail).
    request_timeout: Duration,
}

/// The shortest time one attempt at a request gets.
const MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_millis(250);

/// Pause between rounds over all members.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Whether a failed request should be tried on another member: it could not reach this one,
/// or this one did not answer in time (cut off, paused, or without a leader).
fn try_elsewhere(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
    )
}

impl EtcdClient {
    /// Connects lazily to `endpoints` (`http://host:port` or `host:port`); a request fails
    /// only if no member answers. Must be called inside a tokio runtime (channels spawn their
    /// connection tasks there).
    pub fn connect(endpoints: &[String], request_timeout: Duration) -> Result<Self, EtcdError> {
        if endpoints.is_empty() {
            return Err(EtcdError::NoEndpoints);
        }
        // One attempt gets a quarter of the request's time: etcd holds a request whose
        // proposal died with its leader until its own timeout, while a new leader is usually
        // elected within a second; the retry on the next member gets through.
        let attempt_timeout = (request_timeout / 4).max(MIN_ATTEMPT_TIMEOUT);
        let mut parsed = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let url = if endpoint.contains("://") {
                endpoint.clone()
            } else {
                format!("http://{endpoint}")
            };
            let parsed_endpoint =
                Endpoint::from_shared(url).map_err(|e| EtcdError::InvalidEndpoint {
                    endpoint: endpoint.clone(),
                    reason: e.to_string(),
                })?;
            parsed.push(
                parsed_endpoint
                    .connect_timeout(attempt_timeout)
                    .timeout(attempt_timeout)
                    .tcp_nodelay(true),
            );
        }
        Ok(EtcdClient {
            members: parsed
                .into_iter()
                .map(|endpoint| endpoint.connect_lazy())
                .collect(),
            preferred: Arc::new(AtomicUsize::new(0)),
            request_timeout,
        })
    }

    /// Runs `request` on the preferred member, then on each other one while they are
    /// unreachable, round after round until the request timeout has passed; the last error
    /// if none answered by then.
    pub(crate) async fn call<T, F, Fut>(&self, request: F) -> Result<T, EtcdError>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.call_within(None, request).await
    }

    /// [`EtcdClient::call`] with each attempt at a member cut short after `attempt` (when
    /// shorter than the connection's own attempt timeout): for requests that must not spend
    /// long on a member that stopped answering (lease renewals, against a lease TTL).
    pub(crate) async fn call_within<T, F, Fut>(
        &self,
        attempt: Option<Duration>,
        request: F,
    ) -> Result<T, EtcdError>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let count = self.members.len();
        let first = self.preferred.load(Ordering::Relaxed) % count.max(1);
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let mut last = None;
        loop {
            for step in 0..count {
                let index = (first + step) % count;
                let answer = match attempt {
                    None => request(self.members[index].clone()).await,
                    Some(limit) => {
                        tokio::time::timeout(limit, request(self.members[index].clone()))
                            .await
                            .unwrap_or_else(|_| {
                                Err(tonic::Status::deadline_exceeded(
                                    "no answer within the attempt",
                                ))
                            })
                    }
                };
                match answer {
                    Ok(response) => {
                        self.preferred.store(index, Ordering::Relaxed);
                        return Ok(response.into_inner());
                    }
                    Err(status) if try_elsewhere(&status) => {
                        tracing::debug!(member = index, %status, "etcd member did not answer");
                        last = Some(status);
                    }
                    Err(status) => return Err(status.into()),
                }
            }
            if count == 0 || tokio::time::Instant::now() + RETRY_PAUSE >= deadline {
                return Err(last.map_or(EtcdError::NoEndpoints, EtcdError::from));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Every key under `prefix` at `revision` (0: the latest), in key order, and the revision
    /// read (pass it back to read more at the same point in time).
    pub async fn range_prefix(
        &self,
        prefix: &[u8],
        revision: i64,
    ) -> Result<(Vec<KeyValue>, i64), EtcdError> {
        let end = prefix_end(prefix);
        let mut start = prefix.to_vec();
        let mut revision = revision;
        let mut out = Vec::new();
        loop {
            let request = RangeRequest {
                key: start.clone(),
                range_end: end.clone(),
                limit: PAGE,
                revision,
                ..RangeRequest::default()
            };
            let response = self.kv_range(&request).await?;
            if revision == 0 {
                revision = response.header.as_ref().map_or(0, |h| h.revision);
            }
            let more = response.more;
            if let Some(last) = response.kvs.last() {
                // The next page starts just after the last key read.
                start = last.key.clone();
                start.push(0);
            }
            out.extend(response.kvs);
            if !more {
                return Ok((out, revision));
            }
        }
    }

    /// One key at `revision` (0: the latest), as a list of zero or one, and the revision read.
    pub async fn range_exact(
        &self,
        key: &[u8],
        revision: i64,
    ) -> Result<(Vec<KeyValue>, i64), EtcdError> {
        let request = RangeRequest {
            key: key.to_vec(),
            revision,
            ..RangeRequest::default()
        };
        let response = self.kv_range(&request).await?;
        let revision = response.header.as_ref().map_or(revision, |h| h.revision);
        Ok((response.kvs, revision))
    }

    /// One key at the latest revision.
    pub async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>, EtcdError> {
        let (kvs, _) = self.range_exact(key, 0).await?;
        Ok(kvs.into_iter().next())
    }

    /// Puts one key; returns the revision it was written at (its new mod revision).
    pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<i64, EtcdError> {
        let request = PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            ..PutRequest::default()
        };
        let response = self
            .call(|channel| {
                let request = request.clone();
                async move { KvClient::new(channel).put(request).await }
            })
            .await?;
        Ok(response.header.map_or(0, |h| h.revision))
    }

    /// Deletes every key under `prefix`; returns how many there were.
    pub async fn delete_prefix(&self, prefix: &[u8]) -> Result<i64, EtcdError> {
        let request = DeleteRangeRequest {
            key: prefix.to_vec(),
            range_end: prefix_end(prefix),
            ..DeleteRangeRequest::default()
        };
        let response = self.kv_delete_range(&request).await?;
        Ok(response.deleted)
    }

    /// Deletes exactly `key` (no prefix); returns whether it existed.
    pub async fn delete(&self, key: &[u8]) -> Result<bool, EtcdError> {
        let request = DeleteRangeRequest {
            key: key.to_vec(),
            ..DeleteRangeRequest::default()
        };
        let response = self.kv_delete_range(&request).await?;
        Ok(response.deleted > 0)
    }

    /// One range request (a page, or one key), on whichever member answers.
    async fn kv_range(
        &self,
        request: &RangeRequest,
    ) -> Result<crate::generated::etcdserverpb::RangeResponse, EtcdError> {
        self.call(|channel| {
            let request = request.clone();
            async move { KvClient::new(channel).range(request).await }
        })
        .await
    }

    /// One delete request (a key, or a prefix), on whichever member answers.
    async fn kv_delete_range(
        &self,
        request: &DeleteRangeRequest,
    ) -> Result<crate::generated::etcdserverpb::DeleteRangeResponse, EtcdError> {
        self.call(|channel| {
            let request = request.clone();
            async move { KvClient::new(channel).delete_range(request).await }
        })
        .await
    }

    /// One transaction.
    pub async fn txn(&self, request: TxnRequest) -> Result<TxnResponse, EtcdError> {
        self.call(|channel| {
            let request = request.clone();
            async move { KvClient::new(channel).txn(request).await }
        })
        .await
    }
}
