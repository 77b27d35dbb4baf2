//! The consumer protocol's group engine (protocol-v1 §7, Kafka 4's KIP-848), beside the classic
//! one: the server computes each member's target assignment and every member reconciles toward
//! it on its own heartbeats, with no global barrier. It answers in the same [`Effects`]
//! (`../effects.rs`) as the classic engine, so one group actor carries out both.
//!
//! Built rule by rule, each in a file named after it:
//!
//! | rule (protocol-v1 §7; Kafka 4's class)                        | file           |
//! |---------------------------------------------------------------|----------------|
//! | Reconciling a member toward its target (`CurrentAssignmentBuilder`) | `reconcile.rs` |
//! | The `uniform` server assignor (`UniformAssignor`)              | `uniform.rs`   |
//! | The `range` server assignor (`RangeAssignor`)                  | `range.rs`     |
//!
//! [`Effects`]: super::Effects

mod range;
mod reconcile;
#[cfg(test)]
mod tests;
mod uniform;

pub use range::assign_range;
pub use reconcile::{MemberAssignment, MemberState, Partitions, Reconcile};
pub use uniform::{assign_uniform, AssignmentSpec, Target};
