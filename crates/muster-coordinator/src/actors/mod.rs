//! The actor shell around the engine. A [`Supervisor`] owns the registry of groups, the topic
//! catalog and the timer queue; each consumer group is one [`GroupActor`] (spread over
//! arbiters) that handles its messages one at a time by handing them to its
//! [`crate::engine::Group`] — or, idle with nothing but data left, is parked: kept by the
//! supervisor as data with no actor until something needs one (`group/park.rs`). Replies travel back to the connection through a [`ReplyTo`] or a
//! batch's [`ReplySink`]; the connection owns what is behind the sink.
//!
//! Module dependencies run one way: `supervisor` → `group` → `messages` → `reply`, plus
//! `supervisor` → `timers`, `supervisor` → `admin_access`, `supervisor` → `insight` →
//! `group`, `supervisor` → `registry` → `group`, `overview` → `supervisor` (the dashboard's
//! list: its handler lives beside its paging), and direct uses of `reply`. No module imports
//! one that depends on
//! it: the supervisor holds group actors' `Addr`s (it creates them), a group holds the
//! supervisor as `Recipient`s, a session holds a group as a [`GroupLink`].

mod admin_access;
mod admin_limits;
mod group;
mod insight;
mod ledger;
mod messages;
mod overview;
mod placement;
mod registry;
mod reply;
mod supervisor;
mod timers;

pub use group::GroupActor;
pub use ledger::{Ledger, PendingBudget};
pub use messages::GroupSummary;
pub use messages::{
    AdminCall, AdoptGroups, AdoptShard, CatalogChanged, Drain, GroupBatch, GroupCall, GroupInbox,
    GroupLink, ReleaseShard, Route, Shutdown,
};
pub use overview::{ListOverview, OverviewPage, OverviewQuery, MAX_OVERVIEW_PAGE};
pub use reply::{Answer, Replies, ReplySink, ReplyTo, Ticket};
pub use supervisor::{Placement, SingleNode, Supervisor, SupervisorOptions};
pub use timers::DeadlineQueue;
