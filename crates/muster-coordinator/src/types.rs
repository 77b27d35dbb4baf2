//! Small types shared by the engine, the storage and the actors, so that neither of the first
//! two has to import the other for them: the coordinator's time unit and the group life-cycle
//! states.

/// Milliseconds on the coordinator's clock (monotonic while the process runs).
pub type Millis = u64;

/// The life-cycle states of protocol §5 (shared with clients through the protocol crate).
pub use muster_protocol::GroupState;
