//! Messages between the connection sessions, the supervisor and the group actors.

use actix::prelude::*;
use muster_protocol::{DescribedGroup, ErrorCode, Request};

use super::group::GroupActor;
use super::reply::ReplyTo;
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

/// Session → supervisor: deliver `call` to its group (creating the group if the request
/// does), and return the group's address for the session to cache.
#[derive(Debug, Message)]
#[rtype(result = "Option<Addr<GroupActor>>")]
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
