//! The consumer protocol's membership state, without I/O or a clock: the member id and epoch,
//! what the member owns, what the server last assigned it, and which fields the next
//! ConsumerGroupHeartbeat carries (Kafka 4's `AbstractMembershipManager` and the
//! `HeartbeatState` of its `ConsumerHeartbeatRequestManager`). The task beside it
//! (`consumer/mod.rs`) feeds it the server's answers and the application's acknowledgements and
//! carries out the [`Step`]s it returns.
//!
//! Reconciliation, one step at a time: partitions the server's assignment no longer holds are
//! revoked first ([`Step::Revoke`]); they count as owned, and are reported so, until the
//! application has let them go ([`ConsumerState::revocation_done`]). New partitions are taken
//! ([`Step::Assign`]) only once the server has acknowledged what the member owns after the
//! revocation, so the coordinator always hears of a release before the member starts on
//! anything new.
//!
//! What a heartbeat carries: the group id, member id, epoch and instance id always; the
//! subscription, server assignor and rebalance timeout only with the full state (joining, and
//! the first heartbeat after any error or coordinator change, as Kafka's client does); the
//! owned partitions with the full state and whenever they changed since the server last
//! acknowledged them. A steady heartbeat therefore copies no partition list.

use std::collections::BTreeSet;

use muster_protocol::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use crate::member::MemberConfig;
use crate::partition::{flatten_partitions, group_partitions, TopicPartition};

/// The epoch a member leaves with (protocol-v1 §7).
pub(super) const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member leaves with temporarily: its assignment is kept for it until its
/// session expires (Kafka's `LEAVE_GROUP_STATIC_MEMBER_EPOCH`).
pub(super) const STATIC_LEAVE_EPOCH: i32 = -2;

/// What one heartbeat carried, to be matched with its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    /// It carried the full state.
    full: bool,
    /// It carried the owned partitions as of this version.
    owned_version: Option<u64>,
}

/// One reconciliation step for the task to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Emit `Revoked` and wait for the application, then call `revocation_done`.
    Revoke(Vec<TopicPartition>),
    /// Emit `Assigned` (possibly empty: the first assignment after a join is announced even
    /// when it holds nothing).
    Assign(Vec<TopicPartition>),
}

pub(super) struct ConsumerState {
    member_id: String,
    /// 0 while joining; the server's epoch for the member afterwards.
    epoch: i32,
    /// Owned and not being revoked.
    owned: BTreeSet<TopicPartition>,
    /// In the application's hands as a `Revoked` not yet dropped; still reported as owned.
    revoking: BTreeSet<TopicPartition>,
    /// The server's latest assignment, not yet reconciled.
    target: Option<BTreeSet<TopicPartition>>,
    /// Bumped whenever `owned ∪ revoking` changes.
    owned_version: u64,
    /// Bumped whenever `owned` changes (what the member's published state shows).
    view_version: u64,
    /// The version the server acknowledged (answered NONE to a heartbeat that carried it);
    /// forgotten after an error, when the server may have lost it.
    reported_version: Option<u64>,
    /// The highest version the server ever acknowledged (kept across errors).
    acknowledged: u64,
    /// The next heartbeat carries the full state.
    full: bool,
    /// An `Assigned` was emitted since the member last joined.
    announced: bool,
}

impl ConsumerState {
    /// A member about to join with `member_id` (chosen by the client, as Kafka 4's are).
    pub(super) fn new(member_id: String) -> Self {
        ConsumerState {
            member_id,
            epoch: 0,
            owned: BTreeSet::new(),
            revoking: BTreeSet::new(),
            target: None,
            owned_version: 0,
            view_version: 0,
            reported_version: None,
            acknowledged: 0,
            full: true,
            announced: false,
        }
    }

    pub(super) fn member_id(&self) -> &str {
        &self.member_id
    }

    pub(super) fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Whether the server has given the member an epoch (it is in the group).
    pub(super) fn joined(&self) -> bool {
        self.epoch > 0
    }

    /// The partitions the application works on and keeps (those being revoked excluded).
    pub(super) fn owned(&self) -> &BTreeSet<TopicPartition> {
        &self.owned
    }

    pub(super) fn view_version(&self) -> u64 {
        self.view_version
    }

    /// Whether the member has something the server should hear now rather than an interval
    /// later: owned partitions it has not acknowledged.
    pub(super) fn has_news(&self) -> bool {
        self.reported_version != Some(self.owned_version)
    }

    /// Whether the member is still moving toward the server's assignment: an assignment not
    /// carried out yet, a revocation in the application's hands, or partitions taken or let go
    /// that the server has not acknowledged yet (Kafka's `ACKNOWLEDGING`).
    pub(super) fn reconciling(&self) -> bool {
        self.target.is_some() || !self.revoking.is_empty() || self.acknowledged < self.owned_version
    }

    /// The next heartbeat (see the module docs for which fields it carries).
    pub(super) fn heartbeat(&self, config: &MemberConfig) -> (ConsumerGroupHeartbeatRequest, Sent) {
        let full = self.full;
        let report = full || self.has_news();
        let request = ConsumerGroupHeartbeatRequest {
            group_id: config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            group_instance_id: config.group_instance_id.clone(),
            rack_id: None,
            rebalance_timeout_ms: if full {
                rebalance_timeout_ms(config)
            } else {
                -1
            },
            subscribed_topics: full.then(|| config.topics.clone()),
            subscribed_topic_regex: None,
            server_assignor: if full {
                config.server_assignor.clone()
            } else {
                None
            },
            owned_partitions: report
                .then(|| group_partitions(self.owned.iter().chain(&self.revoking))),
        };
        let sent = Sent {
            full,
            owned_version: report.then_some(self.owned_version),
        };
        (request, sent)
    }

    /// The heartbeat that leaves the group with `epoch` ([`LEAVE_EPOCH`] or
    /// [`STATIC_LEAVE_EPOCH`]).
    pub(super) fn leave(&self, config: &MemberConfig, epoch: i32) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest {
            group_id: config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: epoch,
            group_instance_id: config.group_instance_id.clone(),
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topics: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            owned_partitions: None,
        }
    }

    /// A NONE answer to the heartbeat `sent`: adopt the epoch (and the member id, should the
    /// server have chosen another) and keep the assignment, if any, for reconciliation.
    pub(super) fn on_member(&mut self, sent: Sent, answer: ConsumerGroupHeartbeatResponse) {
        if !answer.member_id.is_empty() && answer.member_id != self.member_id {
            self.member_id = answer.member_id;
        }
        self.epoch = answer.member_epoch;
        if sent.full {
            self.full = false;
        }
        if let Some(version) = sent.owned_version {
            self.reported_version = Some(version);
            self.acknowledged = self.acknowledged.max(version);
        }
        if let Some(assignment) = answer.assignment {
            self.target = Some(flatten_partitions(&assignment));
        }
    }

    /// Any failed heartbeat (an error code, a lost coordinator, no answer): the next one
    /// carries the full state, since the server may not have seen the last ones.
    pub(super) fn failed(&mut self) {
        self.full = true;
        self.reported_version = None;
    }

    /// The next reconciliation step, if one can be taken now.
    pub(super) fn next_step(&mut self) -> Option<Step> {
        if !self.revoking.is_empty() {
            return None; // One revocation at a time.
        }
        let target = self.target.as_ref()?;
        let revoked: Vec<TopicPartition> = self.owned.difference(target).cloned().collect();
        if !revoked.is_empty() {
            for tp in &revoked {
                self.owned.remove(tp);
            }
            self.view_version += 1;
            // Still reported as owned (`owned ∪ revoking` is unchanged) until let go.
            self.revoking.extend(revoked.iter().cloned());
            return Some(Step::Revoke(revoked));
        }
        if self.has_news() {
            return None; // The server hears of the release before anything new is taken.
        }
        let added: Vec<TopicPartition> = target.difference(&self.owned).cloned().collect();
        self.target = None;
        if added.is_empty() && self.announced {
            return None;
        }
        if !added.is_empty() {
            self.owned.extend(added.iter().cloned());
            self.owned_version += 1;
            self.view_version += 1;
        }
        self.announced = true;
        Some(Step::Assign(added))
    }

    /// The application let the partitions of the last [`Step::Revoke`] go.
    pub(super) fn revocation_done(&mut self) {
        if !self.revoking.is_empty() {
            self.revoking.clear();
            self.owned_version += 1;
        }
    }

    /// Fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): everything owned is lost and the member
    /// rejoins with epoch 0 and the same member id. Returns the lost partitions (call it once
    /// any revocation in progress is done).
    pub(super) fn fence(&mut self) -> Vec<TopicPartition> {
        let lost: Vec<TopicPartition> = std::mem::take(&mut self.owned)
            .into_iter()
            .chain(std::mem::take(&mut self.revoking))
            .collect();
        self.epoch = 0;
        self.target = None;
        self.owned_version += 1;
        self.view_version += 1;
        self.failed();
        self.announced = false;
        lost
    }

    /// A commit found that the member does not own `refused` (PARTITION_NOT_OWNED): those it
    /// still works on are dropped (and reported so by the next heartbeat). Returns them.
    pub(super) fn disown(&mut self, refused: &[TopicPartition]) -> Vec<TopicPartition> {
        let lost: Vec<TopicPartition> = refused
            .iter()
            .filter(|tp| self.owned.contains(*tp))
            .cloned()
            .collect();
        if !lost.is_empty() {
            for tp in &lost {
                self.owned.remove(tp);
            }
            self.owned_version += 1;
            self.view_version += 1;
        }
        lost
    }

    /// Closing or stopping: the partitions the application still works on, which it gives up.
    pub(super) fn give_up(&mut self) -> Vec<TopicPartition> {
        let owned: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
        self.target = None;
        self.owned_version += 1;
        self.view_version += 1;
        owned
    }
}

/// The configured rebalance timeout in milliseconds (validated to fit an `i32`).
fn rebalance_timeout_ms(config: &MemberConfig) -> i32 {
    i32::try_from(config.rebalance_timeout.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::TopicPartitions;
    use std::time::Duration;

    fn config() -> MemberConfig {
        MemberConfig::new("g", ["t"])
            .rebalance_timeout(Duration::from_secs(2))
            .server_assignor("range")
    }

    fn tps(partitions: &[i32]) -> Vec<TopicPartitions> {
        vec![TopicPartitions {
            topic: "t".into(),
            partitions: partitions.to_vec(),
        }]
    }

    fn tp(partitions: &[i32]) -> Vec<TopicPartition> {
        partitions
            .iter()
            .map(|&p| TopicPartition::new("t", p))
            .collect()
    }

    fn answer(epoch: i32, assignment: Option<&[i32]>) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse {
            member_id: "m".into(),
            member_epoch: epoch,
            heartbeat_interval_ms: 100,
            assignment: assignment.map(tps),
            ..Default::default()
        }
    }

    /// Sends a heartbeat and has it answered; returns what it carried.
    fn round(
        state: &mut ConsumerState,
        epoch: i32,
        assignment: Option<&[i32]>,
    ) -> ConsumerGroupHeartbeatRequest {
        let (request, sent) = state.heartbeat(&config());
        state.on_member(sent, answer(epoch, assignment));
        request
    }

    #[test]
    fn the_join_carries_the_full_state_and_steady_heartbeats_carry_nothing_unchanged() {
        let mut state = ConsumerState::new("m".into());
        let join = round(&mut state, 1, Some(&[0, 1]));
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.member_id, "m");
        assert_eq!(join.subscribed_topics, Some(vec!["t".to_owned()]));
        assert_eq!(join.server_assignor.as_deref(), Some("range"));
        assert_eq!(join.rebalance_timeout_ms, 2000);
        assert_eq!(join.owned_partitions, Some(vec![]));
        assert_eq!(state.next_step(), Some(Step::Assign(tp(&[0, 1]))));
        assert!(state.has_news());
        let ack = round(&mut state, 1, None);
        assert_eq!(ack.member_epoch, 1);
        assert_eq!(ack.owned_partitions, Some(tps(&[0, 1])));
        assert_eq!((ack.subscribed_topics, ack.server_assignor), (None, None));
        assert_eq!(ack.rebalance_timeout_ms, -1);
        assert_eq!(state.next_step(), None);
        let steady = round(&mut state, 1, None);
        assert_eq!(steady.owned_partitions, None);
        assert!(!state.has_news() && !state.reconciling());
    }

    #[test]
    fn a_revocation_is_reported_before_new_partitions_are_taken() {
        let mut state = ConsumerState::new("m".into());
        round(&mut state, 1, Some(&[0, 1]));
        state.next_step();
        round(&mut state, 1, None);
        // The server moves 1 away and gives 2: revoke first.
        round(&mut state, 2, Some(&[0, 2]));
        assert_eq!(state.next_step(), Some(Step::Revoke(tp(&[1]))));
        assert_eq!(state.owned().iter().cloned().collect::<Vec<_>>(), tp(&[0]));
        assert_eq!(state.next_step(), None, "waits for the application");
        // A heartbeat meanwhile still reports nothing new (1 is still worked on).
        assert_eq!(round(&mut state, 2, None).owned_partitions, None);
        state.revocation_done();
        assert!(state.has_news());
        assert_eq!(
            state.next_step(),
            None,
            "waits for the server to hear of it"
        );
        let report = round(&mut state, 2, None);
        assert_eq!(report.owned_partitions, Some(tps(&[0])));
        assert_eq!(state.next_step(), Some(Step::Assign(tp(&[2]))));
        assert_eq!(
            round(&mut state, 2, None).owned_partitions,
            Some(tps(&[0, 2]))
        );
        assert_eq!(state.next_step(), None);
    }

    #[test]
    fn an_error_resends_the_full_state_and_owned_changes_wait_for_an_answer() {
        let mut state = ConsumerState::new("m".into());
        round(&mut state, 1, Some(&[0]));
        state.next_step();
        let (request, sent) = state.heartbeat(&config());
        assert_eq!(request.owned_partitions, Some(tps(&[0])));
        state.failed(); // No answer to it.
        let (again, _) = state.heartbeat(&config());
        assert_eq!(again.member_epoch, 1, "same epoch");
        assert_eq!(again.subscribed_topics, Some(vec!["t".to_owned()]));
        assert_eq!(again.owned_partitions, Some(tps(&[0])));
        // A late acknowledgement of an older owned set does not count for a newer one.
        state.on_member(sent, answer(1, Some(&[])));
        assert_eq!(state.next_step(), Some(Step::Revoke(tp(&[0]))));
        state.revocation_done();
        state.on_member(sent, answer(1, None));
        assert!(state.has_news());
    }

    #[test]
    fn fencing_loses_everything_and_rejoins_with_epoch_zero_and_the_same_id() {
        let mut state = ConsumerState::new("m".into());
        round(&mut state, 3, Some(&[0, 1]));
        state.next_step();
        round(&mut state, 3, None);
        assert_eq!(state.fence(), tp(&[0, 1]));
        let (rejoin, _) = state.heartbeat(&config());
        assert_eq!((rejoin.member_id.as_str(), rejoin.member_epoch), ("m", 0));
        assert_eq!(rejoin.owned_partitions, Some(vec![]));
        assert_eq!(rejoin.subscribed_topics, Some(vec!["t".to_owned()]));
        // An empty first assignment after a join is announced, once.
        round(&mut state, 4, Some(&[]));
        assert_eq!(state.next_step(), Some(Step::Assign(vec![])));
        round(&mut state, 4, Some(&[]));
        assert_eq!(state.next_step(), None);
    }

    #[test]
    fn partitions_not_owned_are_dropped_and_reported() {
        let mut state = ConsumerState::new("m".into());
        round(&mut state, 2, Some(&[0, 1]));
        state.next_step();
        round(&mut state, 2, None);
        assert!(!state.has_news());
        assert_eq!(state.disown(&tp(&[1, 5])), tp(&[1]), "only what it owned");
        assert_eq!(state.owned().iter().cloned().collect::<Vec<_>>(), tp(&[0]));
        assert!(state.has_news());
        assert_eq!(round(&mut state, 2, None).owned_partitions, Some(tps(&[0])));
        assert_eq!(state.disown(&tp(&[1])), vec![], "nothing left to drop");
        assert!(!state.has_news());
    }

    #[test]
    fn leaving_carries_only_the_identity() {
        let state = ConsumerState::new("m".into());
        let config = config().group_instance_id("i");
        let leave = state.leave(&config, STATIC_LEAVE_EPOCH);
        assert_eq!(leave.member_epoch, -2);
        assert_eq!(leave.group_instance_id.as_deref(), Some("i"));
        assert_eq!(leave.owned_partitions, None);
        assert_eq!(leave.rebalance_timeout_ms, -1);
    }
}
