//! The group states of protocol §6.1 (and the consumer protocol's `Assigning` and
//! `Reconciling`, protocol-v1 §7), whose names travel as `state` strings in DescribeGroups,
//! ListGroups and the ListGroups filter. Shared by the server's engine and every client.

use std::fmt;
use std::str::FromStr;

/// A consumer group's life-cycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
    /// A consumer-protocol group (protocol-v1 §7) whose target assignment is behind its group
    /// epoch.
    Assigning,
    /// A consumer-protocol group with a member not yet at the target assignment.
    Reconciling,
}

impl GroupState {
    /// Every state, in the order operators see them listed.
    pub const ALL: [GroupState; 7] = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Assigning,
        GroupState::Reconciling,
        GroupState::Stable,
        GroupState::Dead,
    ];

    /// The wire name (`state` strings of protocol §3), e.g. `"PreparingRebalance"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
        }
    }

    /// Parses a wire name (exact spelling); `None` for anything else.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no group state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown group state {0:?}")]
pub struct UnknownGroupState(pub String);

impl FromStr for GroupState {
    type Err = UnknownGroupState;

    fn from_str(s: &str) -> Result<Self, UnknownGroupState> {
        GroupState::parse(s).ok_or_else(|| UnknownGroupState(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_pinned() {
        let names: Vec<&str> = GroupState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "Empty",
                "PreparingRebalance",
                "CompletingRebalance",
                "Assigning",
                "Reconciling",
                "Stable",
                "Dead"
            ]
        );
        for state in GroupState::ALL {
            assert_eq!(state.as_str().parse::<GroupState>(), Ok(state));
        }
        assert!("stable".parse::<GroupState>().is_err());
        assert!("".parse::<GroupState>().is_err());
        assert_eq!("Assigning".parse::<GroupState>(), Ok(GroupState::Assigning));
        assert_eq!(
            "Reconciling".parse::<GroupState>(),
            Ok(GroupState::Reconciling)
        );
    }

    /// `ALL` lists every variant exactly once: the `match` has no wildcard, so a new state does
    /// not compile until it is counted here (and then `ALL`'s length must follow).
    #[test]
    fn all_lists_every_state_once() {
        let index = |state: GroupState| match state {
            GroupState::Empty => 0,
            GroupState::PreparingRebalance => 1,
            GroupState::CompletingRebalance => 2,
            GroupState::Stable => 3,
            GroupState::Dead => 4,
            GroupState::Assigning => 5,
            GroupState::Reconciling => 6,
        };
        let mut seen = [false; 7];
        for state in GroupState::ALL {
            assert!(!seen[index(state)], "{state} listed twice");
            seen[index(state)] = true;
        }
        assert!(seen.iter().all(|&s| s), "{seen:?}");
        // Display is the wire name.
        assert_eq!(GroupState::Reconciling.to_string(), "Reconciling");
    }
}
