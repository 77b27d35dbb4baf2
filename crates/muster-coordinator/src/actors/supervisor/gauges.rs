//! The gauges the supervisor keeps: groups per state and members in all groups, moved as
//! groups are registered, report a change of state or size ([`StatusChanged`]), or are
//! forgotten. The registry entry keeps each group's last report, so a move is always from
//! what was counted.

use actix::prelude::*;

use super::Supervisor;
use crate::actors::messages::StatusChanged;
use crate::engine::GroupState;

impl Supervisor {
    /// Moves one group between the gauges' buckets (`None`: not counted).
    pub(super) fn count(&mut self, from: Option<(GroupState, u32)>, to: Option<(GroupState, u32)>) {
        if let Some((state, members)) = from {
            let n = self.per_state.entry(state).or_default();
            *n = n.saturating_sub(1);
            crate::metrics::groups_in_state(state, *n);
            self.members_total = self.members_total.saturating_sub(u64::from(members));
        }
        if let Some((state, members)) = to {
            let n = self.per_state.entry(state).or_default();
            *n += 1;
            crate::metrics::groups_in_state(state, *n);
            self.members_total += u64::from(members);
        }
        crate::metrics::members(self.members_total);
    }

    /// Counts `groups` more groups in `state` with no member, parked: a startup's groups
    /// loaded parked, with each gauge set once rather than three times per group (a
    /// million groups would otherwise cost seconds of gauge updates).
    pub(super) fn count_parked_loaded(&mut self, state: GroupState, groups: usize) {
        let n = self.per_state.entry(state).or_default();
        *n += groups;
        crate::metrics::groups_in_state(state, *n);
        crate::metrics::members(self.members_total);
        self.parked += groups;
        crate::metrics::groups_parked(self.parked);
    }
}

impl Handler<StatusChanged> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: StatusChanged, _: &mut Self::Context) {
        let Some(entry) = self.groups.get_mut(msg.key) else {
            return;
        };
        let before = (entry.state, entry.members);
        entry.state = msg.state;
        entry.members = msg.members;
        self.count(Some(before), Some((msg.state, msg.members)));
    }
}
