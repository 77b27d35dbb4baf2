//! Watches: a stream of changes under a key prefix, from a given revision on. Cluster mode uses
//! them to hear at once when nodes come and go, when shard owners change, and when the topic
//! catalog changes; a periodic full read backs them up (a watch on a member that is cut off
//! goes silent rather than failing), so a lost event delays a reaction but never loses one.

use futures_util::stream;
use futures_util::StreamExt;

use crate::client::EtcdClient;
use crate::error::EtcdError;
use crate::generated::etcdserverpb::watch_client::WatchClient;
use crate::generated::etcdserverpb::watch_request::RequestUnion;
use crate::generated::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
use crate::generated::mvccpb::event::EventType;
use crate::keys::prefix_end;

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Put { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
}

/// An open watch (one gRPC stream). Dropping it cancels the watch.
pub struct Watch {
    responses: tonic::codec::Streaming<WatchResponse>,
}

impl EtcdClient {
    /// Watches every key under `prefix`, starting at `start_revision` (0: from now on). The
    /// first answer (etcd's "created") is awaited here, so a watch that returns is in place.
    pub async fn watch_prefix(
        &self,
        prefix: &[u8],
        start_revision: i64,
    ) -> Result<Watch, EtcdError> {
        let create = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: prefix.to_vec(),
                range_end: prefix_end(prefix),
                start_revision,
                ..WatchCreateRequest::default()
            })),
        };
        // etcd refuses a watch whose token has expired in the watch's cancel reason, not as a
        // gRPC status ("invalid auth token"; some versions say "permission denied" as for a
        // watch the user may not make): the first such refusal authenticates again and
        // retries.
        let mut retried = false;
        loop {
            let mut responses = self
                .call(|channel| {
                    // The request stream stays open after the create: closing it would end the
                    // watch.
                    let requests = stream::iter([create.clone()]).chain(stream::pending());
                    async move { WatchClient::new(channel).watch(requests).await }
                })
                .await?;
            match responses.message().await? {
                Some(created) if created.created && !created.canceled => {
                    return Ok(Watch { responses })
                }
                Some(refused)
                    if !retried
                        && crate::auth::refused_for_authentication(&refused.cancel_reason)
                        && self.reauthenticate() =>
                {
                    retried = true;
                }
                Some(refused) => return Err(self.watch_refused(&refused.cancel_reason)),
                None => {
                    return Err(EtcdError::Status(tonic::Status::unavailable(
                        "the watch stream ended before it was created",
                    )))
                }
            }
        }
    }
}

impl Watch {
    /// The next batch of changes. An error (or the end of the stream, or etcd cancelling the
    /// watch, e.g. after a compaction) ends the watch: read the state afresh and watch again.
    pub async fn next(&mut self) -> Result<Vec<WatchEvent>, EtcdError> {
        loop {
            let Some(response) = self.responses.message().await? else {
                return Err(EtcdError::Status(tonic::Status::unavailable(
                    "the watch stream ended",
                )));
            };
            if response.canceled {
                return Err(EtcdError::Status(tonic::Status::aborted(format!(
                    "etcd cancelled the watch: {}",
                    response.cancel_reason
                ))));
            }
            if response.events.is_empty() {
                // A progress notification: nothing changed.
                continue;
            }
            return Ok(response
                .events
                .into_iter()
                .filter_map(|event| {
                    let kv = event.kv?;
                    if event.r#type == EventType::Delete as i32 {
                        Some(WatchEvent::Delete { key: kv.key })
                    } else {
                        Some(WatchEvent::Put {
                            key: kv.key,
                            value: kv.value,
                        })
                    }
                })
                .collect());
        }
    }
}
