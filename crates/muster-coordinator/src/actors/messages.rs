//! Messages between the connection sessions, the supervisor and the group actors.

use actix::prelude::*;
use muster_protocol::{DescribedGroup, ErrorCode, Request};

use super::group::GroupActor;
use super::reply::{lost, ReplyTo, Slot, ToWriter, WriterTx};
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
    pub tx: WriterTx,
    pub client: ClientInfo,
    pub calls: Vec<(Request, Slot)>,
}

impl GroupBatch {
    /// Takes the requests out, leaving the batch empty (so its drop guard answers nothing).
    pub fn take_calls(&mut self) -> Vec<(Request, Slot)> {
        std::mem::take(&mut self.calls)
    }
}

impl Drop for GroupBatch {
    fn drop(&mut self) {
        if !self.calls.is_empty() {
            let lost = self
                .calls
                .drain(..)
                .map(|(_, slot)| slot.answer(lost()))
                .collect();
            let _ = self.tx.send(ToWriter::Many(lost));
        }
    }
}

/// A group actor's address as the registry and the sessions hold it: one `Addr` per group,
/// shared (an `Addr` clone allocates; a connection that caches it costs a reference count).
pub type GroupAddr = std::sync::Arc<Addr<GroupActor>>;

/// Session → supervisor: deliver `call` to its group (creating the group if the request
/// does), and return the group's id and address for the session to cache.
#[derive(Debug, Message)]
#[rtype(result = "Option<(std::sync::Arc<str>, GroupAddr)>")]
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
}

/// Answer every held request COORDINATOR_NOT_AVAILABLE and flush storage.
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

/// Supervisor → group: delete yourself if Empty (durably, offsets included).
#[derive(Debug, Message)]
#[rtype(result = "ErrorCode")]
pub(crate) struct Delete;

/// Supervisor → group: these topics' partition counts changed.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct TopicsChanged(pub std::sync::Arc<[String]>);

/// Supervisor → group: shut down (answer held requests).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct AbortHeld;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use muster_protocol::{ErrorCode, HeartbeatRequest, Request};

    use super::*;

    fn slot(correlation_id: u32) -> Slot {
        Slot {
            correlation_id,
            in_flight: true,
            request_tag: 3,
            started: Instant::now(),
        }
    }

    #[test]
    fn a_batch_dropped_unhandled_answers_every_request() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let heartbeat = || {
            Request::Heartbeat(HeartbeatRequest {
                group_id: "g".into(),
                generation_id: 1,
                member_id: "m".into(),
                group_instance_id: None,
            })
        };
        let batch = GroupBatch {
            tx,
            client: ClientInfo {
                client_id: Arc::from("c"),
                client_host: Arc::from("h"),
            },
            calls: vec![(heartbeat(), slot(7)), (heartbeat(), slot(8))],
        };
        drop(batch);
        let Ok(ToWriter::Many(answers)) = rx.try_recv() else {
            panic!("one message with both answers");
        };
        let ids: Vec<u32> = answers.iter().map(|a| a.slot.correlation_id).collect();
        assert_eq!(ids, [7, 8]);
        for answer in &answers {
            assert!(answer.slot.in_flight);
            assert_eq!(
                answer.response.error_code(),
                ErrorCode::CoordinatorNotAvailable.code()
            );
        }
        assert!(rx.try_recv().is_err(), "nothing else");
    }

    #[test]
    fn a_batch_whose_requests_were_taken_answers_nothing_on_drop() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut batch = GroupBatch {
            tx,
            client: ClientInfo {
                client_id: Arc::from("c"),
                client_host: Arc::from("h"),
            },
            calls: vec![(Request::ListGroups(Default::default()), slot(1))],
        };
        assert_eq!(batch.take_calls().len(), 1);
        drop(batch);
        assert!(rx.try_recv().is_err());
    }
}
