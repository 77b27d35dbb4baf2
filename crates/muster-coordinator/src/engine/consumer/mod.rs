//! The consumer protocol's group engine (protocol-v1 §7, Kafka 4's KIP-848), beside the classic
//! one: the server computes each member's target assignment and every member reconciles toward
//! it on its own heartbeats, with no global barrier. A group speaks it while it holds a
//! [`ConsumerPart`](group::ConsumerPart) (`Group::consumer`); its group epoch is the group's
//! generation counter, so no epoch is reused even across a change of protocol. It answers in
//! the same [`Effects`] (`../effects.rs`) as the classic engine, so one group actor carries out
//! both; offsets, retention, deletion and record writes are the group's, shared.
//!
//! Each rule in a file named after it:
//!
//! | rule (protocol-v1 §7; Kafka 4's class)                               | file           |
//! |----------------------------------------------------------------------|----------------|
//! | What the group holds: members, epochs, who holds which partition     | `group.rs`     |
//! | ConsumerGroupHeartbeat: validation, join, fencing, static takeover   | `heartbeat.rs` |
//! | Leave (-1, static -2), removal                                       | `leave.rs`     |
//! | Group epoch, assignor choice, target assignment, regex subscriptions | `target.rs`    |
//! | Computing a large target off the group's turn                        | `assign.rs`    |
//! | Reconciling a member toward its target (`CurrentAssignmentBuilder`)  | `reconcile.rs` |
//! | Session and rebalance timeouts                                       | `expiry.rs`    |
//! | Topic changes                                                        | `topics.rs`    |
//! | ConsumerGroupDescribe, DescribeGroups of a consumer group            | `describe.rs`  |
//! | Offset commits of consumer members (member epochs)                   | `offsets.rs`   |
//! | Migration: online upgrade of a classic group, downgrade              | `migrate.rs`   |
//! | Classic members inside a consumer group                              | `classic.rs`   |
//! | Dry-run rebalance (GroupSimulate)                                    | `simulate.rs`  |
//! | Journal entries per epoch bump; GroupDiagnosis while reconciling      | `journal.rs`   |
//! | A heartbeat held until a partition its member waits for is released  | `wait.rs`      |
//! | Durability (the record's consumer part)                              | `persist.rs`   |
//! | The `uniform` server assignor (`UniformAssignor`)                    | `uniform.rs`   |
//! | The `range` server assignor (`RangeAssignor`)                        | `range.rs`     |
//!
//! [`Effects`]: super::Effects

mod assign;
mod classic;
mod describe;
mod expiry;
pub(super) mod group;
mod heartbeat;
mod journal;
mod leave;
mod migrate;
mod offsets;
mod persist;
mod range;
mod reconcile;
mod simulate;
mod target;
#[cfg(test)]
mod tests;
mod topics;
mod uniform;
mod wait;

pub use super::effects::{AssignmentJob, ComputedTarget};
pub(super) use group::ConsumerPart;
pub use heartbeat::MAX_MEMBER_ID_BYTES;
pub use range::assign_range;
pub use reconcile::{MemberAssignment, MemberState, Partitions, Reconcile};
pub use target::ASSIGNORS;
pub use uniform::{assign_uniform, AssignmentSpec, Target};
pub(super) use wait::Waiter;
