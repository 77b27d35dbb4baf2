//! The actor shell around the engine. A [`Supervisor`] owns the registry of groups, the topic
//! catalog and the timer queue; each consumer group is one [`GroupActor`] (spread over
//! arbiters) that handles its messages one at a time by handing them to its
//! [`crate::engine::Group`]. Replies travel back to the connection through a [`ReplyTo`].

mod group;
mod messages;
mod reply;
mod supervisor;
mod timers;

pub use group::GroupActor;
pub use messages::{AdminCall, GroupAddr, GroupBatch, GroupCall, Route, Shutdown};
pub use reply::{Outgoing, ReplyTo, Slot, ToWriter, WriterTx, NO_REQUEST};
pub use supervisor::{Placement, SingleNode, Supervisor, SupervisorOptions};
pub use timers::DeadlineQueue;
