//! Messages between the connection sessions, the supervisor and the group actors, and the
//! [`GroupInbox`] through which a session reaches a group.
//!
//! No message names an actor type: the actors import this module, never the other way round,
//! so `group.rs` and `supervisor.rs` depend on it (and the supervisor on `group.rs`) without a
//! cycle. A group reaches the supervisor through [`Recipient`]s, a session reaches a group
//! through a [`GroupLink`].

use std::sync::Arc;

use actix::prelude::*;
use muster_protocol::{DescribedGroup, ErrorCode, Request};

use super::reply::{lost, Replies, ReplyTo, Ticket};
use crate::access::Access;
use crate::engine::{ClientInfo, GroupState, Millis};

/// A group-scoped request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
/// OffsetFetch) on its way to its group.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct GroupCall {
    pub request: Request,
    pub reply: ReplyTo,
    pub client: ClientInfo,
}

/// Session → group: consecutive group requests of one connection for one group, in arrival
/// order — what one read of the socket brought. One message, one channel clone and one client
/// clone per read instead of per request: with pipelined heartbeats that per-request traffic
/// between threads was most of the server's cost (docs/benchmarks.md).
///
/// Requests still in the batch when it is dropped (its group actor stopped with it queued) are
/// answered COORDINATOR_NOT_AVAILABLE, as a dropped [`ReplyTo`] would be.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct GroupBatch {
    pub replies: Replies,
    pub client: ClientInfo,
    pub calls: Vec<(Request, Ticket)>,
}

impl GroupBatch {
    /// Takes the requests out, leaving the batch empty (so its drop guard answers nothing).
    pub fn take_calls(&mut self) -> Vec<(Request, Ticket)> {
        std::mem::take(&mut self.calls)
    }
}

impl Drop for GroupBatch {
    fn drop(&mut self) {
        if !self.calls.is_empty() {
            let lost = self
                .calls
                .drain(..)
                .map(|(_, ticket)| ticket.answer(lost()))
                .collect();
            self.replies.send_all(lost);
        }
    }
}

/// A group actor's mailbox as a session sees it: the two messages a session sends a group,
/// without naming the actor (implemented for its `Addr` in `group.rs`). Like a [`Recipient`],
/// but one object for both messages: see [`GroupLink`].
pub trait GroupInbox: Send + Sync + 'static {
    /// [`Recipient::try_send`] of one request.
    // The same signature as actix's `try_send`: a full or closed mailbox hands the request
    // back by value, for the session to queue or re-route.
    #[allow(clippy::result_large_err)]
    fn try_call(&self, call: GroupCall) -> Result<(), SendError<GroupCall>>;
    /// [`Recipient::do_send`] of one request (queued even past the mailbox's capacity).
    fn call(&self, call: GroupCall);
    /// [`Recipient::try_send`] of a batch.
    fn try_batch(&self, batch: GroupBatch) -> Result<(), SendError<GroupBatch>>;
    /// [`Recipient::do_send`] of a batch.
    fn batch(&self, batch: GroupBatch);
    /// Whether the group actor is still running.
    fn connected(&self) -> bool;
}

/// A group's inbox as the registry and the sessions hold it: the group's one `Addr`, shared.
/// Cloning an `Addr` or a `Recipient` allocates (~80 B); cloning this is a reference count,
/// so a connection that caches it, and every batch it sends, allocates nothing for it.
pub type GroupLink = Arc<dyn GroupInbox>;

/// Session → supervisor: deliver `call` to its group (creating the group if the request
/// does), and return the group's id and inbox for the session to cache.
#[derive(Debug, Message)]
#[rtype(result = "Option<(Arc<str>, GroupLink)>")]
pub struct Route {
    pub group_id: String,
    pub call: GroupCall,
}

/// Session → supervisor: a request about many groups or the catalog (DescribeGroups,
/// ListGroups, DeleteGroups, CreateTopics, DescribeTopics).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AdminCall {
    pub request: Request,
    pub reply: ReplyTo,
    /// What the sender may see and do (protocol §5 "Authorization").
    pub access: Access,
}

/// Answer every held request COORDINATOR_NOT_AVAILABLE. (The server then closes the store
/// itself, off this actor's thread and bounded by its shutdown deadline: `Store::close`
/// waits for the disk.)
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Shutdown;

// ---- internal

/// Supervisor → group: a deadline the group armed has passed.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct Tick;

/// Group → supervisor: wake me at `at` (only ever sent to move a wake-up earlier).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct ArmTimer {
    pub key: u64,
    pub at: Millis,
}

/// Group → supervisor: my state or size changed (ListGroups and metrics read these).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct StatusChanged {
    pub key: u64,
    pub state: GroupState,
    pub members: u32,
}

/// Group → supervisor: I removed myself (retention); forget my entry.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct Forget {
    pub key: u64,
}

#[derive(Debug, Message)]
#[rtype(result = "DescribedGroup")]
pub(crate) struct Describe;

/// Supervisor → group: describe yourself as a consumer-protocol group (ConsumerGroupDescribe).
#[derive(Debug, Message)]
#[rtype(result = "muster_protocol::DescribedConsumerGroup")]
pub(crate) struct DescribeConsumer;

/// Supervisor → group: a dry-run rebalance (GroupSimulate); nothing changes.
#[derive(Debug, Message)]
#[rtype(result = "muster_protocol::GroupSimulateResponse")]
pub(crate) struct Simulate(pub muster_protocol::GroupSimulateRequest);

/// Supervisor → group: your rebalance journal, newest first (GroupHistory).
#[derive(Debug, Message)]
#[rtype(result = "muster_protocol::GroupHistoryResponse")]
pub(crate) struct History {
    /// 0: every entry kept.
    pub limit: u32,
}

/// Supervisor → group: what you wait for now (GroupDiagnosis).
#[derive(Debug, Message)]
#[rtype(result = "muster_protocol::GroupDiagnosisResponse")]
pub(crate) struct Diagnose;

/// Supervisor → group: your line in the dashboard's list (`overview.rs`).
#[derive(Debug, Message)]
#[rtype(result = "GroupSummary")]
pub(crate) struct Summarize;

/// One group, as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub group_id: String,
    pub state: GroupState,
    pub members: u32,
    /// -1: the group went away while it was being asked.
    pub generation: i32,
    pub assignor: Option<String>,
    pub leader: Option<String>,
    /// How long the group has been in its state.
    pub state_for_ms: u64,
    /// Partitions in its expiry quarantine (protocol §6.25), and when the first of them is
    /// dropped for good (ms since the Unix epoch).
    pub quarantined: u32,
    pub quarantine_drop_at_ms: Option<u64>,
}

/// Supervisor → group: delete yourself if Empty (durably, offsets included).
#[derive(Debug, Message)]
#[rtype(result = "ErrorCode")]
pub(crate) struct Delete;

/// Supervisor → group: these topics' partition counts changed.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct TopicsChanged(pub Arc<[String]>);

/// Supervisor → group: shut down (answer held requests).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct AbortHeld;

/// Supervisor → group: this node no longer coordinates the group (its shard is given away or
/// was taken over). The group answers NOT_COORDINATOR from now on, and the answer to this
/// message comes once every write it had in flight has completed; then the actor stops.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct Relinquish;

// ---- cluster mode: the ownership loop → supervisor

/// Take over a shard: start its groups as the store holds them. The answer comes once they
/// are in the registry (requests reach them from then on).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AdoptShard {
    pub shard: u32,
    pub state: crate::storage::StoredState,
}

/// Start some groups of a shard already held, as the store holds them: groups that were held
/// back when the shard was taken over (a key of theirs could not be decoded) and read whole
/// since. Groups already in the registry are left as they are. The answer comes once they are
/// in the registry.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AdoptGroups {
    pub shard: u32,
    pub state: crate::storage::StoredState,
}

/// Give a shard's groups up. The answer comes as soon as they are out of the registry (new
/// requests for them are routed afresh, and the placement refuses them); it is a [`Drain`],
/// which resolves once every write they had in flight is done. Waiting for the answer itself
/// never times out: actix skips a message whose answer nobody awaits any more, and a skipped
/// release would leave the groups running.
#[derive(Debug, Message)]
#[rtype(result = "Drain")]
pub struct ReleaseShard {
    pub shard: u32,
}

/// Resolves, with the number of groups given up, once they have finished their writes.
pub struct Drain(pub std::pin::Pin<Box<dyn std::future::Future<Output = usize> + Send>>);

impl std::fmt::Debug for Drain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Drain")
    }
}

/// The cluster's topic catalog changed (another node created or grew topics): install these.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct CatalogChanged(pub Vec<muster_protocol::TopicInfo>);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use muster_protocol::{ErrorCode, HeartbeatRequest, Request};

    use super::*;
    use crate::actors::reply::{ticket, Recorded};

    fn client() -> ClientInfo {
        ClientInfo {
            client_id: Arc::from("c"),
            client_host: Arc::from("h"),
            access: Access::open(),
        }
    }

    #[test]
    fn a_batch_dropped_unhandled_answers_every_request() {
        let sink = Arc::new(Recorded::default());
        let heartbeat = || {
            Request::Heartbeat(HeartbeatRequest {
                group_id: "g".into(),
                generation_id: 1,
                member_id: "m".into(),
                group_instance_id: None,
            })
        };
        let batch = GroupBatch {
            replies: sink.clone(),
            client: client(),
            calls: vec![(heartbeat(), ticket(7)), (heartbeat(), ticket(8))],
        };
        drop(batch);
        let sends = sink.sends.lock().expect("not poisoned");
        let [answers] = &sends[..] else {
            panic!("one message with both answers, nothing else");
        };
        let ids: Vec<u32> = answers.iter().map(|a| a.ticket.correlation_id).collect();
        assert_eq!(ids, [7, 8]);
        for answer in answers {
            assert_eq!(answer.ticket.request_tag, 3);
            assert_eq!(
                answer.response.error_code(),
                ErrorCode::CoordinatorNotAvailable.code()
            );
        }
    }

    #[test]
    fn a_batch_whose_requests_were_taken_answers_nothing_on_drop() {
        let sink = Arc::new(Recorded::default());
        let mut batch = GroupBatch {
            replies: sink.clone(),
            client: client(),
            calls: vec![(Request::ListGroups(Default::default()), ticket(1))],
        };
        assert_eq!(batch.take_calls().len(), 1);
        drop(batch);
        assert!(sink.sends.lock().expect("not poisoned").is_empty());
    }
}
