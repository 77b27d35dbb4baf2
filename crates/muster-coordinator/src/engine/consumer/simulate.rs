//! Dry-run rebalance (GroupSimulate, docs/protocol.md): what the group's assignor would move if
//! members left, members joined, or topics grew — per member, partitions kept, lost and gained,
//! and how many partitions would stop. Runs the assignor on a copy of the inputs; nothing in
//! the group changes.
